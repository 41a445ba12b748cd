package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"gocloud.dev/blob"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/cluster"
	"github.com/diskless-go/diskless/cluster/memcluster"
	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/faultbucket"
)

// Options configure a run.
type Options struct {
	// Dir holds the brokers' data folders; required (t.TempDir()).
	Dir string
	// Duration is the virtual time the workload runs; 0 means 1 hour.
	Duration time.Duration
	// Faults are the faults injected.
	Faults FaultOptions
	// WrapStore is ClusterOptions.WrapStore.
	WrapStore func(*blob.Bucket) *blob.Bucket
	// Brokers is ClusterOptions.Brokers: 0 means 1, more run a cluster.
	Brokers int
	// WrapBackend is ClusterOptions.WrapBackend.
	WrapBackend func(*memcluster.Service) cluster.Backend
	// Skew is ClusterOptions.Skew.
	Skew time.Duration
	// TxnShard0 keeps the transactional IDs on shard 0 (they fall on
	// any shard by default). Runs used it while the shards' producer IDs
	// could collide (foundBugs' "producer-ids"); it stays for comparing.
	TxnShard0 bool
}

// Result is what a run did and found.
type Result struct {
	Seed    uint64
	History *History
	// Simulated is the virtual time the run took, final read included.
	Simulated time.Duration
	// Faults counts the faults injected.
	Faults int64
	// Violations are the guarantees the history breaks.
	Violations []Violation
}

// Run runs one seed: it starts a cluster, runs the seeded workload and
// faults for opts.Duration of virtual time, undoes the faults, waits for
// the transactions left open to time out, reads every partition back
// whole, waits for the WAL objects the read did not need to be deleted
// (objectsTail: some twenty minutes of virtual time), closes the cluster
// and checks the history. It should run inside
// a testing/synctest bubble, where its hours of virtual time take
// seconds; outside one it runs in real time.
//
// The seed fixes every random choice: of the workload's actors, of the
// faults and of the store's latencies. What it does not fix is the order
// in which the Go scheduler runs goroutines that are ready at the same
// virtual instant, so two runs of a seed may interleave their calls
// differently.
func Run(seed uint64, opts Options) (*Result, error) {
	if opts.Duration == 0 {
		opts.Duration = time.Hour
	}
	start := time.Now()
	c, err := NewCluster(context.Background(), ClusterOptions{Dir: opts.Dir, Seed: seed, WrapStore: opts.WrapStore, Brokers: opts.Brokers, WrapBackend: opts.WrapBackend, Skew: opts.Skew})
	if err != nil {
		return nil, err
	}
	res := &Result{Seed: seed, History: NewHistory()}
	stop, cancel := context.WithTimeout(context.Background(), opts.Duration)
	defer cancel()
	w := &world{c: c, h: res.History, topics: newTopicSet(), stop: stop}
	c.objects.setMissing(func(broker int, key, note string) {
		ev := w.h.Begin("store", OpObjectMissing)
		ev.Broker, ev.Note = broker, note
		w.h.End(ev, nil)
	})
	for i := range c.Brokers() {
		w.rules = append(w.rules, newRules(seed^uint64(i)<<40))
		c.Faults(i).SetHook(w.rules[i].hook)
	}
	admin := newActor(w, seed, "admin", 0)
	for kind, parts := range []int32{2, 2, 1} {
		if !admin.createTopic(topicKind(kind), fmt.Sprintf("%c0", "pcr"[kind]), parts) {
			c.Close()
			return nil, errors.New("sim: creating the first topics failed")
		}
	}
	txnIDs := []string{"tx-a", "tx-b"}
	if c.svc != nil && opts.TxnShard0 {
		for i, id := range txnIDs {
			for n := 0; coordinator.ShardOfTxn(txnIDs[i], c.opts.Shards) != 0; n++ {
				txnIDs[i] = fmt.Sprintf("%s%d", id, n)
			}
		}
	}
	var faults atomic.Int64
	var wg sync.WaitGroup
	actors := []func(){
		admin.admin,
		newActor(w, seed, "idem1", 1).idempotent,
		newActor(w, seed, "idem2", 2).idempotent,
		func() { newActor(w, seed, "txnA", 3).transactional(txnIDs[0]) },
		func() { newActor(w, seed, "txnB", 4).transactional(txnIDs[1]) },
		func() { newActor(w, seed, "rc", 5).consumer("g-rc", true) },
		func() { newActor(w, seed, "ru", 6).consumer("g-ru", false) },
		func() { newActor(w, seed, "faults", 7).injector(opts.Faults, &faults) },
	}
	for _, f := range actors {
		wg.Go(f)
	}
	wg.Wait()
	w.undo.Wait()
	res.Faults = faults.Load()

	// Quiet: no faults; the transactions left open time out and are
	// aborted by the broker (TxnCheckInterval), then everything is read.
	for i := range c.Brokers() {
		w.rules[i].clear()
		if f := c.Faults(i); f != nil {
			f.EndOutage()
			f.SetProfile(faultbucket.Profile{})
		}
	}
	if svc := c.Service(); svc != nil {
		c.Network().Heal()
		svc.SetWatchDelay(0)
		for i := range c.Brokers() {
			svc.ResumeLease(int32(i))
		}
	}
	time.Sleep(2 * time.Minute)
	// The final read is from processes that rebuilt their state from
	// the store alone: nothing a cache still held can hide a loss.
	// A broker that does not open is reported by the checker
	// (restartable), and so are the partitions left unread.
	up := true
	c.objects.beginFinal()
	for i := range c.Brokers() {
		ev := w.h.Begin("final", OpRestart)
		ev.Broker, ev.Note = i, "clean stop, data folder wiped"
		err = c.Stop(i, true)
		if err == nil {
			err = c.Restart(context.Background(), i)
		}
		if w.h.End(ev, err); err != nil {
			up = false
		}
	}
	var finalErr error
	if up {
		finalErr = finalRead(w)
	}
	if up && finalErr == nil {
		// The objects the final read did not need must go: the
		// lifecycle's and the orphan collector's graces run out.
		objectsTail(w)
	}
	res.Simulated = time.Since(start)
	err = errors.Join(finalErr, c.Close())
	res.Violations = Check(res.History.Events())
	return res, err
}

