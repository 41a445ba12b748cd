// Package clock is the one time source of the module: every package that
// waits or stamps takes a Clock in its options (nil means System), so a
// test drives linger, grace periods, retention and latency injection with
// a fake clock instead of sleeping. It is a leaf: it imports nothing of
// ours.
package clock

import (
	"context"
	"sync"
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

// Until returns the time on c until t.
func Until(c Clock, t time.Time) time.Duration { return t.Sub(c.Now()) }

// After returns a channel that receives c's time once d has passed on c,
// as time.After does, and the Timer that stops it. The channel has room
// for the one value, so an unread firing does not leak a goroutine.
func After(c Clock, d time.Duration) (<-chan time.Time, Timer) {
	ch := make(chan time.Time, 1)
	t := c.AfterFunc(d, func() { ch <- c.Now() })
	return ch, t
}

// Ticker delivers c's time on C every period, as time.Ticker does: a tick
// the reader has not taken yet is dropped, not queued. It is safe for
// concurrent use.
type Ticker struct {
	// C receives the ticks.
	C <-chan time.Time

	c      chan time.Time
	clk    Clock
	period time.Duration
	mu     sync.Mutex
	t      Timer
	done   bool
}

// NewTicker returns a Ticker of c that ticks every d. It panics if d is
// not positive, as time.NewTicker does.
func NewTicker(c Clock, d time.Duration) *Ticker {
	if d <= 0 {
		panic("clock: non-positive interval for NewTicker")
	}
	ch := make(chan time.Time, 1)
	t := &Ticker{C: ch, c: ch, clk: c, period: d}
	t.mu.Lock()
	t.t = c.AfterFunc(d, t.fire)
	t.mu.Unlock()
	return t
}

func (t *Ticker) fire() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return
	}
	select {
	case t.c <- t.clk.Now():
	default:
	}
	t.t = t.clk.AfterFunc(t.period, t.fire)
}

// Stop turns the ticker off; no tick is sent after Stop returns. It does
// not close C.
func (t *Ticker) Stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.done = true
	if t.t != nil {
		t.t.Stop()
	}
}
