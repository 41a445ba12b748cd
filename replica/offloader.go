package replica

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"
	"gocloud.dev/blob"

	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/internal/upload"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/segment"
	"github.com/diskless-go/diskless/wal"
)

// Registrar is what an Offloader needs of the coordinator: the
// Coordinator and Shards implement it.
type Registrar interface {
	Source
	RegisterRemoteSegment(ctx context.Context, seg coordinator.RemoteSegment) error
	// AbortedTxns returns the aborted transactions overlapping offsets
	// from to to: the offloader writes those whose ABORT marker is in a
	// segment into its .txnindex.
	AbortedTxns(ctx context.Context, tp wal.TopicPartition, from, to int64) ([]coordinator.AbortedTxn, error)
}

var _ Registrar = (*coordinator.Coordinator)(nil)

// OffloaderOptions configure an Offloader. The zero value holds the
// defaults; nil means the zero value.
type OffloaderOptions struct {
	// Prefix goes before tiered/ in every key: the coordinator's
	// Options.Prefix (it checks the keys it registers).
	Prefix string
	// Uploader is the broker ID recorded as each segment's uploader.
	Uploader int32
	// Interval is how often each partition is offloaded in the
	// background, by the Materializer's workers (an Interval after its
	// last pass ended, on the Materializer's Clock); 0 means 1 s,
	// negative never (call Offload).
	Interval time.Duration
	// Logger logs; nil means none.
	Logger *zap.Logger
}

// Offloader copies closed local segments to the bucket as tiered segments
// (KIP-405's shape, KIP-1164's purpose): for each partition assigned to
// it, it materialises the partition from the diskless start offset with
// the topic's segment.bytes and segment.ms (through a Materializer),
// uploads each segment once it is closed — .log, .index, .timeindex,
// .txnindex if any, a producer snapshot, a leader-epoch checkpoint and a
// RemoteLogSegmentMetadata record, under <Prefix>tiered/ — and registers
// it with the coordinator, which releases the diskless batches below it
// (their WAL objects can then be deleted) and serves reads below the
// diskless start offset from it.
//
// One Offloader per partition at a time: the caller says which (the
// coordinator refuses a segment that does not start at or before the
// diskless start offset, so two would waste uploads, not corrupt data).
// Every upload attempt has a fresh segment ID, so uploads are idempotent:
// a segment uploaded but never registered (a crash, a refusal) is garbage
// that the orphan collector deletes. Compacted topics are compacted (the
// segment cleaner, on the local log) before their segments are uploaded;
// a tiered segment is not compacted again.
type Offloader struct {
	reg    Registrar
	m      *Materializer
	bucket *blob.Bucket
	opts   OffloaderOptions

	mu     sync.Mutex
	parts  map[wal.TopicPartition]*offloadPart
	closed bool

	stats struct {
		segments, bytes, refused, failures atomic.Int64
	}
}

// offloadPart is one assigned partition.
type offloadPart struct {
	tp   wal.TopicPartition
	cfg  coordinator.TopicConfig
	mu   sync.Mutex // one pass at a time
	task *task      // its background passes; nil if Interval < 0
}

// NewOffloader returns an Offloader that materialises through m (which it
// does not close) and uploads to bucket.
func NewOffloader(reg Registrar, m *Materializer, bucket *blob.Bucket, opts *OffloaderOptions) (*Offloader, error) {
	var o OffloaderOptions
	if opts != nil {
		o = *opts
	}
	if o.Interval == 0 {
		o.Interval = time.Second
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if reg == nil || m == nil || bucket == nil {
		return nil, errors.New("replica: NewOffloader needs a Registrar, a Materializer and a bucket")
	}
	return &Offloader{reg: reg, m: m, bucket: bucket, opts: o, parts: map[wal.TopicPartition]*offloadPart{}}, nil
}

// LogOptions are the local log options of a partition of a topic with
// cfg that an Offloader materialises: the topic's segment.bytes,
// segment.ms and cleanup policy over base.
func LogOptions(base segment.LogOptions, cfg coordinator.TopicConfig) segment.LogOptions {
	o := base
	if cfg.SegmentBytes > 0 {
		o.SegmentBytes = int(min(cfg.SegmentBytes, 1<<31-1))
	}
	if cfg.SegmentTime > 0 {
		o.SegmentTime = cfg.SegmentTime
	}
	switch {
	case cfg.Compact && cfg.Delete:
		o.CleanupPolicy = segment.CleanupCompactDelete
	case cfg.Compact:
		o.CleanupPolicy = segment.CleanupCompact
	default:
		o.CleanupPolicy = segment.CleanupDelete
	}
	return o
}

// Assign makes this Offloader the one of tp, a partition of a topic with
// cfg: the Materializer follows it from its diskless start offset, and
// (unless Interval is negative) its closed segments are offloaded every
// Interval, by the Materializer's workers. Assigning a partition twice
// with the same cfg changes nothing; with another it is an error
// (ErrConflictingOptions), and the partition keeps the first.
func (o *Offloader) Assign(ctx context.Context, tp wal.TopicPartition, cfg coordinator.TopicConfig) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return ErrClosed
	}
	if old, ok := o.parts[tp]; ok {
		if old.cfg != cfg {
			return fmt.Errorf("%w: %s was assigned with topic config %+v, now %+v", ErrConflictingOptions, tp, old.cfg, cfg)
		}
		return nil
	}
	start := StartDiskless
	logOpts := LogOptions(o.m.opts.Log, cfg)
	if err := o.m.Add(ctx, tp, &PartitionOptions{Start: &start, Log: &logOpts}); err != nil {
		return err
	}
	p := &offloadPart{tp: tp, cfg: cfg}
	o.parts[tp] = p
	if o.opts.Interval >= 0 {
		p.task = o.m.sched.add("offload "+tp.String(), o.opts.Interval, o.opts.Interval, func(ctx context.Context) {
			if _, err := o.offload(ctx, p); err != nil && ctx.Err() == nil {
				o.opts.Logger.Warn("replica: offloading", zap.Stringer("partition", tp), zap.Error(err))
			}
		})
	}
	return nil
}

