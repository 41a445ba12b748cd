package pipeline

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/diskless-go/diskless/internal/backoff"
)

// Retrier tries a call of a log's store again while it fails with a
// transient error (package internal/backoff), and logs each retry.
type Retrier struct {
	// Policy is the wait between two attempts.
	Policy backoff.Policy
	// MaxAttempts bounds the attempts.
	MaxAttempts int
	// AttemptTimeout bounds each attempt.
	AttemptTimeout time.Duration
	// Retryable reports whether an error may go away if the call is made
	// again; nil means every error may.
	Retryable func(error) bool
	// Log logs each retry, with the message Msg.
	Log *zap.Logger
	Msg string
}

// Do calls f until it succeeds, fails with an error that is not
// Retryable, or has failed MaxAttempts times, each attempt bounded by
// AttemptTimeout. The error of the last attempt is wrapped with what and
// the attempt's number; ctx's error is returned as it is.
func (r *Retrier) Do(ctx context.Context, what string, f func(context.Context) error) error {
	attempt, err := backoff.Retry{
		Backoff:        backoff.Backoff{Policy: r.Policy},
		MaxAttempts:    r.MaxAttempts,
		AttemptTimeout: r.AttemptTimeout,
		Retryable:      r.Retryable,
		OnRetry: func(attempt int, err error) {
			r.Log.Warn(r.Msg, zap.String("op", what), zap.Int("attempt", attempt), zap.Error(err))
		},
	}.Do(ctx, f)
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("%s (attempt %d): %w", what, attempt, err)
	}
	return err
}

// Key returns the key of offset off in the log under dir: dir and the
// offset in 20 digits.
func Key(dir string, off int64) string { return fmt.Sprintf("%s%020d", dir, off) }

// ParseKey returns the offset of a key that Key made with dir.
func ParseKey(dir, key string) (int64, bool) {
	s, ok := strings.CutPrefix(key, dir)
	if !ok || len(s) != 20 {
		return 0, false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	off, err := strconv.ParseInt(s, 10, 64)
	return off, err == nil
}

// Leftovers counts the offsets below start in offs (sorted), the entries
// a Trim that stopped part way left: n of them, first to last.
func Leftovers(offs []int64, start int64) (n int, first, last int64) {
	for _, off := range offs {
		if off < start {
			if n == 0 {
				first = off
			}
			n++
			last = off
		}
	}
	return n, first, last
}
