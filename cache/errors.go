package cache

import "errors"

// Sentinel errors. Errors the cache returns wrap one of these (and, for
// errors that come from the bucket, the bucket's error too, so that
// gcerrors.Code still classifies them).
var (
	// ErrClosed: the Cache is closed.
	ErrClosed = errors.New("cache: closed")
	// ErrInvalidRange: the offset is negative, or offset plus length
	// overflows.
	ErrInvalidRange = errors.New("cache: invalid range")
	// ErrOutOfRange: the range asked for ends past the end of the object.
	// The cache knows an object's size once it holds one of its blocks, was
	// given the object by Put, was told the size (ReadOptions.ObjectSize),
	// or has fetched any part of it.
	ErrOutOfRange = errors.New("cache: range past the end of the object")
	// ErrNotFound: the bucket has no object under the key. It wraps the
	// bucket's error, whose gcerrors.Code is gcerrors.NotFound.
	ErrNotFound = errors.New("cache: object not found")
	// ErrShortRead: the bucket returned fewer bytes than the object's size
	// says it holds. The read may be retried; nothing was cached.
	ErrShortRead = errors.New("cache: bucket returned fewer bytes than expected")
	// ErrSizeMismatch: the caller gave a size for the object
	// (ReadOptions.ObjectSize) that is not the size the bucket reports or
	// the cache learned before, or the bucket reports a size other than the
	// one the cache learned. Nothing was cached.
	ErrSizeMismatch = errors.New("cache: object size differs from the size given")
)

// Errors about a block file of the disk tier. They never reach a caller:
// a damaged file is deleted and its block fetched again.
var (
	errDamaged = errors.New("cache: damaged block file")
	errGone    = errors.New("cache: block file gone")
)
