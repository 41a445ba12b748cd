package backoff

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/diskless-go/diskless/internal/fakeclock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestPolicyDelay(t *testing.T) {
	p := Policy{Initial: 10 * time.Millisecond, Max: 75 * time.Millisecond}
	for _, c := range []struct {
		attempt int
		want    time.Duration
	}{{0, 10}, {1, 10}, {2, 20}, {3, 40}, {4, 75}, {5, 75}, {100, 75}} {
		require.Equal(t, c.want*time.Millisecond, p.Delay(c.attempt), "attempt %d", c.attempt)
	}
	require.Equal(t, time.Second, Policy{Initial: time.Hour, Max: time.Second}.Delay(1000), "overflow caps")
	require.Zero(t, Policy{}.Delay(3))

	p.Jitter = true
	for attempt := 1; attempt < 8; attempt++ {
		d := p.Initial << (attempt - 1)
		d = min(d, p.Max)
		for range 100 {
			got := p.Delay(attempt)
			require.GreaterOrEqual(t, got, d/2)
			require.LessOrEqual(t, got, d)
		}
	}
}

// TestBackoffFakeClock: Wait waits the doubled delay on its clock, Reset
// starts again, and a context that ends stops the wait.
func TestBackoffFakeClock(t *testing.T) {
	fc := fakeclock.New(time.Unix(0, 0))
	b := Backoff{Policy: Policy{Initial: time.Second, Max: 3 * time.Second}, Clock: fc}
	wait := func(ctx context.Context) chan error {
		done := make(chan error, 1)
		go func() { done <- b.Wait(ctx) }()
		for fc.Pending() == 0 {
			runtime.Gosched()
		}
		return done
	}
	for _, d := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, time.Second} {
		if d == time.Second && b.failures > 0 {
			b.Reset()
		}
		done := wait(t.Context())
		fc.Advance(d - time.Nanosecond)
		select {
		case <-done:
			t.Fatalf("woke before %v", d)
		default:
		}
		fc.Advance(time.Nanosecond)
		require.NoError(t, <-done)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := wait(ctx)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
}

var errTransient, errPermanent = errors.New("transient"), errors.New("permanent")

func TestRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := Retry{
			Backoff:        Backoff{Policy: Policy{Initial: 100 * time.Millisecond, Max: time.Second}},
			MaxAttempts:    5,
			AttemptTimeout: time.Minute,
			Retryable:      func(err error) bool { return errors.Is(err, errTransient) },
		}
		var retried []int
		r.OnRetry = func(attempt int, err error) {
			require.ErrorIs(t, err, errTransient)
			retried = append(retried, attempt)
		}
		// Succeeds at the third attempt, after 100 and 200 ms.
		start, calls := time.Now(), 0
		n, err := r.Do(t.Context(), func(ctx context.Context) error {
			_, ok := ctx.Deadline()
			require.True(t, ok, "each attempt has its timeout")
			if calls++; calls < 3 {
				return errTransient
			}
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, 3, n)
		require.Equal(t, []int{1, 2}, retried)
		require.Equal(t, 300*time.Millisecond, time.Since(start))

		// Gives up after MaxAttempts, with the last error.
		n, err = r.Do(t.Context(), func(context.Context) error { return errTransient })
		require.ErrorIs(t, err, errTransient)
		require.Equal(t, 5, n)

		// Stops at once on an error that is not retryable.
		start = time.Now()
		n, err = r.Do(t.Context(), func(context.Context) error { return errPermanent })
		require.ErrorIs(t, err, errPermanent)
		require.Equal(t, 1, n)
		require.Zero(t, time.Since(start))

		// Stops when ctx ends during a wait, with ctx's error.
		r.MaxAttempts = 0
		ctx, cancel := context.WithTimeout(t.Context(), 250*time.Millisecond)
		defer cancel()
		n, err = r.Do(ctx, func(context.Context) error { return errTransient })
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, 2, n, "250 ms: attempts at 0 and 100 ms, then the wait of 200")
	})
}
