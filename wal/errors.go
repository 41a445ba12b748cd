package wal

import (
	"errors"
	"fmt"
)

// Sentinel errors. Errors about an object's bytes are *ObjectError values
// that wrap one of the first four.
var (
	// ErrUnknownVersion: the object's version byte is not one this package
	// reads.
	ErrUnknownVersion = errors.New("wal: unknown object version")
	// ErrTruncated: the object (or range) ends before a batch it should
	// hold.
	ErrTruncated = errors.New("wal: object truncated")
	// ErrCorrupt: a batch in the object is not a valid RecordBatch v2 (it
	// also wraps the segment error that says why), or bytes are left over.
	ErrCorrupt = errors.New("wal: corrupt object")
	// ErrMismatch: a batch differs from its coordinate, or the coordinates
	// do not describe the object.
	ErrMismatch = errors.New("wal: batch does not match its coordinate")

	// ErrClosed: the Buffer is closed.
	ErrClosed = errors.New("wal: buffer closed")
	// ErrTimeout: Add's context ended while it waited for room in the
	// buffer. It is retriable; a broker answers REQUEST_TIMED_OUT.
	ErrTimeout = errors.New("wal: timed out waiting for room in the buffer")
	// ErrNotEncoded: Answer was called on an object that was never
	// encoded, so its coordinates are unknown.
	ErrNotEncoded = errors.New("wal: object not encoded")
)

// ObjectError is an error about the bytes of a WAL object: where in the
// object, and what.
type ObjectError struct {
	// Offset is the byte offset in the object where the problem is.
	Offset int64
	// Err is one of ErrUnknownVersion, ErrTruncated, ErrCorrupt and
	// ErrMismatch, possibly joined with a cause.
	Err error
}

// Error implements error.
func (e *ObjectError) Error() string { return fmt.Sprintf("%v (at byte %d)", e.Err, e.Offset) }

// Unwrap returns the cause.
func (e *ObjectError) Unwrap() error { return e.Err }

func objectErr(off int64, sentinel error, format string, args ...any) error {
	return &ObjectError{Offset: off, Err: fmt.Errorf("%w: %s", sentinel, fmt.Sprintf(format, args...))}
}
