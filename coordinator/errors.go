package coordinator

import (
	"errors"

	"github.com/diskless-go/diskless/kafkaerr"
)

// Errors of the coordinator itself. Errors about a request carry a Kafka
// error code: they are *kafkaerr.Error values (match with errors.As, or
// kafkaerr.CodeOf).
var (
	// ErrClosed: the coordinator is closed.
	ErrClosed = errors.New("coordinator: closed")
	// ErrNotLeader: this coordinator lost its log to another writer; the
	// request was not applied. It carries NOT_LEADER_OR_FOLLOWER.
	ErrNotLeader = &kafkaerr.Error{Code: kafkaerr.NotLeaderOrFollower, Message: "this coordinator is no longer the leader of its log"}
	// ErrDiverged: a shard's database has applied entries that its
	// metadata log does not hold (see the error's text for what to do).
	ErrDiverged = errors.New("coordinator: the database is ahead of its metadata log")
	// ErrShardDown: the shard is not open (an earlier ReopenShard
	// failed, or one is under way). It comes wrapped in a
	// NOT_LEADER_OR_FOLLOWER *kafkaerr.Error, which clients retry.
	ErrShardDown = errors.New("coordinator: shard is not open")
	// ErrInvalidOptions: an Options field is out of range; the message
	// names it.
	ErrInvalidOptions = errors.New("coordinator: invalid options")
	// ErrOutcomeUnknown marks the error of a forwarded call that was sent
	// again after an attempt whose answer was lost (it timed out, or its
	// connection broke): that attempt may have been applied, so the
	// error, although it carries the refusal of the attempt that
	// answered (a NOT_COORDINATOR of a group claimed since, say), does
	// not say that nothing was applied. It comes joined to that error.
	ErrOutcomeUnknown = errors.New("coordinator: an earlier attempt of the call may have been applied")
)

// outcomeUnknown is a refusal that followed an attempt whose answer was
// lost: errors.Is ErrOutcomeUnknown, and As the refusal.
type outcomeUnknown struct{ err error }

func (e *outcomeUnknown) Error() string {
	return e.err.Error() + " (an earlier attempt's answer was lost: it may have been applied)"
}

func (e *outcomeUnknown) Unwrap() []error { return []error{e.err, ErrOutcomeUnknown} }
