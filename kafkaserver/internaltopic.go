package kafkaserver

import (
	"context"
	"fmt"
	"time"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

// The broker keeps its own state in compacted, single-partition diskless
// topics (the committed offsets, the topic configs), so that it survives
// restarts with nothing on the node's disk: a change is one batch
// produced with acks -1, and a start replays the topic.

// ensureInternalTopic creates an internal topic if it is missing:
// compacted, kept forever, one partition.
func ensureInternalTopic(ctx context.Context, b *diskless.Broker, topic string) error {
	_, err := b.CreateTopic(ctx, topic, diskless.TopicConfig{Partitions: 1, Compact: true, Retention: -1})
	if err != nil && kafkaerr.CodeOf(err) != kafkaerr.TopicAlreadyExists {
		return fmt.Errorf("creating %s: %w", topic, err)
	}
	return nil
}

// replayTopic reads partition 0 of topic from its log start offset to its
// high watermark, calling apply for each record in offset order, and
// returns the records read.
func replayTopic(ctx context.Context, b *diskless.Broker, topic string, apply func(key, value []byte, offset int64)) (int, error) {
	_, n, err := replayTopicFrom(ctx, b, topic, 0, apply)
	return n, err
}

// replayTopicFrom reads partition 0 of topic from offset from (or its log
// start offset, if later) to its high watermark, as replayTopic does, and
// returns the offset it read up to and the records read.
func replayTopicFrom(ctx context.Context, b *diskless.Broker, topic string, from int64, apply func(key, value []byte, offset int64)) (int64, int, error) {
	lo, err := b.ListOffsets(ctx, topic, 0, diskless.EarliestTimestamp)
	if err != nil {
		return from, 0, err
	}
	hi, err := b.ListOffsets(ctx, topic, 0, diskless.LatestTimestamp)
	if err != nil {
		return from, 0, err
	}
	n := 0
	var rr kbatch.RecordReader
	next := max(from, lo.Offset)
	for stalls := 0; next < hi.Offset; {
		f, err := b.Fetch(ctx, diskless.FetchRequest{
			Partitions: []diskless.FetchPartition{{Topic: topic, Offset: next, MaxBytes: 8 << 20}},
			MaxWait:    100 * time.Millisecond, MinBytes: 1,
		})
		if err != nil {
			return next, n, err
		}
		p := f.Partitions[0]
		if p.Err != nil {
			return next, n, p.Err
		}
		before := next
		it := kbatch.NewBatchIter(p.Records)
		for it.Next() {
			bt := it.Batch()
			if bt.LastOffset() < next || bt.Control() {
				next = max(next, bt.NextOffset())
				continue
			}
			if err := rr.Reset(bt); err != nil {
				return next, n, err
			}
			for rr.Next() {
				r := rr.Record()
				if r.Offset >= next {
					apply(r.Key, r.Value, r.Offset)
					n++
				}
			}
			if err := rr.Err(); err != nil {
				return next, n, err
			}
			next = bt.NextOffset()
		}
		if err := it.Err(); err != nil {
			return next, n, err
		}
		if next == before {
			if stalls++; stalls > 50 {
				return next, n, fmt.Errorf("no progress at offset %d of %d", next, hi.Offset)
			}
		}
	}
	return next, n, nil
}

// writeRecords produces one batch of records (a nil value is a
// tombstone) to partition 0 of topic, with acks -1, and returns the
// offset of the first.
func writeRecords(ctx context.Context, b *diskless.Broker, topic string, keys, values [][]byte) (int64, error) {
	now := b.Clock().Now().UnixMilli()
	bld := kbatch.NewBuilder(kbatch.CodecNone)
	for i := range keys {
		bld.Append(now, keys[i], values[i])
	}
	batch, err := bld.Build(nil)
	if err != nil {
		return -1, err
	}
	resp, err := b.Produce(ctx, diskless.ProduceRequest{Acks: -1, Partitions: []diskless.ProducePartition{{Topic: topic, Records: batch}}})
	if err == nil {
		err = resp.Partitions[0].Err
	}
	if err != nil {
		return -1, err
	}
	return resp.Partitions[0].BaseOffset, nil
}
