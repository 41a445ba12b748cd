package replica

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"
	"gocloud.dev/blob"

	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/segment"
	"github.com/diskless-go/diskless/wal"
)

// Compaction of diskless partitions: one pass over one partition, run by
// the caller.
//
// CompactPartition compacts a partition's diskless batches as Kafka's log
// cleaner would: it reads them (from the diskless start offset to the
// high watermark), 16 MiB at a time, appends them with their offsets to
// a temporary segment.Log in CompactOptions.TempDir, closes its active
// segment, and runs segment's cleaner over it with the topic's settings,
// so what it keeps is what the classic cleaner keeps, byte for byte. The
// result is streamed from it (8 MiB at a time: a pass's memory is
// bounded whatever the partition holds; the disk it takes is the
// partition's size) into a new object in the WAL format (not a tiered
// segment: the range stays diskless, its reads go through the
// coordinator, the cache and FindBatches as every other batch's, and
// offload tiers it later as it would the original),
// and the partition's shard replaces the range with it in one record
// (coordinator.Compact): a reader sees the old batches or the compacted
// ones. If the range changed meanwhile (a produce only appends past it;
// a trim, an offload or another compaction changes it), the replacement
// is refused and the new object deleted; if the process dies between the
// upload and the commit, the orphan collector deletes it.

// Compacter is what CompactPartition needs of the coordinator.
type Compacter interface {
	Source
	Compact(ctx context.Context, req coordinator.CompactRequest) error
}

var _ Compacter = (*coordinator.Coordinator)(nil)

// CompactOptions configure CompactPartition. The zero value holds Kafka's
// defaults; nil means the zero value.
type CompactOptions struct {
	// Prefix goes before wal/ in the new object's key (the coordinator's
	// Options.Prefix); Uploader is the broker ID recorded for it.
	Prefix   string
	Uploader int32
	// The cleaner's settings: Kafka's delete.retention.ms,
	// min.compaction.lag.ms, max.compaction.lag.ms and
	// min.cleanable.dirty.ratio (see segment.LogOptions); zeros are
	// Kafka's defaults.
	DeleteRetention        time.Duration
	MinCompactionLag       time.Duration
	MaxCompactionLag       time.Duration
	MinCleanableDirtyRatio float64
	// TempDir holds the temporary log; "" is os.TempDir.
	TempDir string
	// Clock is the time the cleaner's horizons and lags use; nil is
	// time.Now.
	Clock func() time.Time
	// Logger logs; nil means none.
	Logger *zap.Logger
}

// CompactStats say what a CompactPartition did.
type CompactStats struct {
	// Cleaned is false when there was nothing to clean (the cleaner's
	// rules), or nothing diskless.
	Cleaned bool
	// From and To are the offsets of the range replaced.
	From, To int64
	// DirtyRatio is the cleaner's dirty ratio of the range.
	DirtyRatio float64
	// BytesRead and BytesWritten are the batches' bytes before and after;
	// Key is the compacted object's.
	BytesRead, BytesWritten int64
	Key                     string
}

