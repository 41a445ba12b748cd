package segment

import (
	"errors"
	"fmt"

	"github.com/diskless-go/diskless/kafkaerr"
)

// Errors of a Log (log.go) that carry no Kafka error code of their own.
var (
	// ErrClosed is returned by every call on a Log after Close.
	ErrClosed = errors.New("segment: log is closed")
	// ErrOffsetsOutOfOrder: an append's offsets go backwards, within the
	// append or against the log end offset (Kafka's
	// OffsetsOutOfOrderException and UnexpectedAppendOffsetException).
	ErrOffsetsOutOfOrder = errors.New("segment: append offsets are out of order")
	// ErrNotCompacted: Compact was called on a log whose cleanup policy does
	// not include compact.
	ErrNotCompacted = errors.New("segment: cleanup.policy does not include compact")
	// ErrInvalidLogOptions: a LogOptions field is out of range; the message
	// names it.
	ErrInvalidLogOptions = errors.New("segment: invalid log options")
	// ErrCorruptSegment: a segment file holds bytes a Log did not write,
	// found while the log was open (recovery on open truncates them).
	ErrCorruptSegment = errors.New("segment: corrupt segment file")
)

// OffsetRangeError says why an offset is out of range: it is below the log
// start offset or above the log end offset. It is the Err of the
// OFFSET_OUT_OF_RANGE *Error that Log.Read and Log.DeleteRecords return;
// match it with errors.As.
type OffsetRangeError struct {
	// Offset is the offset asked for.
	Offset int64
	// LogStartOffset and LogEndOffset bound the offsets the log holds.
	LogStartOffset, LogEndOffset int64
}

// Error implements error.
func (e *OffsetRangeError) Error() string {
	return fmt.Sprintf("offset %d is outside the log's range [%d, %d]", e.Offset, e.LogStartOffset, e.LogEndOffset)
}

func offsetOutOfRange(offset, start, end int64) *kafkaerr.Error {
	return &kafkaerr.Error{Code: kafkaerr.OffsetOutOfRange, Err: &OffsetRangeError{Offset: offset, LogStartOffset: start, LogEndOffset: end}}
}

// Errors of Log.SegmentFiles.
var (
	// ErrNoSuchSegment: no segment of the log has the base offset asked
	// for (it may have been deleted, or cleaned into another segment).
	ErrNoSuchSegment = errors.New("segment: no segment has that base offset")
	// ErrActiveSegment: the segment asked for is the active one, which
	// appends still change; roll the log first.
	ErrActiveSegment = errors.New("segment: the segment is active")
)
