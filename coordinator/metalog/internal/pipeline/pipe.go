package pipeline

import (
	"context"
	"fmt"
	"runtime/pprof"
	"slices"
	"sync"
)

// Put is one append for a Pipe's Write: its entry at its offset.
type Put struct {
	Entry  []byte
	Offset int64
	done   chan struct{} // made when the write is sent, closed when it ends
	err    error         // the write's outcome, once done is closed
}

// PipeOptions configure a Pipe.
type PipeOptions struct {
	// Name begins the Pipe's errors ("metalog: bucket").
	Name string
	// Closed is the error of an append to a closed log (metalog.ErrClosed).
	Closed error
	// MaxQueued bounds the appends queued (being written or waiting);
	// Append blocks beyond it.
	MaxQueued int
	// MaxInFlight bounds the writes in flight: those of the first
	// MaxInFlight queued appends.
	MaxInFlight int
	// Write writes one entry at its offset; it gives up when ctx ends (on
	// Close, or when a write before it failed).
	Write func(ctx context.Context, p *Put) error
	// Inject, if not nil, is called as each write is sent: an error fails
	// that write without calling Write (tests inject failures).
	Inject func() error
	// Label names the sender goroutine in profiles.
	Label string
	// WaitGroup counts the sender and the writes; Close waits for it (the
	// log may add its own goroutines).
	WaitGroup *sync.WaitGroup
}

// Pipe is the append machinery of a log that writes each entry by itself,
// conditional on its offset: a Queue of the appends, the writer's start
// and end, and a sender that writes the first MaxInFlight queued appends
// at once (each Write in its own goroutine) and answers them in order.
// The first write that fails fails every append queued, and the writes
// still in flight behind it are abandoned (their context ends; some may
// land). Appends then fail until CatchUp or Claimed, which a Read that
// reaches the end of the log calls. It is safe for concurrent use.
type Pipe[R Result] struct {
	o    PipeOptions
	wake chan struct{}

	ctx    context.Context // ended by Close
	cancel context.CancelFunc

	mu struct {
		sync.Mutex
		q          Queue[R]
		start, end int64         // end: after the writer's last known entry
		grew       chan struct{} // made by Watch, closed when end grows
		// putCtx is the context of the writes sent; a failure ends it
		// and makes a new one.
		putCtx    context.Context
		putCancel context.CancelFunc
	}
}

// Init sets up p for a log that holds start to end, and starts its
// sender. p keeps ctx's values, not its cancellation: Close ends p.
func (p *Pipe[R]) Init(ctx context.Context, start, end int64, o PipeOptions) {
	p.o = o
	p.wake = make(chan struct{}, 1)
	p.ctx, p.cancel = context.WithCancel(context.WithoutCancel(ctx))
	p.mu.q.Init(&p.mu.Mutex, o.MaxQueued, o.Name, o.Closed)
	p.mu.start, p.mu.end = start, end
	p.mu.putCtx, p.mu.putCancel = context.WithCancel(p.ctx)
	o.WaitGroup.Add(1)
	go pprof.Do(p.ctx, pprof.Labels("diskless", o.Label), func(context.Context) {
		defer o.WaitGroup.Done()
		p.run()
	})
}

// Context returns the context that Close ends.
func (p *Pipe[R]) Context() context.Context { return p.ctx }

