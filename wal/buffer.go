package wal

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/diskless-go/diskless/clock"
)

// Defaults of Options.
const (
	DefaultMaxBytes = 8 << 20
	DefaultLinger   = 250 * time.Millisecond
	// DefaultMaxBufferedBytes bounds the bytes buffered and in flight: 8
	// objects of the default size, two seconds of 32 MiB/s.
	DefaultMaxBufferedBytes = 8 * DefaultMaxBytes
	// DefaultFullBytes is the size at which an object is full enough to
	// close at once, outside the PUT budget: the size where a PUT stops
	// mattering beside what the object's bytes cost anyway. At S3
	// Standard's prices (0.005 USD per 1,000 PUTs, 0.023 USD per
	// GiB-month) a PUT costs 5% of a month's storage of 4.45 MiB; at 4.5
	// MiB it costs 4.95% (a day's storage would put the line at about 135 MiB,
	// past any object's size). Objects this large are rare under light
	// load, so the budget still sets the PUT rate there.
	DefaultFullBytes = 4<<20 + 1<<19
)

// Options configure a Buffer. The zero value holds the defaults; a nil
// *Options means the zero value.
type Options struct {
	// MaxBytes closes an object once its size reaches it. 0 means
	// DefaultMaxBytes.
	MaxBytes int64
	// FullBytes is the size at which an object is full: it closes at
	// once, whatever the budget and whether an upload slot is free, and
	// does not count against the budget (ObjectsPerSecond). 0 means
	// DefaultFullBytes, or MaxBytes if that is less; it may not pass
	// MaxBytes.
	FullBytes int64
	// Linger is the longest a request waits for its object to close,
	// counted from the object's first request: an object closes Linger
	// after it opened whatever the budget and the uploads (its upload may
	// then wait for a slot). 0 means DefaultLinger.
	Linger time.Duration
	// ObjectsPerSecond is the PUT budget: objects that are not full close
	// at most this many per second, each at least 1/ObjectsPerSecond
	// after the object closed before it. Within it an object closes as
	// soon as the budget allows and an upload slot is free (a committer
	// waits in Next with nothing queued), not at a fixed tick: a request
	// that finds the buffer empty and nothing in flight, on a broker
	// whose budget allows, is closed and handed to Next at once. Other
	// objects, once the budget allows, wait for a pause in arriving
	// requests (1/32 of the budget's period without one; the producers
	// answered by one commit come back together, and should share the
	// next object), for at most 1/8 of the period; an object whose first
	// request came more than that before the budget allowed closes then.
	// A request arriving within such a pause after an object was answered
	// is not lone. Full objects (FullBytes,
	// or the next request does not fit in MaxBytes) close at once and
	// are not budgeted: the volume sets their rate, and a full close does
	// not delay the next budgeted one. 0 means 1/Linger (4 a second
	// at the default Linger: the rate of one object per Linger); less
	// than 1/Linger is refused, since no object could then close within
	// Linger.
	ObjectsPerSecond float64
	// MaxBufferedBytes bounds the batch bytes in the open object, in
	// closed objects waiting for Next, and in objects taken by Next but
	// not yet answered. Add waits while a request would pass it (a request
	// larger than the bound is let in alone when the buffer is empty). 0
	// means DefaultMaxBufferedBytes; it must be at least MaxBytes.
	MaxBufferedBytes int64
	// KeyPrefix goes before "wal/<UUIDv7>" in object keys.
	KeyPrefix string
	// Clock is the time source of Linger, the budget and Request.Added;
	// nil means clock.System.
	Clock clock.Clock
	// Logger logs object closes; nil means no logging.
	Logger *zap.Logger
}

// An object that may close under the budget but whose requests are still
// arriving (the producers answered by one commit come back together) waits
// for a pause in them: until no request has come for 1/quietShare of the
// budget's period, at most 1/gatherShare of it past the moment the budget
// allowed (an object that opened longer than that before it closes then). At 4 objects a second that is a 7.8 ms pause, at most 31 ms; at
// 150 a second, 0.2 and 0.8 ms. A request counts as lone (closed at once)
// only if nothing was answered in the last such pause either.
const (
	quietShare  = 32
	gatherShare = 8
)

