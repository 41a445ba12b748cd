package coordinator

import (
	"errors"
	"fmt"

	"github.com/diskless-go/diskless/segment"
)

// Errors of the coordinator itself. Errors about a request carry a Kafka
// error code: they are *segment.Error values (match with errors.As, or
// segment.Code).
var (
	// ErrClosed: the coordinator is closed.
	ErrClosed = errors.New("coordinator: closed")
	// ErrNotLeader: this coordinator lost its log to another writer; the
	// request was not applied. It carries NOT_LEADER_OR_FOLLOWER.
	ErrNotLeader = &segment.Error{Code: segment.NotLeaderOrFollower, Message: "this coordinator is no longer the leader of its log"}
	// ErrCorruptEntry: a log entry does not decode.
	ErrCorruptEntry = errors.New("coordinator: corrupt log entry")
	// ErrInvalidOptions: an Options field is out of range; the message
	// names it.
	ErrInvalidOptions = errors.New("coordinator: invalid options")
)

func kafkaErr(code segment.ErrorCode, format string, args ...any) *segment.Error {
	return &segment.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}
