package metalog

import (
	"context"
	"fmt"
	"runtime/pprof"
	"slices"
	"sync"
	"time"

	"github.com/diskless-go/diskless/clock"
)

// DefaultMemMaxInFlight is the MaxInFlight of a Mem whose options
// leave it 0.
const DefaultMemMaxInFlight = 64

// MemOptions configure a Mem. The zero value holds the defaults; a
// nil *MemOptions means the zero value.
type MemOptions struct {
	// Latency delays each append: its entry enters the log, and its result
	// is sent, Latency after Append was called, in append order. 0 means
	// at once, inside Append.
	Latency time.Duration
	// MaxInFlight is how many appends may wait for their Latency at once;
	// Append blocks beyond it. 0 means DefaultMemMaxInFlight.
	MaxInFlight int
	// Clock times Latency; nil means clock.System.
	Clock clock.Clock
}

// Mem is a Log in memory, for tests: nothing survives the process. It
// can delay appends (Latency), fail them (FailNext), and have several
// writers on one sequence of entries (Writer), fenced like Bucket's.
// It is safe for concurrent use.
//
// Fencing: each handle appends at the end it knows (the offset after its
// last successful append, or the end its last Read reached). An entry
// whose turn comes while another handle has appended past that end fails
// with an error wrapping ErrFenced, and so does every append of the handle
// after it, until a Read of the handle reaches the end of the log from at
// most its own end. The test of "another handle has appended" is made at
// the moment the entry would enter the log (a compare-and-set on the
// log's end), so, as with Bucket, two entries never take one offset.
//
// An append that fails for any reason (fenced, FailNext, Close) fails
// every append of the handle queued after it; the handle goes on failing
// appends until a Read clears the failure as above.
type Mem struct {
	store       *memLogStore
	latency     time.Duration
	maxInFlight int
	clock       clock.Clock

	tick chan struct{} // a timer fired (Latency > 0)
	done chan struct{} // closed by Close
	wg   sync.WaitGroup

	mu struct {
		sync.Mutex
		end      int64            // the offset after this handle's last known entry
		pending  []*memLogPending // appends waiting for their Latency, in order
		failNext error            // the next Append fails with it
		failed   error            // appends fail until a Read clears it
		closed   bool             //
		room     chan struct{}    // closed (and replaced) when pending shrinks or on Close
		timers   map[*memLogPending]clock.Timer
	}
}

var _ Log = (*Mem)(nil)

// memLogStore holds the entries that every handle of a Mem shares.
type memLogStore struct {
	mu struct {
		sync.Mutex
		start   int64
		entries [][]byte      // entries[i] has offset start+i; never changed in place
		grew    chan struct{} // closed (and replaced) when an entry enters
	}
}

// newMemStore returns an empty store.
func newMemStore() *memLogStore {
	s := &memLogStore{}
	s.mu.grew = make(chan struct{})
	return s
}

// end returns the offset after the last entry. The caller holds s.mu.
func (s *memLogStore) endLocked() int64 { return s.mu.start + int64(len(s.mu.entries)) }

// memLogPending is an append waiting for its Latency.
type memLogPending struct {
	ch     chan AppendResult
	entry  []byte
	offset int64
	due    time.Time
	err    error // injected by FailNext
}

// NewMem returns an empty Mem. It panics if an option is out of
// range (the message names it): a Mem is a test fixture.
func NewMem(opts *MemOptions) *Mem {
	var o MemOptions
	if opts != nil {
		o = *opts
	}
	switch {
	case o.Latency < 0:
		panic(fmt.Errorf("%w: MemOptions.Latency %v is negative", ErrInvalidOptions, o.Latency))
	case o.MaxInFlight < 0:
		panic(fmt.Errorf("%w: MemOptions.MaxInFlight %d is negative", ErrInvalidOptions, o.MaxInFlight))
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = DefaultMemMaxInFlight
	}
	return newMemLogHandle(newMemStore(), o.Latency, o.MaxInFlight, clock.Or(o.Clock))
}

