// Package state is the batch coordinator's pure core: the records of
// its metadata log and their byte format, the view they build (topics,
// partitions, producers, transactions, groups, SCRAM credentials, ACLs
// and client quotas), and every operation's check and apply. It does no
// I/O and reads no clock: deciding a group of requests (Group, each Op's
// Check) takes the view, the time and the facts the driver read from the
// store (Facts); applying a durable entry (ApplyEntry) changes the view
// and returns the effects the driver carries out (Effects). Package
// coordinator drives it; package coordinator/store writes its rows to
// SQLite.
//
// # Log entries
//
// Each append is one entry. Integers in the header are big-endian; varints
// are Go's encoding/binary varints (zig-zag for signed), minimal.
//
//	+--------+---------+--------------+--------+---------+----------------------+
//	| crc    | version | leader epoch | prev   | records | record ...           |
//	| uint32 | uint8=1 | int32        | uint32 | uvarint | type uint8 |         |
//	|        |         |              |        |         | len uvarint|payload  |
//	+--------+---------+--------------+--------+---------+----------------------+
//	crc: CRC-32C (Castagnoli) of every byte after it.
//	prev: the crc of the entry its leader sent before it (the chain).
//	Version 0 entries have no prev field, and still decode.
//
// The chain lets a leader pipeline appends to a log whose puts are each
// conditional on their own offset only (metalog.Bucket with MaxInFlight
// above 1): a put that fails leaves the ones sent behind it in flight,
// and some may land after another leader's entry, or after a gap a later
// leader fills. Replay applies an entry only if it raises or keeps the
// epoch and either claims the log (an epoch record: a new leader's first
// entry, which follows whatever is there) or names, as prev, the checksum
// of the last entry applied; any other entry is read and skipped. The
// offsets stay contiguous and an entry is never applied twice. The puts
// a leader had in flight when another claimed the log may land after
// the claim, where the new leader's next put meets one of them: it is
// fenced, but by no leader, so it stops without ErrNotLeader (the entries
// past its own are all of earlier epochs), and a reopen claims the log
// again (diskless.Broker does it at once).
//
// Record types (part of the format): 1 epoch (the new leader's epoch and
// name), 2 create topic (ID, name, partitions, first partition number,
// config; then, optionally, the partitions this shard serves), 3 delete
// topic, 4 commit file (object ID, key, size, uploader, commit time; rows
// of partition, offsets, byte range, max timestamp; producer batches;
// then, optionally, the owners list), 5 trim (a partition's new log start
// offset), 6 init producer id, 7 objects deleted, 8 ownership received
// (object ID for a new row, key, owners list, time), 9 remote segment
// (a segment registered, and its object row), 10 offset commit (a
// consumer group's committed offsets), 11 offset delete (some or all of
// a group's), 12 group claim (a group's new claim epoch), 13 group
// metadata (a group's membership, opaque, as its coordinator stored it),
// 14 add partitions (a topic's new partition count, the first PID of the
// partitions added, and those of them this shard serves), 15 transaction
// state (a transactional ID's whole state after a transition), 16
// transaction begin (a producer's transaction opened in a partition), 17
// transaction marker (its COMMIT or ABORT at a partition's next offset);
// see Transactions in txn.go; 18 compact (a range of a partition's
// batches replaced by the runs of a compacted object, compact.go); 19
// alter topic (a topic's new config, altertopic.go); 20 SCRAM upsert (a
// user's credential for a mechanism, created or replaced), 21 SCRAM
// delete, 22 ACL create (bindings added), 23 ACL delete (bindings
// removed, exactly as the leader found its filters to match them), 24
// quota set (an entity's value of a client quota key), 25 quota remove,
// all of shard 0 (see Security; quotas.go); 26 pending commit file (the
// payload of a commit file, its object not known to have landed), 27
// confirm (the pending commits up to an object ID landed), 28 void (the
// pending commits from an object ID on are void): the parallel commit,
// pending.go.
//
// An optional field comes last in its record's payload, as a count
// (uvarint, at least 1) and that many varints, and only when present: a
// create topic record of a shard that serves every partition of the
// topic, and a commit file record of an object committed to this shard
// alone, are byte for byte what they were before shards existed, and
// those older records read as "all partitions" and "this shard alone".
// (A reader older than these fields rejects a record that has them as
// corrupt, rather than misapply it.)
//
//	create topic:  ... | max message bytes varint | [n uvarint | partition varint ...]
//	commit file:   ... | producer batches         | [n uvarint | shard varint ...]
//	ownership:     object ID varint | key (uvarint length, bytes) |
//	               n uvarint | shard varint ... | time varint
//	remote segment: segment ID [16]byte | PID varint | object ID varint |
//	               key (uvarint length, bytes) | base offset varint |
//	               end offset - base offset varint | max timestamp varint |
//	               .log size varint | .index size varint |
//	               .timeindex size varint | .txnindex size varint |
//	               uploader varint | time varint
//	offset commit: group (uvarint length, bytes) | time varint |
//	               n uvarint (at least 1) | per offset: topic (uvarint
//	               length, bytes) | topic ID [16]byte | partition varint |
//	               offset varint | leader epoch varint | metadata
//	               (uvarint length, bytes)
//	offset delete: group (uvarint length, bytes) | n uvarint (0: every
//	               offset of the group) | per partition: topic (uvarint
//	               length, bytes) | partition varint
//	group claim:   group (uvarint length, bytes) | epoch varint (at least 1)
//	group metadata: group (uvarint length, bytes) | generation varint |
//	               value (uvarint length, bytes; 0: delete) | time varint
//	add partitions: topic ID [16]byte | partitions varint | first PID
//	               varint | 0 (every partition added is served here) or
//	               1, n uvarint, partition varint ... (those served here)
//	txn state:     ID (uvarint length, bytes) | producer ID varint |
//	               epoch varint | state uint8 (0 Empty, 1 Ongoing,
//	               2 PrepareCommit, 3 PrepareAbort, 4 CompleteCommit,
//	               5 CompleteAbort, 6 Dead: the ID removed) | timeout ms
//	               varint | start time varint | update time varint |
//	               n uvarint | per
//	               partition: topic ID [16]byte | partition varint |
//	               n uvarint | per group: group (uvarint length, bytes) |
//	               n uvarint | per offset: group (uvarint length, bytes) |
//	               then as in offset commit
//	compact:       PID varint | from varint | to - from varint | object ID
//	               varint | key (uvarint length, bytes) | size varint |
//	               uploader varint | commit time varint | n uvarint | per
//	               run: base - from varint | last - base varint | byte
//	               position varint | byte size varint | max timestamp -
//	               commit time varint
//	alter topic:   topic ID [16]byte | the config as in create topic
//	               (retention ms varint through the compaction settings)
//	SCRAM upsert:  user (uvarint length, bytes; not empty) | mechanism
//	               uint8 (1 SCRAM-SHA-256, 2 SCRAM-SHA-512) | salt
//	               (uvarint length, bytes) | iterations varint (at
//	               least 1; the leader takes 4096 to 16384) | StoredKey
//	               (uvarint length, bytes) | ServerKey (uvarint length,
//	               bytes); salt and keys not empty
//	SCRAM delete:  user (uvarint length, bytes) | mechanism uint8
//	ACL create, ACL delete: n uvarint (at least 1) | per binding:
//	               resource type uint8 | resource name (uvarint length,
//	               bytes) | pattern type uint8 | principal (uvarint
//	               length, bytes) | host (uvarint length, bytes) |
//	               operation uint8 | permission uint8 (Kafka's codes)
//	quota set:     user | client-id | ip (each a kind uint8: 0 absent,
//	               1 the default, 2 named, then the name (uvarint length,
//	               bytes; not empty)); an ip alone, or a user, a
//	               client-id or both | key (uvarint length, bytes; not
//	               empty) | value float64 (IEEE 754 bits, big-endian;
//	               positive, finite)
//	quota remove:  the entity and key as in quota set
//	txn begin:     PID varint | producer ID varint | epoch varint
//	txn marker:    PID varint | producer ID varint | epoch varint |
//	               commit uint8 (0 ABORT, 1 COMMIT) | coordinator epoch
//	               varint | offset varint | first offset varint (-1: the
//	               transaction wrote nothing here) | time varint
package state
