// Package kafkaerr is the vocabulary of errors every layer of diskless
// shares: Kafka's protocol error codes (Code, with Kafka's names and
// retriability) and Error, the error a request gets when Kafka would
// refuse it, carrying the code a Kafka broker puts in its response.
//
// Every package of the module returns *Error for bad input and refused
// requests; a broker answers a client with CodeOf(err). It is a leaf: it
// imports nothing of ours.
//
// It is the module's one table of codes: kafkaserver writes these
// constants into its responses, and no library file imports franz-go's
// kerr for codes (table_test.go checks that, and checks every code's
// number, name and retriability against kerr's independent table).
package kafkaerr

import (
	"errors"
	"fmt"
	"strings"
)

// Code is a Kafka protocol error code.
type Code int16

// String returns Kafka's name for the code, such as "CORRUPT_MESSAGE".
func (c Code) String() string {
	if info, ok := codeInfo[c]; ok {
		return info.name
	}
	return fmt.Sprintf("ERROR_%d", int16(c))
}

// Retriable reports whether Kafka marks the code retriable: a client may
// send the same request again and expect it to succeed (CORRUPT_MESSAGE:
// the bytes may have been damaged in transit; NOT_LEADER_OR_FOLLOWER: ask
// again after a metadata refresh; ...).
func (c Code) Retriable() bool { return codeInfo[c].retriable }

// Error is a request that Kafka would refuse. It carries the Kafka error
// code, and for per-record failures (a null key on a compacted topic, a
// timestamp out of bounds) the index of each failing record within its
// batch, as Kafka's produce response does.
//
// Match it with errors.As, or with errors.Is against a value of the same
// code (the Err* values below, or any *Error), which compares by code.
type Error struct {
	// Code is the Kafka error code.
	Code Code
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

// New returns an *Error with code and a message formatted as fmt.Sprintf
// does.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an *Error with code and message whose cause is err.
func Wrap(code Code, err error, message string) *Error {
	return &Error{Code: code, Message: message, Err: err}
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
	ErrNotLeaderOrFollower        = &Error{Code: NotLeaderOrFollower}
	ErrUnknownTopicOrPartition    = &Error{Code: UnknownTopicOrPartition}
	ErrInvalidRequest             = &Error{Code: InvalidRequest}
	ErrKafkaStorageError          = &Error{Code: KafkaStorageError}
)

// Error implements error: "kafka: CODE_NAME: message; record i: ...: cause".
func (e *Error) Error() string {
	var sb strings.Builder
	sb.WriteString("kafka: ")
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

// CodeOf returns the Kafka error code of err: NoError for nil, the code of
// the first *Error in its chain, else UnknownServerError.
func CodeOf(err error) Code {
	if err == nil {
		return NoError
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return UnknownServerError
}