// finalRead deletes the topics whose delete never got through, then
// reads every partition whole, read_uncommitted and read_committed, into
// OpFinalRead events.
func finalRead(w *world) error {
	a := &actor{w: w, name: "final", rng: rand.New(rand.NewPCG(0, 0))}
	w.stop = context.Background()
	// A delete that failed every try under the faults is finished now:
	// the topic's objects must go by the end (no-object-leak).
	for _, t := range w.topics.undeleted() {
		if !a.deleteTopic(t) {
			return fmt.Errorf("sim: the final phase could not delete topic %s", t.tag())
		}
	}
	for _, t := range w.topics.all() {
		for p := range t.partitions {
			for _, rc := range []bool{false, true} {
				if err := a.readAll(t.name, p, rc); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// readAll reads a partition from its log start to its high watermark.
func (a *actor) readAll(name string, p int32, rc bool) error {
	b, id := a.broker()
	if b == nil {
		return errors.New("sim: no broker is up for the final read")
	}
	ev := a.w.h.Begin(a.name, OpFinalRead)
	ev.Broker, ev.Topic, ev.Partition, ev.ReadCommitted = id, a.w.topics.tagFor(name), p, rc
	// Right after the restarts a broker may not know every topic yet
	// (a shard's leadership is still moving): UNKNOWN_TOPIC_OR_PARTITION
	// is retriable, and a client retries it.
	lo, err := b.ListOffsets(context.Background(), name, p, diskless.EarliestTimestamp)
	for tries := 1; err != nil && tries < 20 && retriable(err); tries++ {
		time.Sleep(time.Second)
		lo, err = b.ListOffsets(context.Background(), name, p, diskless.EarliestTimestamp)
	}
	if err != nil {
		a.w.h.End(ev, err)
		return err
	}
	ev.Offset = lo.Offset
	next := lo.Offset
	for tries := 0; ; {
		resp, err := b.Fetch(context.Background(), diskless.FetchRequest{ReadCommitted: rc, Partitions: []diskless.FetchPartition{{Topic: name, Partition: p, Offset: next}}})
		var r diskless.PartitionFetchResponse
		if err == nil {
			r = resp.Partitions[0]
			err = answerErr(r.ErrorCode, r.Err)
		}
		if err != nil {
			if tries++; tries < 20 && retriable(err) {
				time.Sleep(time.Second)
				continue
			}
			a.w.h.End(ev, fmt.Errorf("at offset %d: %w", next, err))
			return nil // the checker reports what could not be read
		}
		ev.HW, ev.LSO, ev.LogStart = r.HighWatermark, r.LastStableOffset, r.LogStartOffset
		end := r.HighWatermark
		if rc {
			end = r.LastStableOffset
		}
		if next >= end {
			a.w.h.End(ev, nil)
			return nil
		}
		recs, n, err := decode(r.Records, next, rc, r.AbortedTransactions)
		if err != nil {
			a.w.h.End(ev, err)
			return nil
		}
		ev.Records = append(ev.Records, recs...)
		if n <= next {
			a.w.h.End(ev, fmt.Errorf("sim: no progress at offset %d", next))
			return nil
		}
		next = n
	}
}
