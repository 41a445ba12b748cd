package kafkaserver

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/clock"
)

// The offsets topic as a mirror (Config.OffsetsTopicMirror). Committed
// offsets live in the coordinator (coordOffsets); Kafka's tools that read
// them through the protocol (OffsetFetch: kafka-consumer-groups, kadm's
// Lag) need nothing else. Tools that read Kafka's offsets topic itself,
// as Burrow does, find nothing there. With the mirror on, every commit
// and deletion, once the coordinator has it, is also written to
// __consumer_offsets in Kafka's record format (key OffsetCommitKey v1:
// group, topic, partition; value OffsetCommitValue v3: offset, leader
// epoch, metadata, commit time; a deletion a tombstone), so that those
// tools see what they see on Kafka.
//
// The mirror follows the coordinator, it never leads it: its records are
// queued and written in the background, in batches, in commit order on
// this node (a commit's answer does not wait for them); a write that
// fails is retried; the queue holds at most mirrorQueueMax records, past
// which the oldest are dropped (logged). What the mirror does not have:
// offsets committed in transactions (TxnOffsetCommit, committed by the
// coordinator when the transaction ends), and, across a change of a
// group's coordinator, the order of two nodes' records of one group. A
// node started with the mirror on does not import the offsets topic into
// the coordinator (the import of offsets an older release kept there,
// openOffsets), since what is there is the mirror's.

// mirrorQueueMax bounds the records waiting for the mirror.
const mirrorQueueMax = 1 << 16

// mirrorRecord is one record of the offsets topic: a nil value is a
// tombstone.
type mirrorRecord struct{ key, value []byte }

// mirrorOffsets is an offsetStorage that mirrors its commits and
// deletions to the offsets topic (see above).
type mirrorOffsets struct {
	offsetStorage
	b     *diskless.Broker
	clk   clock.Clock
	log   *zap.Logger
	wake  chan struct{}
	mu    sync.Mutex
	queue []mirrorRecord
	head  int64 // the position of queue[0] among every record queued
}

// newMirrorOffsets returns inner mirrored to the offsets topic. run
// writes the mirror's records until ctx ends.
func newMirrorOffsets(inner offsetStorage, b *diskless.Broker, log *zap.Logger) *mirrorOffsets {
	return &mirrorOffsets{offsetStorage: inner, b: b, clk: b.Clock(), log: log, wake: make(chan struct{}, 1)}
}

// commit commits in inner, then queues the commit's records.
func (o *mirrorOffsets) commit(ctx context.Context, group string, claim int64, offsets []offsetCommit) error {
	if err := o.offsetStorage.commit(ctx, group, claim, offsets); err != nil {
		return err
	}
	now := o.clk.Now().UnixMilli()
	recs := make([]mirrorRecord, len(offsets))
	for i, c := range offsets {
		v := kmsg.NewOffsetCommitValue()
		v.Version, v.Offset, v.LeaderEpoch, v.Metadata, v.CommitTimestamp = offsetValueVersion, c.offset, c.leaderEpoch, c.metadata, now
		recs[i] = mirrorRecord{key: offsetKey(group, c.tp), value: v.AppendTo(nil)}
	}
	o.enqueue(recs)
	return nil
}

// delete deletes in inner, then queues a tombstone for each offset that
// was deleted.
func (o *mirrorOffsets) delete(ctx context.Context, group string, claim int64, tps []topicPartition) error {
	held, err := o.offsetStorage.fetch(ctx, group, tps)
	if err != nil {
		return err
	}
	if err := o.offsetStorage.delete(ctx, group, claim, tps); err != nil {
		return err
	}
	recs := make([]mirrorRecord, 0, len(held))
	for tp := range held {
		recs = append(recs, mirrorRecord{key: offsetKey(group, tp)})
	}
	o.enqueue(recs)
	return nil
}

// offsetKey is the offsets topic's key of a group's partition.
func offsetKey(group string, tp topicPartition) []byte {
	k := kmsg.NewOffsetCommitKey()
	k.Version, k.Group, k.Topic, k.Partition = offsetKeyVersion, group, tp.topic, tp.partition
	return k.AppendTo(nil)
}

// enqueue queues records for the mirror, dropping the oldest past
// mirrorQueueMax.
func (o *mirrorOffsets) enqueue(recs []mirrorRecord) {
	if len(recs) == 0 {
		return
	}
	o.mu.Lock()
	o.queue = append(o.queue, recs...)
	if over := len(o.queue) - mirrorQueueMax; over > 0 {
		o.queue, o.head = o.queue[over:], o.head+int64(over)
		o.log.Warn("offsets topic mirror: queue full, oldest records dropped", zap.Int("dropped", over))
	}
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// take returns up to max queued records and the position of the first;
// they leave the queue when written (taken).
func (o *mirrorOffsets) take(max int) ([]mirrorRecord, int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := min(len(o.queue), max)
	return slices.Clone(o.queue[:n]), o.head
}

// taken removes the n records from position at on, written, from the
// queue (less any dropped meanwhile).
func (o *mirrorOffsets) taken(at int64, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if drop := at + int64(n) - o.head; drop > 0 {
		drop = min(drop, int64(len(o.queue)))
		o.queue, o.head = o.queue[drop:], o.head+drop
	}
}

// run writes the queued records to the offsets topic until ctx ends,
// then writes what is left, for up to flush.
func (o *mirrorOffsets) run(ctx context.Context, flush time.Duration) {
	backoff := 100 * time.Millisecond
	write := func(ctx context.Context) bool {
		for {
			recs, at := o.take(1000)
			if len(recs) == 0 {
				return true
			}
			keys, values := make([][]byte, len(recs)), make([][]byte, len(recs))
			for i, r := range recs {
				keys[i], values[i] = r.key, r.value
			}
			if _, err := writeRecords(ctx, o.b, offsetsTopic, keys, values); err != nil {
				if ctx.Err() == nil {
					o.log.Warn("offsets topic mirror: writing records; will retry", zap.Int("records", len(recs)), zap.Error(err))
				}
				return false
			}
			o.taken(at, len(recs))
		}
	}
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flush)
			defer cancel()
			for !write(fctx) && fctx.Err() == nil {
				if clock.Sleep(fctx, o.clk, backoff) != nil {
					break
				}
			}
			return
		case <-o.wake:
		}
		for !write(ctx) && ctx.Err() == nil {
			if clock.Sleep(ctx, o.clk, backoff) != nil {
				break
			}
			backoff = min(2*backoff, 5*time.Second)
		}
		backoff = 100 * time.Millisecond
	}
}