// Unassign stops offloading tp and stops materialising it.
func (o *Offloader) Unassign(tp wal.TopicPartition) error {
	p, ok := takePart(&o.mu, &o.parts, tp)
	if !ok {
		return nil
	}
	o.m.sched.remove(p.task)
	return o.m.Remove(tp)
}

// OffloadRun is what one pass over a partition did.
type OffloadRun struct {
	// Segments counts the segments uploaded and registered, Bytes their
	// .log bytes.
	Segments int
	Bytes    int64
	// DisklessStart is the partition's diskless start offset after the
	// pass.
	DisklessStart int64
}

// Offload runs one pass over tp now: the Materializer catches up, a
// compacted topic's closed segments are cleaned, and every closed segment
// from the diskless start offset on is uploaded and registered.
func (o *Offloader) Offload(ctx context.Context, tp wal.TopicPartition) (OffloadRun, error) {
	o.mu.Lock()
	p, ok := o.parts[tp]
	closed := o.closed
	o.mu.Unlock()
	if closed {
		return OffloadRun{}, ErrClosed
	}
	if !ok {
		return OffloadRun{}, fmt.Errorf("%w: %s is not assigned to the offloader", ErrNotMaterialized, tp)
	}
	return o.offload(ctx, p)
}

func (o *Offloader) offload(ctx context.Context, p *offloadPart) (OffloadRun, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var run OffloadRun
	if _, err := o.m.Sync(ctx, p.tp); err != nil {
		return run, err
	}
	log, err := o.m.Log(p.tp)
	if err != nil {
		return run, err
	}
	if p.cfg.Compact {
		if _, err := log.Compact(ctx); err != nil {
			return run, err
		}
	}
	st, err := o.m.state(ctx, p.tp)
	if err != nil {
		return run, err
	}
	run.DisklessStart = st.DisklessStart
	segs := log.Segments()
	for i := 0; i+1 < len(segs); i++ {
		s, next := segs[i], segs[i+1]
		end := next.BaseOffset - 1
		if end < run.DisklessStart {
			continue // offloaded already
		}
		if s.BaseOffset > run.DisklessStart {
			// The local log does not hold the diskless start offset: the
			// Materializer's next catch-up starts it there again.
			return run, fmt.Errorf("replica: %s: the local log starts at %d, after the diskless start offset %d", p.tp, s.BaseOffset, run.DisklessStart)
		}
		if end >= st.HighWatermark {
			break // cannot happen: the local log holds committed batches only
		}
		size, err := o.upload(ctx, p.tp, log, s, end)
		if err != nil {
			o.stats.failures.Add(1)
			return run, err
		}
		run.Segments++
		run.Bytes += size
		run.DisklessStart = end + 1
	}
	return run, nil
}

