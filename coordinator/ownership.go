package coordinator

import (
	"context"
	"fmt"
	"time"

	"github.com/diskless-go/diskless/coordinator/state"

	"gocloud.dev/blob"
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

// LifecycleOptions configure a shard's part of the WAL object lifecycle.
// The zero value of each field but Bucket is the documented default.
type LifecycleOptions struct {
	// Bucket holds the WAL objects and remote segments; the last owner of
	// an object deletes it there. Required.
	Bucket *blob.Bucket
	// Peers returns the leader of another shard, to hand objects on to and
	// to tell of deletions (Coordinator gives its coordinators). Nil means none:
	// steps that need another shard fail, and are retried.
	Peers func(shard int) (Peer, error)
	// Grace is how long an object stays in the bucket after its last batch
	// went, so that reads under way finish. 0 means 60 s.
	Grace time.Duration
	// Interval is how often the worker runs in the background; it also
	// runs, at most once a second (or Interval, if shorter), when the
	// shard applies an entry that takes batches out of objects or receives
	// one. 0 means 10 s; negative means never (call
	// leader.RunLifecycle).
	Interval time.Duration
	// Backoff is the delay before a failed step (a shard unreachable, the
	// bucket failing) is retried, doubled after each failure up to
	// MaxBackoff, with jitter. 0 means 1 s and 5 minutes.
	Backoff, MaxBackoff time.Duration
	// StallAfter is how long a shard that does not own an object, and
	// holds no batch in it, waits before it asks the object's first owner
	// to take it (see above). 0 means 10 times Grace.
	StallAfter time.Duration
	// OnDelete, if set, is called with the key of each object the worker
	// deleted from the bucket (a broker drops it from its cache): for a
	// remote segment, once, with its key (RemoteSegmentKey), after every
	// one of its files is deleted. It runs on the worker's goroutine and
	// must not block.
	OnDelete func(key string)
}

func (o *LifecycleOptions) withDefaults() (LifecycleOptions, error) {
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

// Peer is another shard's coordinator, as the lifecycle reaches it. A
// *leader is one; a deployment with a coordinator per process would
// put an RPC client here.
type Peer interface {
	ReceiveOwnership(ctx context.Context, req OwnershipRequest) (OwnershipResult, error)
	ObjectsDeleted(ctx context.Context, keys []string) error
}

var _ Peer = (*leader)(nil)

// ReceiveOwnership makes this shard the owner of an object, if it still
// holds batches in it or has no row of it (then a row with no batches is
// made: a later commit of that key is refused). It is idempotent: an
// owner accepts again without logging again. A shard that has the
// object's row and no batch left in it declines (Accepted false): the
// ownership passes over it. Owners that do not hold this shard, once, are
// INVALID_REQUEST.
func (c *leader) ReceiveOwnership(ctx context.Context, req OwnershipRequest) (OwnershipResult, error) {
	o := &state.ReceiveOp{BaseOp: state.NewBaseOp(ctx), Req: req}
	if err := c.submit(ctx, o, o.Done); err != nil {
		return OwnershipResult{}, err
	}
	return o.Res, nil
}
