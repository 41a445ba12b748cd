// Package membudget is a semaphore by bytes: it bounds the memory that
// work under way across many requests may hold together. Whoever is about
// to allocate takes the bytes first, waiting (with its context) while the
// budget is spent, and gives them back when done. Takers are served in
// arrival order, so that a large taker is not starved by small ones.
package membudget

import (
	"context"
	"sync"
)

// Budget is a number of bytes shared by its takers. A request for more than
// the whole budget waits until nothing else is taken, then goes alone. It
// is safe for concurrent use.
type Budget struct {
	max int64

	mu struct {
		sync.Mutex
		used    int64
		waiters []*waiter // in arrival order
	}
}

type waiter struct {
	n     int64
	ready chan struct{} // closed once the bytes are taken for it
}

// New returns a budget of size bytes (at least 1).
func New(size int64) *Budget {
	return &Budget{max: max(size, 1)}
}

// Max returns the budget's size.
func (b *Budget) Max() int64 { return b.max }

// fits reports whether n more bytes fit; under b.mu.
func (b *Budget) fits(n int64) bool {
	return b.mu.used == 0 || b.mu.used+n <= b.max
}

// Acquire takes n bytes, waiting until they fit and every earlier taker
// is served; it returns ctx's error, having taken nothing, if ctx ends
// first.
func (b *Budget) Acquire(ctx context.Context, n int64) error {
	b.mu.Lock()
	if len(b.mu.waiters) == 0 && b.fits(n) {
		b.mu.used += n
		b.mu.Unlock()
		return nil
	}
	w := &waiter{n: n, ready: make(chan struct{})}
	b.mu.waiters = append(b.mu.waiters, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.ready: // served meanwhile: give the bytes back
		b.mu.used -= n
		b.wake()
	default:
		for i, x := range b.mu.waiters {
			if x == w {
				b.mu.waiters = append(b.mu.waiters[:i], b.mu.waiters[i+1:]...)
				break
			}
		}
		b.wake() // the next waiter may fit now that this one is gone
	}
	return ctx.Err()
}

// TryAcquire takes n bytes if they fit now and nobody waits.
func (b *Budget) TryAcquire(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.mu.waiters) == 0 && b.fits(n) {
		b.mu.used += n
		return true
	}
	return false
}

// Release gives back n bytes taken with Acquire.
func (b *Budget) Release(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.mu.used -= n
	if b.mu.used < 0 {
		panic("membudget: more bytes released than taken")
	}
	b.wake()
}

// wake serves the waiters that fit, in order; under b.mu.
func (b *Budget) wake() {
	for len(b.mu.waiters) > 0 {
		w := b.mu.waiters[0]
		if !b.fits(w.n) {
			return
		}
		b.mu.used += w.n
		b.mu.waiters = b.mu.waiters[1:]
		close(w.ready)
	}
}

// InUse returns the bytes taken.
func (b *Budget) InUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mu.used
}
