package lifecycle

import (
	"context"
	"time"

	"github.com/diskless-go/diskless/coordinator/state"
	"gocloud.dev/blob"
)

// Options configure a shard's part of the WAL object lifecycle.
// The zero value of each field but Bucket is the documented default.
type Options struct {
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

// Peer is another shard's coordinator, as the lifecycle reaches it. A
// *leader is one; a deployment with a coordinator per process would
// put an RPC client here.
type Peer interface {
	ReceiveOwnership(ctx context.Context, req state.OwnershipRequest) (state.OwnershipResult, error)
	ObjectsDeleted(ctx context.Context, keys []string) error
}
