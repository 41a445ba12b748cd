package coordinator

import (
	"context"
	"errors"
)

// Log is a coordinator's metadata log: the source of truth that its SQLite
// state is a materialisation of. It holds entries (opaque byte slices that
// the coordinator encodes; see the package doc) numbered by offset from 0,
// with no gaps. Three implementations: FileLog (a local, segmented,
// fsynced file; one machine, lowest latency), BucketLog (one object per
// entry in a bucket, written with a conditional put, so that a second
// writer fences the first; brokers keep no state that matters) and MemLog
// (tests).
//
// One goroutine appends (the coordinator's); reads may run beside it.
type Log interface {
	// Append queues entry to follow every entry queued before it and
	// returns a channel that receives one AppendResult: the entry's offset
	// once it is durable, or the error that stopped it. Results arrive in
	// append order. An entry that fails fails every entry queued after it.
	// If another writer has appended to the log (BucketLog), the error
	// wraps ErrFenced. Append may block while MaxInFlight entries are
	// pending. The log keeps entry; the caller must not change it.
	Append(entry []byte) <-chan AppendResult

	// MaxInFlight returns how many appends may be pending at once: 1 for
	// BucketLog (each put must see the one before succeed), more for logs
	// that pipeline.
	MaxInFlight() int

	// Read calls fn with each entry from offset from on, in order, up to
	// the end of the log as it is during the call; entries appended by
	// another writer are read too, and an appender's next Append follows
	// them. The entry slice is valid only during fn. A from below Start is
	// an error wrapping ErrTrimmed.
	Read(ctx context.Context, from int64, fn func(offset int64, entry []byte) error) error

	// Start returns the first offset the log still holds.
	Start() int64

	// End returns the offset the next entry will take, as far as this
	// instance knows (Read may find more).
	End() int64

	// Trim drops the entries before offset before (they are covered by a
	// snapshot). It may keep some; it never drops one at or after before.
	Trim(ctx context.Context, before int64) error

	// Close waits for pending appends (or fails them) and releases the
	// log. Calls after Close return ErrLogClosed.
	Close() error
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
	ErrFenced = errors.New("coordinator: log fenced by another writer")
	// ErrTrimmed: the offset asked for is before the log's start.
	ErrTrimmed = errors.New("coordinator: log trimmed before that offset")
	// ErrLogClosed: the log is closed.
	ErrLogClosed = errors.New("coordinator: log closed")
	// ErrCorruptLog: the log holds bytes that are not a valid entry where
	// one must be (not a torn tail, which recovery truncates).
	ErrCorruptLog = errors.New("coordinator: corrupt log")
)
