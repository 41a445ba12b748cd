package main

import (
	"context"
	"sync"
)

// byteBudget bounds the bytes of the requests a server has read and not
// yet answered, over every connection, so that many clients with many
// requests in flight cannot make the broker hold more than that in
// memory. A request larger than the whole budget is let in alone. It is
// safe for concurrent use.
type byteBudget struct {
	max int64

	mu struct {
		sync.Mutex
		used int64
		room chan struct{} // closed (and replaced) when bytes are released
	}
}

func newByteBudget(max int64) *byteBudget {
	b := &byteBudget{max: max}
	b.mu.room = make(chan struct{})
	return b
}

// acquire takes n bytes, waiting until they fit; it returns ctx's error
// if ctx ends first.
func (b *byteBudget) acquire(ctx context.Context, n int64) error {
	b.mu.Lock()
	for b.mu.used > 0 && b.mu.used+n > b.max {
		room := b.mu.room
		b.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return ctx.Err()
		}
		b.mu.Lock()
	}
	b.mu.used += n
	b.mu.Unlock()
	return nil
}

// release gives back n bytes.
func (b *byteBudget) release(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.mu.used -= n
	close(b.mu.room)
	b.mu.room = make(chan struct{})
}

// inUse returns the bytes taken.
func (b *byteBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mu.used
}