// Writer returns another handle on l's entries, as if a second process
// had opened the same log: it shares the entries (Read, Start, Trim) but
// has its own end, pending appends, failures and Close. Its end is the
// log's end at the call. It has l's options.
func (l *Mem) Writer() *Mem {
	return newMemLogHandle(l.store, l.latency, l.maxInFlight, l.clock)
}

func newMemLogHandle(s *memLogStore, latency time.Duration, maxInFlight int, clk clock.Clock) *Mem {
	l := &Mem{
		store:       s,
		latency:     latency,
		maxInFlight: maxInFlight,
		clock:       clk,
		tick:        make(chan struct{}, 1),
		done:        make(chan struct{}),
	}
	s.mu.Lock()
	l.mu.end = s.endLocked()
	s.mu.Unlock()
	l.mu.room = make(chan struct{})
	l.mu.timers = make(map[*memLogPending]clock.Timer)
	if latency > 0 {
		l.wg.Add(1)
		go pprof.Do(context.Background(), pprof.Labels("diskless", "metalog-mem"), func(context.Context) {
			defer l.wg.Done()
			l.run()
		})
	}
	return l
}

// run completes the appends whose Latency has passed, each time a timer
// fires, until Close.
func (l *Mem) run() {
	for {
		select {
		case <-l.done:
			return
		case <-l.tick:
		}
		l.mu.Lock()
		l.completeLocked(l.clock.Now())
		l.mu.Unlock()
	}
}

// wake is every append's timer function.
func (l *Mem) wake() {
	select {
	case l.tick <- struct{}{}:
	default:
	}
}

// FailNext makes the next Append of this handle fail with an error
// wrapping err (when its turn comes, after its Latency), and with it
// every append queued after it, until a Read clears the failure.
func (l *Mem) FailNext(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.failNext = err
}

// Append implements Log. With Latency 0 the result is ready when Append
// returns.
func (l *Mem) Append(entry []byte) <-chan AppendResult {
	ch := make(chan AppendResult, 1)
	l.mu.Lock()
	defer l.mu.Unlock()
	for !l.mu.closed && l.mu.failed == nil && len(l.mu.pending) >= l.maxInFlight {
		room := l.mu.room
		l.mu.Unlock()
		<-room
		l.mu.Lock()
	}
	switch {
	case l.mu.closed:
		ch <- AppendResult{Err: ErrClosed}
		return ch
	case l.mu.failed != nil:
		// Nothing is pending once a failure is set.
		ch <- AppendResult{Err: fmt.Errorf("metalog: mem: an earlier append failed: %w", l.mu.failed)}
		return ch
	}
	p := &memLogPending{ch: ch, entry: entry, offset: l.mu.end + int64(len(l.mu.pending)), err: l.mu.failNext}
	l.mu.failNext = nil
	l.mu.pending = append(l.mu.pending, p)
	if l.latency == 0 {
		l.completeLocked(time.Time{})
		return ch
	}
	p.due = l.clock.Now().Add(l.latency)
	l.mu.timers[p] = l.clock.AfterFunc(l.latency, l.wake)
	return ch
}

// completeLocked sends the results of the pending appends due by now (all
// of them with Latency 0), in order: each enters the log if the log's end
// is still where this handle expects it, else fails, failing the rest.
func (l *Mem) completeLocked(now time.Time) {
	for len(l.mu.pending) > 0 {
		p := l.mu.pending[0]
		if l.latency > 0 && p.due.After(now) {
			return
		}
		if p.err != nil {
			l.failLocked(fmt.Errorf("metalog: mem: injected failure: %w", p.err))
			return
		}
		s := l.store
		s.mu.Lock()
		if end := s.endLocked(); end != p.offset {
			s.mu.Unlock()
			l.failLocked(fmt.Errorf("%w: mem log offset %d was taken by another writer (the log ends at %d)", ErrFenced, p.offset, end))
			return
		}
		s.mu.entries = append(s.mu.entries, p.entry)
		if s.mu.grew != nil { // made by a Wait only: no allocation per entry otherwise
			close(s.mu.grew)
			s.mu.grew = nil
		}
		s.mu.Unlock()
		l.mu.end = p.offset + 1
		l.popLocked()
		p.ch <- AppendResult{Offset: p.offset}
	}
}

