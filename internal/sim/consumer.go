package sim

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

// consumer reads every partition from where it is, with one isolation
// level, commits its positions as a consumer group, and reads them back.
func (a *actor) consumer(group string, readCommitted bool) {
	pos := map[string]int64{}
	for i := 0; a.sleep(0, 2*time.Second); i++ {
		t, p, ok := a.w.topics.pick(a.rng, kindPlain, kindCompact, kindRetention)
		if !ok {
			continue
		}
		key := fmt.Sprintf("%s/%d", t.name, p)
		ev := a.fetch(t.name, p, pos[key], readCommitted)
		if ev == nil {
			return
		}
		switch {
		case ev.Code == kafkaerr.OffsetOutOfRange && ev.LogStart > pos[key]:
			pos[key] = ev.LogStart
		case ev.OK():
			pos[key] = max(pos[key], ev.Offset) // a.fetch leaves the next offset there
		}
		if i%5 == 4 {
			a.commitOffsets(group, t, p, pos[key])
		}
		if i%11 == 10 {
			a.fetchOffsets(group)
		}
		if a.rng.IntN(200) == 0 {
			// An explicit reset: the group's offsets are deleted and the
			// consumer starts again from the log start offsets.
			if a.deleteOffsets(group) {
				clear(pos)
			}
		}
	}
}

// deleteOffsets deletes the group's offsets and reports whether it did.
func (a *actor) deleteOffsets(group string) bool {
	b, id := a.broker()
	if b == nil {
		return false
	}
	ev := a.w.h.Begin(a.name, OpDeleteOffsets)
	ev.Broker, ev.Group = id, group
	_, err := call(func(ctx context.Context) (struct{}, error) { return struct{}{}, b.DeleteOffsets(ctx, group, 0, nil) })
	a.w.h.End(ev, err)
	return err == nil
}

// fetch reads one partition from offset and records what a consumer of
// that isolation level keeps; on success the event's Offset is the next
// offset to read.
func (a *actor) fetch(name string, p int32, offset int64, readCommitted bool) *Event {
	b, id := a.broker()
	if b == nil {
		return nil
	}
	ev := a.w.h.Begin(a.name, OpFetch)
	ev.Broker, ev.Topic, ev.Partition, ev.ReadCommitted = id, name, p, readCommitted
	resp, err := call(func(ctx context.Context) (diskless.FetchResponse, error) {
		return b.Fetch(ctx, diskless.FetchRequest{ReadCommitted: readCommitted, Partitions: []diskless.FetchPartition{{Topic: name, Partition: p, Offset: offset, MaxBytes: 16 << 10}}})
	})
	ev.Offset = offset
	if err == nil {
		r := resp.Partitions[0]
		ev.HW, ev.LSO, ev.LogStart = r.HighWatermark, r.LastStableOffset, r.LogStartOffset
		err = answerErr(r.ErrorCode, r.Err)
		if err == nil {
			var next int64
			ev.Records, next, err = decode(r.Records, offset, readCommitted, r.AbortedTransactions)
			ev.Offset = max(offset, next)
		}
	}
	a.w.h.End(ev, err)
	if err == nil {
		ev.Offset = max(offset, ev.Offset)
	}
	return ev
}

// decode returns the records of fetched batches at or after from, as a
// consumer keeps them (read_committed: aborted transactions and markers
// dropped, as Kafka's consumer does with the aborted list), and the
// offset after the last batch.
func decode(data []byte, from int64, readCommitted bool, aborted []diskless.AbortedTxn) ([]Rec, int64, error) {
	var out []Rec
	next := from
	abortedPids := map[int64]bool{}
	it := kbatch.NewBatchIter(data)
	var rr kbatch.RecordReader
	for it.Next() {
		bt := it.Batch()
		if err := bt.CheckCRC(); err != nil {
			return out, next, err
		}
		next = max(next, bt.NextOffset())
		if readCommitted {
			for len(aborted) > 0 && aborted[0].FirstOffset <= bt.LastOffset() {
				abortedPids[aborted[0].ProducerID] = true
				aborted = aborted[1:]
			}
		}
		if bt.Control() {
			if readCommitted && bt.Transactional() {
				delete(abortedPids, bt.ProducerID()) // the marker ends the producer's aborted run
			}
			continue
		}
		if readCommitted && bt.Transactional() && abortedPids[bt.ProducerID()] {
			continue
		}
		if err := rr.Reset(bt); err != nil {
			return out, next, err
		}
		for rr.Next() {
			x := rr.Record()
			if x.Offset < from {
				continue
			}
			out = append(out, Rec{Offset: x.Offset, Key: string(x.Key), Value: string(bytes.Clone(x.Value)), Producer: bt.ProducerID(), Epoch: bt.ProducerEpoch(), Txn: bt.Transactional()})
		}
		if err := rr.Err(); err != nil {
			return out, next, err
		}
	}
	return out, next, it.Err()
}

func (a *actor) commitOffsets(group string, t topic, p int32, offset int64) {
	b, id := a.broker()
	if b == nil {
		return
	}
	ev := a.w.h.Begin(a.name, OpCommitOffsets)
	ev.Broker, ev.Group, ev.Topic, ev.Partition, ev.Offset = id, group, t.name, p, offset
	_, err := call(func(ctx context.Context) (struct{}, error) {
		return struct{}{}, b.CommitOffsets(ctx, group, 0, []diskless.GroupOffset{{Topic: t.name, Partition: p, Offset: offset, LeaderEpoch: -1}})
	})
	a.w.h.End(ev, err)
}

func (a *actor) fetchOffsets(group string) {
	b, id := a.broker()
	if b == nil {
		return
	}
	ev := a.w.h.Begin(a.name, OpFetchOffsets)
	ev.Broker, ev.Group = id, group
	got, err := call(func(ctx context.Context) ([]diskless.GroupOffset, error) { return b.FetchOffsets(ctx, group, nil) })
	if err != nil || len(got) == 0 {
		a.w.h.End(ev, err)
		return
	}
	for _, o := range got {
		e := *ev
		e.Topic, e.Partition, e.Offset = o.Topic, o.Partition, o.Offset
		a.w.h.End(&e, nil)
	}
}
