package metalog

import (
	"context"
	"errors"
)

// Log is a metadata log: an ordered, durable sequence of opaque entries
// numbered by offset from 0, with no gaps. The coordinator encodes its
// decisions into entries; the log knows nothing of them.
//
// The promises below are what the coordinator relies on, and what
// metalogtest.Run checks, each as its own subtest:
//
//   - Offsets start at 0 and have no gaps; results arrive in append order.
//   - An append is reported only once its entry is durable: a handle opened
//     afterwards (or the log reopened) finds it.
//   - An append that fails fails every append queued after it, and the log
//     goes on failing appends until the writer reads to the end (Mem,
//     Bucket) or reopens the log (File).
//   - Read returns durable entries only, at least up to the end at the
//     time of the call. Read below Start is an error wrapping ErrTrimmed.
//   - Trim never drops the newest entry, nor one at or after its argument.
//   - Two writers never both get an offset: where a second handle may
//     append (another process on the same storage), a writer appends at
//     the end it knows, and an append at an offset another writer took
//     fails with ErrFenced.
//   - Close fails or finishes pending appends; later calls return
//     ErrClosed.
//
// One goroutine appends; Read, Wait, Start and End may run beside it.
type Log interface {
	// Append queues entry to follow every entry queued before it and
	// returns a channel that receives one AppendResult: the entry's offset
	// once it is durable, or the error that stopped it. Results arrive in
	// append order. An entry that fails fails every entry queued after it.
	// If another writer has appended to the log, the error wraps
	// ErrFenced. Append may block while MaxInFlight entries are pending.
	// The log keeps entry; the caller must not change it.
	Append(entry []byte) <-chan AppendResult

	// MaxInFlight returns how many appends may be pending at once: 1 for
	// a log that must see each write succeed before it sends the next,
	// more for logs that pipeline.
	MaxInFlight() int

	// Read calls fn with each entry from offset from on, in order, at
	// least up to the end of the log at the time of the call; entries
	// appended by another writer are read too, and an appender's next
	// Append follows them. The entry slice is valid only during fn. A
	// from below Start is an error wrapping ErrTrimmed; a from at or past
	// the end reads nothing.
	Read(ctx context.Context, from int64, fn func(offset int64, entry []byte) error) error

	// Wait blocks until the log holds a durable entry at offset or after
	// it (a Read from offset would call fn), and returns the end it saw,
	// greater than offset. It returns at once if that is already so. It
	// returns ctx's error if ctx ends first, and ErrClosed if the log is
	// closed. Entries appended through this handle wake it at once;
	// entries of another writer are found as the implementation can (a
	// watch, or polling). A follower tails a log with Read and Wait.
	Wait(ctx context.Context, offset int64) (end int64, err error)

	// Start returns the first offset the log still holds.
	Start() int64

	// End returns the offset the next entry will take, as far as this
	// handle knows (Read may find more).
	End() int64

	// Trim drops the entries before offset before (they are covered by a
	// snapshot). It may keep some; it never drops one at or after before,
	// nor the newest entry, so that a reopened log always knows its end.
	Trim(ctx context.Context, before int64) error

	// Close waits for pending appends (or fails them) and releases the
	// log. Calls after Close return ErrClosed. It is safe to call twice.
	Close() error
}

// Confirmer is implemented by a Log whose appends are fenced by a
// leadership that a metadata service keeps (a cluster's election).
// Confirm returns nil if that leadership held at some instant during the
// call, an error wrapping ErrFenced if it has ended, and another error if
// the service could not say.
//
// A leader calls it before it answers a read from its own state that must
// hold every answer given before the read began, whichever leader gave
// it: a leader that has lost its leadership and does not know it yet (its
// process was paused, its watch is late) still has its state, but no
// longer the newest, and only its appends are fenced, not its reads. If
// the leadership held during Confirm, no other leader can have answered
// anything before the read began.
type Confirmer interface {
	Confirm(ctx context.Context) error
}

// Leased is implemented by a Log whose leadership is kept by a lease that
// its holder renews (a cluster's election under the broker's session).
// LeaseHeld reports, without asking anyone, whether the lease is surely
// still held: it was renewed less than its TTL ago, counting from when
// that renewal was sent (the service ends a lease its TTL after it took
// the last renewal, which is later). While it is held no other leader can
// be elected, unless the lease or the leadership is ended by force (a
// lease revoked, an election key deleted, by hand), which the holder
// learns only from its watch.
//
// A leader checks it before every read it answers from its own state
// (cheap: Confirm is a call): a leader paused or cut off past its TTL
// refuses them, even before it learns it lost the leadership.
type Leased interface {
	LeaseHeld() bool
}

// Claimer is a Log on which a new writer can take over from a busy one:
// Claim appends entry at the first offset, at or after the writer's end,
// that no other writer has taken, and returns it. A writer that reads to
// the end and then appends may lose every race to a busy writer whose next
// append is already on its way; Claim wins in a few tries. Nothing may be
// queued when Claim is called. The coordinator claims a log this way where
// it can (Bucket), and otherwise reads to the end and appends, retrying.
type Claimer interface {
	Log
	Claim(ctx context.Context, entry []byte) (int64, error)
}

// AppendResult is the outcome of one Append.
type AppendResult struct {
	// Offset is the entry's offset, when Err is nil.
	Offset int64
	// Err is why the entry is not in the log.
	Err error
}

// Errors of Log implementations.
var (
	// ErrFenced: another writer has appended to the log since this one
	// last read it; this writer is no longer the leader.
	ErrFenced = errors.New("metalog: fenced by another writer")
	// ErrTrimmed: the offset asked for is before the log's start.
	ErrTrimmed = errors.New("metalog: trimmed before that offset")
	// ErrClosed: the log is closed.
	ErrClosed = errors.New("metalog: closed")
	// ErrCorrupt: the log holds bytes that are not a valid entry where
	// one must be (not a torn tail, which recovery truncates).
	ErrCorrupt = errors.New("metalog: corrupt log")
	// ErrInvalidOptions: an options field is out of range; the message
	// names it.
	ErrInvalidOptions = errors.New("metalog: invalid options")
)
