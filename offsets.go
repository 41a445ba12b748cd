package diskless

import (
	"context"

	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/replica"
)

// Special timestamps of ListOffsets, as in Kafka.
const (
	LatestTimestamp   = coordinator.LatestTimestamp
	EarliestTimestamp = coordinator.EarliestTimestamp
	MaxTimestamp      = coordinator.MaxTimestamp
)

// ListOffsetsResult is Kafka's ListOffsets answer for one partition.
type ListOffsetsResult struct {
	// Offset is the offset found, or -1 when no record has a timestamp at
	// or after the one asked.
	Offset int64
	// Timestamp is that record's timestamp for lookups by time, else -1.
	Timestamp int64
}

// ListOffsets answers Kafka's ListOffsets for one partition: timestamp
// EarliestTimestamp gives the log start offset, LatestTimestamp the high
// watermark, MaxTimestamp the record with the greatest timestamp, and a
// timestamp >= 0 the first record at or after it. It is always current.
func (b *Broker) ListOffsets(ctx context.Context, topic string, partition int32, timestamp int64) (ListOffsetsResult, error) {
	if b.closed.Load() {
		return ListOffsetsResult{}, ErrClosed
	}
	_, tp, err := b.partition(ctx, topic, partition)
	if err != nil {
		return ListOffsetsResult{Offset: -1, Timestamp: -1}, err
	}
	res, err := b.coord.ListOffsets(ctx, tp, timestamp)
	out := ListOffsetsResult{Offset: res.Offset, Timestamp: res.Timestamp}
	if err == nil && res.Remote != nil {
		// A tiered segment holds it: its time index says where to look.
		off, ts, found, err := replica.RemoteOffsetForTimestamp(ctx, b.cache, res.Remote, res.Offset, timestamp)
		if err != nil || !found {
			return out, err
		}
		return ListOffsetsResult{Offset: off, Timestamp: ts}, nil
	}
	if err != nil || res.Batch == nil {
		return out, err
	}
	// The coordinator knows batches: find the record in the one it named.
	data, err := b.cache.ReadRange(ctx, res.Batch.ObjectKey, res.Batch.BytePos, res.Batch.ByteSize)
	if err != nil {
		return out, err
	}
	if _, err := replica.Inject(data, *res.Batch, 0); err != nil {
		return out, err
	}
	best, bestTs := int64(-1), int64(-1)
	it := kbatch.NewBatchIter(data)
	var rr kbatch.RecordReader
	for it.Next() {
		if err := rr.Reset(it.Batch()); err != nil {
			return out, err
		}
		for rr.Next() {
			r := rr.Record()
			if r.Offset < res.Offset {
				continue // below the log start offset
			}
			switch {
			case timestamp == MaxTimestamp:
				if r.Timestamp > bestTs {
					best, bestTs = r.Offset, r.Timestamp
				}
			case r.Timestamp >= timestamp:
				return ListOffsetsResult{Offset: r.Offset, Timestamp: r.Timestamp}, nil
			}
		}
		if err := rr.Err(); err != nil {
			return out, err
		}
	}
	if timestamp == MaxTimestamp && best >= 0 {
		return ListOffsetsResult{Offset: best, Timestamp: bestTs}, nil
	}
	return out, nil
}

// DeleteRecords raises a partition's log start offset to offset (-1: the
// high watermark) and returns the new low watermark. An offset above the
// high watermark is OFFSET_OUT_OF_RANGE.
func (b *Broker) DeleteRecords(ctx context.Context, topic string, partition int32, offset int64) (int64, error) {
	if b.closed.Load() {
		return -1, ErrClosed
	}
	_, tp, err := b.partition(ctx, topic, partition)
	if err != nil {
		return -1, err
	}
	return b.coord.DeleteRecords(ctx, tp, offset)
}

// InitProducerID allocates a producer id for an idempotent producer and
// returns it with its epoch (0).
func (b *Broker) InitProducerID(ctx context.Context) (int64, int16, error) {
	if b.closed.Load() {
		return -1, -1, ErrClosed
	}
	return b.coord.InitProducerID(ctx)
}
