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
