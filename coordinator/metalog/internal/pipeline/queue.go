// Package pipeline is the append machinery that the metadata logs of
// package metalog share: Queue, the appends that have no result yet, in
// log order, bounded, answered in order and failed together; Pipe, a
// Queue with a sender that writes each entry by itself (a conditional
// put, an etcd transaction), up to MaxInFlight at once; and Retrier, the
// retry with backoff of one call. A log keeps only what is its own: how
// one entry is written (metalog.Bucket, etcdlog.Log), or how a batch of
// them is (metalog.File's group commit).
package pipeline

import (
	"fmt"
	"sync"
)

// Result is the type of an append's result: metalog.AppendResult.
// (Package metalog cannot be imported here: it imports this one.)
type Result interface {
	~struct {
		Offset int64
		Err    error
	}
}

// answer sends ch its result.
func answer[R Result](ch chan R, offset int64, err error) {
	ch <- R(struct {
		Offset int64
		Err    error
	}{offset, err})
}

// Queue is the appends of a log that have no result yet, in log order.
// It bounds them (Admit waits for room), answers them in order (Answer),
// fails them all at once (Fail: the first with the error, the rest as
// queued after it, and every later append until Recover), and on Close
// fails what is left. The log's mutex guards it: every method but Init is
// called with it held.
type Queue[R Result] struct {
	name      string // the log's, to begin errors: "metalog: bucket"
	closedErr error  // the error of an append to a closed log
	max       int
	room      sync.Cond // signalled when items shrink, on a failure or on Close
	items     []item[R] // items[head:] are queued; those before are answered
	head      int
	failed    error
	closed    bool
}

// item is an append without a result.
type item[R Result] struct {
	ch     chan R
	offset int64
	err    error // it fails with err, without being written
	put    *Put  // a Pipe's write of it
}

// Init makes q hold up to max appends, guarded by mu. Its errors begin
// with name; an append to a closed log fails with closedErr.
func (q *Queue[R]) Init(mu sync.Locker, max int, name string, closedErr error) {
	q.room.L = mu
	q.max, q.name, q.closedErr = max, name, closedErr
}

// Admit waits until q has room for one more append (or is failed or
// closed), and reports whether ch's append may be queued; if not, it has
// answered ch (or queued its error behind the results before it).
func (q *Queue[R]) Admit(ch chan R) bool {
	for !q.closed && q.failed == nil && q.Len() >= q.max {
		q.room.Wait()
	}
	switch {
	case q.closed:
		q.Refuse(ch, q.closedErr)
	case q.failed != nil:
		q.Refuse(ch, q.earlier(q.failed))
	default:
		return true
	}
	return false
}

// earlier is the error of an append queued after one that failed with
// err.
func (q *Queue[R]) earlier(err error) error {
	return fmt.Errorf("%s: an earlier append failed: %w", q.name, err)
}

// Refuse fails ch's append with err, after the results before it.
func (q *Queue[R]) Refuse(ch chan R, err error) {
	if q.Len() == 0 {
		answer(ch, 0, err)
		return
	}
	q.push(item[R]{ch: ch, err: err})
}

// Push queues ch's append at offset.
func (q *Queue[R]) Push(ch chan R, offset int64) {
	q.push(item[R]{ch: ch, offset: offset})
}

// push appends it, first moving the queued items to the front of the
// array when it is full and at least half of it is answered ones, so that
// a queue that is answered as it is filled reuses its array.
func (q *Queue[R]) push(it item[R]) {
	if len(q.items) == cap(q.items) && q.head > 0 && q.head >= len(q.items)/2 {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	q.items = append(q.items, it)
}

// queued returns the queued items, in order.
func (q *Queue[R]) queued() []item[R] { return q.items[q.head:] }

// drop removes the first n queued items.
func (q *Queue[R]) drop(n int) {
	clear(q.items[q.head : q.head+n])
	q.head += n
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
}

// Answer sends the results that are known, in order: those of the
// appends before end, and the refused ones among and after them.
func (q *Queue[R]) Answer(end int64) {
	items := q.queued()
	i := 0
	for ; i < len(items); i++ {
		it := &items[i]
		if it.err != nil {
			answer(it.ch, 0, it.err)
		} else if it.offset < end {
			answer(it.ch, it.offset, nil)
		} else {
			break
		}
	}
	if i > 0 {
		q.drop(i)
		q.room.Broadcast()
	}
}

// Fail fails every queued append, the first with err and the rest as
// queued after it (a refused one with its own error), and makes later
// appends fail until Recover.
func (q *Queue[R]) Fail(err error) {
	if q.failed == nil {
		q.failed = err
	}
	items := q.queued()
	for i := range items {
		it := &items[i]
		if it.err == nil {
			if i == 0 {
				it.err = err
			} else {
				it.err = q.earlier(err)
			}
		}
		answer(it.ch, 0, it.err)
	}
	q.drop(len(items))
	q.room.Broadcast()
}

// SetFailed makes later appends fail with err until Recover (those queued
// still go on).
func (q *Queue[R]) SetFailed(err error) { q.failed = err }

// Failed returns the failure that appends fail with, or nil.
func (q *Queue[R]) Failed() error { return q.failed }

// Recover clears the failure: appends are queued again.
func (q *Queue[R]) Recover() { q.failed = nil }

// Len returns how many appends are queued.
func (q *Queue[R]) Len() int { return len(q.items) - q.head }

// Closed reports whether SetClosed was called.
func (q *Queue[R]) Closed() bool { return q.closed }

// SetClosed makes later appends fail with the closed error, and wakes the
// appends waiting for room.
func (q *Queue[R]) SetClosed() {
	q.closed = true
	q.room.Broadcast()
}

// Close fails every queued append with the closed error (a refused one
// with its own).
func (q *Queue[R]) Close() {
	for _, it := range q.queued() {
		answer(it.ch, 0, cmpOr(it.err, q.closedErr))
	}
	q.items, q.head = nil, 0
}

func cmpOr(err, or error) error {
	if err != nil {
		return err
	}
	return or
}
