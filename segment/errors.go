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
	CorruptMessage             ErrorCode = 2
	MessageTooLarge            ErrorCode = 10
	RecordListTooLarge         ErrorCode = 18
	InvalidTimestamp           ErrorCode = 32
	UnsupportedCompressionType ErrorCode = 76
	InvalidRecord              ErrorCode = 87
)

// String returns Kafka's name for the code, such as "CORRUPT_MESSAGE".
func (c ErrorCode) String() string {
	switch c {
	case UnknownServerError:
		return "UNKNOWN_SERVER_ERROR"
	case NoError:
		return "NONE"
	case CorruptMessage:
		return "CORRUPT_MESSAGE"
	case MessageTooLarge:
		return "MESSAGE_TOO_LARGE"
	case RecordListTooLarge:
		return "RECORD_LIST_TOO_LARGE"
	case InvalidTimestamp:
		return "INVALID_TIMESTAMP"
	case UnsupportedCompressionType:
		return "UNSUPPORTED_COMPRESSION_TYPE"
	case InvalidRecord:
		return "INVALID_RECORD"
	}
	return fmt.Sprintf("ERROR_%d", int16(c))
}

// Retriable reports whether Kafka marks the code retriable: a client may
// send the same request again and expect it to succeed. Of the codes above
// only CORRUPT_MESSAGE is (the bytes may have been damaged in transit).
func (c ErrorCode) Retriable() bool {
	return c == CorruptMessage
}

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
