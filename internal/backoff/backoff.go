// Package backoff is the one retry-with-backoff of the module: the wait
// before each attempt of a call that failed grows from Policy.Initial,
// doubling each attempt, up to Policy.Max, drawn at random from its upper
// half when Policy.Jitter is set. Backoff waits on a clock.Clock, so that
// a test drives it with a fake clock (or testing/synctest) instead of
// sleeping; Retry is the loop of a call tried up to a number of times.
package backoff

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"time"

	"github.com/diskless-go/diskless/clock"
)

// Policy says how long to wait after each failed attempt. Its zero value
// waits nothing.
type Policy struct {
	// Initial is the wait after the first failure; each failure after
	// doubles it.
	Initial time.Duration
	// Max caps the wait.
	Max time.Duration
	// Jitter draws each wait at random from [d/2, d], d the doubled
	// delay, so that callers that failed together do not retry together.
	Jitter bool
}

// Delay returns the wait after the attempt-th failure (counting from 1):
// Initial<<(attempt-1), at most Max, with jitter if the policy has it.
func (p Policy) Delay(attempt int) time.Duration {
	d := p.Initial << min(max(attempt-1, 0), 30)
	if d <= 0 || d > p.Max {
		d = p.Max // capped, or overflowed
	}
	if p.Jitter && d > 0 {
		d = d/2 + jitter(d/2+1)
	}
	return d
}

// jitter returns a random duration in [0, n). It draws from crypto/rand,
// not math/rand/v2's global source, because a test can seed crypto/rand
// (testing/cryptotest.SetGlobalRandom) and cannot seed the other: the
// simulation (internal/sim) replays a seed's retries with the same waits.
// The modulo's bias is of no account for a backoff.
func jitter(n time.Duration) time.Duration {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (Go 1.24+)
	return time.Duration(binary.LittleEndian.Uint64(b[:]) % uint64(n))
}

// Backoff is the state of one retry loop: the failures since it began or
// was Reset. Its zero value waits nothing. It is not safe for concurrent
// use.
type Backoff struct {
	Policy
	// Clock is what Wait waits on; nil means clock.System.
	Clock clock.Clock

	failures int
}

// Wait records a failure and waits what the policy says after it, or
// until ctx ends, when it returns ctx's error.
func (b *Backoff) Wait(ctx context.Context) error {
	b.failures++
	return clock.Sleep(ctx, clock.Or(b.Clock), b.Delay(b.failures))
}

// Next records a failure and returns the wait after it, for a caller that
// waits by other means.
func (b *Backoff) Next() time.Duration {
	b.failures++
	return b.Delay(b.failures)
}

// Reset starts again from Initial: the call succeeded.
func (b *Backoff) Reset() { b.failures = 0 }

// Retry is a call tried again while it fails with a transient error.
type Retry struct {
	// Backoff is the wait between two attempts.
	Backoff
	// MaxAttempts bounds the attempts; 0 or less means no bound (until
	// ctx ends or an error is not Retryable).
	MaxAttempts int
	// AttemptTimeout bounds each attempt; 0 means no bound but ctx's.
	AttemptTimeout time.Duration
	// Retryable reports whether an attempt's error may go away if the
	// call is made again; nil means every error may.
	Retryable func(error) bool
	// OnRetry, if not nil, is told of each failure that is retried
	// (before the wait), to log it.
	OnRetry func(attempt int, err error)
}

// Do calls f until it returns nil, an error that is not Retryable, or
// MaxAttempts of them have failed, waiting Backoff between two attempts.
// It returns nil, or ctx's error if ctx ended (during an attempt or a
// wait), or else the last attempt's error and its number (from 1).
func (r Retry) Do(ctx context.Context, f func(ctx context.Context) error) (attempt int, err error) {
	for attempt = 1; ; attempt++ {
		err = r.attempt(ctx, f)
		switch {
		case err == nil:
			return attempt, nil
		case ctx.Err() != nil:
			return attempt, ctx.Err()
		case r.Retryable != nil && !r.Retryable(err),
			r.MaxAttempts > 0 && attempt >= r.MaxAttempts:
			return attempt, err
		}
		if r.OnRetry != nil {
			r.OnRetry(attempt, err)
		}
		if werr := r.Wait(ctx); werr != nil {
			return attempt, werr
		}
	}
}

func (r *Retry) attempt(ctx context.Context, f func(ctx context.Context) error) error {
	if r.AttemptTimeout <= 0 {
		return f(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, r.AttemptTimeout)
	defer cancel()
	return f(ctx)
}