// CompactPartition compacts tp's diskless batches once (see above).
// It returns coordinator.ErrRangeChanged when the range
// changed while it ran: try again later.
func CompactPartition(ctx context.Context, src Compacter, objects ObjectReader, bucket *blob.Bucket, tp wal.TopicPartition, opts *CompactOptions) (CompactStats, error) {
	var o CompactOptions
	if opts != nil {
		o = *opts
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	var st CompactStats
	locs, from, to, cleanedTo, err := diskless(ctx, src, tp)
	if err != nil || len(locs) == 0 {
		return st, err
	}
	st.From, st.To = from, to
	dir, err := os.MkdirTemp(o.TempDir, "diskless-compact-")
	if err != nil {
		return st, fmt.Errorf("replica: compacting: %w", err)
	}
	defer os.RemoveAll(dir)
	log, err := openCleanLog(ctx, dir, max(cleanedTo, from), &o)
	if err != nil {
		return st, err
	}
	defer log.Close()
	if st.BytesRead, err = fillCleanLog(ctx, log, objects, locs, max(cleanedTo, from)); err != nil {
		return st, err
	}
	res, err := log.Compact(ctx)
	if err != nil || !res.Cleaned {
		st.DirtyRatio = res.DirtyRatio
		return st, err
	}
	st.Cleaned, st.DirtyRatio = true, res.DirtyRatio

	// The key is named once the cleaning is done: the commit deadline
	// counts from here (coordinator.Options.CommitDeadline).
	req := coordinator.CompactRequest{TopicPartition: tp, From: from, To: to, Fingerprint: coordinator.RangeFingerprint(locs), Uploader: o.Uploader}
	req.ObjectKey = wal.NewObjectKey(o.Prefix, o.Clock())
	if req.Size, req.Runs, err = uploadCleaned(ctx, bucket, req.ObjectKey, log); err != nil {
		return st, err
	}
	if req.Size > 0 {
		st.Key, st.BytesWritten = req.ObjectKey, req.Size-1 // the batches: all but the version byte
	}
	// Else every record of the range was removed: the range is emptied,
	// with an object of no runs (the record needs a key; none is
	// uploaded).
	if err := src.Compact(ctx, req); err != nil {
		if req.Size > 0 && refusedBeforeLogged(err) {
			// Not committed: delete it now rather than leave it to the
			// orphan collector (if this fails, it will). Any other error
			// may follow a record that reached the log (its answer lost,
			// the leader fenced after it landed): the object may serve
			// the range, and only the collector, which asks the shards,
			// may delete it.
			_ = bucket.Delete(context.WithoutCancel(ctx), req.ObjectKey)
		}
		return st, err
	}
	o.Logger.Info("replica: compacted a partition", zap.Stringer("partition", tp), zap.Int64("from", from), zap.Int64("to", to),
		zap.Float64("dirty_ratio", st.DirtyRatio), zap.Int64("bytes_read", st.BytesRead), zap.Int64("bytes_written", st.BytesWritten))
	return st, nil
}

// diskless returns the locations of tp's diskless batches, from the first
// run at or after the diskless start offset to the high watermark, and
// their first and last offsets, and where the partition's dirty part
// starts (coordinator.FindResult.CleanedTo).
func diskless(ctx context.Context, src Source, tp wal.TopicPartition) (locs []coordinator.Location, from, to, cleanedTo int64, err error) {
	first, err := src.FindBatches(ctx, tp, 0, 1)
	if err != nil && kafkaerr.CodeOf(err) != kafkaerr.OffsetOutOfRange {
		return nil, 0, 0, 0, err
	}
	start, hw := first.DisklessStart, first.HighWatermark
	for off := start; off < hw; {
		res, err := src.FindBatches(ctx, tp, off, 8<<20)
		if err != nil {
			return nil, 0, 0, 0, err
		}
		if res.Remote != nil || len(res.Batches) == 0 {
			break
		}
		for _, l := range res.Batches {
			if l.BaseOffset < start || l.LastOffset >= hw {
				continue // straddles the tiered data, or past where this began
			}
			locs = append(locs, l)
		}
		next := res.Batches[len(res.Batches)-1].LastOffset + 1
		if next <= off {
			break
		}
		off = next
	}
	if len(locs) == 0 {
		return nil, 0, 0, 0, nil
	}
	return locs, locs[0].BaseOffset, locs[len(locs)-1].LastOffset, first.CleanedTo, nil
}

// refusedBeforeLogged reports whether a compaction's error is a refusal
// made before anything was logged: the range changed, or the request was
// invalid for the shard (an unknown partition, an object it knows).
func refusedBeforeLogged(err error) bool {
	if errors.Is(err, coordinator.ErrOutcomeUnknown) {
		return false // a forwarded call's earlier attempt may have landed
	}
	switch kafkaerr.CodeOf(err) {
	case kafkaerr.InvalidRequest, kafkaerr.UnknownTopicOrPartition:
		return true
	}
	return errors.Is(err, coordinator.ErrRangeChanged)
}

// The bounds of a compaction's memory, whatever the partition holds: the
// runs read at once from the objects into the temporary log (at least
// one), what is read at once from it into the new object's upload, and
// the size of the new object's runs (so that a later pass reads it a run
// at a time too).
const (
	compactReadBytes = 16 << 20
	compactReadChunk = 8 << 20
	compactRunBytes  = 8 << 20
)

// openCleanLog opens a temporary compacted log in dir whose cleaner
// checkpoint says the dirty part starts at dirty.
func openCleanLog(ctx context.Context, dir string, dirty int64, o *CompactOptions) (*segment.Log, error) {
	// The checkpoint file of segment.Log (Kafka's
	// cleaner-offset-checkpoint layout: version, count, offset).
	if err := os.WriteFile(filepath.Join(dir, "cleaner-offset-checkpoint"), fmt.Appendf(nil, "0\n1\n%d\n", dirty), 0o644); err != nil {
		return nil, fmt.Errorf("replica: compacting: %w", err)
	}
	return segment.OpenLog(ctx, dir, &segment.LogOptions{
		SegmentBytes: kbatch.DefaultSegmentBytes, CleanupPolicy: segment.CleanupCompact,
		DeleteRetention: o.DeleteRetention, MinCompactionLag: o.MinCompactionLag, MaxCompactionLag: o.MaxCompactionLag,
		MinCleanableDirtyRatio: o.MinCleanableDirtyRatio, Clock: o.Clock, Logger: o.Logger, RetentionTime: -1, RetentionBytes: -1,
	})
}

// fillCleanLog reads the runs at locs, compactReadBytes at a time, into
// log, and closes its active segment; the clean part (below dirty) and
// the dirty part go in segments of their own, as the cleaner's checkpoint
// always falls between segments in Kafka: the dirty ratio is then the
// cleaner's. It returns the bytes of the batches read.
func fillCleanLog(ctx context.Context, log *segment.Log, objects ObjectReader, locs []coordinator.Location, dirty int64) (int64, error) {
	var read int64
	rolled, appended := false, false
	var buf []byte
	for len(locs) > 0 {
		n, size := 1, locs[0].ByteSize
		for n < len(locs) && size+locs[n].ByteSize <= compactReadBytes {
			size += locs[n].ByteSize
			n++
		}
		data, err := ReadRuns(ctx, objects, locs[:n], locs[0].BaseOffset, 1<<62, leaderEpoch, buf[:0])
		if err != nil {
			return read, err
		}
		read += int64(len(data))
		locs, buf = locs[n:], data
		if !rolled {
			split := 0
			it := kbatch.NewBatchIter(data)
			for it.Next() && it.Batch().BaseOffset() < dirty {
				split += len(it.Batch())
			}
			if split < len(data) {
				if split > 0 {
					if err := appendBatches(ctx, log, data[:split]); err != nil {
						return read, err
					}
					appended = true
				}
				if appended {
					if err := log.Roll(ctx); err != nil {
						return read, err
					}
				}
				rolled, data = true, data[split:]
			}
		}
		if len(data) > 0 {
			if err := appendBatches(ctx, log, data); err != nil {
				return read, err
			}
			appended = true
		}
	}
	if !appended {
		return read, nil
	}
	return read, log.Roll(ctx)
}

// appendBatches appends data to log compactReadBytes at a time (at least
// a batch): a run read whole may be larger than a segment takes at once.
func appendBatches(ctx context.Context, log *segment.Log, data []byte) error {
	for len(data) > 0 {
		n := 0
		it := kbatch.NewBatchIter(data)
		for it.Next() && (n == 0 || n+len(it.Batch()) <= compactReadBytes) {
			n += len(it.Batch())
		}
		if n == 0 {
			return cmp.Or(it.Err(), errors.New("replica: compacting: no whole batch in what was read"))
		}
		if _, err := log.Append(ctx, data[:n]); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// uploadCleaned writes what log holds to a new one-partition WAL object
// at key as it reads it, and returns the object's size and runs (runs of
// at most compactRunBytes); nothing is uploaded, and the size is 0, if the
// log holds no batch. An upload that fails is abandoned.
func uploadCleaned(ctx context.Context, bucket *blob.Bucket, key string, log *segment.Log) (size int64, runs []coordinator.CompactedRun, err error) {
	var w *blob.Writer
	wctx, cancel := context.WithCancel(ctx)
	defer func() {
		if w != nil && err != nil {
			cancel() // abandons the upload: Close then writes nothing
			w.Close()
		}
		cancel()
	}()
	pos := int64(1) // after the version byte
	for off := log.EarliestOffset(); off < log.LatestOffset(); {
		r, err := log.Read(ctx, off, compactReadChunk)
		if err != nil {
			return 0, nil, err
		}
		if len(r.Records) == 0 {
			break
		}
		if w == nil {
			if w, err = bucket.NewWriter(wctx, key, &blob.WriterOptions{ContentType: "application/octet-stream"}); err != nil {
				return 0, nil, fmt.Errorf("replica: uploading the compacted object: %w", err)
			}
			if _, err := w.Write([]byte{0}); err != nil { // format v0
				return 0, nil, fmt.Errorf("replica: uploading the compacted object: %w", err)
			}
		}
		if _, err := w.Write(r.Records); err != nil {
			return 0, nil, fmt.Errorf("replica: uploading the compacted object: %w", err)
		}
		it := kbatch.NewBatchIter(r.Records)
		for it.Next() {
			b := it.Batch()
			runs = appendRun(runs, b.BaseOffset(), b.LastOffset(), pos, int64(len(b)), b.MaxTimestamp())
			pos += int64(len(b))
		}
		if err := it.Err(); err != nil {
			return 0, nil, err
		}
		off = kbatch.LastOffset(r.Records) + 1
	}
	if w == nil {
		return 0, nil, nil
	}
	if err := w.Close(); err != nil {
		w = nil // closed: nothing to abandon
		return 0, nil, fmt.Errorf("replica: uploading the compacted object: %w", err)
	}
	return pos, runs, nil
}

// appendRun adds a batch at pos, size bytes, to runs: to the last run if
// it follows it in offsets and bytes and the run stays within
// compactRunBytes.
func appendRun(runs []coordinator.CompactedRun, base, last, pos, size, maxTs int64) []coordinator.CompactedRun {
	if n := len(runs); n > 0 {
		r := &runs[n-1]
		if r.LastOffset+1 == base && r.BytePos+r.ByteSize == pos && r.ByteSize+size <= compactRunBytes {
			r.LastOffset, r.ByteSize, r.MaxTimestamp = last, r.ByteSize+size, max(r.MaxTimestamp, maxTs)
			return runs
		}
	}
	return append(runs, coordinator.CompactedRun{BaseOffset: base, LastOffset: last, BytePos: pos, ByteSize: size, MaxTimestamp: maxTs})
}
