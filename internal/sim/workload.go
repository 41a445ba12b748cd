package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/wal"
)

// callTimeout bounds one call of the workload, in virtual time.
const callTimeout = 2 * time.Minute

// world is what the actors of a run share.
type world struct {
	c      *Cluster
	h      *History
	topics *topicSet
	// stop ends the workload: actors finish the call under way and
	// return.
	stop context.Context
	// undo counts the faults that are still to be undone.
	undo sync.WaitGroup
	// rules are the call failures of each broker.
	rules []*rules
}

// producer is a producer ID and epoch.
type producer struct {
	id    int64
	epoch int16
}

// actor is one seeded participant of the workload.
type actor struct {
	w    *world
	name string
	rng  *rand.Rand
	// txnOffset is the last offset a transactional actor committed for
	// its group.
	txnOffset int64
}

func newActor(w *world, seed uint64, name string, index uint64) *actor {
	return &actor{w: w, name: name, rng: rand.New(rand.NewPCG(seed, index))}
}

// stopped reports whether the workload is over.
func (a *actor) stopped() bool { return a.w.stop.Err() != nil }

// sleep waits a random virtual time in [lo, hi), or until the workload
// ends; it reports whether the workload goes on.
func (a *actor) sleep(lo, hi time.Duration) bool {
	d := lo
	if hi > lo {
		d += time.Duration(a.rng.Int64N(int64(hi - lo)))
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-a.w.stop.Done():
		return false
	}
}

// broker returns the current process of a random broker (as a client
// picks one), and its index, waiting while it is down; nil once the
// workload is over.
func (a *actor) broker() (*diskless.Broker, int) {
	i := a.rng.IntN(a.w.c.Brokers())
	for {
		if b := a.w.c.Broker(i); b != nil {
			return b, i
		}
		if !a.sleep(100*time.Millisecond, time.Second) {
			return nil, 0
		}
	}
}

