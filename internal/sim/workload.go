package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
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
	ev.Broker, ev.Topic, ev.Partition, ev.Records = id, t.tag(), p, recs
	ev.Producer, ev.Epoch, ev.Seq, ev.TxnRun, ev.Fenced = pid, epoch, seq, txnRun, fenced
	raw := batch(kbatch.Codecs[a.rng.IntN(len(kbatch.Codecs))], recs, pid, epoch, seq, txnRun != "")
	resp, err := call(func(ctx context.Context) (diskless.ProduceResponse, error) {
		return b.Produce(ctx, diskless.ProduceRequest{Acks: -1, Partitions: []diskless.ProducePartition{{Topic: t.name, Partition: p, Records: raw}}})
	})
	if err == nil {
		r := resp.Partitions[0]
		err = answerErr(r.ErrorCode, r.Err)
		if err == nil {
			ev.Offset, ev.Timestamp = r.BaseOffset, r.LogAppendTime
		}
	}
	return a.w.h.End(ev, err)
}

// errNoAcks is the outcome of an acks=0 produce that the broker took:
// the producer never learns whether, nor where, its records landed, so
// the history records it as a produce of unknown outcome.
var errNoAcks = errors.New("sim: acks=0, no acknowledgement")

// produceNoAcks sends one batch without a producer ID and with acks 0,
// as a fire-and-forget producer does, and records it: its records may be
// in the log or not, and no check expects them.
func (a *actor) produceNoAcks(t topic, p int32, recs []Rec) *Event {
	b, id := a.broker()
	if b == nil {
		return nil
	}
	ev := a.w.h.Begin(a.name, OpProduce)
	ev.Broker, ev.Topic, ev.Partition, ev.Records, ev.Producer, ev.Note = id, t.tag(), p, recs, -1, "acks=0"
	raw := batch(kbatch.Codecs[a.rng.IntN(len(kbatch.Codecs))], recs, -1, 0, 0, false)
	resp, err := call(func(ctx context.Context) (diskless.ProduceResponse, error) {
		return b.Produce(ctx, diskless.ProduceRequest{Acks: 0, Partitions: []diskless.ProducePartition{{Topic: t.name, Partition: p, Records: raw}}})
	})
	if err == nil {
		r := resp.Partitions[0]
		if err = answerErr(r.ErrorCode, r.Err); err == nil {
			err = errNoAcks
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
		t, p, ok := a.w.topics.pick(a.rng, kindPlain, kindCompact, kindRetention, kindAppendTime)
		if !ok {
			continue
		}
		key := fmt.Sprintf("%s/%d", t.tag(), p)
		recs := a.records(1+a.rng.IntN(4), &n, t.kind)
		if a.rng.IntN(25) == 0 {
			// Now and then a batch of a producer that asks for no
			// acknowledgement, outside the idempotent sequence.
			if a.produceNoAcks(t, p, recs) == nil {
				return
			}
			continue
		}
		acked := false
		for try := 0; try < 30 && !acked && a.w.topics.current(t); try++ {
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
		key := fmt.Sprintf("%s/%d", x.t.tag(), x.p)
		recs := a.records(1+a.rng.IntN(3), n, x.t.kind)
		acked := false
		for try := 0; try < 10 && a.w.topics.current(x.t); try++ {
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
	ev.Broker, ev.TxnID, ev.TxnRun, ev.Producer, ev.Epoch, ev.Group, ev.Topic, ev.Partition, ev.Offset = id, txnID, run, pid, epoch, group, t.tag(), p, a.txnOffset
	_, err := call(func(ctx context.Context) (struct{}, error) {
		if err := b.AddTxnOffsets(ctx, txnID, pid, epoch, group); err != nil {
			return struct{}{}, err
		}
		return struct{}{}, b.TxnCommitOffsets(ctx, txnID, pid, epoch, group, []diskless.GroupOffset{{Topic: t.name, Partition: p, Offset: a.txnOffset, LeaderEpoch: -1}})
	})
	a.w.h.End(ev, err)
	return err == nil
}
