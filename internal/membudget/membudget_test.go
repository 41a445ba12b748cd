package membudget

import (
	"context"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestBudget(t *testing.T) {
	ctx := t.Context()
	b := New(100)
	require.NoError(t, b.Acquire(ctx, 60))
	require.False(t, b.TryAcquire(50))
	got := make(chan int64, 3)
	go func() { require.NoError(t, b.Acquire(ctx, 50)); got <- 50 }()
	for b.waiting() != 1 {
		runtime.Gosched()
	}
	go func() { require.NoError(t, b.Acquire(ctx, 10)); got <- 10 }() // fits, but waits its turn
	for b.waiting() != 2 {
		runtime.Gosched()
	}
	require.False(t, b.TryAcquire(1), "behind the waiters")
	b.Release(60)
	require.ElementsMatch(t, []int64{50, 10}, []int64{<-got, <-got})
	require.Equal(t, int64(60), b.InUse())

	// A taker whose context ends takes nothing.
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error)
	go func() { errc <- b.Acquire(cctx, 200) }() // more than the whole: alone
	for b.waiting() != 1 {
		runtime.Gosched()
	}
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
	require.Equal(t, int64(60), b.InUse())

	b.Release(60)
	require.NoError(t, b.Acquire(ctx, 200), "more than the whole budget goes alone")
	require.False(t, b.TryAcquire(1))
	b.Release(200)
	require.Zero(t, b.InUse())
}

func (b *Budget) waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.mu.waiters)
}