// Buffer collects produce requests into WAL objects. It is safe for
// concurrent use: producers call Add, one committer calls Next (when it
// has an upload slot free: a waiting Next is what lets the budget close an
// object early) and answers the objects it gets.
type Buffer struct {
	maxBytes, maxBuffered int64
	fullBytes             int64 // FullBytes
	linger                time.Duration
	period                time.Duration // 1/ObjectsPerSecond
	quiet, gather         time.Duration // period / quietShare, period / gatherShare
	prefix                string
	clock                 clock.Clock
	log                   *zap.Logger

	mu struct {
		sync.Mutex
		cur       *Object       // the open object, or nil
		opened    time.Time     // when cur's first request came
		lastAdd   time.Time     // when cur's last request came
		lone      bool          // cur opened on an idle broker, the budget allowing
		lingerT   clock.Timer   // closes cur at opened + Linger
		budgetT   clock.Timer   // closes cur when the budget allows, if Next waits
		lastClose time.Time     // of the last object the budget or Linger closed (zero: none yet)
		lastFree  time.Time     // when an answered object last freed its bytes
		waiting   int           // calls of Next waiting
		queue     []*Object     // closed, not yet taken by Next
		buffered  int64         // batch bytes in cur, queue and in flight
		closed    bool          //
		room      chan struct{} // closed (and replaced) when bytes are freed
		ready     chan struct{} // closed (and replaced) when queue grows or on Close
	}
}

// NewBuffer returns an empty Buffer.
func NewBuffer(opts *Options) (*Buffer, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	b := &Buffer{
		maxBytes:    o.MaxBytes,
		fullBytes:   o.FullBytes,
		maxBuffered: o.MaxBufferedBytes,
		linger:      o.Linger,
		prefix:      o.KeyPrefix,
		clock:       clock.Or(o.Clock),
		log:         o.Logger,
	}
	if b.maxBytes == 0 {
		b.maxBytes = DefaultMaxBytes
	}
	if b.linger == 0 {
		b.linger = DefaultLinger
	}
	if b.maxBuffered == 0 {
		b.maxBuffered = max(DefaultMaxBufferedBytes, b.maxBytes)
	}
	if b.fullBytes == 0 {
		b.fullBytes = min(DefaultFullBytes, b.maxBytes)
	}
	switch {
	case b.maxBytes < 0:
		return nil, fmt.Errorf("wal: Options.MaxBytes %d is negative", b.maxBytes)
	case b.fullBytes < 0 || b.fullBytes > b.maxBytes:
		return nil, fmt.Errorf("wal: Options.FullBytes %d is not within 0 to MaxBytes (%d)", b.fullBytes, b.maxBytes)
	case b.linger < 0:
		return nil, fmt.Errorf("wal: Options.Linger %v is negative", b.linger)
	case b.maxBuffered < b.maxBytes:
		return nil, fmt.Errorf("wal: Options.MaxBufferedBytes %d is less than MaxBytes %d", b.maxBuffered, b.maxBytes)
	case o.ObjectsPerSecond < 0:
		return nil, fmt.Errorf("wal: Options.ObjectsPerSecond %v is negative", o.ObjectsPerSecond)
	}
	b.period = b.linger
	if o.ObjectsPerSecond > 0 {
		// Rounded up, so that ObjectsPerSecond periods make a second.
		b.period = time.Duration(math.Ceil(float64(time.Second) / o.ObjectsPerSecond))
		if b.period > b.linger {
			return nil, fmt.Errorf("wal: Options.ObjectsPerSecond %v is less than 1/Linger (%v): no object could close within Linger", o.ObjectsPerSecond, b.linger)
		}
	}
	b.quiet, b.gather = b.period/quietShare, b.period/gatherShare
	if b.log == nil {
		b.log = zap.NewNop()
	}
	b.mu.room = make(chan struct{})
	b.mu.ready = make(chan struct{})
	return b, nil
}

