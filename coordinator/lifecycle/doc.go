// Package lifecycle is the worker that ends a WAL object's life: each
// shard of the batch coordinator runs one. An object committed to several
// shards carries an owners list; when the owning shard has no batch left
// in it, the worker hands ownership to the next owner that still holds
// batches (Peer.ReceiveOwnership), and when the last owner's batches are
// gone, it deletes the object (and, for a remote segment, each of its
// files) after Options.Grace, then tells the shard (Peer.ObjectsDeleted).
// Deletions that fail back off, per key, from Options.Backoff to
// Options.MaxBackoff.
//
// The worker sees its shard through the narrow Shard interface (the dead
// objects of the shard's database, and the shard's error), so that it
// runs the same against a shard in this process and, through Peer,
// against one in another broker.
package lifecycle
