package replica

import (
	"container/heap"
	"context"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/diskless-go/diskless/clock"
)

// scheduler runs periodic work for many partitions on a fixed pool of
// workers: a partition's work is a task, due again every period after it
// last finished, kept in a heap by due time. One clock timer, for the
// earliest due task, wakes the workers; so 10,000 partitions cost 10,000
// heap entries, not 10,000 goroutines. A task is never run by two workers
// at once (a running task is out of the heap); remove waits for its run in
// flight. It is safe for concurrent use.
type scheduler struct {
	clk    clock.Clock
	label  string
	ctx    context.Context // ended by close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu struct {
		sync.Mutex
		cond    *sync.Cond // signalled when a task may be due or on close
		due     taskHeap
		timer   clock.Timer // fires at timerAt, for due[0]
		timerAt time.Time   // zero: no timer pending
		closed  bool
	}
}

// task is one partition's periodic work.
type task struct {
	name   string
	run    func(ctx context.Context)
	period time.Duration
	ctx    context.Context // ended by remove
	cancel context.CancelFunc

	// Guarded by scheduler.mu.
	at      time.Time     // when it is due
	index   int           // in the heap; -1: not in it
	running bool          // a worker runs it
	removed bool          // remove was called
	idle    chan struct{} // closed when a removed task's run ends
}

// newScheduler starts workers workers on clk.
func newScheduler(clk clock.Clock, workers int, label string) *scheduler {
	s := &scheduler{clk: clk, label: label}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mu.cond = sync.NewCond(&s.mu.Mutex)
	for range workers {
		s.wg.Go(func() {
			pprof.Do(s.ctx, pprof.Labels("diskless", label), s.work)
		})
	}
	return s
}

// add schedules run every period, first after delay (0: at once). It
// returns nil if the scheduler is closed.
func (s *scheduler) add(name string, delay, period time.Duration, run func(ctx context.Context)) *task {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil
	}
	t := &task{name: name, run: run, period: period, at: s.clk.Now().Add(delay), index: -1}
	t.ctx, t.cancel = context.WithCancel(s.ctx)
	heap.Push(&s.mu.due, t)
	s.wakeLocked()
	return t
}

// remove unschedules t, ends the context of its run in flight, if any,
// and waits for that run to return. A nil t is a no-op.
func (s *scheduler) remove(t *task) {
	if t == nil {
		return
	}
	t.cancel()
	s.mu.Lock()
	if t.removed {
		s.mu.Unlock()
		return
	}
	t.removed = true
	if t.index >= 0 {
		heap.Remove(&s.mu.due, t.index)
	}
	var idle chan struct{}
	if t.running {
		t.idle = make(chan struct{})
		idle = t.idle
	}
	s.mu.Unlock()
	if idle != nil {
		<-idle
	}
}

// close ends every run's context and waits for the workers. Tasks left
// in the heap are dropped. It is safe to call twice.
func (s *scheduler) close() {
	s.mu.Lock()
	s.mu.closed = true
	if s.mu.timer != nil {
		s.mu.timer.Stop()
	}
	s.mu.cond.Broadcast()
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// work runs due tasks until the scheduler closes.
func (s *scheduler) work(ctx context.Context) {
	s.mu.Lock()
	for {
		t := s.nextLocked()
		if t == nil {
			s.mu.Unlock()
			return
		}
		t.running = true
		s.mu.Unlock()
		pprof.Do(t.ctx, pprof.Labels("diskless", s.label, "partition", t.name), t.run)
		pprof.SetGoroutineLabels(ctx)
		s.mu.Lock()
		t.running = false
		switch {
		case t.removed:
			if t.idle != nil {
				close(t.idle)
			}
		case !s.mu.closed:
			t.at = s.clk.Now().Add(t.period)
			heap.Push(&s.mu.due, t)
			s.wakeLocked()
		}
	}
}

// nextLocked waits for a due task and pops it; nil: the scheduler closed.
func (s *scheduler) nextLocked() *task {
	for {
		if s.mu.closed {
			return nil
		}
		if len(s.mu.due) > 0 {
			t := s.mu.due[0]
			now := s.clk.Now()
			if !t.at.After(now) {
				heap.Pop(&s.mu.due)
				if len(s.mu.due) > 0 {
					s.mu.cond.Signal() // another may be due too
				}
				return t
			}
			s.armLocked(t.at, now)
		}
		s.mu.cond.Wait()
	}
}

// wakeLocked wakes a worker if the earliest task may have changed.
func (s *scheduler) wakeLocked() { s.mu.cond.Signal() }

// armLocked makes sure a timer wakes the workers by at.
func (s *scheduler) armLocked(at, now time.Time) {
	if !s.mu.timerAt.IsZero() && !s.mu.timerAt.After(at) {
		return // an earlier (or the same) timer is pending
	}
	if s.mu.timer != nil {
		s.mu.timer.Stop()
	}
	s.mu.timerAt = at
	s.mu.timer = s.clk.AfterFunc(at.Sub(now), func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.mu.timerAt.Equal(at) {
			s.mu.timerAt = time.Time{}
		}
		s.mu.cond.Broadcast()
	})
}

// taskHeap orders tasks by due time (container/heap).
type taskHeap []*task

func (h taskHeap) Len() int           { return len(h) }
func (h taskHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h taskHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *taskHeap) Push(x any) {
	t := x.(*task)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *taskHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	t.index = -1
	*h = old[:len(old)-1]
	return t
}
