package metalog_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/coordinator/metalog/metalogtest"
	"github.com/diskless-go/diskless/internal/fakeclock"
)

// requireNoResult checks that ch has no result yet.
func requireNoResult(t *testing.T, ch <-chan metalog.AppendResult) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("unexpected result %+v", r)
	default:
	}
}

func TestMemLatency(t *testing.T) {
	clock := fakeclock.New(time.Unix(0, 0))
	l := metalog.NewMem(&metalog.MemOptions{Latency: 10 * time.Millisecond, Clock: clock})
	t.Cleanup(func() { l.Close() })

	ch0 := l.Append([]byte("a"))
	clock.Advance(4 * time.Millisecond)
	ch1 := l.Append([]byte("b"))
	require.Equal(t, int64(2), l.End())
	requireNoResult(t, ch0)
	require.Empty(t, metalogtest.ReadAll(t, l, 0), "an entry is visible only once durable")

	clock.Advance(6 * time.Millisecond) // a is due, b is not
	r := <-ch0
	require.NoError(t, r.Err)
	require.Equal(t, int64(0), r.Offset)
	require.Len(t, metalogtest.ReadAll(t, l, 0), 1)
	requireNoResult(t, ch1)

	clock.Advance(4 * time.Millisecond)
	r = <-ch1
	require.NoError(t, r.Err)
	require.Equal(t, int64(1), r.Offset)
	require.Zero(t, clock.Pending())
}

func TestMemMaxInFlight(t *testing.T) {
	clock := fakeclock.New(time.Unix(0, 0))
	l := metalog.NewMem(&metalog.MemOptions{Latency: time.Millisecond, MaxInFlight: 2, Clock: clock})
	t.Cleanup(func() { l.Close() })
	require.Equal(t, 2, l.MaxInFlight())
	ch0, ch1 := l.Append([]byte("0")), l.Append([]byte("1"))
	third := make(chan (<-chan metalog.AppendResult))
	go func() { third <- l.Append([]byte("2")) }()
	select {
	case <-third:
		t.Fatal("Append did not block at MaxInFlight")
	default:
	}
	clock.Advance(time.Millisecond)
	require.Equal(t, int64(0), (<-ch0).Offset)
	require.Equal(t, int64(1), (<-ch1).Offset)
	ch2 := <-third
	clock.Advance(time.Millisecond)
	require.Equal(t, int64(2), (<-ch2).Offset)
}

// TestMemFailNext: the injected failure comes after the Latency, in
// order, and fails what is queued behind it.
func TestMemFailNext(t *testing.T) {
	clock := fakeclock.New(time.Unix(0, 0))
	l := metalog.NewMem(&metalog.MemOptions{Latency: time.Millisecond, Clock: clock})
	t.Cleanup(func() { l.Close() })
	boom := errors.New("boom")
	ch0 := l.Append([]byte("0"))
	l.FailNext(boom)
	ch1, ch2 := l.Append([]byte("1")), l.Append([]byte("2"))
	clock.Advance(time.Millisecond)
	require.NoError(t, (<-ch0).Err)
	require.ErrorIs(t, (<-ch1).Err, boom)
	require.ErrorIs(t, (<-ch2).Err, boom)
	require.Equal(t, int64(1), l.End())
	require.ErrorIs(t, (<-l.Append([]byte("3"))).Err, boom)
	require.Len(t, metalogtest.ReadAll(t, l, 0), 1)
	ch := l.Append([]byte("4"))
	clock.Advance(time.Millisecond)
	r := <-ch
	require.NoError(t, r.Err)
	require.Equal(t, int64(1), r.Offset)
}

// TestMemCloseFailsPending: Close fails appends still waiting; their
// entries never enter the log.
func TestMemCloseFailsPending(t *testing.T) {
	clock := fakeclock.New(time.Unix(0, 0))
	l := metalog.NewMem(&metalog.MemOptions{Latency: time.Second, Clock: clock})
	ch := l.Append([]byte("x"))
	require.NoError(t, l.Close())
	require.ErrorIs(t, (<-ch).Err, metalog.ErrClosed)
	require.Zero(t, clock.Pending())
	w := l.Writer()
	t.Cleanup(func() { w.Close() })
	require.Equal(t, int64(0), w.End())
}

// TestMemFencedAtDueTime: with Latency, the fencing test is made when
// the entry enters the log, not when Append is called.
func TestMemFencedAtDueTime(t *testing.T) {
	clock := fakeclock.New(time.Unix(0, 0))
	a := metalog.NewMem(&metalog.MemOptions{Latency: 10 * time.Millisecond, Clock: clock})
	t.Cleanup(func() { a.Close() })
	b := a.Writer()
	t.Cleanup(func() { b.Close() })
	cha := a.Append([]byte("a"))
	clock.Advance(5 * time.Millisecond)
	chb := b.Append([]byte("b"))
	clock.Advance(5 * time.Millisecond)
	r := <-cha
	require.NoError(t, r.Err)
	require.Equal(t, int64(0), r.Offset)
	clock.Advance(5 * time.Millisecond)
	require.ErrorIs(t, (<-chb).Err, metalog.ErrFenced)
}

func TestMemOptionsValidated(t *testing.T) {
	require.PanicsWithError(t, "metalog: invalid options: MemOptions.Latency -1ns is negative", func() {
		metalog.NewMem(&metalog.MemOptions{Latency: -1})
	})
	require.Panics(t, func() { metalog.NewMem(&metalog.MemOptions{MaxInFlight: -1}) })
}
