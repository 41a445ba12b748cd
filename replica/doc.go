// Package replica turns diskless partitions into classic local logs and
// tiered segments (KIP-1163, KIP-1164).
//
// # Materialiser
//
// A broker's local segments are a cache of the object store: the
// Materializer follows the coordinator for the partitions it is given
// (FindBatches from its local end), reads their batches through the object
// cache, writes into each batch what the coordinator decided (Inject: base
// offset, partition leader epoch, and on LogAppendTime topics the commit
// time as max timestamp, with the attribute bit and a new CRC), and appends
// them to a local segment.Log. Any broker can rebuild any partition this
// way, which ends unclean leader election. A new replica starts where the
// caller says (KIP-1163's three choices): the earliest diskless offset
// (complete, slow, a storm of GETs), the latest (fast, no history), or a
// tail window (the default: the last 100 MiB, or the earliest offset if
// later; most consumers read the tail). A local log that no longer meets
// the coordinator's range (its log start moved past the local end) starts
// again; the local retention (RetentionTime, RetentionBytes of the log
// options: local.retention.ms and local.retention.bytes) applies to closed
// segments after each catch-up.
//
// Partitions are caught up in the background by a shared pool of workers
// (MaterializerOptions.Workers), not a goroutine each: each partition is
// due every Poll after its last catch-up ended, is never caught up by two
// workers at once, and Remove and Close wait for the catch-up in flight.
// The Offloaders over a Materializer run their passes on the same workers.
// Sync catches a partition up at once, on the caller's goroutine, to the
// high watermark the coordinator reported when it began. Adding a
// partition again with the same options does nothing; with other options
// it is ErrConflictingOptions.
//
// # Offloader
//
// The Offloader materialises each partition assigned to it from the
// partition's diskless start offset, with the topic's segment.bytes and
// segment.ms, and uploads each segment once it is closed as a tiered
// segment in the shape of KIP-405's LogSegmentData, then registers it with
// the coordinator, which moves the diskless start offset past it and
// releases the diskless batches below (their WAL objects are deleted once
// no shard needs them). A segment's files share one key, named by the
// coordinator (coordinator.RemoteSegmentKey):
//
//	<prefix>tiered/<topic ID>-<partition>/<20-digit base offset>-<segment ID>
//	    .log                      the local segment's .log, byte for byte
//	    .index                    its offset index (8-byte entries)
//	    .timeindex                its time index (12-byte entries)
//	    .txnindex                 its transaction index, if it has one
//	    .snapshot                 a producer snapshot (segment.AppendProducerSnapshot)
//	    .leader_epoch_checkpoint  a leader-epoch checkpoint (text)
//	    .metadata                 a RemoteLogSegmentMetadata record as Kafka's
//	                              __remote_log_metadata holds it
//
// The segment ID is a UUIDv7, new for every upload attempt, so uploads
// never overwrite and are idempotent: an attempt that was never registered
// (a crash, a refusal) is garbage that the orphan collector deletes once
// the coordinator's commit deadline makes a late registration impossible.
// The producer snapshot and leader-epoch checkpoint describe the batches of
// the segment itself (Kafka's describe the whole log up to its end: a
// diskless partition's producer state lives in the coordinator). Compacted
// topics are compacted by the segment cleaner on the local log before
// their segments are uploaded; a tiered segment is not compacted again.
//
// # Reads
//
// Read serves a fetch the way the coordinator says: below the diskless
// start offset from tiered segments (ReadRemote: one range read of the
// offset index, then range reads of the .log from the indexed position,
// both through the object cache), above it from WAL objects with the
// coordinator's offsets injected (ReadRuns). RemoteOffsetForTimestamp
// answers ListOffsets by time from a tiered segment's time index.
package replica
