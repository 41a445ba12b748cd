// Package clock is the one time source of the module: every package that
// waits or stamps takes a Clock in its options (nil means System), so a
// test drives linger, grace periods, retention and latency injection with
// a fake clock instead of sleeping. It is a leaf: it imports nothing of
// ours.
package clock

import (
	"context"
	"time"
)

// Clock tells the time and calls functions later. Implementations are
// safe for concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f in its own goroutine after d, unless the returned
	// Timer is stopped first.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call: Stop prevents the call if it has not
// started, and reports whether it did. It is an alias, so that a clock
// whose AfterFunc returns any type with that method (a *time.Timer among
// them) satisfies Clock.
type Timer = interface{ Stop() bool }

// System is the clock of the time package.
var System Clock = system{}

type system struct{}

func (system) Now() time.Time                            { return time.Now() }
func (system) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Or returns c, or System if c is nil.
func Or(c Clock) Clock {
	if c == nil {
		return System
	}
	return c
}

// Sleep waits d on c, or until ctx ends, when it returns ctx's error. A d
// of zero or less returns at once (nil, unless ctx has ended).
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	done := make(chan struct{})
	t := c.AfterFunc(d, func() { close(done) })
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	}
}

// Since returns the time elapsed on c since t.
func Since(c Clock, t time.Time) time.Duration { return c.Now().Sub(t) }
