package clock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/clock"
	"github.com/diskless-go/diskless/internal/fakeclock"
)

func TestSleep(t *testing.T) {
	fc := fakeclock.New(time.Unix(0, 0))
	done := make(chan error, 1)
	go func() { done <- clock.Sleep(t.Context(), fc, time.Second) }()
	require.Eventually(t, func() bool { return fc.Pending() == 1 }, 5*time.Second, time.Millisecond)
	fc.Advance(999 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("Sleep returned before its time")
	default:
	}
	fc.Advance(time.Millisecond)
	require.NoError(t, <-done)

	ctx, cancel := context.WithCancel(t.Context())
	go func() { done <- clock.Sleep(ctx, fc, time.Hour) }()
	require.Eventually(t, func() bool { return fc.Pending() == 1 }, 5*time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.Zero(t, fc.Pending(), "a cancelled Sleep stops its timer")

	require.NoError(t, clock.Sleep(t.Context(), clock.System, 0))
	require.Equal(t, clock.System, clock.Or(nil))
	require.Equal(t, clock.Clock(fc), clock.Or(fc))
}

func TestAfterAndUntil(t *testing.T) {
	fc := fakeclock.New(time.Unix(0, 0))
	ch, _ := clock.After(fc, time.Second)
	fc.Advance(999 * time.Millisecond)
	select {
	case <-ch:
		t.Fatal("After fired before its time")
	default:
	}
	fc.Advance(time.Millisecond)
	require.Equal(t, time.Unix(1, 0), <-ch)

	_, stop := clock.After(fc, time.Second)
	require.True(t, stop.Stop())
	require.Zero(t, fc.Pending())

	require.Equal(t, 2*time.Second, clock.Until(fc, time.Unix(3, 0)))
	require.Equal(t, time.Second, clock.Since(fc, time.Unix(0, 0)))
}

func TestTicker(t *testing.T) {
	fc := fakeclock.New(time.Unix(0, 0))
	tk := clock.NewTicker(fc, time.Second)
	fc.Advance(time.Second)
	require.Equal(t, time.Unix(1, 0), <-tk.C)
	fc.Advance(3 * time.Second) // the reader is slow: ticks drop, not queue
	require.Equal(t, time.Unix(2, 0), <-tk.C)
	select {
	case <-tk.C:
		t.Fatal("a ticker queued more than one tick")
	default:
	}
	tk.Stop()
	require.Zero(t, fc.Pending(), "Stop stops the pending timer")
	fc.Advance(time.Hour)
	select {
	case <-tk.C:
		t.Fatal("a tick after Stop")
	default:
	}
	require.Panics(t, func() { clock.NewTicker(fc, 0) })
}
