package wal

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Defaults of Options.
const (
	DefaultMaxBytes = 8 << 20
	DefaultLinger   = 250 * time.Millisecond
	// DefaultMaxBufferedBytes bounds the bytes buffered and in flight: 8
	// objects of the default size, two seconds of 32 MiB/s.
	DefaultMaxBufferedBytes = 8 * DefaultMaxBytes
)

// Options configure a Buffer. The zero value holds the defaults; a nil
// *Options means the zero value.
type Options struct {
	// MaxBytes closes an object once its size reaches it. 0 means
	// DefaultMaxBytes.
	MaxBytes int64
	// Linger is the period of the object schedule: the open object closes
	// at the next multiple of Linger counted from NewBuffer (KIP-1150's
	// commit interval), or earlier once full. No request waits longer
	// than Linger, and one that arrives at a random moment waits Linger/2
	// on average. (A Kafka producer's linger.ms counts from the batch's
	// first record instead; on a broker that would make every request
	// that opens an object wait the whole Linger, and producers whose
	// requests are answered together, as one object's are, would open
	// each object together and all wait the whole Linger.) No timer runs
	// while the buffer is empty. 0 means DefaultLinger.
	Linger time.Duration
	// MaxBufferedBytes bounds the batch bytes in the open object, in
	// closed objects waiting for Next, and in objects taken by Next but
	// not yet answered. Add waits while a request would pass it (a request
	// larger than the bound is let in alone when the buffer is empty). 0
	// means DefaultMaxBufferedBytes; it must be at least MaxBytes.
	MaxBufferedBytes int64
	// KeyPrefix goes before "wal/<UUIDv7>" in object keys.
	KeyPrefix string
	// Clock is the time source; nil means the system clock.
	Clock Clock
	// Logger logs object closes; nil means no logging.
	Logger *zap.Logger
}

// Buffer collects produce requests into WAL objects. It is safe for
// concurrent use: producers call Add, one committer calls Next and answers
// the objects it gets.
type Buffer struct {
	maxBytes, maxBuffered int64
	linger                time.Duration
	epoch                 time.Time // where the Linger schedule starts
	prefix                string
	clock                 Clock
	log                   *zap.Logger

	mu struct {
		sync.Mutex
		cur      *Object       // the open object, or nil
		timer    Timer         // the open object's linger timer
		queue    []*Object     // closed, not yet taken by Next
		buffered int64         // batch bytes in cur, queue and in flight
		closed   bool          //
		room     chan struct{} // closed (and replaced) when bytes are freed
		ready    chan struct{} // closed (and replaced) when queue grows or on Close
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
		maxBuffered: o.MaxBufferedBytes,
		linger:      o.Linger,
		prefix:      o.KeyPrefix,
		clock:       o.Clock,
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
	switch {
	case b.maxBytes < 0:
		return nil, fmt.Errorf("wal: Options.MaxBytes %d is negative", b.maxBytes)
	case b.linger < 0:
		return nil, fmt.Errorf("wal: Options.Linger %v is negative", b.linger)
	case b.maxBuffered < b.maxBytes:
		return nil, fmt.Errorf("wal: Options.MaxBufferedBytes %d is less than MaxBytes %d", b.maxBuffered, b.maxBytes)
	}
	if b.clock == nil {
		b.clock = systemClock{}
	}
	if b.log == nil {
		b.log = zap.NewNop()
	}
	b.epoch = b.clock.Now()
	b.mu.room = make(chan struct{})
	b.mu.ready = make(chan struct{})
	return b, nil
}

// Add puts a request into the open object, closing objects as their size
// or the request's requires. It waits while the buffer holds
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
	b.mu.buffered += size
	req.Added = b.clock.Now()

	if cur := b.mu.cur; cur != nil && cur.size+size > b.maxBytes {
		b.closeCurLocked("early") // the request would not fit
	}
	if b.mu.cur == nil {
		obj := NewObject("")
		obj.owner = b
		b.mu.cur = obj
		b.mu.timer = b.clock.AfterFunc(b.untilTick(req.Added), func() { b.lingerDone(obj) })
	}
	b.mu.cur.Add(req)
	if b.mu.cur.size >= b.maxBytes {
		b.closeCurLocked("size")
	}
	return nil
}

// untilTick is the time from now to the next tick of the Linger schedule,
// in (0, Linger].
func (b *Buffer) untilTick(now time.Time) time.Duration {
	d := b.linger - now.Sub(b.epoch)%b.linger
	if d <= 0 || d > b.linger { // a clock set back before the epoch
		return b.linger
	}
	return d
}

// lingerDone closes obj if it is still the open object.
func (b *Buffer) lingerDone(obj *Object) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mu.cur == obj {
		b.closeCurLocked("linger")
	}
}

// Flush closes the open object now, if it holds anything.
func (b *Buffer) Flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mu.cur != nil {
		b.closeCurLocked("flush")
	}
}

// closeCurLocked closes the open object and queues it for Next.
func (b *Buffer) closeCurLocked(why string) {
	obj := b.mu.cur
	b.mu.cur = nil
	b.mu.timer.Stop()
	b.mu.timer = nil
	key := NewObjectKey(b.prefix, b.clock.Now())
	obj.key = key
	b.mu.queue = append(b.mu.queue, obj)
	close(b.mu.ready)
	b.mu.ready = make(chan struct{})
	b.log.Debug("wal: object closed", zap.String("key", key), zap.String("why", why),
		zap.Int64("bytes", obj.size), zap.Int("requests", len(obj.requests)), zap.Int("partitions", len(obj.regions)))
}

// Next returns the next closed object, in the order objects were closed,
// waiting for one if none is ready. The caller encodes and uploads it,
// commits its coordinates and then answers it (Answer or Fail): until then
// its bytes count against MaxBufferedBytes. After Close, Next returns the
// objects still queued, then ErrClosed. If ctx ends first it returns ctx's
// error.
func (b *Buffer) Next(ctx context.Context) (*Object, error) {
	b.mu.Lock()
	for len(b.mu.queue) == 0 {
		if b.mu.closed {
			b.mu.Unlock()
			return nil, ErrClosed
		}
		ready := b.mu.ready
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ready:
		}
		b.mu.Lock()
	}
	obj := b.mu.queue[0]
	b.mu.queue[0] = nil
	b.mu.queue = b.mu.queue[1:]
	b.mu.Unlock()
	return obj, nil
}

// release frees n batch bytes of an answered object.
func (b *Buffer) release(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.mu.buffered -= n
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
		b.closeCurLocked("close")
	}
	b.mu.closed = true
	close(b.mu.ready)
	b.mu.ready = make(chan struct{})
	close(b.mu.room)
	b.mu.room = make(chan struct{})
	return nil
}