// Bind returns ctx, ended by Close too, and its cancel.
func (p *Pipe[R]) Bind(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(p.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

// Append queues entry at the writer's end plus the appends queued before
// it, and returns the channel of its result.
func (p *Pipe[R]) Append(entry []byte) <-chan R {
	ch := make(chan R, 1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.mu.q.Admit(ch) {
		return ch
	}
	off := p.mu.end + int64(p.mu.q.Len())
	p.mu.q.push(item[R]{ch: ch, offset: off, put: &Put{Entry: entry, Offset: off}})
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return ch
}

// run is the sender: it writes the queued entries, up to MaxInFlight at
// once, and answers them in order, until Close.
func (p *Pipe[R]) run() {
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-p.wake:
		}
		for p.step() {
		}
	}
}

// step sends the writes the window allows, waits for the head's (or for
// an Append to wake it), and answers the head. It returns false when
// there is nothing to wait for.
func (p *Pipe[R]) step() bool {
	p.mu.Lock()
	q := &p.mu.q
	items := q.queued()
	if len(items) == 0 || q.failed != nil || q.closed {
		p.mu.Unlock()
		return false
	}
	for _, it := range items[:min(len(items), p.o.MaxInFlight)] {
		if it.put != nil && it.put.done == nil {
			p.sendLocked(it.put)
		}
	}
	head := items[0].put
	p.mu.Unlock()

	select {
	case <-head.done:
	case <-p.wake:
		return true // more to send
	case <-p.ctx.Done():
		return false
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	if head.err != nil {
		q.Fail(head.err)
		// The writes still in flight behind the failed one are
		// abandoned; later ones get a new context.
		p.mu.putCancel()
		p.mu.putCtx, p.mu.putCancel = context.WithCancel(p.ctx)
		return false
	}
	p.setEndLocked(head.Offset + 1)
	q.Answer(head.Offset + 1)
	return true
}

// sendLocked starts w's write.
func (p *Pipe[R]) sendLocked(w *Put) {
	w.done = make(chan struct{})
	var injected error
	if p.o.Inject != nil {
		injected = p.o.Inject()
	}
	ctx := p.mu.putCtx
	p.o.WaitGroup.Add(1)
	go func() {
		defer p.o.WaitGroup.Done()
		defer close(w.done)
		if w.err = injected; w.err == nil {
			w.err = p.o.Write(ctx, w)
		}
	}()
}

// WaitEarlier waits until the write of the append queued just before w
// (whose own write is under way) has ended, and returns nil if it
// succeeded (or w is the first queued: the one before was answered). If
// the one before failed, it returns that failure; if the log is closed,
// or w's queue has failed, an error wrapping the closed error or that
// failure. A log whose write of w cannot succeed before the one before it
// lands (etcd's, conditional on the key before) waits with it.
func (p *Pipe[R]) WaitEarlier(ctx context.Context, w *Put) error {
	p.mu.Lock()
	q := &p.mu.q
	switch {
	case q.closed:
		p.mu.Unlock()
		return p.o.Closed
	case q.failed != nil:
		err := q.failed
		p.mu.Unlock()
		return err
	}
	items := q.queued()
	i := slices.IndexFunc(items, func(it item[R]) bool { return it.put == w })
	var before *Put
	var done chan struct{}
	if i > 0 && items[i-1].put != nil {
		before = items[i-1].put
		done = before.done // sent before w: writes are sent in order
	}
	p.mu.Unlock()
	switch {
	case i < 0:
		return p.o.Closed
	case done == nil:
		return nil
	}
	select {
	case <-done:
		return before.err
	case <-ctx.Done():
		p.mu.Lock()
		defer p.mu.Unlock()
		if err := p.mu.q.failed; err != nil {
			return err
		}
		return p.o.Closed
	}
}

// setEndLocked moves the writer's end to end and wakes Watch's waiters.
func (p *Pipe[R]) setEndLocked(end int64) {
	if end != p.mu.end {
		p.mu.end = end
		if p.mu.grew != nil { // made by a Wait only: no allocation per entry otherwise
			close(p.mu.grew)
			p.mu.grew = nil
		}
	}
}

// Wait returns the writer's end once it is past offset, or offset+1
// once look finds offset's entry in the store (another writer's), or
// after sleep, the wait between two looks, has seen it land; sleep ends
// early when grew is closed (the writer's end grew) or ctx ends. An error
// of look ends the Wait; the closed error if the log is closed, ctx's if
// it ends.
func (p *Pipe[R]) Wait(ctx context.Context, offset int64,
	look func(ctx context.Context) (found bool, err error),
	sleep func(ctx context.Context, grew <-chan struct{}) (found bool),
) (int64, error) {
	ctx, cancel := p.Bind(ctx)
	defer cancel()
	for {
		closed, end, grew := p.Watch()
		switch {
		case closed:
			return 0, p.o.Closed
		case end > offset:
			return end, nil
		}
		found, err := look(ctx)
		switch {
		case p.ctx.Err() != nil:
			return 0, p.o.Closed
		case ctx.Err() != nil:
			return 0, ctx.Err()
		case err != nil:
			return 0, err
		case found:
			return offset + 1, nil
		}
		if sleep(ctx, grew) {
			return offset + 1, nil
		}
	}
}

// Bounds returns the writer's start and end, or the closed error.
func (p *Pipe[R]) Bounds() (start, end int64, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.q.closed {
		return 0, 0, p.o.Closed
	}
	return p.mu.start, p.mu.end, nil
}

// Watch returns whether the log is closed, the writer's end, and a
// channel closed once the end grows.
func (p *Pipe[R]) Watch() (closed bool, end int64, grew <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.grew == nil {
		p.mu.grew = make(chan struct{})
	}
	return p.mu.q.closed, p.mu.end, p.mu.grew
}

// Start returns the first offset as far as the writer knows.
func (p *Pipe[R]) Start() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.start
}

// End returns the offset after the writer's last known entry and its
// queued appends.
func (p *Pipe[R]) End() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.end + int64(p.mu.q.Len())
}

