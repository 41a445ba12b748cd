// Package hedge is the one hedged request of the module: a write of an
// object (a WAL object's PUT, a metadata-log entry's conditional put)
// that has not answered after a delay is sent a second time, the same
// bytes under the same key, and the first success is taken. The delay is
// learned: a quantile of the recent successful calls' durations, at
// least a minimum; no call is hedged until enough durations are known, or
// while that quantile is above a maximum (a store that slow is slow for
// every call, and a second call would only compete with the first).
//
// Only a call that may be made twice with the same effect may be hedged.
package hedge

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/diskless-go/diskless/clock"
)

// Options configure a Hedger.
type Options struct {
	// MinDelay is the least hedge delay.
	MinDelay time.Duration
	// MaxDelay is the greatest: a learned delay above it hedges nothing.
	// Negative: never hedge.
	MaxDelay time.Duration
	// Quantile of the recent durations is the delay (0.9: the p90).
	Quantile float64
	// Samples is how many recent durations the quantile is of, and
	// MinSamples how many must be known before any call is hedged.
	Samples, MinSamples int
	// Clock times the calls and the hedge delay; nil means clock.System.
	Clock clock.Clock
}

// Hedger learns the hedge delay and makes hedged calls. It is safe for
// concurrent use.
type Hedger struct {
	o Options

	mu struct {
		sync.Mutex
		recent []time.Duration // a ring of o.Samples
		n      int             // durations recorded, in all
	}
}

// New returns a Hedger that has learned nothing yet. Samples below 1 is 1.
func New(o Options) *Hedger {
	o.Samples = max(o.Samples, 1)
	o.Clock = clock.Or(o.Clock)
	h := &Hedger{o: o}
	h.mu.recent = make([]time.Duration, o.Samples)
	return h
}

// Record adds the duration of a call that succeeded (or, for one that
// lost to its hedge, how long it had taken when the hedge won).
func (h *Hedger) Record(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mu.recent[h.mu.n%len(h.mu.recent)] = d
	h.mu.n++
}

// Delay returns the hedge delay: the quantile of the recent durations, at
// least MinDelay; false when hedging is off, before MinSamples durations
// are known, or when that quantile is above MaxDelay.
func (h *Hedger) Delay() (time.Duration, bool) {
	if h.o.MaxDelay < 0 {
		return 0, false
	}
	h.mu.Lock()
	n := min(h.mu.n, len(h.mu.recent))
	if n == 0 || n < h.o.MinSamples {
		h.mu.Unlock()
		return 0, false // not learned yet
	}
	s := slices.Clone(h.mu.recent[:n])
	h.mu.Unlock()
	slices.Sort(s)
	d := s[min(int(h.o.Quantile*float64(n)), n-1)]
	if d > h.o.MaxDelay {
		return 0, false
	}
	return max(d, h.o.MinDelay), true
}

// Result is what Do did.
type Result struct {
	// Hedged reports whether a second call was sent, and HedgeWon whether
	// it was the one that succeeded.
	Hedged, HedgeWon bool
	// Errs are the failed calls' errors, in the order they failed: empty
	// when a call succeeded.
	Errs []error
}

// Err returns nil if a call succeeded, or else the first error.
func (r Result) Err() error {
	if len(r.Errs) == 0 {
		return nil
	}
	return r.Errs[0]
}

// Do calls f and, if it has not returned after Delay, calls it a second
// time, concurrently; it returns once one call succeeds, or the first
// fails before the delay, or both fail. Each success is recorded (its
// duration from the first call's start). Without a delay (Delay's false)
// f is called once, in the caller's goroutine.
//
// Once hedging is possible the calls run in goroutines that wg counts,
// with a context that ends when Do returns: the call that lost goes on
// until it sees that, and the caller's Close waits for it on wg.
func (h *Hedger) Do(ctx context.Context, wg *sync.WaitGroup, f func(ctx context.Context) error) Result {
	start := h.o.Clock.Now()
	delay, ok := h.Delay()
	if !ok {
		if err := f(ctx); err != nil {
			return Result{Errs: []error{err}}
		}
		h.Record(clock.Since(h.o.Clock, start))
		return Result{}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		hedge bool
		err   error
	}
	results := make(chan result, 2)
	send := func(hedge bool) {
		wg.Go(func() { results <- result{hedge, f(ctx)} })
	}
	send(false)
	hedgeC, timer := clock.After(h.o.Clock, delay)
	defer timer.Stop()
	var res Result
	for {
		select {
		case <-hedgeC:
			res.Hedged = true
			send(true)
		case r := <-results:
			if r.err == nil {
				h.Record(clock.Since(h.o.Clock, start))
				res.HedgeWon = r.hedge
				res.Errs = nil
				return res
			}
			res.Errs = append(res.Errs, r.err)
			if !res.Hedged || len(res.Errs) == 2 {
				return res // the first failed before the delay, or both failed
			}
		}
	}
}
