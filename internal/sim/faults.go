package sim

import (
	"context"
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/diskless-go/diskless/faultbucket"
)

// FaultOptions say which faults a run injects; the zero value injects
// none.
type FaultOptions struct {
	// Mean is the mean virtual time between two faults; 0 means no
	// faults.
	Mean time.Duration
	// Crashes allows broker crashes (and restarts, on the same data
	// folder or a wiped one).
	Crashes bool
	// Cluster allows the faults of the metadata service (clusterfaults.go)
	// when the run has several brokers.
	Cluster bool
	// Network allows the faults of the network between the brokers
	// (clusterfaults.go) when the run has several brokers.
	Network bool
}

// DefaultFaults are the faults of TestSeeds: one every 3 minutes on
// average, crashes included, and with several brokers the faults of the
// metadata service and of the network too.
var DefaultFaults = FaultOptions{Mean: 3 * time.Minute, Crashes: true, Cluster: true, Network: true}

// ClusterFaults are the faults of the cluster seeds of TestSeeds, whose
// runs are minutes long: one every 20 seconds on average, of every kind.
var ClusterFaults = FaultOptions{Mean: 20 * time.Second, Crashes: true, Cluster: true, Network: true}

// injector is the actor that injects faults: bursts of failed calls,
// latency spikes, outages, stalls, PUTs that land but whose answer is
// lost, and crashes (in a cluster, most of them leave the crashed
// process's lease to expire: Cluster.Crash; some revoke it:
// Cluster.CrashRevoking).
func (a *actor) injector(opts FaultOptions, count *atomic.Int64) {
	if opts.Mean <= 0 {
		return
	}
	for a.sleep(0, 2*opts.Mean) {
		node := a.rng.IntN(a.w.c.Brokers())
		f := a.w.c.Faults(node)
		if f == nil {
			continue
		}
		kinds := 5
		if opts.Crashes {
			kinds = 7 // a crash is twice as likely as each other fault
		}
		store := kinds
		if a.w.c.Service() != nil {
			if opts.Cluster {
				kinds += numClusterFaults
			}
			if opts.Network {
				kinds += numNetFaults
			}
		}
		d := time.Duration(5+a.rng.IntN(90)) * time.Second
		var note string
		r := a.w.rules[node]
		k := a.rng.IntN(kinds)
		if k >= store {
			k -= store
			if !opts.Cluster {
				k += numClusterFaults
			}
			note = a.clusterFault(k, node, d)
			count.Add(1)
			ev := a.w.h.Begin(a.name, OpFault)
			ev.Broker, ev.Note = node, note
			a.w.h.End(ev, nil)
			continue
		}
		switch k {
		case 0:
			op := faultbucket.Op(a.rng.IntN(int(faultbucket.NumOps)))
			rate := 0.05 + 0.4*a.rng.Float64()
			note = fmt.Sprintf("errors %v %.2f for %v", op, rate, d)
			r.set(func(r *rules) { r.mu.errRate[op] = rate })
			a.later(d, func() { r.set(func(r *rules) { r.mu.errRate[op] = 0 }) })
		case 1:
			// Constant latencies: a distribution would draw from the
			// faultbucket's one random source in the order calls come.
			p := f.Profile()
			base := time.Duration(100+a.rng.IntN(2000)) * time.Millisecond
			p.Ops[faultbucket.Put].Latency = faultbucket.Constant(base)
			p.Ops[faultbucket.Get].Latency = faultbucket.Constant(base / 2)
			note = fmt.Sprintf("latency %v for %v", base, d)
			f.SetProfile(p)
			a.later(d, func() {
				p.Ops[faultbucket.Put].Latency, p.Ops[faultbucket.Get].Latency = nil, nil
				f.SetProfile(p)
			})
		case 2:
			note = fmt.Sprintf("outage %v", d)
			f.Outage(d)
		case 3:
			d /= 4
			note = fmt.Sprintf("stall %v", d)
			f.Stall(d)
		case 4:
			// PUTs land, and the answer of some is lost.
			rate := 0.1 + 0.5*a.rng.Float64()
			note = fmt.Sprintf("lost PUT answers %.2f for %v", rate, d)
			r.set(func(r *rules) { r.mu.lostRate = rate })
			a.later(d, func() { r.set(func(r *rules) { r.mu.lostRate = 0 }) })
		default:
			wipe := a.rng.IntN(3) == 0
			down := time.Duration(a.rng.IntN(10000)) * time.Millisecond
			note = fmt.Sprintf("crash wipe=%v down %v", wipe, down)
			crash := a.w.c.Crash
			if a.w.c.Service() != nil {
				// In a cluster, one crash in four revokes the lease
				// (the process said goodbye to the metadata service
				// before it died); the others leave it to its TTL.
				// Chosen from the down time already drawn, not by a
				// draw of its own, so that the faults that follow are
				// the ones each seed had before there was a choice.
				if (down/time.Millisecond)%4 == 0 {
					crash = a.w.c.CrashRevoking
					note += " lease revoked"
				} else {
					note += " lease left to expire"
				}
			}
			ev := a.w.h.Begin(a.name, OpCrash)
			ev.Broker, ev.Note = node, note
			a.w.h.End(ev, crash(node, wipe))
			count.Add(1)
			time.Sleep(down)
			// A broker that will not open stays down: the final read
			// tries once more, and the checker reports it.
			for try := 0; try < 30; try++ {
				ev := a.w.h.Begin(a.name, OpRestart)
				ev.Broker = node
				err := a.w.c.Restart(context.Background(), node)
				if a.w.h.End(ev, err); err == nil {
					a.w.c.Faults(node).SetHook(r.hook)
					break
				}
				time.Sleep(time.Second)
			}
			continue
		}
		count.Add(1)
		ev := a.w.h.Begin(a.name, OpFault)
		ev.Broker, ev.Note = node, note
		a.w.h.End(ev, nil)
	}
}

