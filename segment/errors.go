package segment

import (
	"errors"
	"fmt"
	"strings"
)

// ErrorCode is a Kafka protocol error code (clients/.../protocol/Errors.java).
// Errors from this package carry the code that Apache Kafka returns for the
// same input, so a broker can put it in its response unchanged.
type ErrorCode int16

// The Kafka error codes this package returns.
const (
	UnknownServerError         ErrorCode = -1
	NoError                    ErrorCode = 0
	OffsetOutOfRange           ErrorCode = 1
	CorruptMessage             ErrorCode = 2
	MessageTooLarge            ErrorCode = 10
	RecordListTooLarge         ErrorCode = 18
	InvalidTimestamp           ErrorCode = 32
	UnsupportedCompressionType ErrorCode = 76
	InvalidRecord              ErrorCode = 87
)

// String returns Kafka's name for the code, such as "CORRUPT_MESSAGE".
func (c ErrorCode) String() string {
	if info, ok := codeInfo[c]; ok {
		return info.name
	}
	return fmt.Sprintf("ERROR_%d", int16(c))
}

// Retriable reports whether Kafka marks the code retriable: a client may
// send the same request again and expect it to succeed (CORRUPT_MESSAGE:
// the bytes may have been damaged in transit; NOT_LEADER_OR_FOLLOWER: ask
// again after a metadata refresh; ...).
func (c ErrorCode) Retriable() bool { return codeInfo[c].retriable }

// Error is the error this package returns for input that Kafka would
// reject. It carries the Kafka error code, and for per-record failures
// (a null key on a compacted topic, a timestamp out of bounds) the index of
// each failing record within its batch, as Kafka's produce response does.
//
// Match it with errors.As, or with errors.Is against the Err* values below,
// which compare by code.
type Error struct {
	// Code is the Kafka error code.
	Code ErrorCode
	// Message says what is wrong, for a person to act on.
	Message string
	// RecordErrors lists per-record failures, if any, in record order.
	RecordErrors []RecordError
	// Err is the underlying cause, if any.
	Err error
}

// RecordError is one record's failure, as in Kafka's produce response
// (record_errors).
type RecordError struct {
	// BatchIndex is the record's position within its batch, from 0.
	BatchIndex int
	// Message says what is wrong with the record.
	Message string
}

// Sentinels for errors.Is: an *Error matches the sentinel with its code.
var (
	ErrOffsetOutOfRange           = &Error{Code: OffsetOutOfRange}
	ErrCorruptMessage             = &Error{Code: CorruptMessage}
	ErrMessageTooLarge            = &Error{Code: MessageTooLarge}
	ErrRecordListTooLarge         = &Error{Code: RecordListTooLarge}
	ErrInvalidTimestamp           = &Error{Code: InvalidTimestamp}
	ErrUnsupportedCompressionType = &Error{Code: UnsupportedCompressionType}
	ErrInvalidRecord              = &Error{Code: InvalidRecord}
	ErrUnknownServerError         = &Error{Code: UnknownServerError}
)

// Error implements error.
func (e *Error) Error() string {
	var sb strings.Builder
	sb.WriteString("segment: ")
	sb.WriteString(e.Code.String())
	if e.Message != "" {
		sb.WriteString(": ")
		sb.WriteString(e.Message)
	}
	for i, re := range e.RecordErrors {
		if i == 3 {
			fmt.Fprintf(&sb, " (and %d more)", len(e.RecordErrors)-3)
			break
		}
		fmt.Fprintf(&sb, "; record %d: %s", re.BatchIndex, re.Message)
	}
	if e.Err != nil {
		sb.WriteString(": ")
		sb.WriteString(e.Err.Error())
	}
	return sb.String()
}

// Retriable reports whether Kafka marks the error's code retriable.
func (e *Error) Retriable() bool { return e.Code.Retriable() }

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error with the same code; it lets
// errors.Is(err, ErrCorruptMessage) match any corrupt-message error.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Code returns the Kafka error code of err: NoError for nil, the code of the
// first *Error in its chain, else UnknownServerError.
func Code(err error) ErrorCode {
	if err == nil {
		return NoError
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return UnknownServerError
}

func errorf(code ErrorCode, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

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

func offsetOutOfRange(offset, start, end int64) *Error {
	return &Error{Code: OffsetOutOfRange, Err: &OffsetRangeError{Offset: offset, LogStartOffset: start, LogEndOffset: end}}
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
