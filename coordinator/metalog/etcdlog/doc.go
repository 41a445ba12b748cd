// Package etcdlog is a metadata log (metalog.Log) in etcd, for many
// brokers on one bucket (package cluster/etcdcluster leads each shard's
// log through it): one key per entry, written in a transaction fenced by
// the writer's leadership (an etcd election), several in flight;
// followers are woken by a watch. It is a package of its own so that a
// program that does not use etcd does not link its client; it passes
// the conformance suite of package metalogtest as every Log does.
//
// # Format
//
// A Log keeps entry n under the key <prefix>log/<20-digit n>; the
// value is a kind byte and then the entry (kind 0), or, for an entry
// larger than SpillBytes, a reference to the object in the Spill bucket
// that holds it (kind 1):
//
//	+------+-------------------------------------------------------+
//	| kind | 0: the entry bytes                                    |
//	| byte | 1: size uvarint | crc32c uint32 (big endian) | key    |
//	+------+-------------------------------------------------------+
//
// Spilled objects are <SpillPrefix><20-digit n>-<uuid>, put before the
// key (an entry is durable once its key is) and deleted by Trim after it.
// The put of entry n is one transaction: if the key of n does not exist,
// the key of n-1 does, and (with a Fence) the writer's election key still
// has its revision, put it. So no offset is written twice, none is written
// before the one below it (a pipelined put that overtakes waits for it and
// tries again), and once the writer's leadership ends (its session's lease
// expired: paused, or cut off past the TTL) none of its puts lands, in
// flight or not. Without a Fence, puts go one at a time, as a
// metalog.Bucket's: a
// second writer is fenced by the offsets alone. Opening reads the keys
// once, as a metalog.Bucket lists its objects, with the same rule for left-overs
// below a gap.
package etcdlog