// call runs f with a fresh call context: the workload's end does not
// cut a call short, so that its answer is known.
func call[T any](f func(ctx context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	return f(ctx)
}

// answerErr is a partition's answer as an error with the answer's Kafka
// code (a Fetch may answer KAFKA_STORAGE_ERROR with an Err of another
// code), nil for NONE.
func answerErr(code kafkaerr.Code, err error) error {
	if code == kafkaerr.NoError {
		return nil
	}
	return &kafkaerr.Error{Code: code, Message: "the partition's answer", Err: err}
}

// retriable reports whether the same request may be sent again.
func retriable(err error) bool {
	if errors.Is(err, diskless.ErrClosed) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	return kafkaerr.CodeOf(err).Retriable()
}

// batch builds a batch of recs for a producer (pid < 0: none) with a
// codec.
func batch(codec kbatch.Codec, recs []Rec, pid int64, epoch int16, seq int32, txn bool) []byte {
	bld := kbatch.NewBuilder(codec)
	if pid >= 0 {
		bld.SetProducer(pid, epoch, seq)
	}
	bld.SetTransactional(txn)
	now := time.Now().UnixMilli()
	for _, r := range recs {
		var key []byte
		if r.Key != "" {
			key = []byte(r.Key)
		}
		bld.Append(now, key, []byte(r.Value))
	}
	out, err := bld.Build(nil)
	if err != nil {
		panic(fmt.Sprintf("sim: building a batch: %v", err))
	}
	return out
}

// produce sends one batch and records it; it returns the event.
func (a *actor) produce(t topic, p int32, recs []Rec, pid int64, epoch int16, seq int32, txnRun string, fenced bool) *Event {
	b, id := a.broker()
	if b == nil {
		return nil
	}
	ev := a.w.h.Begin(a.name, OpProduce)
	ev.Broker, ev.Topic, ev.Partition, ev.Records = id, t.name, p, recs
	ev.Producer, ev.Epoch, ev.Seq, ev.TxnRun, ev.Fenced = pid, epoch, seq, txnRun, fenced
	raw := batch(kbatch.Codecs[a.rng.IntN(len(kbatch.Codecs))], recs, pid, epoch, seq, txnRun != "")
	resp, err := call(func(ctx context.Context) (diskless.ProduceResponse, error) {
		return b.Produce(ctx, diskless.ProduceRequest{Acks: -1, Partitions: []diskless.ProducePartition{{Topic: t.name, Partition: p, Records: raw}}})
	})
	if err == nil {
		r := resp.Partitions[0]
		err = answerErr(r.ErrorCode, r.Err)
		if err == nil {
			ev.Offset = r.BaseOffset
		}
	}
	return a.w.h.End(ev, err)
}

// records makes n records of the actor, keyed on compacted topics.
func (a *actor) records(n int, counter *int, kind topicKind) []Rec {
	recs := make([]Rec, n)
	for i := range recs {
		*counter++
		recs[i].Value = fmt.Sprintf("%s-%d", a.name, *counter)
		recs[i].Offset = -1
		if kind == kindCompact {
			recs[i].Key = fmt.Sprintf("k%d", a.rng.IntN(8))
		}
	}
	return recs
}

// idempotent is an idempotent producer: it sends batches to random
// partitions, each until it is acknowledged (the same sequence numbers,
// deduplicated by the broker) or it gives up and takes a new producer ID.
func (a *actor) idempotent() {
	pid, epoch := int64(-1), int16(0)
	seqs := map[string]int32{}
	n := 0
	for a.sleep(0, 2*time.Second) {
		if pid < 0 {
			b, id := a.broker()
			if b == nil {
				return
			}
			ev := a.w.h.Begin(a.name, OpInitProducer)
			ev.Broker = id
			var err error
			pid, epoch, err = b.InitProducerID(context.Background())
			ev.Producer, ev.Epoch = pid, epoch
			if a.w.h.End(ev, err); err != nil {
				pid = -1
				continue
			}
			clear(seqs)
		}
		t, p, ok := a.w.topics.pick(a.rng, kindPlain, kindCompact, kindRetention)
		if !ok {
			continue
		}
		key := fmt.Sprintf("%s/%d", t.name, p)
		recs := a.records(1+a.rng.IntN(4), &n, t.kind)
		acked := false
		for try := 0; try < 30 && !acked; try++ {
			ev := a.produce(t, p, recs, pid, epoch, seqs[key], "", false)
			if ev == nil {
				return
			}
			if ev.OK() {
				acked = true
				break
			}
			if !retriable(ev.Err) {
				break
			}
			a.sleep(50*time.Millisecond, 2*time.Second)
		}
		if acked {
			seqs[key] += int32(len(recs))
		} else {
			pid = -1 // the batch may have landed or not: start afresh
		}
	}
}

// transactional is a transactional producer: it opens transactions over
// one or two partitions of plain topics, produces to them, and commits
// or aborts; on any doubt it initialises again, which fences its earlier
// epoch and aborts what that left open. Sometimes it then writes with
// the fenced epoch on purpose, which must fail.
func (a *actor) transactional(txnID string) {
	pid, epoch := int64(-1), int16(-1)
	init := true
	runs, n := 0, 0
	// The sequence numbers of an epoch go on across its transactions.
	seqs := map[string]int32{}
	for a.sleep(0, 5*time.Second) {
		b, id := a.broker()
		if b == nil {
			return
		}
		if init {
			ev := a.w.h.Begin(a.name, OpInitTxn)
			ev.Broker, ev.TxnID = id, txnID
			p, err := call(func(ctx context.Context) (producer, error) {
				p, e, err := b.InitTxnProducer(ctx, txnID, time.Minute, -1, -1)
				return producer{p, e}, err
			})
			ev.Producer, ev.Epoch = p.id, p.epoch
			if a.w.h.End(ev, err); err != nil {
				continue
			}
			oldPid, oldEpoch := pid, epoch
			pid, epoch, init = p.id, p.epoch, false
			clear(seqs)
			if oldPid == pid && oldEpoch >= 0 && a.rng.IntN(3) == 0 {
				// A zombie: the producer of the fenced epoch writes.
				if t, part, ok := a.w.topics.pick(a.rng, kindPlain); ok {
					a.produce(t, part, a.records(1, &n, t.kind), oldPid, oldEpoch, 1000, fmt.Sprintf("%s#zombie", txnID), true)
				}
			}
		}
		runs++
		run := fmt.Sprintf("%s#%d", txnID, runs)
		init = !a.txnRun(txnID, run, pid, epoch, seqs, &n)
		if a.rng.IntN(3) == 0 {
			a.fetchOffsets("g-" + txnID)
		}
	}
}

// txnRun is one transaction; false means the producer must initialise
// again.
func (a *actor) txnRun(txnID, run string, pid int64, epoch int16, seqs map[string]int32, n *int) bool {
	var parts []struct {
		t topic
		p int32
	}
	for range 1 + a.rng.IntN(2) {
		t, p, ok := a.w.topics.pick(a.rng, kindPlain)
		if !ok {
			return true
		}
		parts = append(parts, struct {
			t topic
			p int32
		}{t, p})
	}
	b, id := a.broker()
	if b == nil {
		return true
	}
	ev := a.w.h.Begin(a.name, OpAddTxnParts)
	ev.Broker, ev.TxnID, ev.TxnRun, ev.Producer, ev.Epoch = id, txnID, run, pid, epoch
	var tps []diskless.TxnPartition
	for _, x := range parts {
		tps = append(tps, diskless.TxnPartition{Topic: x.t.name, Partition: x.p})
	}
	errs, err := call(func(ctx context.Context) ([]error, error) { return b.AddTxnPartitions(ctx, txnID, pid, epoch, tps) })
	if err == nil {
		err = errors.Join(errs...)
	}
	if a.w.h.End(ev, err); err != nil {
		return false
	}
	for range 1 + a.rng.IntN(3) {
		x := parts[a.rng.IntN(len(parts))]
		key := fmt.Sprintf("%s/%d", x.t.name, x.p)
		recs := a.records(1+a.rng.IntN(3), n, x.t.kind)
		acked := false
		for try := 0; try < 10; try++ {
			ev := a.produce(x.t, x.p, recs, pid, epoch, seqs[key], run, false)
			if ev == nil {
				return true
			}
			if ev.OK() {
				acked = true
				break
			}
			if !retriable(ev.Err) {
				break
			}
			a.sleep(50*time.Millisecond, 2*time.Second)
		}
		if !acked {
			return false
		}
		seqs[key] += int32(len(recs))
		a.sleep(0, 3*time.Second)
	}
	if a.rng.IntN(3) == 0 && !a.txnOffsets(txnID, run, pid, epoch, parts[0].t, parts[0].p) {
		return false
	}
	if a.rng.IntN(20) == 0 {
		a.sleep(time.Minute, 3*time.Minute) // past the timeout: the broker aborts it
	}
	commit := a.rng.IntN(10) < 7
	for try := 0; try < 10; try++ {
		b, id := a.broker()
		if b == nil {
			return true
		}
		ev := a.w.h.Begin(a.name, OpEndTxn)
		ev.Broker, ev.TxnID, ev.TxnRun, ev.Producer, ev.Epoch, ev.Commit = id, txnID, run, pid, epoch, commit
		_, err := call(func(ctx context.Context) (struct{}, error) {
			return struct{}{}, b.EndTxn(ctx, txnID, pid, epoch, commit)
		})
		if a.w.h.End(ev, err); err == nil {
			return true
		}
		if !retriable(err) && kafkaerr.CodeOf(err) != kafkaerr.ConcurrentTransactions {
			return false
		}
		a.sleep(100*time.Millisecond, 2*time.Second)
	}
	return false
}

// txnOffsets commits an offset of the transactional ID's group in the
// transaction: one more than the last it committed there, so that the
// group's offsets only grow while its transactions commit.
func (a *actor) txnOffsets(txnID, run string, pid int64, epoch int16, t topic, p int32) bool {
	b, id := a.broker()
	if b == nil {
		return true
	}
	group := "g-" + txnID
	a.txnOffset++
	ev := a.w.h.Begin(a.name, OpTxnOffsets)
	ev.Broker, ev.TxnID, ev.TxnRun, ev.Producer, ev.Epoch, ev.Group, ev.Topic, ev.Partition, ev.Offset = id, txnID, run, pid, epoch, group, t.name, p, a.txnOffset
	_, err := call(func(ctx context.Context) (struct{}, error) {
		if err := b.AddTxnOffsets(ctx, txnID, pid, epoch, group); err != nil {
			return struct{}{}, err
		}
		return struct{}{}, b.TxnCommitOffsets(ctx, txnID, pid, epoch, group, []diskless.GroupOffset{{Topic: t.name, Partition: p, Offset: a.txnOffset, LeaderEpoch: -1}})
	})
	a.w.h.End(ev, err)
	return err == nil
}

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

// admin creates topics, adds partitions, deletes records, reads the
// partitions' offsets and compacts.
func (a *actor) admin() {
	made := map[topicKind]int{}
	for a.sleep(10*time.Second, 90*time.Second) {
		switch r := a.rng.IntN(10); {
		case r < 2:
			kind := topicKind(a.rng.IntN(3))
			if made[kind] >= 2 {
				continue
			}
			made[kind]++
			a.createTopic(kind, fmt.Sprintf("%c%d", "pcr"[kind], made[kind]), 1+a.rng.Int32N(3))
		case r < 3:
			ts := a.w.topics.all()
			if len(ts) == 0 {
				continue
			}
			t := ts[a.rng.IntN(len(ts))]
			if t.partitions >= 5 {
				continue
			}
			a.addPartitions(t, t.partitions+1)
		case r < 5:
			t, p, ok := a.w.topics.pick(a.rng, kindPlain, kindRetention)
			if !ok {
				continue
			}
			if ev := a.listOffsets(t, p); ev != nil && ev.OK() && ev.HW > ev.LogStart && a.rng.IntN(2) == 0 {
				a.deleteRecords(t, p, ev.LogStart+a.rng.Int64N(ev.HW-ev.LogStart+1))
			}
		case r < 7:
			t, p, ok := a.w.topics.pick(a.rng, kindCompact)
			if ok {
				a.compact(t, p)
			}
		default:
			t, p, ok := a.w.topics.pick(a.rng, kindPlain, kindCompact, kindRetention)
			if ok {
				a.listOffsets(t, p)
			}
		}
	}
}

// topicConfig is the config of a topic of kind.
func topicConfig(kind topicKind, partitions int32) diskless.TopicConfig {
	cfg := diskless.TopicConfig{Partitions: partitions}
	switch kind {
	case kindCompact:
		cfg.Compact = true
		cfg.MinCleanableDirtyRatio = 0.1
	case kindRetention:
		cfg.Retention = 20 * time.Minute
	}
	return cfg
}

// createTopic creates a topic, sending the request again while its
// outcome is unknown.
func (a *actor) createTopic(kind topicKind, name string, partitions int32) bool {
	for try := 0; try < 20; try++ {
		b, id := a.broker()
		if b == nil {
			return false
		}
		ev := a.w.h.Begin(a.name, OpCreateTopic)
		ev.Broker, ev.Topic, ev.Partition = id, name, partitions
		tid, err := call(func(ctx context.Context) ([16]byte, error) {
			id, err := b.CreateTopic(ctx, name, topicConfig(kind, partitions))
			return id, err
		})
		a.w.h.End(ev, err)
		switch {
		case err == nil:
			a.w.topics.set(topic{name: name, id: tid, kind: kind, partitions: partitions})
			return true
		case kafkaerr.CodeOf(err) == kafkaerr.TopicAlreadyExists:
			return a.refreshTopics(kind)
		}
		a.sleep(100*time.Millisecond, 2*time.Second)
	}
	return false
}

// refreshTopics reads the topics back after a call whose outcome was
// unknown.
func (a *actor) refreshTopics(kind topicKind) bool {
	b, _ := a.broker()
	if b == nil {
		return false
	}
	ds, err := b.DescribeTopics(context.Background())
	if err != nil {
		return false
	}
	for _, d := range ds {
		k := kindPlain
		switch {
		case d.Config.Compact:
			k = kindCompact
		case d.Config.Retention > 0:
			k = kindRetention
		}
		a.w.topics.set(topic{name: d.Name, id: d.ID, kind: k, partitions: d.Config.Partitions})
	}
	return true
}

func (a *actor) addPartitions(t topic, n int32) {
	b, id := a.broker()
	if b == nil {
		return
	}
	ev := a.w.h.Begin(a.name, OpAddPartitions)
	ev.Broker, ev.Topic, ev.Partition = id, t.name, n
	_, err := call(func(ctx context.Context) (struct{}, error) { return struct{}{}, b.AddPartitions(ctx, t.name, n) })
	a.w.h.End(ev, err)
	if err == nil {
		t.partitions = n
		a.w.topics.set(t)
	} else {
		a.refreshTopics(t.kind)
	}
}

func (a *actor) listOffsets(t topic, p int32) *Event {
	b, id := a.broker()
	if b == nil {
		return nil
	}
	ev := a.w.h.Begin(a.name, OpListOffsets)
	ev.Broker, ev.Topic, ev.Partition = id, t.name, p
	hi, err := call(func(ctx context.Context) (diskless.ListOffsetsResult, error) {
		return b.ListOffsets(ctx, t.name, p, diskless.LatestTimestamp)
	})
	if err == nil {
		lo, lerr := call(func(ctx context.Context) (diskless.ListOffsetsResult, error) {
			return b.ListOffsets(ctx, t.name, p, diskless.EarliestTimestamp)
		})
		ev.HW, ev.LSO, ev.LogStart, err = hi.Offset, hi.LastStable, lo.Offset, lerr
	}
	return a.w.h.End(ev, err)
}

func (a *actor) deleteRecords(t topic, p int32, offset int64) {
	b, id := a.broker()
	if b == nil {
		return
	}
	ev := a.w.h.Begin(a.name, OpDeleteRecords)
	ev.Broker, ev.Topic, ev.Partition, ev.Offset = id, t.name, p, offset
	lo, err := call(func(ctx context.Context) (int64, error) { return b.DeleteRecords(ctx, t.name, p, offset) })
	if err == nil {
		ev.LogStart = lo
	}
	a.w.h.End(ev, err)
}

func (a *actor) compact(t topic, p int32) {
	b, id := a.broker()
	if b == nil {
		return
	}
	ev := a.w.h.Begin(a.name, OpCompact)
	ev.Broker, ev.Topic, ev.Partition = id, t.name, p
	st, err := call(func(ctx context.Context) (bool, error) {
		st, err := b.CompactPartition(ctx, wal.TopicPartition{TopicID: t.id, Partition: p})
		return st.Cleaned, err
	})
	if st {
		ev.Note = "cleaned"
	}
	a.w.h.End(ev, err)
}
