// Package coordinator is the batch coordinator of diskless topics
// (KIP-1164): it decides the order of everything in its partitions. A
// broker uploads a WAL object, then commits its batch coordinates here;
// the coordinator checks producer state, assigns offsets, writes its
// decision to a replicated metadata log, applies it to SQLite once the log
// says it is durable, and answers.
//
// # Operations
//
// Mutating (each goes through the coordinator's one loop): CreatePartitions,
// DeleteTopic, CommitFile, DeleteRecords, EnforceRetention, InitProducerID,
// ObjectsDeleted. Reading (from a pool of read-only connections, never
// seeing anything not durable): FindBatches, ListOffsets, DeadObjects,
// Topics. A Follower tails the log into its own database and answers the
// reads, a little behind.
//
// Idempotence follows Kafka exactly (ProducerStateManager): per partition
// and producer id, the epoch and the last five batches; a retry of one of
// those five answers its original offset and is not stored again; an older
// epoch is INVALID_PRODUCER_EPOCH; a gap in sequences is
// OUT_OF_ORDER_SEQUENCE_NUMBER.
//
// # The log is the truth
//
// SQLite is a cache of the log: delete it at any time, and opening replays
// the newest snapshot (a compressed copy of the database in the bucket)
// plus the log after it. Every decision is a record; applying a record is a
// pure function of the state and the record, so a follower, a restart and
// a rebuild reach the same state. A new leader claims the log by appending
// an epoch record: on a BucketLog, where each entry is written with a
// conditional put at its offset, the previous leader's next append then
// fails, and every request it still holds fails with NOT_LEADER_OR_FOLLOWER.
//
// # Speculative, pipelined execution
//
// Waiting for the log between requests would cap throughput at one group
// per log round trip. So the loop checks each new group of requests against
// a speculative view: the committed state plus the records already sent to
// the log but not yet durable, applied selectively (only what checks read:
// topics, high watermarks, log start offsets, producer states; never batch
// rows). The records go to the log at once; the committed state applies
// them only when the log says they are durable, so it never holds anything
// a crash could take away; then the requests are answered. Requests that
// arrive while the log works go together into the next entry. FileLog and
// MemLog take several entries in flight; BucketLog one, the next group
// already checked and waiting. The speculative view is kept in memory over
// an in-memory mirror of the small tables, rather than in a SQLite
// transaction that is rolled back: the checks then cost no SQL at all, and
// the speculation is the same (see BENCHMARKS.md for why it matters).
//
// # Log entries
//
// Each append is one entry. Integers in the header are big-endian; varints
// are Go's encoding/binary varints (zig-zag for signed), minimal.
//
//	+--------+---------+--------------+---------+--------------------------+
//	| crc    | version | leader epoch | records | record ...               |
//	| uint32 | uint8=0 | int32        | uvarint | type uint8 | len uvarint |
//	|        |         |              |         | payload                  |
//	+--------+---------+--------------+---------+--------------------------+
//	crc: CRC-32C (Castagnoli) of every byte after it.
//
// Record types (part of the format): 1 epoch (the new leader's epoch and
// name), 2 create topic (ID, name, partitions, first partition number,
// config), 3 delete topic, 4 commit file (object ID, key, size, uploader,
// commit time; rows of partition, offsets, byte range, max timestamp;
// producer batches), 5 trim (a partition's new log start offset), 6 init
// producer id, 7 objects deleted.
//
// # The database
//
// One writer connection (the loop's) and a read-only pool; WAL mode,
// synchronous=NORMAL (a crash may lose the last transactions, never
// consistency: the applied offset in meta says where to replay from). The
// schema is in schema.go; a run of contiguous batches of one partition in
// one object is one row of the batches table.
package coordinator
