package memcluster

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/diskless-go/diskless/coordinator/metalog"
)

// fencedLog is a leader's handle on its shard's log: a metalog.Mem
// handle (fenced by offset against other writers) whose appends also
// land only while the leadership that opened it holds, as an etcdlog.Log
// with a Fence does: while the election key is there at the revision it
// was won with, and the Node has not given the leadership up. The check
// and the append are one step under the Service's lock, so no append
// lands after the leadership ended. Once it has ended, every append
// fails with an error wrapping metalog.ErrFenced, whether or not another
// writer appended.
type fencedLog struct {
	*metalog.Mem // Read, Wait, Start, End, Trim, MaxInFlight and Close are the handle's

	svc    *Service
	owner  int32       // the member ID of the leader
	key    string      // the election key
	rev    int64       // its create revision
	prefix string      // the log's key prefix, where its appends are seen
	leased func() bool // whether the Node's lease is surely held now
	// killed is the Node's: once it is killed, every append fails.
	killed *atomic.Bool

	mu     sync.Mutex
	gaveUp bool // the Node gave the leadership up (before Unlead)
}

var _ metalog.Log = (*fencedLog)(nil)

var (
	_ metalog.Confirmer = (*fencedLog)(nil)
	_ metalog.Leased    = (*fencedLog)(nil)
)

// LeaseHeld implements metalog.Leased: the Node's lease was renewed (the
// renewal answered) less than its TTL ago, counting from when the
// renewal was sent, and the Node has not given the leadership up. It
// asks the Service nothing: a lease the Service ended early
// (ExpireLease), or an election key deleted (Depose), is seen only when
// the Node learns of it.
func (l *fencedLog) LeaseHeld() bool {
	return !l.ended() && l.leased()
}

// ended reports whether the Node gave the leadership up or was killed.
func (l *fencedLog) ended() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gaveUp || (l.killed != nil && l.killed.Load())
}

// Confirm implements metalog.Confirmer: the Service still holds the
// election key at its revision, and the Node has not given the
// leadership up. It is an operation of the member, which FailNext may
// fail; a member made a zombie (PauseLease) is answered as any other:
// only its renewals and its watch are lost.
func (l *fencedLog) Confirm(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	gaveUp := l.ended()
	s := l.svc
	return s.op(l.owner, func() error {
		if v, ok := s.mu.keys[l.key]; !ok || v.create != l.rev || gaveUp {
			return fmt.Errorf("%w: member %d's leadership at %s has ended", metalog.ErrFenced, l.owner, l.key)
		}
		return nil
	})
}

// Append implements metalog.Log: the result is ready when it returns.
func (l *fencedLog) Append(entry []byte) <-chan metalog.AppendResult {
	gaveUp := l.ended()
	s := l.svc
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(chan metalog.AppendResult, 1)
	if v, ok := s.mu.keys[l.key]; !ok || v.create != l.rev || gaveUp {
		// For good: nothing is queued (the appends complete inside
		// Append), and the leadership never comes back.
		out <- metalog.AppendResult{Err: fmt.Errorf("%w: the writer's leadership (%s, revision %d) has ended", metalog.ErrFenced, l.key, l.rev)}
		return out
	}
	if err := s.opLocked(l.owner); err != nil {
		l.Mem.FailNext(err) // fails the appends until a Read, as Mem's do
	}
	r := <-l.Mem.Append(entry) // a Mem without Latency answers inside Append
	if r.Err == nil {
		s.mu.rev++
		s.emitLocked(event{key: l.prefix + strconv.FormatInt(r.Offset, 10), val: entry, create: s.mu.rev, mod: s.mu.rev})
	}
	out <- r
	return out
}

// giveUp fences the log for good: the Node gives its leadership up.
func (l *fencedLog) giveUp() {
	l.mu.Lock()
	l.gaveUp = true
	l.mu.Unlock()
}
