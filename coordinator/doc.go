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
// The client quotas (quotas.go) are records of shard 0 too, changed
// through its leader (AlterClientQuotas, answered per entity) and read
// as the security state is (ClientQuotas, with a Version of their own;
// DescribeClientQuotas, with Kafka's filters).
//
// # Read your writes
//
// Whatever an answered call made visible is readable by the next call:
// FindBatches returns the batches up to the high watermark it reports,
// from one consistent state. The database commits behind the answers (one
// transaction for many entries, every ApplyInterval, its statements run
// behind the loop by a goroutine of their own); a read waits until
// the database holds the entry that set what it answers for, and has the
// shard's loop commit at once rather than at the end of the interval.
//
// In a cluster, whatever any leader of the shard answered, since the
// leader a call reaches may not be the one that answered before: a
// leader whose log is a metalog.Leased answers reads only while its lease
// is surely held (renewed less than its TTL ago), so that one paused or
// cut off past it, which may have been replaced before it knows, refuses
// them with ErrNotLeader; and for a group's offsets and stored state,
// which a consumer acts on, it first confirms its leadership through the
// metadata service (metalog.Confirmer), which also covers a leadership
// ended by force (a lease revoked, an election key deleted).
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
// grace period (ownership.go; the worker, package coordinator/lifecycle,
// sees its shard
// through a narrow interface; LifecycleOptions). The orphan collector
// deletes objects that no shard ever committed (orphans.go). Gateways
// picks, per rack, the broker that takes each shard's produce traffic
// (gateways.go).
//
// # Many brokers
//
// With Options.Forwarder, a Coordinator is one broker's view of shards
// that several brokers share (forward.go): it leads the shards it was
// elected for (Shards.Lead and Unlead; a cluster.Node runs the
// elections) and forwards every call for the others to their leaders
// through the Forwarder, whose other end calls Shards.Serve; with
// Options.FollowerLog it also runs a Follower of every shard and answers FindBatches for shards
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
// applying are pure functions, as in etcd's raft, and live in package
// coordinator/state: a group of requests is decided against the state
// and the facts the driver read from the store beforehand (object rows,
// retention's cuts), with the time passed in; a durable entry is applied
// to the state, which returns the effects the driver carries out (rows to
// write, what to publish, work for the lifecycle). The driver (loop.go)
// does every I/O: the log appends, the SQL (package coordinator/store),
// the answers. So a follower, a restart and a rebuild reach the same
// state, and the core's model test runs with no SQLite and no log. A new
// leader claims the log by appending an epoch record: on a
// metalog.Bucket, where each entry is written with a conditional put at
// its offset, the previous leader's next append then fails, and every
// request it still holds fails with NOT_LEADER_OR_FOLLOWER.
//
// # Packages
//
// coordinator/state holds the records and their codec (the log entry
// format is documented there), the in-memory view and every operation's
// check and apply, with no cgo and no I/O. coordinator/store holds the
// SQLite database: its schema, the rows each record writes, the loads and
// the reads, and the published snapshot that reads start from.
// coordinator/lifecycle holds the worker that hands WAL objects on
// between shards and deletes them. coordinator holds the drivers (the
// leader's loop, the follower), the router over shards (and Shards, the
// operations a multi-broker program drives), inter-broker forwarding and
// the orphan collector. Why this cut: the core is what a reader must
// understand to know what the coordinator decides, and it reads alone,
// tested alone against a plain model (state's model_test.go); the store
// is how it is kept, which changes for other reasons (SQLite's pragmas,
// the schema's migrations); the drivers are what is left: the I/O and
// its ordering. Forwarding stays beside the router, whose calls it
// carries, because its handlers are the router's methods.
//
// # Pending commits
//
// CommitPendingAsync commits an object whose PUT is still under way (the
// parallel commit, docs/parallel-commit.md): its offsets are assigned and
// logged, but held back from every read until the broker settles it
// (Settle): landed, it comes off the shard's pending queue in log order
// and its offsets become readable at once; failed, it and every pending
// commit after it are voided, their offsets given back. A new leader
// resolves the commits it inherits through the bucket before it answers
// any read (pending.go; the core's side in coordinator/state's
// pending.go).
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
// # Metadata logs
//
// The log under a coordinator is a metalog.Log (package
// coordinator/metalog: a local File, a Bucket of one object per entry, an
// in-memory Mem, or any implementation that passes metalogtest). Its
// formats are documented there.
package coordinator
