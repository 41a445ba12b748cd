// Package coordinator is the batch coordinator of diskless topics
// (KIP-1164): it decides the order of everything in its partitions. A
// broker uploads a WAL object, then commits its batch coordinates here;
// the coordinator checks producer state, assigns offsets, writes its
// decision to a replicated metadata log, applies it to SQLite once the log
// says it is durable, and answers.
//
// # Operations
//
// Coordinator is the API: Open it over one metadata log per shard (one
// shard is its simplest case). Mutating calls go to the shard of their
// partition (or to every shard: CreatePartitions, DeleteTopic, CommitFile
// of an object that spans shards), through that shard's one loop:
// CreatePartitions, DeleteTopic, CommitFile, DeleteRecords,
// EnforceRetention, InitProducerID, RegisterRemoteSegment; the object
// lifecycle adds ObjectsDeleted and ReceiveOwnership between shards.
// Reads: FindBatches, ListOffsets, RemoteSegments, Topics. A Follower
// tails one shard's log into its own database and answers the reads, as
// far as it has applied (Applied, WaitApplied).
//
// # Security
//
// The cluster's SCRAM credentials and ACLs are records of shard 0, the
// cluster-wide catalog (scram.go, acls.go, security.go): changes go to
// its leader (AlterScramCredentials, CreateACLs, DeleteACLs, each
// answered per item with Kafka's codes), every replica of shard 0
// applies them to its view and database, and snapshots carry them.
// Security returns them all with a Version, the count of security
// records applied (the same on every replica), and nothing else when the
// caller has that Version already; ScramCredential returns one
// credential. A broker that does not lead shard 0 reads them from its
// follower of shard 0, else from the leader. Credentials are salted keys
// (StoredKey, ServerKey), never passwords.
//
// # Read your writes
//
// Whatever an answered call made visible is readable by the next call:
// FindBatches returns the batches up to the high watermark it reports,
// from one consistent state. The database commits behind the answers (one
// transaction for many entries, every ApplyInterval); a read waits until
// the database holds the entry that set what it answers for, and has the
// shard's loop commit at once rather than at the end of the interval.
//
// # Remote segments
//
// A partition's offsets run from its log start offset to its high
// watermark; from the diskless start offset on they are batches in WAL
// objects, below it remote segments: closed local segments that the
// offloader (package replica) copied to the bucket in the KIP-405 shape,
// under <prefix>tiered/ (RemoteSegmentKey), and registered here
// (RegisterRemoteSegment). Registering one moves the diskless start past
// it and releases the batches wholly below, so their WAL objects can go;
// FindBatches answers an offset below the diskless start with the remote
// segment that holds it. DeleteRecords, retention and DeleteTopic drop
// remote segments as they drop batches, whole, and the lifecycle deletes
// their files after the grace; the orphan collector deletes the files of
// segments never registered (remote.go).
//
// # Shards, object lifecycle, orphans, gateways
//
// A Coordinator is several shards, each with its own log and database (a
// shard's leader: leader.go): a partition is assigned a shard when its
// topic is created and keeps it; an object that holds partitions of
// several shards is committed to each, with an owners list
// (coordinator.go, commit.go). The owners hand the object on from one to
// the next as their batches in it go, and the last deletes it after a
// grace period (ownership.go; the worker, lifecycle.go, sees its shard
// through a narrow interface; LifecycleOptions). The orphan collector
// deletes objects that no shard ever committed (orphans.go). Gateways
// picks, per rack, the broker that takes each shard's produce traffic
// (gateways.go).
//
// # Many brokers
//
// With Options.Forwarder, a Coordinator is one broker's view of shards
// that several brokers share (forward.go): it leads the shards it was
// elected for (Lead, Unlead; a cluster.Node runs the elections) and
// forwards every call for the others to their leaders through the
// Forwarder, whose other end calls Serve; with Options.FollowerLog it
// also runs a Follower of every shard and answers FindBatches for shards
// led elsewhere from it, after what its own commits were answered with
// (followers.go). Topic creation and deletion go
// to the leader of shard 0; each broker enforces retention and runs the
// lifecycle of the shards it leads; the leader of shard 0 collects
// orphans. A commit retried at a new leader after its answer was lost is
// answered as the first time (the object's recent commit is kept in the
// view), so an object is committed once whoever answers.
//
// Idempotence follows Kafka exactly (ProducerStateManager): per partition
// and producer id, the epoch and the last five batches; a retry of one of
// those five answers its original offset and is not stored again; an older
// epoch is INVALID_PRODUCER_EPOCH; a gap in sequences is
// OUT_OF_ORDER_SEQUENCE_NUMBER.
//
// # The log is the truth, and a pure core decides
//
// SQLite is a cache of the log: delete it at any time, and opening replays
// the newest snapshot (a compressed copy of the database in the bucket)
// plus the log after it. Every decision is a record. Deciding and
// applying are pure functions, as in etcd's raft (core.go): a group of
// requests is decided against the state and the facts the driver read
// from the store beforehand (object rows, retention's cuts), with the time
// passed in; a durable entry is applied to the state, which returns the
// effects the driver carries out (rows to write, what to publish, work for
// the lifecycle). The driver (loop.go) does every I/O: the log appends,
// the SQL (store*.go; statements in sql.go and beside the features that
// own them), the answers. So a
// follower, a restart and a rebuild reach the same state, and the core's
// model test runs with no SQLite and no log. A new leader claims the log by appending
// an epoch record: on a metalog.Bucket, where each entry is written with a
// conditional put at its offset, the previous leader's next append then
// fails, and every request it still holds fails with NOT_LEADER_OR_FOLLOWER.
//
// # Speculative, pipelined execution
//
// Waiting for the log between requests would cap throughput at one group
// per log round trip. So the loop checks each new group of requests
// against a speculative view: the committed state plus the records
// already sent to the log but not yet durable, applied selectively (only
// what checks read: topics, high watermarks, log start and diskless start
// offsets, producer states; never batch rows). The records go to the log
// at once; the committed state applies them only when the log says they
// are durable, so it never holds anything a crash could take away; then
// the requests are answered. The log takes up to its MaxInFlight entries
// at once (metalog.File, metalog.Mem and etcdlog.Log several;
// metalog.Bucket its BucketOptions.MaxInFlight), and the next group closes
// only when one of them has its answer: the requests that arrive while
// every slot is busy go out together in the first free one, none of them
// behind a group closed early. The speculative view is kept in memory
// over an in-memory mirror of the small tables, rather than in a SQLite
// transaction that is rolled back: the checks then cost no SQL at all,
// and the speculation is the same (see BENCHMARKS.md for why it matters).
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
// removed, exactly as the leader found its filters to match them), all
// of shard 0 (see Security).
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
//	txn begin:     PID varint | producer ID varint | epoch varint
//	txn marker:    PID varint | producer ID varint | epoch varint |
//	               commit uint8 (0 ABORT, 1 COMMIT) | coordinator epoch
//	               varint | offset varint | first offset varint (-1: the
//	               transaction wrote nothing here) | time varint
//
// # Metadata logs
//
// The log under a coordinator is a metalog.Log (package
// coordinator/metalog: a local File, a Bucket of one object per entry, an
// in-memory Mem, or any implementation that passes metalogtest). Its
// formats are documented there.
//
// # The database
//
// One writer connection (the loop's) and a read-only pool. The writer keeps
// one transaction open across entries and commits it every ApplyInterval
// (10 ms), or at once when a read waits for it (see Read your writes): a
// request is answered once its entry is durable and applied, ListOffsets
// and offset checks read a published in-memory state that is always
// current, and FindBatches' rows come from the read pool. The
// database is a cache the log rebuilds, so where the kernel tells its boot
// ID the writer does not fsync at all: SQLite stays consistent through a
// crash of the process, and a database last opened under another boot and
// not closed cleanly is deleted and rebuilt. Producer states and
// partitions (log start, diskless start, high watermark) of the small
// tables are mirrored in memory (the view), their byte counts in the store;
// the
// producers table is written behind, every 10,000 entries and before
// snapshots, and opening replays the log's commits after it. The schema is
// in schema.go; a run of contiguous batches of one partition in one object
// is one row of the batches table.
package coordinator