// upload uploads the closed segment s (offsets up to end) of log and
// registers it.
func (o *Offloader) upload(ctx context.Context, tp wal.TopicPartition, log *segment.Log, s segment.SegmentInfo, end int64) (int64, error) {
	files, err := log.SegmentFiles(ctx, s.BaseOffset)
	if err != nil {
		return 0, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return 0, fmt.Errorf("replica: %w", err)
	}
	if len(files.TxnIndex) == 0 {
		// A Log writes no .txnindex: the coordinator's aborted index has
		// what Kafka's would hold for the segment.
		aborted, err := o.reg.AbortedTxns(ctx, tp, s.BaseOffset, end)
		if err != nil {
			return 0, err
		}
		files.TxnIndex = txnIndexOf(aborted, s.BaseOffset, end)
	}
	key := coordinator.RemoteSegmentKey(o.opts.Prefix, tp, s.BaseOffset, id)
	epochs := segment.LeaderEpochsOfBatches(files.Log)
	if len(epochs) == 0 {
		// No batch left (a compacted segment can be empty): the epoch
		// diskless batches carry, from the segment's start.
		epochs = []segment.EpochEntry{{Epoch: leaderEpoch, StartOffset: s.BaseOffset}}
	}
	now := o.m.opts.Clock.Now().UnixMilli()
	meta := segment.RemoteLogSegmentMetadata{
		TopicID: tp.TopicID, Partition: tp.Partition, SegmentID: id,
		StartOffset: s.BaseOffset, EndOffset: end, BrokerID: o.opts.Uploader,
		MaxTimestampMs: s.LargestTimestamp, EventTimestampMs: now,
		SegmentLeaderEpochs: epochs, SegmentSizeInBytes: int32(len(files.Log)),
		State: segment.CopySegmentFinished,
	}
	metaBytes, err := meta.Marshal()
	if err != nil {
		return 0, err
	}
	uploads := []struct {
		ext  string
		data []byte
	}{
		{".log", files.Log},
		{".index", files.Index},
		{".timeindex", files.TimeIndex},
		{".txnindex", files.TxnIndex},
		{".snapshot", segment.AppendProducerSnapshot(nil, segment.ProducerSnapshotFromBatches(files.Log))},
		{".leader_epoch_checkpoint", segment.AppendLeaderEpochCheckpoint(nil, epochs)},
		{".metadata", metaBytes},
	}
	var wg sync.WaitGroup
	errs := make([]error, len(uploads))
	for i, u := range uploads {
		if u.ext == ".txnindex" && len(u.data) == 0 {
			continue
		}
		wg.Go(func() {
			errs[i] = upload.Put(ctx, o.bucket, key+u.ext, u.data, nil)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, fmt.Errorf("replica: uploading %s: %w", key, err)
	}
	seg := coordinator.RemoteSegment{
		ID: id, TopicPartition: tp, Key: key, BaseOffset: s.BaseOffset, EndOffset: end,
		MaxTimestamp: s.LargestTimestamp, Size: int64(len(files.Log)),
		IndexSize: int64(len(files.Index)), TimeIndexSize: int64(len(files.TimeIndex)), TxnIndexSize: int64(len(files.TxnIndex)),
		Uploader: o.opts.Uploader,
	}
	if err := o.reg.RegisterRemoteSegment(ctx, seg); err != nil {
		switch kafkaerr.CodeOf(err) {
		case kafkaerr.OffsetOutOfRange, kafkaerr.InvalidRequest, kafkaerr.UnknownTopicOrPartition:
			// Refused for good (the partition moved on meanwhile): the
			// files are garbage now rather than at the orphan collector's
			// next run.
			o.stats.refused.Add(1)
			for _, u := range uploads {
				if err := o.bucket.Delete(ctx, key+u.ext); err != nil {
					o.opts.Logger.Debug("replica: deleting a refused segment's file", zap.String("key", key+u.ext), zap.Error(err))
				}
			}
		}
		return 0, fmt.Errorf("replica: registering %s: %w", key, err)
	}
	o.stats.segments.Add(1)
	o.stats.bytes.Add(int64(len(files.Log)))
	o.opts.Logger.Info("replica: offloaded a segment", zap.Stringer("partition", tp), zap.Int64("base", s.BaseOffset), zap.Int64("end", end), zap.Int("bytes", len(files.Log)))
	return int64(len(files.Log)), nil
}

// OffloaderStats are an Offloader's counters.
type OffloaderStats struct {
	// Segments and Bytes count the segments registered and their .log
	// bytes; Refused the segments the coordinator refused (deleted at
	// once); Failures the passes that stopped on an error.
	Segments, Bytes, Refused, Failures int64
}

// Stats returns the counters.
func (o *Offloader) Stats() OffloaderStats {
	return OffloaderStats{Segments: o.stats.segments.Load(), Bytes: o.stats.bytes.Load(), Refused: o.stats.refused.Load(), Failures: o.stats.failures.Load()}
}

// Close stops every partition's offloading (their materialisation goes on
// until the Materializer is closed). It is safe to call twice.
func (o *Offloader) Close() error {
	parts, _ := closeParts(&o.mu, &o.closed, &o.parts)
	for _, p := range parts {
		o.m.sched.remove(p.task)
	}
	return nil
}

// txnIndexOf encodes a .txnindex (docs/formats.md, "Transaction index") of the aborted
// transactions whose ABORT marker is at base to end, in marker order:
// per entry, version 0 (int16), producer ID, first offset, last offset
// (the marker's) and last stable offset (int64s), big-endian.
func txnIndexOf(aborted []coordinator.AbortedTxn, base, end int64) []byte {
	slices.SortFunc(aborted, func(a, b coordinator.AbortedTxn) int { return cmp.Compare(a.LastOffset, b.LastOffset) })
	var out []byte
	for _, a := range aborted {
		if a.LastOffset < base || a.LastOffset > end {
			continue
		}
		out = binary.BigEndian.AppendUint16(out, 0)
		for _, v := range []int64{a.ProducerID, a.FirstOffset, a.LastOffset, a.LastStable} {
			out = binary.BigEndian.AppendUint64(out, uint64(v))
		}
	}
	return out
}
