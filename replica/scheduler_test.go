package replica

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/clock"
	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/internal/fakeclock"
	"github.com/diskless-go/diskless/wal"
)

// TestSchedulerOneWorkerPerTask: tasks due all the time on more workers
// than tasks are never run twice at once.
func TestSchedulerOneWorkerPerTask(t *testing.T) {
	s := newScheduler(clock.System, 8, "test")
	defer s.close()
	const tasks, runs = 3, 200
	var wg sync.WaitGroup
	var twice atomic.Bool
	for range tasks {
		wg.Add(1)
		var running, n atomic.Int32
		s.add("t", 0, 0, func(ctx context.Context) {
			if running.Add(1) > 1 {
				twice.Store(true)
			}
			runtime.Gosched()
			running.Add(-1)
			if n.Add(1) == runs {
				wg.Done()
			}
		})
	}
	wg.Wait()
	require.False(t, twice.Load(), "a task ran on two workers at once")
}

// TestSchedulerRemoveWaits: remove ends the context of the run in flight,
// returns only once that run has, and no run follows.
func TestSchedulerRemoveWaits(t *testing.T) {
	s := newScheduler(clock.System, 2, "test")
	defer s.close()
	started := make(chan struct{})
	var returned, after atomic.Bool
	var runs atomic.Int32
	task := s.add("t", 0, 0, func(ctx context.Context) {
		if returned.Load() {
			after.Store(true)
		}
		if runs.Add(1) == 1 {
			close(started)
			<-ctx.Done()
			returned.Store(true)
		}
	})
	<-started
	s.remove(task)
	require.True(t, returned.Load(), "remove returned before the run in flight")
	s.remove(task) // twice is fine
	s.close()
	require.False(t, after.Load(), "a removed task ran again")
	require.Equal(t, int32(1), runs.Load())
}

// TestSchedulerPeriod: on a fake clock, a task runs when it is due and
// again a period after its last run, not before.
func TestSchedulerPeriod(t *testing.T) {
	clk := fakeclock.New(time.Unix(1_764_500_000, 0))
	s := newScheduler(clk, 2, "test")
	defer s.close()
	ran := make(chan time.Time, 10)
	s.add("t", time.Second, time.Minute, func(ctx context.Context) { ran <- clk.Now() })
	start := clk.Now()
	clk.Advance(time.Second)
	require.Equal(t, start.Add(time.Second), <-ran, "due after its delay")
	// The worker re-arms the timer after the run: wait for it.
	for clk.Pending() == 0 {
		runtime.Gosched()
	}
	clk.Advance(59 * time.Second)
	require.Empty(t, ran, "ran before its period")
	clk.Advance(time.Second)
	require.Equal(t, start.Add(61*time.Second), <-ran, "due a period after its last run")
}

// emptySource is a coordinator with empty partitions that counts the
// partitions asked about.
type emptySource struct {
	mu   sync.Mutex
	seen map[wal.TopicPartition]bool
	all  chan struct{}
	want int
}

func (s *emptySource) FindBatches(ctx context.Context, tp wal.TopicPartition, offset, maxBytes int64) (coordinator.FindResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.seen[tp] {
		s.seen[tp] = true
		if len(s.seen) == s.want {
			close(s.all)
		}
	}
	return coordinator.FindResult{}, nil
}

// TestManyTasks: 10,000 partitions' tasks, all due, run on the pool's
// workers: the goroutines stay a bounded few, not one (or three) each.
func TestManyTasks(t *testing.T) {
	const n = 10_000
	s := newScheduler(clock.System, 4, "test")
	defer s.close()
	before := runtime.NumGoroutine()
	var wg sync.WaitGroup
	wg.Add(n)
	var maxG atomic.Int64
	for range n {
		var once sync.Once
		s.add("t", 0, time.Hour, func(ctx context.Context) {
			once.Do(wg.Done)
			if g := int64(runtime.NumGoroutine()); g > maxG.Load() {
				maxG.Store(g)
			}
		})
	}
	wg.Wait() // every task ran once
	require.Less(t, int(maxG.Load())-before, 50, "goroutines while running %d tasks", n)
}

// TestManyPartitions: a Materializer's partitions are caught up by its
// workers, not by goroutines of their own (each partition here has a real
// local log, so fewer than TestManyTasks's).
func TestManyPartitions(t *testing.T) {
	const n = 300
	src := &emptySource{seen: map[wal.TopicPartition]bool{}, all: make(chan struct{}), want: n}
	before := runtime.NumGoroutine()
	m, err := NewMaterializer(src, nil, t.TempDir(), &MaterializerOptions{Poll: time.Hour, Workers: 4})
	require.NoError(t, err)
	defer m.Close()
	id := [16]byte{1}
	for i := range n {
		require.NoError(t, m.Add(t.Context(), wal.TopicPartition{TopicID: id, Partition: int32(i)}, nil))
	}
	<-src.all // every partition was caught up once
	require.Less(t, runtime.NumGoroutine()-before, 50, "goroutines for %d partitions", n)
	require.NoError(t, m.Close())
}