// Add puts a request into the open object, closing objects as their size
// or the request's requires, or as the budget allows (see
// Options.ObjectsPerSecond). It waits while the buffer holds
// MaxBufferedBytes; if ctx ends first it returns an error wrapping
// ErrTimeout and ctx's error, and the request is not buffered. After Close
// it returns ErrClosed. Once Add returns nil, the request will be answered
// through its Done (by the committer, or by nobody if it never calls Next).
func (b *Buffer) Add(ctx context.Context, req *Request) error {
	size := req.Size()
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		if b.mu.closed {
			return ErrClosed
		}
		if b.mu.buffered == 0 || b.mu.buffered+size <= b.maxBuffered {
			break
		}
		room := b.mu.room
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			b.mu.Lock()
			return fmt.Errorf("%w: %w", ErrTimeout, ctx.Err())
		case <-room:
		}
		b.mu.Lock()
	}
	now := b.clock.Now()
	// Idle: nothing open, queued or in flight, and nothing answered just
	// now (whose producers may be coming back together, this one first).
	idle := b.mu.buffered == 0 && !now.Before(b.mu.lastFree.Add(b.quiet))
	b.mu.buffered += size
	req.Added = now

	if cur := b.mu.cur; cur != nil && cur.size+size > b.maxBytes {
		b.closeCurLocked(now, "early") // the request would not fit
	}
	if b.mu.cur == nil {
		b.openLocked(now, idle)
	}
	b.mu.cur.Add(req)
	b.mu.lastAdd = now
	switch {
	case b.mu.cur.size >= b.fullBytes:
		b.closeCurLocked(now, "size")
	case b.budgetAllowsLocked(now):
		b.closeCurLocked(now, "budget")
	default:
		b.armBudgetLocked(now)
	}
	return nil
}

// openLocked opens a new object for a request that arrives at now; idle
// says the buffer held nothing and nothing was in flight.
func (b *Buffer) openLocked(now time.Time, idle bool) {
	obj := NewObject("")
	obj.owner = b
	b.mu.cur = obj
	b.mu.opened = now
	b.mu.lone = idle && !now.Before(b.tokenLocked())
	b.mu.lingerT = b.clock.AfterFunc(b.linger, func() { b.timerDone(obj, "linger") })
}

// tokenLocked is when the budget lets the next object close: a period
// after the last close.
func (b *Buffer) tokenLocked() time.Time {
	if b.mu.lastClose.IsZero() {
		return time.Time{}
	}
	return b.mu.lastClose.Add(b.period)
}

// closeTimeLocked is the earliest the budget lets the open object close,
// as things stand: once the budget allows, for a lone request or an
// object open since a gather before that; else after a pause in arriving
// requests, or a gather past the budget's time.
func (b *Buffer) closeTimeLocked() time.Time {
	token := b.tokenLocked()
	if b.mu.lone || !b.mu.opened.Add(b.gather).After(token) {
		// A lone request; or requests that have waited a gather already
		// for the budget, and would only wait longer for a pause.
		return token
	}
	start := token
	if start.Before(b.mu.opened) {
		start = b.mu.opened
	}
	t := b.mu.lastAdd.Add(b.quiet)
	if t.Before(start) {
		t = start
	}
	if limit := start.Add(b.gather); limit.Before(t) {
		t = limit
	}
	return t
}

// budgetAllowsLocked reports whether the open object may close now under
// the budget: it is not empty, the budget allows, and an upload slot is
// free (a Next waits with nothing queued for it).
func (b *Buffer) budgetAllowsLocked(now time.Time) bool {
	return b.mu.cur != nil && b.mu.waiting > len(b.mu.queue) && !now.Before(b.closeTimeLocked())
}

// armBudgetLocked starts the timer that closes the open object when the
// budget allows, if a Next waits for it and none is running.
func (b *Buffer) armBudgetLocked(now time.Time) {
	if b.mu.cur == nil || b.mu.budgetT != nil || b.mu.waiting <= len(b.mu.queue) {
		return
	}
	at := b.closeTimeLocked()
	if !now.Before(at) {
		return
	}
	obj := b.mu.cur
	b.mu.budgetT = b.clock.AfterFunc(at.Sub(now), func() { b.timerDone(obj, "budget") })
}

