package sim

import (
	"context"
	"fmt"
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
}

// DefaultFaults are the faults of TestSeeds: one every 3 minutes on
// average, crashes included.
var DefaultFaults = FaultOptions{Mean: 3 * time.Minute, Crashes: true}

// injector is the actor that injects faults: bursts of failed calls,
// latency spikes, outages, stalls, PUTs that land but whose answer is
// lost, and crashes.
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
			kinds = 6
		}
		d := time.Duration(5+a.rng.IntN(90)) * time.Second
		var note string
		switch a.rng.IntN(kinds) {
		case 0:
			op := faultbucket.Op(a.rng.IntN(int(faultbucket.NumOps)))
			rate := 0.05 + 0.4*a.rng.Float64()
			note = fmt.Sprintf("errors %v %.2f for %v", op, rate, d)
			f.SetErrorRate(op, rate)
			a.later(d, func() { f.SetErrorRate(op, 0) })
		case 1:
			p := f.Profile()
			base := time.Duration(100+a.rng.IntN(2000)) * time.Millisecond
			p.Ops[faultbucket.Put].Latency = faultbucket.Uniform(base, base/2)
			p.Ops[faultbucket.Get].Latency = faultbucket.Uniform(base/2, base/4)
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
			seed := a.rng.Uint64()
			var n atomic.Uint64
			note = fmt.Sprintf("lost PUT answers %.2f for %v", rate, d)
			f.SetHook(func(op faultbucket.Op, key string) *faultbucket.Error {
				if op != faultbucket.Put {
					return nil
				}
				x := (seed + n.Add(1)) * 0x9e3779b97f4a7c15
				if float64(x>>11)/(1<<53) < rate {
					return &faultbucket.Error{AfterEffect: true}
				}
				return nil
			})
			a.later(d, func() { f.SetHook(nil) })
		case 5:
			wipe := a.rng.IntN(3) == 0
			down := time.Duration(a.rng.IntN(10000)) * time.Millisecond
			note = fmt.Sprintf("crash wipe=%v down %v", wipe, down)
			ev := a.w.h.Begin(a.name, OpCrash)
			ev.Broker, ev.Note = node, note
			a.w.h.End(ev, a.w.c.Crash(node, wipe))
			count.Add(1)
			time.Sleep(down)
			for {
				ev := a.w.h.Begin(a.name, OpRestart)
				ev.Broker = node
				err := a.w.c.Restart(context.Background(), node)
				if a.w.h.End(ev, err); err == nil {
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
