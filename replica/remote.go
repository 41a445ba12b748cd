package replica

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/segment"
	"github.com/diskless-go/diskless/wal"
)

// remoteChunk is the least a remote read asks of the .log file at once.
const remoteChunk = 64 << 10

// ReadRemote reads a tiered segment's batches from the one holding offset
// on, up to limit bytes (one batch at least), through objects: one range
// read of its offset index (usually cached: the index is small), then
// range reads of its .log from the indexed position. The batches are as
// the segment holds them: their offsets were injected when they were
// materialised.
func ReadRemote(ctx context.Context, objects ObjectReader, seg *coordinator.RemoteSegment, offset, limit int64, dst []byte) ([]byte, error) {
	pos := int64(0)
	if seg.IndexSize > 0 && offset > seg.BaseOffset {
		index, err := objects.ReadRange(ctx, seg.Key+".index", 0, seg.IndexSize)
		if err != nil {
			return dst, err
		}
		_, pos = segment.LookupOffsetIndex(index, seg.BaseOffset, offset)
		if pos < 0 || pos > seg.Size {
			return dst, &kafkaerr.Error{Code: kafkaerr.CorruptMessage, Message: fmt.Sprintf("remote segment %s: index position %d is outside its %d bytes", seg.Key, pos, seg.Size)}
		}
	}
	start := len(dst)
	for pos < seg.Size {
		want := min(seg.Size-pos, max(limit, remoteChunk))
		data, err := objects.ReadRange(ctx, seg.Key+".log", pos, want)
		if err != nil {
			return dst, err
		}
		it := kbatch.NewBatchIter(data)
		read := int64(0)
		for it.Next() {
			b := it.Batch()
			read += int64(len(b))
			if b.LastOffset() < offset {
				continue
			}
			if len(dst) > start && int64(len(dst)-start+len(b)) > limit {
				return dst, nil
			}
			dst = append(dst, b...)
		}
		if err := it.Err(); err != nil {
			return dst, fmt.Errorf("replica: remote segment %s at %d: %w", seg.Key, pos, err)
		}
		if read == 0 {
			// A batch larger than the chunk: read it whole.
			if len(data) < 12 {
				return dst, &kafkaerr.Error{Code: kafkaerr.CorruptMessage, Message: fmt.Sprintf("remote segment %s: a truncated batch at %d", seg.Key, pos)}
			}
			size := 12 + int64(binary.BigEndian.Uint32(data[8:12])) // offset, length, then length bytes
			if size <= int64(len(data)) || pos+size > seg.Size {
				return dst, &kafkaerr.Error{Code: kafkaerr.CorruptMessage, Message: fmt.Sprintf("remote segment %s: a batch of %d bytes at %d", seg.Key, size, pos)}
			}
			limit = max(limit, size)
			continue
		}
		pos += read
		if int64(len(dst)-start) >= limit {
			return dst, nil
		}
	}
	return dst, nil
}

// RemoteOffsetForTimestamp finds in a tiered segment the first record at
// or after offset whose timestamp is at or after ts (ts = coordinator.
// MaxTimestamp: the record with the greatest timestamp), with the
// segment's time index and offset index, as Kafka's
// LogSegment.findOffsetByTimestamp does. found is false when no record
// qualifies.
func RemoteOffsetForTimestamp(ctx context.Context, objects ObjectReader, seg *coordinator.RemoteSegment, offset, ts int64) (off, timestamp int64, found bool, err error) {
	target := ts
	if ts == coordinator.MaxTimestamp {
		target = seg.MaxTimestamp
	}
	from := offset
	if seg.TimeIndexSize > 0 {
		ti, err := objects.ReadRange(ctx, seg.Key+".timeindex", 0, seg.TimeIndexSize)
		if err != nil {
			return -1, -1, false, err
		}
		// The time index's entry for the greatest timestamp below target
		// is where the scan may start (Kafka's lookup: the last entry
		// whose timestamp is below target, else the segment's start).
		if _, o, ok := segment.LookupTimeIndex(ti, seg.BaseOffset, target); ok {
			from = max(from, o)
		}
	}
	for from <= seg.EndOffset {
		data, err := ReadRemote(ctx, objects, seg, from, 1<<20, nil)
		if err != nil {
			return -1, -1, false, err
		}
		if len(data) == 0 {
			break
		}
		if off, timestamp, found, err := kbatch.FindRecord(data, offset, target); err != nil || found {
			return off, timestamp, found, err
		}
		next := kbatch.LastOffset(data) + 1
		if next <= from {
			break // no progress: a last offset of MaxInt64 wraps
		}
		from = next
	}
	return -1, -1, false, nil
}

// Read reads tp from offset as a broker's fetch does: the coordinator
// says where the data is; tiered segments (below the diskless start
// offset) are read by range reads of their files, diskless batches from
// their WAL objects with the coordinator's offsets injected; a tiered
// segment with nothing at or after offset (compaction emptied it) passes
// the read to what follows. It returns the batches from the one holding
// offset, up to limit bytes (one batch at least), and the coordinator's
// answer (LogStart, HighWatermark) for the offset last asked.
func Read(ctx context.Context, src Source, objects ObjectReader, tp wal.TopicPartition, offset, limit int64) ([]byte, coordinator.FindResult, error) {
	for {
		found, err := src.FindBatches(ctx, tp, offset, limit)
		if err != nil {
			return nil, found, err
		}
		if found.Remote == nil {
			data, err := ReadRuns(ctx, objects, found.Batches, offset, limit, leaderEpoch, nil)
			return data, found, err
		}
		data, err := ReadRemote(ctx, objects, found.Remote, offset, limit, nil)
		if err != nil || len(data) > 0 || found.Remote.EndOffset < offset {
			return data, found, err
		}
		offset = found.Remote.EndOffset + 1
	}
}

// OffsetForTimestamp answers a ListOffsets by time (ts >= 0, or
// coordinator.MaxTimestamp) from the coordinator's answer: in the tiered
// segment it names (RemoteOffsetForTimestamp), or in the run of batches
// it names, read through objects and injected, the first record at or
// after its offset whose timestamp is at or after ts (the record with the
// greatest timestamp for MaxTimestamp). found is false when no record
// qualifies. It is the one lookup by time of the module: the Broker
// facade and a protocol broker use it alike.
func OffsetForTimestamp(ctx context.Context, objects ObjectReader, res coordinator.ListOffsetsResult, ts int64) (off, timestamp int64, found bool, err error) {
	switch {
	case res.Remote != nil:
		return RemoteOffsetForTimestamp(ctx, objects, res.Remote, res.Offset, ts)
	case res.Batch == nil:
		return -1, -1, false, nil
	}
	data, err := objects.ReadRange(ctx, res.Batch.ObjectKey, res.Batch.BytePos, res.Batch.ByteSize)
	if err != nil {
		return -1, -1, false, err
	}
	if _, err := Inject(data, *res.Batch, leaderEpoch); err != nil {
		return -1, -1, false, err
	}
	if ts == coordinator.MaxTimestamp {
		return kbatch.MaxTimestampRecord(data, res.Offset)
	}
	return kbatch.FindRecord(data, res.Offset, ts)
}
