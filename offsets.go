package diskless

import (
	"context"

	"github.com/diskless-go/diskless/coordinator"
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
	// LastStable is, for LatestTimestamp, the last stable offset: what
	// ListOffsets answers at isolation level READ_COMMITTED (the first
	// offset of the oldest transaction still open, else the high
	// watermark).
	LastStable int64
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
	out := ListOffsetsResult{Offset: res.Offset, Timestamp: res.Timestamp, LastStable: res.LastStable}
	if err != nil || (res.Remote == nil && res.Batch == nil) {
		return out, b.closedErr(err)
	}
	off, ts, found, err := replica.OffsetForTimestamp(ctx, b.cache, res, timestamp)
	if err != nil || !found {
		return out, err
	}
	return ListOffsetsResult{Offset: off, Timestamp: ts}, nil
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
	lo, err := b.coord.DeleteRecords(ctx, tp, offset)
	return lo, b.closedErr(err)
}

// InitProducerID allocates a producer id for an idempotent producer and
// returns it with its epoch (0).
func (b *Broker) InitProducerID(ctx context.Context) (int64, int16, error) {
	if b.closed.Load() {
		return -1, -1, ErrClosed
	}
	id, epoch, err := b.coord.InitProducerID(ctx)
	return id, epoch, b.closedErr(err)
}
