package etcdlog

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"time"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"gocloud.dev/blob"

	"github.com/diskless-go/diskless/clock"
	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/internal/backoff"
)

// retry calls f until it succeeds, fails with an error that is not
// transient, or has failed MaxAttempts times, each attempt bounded by
// RequestTimeout.
func (l *Log) retry(ctx context.Context, what string, f func(context.Context) error) error {
	attempt, err := backoff.Retry{
		Backoff:        backoff.Backoff{Policy: backoff.Policy{Initial: 50 * time.Millisecond, Max: 2 * time.Second}},
		MaxAttempts:    l.maxAttempts,
		AttemptTimeout: l.timeout,
		OnRetry: func(attempt int, err error) {
			l.log.Warn("etcdlog: retrying", zap.String("op", what), zap.Int("attempt", attempt), zap.Error(err))
		},
	}.Do(ctx, f)
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("%s (attempt %d): %w", what, attempt, err)
	}
	return err
}

// run sends the queued appends' transactions, up to MaxInFlight at once,
// in offset order, until Close.
func (l *Log) run() {
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-l.wake:
		}
		l.mu.Lock()
		inFlight := 0
		for _, p := range l.mu.queue {
			if p.sent && !p.done {
				inFlight++
			}
		}
		for _, p := range l.mu.queue {
			if inFlight >= l.maxInFlight || l.mu.failed != nil {
				break
			}
			if p.sent {
				continue
			}
			p.sent = true
			inFlight++
			failNext := l.mu.failNext
			l.mu.failNext = nil
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				err := failNext
				if err == nil {
					err = l.put(p)
				}
				l.finish(p, err)
			}()
		}
		l.mu.Unlock()
	}
}

// finish records p's outcome and sends the results that are known, in
// order.
func (l *Log) finish(p *etcdPut, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p.done, p.err = true, err
	for len(l.mu.queue) > 0 && l.mu.queue[0].done {
		h := l.mu.queue[0]
		if h.err != nil {
			l.failLocked(h.err)
			break
		}
		l.mu.queue[0] = nil
		l.mu.queue = l.mu.queue[1:]
		l.setEndLocked(h.offset + 1)
		h.ch <- metalog.AppendResult{Offset: h.offset}
		l.mu.room.Broadcast()
	}
	l.kick()
}

// kick wakes run.
func (l *Log) kick() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// failLocked fails every queued append, the first with err and the rest
// as queued after it, and makes later appends fail until a Read. Puts
// still in flight end on their own; with a Fence none of them can land
// after a fenced one, and without one none is in flight.
func (l *Log) failLocked(err error) {
	for i, p := range l.mu.queue {
		if i == 0 {
			p.ch <- metalog.AppendResult{Err: err}
		} else {
			p.ch <- metalog.AppendResult{Err: fmt.Errorf("etcdlog: an earlier append failed: %w", err)}
		}
	}
	clear(l.mu.queue)
	l.mu.queue = l.mu.queue[:0]
	l.mu.failed = err
	l.mu.room.Broadcast()
}

// setEndLocked moves the writer's end to end and wakes Wait.
func (l *Log) setEndLocked(end int64) {
	if end != l.mu.end {
		l.mu.end = end
		close(l.mu.grew)
		l.mu.grew = make(chan struct{})
	}
}

// value returns the etcd value of p's entry: inline, or a reference to the
// object it spills to (which it puts).
func (l *Log) value(p *etcdPut) ([]byte, error) {
	if len(p.entry) <= l.spillBytes {
		return append([]byte{etcdInline}, p.entry...), nil
	}
	if l.spill == nil {
		return nil, fmt.Errorf("etcdlog: an entry of %d bytes is larger than SpillBytes %d, and there is no Spill bucket", len(p.entry), l.spillBytes)
	}
	key := fmt.Sprintf("%s%020d-%s", l.spillDir, p.offset, uuid.NewString())
	err := l.retry(l.ctx, "put "+key, func(ctx context.Context) error {
		return l.spill.WriteAll(ctx, key, p.entry, &blob.WriterOptions{ContentType: "application/octet-stream", DisableContentTypeDetection: true})
	})
	if err != nil {
		return nil, fmt.Errorf("etcdlog: spilling entry %d: %w", p.offset, err)
	}
	v := []byte{etcdSpill}
	v = binary.AppendUvarint(v, uint64(len(p.entry)))
	v = binary.BigEndian.AppendUint32(v, crc32.Checksum(p.entry, crcTable))
	return append(v, key...), nil
}

