package metalog

import (
	"bytes"
	"context"
	"fmt"

	"go.uber.org/zap"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/diskless-go/diskless/coordinator/metalog/internal/pipeline"
	"github.com/diskless-go/diskless/internal/backoff"
)

// put writes p's object if it does not exist. It retries transient
// errors. If the object exists it returns an error wrapping ErrFenced,
// unless an earlier attempt may have written it and it holds p's entry.
// It gives up when ctx ends (Close, or a put before it failed).
func (l *Bucket) put(pctx context.Context, p *pipeline.Put) error {
	key := l.key(p.Offset)
	ambiguous := false // an earlier attempt may have reached the bucket
	bo := backoff.Backoff{Policy: l.backoff}
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(pctx, l.attemptTimeout)
		hedged, err := l.writeHedged(ctx, key, p.Entry)
		cancel()
		if hedged {
			ambiguous = true // the other of our two puts may have written it
		}
		if err == nil {
			return nil
		}
		if pctx.Err() != nil {
			return fmt.Errorf("%w: put of offset %d abandoned (it may still be in the bucket)", ErrClosed, p.Offset)
		}
		if code := gcerrors.Code(err); code == gcerrors.FailedPrecondition || code == gcerrors.AlreadyExists {
			if ambiguous {
				got, found, gerr := l.get(pctx, key)
				if gerr != nil {
					return fmt.Errorf("metalog: bucket: offset %d: a put failed and the object cannot be read back: %w", p.Offset, gerr)
				}
				if found && bytes.Equal(got, p.Entry) {
					return nil // an earlier attempt wrote it
				}
			}
			l.log.Info("metalog: bucket: fenced", zap.Int64("offset", p.Offset), zap.String("key", key), zap.Error(err))
			return fmt.Errorf("%w: offset %d (%s) was written by another writer: %w", ErrFenced, p.Offset, key, err)
		}
		if !bucketLogRetryable(err) || attempt >= l.maxAttempts {
			return fmt.Errorf("metalog: bucket: put of offset %d failed (attempt %d): %w", p.Offset, attempt, err)
		}
		ambiguous = true
		l.log.Warn("metalog: bucket: put failed, retrying", zap.String("key", key), zap.Int("attempt", attempt), zap.Error(err))
		if bo.Wait(pctx) != nil {
			return fmt.Errorf("%w: put of offset %d abandoned (it may still be in the bucket)", ErrClosed, p.Offset)
		}
	}
}

// writeHedged makes one attempt of a conditional put of entry at key:
// one put, and a second of the same bytes if the first has not answered
// after the hedge delay (package internal/hedge). It returns the first
// success, or else an error of the two (a FailedPrecondition one first,
// since the caller reads the object back to tell our own bytes from
// another writer's); hedged reports whether a second put was sent. The
// put that loses is cancelled, and Close waits for it.
func (l *Bucket) writeHedged(ctx context.Context, key string, entry []byte) (hedged bool, err error) {
	r := l.hedge.Do(ctx, &l.wg, func(ctx context.Context) error {
		l.stats.puts.Add(1)
		return l.bucket.WriteAll(ctx, key, entry, &blob.WriterOptions{
			IfNotExist:                  true,
			ContentType:                 "application/octet-stream",
			DisableContentTypeDetection: true,
		})
	})
	if !r.Hedged {
		return false, r.Err()
	}
	l.stats.hedges.Add(1)
	l.log.Debug("metalog: bucket: hedged a slow put", zap.String("key", key))
	if r.HedgeWon {
		l.stats.hedgeWins.Add(1)
	}
	for _, err := range r.Errs {
		if code := gcerrors.Code(err); code == gcerrors.FailedPrecondition || code == gcerrors.AlreadyExists {
			return true, err
		}
	}
	return true, r.Err()
}

// retry calls f until it succeeds, fails with an error that is not
// transient, or has failed MaxAttempts times, each attempt bounded by
// AttemptTimeout.
func (l *Bucket) retry(ctx context.Context, what string, f func(context.Context) error) error {
	return l.retrier.Do(ctx, what, f)
}

// bucketLogRetryable reports whether an object-store error may go away if
// the call is made again.
func bucketLogRetryable(err error) bool {
	switch gcerrors.Code(err) {
	case gcerrors.FailedPrecondition, gcerrors.NotFound, gcerrors.PermissionDenied,
		gcerrors.InvalidArgument, gcerrors.Unimplemented, gcerrors.AlreadyExists, gcerrors.Canceled:
		return false
	}
	return true
}
