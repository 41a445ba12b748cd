package replica

import (
	"bytes"
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

// Compaction of diskless partitions (issue 25; first part: one pass over
// one partition, run by the caller).
//
// CompactPartition compacts a partition's diskless batches as Kafka's log
// cleaner would: it reads them (from the diskless start offset to the
// high watermark), appends them with their offsets to a temporary
// segment.Log, closes its active segment, and runs segment's cleaner
// over it with the topic's settings, so what it keeps is what the
// classic cleaner keeps, byte for byte. The result goes into a new object
// in the WAL format (not a tiered segment: the range stays diskless, its
// reads go through the coordinator, the cache and FindBatches as every
// other batch's, and offload tiers it later as it would the original),
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
	data, err := ReadRuns(ctx, objects, locs, from, 1<<62, leaderEpoch, nil)
	if err != nil {
		return st, err
	}
	st.From, st.To, st.BytesRead = from, to, int64(len(data))
	dir, err := os.MkdirTemp(o.TempDir, "diskless-compact-")
	if err != nil {
		return st, fmt.Errorf("replica: compacting: %w", err)
	}
	defer os.RemoveAll(dir)
	cleaned, res, err := clean(ctx, dir, data, max(cleanedTo, from), &o)
	if err != nil || !res.Cleaned {
		st.DirtyRatio = res.DirtyRatio
		return st, err
	}
	st.Cleaned, st.DirtyRatio, st.BytesWritten = true, res.DirtyRatio, int64(len(cleaned))

	req := coordinator.CompactRequest{TopicPartition: tp, From: from, To: to, Fingerprint: coordinator.RangeFingerprint(locs), Uploader: o.Uploader}
	if len(cleaned) > 0 {
		key := wal.NewObjectKey(o.Prefix, o.Clock())
		obj := wal.NewObject(key)
		wreq := &wal.Request{}
		it := kbatch.NewBatchIter(cleaned)
		for it.Next() {
			wreq.Batches = append(wreq.Batches, wal.Batch{TopicPartition: tp, Data: it.Batch()})
		}
		if err := it.Err(); err != nil {
			return st, err
		}
		obj.Add(wreq)
		body, coords := obj.AppendEncode(nil, nil)
		runs, err := runsOf(body, coords)
		if err != nil {
			return st, err
		}
		if err := bucket.WriteAll(ctx, key, body, &blob.WriterOptions{ContentType: "application/octet-stream"}); err != nil {
			return st, fmt.Errorf("replica: uploading the compacted object: %w", err)
		}
		req.ObjectKey, req.Size, req.Runs, st.Key = key, int64(len(body)), runs, key
	} else {
		// Every record of the range removed: the range is emptied, with
		// an object of no runs (the record needs a key; none is
		// uploaded).
		req.ObjectKey = wal.NewObjectKey(o.Prefix, o.Clock())
	}
	if err := src.Compact(ctx, req); err != nil {
		if req.Size > 0 {
			// Not committed: delete it now rather than leave it to the
			// orphan collector (if this fails, it will).
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

// clean appends data to a temporary compacted log in dir, whose
// cleaner checkpoint says the dirty part starts at dirty, closes its
// active segment, runs the cleaner and returns what it kept.
func clean(ctx context.Context, dir string, data []byte, dirty int64, o *CompactOptions) ([]byte, segment.CompactResult, error) {
	const segmentBytes = 1 << 30
	// The checkpoint file of segment.Log (Kafka's
	// cleaner-offset-checkpoint layout: version, count, offset).
	if err := os.WriteFile(filepath.Join(dir, "cleaner-offset-checkpoint"), fmt.Appendf(nil, "0\n1\n%d\n", dirty), 0o644); err != nil {
		return nil, segment.CompactResult{}, fmt.Errorf("replica: compacting: %w", err)
	}
	log, err := segment.OpenLog(ctx, dir, &segment.LogOptions{
		SegmentBytes: segmentBytes, CleanupPolicy: segment.CleanupCompact,
		DeleteRetention: o.DeleteRetention, MinCompactionLag: o.MinCompactionLag, MaxCompactionLag: o.MaxCompactionLag,
		MinCleanableDirtyRatio: o.MinCleanableDirtyRatio, Clock: o.Clock, Logger: o.Logger, RetentionTime: -1, RetentionBytes: -1,
	})
	if err != nil {
		return nil, segment.CompactResult{}, err
	}
	defer log.Close()
	// The clean part (below dirty) and the dirty part in segments of
	// their own, as the cleaner's checkpoint always falls between
	// segments in Kafka: the dirty ratio is then the cleaner's.
	split := 0
	it := kbatch.NewBatchIter(data)
	for it.Next() && it.Batch().BaseOffset() < dirty {
		split += len(it.Batch())
	}
	for _, part := range [][]byte{data[:split], data[split:]} {
		if len(part) == 0 {
			continue
		}
		for rest := part; len(rest) > 0; {
			n := 0
			it := kbatch.NewBatchIter(rest)
			for it.Next() && n+len(it.Batch()) <= segmentBytes {
				n += len(it.Batch())
			}
			if n == 0 {
				return nil, segment.CompactResult{}, errors.New("replica: compacting: a batch larger than a segment")
			}
			if _, err := log.Append(ctx, rest[:n]); err != nil {
				return nil, segment.CompactResult{}, err
			}
			rest = rest[n:]
		}
		if err := log.Roll(ctx); err != nil {
			return nil, segment.CompactResult{}, err
		}
	}
	res, err := log.Compact(ctx)
	if err != nil || !res.Cleaned {
		return nil, res, err
	}
	var out bytes.Buffer
	for off := log.EarliestOffset(); off < log.LatestOffset(); {
		r, err := log.Read(ctx, off, 8<<20)
		if err != nil {
			return nil, res, err
		}
		if len(r.Records) == 0 {
			break
		}
		out.Write(r.Records)
		off = kbatch.LastOffset(r.Records) + 1
	}
	return out.Bytes(), res, nil
}

// runsOf returns the runs of a one-partition object's batches: batches
// contiguous in offsets and in the object form one run.
func runsOf(body []byte, coords []wal.Coordinate) ([]coordinator.CompactedRun, error) {
	var runs []coordinator.CompactedRun
	for _, c := range coords {
		if c.End() > int64(len(body)) {
			return nil, fmt.Errorf("replica: a batch at %d+%d of an object of %d bytes", c.Offset, c.Size, len(body))
		}
		b := kbatch.Batch(body[c.Offset:c.End()])
		base, last := b.BaseOffset(), b.LastOffset()
		if n := len(runs); n > 0 {
			r := &runs[n-1]
			if r.LastOffset+1 == base && r.BytePos+r.ByteSize == c.Offset {
				r.LastOffset, r.ByteSize, r.MaxTimestamp = last, r.ByteSize+int64(c.Size), max(r.MaxTimestamp, c.MaxTimestamp)
				continue
			}
		}
		runs = append(runs, coordinator.CompactedRun{BaseOffset: base, LastOffset: last, BytePos: c.Offset, ByteSize: int64(c.Size), MaxTimestamp: c.MaxTimestamp})
	}
	return runs, nil
}
