// Package fakeclock is a manual clock for tests: time moves only when the
// test calls Advance, and timers fire inside Advance, in time order, on the
// caller's goroutine.
package fakeclock

import (
	"slices"
	"sync"
	"time"
)

// Clock is a manual clock. It is safe for concurrent use. Its method set
// matches the Clock interfaces of this module's packages.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*Timer
	seq    int
}

// New returns a clock that reads start.
func New(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc arranges for f to run when the clock has advanced by d. It
// returns a *Timer.
func (c *Clock) AfterFunc(d time.Duration, f func()) interface{ Stop() bool } {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &Timer{c: c, when: c.now.Add(d), f: f, seq: c.seq}
	c.timers = append(c.timers, t)
	return t
}

// Pending returns how many timers are waiting.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// Set moves the clock to t, forward or back, and runs no timer: for
// tests that jump the time a component reads, with no timers waiting.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Advance moves the clock forward by d, running every timer that falls due,
// in time order, each with the clock reading its due time.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	for {
		i := c.nextDue(end)
		if i < 0 {
			break
		}
		t := c.timers[i]
		c.timers = slices.Delete(c.timers, i, i+1)
		c.now = t.when
		c.mu.Unlock()
		t.f()
		c.mu.Lock()
	}
	c.now = end
	c.mu.Unlock()
}

// nextDue returns the index of the earliest timer due by end, or -1.
func (c *Clock) nextDue(end time.Time) int {
	best := -1
	for i, t := range c.timers {
		if t.when.After(end) {
			continue
		}
		if best < 0 || t.when.Before(c.timers[best].when) || (t.when.Equal(c.timers[best].when) && t.seq < c.timers[best].seq) {
			best = i
		}
	}
	return best
}

// Timer is a pending AfterFunc call.
type Timer struct {
	c    *Clock
	when time.Time
	f    func()
	seq  int
}

// Stop cancels the call and reports whether it was still pending.
func (t *Timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	for i, x := range t.c.timers {
		if x == t {
			t.c.timers = slices.Delete(t.c.timers, i, i+1)
			return true
		}
	}
	return false
}