// crcTable is CRC-32C, the checksum of a spilled entry.
var crcTable = crc32.MakeTable(crc32.Castagnoli)

// put writes p's key in a transaction conditional on it not existing, the
// one before it existing, and the fence. It retries transient failures;
// after one that may have landed, a key found holding p's value is p's. A
// put that overtook the one before it (pipelined) waits for that one and
// tries again.
func (l *Log) put(p *etcdPut) error {
	v, err := l.value(p)
	if err != nil {
		return err
	}
	key := l.key(p.offset)
	conds := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)}
	elses := []clientv3.Op{clientv3.OpGet(key)}
	var prev string
	if p.offset > 0 {
		prev = l.key(p.offset - 1)
		conds = append(conds, clientv3.Compare(clientv3.CreateRevision(prev), ">", 0))
		elses = append(elses, clientv3.OpGet(prev, clientv3.WithKeysOnly()))
	}
	if l.fence != nil {
		conds = append(conds, clientv3.Compare(clientv3.CreateRevision(l.fence.Key), "=", l.fence.Revision))
	}
	ambiguous := false
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(l.ctx, l.timeout)
		resp, err := l.client.Txn(ctx).If(conds...).Then(clientv3.OpPut(key, string(v))).Else(elses...).Commit()
		cancel()
		switch {
		case l.ctx.Err() != nil:
			return fmt.Errorf("%w: put of offset %d abandoned (it may still be in the log)", metalog.ErrClosed, p.offset)
		case err != nil:
			if attempt >= l.maxAttempts {
				return fmt.Errorf("etcdlog: put of offset %d failed (attempt %d): %w", p.offset, attempt, err)
			}
			ambiguous = true
			l.log.Warn("etcdlog: put failed, retrying", zap.String("key", key), zap.Int("attempt", attempt), zap.Error(err))
			continue
		case resp.Succeeded:
			return nil
		}
		got := resp.Responses[0].GetResponseRange().Kvs
		if len(got) > 0 {
			if ambiguous && bytes.Equal(got[0].Value, v) {
				return nil // an earlier attempt wrote it
			}
			l.log.Info("etcdlog: fenced", zap.Int64("offset", p.offset), zap.String("key", key))
			return fmt.Errorf("%w: offset %d (%s) was written by another writer", metalog.ErrFenced, p.offset, key)
		}
		if prev != "" && len(resp.Responses[1].GetResponseRange().Kvs) == 0 {
			// The put of the offset before has not landed yet: wait for
			// it, then try again (it failing fails this one).
			if err := l.waitEarlier(p); err != nil {
				return fmt.Errorf("etcdlog: offset %d: the append before it failed: %w", p.offset, err)
			}
			attempt--
			continue
		}
		l.log.Info("etcdlog: fenced: leadership lost", zap.Int64("offset", p.offset))
		return fmt.Errorf("%w: the writer's leadership (%s) has ended", metalog.ErrFenced, l.fence.Key)
	}
}

// waitEarlier waits until the append queued before p is done, and returns
// nil if it succeeded. With no append before p in the queue (it landed and
// was answered), it returns nil; with the log closed, an error wrapping
// metalog.ErrClosed; with the one before failed (or p no longer queued, as the
// queue failed), that failure.
func (l *Log) waitEarlier(p *etcdPut) error {
	for {
		l.mu.Lock()
		switch {
		case l.mu.closed:
			l.mu.Unlock()
			return metalog.ErrClosed
		case l.mu.failed != nil:
			err := l.mu.failed
			l.mu.Unlock()
			return err
		}
		i := slices.Index(l.mu.queue, p)
		if i < 0 {
			l.mu.Unlock()
			return metalog.ErrClosed
		}
		var before *etcdPut
		if i > 0 {
			before = l.mu.queue[i-1]
		}
		if before == nil || (before.done && before.err == nil) {
			l.mu.Unlock()
			return nil
		}
		if before.done {
			err := before.err
			l.mu.Unlock()
			return err
		}
		room := l.mu.grew
		l.mu.Unlock()
		wake, stop := clock.After(l.clock, 5*time.Millisecond)
		select {
		case <-room:
		case <-l.ctx.Done():
			stop.Stop()
			return metalog.ErrClosed
		case <-wake:
		}
		stop.Stop()
	}
}
