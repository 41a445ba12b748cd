package coordinator

import (
	"context"
	"fmt"
	"time"

	"github.com/diskless-go/diskless/coordinator/state"
)

// The WAL object lifecycle (KIP-1164's file ownership and deletion).
//
// An object that holds partitions of several shards is committed to each
// of them, with the same owners list: those shards in a random order
// (random, so that no shard ends up owning most objects). Each shard's
// commit record carries the list, so every shard knows its place in it.
//
// owners[0] owns the object first. A shard owns an object when it is
// owners[0] and has the object's row, or when it has logged receiving the
// object (an ownershipRecord); nothing else about ownership is logged,
// since the rest follows from the log: whether the shard still holds
// batches in the object (the row's live count), since when it holds none
// (dead_at).
//
// The owner, once none of its batches in the object is left (retention,
// DeleteRecords, topic deletion, offload), asks the owners after it, in
// order, to receive the object (ReceiveOwnership):
//
//   - a shard that holds batches in it, or has its commit on the way to
//     its log, logs receiving it and accepts: it is the owner now, and the
//     sender's part is done;
//   - a shard that has no row of the object (its commit failed, or has not
//     arrived yet) also logs receiving it, which makes a row with no
//     batches: from then on it refuses a commit of that key, so the
//     object can never gain a batch there;
//   - a shard that has the row and no batch left in it declines, and says
//     since when it holds none. It can never hold one again (a known key
//     is never committed twice), so ownership passes over it, and that
//     answer is kept in memory.
//
// The owner that finds every shard after it declining is the last one: it
// deletes the object from the bucket once the grace period has passed
// since the last batch in it went (its own, or a decliner's: the latest),
// so that reads already under way finish; then it tells every owner,
// itself last, with ObjectsDeleted, and they forget the object. They
// forget it only once the object's commit deadline (Options.
// CommitDeadline after the time in its key) has passed too: until then a
// shard that knows the key refuses its commit, and after it every shard
// does, so a commit that arrives late never puts a batch in a deleted
// object. (Without a CommitDeadline, or for a key that is not a WAL object
// key, they forget it at once, and that guarantee is the caller's.)
//
// Every step is idempotent and repeated until it succeeds: receiving an
// object twice logs it once; deleting a deleted object succeeds; forgetting
// a forgotten one does nothing. A sender does not log that it has handed an
// object on: after a restart (or on a new leader) it asks again, and the
// receiver accepts without logging again. A shard that handed an object on
// and is restarted after the object was deleted, before it was told, may
// make the receiver log a row again for an object that is gone: that row
// goes the same way (delete, which finds nothing, then forget).
//
// If owners[0] never had the commit, no one would start. So a shard that
// does not own an object, and has held no batch in it for StallAfter, asks
// owners[0] to receive it once (per process): owners[0] already owns it if
// it has the row, and otherwise logs a row and starts the chain.
//
// An object committed to one shard alone has no owners list: that shard is
// its owner and its last owner.

// lifecycleDefaults returns o with its defaults filled in, or
// ErrInvalidOptions.
func lifecycleDefaults(o *LifecycleOptions) (LifecycleOptions, error) {
	l := *o
	if l.Bucket == nil {
		return l, fmt.Errorf("%w: Lifecycle.Bucket is nil", ErrInvalidOptions)
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{{"Grace", &l.Grace, time.Minute}, {"Backoff", &l.Backoff, time.Second}, {"MaxBackoff", &l.MaxBackoff, 5 * time.Minute}, {"StallAfter", &l.StallAfter, 0}} {
		if *d.v < 0 {
			return l, fmt.Errorf("%w: Lifecycle.%s %v is negative", ErrInvalidOptions, d.name, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if l.StallAfter == 0 {
		l.StallAfter = 10 * l.Grace
	}
	if l.Interval == 0 {
		l.Interval = 10 * time.Second
	}
	return l, nil
}

var _ Peer = (*leader)(nil)

// ReceiveOwnership makes this shard the owner of an object, if it still
// holds batches in it or has no row of it (then a row with no batches is
// made: a later commit of that key is refused). It is idempotent: an
// owner accepts again without logging again. A shard that has the
// object's row and no batch left in it declines (Accepted false): the
// ownership passes over it. Owners that do not hold this shard, once, are
// INVALID_REQUEST.
func (l *leader) ReceiveOwnership(ctx context.Context, req OwnershipRequest) (OwnershipResult, error) {
	o := &state.ReceiveOp{BaseOp: state.NewBaseOp(ctx), Req: req}
	if err := l.submit(ctx, o, o.Done); err != nil {
		return OwnershipResult{}, err
	}
	return o.Res, nil
}
