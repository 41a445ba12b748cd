// Package replica turns diskless partitions into classic local logs and,
// later, tiered segments (KIP-1163, KIP-1164).
//
// A broker's local segments are a cache of the object store: the
// Materializer follows the coordinator for the partitions it is given
// (FindBatches from its local end), reads their batches through the object
// cache, writes into each batch what the coordinator decided (Inject: base
// offset, partition leader epoch, and on LogAppendTime topics the commit
// time as max timestamp, with the attribute bit and a new CRC), and appends
// them to a local segment.Log. Any broker can rebuild any partition this
// way, which ends unclean leader election. A new replica starts where the
// caller says (KIP-1163's three choices): the earliest offset (complete,
// slow, a storm of GETs), the latest (fast, no history), or a tail window
// (the default: the last 100 MiB, or the earliest offset if later; most
// consumers read the tail).
package replica
