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
//
// It claims its group as a Kafka group coordinator does (ClaimGroup),
// at its start and now and then again (a coordinator taking the group
// over), and commits under its claim; after a new claim it sometimes
// commits under the old one on purpose, which must fail.
func (a *actor) consumer(group string, readCommitted bool) {
	pos := map[string]int64{}
	var claim int64
	for i := 0; a.sleep(0, 2*time.Second); i++ {
		if claim == 0 || a.rng.IntN(150) == 0 {
			old := claim
			if c, ok := a.claimGroup(group); ok {
				claim = c
				if old != 0 && old < c && a.rng.IntN(2) == 0 {
					if t, p, ok := a.w.topics.pick(a.rng, kindPlain); ok {
						a.commitOffsets(group, old, t, p, pos[fmt.Sprintf("%s/%d", t.tag(), p)], true)
					}
				}
			}
		}
		t, p, ok := a.w.topics.pick(a.rng, kindPlain, kindCompact, kindRetention, kindAppendTime)
		if !ok {
			continue
		}
		key := fmt.Sprintf("%s/%d", t.tag(), p)
		ev := a.fetch(t, p, pos[key], readCommitted)
		if ev == nil {
			return
		}
		switch {
		case ev.Code == kafkaerr.OffsetOutOfRange && ev.LogStart > pos[key]:
			pos[key] = ev.LogStart
		case ev.OK():
			pos[key] = max(pos[key], ev.Offset) // a.fetch leaves the next offset there
		}
		if i%5 == 4 && claim != 0 {
			if ev := a.commitOffsets(group, claim, t, p, pos[key], false); ev != nil && ev.Code == kafkaerr.NotCoordinator {
				claim = 0 // a claim whose answer was lost replaced ours: claim again
			}
		}
		if i%11 == 10 {
			a.fetchOffsets(group)
		}
		if a.rng.IntN(200) == 0 && claim != 0 {
			// An explicit reset: the group's offsets are deleted and the
			// consumer starts again from the log start offsets.
			if a.deleteOffsets(group, claim) {
				clear(pos)
			}
		}
	}
}

// claimGroup claims the group, as the broker that becomes its
// coordinator does, and returns the claim's epoch.
func (a *actor) claimGroup(group string) (int64, bool) {
	b, id := a.broker()
	if b == nil {
		return 0, false
	}
	ev := a.w.h.Begin(a.name, OpClaimGroup)
	ev.Broker, ev.Group = id, group
	c, err := call(func(ctx context.Context) (int64, error) { return b.ClaimGroup(ctx, group) })
	ev.Claim = c
	a.w.h.End(ev, err)
	return c, err == nil
}

// deleteOffsets deletes the group's offsets under a claim and reports
// whether it did.
func (a *actor) deleteOffsets(group string, claim int64) bool {
	b, id := a.broker()
	if b == nil {
		return false
	}
	ev := a.w.h.Begin(a.name, OpDeleteOffsets)
	ev.Broker, ev.Group, ev.Claim = id, group, claim
	_, err := call(func(ctx context.Context) (struct{}, error) {
		return struct{}{}, b.DeleteOffsets(ctx, group, claim, nil)
	})
	a.w.h.End(ev, err)
	return err == nil
}

// fetch reads one partition from offset and records what a consumer of
// that isolation level keeps; on success the event's Offset is the next
// offset to read.
func (a *actor) fetch(t topic, p int32, offset int64, readCommitted bool) *Event {
	b, id := a.broker()
	if b == nil {
		return nil
	}
	name := t.name
	ev := a.w.h.Begin(a.name, OpFetch)
	ev.Broker, ev.Topic, ev.Partition, ev.ReadCommitted = id, t.tag(), p, readCommitted
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
			out = append(out, Rec{Offset: x.Offset, Key: string(x.Key), Value: string(bytes.Clone(x.Value)), Producer: bt.ProducerID(), Epoch: bt.ProducerEpoch(), Txn: bt.Transactional(), Timestamp: x.Timestamp})
		}
		if err := rr.Err(); err != nil {
			return out, next, err
		}
	}
	return out, next, it.Err()
}

// commitOffsets commits a group offset under a claim; fenced says the
// claim is one a later ClaimGroup replaced, on purpose.
func (a *actor) commitOffsets(group string, claim int64, t topic, p int32, offset int64, fenced bool) *Event {
	b, id := a.broker()
	if b == nil {
		return nil
	}
	ev := a.w.h.Begin(a.name, OpCommitOffsets)
	ev.Broker, ev.Group, ev.Topic, ev.Partition, ev.Offset, ev.Claim, ev.Fenced = id, group, t.tag(), p, offset, claim, fenced
	_, err := call(func(ctx context.Context) (struct{}, error) {
		return struct{}{}, b.CommitOffsets(ctx, group, claim, []diskless.GroupOffset{{Topic: t.name, Partition: p, Offset: offset, LeaderEpoch: -1}})
	})
	return a.w.h.End(ev, err)
}

func (a *actor) fetchOffsets(group string) {
	b, id := a.broker()
	if b == nil {
		return
	}
	before := map[string]string{}
	for _, t := range a.w.topics.all() {
		before[t.name] = t.tag()
	}
	ev := a.w.h.Begin(a.name, OpFetchOffsets)
	ev.Broker, ev.Group = id, group
	got, err := call(func(ctx context.Context) ([]diskless.GroupOffset, error) { return b.FetchOffsets(ctx, group, nil) })
	if err != nil || len(got) == 0 {
		a.w.h.End(ev, err)
		return
	}
	for _, o := range got {
		// The offsets name topics, not incarnations: an offset is
		// recorded under the incarnation that was live before the call
		// and still is after it, and left out while a delete of its
		// topic may have overlapped the call.
		tag, ok := a.w.topics.tagOf(o.Topic)
		if !ok || before[o.Topic] != tag {
			continue
		}
		e := *ev
		e.Topic, e.Partition, e.Offset = tag, o.Partition, o.Offset
		a.w.h.End(&e, nil)
	}
}