// rules are the call failures injected into one broker's calls: each
// call is failed, or not, by a hash of the seed, its kind, its key and
// how many calls of that kind to that key came before, rather than by a
// draw from one random source in the order the calls come, so that
// concurrent calls at one virtual instant get the same faults whatever
// order the scheduler runs them in. It is safe for concurrent use.
type rules struct {
	seed uint64
	mu   struct {
		sync.Mutex
		errRate  [faultbucket.NumOps]float64 // fail before the effect
		lostRate float64                     // PUTs: fail after the effect
		calls    map[string]uint64
	}
}

func newRules(seed uint64) *rules {
	r := &rules{seed: seed}
	r.mu.calls = map[string]uint64{}
	return r
}

// set changes the rules under their lock.
func (r *rules) set(f func(*rules)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r)
}

// clear removes every rule.
func (r *rules) clear() {
	r.set(func(r *rules) { r.mu.errRate, r.mu.lostRate = [faultbucket.NumOps]float64{}, 0 })
}

// hook is the faultbucket.Hook of the rules.
func (r *rules) hook(op faultbucket.Op, key string) *faultbucket.Error {
	r.mu.Lock()
	rate, lost := r.mu.errRate[op], r.mu.lostRate
	if op != faultbucket.Put {
		lost = 0
	}
	if rate == 0 && lost == 0 {
		r.mu.Unlock()
		return nil
	}
	k := op.String() + " " + key
	r.mu.calls[k]++
	n := r.mu.calls[k]
	r.mu.Unlock()
	h := fnv.New64a()
	fmt.Fprintf(h, "%d %s %d", r.seed, k, n)
	x := mix(h.Sum64())
	u1 := float64(x>>11) / (1 << 53)
	u2 := float64(mix(x)>>11) / (1 << 53)
	switch {
	case u1 < rate:
		return &faultbucket.Error{}
	case u2 < lost:
		return &faultbucket.Error{AfterEffect: true}
	}
	return nil
}

// mix is splitmix64's finaliser.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// later calls f after d of virtual time, or at once when the workload
// ends, in the injector's goroutine's stead: faults are undone before the
// run's final read.
func (a *actor) later(d time.Duration, f func()) {
	a.w.undo.Add(1)
	go func() {
		defer a.w.undo.Done()
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-a.w.stop.Done():
		}
		f()
	}()
}