// timerDone runs when obj's linger or budget timer fires: it closes obj
// if it is still the open object, at Linger whatever the budget says, at
// the budget's time if an upload slot is free then.
func (b *Buffer) timerDone(obj *Object, why string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mu.cur != obj {
		return
	}
	now := b.clock.Now()
	if why == "budget" {
		b.mu.budgetT = nil
		if !b.budgetAllowsLocked(now) {
			b.armBudgetLocked(now) // the clock ran early, or no slot is free any more
			return
		}
	}
	b.closeCurLocked(now, why)
}

// Flush closes the open object now, if it holds anything.
func (b *Buffer) Flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mu.cur != nil {
		b.closeCurLocked(b.clock.Now(), "flush")
	}
}

// closeCurLocked closes the open object at now and queues it for Next.
// why says what closed it; a close for its size ("size", "early") does
// not take the budget's token.
func (b *Buffer) closeCurLocked(now time.Time, why string) {
	obj := b.mu.cur
	b.mu.cur = nil
	b.mu.lingerT.Stop()
	b.mu.lingerT = nil
	if b.mu.budgetT != nil {
		b.mu.budgetT.Stop()
		b.mu.budgetT = nil
	}
	if why != "size" && why != "early" {
		b.mu.lastClose = now
	}
	key := NewObjectKey(b.prefix, now)
	obj.key = key
	b.mu.queue = append(b.mu.queue, obj)
	close(b.mu.ready)
	b.mu.ready = make(chan struct{})
	b.log.Debug("wal: object closed", zap.String("key", key), zap.String("why", why),
		zap.Int64("bytes", obj.size), zap.Int("requests", len(obj.requests)), zap.Int("partitions", len(obj.regions)),
		zap.Duration("open", now.Sub(b.mu.opened)))
}

// Next returns the next closed object, in the order objects were closed,
// waiting for one if none is ready. A call that waits is an upload slot
// free: the budget closes the open object for it as soon as it allows
// (Options.ObjectsPerSecond), so a committer calls Next only when it can
// upload at once. The caller encodes and uploads the object, commits its
// coordinates and then answers it (Answer or Fail): until then its bytes
// count against MaxBufferedBytes. After Close, Next returns the objects
// still queued, then ErrClosed. If ctx ends first it returns ctx's error.
func (b *Buffer) Next(ctx context.Context) (*Object, error) {
	b.mu.Lock()
	b.mu.waiting++
	defer func() {
		b.mu.waiting--
		b.mu.Unlock()
	}()
	for len(b.mu.queue) == 0 {
		if b.mu.closed {
			return nil, ErrClosed
		}
		now := b.clock.Now()
		if b.budgetAllowsLocked(now) {
			b.closeCurLocked(now, "budget")
			break
		}
		b.armBudgetLocked(now)
		ready := b.mu.ready
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			b.mu.Lock()
			return nil, ctx.Err()
		case <-ready:
		}
		b.mu.Lock()
	}
	obj := b.mu.queue[0]
	b.mu.queue[0] = nil
	b.mu.queue = b.mu.queue[1:]
	return obj, nil
}

// release frees n batch bytes of an answered object.
func (b *Buffer) release(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.mu.buffered -= n
	b.mu.lastFree = b.clock.Now()
	close(b.mu.room)
	b.mu.room = make(chan struct{})
}

// Buffered returns the batch bytes buffered and in flight.
func (b *Buffer) Buffered() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mu.buffered
}

// Close closes the open object, so that Next hands it on with the others
// still queued, and makes Add return ErrClosed, waiters included. It is
// safe to call twice.
func (b *Buffer) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mu.closed {
		return nil
	}
	if b.mu.cur != nil {
		b.closeCurLocked(b.clock.Now(), "close")
	}
	b.mu.closed = true
	close(b.mu.ready)
	b.mu.ready = make(chan struct{})
	close(b.mu.room)
	b.mu.room = make(chan struct{})
	return nil
}
