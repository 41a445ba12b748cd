package hedge

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestDelay: the delay is the quantile of the recent durations, at least
// the minimum; no hedging until enough are known, when the quantile
// passes the maximum, or with a negative maximum.
func TestDelay(t *testing.T) {
	h := New(Options{MinDelay: 5 * time.Millisecond, MaxDelay: time.Second, Quantile: 0.9, Samples: 128, MinSamples: 16})
	for i := 1; i < 16; i++ {
		h.Record(time.Duration(i) * time.Millisecond)
	}
	_, ok := h.Delay()
	require.False(t, ok, "too few known: no hedging yet")
	for i := 1000; i > 0; i-- {
		h.Record(time.Duration(i) * time.Millisecond) // the last 128: 128 ms down to 1
	}
	d, ok := h.Delay()
	require.True(t, ok)
	require.Equal(t, 116*time.Millisecond, d, "the p90 of the last 128")
	for range 128 {
		h.Record(time.Millisecond)
	}
	d, _ = h.Delay()
	require.Equal(t, 5*time.Millisecond, d, "no less than the minimum")
	for range 128 {
		h.Record(time.Minute)
	}
	_, ok = h.Delay()
	require.False(t, ok, "slower than the maximum all round: not hedged")
	_, ok = New(Options{MaxDelay: -1}).Delay()
	require.False(t, ok)
	_, ok = New(Options{MaxDelay: time.Second}).Delay()
	require.False(t, ok, "nothing learned")
}

// learned returns a Hedger whose delay is d.
func learned(d time.Duration) *Hedger {
	h := New(Options{MaxDelay: time.Hour, Quantile: 0.5, Samples: 4, MinSamples: 4})
	for range 4 {
		h.Record(d)
	}
	return h
}

var errA, errB = errors.New("a"), errors.New("b")

// call is a scripted f: the i-th call waits waits[i] (or until its
// context ends, failing with its error) and returns errs[i].
func call(waits []time.Duration, errs []error, calls *atomic.Int32) func(context.Context) error {
	return func(ctx context.Context) error {
		i := calls.Add(1) - 1
		select {
		case <-time.After(waits[i]):
			return errs[i]
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func TestDo(t *testing.T) {
	for _, c := range []struct {
		name     string
		waits    []time.Duration
		errs     []error
		want     Result
		took     time.Duration
		calls    int32
		recorded bool
	}{
		{"fast", []time.Duration{50 * time.Millisecond}, []error{nil}, Result{}, 50 * time.Millisecond, 1, true},
		{"fails before the delay", []time.Duration{50 * time.Millisecond}, []error{errA}, Result{Errs: []error{errA}}, 50 * time.Millisecond, 1, false},
		{"hedge wins", []time.Duration{time.Hour, 30 * time.Millisecond}, []error{nil, nil}, Result{Hedged: true, HedgeWon: true}, 130 * time.Millisecond, 2, true},
		{"first wins after the delay", []time.Duration{150 * time.Millisecond, time.Hour}, []error{nil, nil}, Result{Hedged: true}, 150 * time.Millisecond, 2, true},
		{"first fails, hedge wins", []time.Duration{110 * time.Millisecond, 30 * time.Millisecond}, []error{errA, nil}, Result{Hedged: true, HedgeWon: true}, 130 * time.Millisecond, 2, true},
		{"both fail", []time.Duration{150 * time.Millisecond, 10 * time.Millisecond}, []error{errA, errB}, Result{Hedged: true, Errs: []error{errB, errA}}, 150 * time.Millisecond, 2, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := learned(100 * time.Millisecond)
				var wg sync.WaitGroup
				var calls atomic.Int32
				start := time.Now()
				res := h.Do(t.Context(), &wg, call(c.waits, c.errs, &calls))
				require.Equal(t, c.took, time.Since(start))
				require.Equal(t, c.want, res)
				if len(c.want.Errs) > 0 {
					require.ErrorIs(t, res.Err(), c.want.Errs[0])
				} else {
					require.NoError(t, res.Err())
				}
				wg.Wait() // the loser ends with Do's context
				require.Equal(t, c.calls, calls.Load())
				h.mu.Lock()
				require.Equal(t, 4+map[bool]int{true: 1}[c.recorded], h.mu.n)
				h.mu.Unlock()
			})
		})
	}
}

// TestDoUnlearned: before a delay is learned, f runs once in the caller's
// goroutine, with the caller's context.
func TestDoUnlearned(t *testing.T) {
	h := New(Options{MaxDelay: time.Hour, Quantile: 0.9, Samples: 8, MinSamples: 2})
	type key struct{}
	ctx := context.WithValue(t.Context(), key{}, 1)
	res := h.Do(ctx, nil, func(got context.Context) error {
		require.Equal(t, ctx, got)
		return errA
	})
	require.Equal(t, Result{Errs: []error{errA}}, res)
	require.Zero(t, h.mu.n, "a failure is not recorded")
	require.NoError(t, h.Do(ctx, nil, func(context.Context) error { return nil }).Err())
	require.Equal(t, 1, h.mu.n)
}