// TrimLimit returns the start, and the offset before which a Trim
// asked to trim before before may drop entries: before that, and keep
// entries before the writer's end. It returns the closed error if the
// log is closed.
func (p *Pipe[R]) TrimLimit(before, keep int64) (start, limit int64, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.q.closed {
		return 0, 0, p.o.Closed
	}
	return p.mu.start, min(before, p.mu.end-keep), nil
}

// Trimmed moves the start to start, if that is later.
func (p *Pipe[R]) Trimmed(start int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.start = max(p.mu.start, start)
}

// CatchUp is told by a Read from from that reached the end of the log
// at end: if that Read began at most at the writer's end, while nothing is
// queued, the writer's end moves there and its failure is cleared (so
// its next append follows what the Read found). It returns the end and
// the failure it cleared.
func (p *Pipe[R]) CatchUp(from, end int64) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := &p.mu.q
	if q.closed || from > p.mu.end || q.Len() > 0 {
		return p.mu.end, nil
	}
	failed := q.failed
	p.setEndLocked(max(p.mu.end, end))
	q.Recover()
	return p.mu.end, failed
}

// ClaimFrom returns the writer's end, from which a Claim probes; an error
// if the log is closed or appends are queued.
func (p *Pipe[R]) ClaimFrom() (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch n := p.mu.q.Len(); {
	case p.mu.q.closed:
		return -1, p.o.Closed
	case n > 0:
		return -1, fmt.Errorf("%s: Claim with %d appends queued", p.o.Name, n)
	}
	return p.mu.end, nil
}

// Claimed records a Claim's entry at off: the writer's end moves after
// it and its failure is cleared.
func (p *Pipe[R]) Claimed(off int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setEndLocked(max(p.mu.end, off+1))
	p.mu.q.Recover()
}

// Close closes the log: later appends fail with the closed error; the
// writes in flight are abandoned (their context ends), and once they and
// the WaitGroup's goroutines have ended, and also is taken (the log's Trim
// lock: Close ends a Trim's context, and lets it finish first), every
// queued append fails with the closed error. It reports false if p was
// closed already.
func (p *Pipe[R]) Close(also sync.Locker) bool {
	p.mu.Lock()
	if p.mu.q.closed {
		p.mu.Unlock()
		return false
	}
	p.mu.q.SetClosed()
	p.mu.Unlock()
	p.cancel()
	p.o.WaitGroup.Wait()
	also.Lock()
	defer also.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.q.Close()
	return true
}