// popLocked removes the head of pending.
func (l *Mem) popLocked() {
	p := l.mu.pending[0]
	if t, ok := l.mu.timers[p]; ok {
		t.Stop()
		delete(l.mu.timers, p)
	}
	l.mu.pending[0] = nil
	l.mu.pending = l.mu.pending[1:]
	close(l.mu.room)
	l.mu.room = make(chan struct{})
}

// failLocked fails every pending append, the first with err and the rest
// as queued after it, and makes later appends fail until a Read.
func (l *Mem) failLocked(err error) {
	for i := 0; len(l.mu.pending) > 0; i++ {
		p := l.mu.pending[0]
		l.popLocked()
		if i == 0 {
			p.ch <- AppendResult{Err: err}
		} else {
			p.ch <- AppendResult{Err: fmt.Errorf("metalog: mem: an earlier append failed: %w", err)}
		}
	}
	l.mu.failed = err
}

// MaxInFlight implements Log.
func (l *Mem) MaxInFlight() int { return l.maxInFlight }

// Read implements Log. It reads the entries the log holds when Read is
// called. A Read that reaches the end of the log from at most this
// handle's end, while the handle has no append pending, moves the
// handle's end there and clears its failure, so that its next Append
// follows every entry read. Only the appending goroutine should Read an
// appending handle: a Read from elsewhere could clear a failure that the
// appender has not seen yet.
func (l *Mem) Read(ctx context.Context, from int64, fn func(offset int64, entry []byte) error) error {
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	s := l.store
	s.mu.Lock()
	start, entries := s.mu.start, s.mu.entries
	s.mu.Unlock()
	end := start + int64(len(entries))
	if from < start {
		return fmt.Errorf("%w: offset %d, the mem log starts at %d", ErrTrimmed, from, start)
	}
	for off := from; off < end; off++ {
		if (off-from)%256 == 255 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		e := entries[off-start]
		if err := fn(off, e[:len(e):len(e)]); err != nil {
			return err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.mu.closed && from <= l.mu.end && len(l.mu.pending) == 0 {
		l.mu.end = max(l.mu.end, end)
		l.mu.failed = nil
	}
	return nil
}

// Wait implements Log: it wakes as soon as an entry of any handle enters
// the log.
func (l *Mem) Wait(ctx context.Context, offset int64) (int64, error) {
	s := l.store
	for {
		select {
		case <-l.done:
			return 0, ErrClosed
		default:
		}
		s.mu.Lock()
		if s.mu.grew == nil {
			s.mu.grew = make(chan struct{})
		}
		end, grew := s.endLocked(), s.mu.grew
		s.mu.Unlock()
		if end > offset {
			return end, nil
		}
		select {
		case <-grew:
		case <-l.done:
			return 0, ErrClosed
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// Start implements Log.
func (l *Mem) Start() int64 {
	l.store.mu.Lock()
	defer l.store.mu.Unlock()
	return l.store.mu.start
}

// End implements Log: the offset after this handle's last known entry
// and its pending appends.
func (l *Mem) End() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.end + int64(len(l.mu.pending))
}

// Trim implements Log. It drops exactly the entries before before, for
// every handle, but never the newest one.
func (l *Mem) Trim(ctx context.Context, before int64) error {
	l.mu.Lock()
	closed := l.mu.closed
	l.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s := l.store
	s.mu.Lock()
	defer s.mu.Unlock()
	before = min(before, s.endLocked()-1)
	if before <= s.mu.start {
		return nil
	}
	// A new slice: readers may hold the old one.
	s.mu.entries = slices.Clone(s.mu.entries[before-s.mu.start:])
	s.mu.start = before
	return nil
}

// Close implements Log: appends still waiting for their Latency fail with
// ErrClosed (their entries do not enter the log). It closes this handle
// only; the entries stay for the others.
func (l *Mem) Close() error {
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return nil
	}
	l.mu.closed = true
	for len(l.mu.pending) > 0 {
		p := l.mu.pending[0]
		l.popLocked()
		p.ch <- AppendResult{Err: ErrClosed}
	}
	close(l.mu.room)
	l.mu.Unlock()
	close(l.done)
	l.wg.Wait()
	return nil
}
