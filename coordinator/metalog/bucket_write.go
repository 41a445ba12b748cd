package metalog

import (
	"bytes"
	"context"
	"fmt"

	"go.uber.org/zap"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/diskless-go/diskless/internal/backoff"
)

// run is the putter: it puts the queued entries, up to MaxInFlight at
// once, and reports them in order, until Close.
func (l *Bucket) run() {
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-l.wake:
		}
		for l.step() {
		}
	}
}

// step sends the puts the window allows, waits for the head's put (or
// for an Append to wake it), and reports the head. It returns false
// when there is nothing to wait for.
func (l *Bucket) step() bool {
	l.mu.Lock()
	if len(l.mu.queue) == 0 || l.mu.failed != nil || l.mu.closed {
		l.mu.Unlock()
		return false
	}
	for _, p := range l.mu.queue[:min(len(l.mu.queue), l.maxInFlight)] {
		if p.done == nil {
			p.done = make(chan struct{})
			ctx := l.putCtx
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				defer close(p.done)
				p.err = l.put(ctx, p)
			}()
		}
	}
	head := l.mu.queue[0]
	l.mu.Unlock()

	select {
	case <-head.done:
	case <-l.wake:
		return true // more to send
	case <-l.ctx.Done():
		return false
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	if head.err != nil {
		l.failLocked(head.err)
		return false
	}
	l.setEndLocked(head.offset + 1)
	l.mu.queue[0] = nil
	l.mu.queue = l.mu.queue[1:]
	l.mu.room.Broadcast()
	head.ch <- AppendResult{Offset: head.offset}
	return true
}

// put writes p's object if it does not exist. It retries transient
// errors. If the object exists it returns an error wrapping ErrFenced,
// unless an earlier attempt may have written it and it holds p's entry.
// It gives up when ctx ends (Close, or a put before it failed).
func (l *Bucket) put(pctx context.Context, p *bucketLogPut) error {
	key := l.key(p.offset)
	ambiguous := false // an earlier attempt may have reached the bucket
	bo := backoff.Backoff{Policy: l.backoff}
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(pctx, l.attemptTimeout)
		hedged, err := l.writeHedged(ctx, key, p.entry)
		cancel()
		if hedged {
			ambiguous = true // the other of our two puts may have written it
		}
		if err == nil {
			return nil
		}
		if pctx.Err() != nil {
			return fmt.Errorf("%w: put of offset %d abandoned (it may still be in the bucket)", ErrClosed, p.offset)
		}
		if code := gcerrors.Code(err); code == gcerrors.FailedPrecondition || code == gcerrors.AlreadyExists {
			if ambiguous {
				got, found, gerr := l.get(pctx, key)
				if gerr != nil {
					return fmt.Errorf("metalog: bucket: offset %d: a put failed and the object cannot be read back: %w", p.offset, gerr)
				}
				if found && bytes.Equal(got, p.entry) {
					return nil // an earlier attempt wrote it
				}
			}
			l.log.Info("metalog: bucket: fenced", zap.Int64("offset", p.offset), zap.String("key", key), zap.Error(err))
			return fmt.Errorf("%w: offset %d (%s) was written by another writer: %w", ErrFenced, p.offset, key, err)
		}
		if !bucketLogRetryable(err) || attempt >= l.maxAttempts {
			return fmt.Errorf("metalog: bucket: put of offset %d failed (attempt %d): %w", p.offset, attempt, err)
		}
		ambiguous = true
		l.log.Warn("metalog: bucket: put failed, retrying", zap.String("key", key), zap.Int("attempt", attempt), zap.Error(err))
		if bo.Wait(pctx) != nil {
			return fmt.Errorf("%w: put of offset %d abandoned (it may still be in the bucket)", ErrClosed, p.offset)
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
	attempt, err := backoff.Retry{
		Backoff:        backoff.Backoff{Policy: l.backoff},
		MaxAttempts:    l.maxAttempts,
		AttemptTimeout: l.attemptTimeout,
		Retryable:      bucketLogRetryable,
		OnRetry: func(attempt int, err error) {
			l.log.Warn("metalog: bucket: retrying", zap.String("op", what), zap.Int("attempt", attempt), zap.Error(err))
		},
	}.Do(ctx, f)
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("%s (attempt %d): %w", what, attempt, err)
	}
	return err
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

// failLocked fails every queued append, the first with err and the rest
// as queued after it, and makes later appends fail until a Read.
func (l *Bucket) failLocked(err error) {
	for i, p := range l.mu.queue {
		if i == 0 {
			p.ch <- AppendResult{Err: err}
		} else {
			p.ch <- AppendResult{Err: fmt.Errorf("metalog: bucket: an earlier append failed: %w", err)}
		}
	}
	clear(l.mu.queue)
	l.mu.queue = l.mu.queue[:0]
	l.mu.failed = err
	l.mu.room.Broadcast()
	// The puts still in flight behind the failed one are abandoned (some
	// may land: see BucketOptions.MaxInFlight); later ones get a new
	// context.
	l.putCancel()
	l.putCtx, l.putCancel = context.WithCancel(l.ctx)
}
