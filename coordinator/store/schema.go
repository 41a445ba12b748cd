package store

// Schema is the SQLite materialisation of the metadata log. It is a cache:
// the log (and the newest snapshot) can rebuild it at any time. Every table
// but batches and objects is also mirrored in memory (view) for the checks.
//
//   - meta: counters and the offset of the last log entry applied.
//   - topics: one row per topic; flags bit 0 compact, bit 1 delete, bit 2
//     LogAppendTime; assigned, the partitions this shard serves (varints
//     after a count), NULL for all; segment.bytes and segment.ms; the
//     compaction settings (0: Kafka's defaults).
//   - partitions: one row per partition, by a PID that the topic's
//     creation assigned (first_pid + partition); log start offset, high
//     watermark, batch bytes held; the diskless start offset (below it the
//     data is in remote segments) and the .log bytes of the live remote
//     segments; cleaned_to, the offset after the last range compacted
//     (the cleaner's checkpoint, compact.go).
//   - objects: one row per committed WAL object: its key, size, uploader,
//     commit time, and how many batch rows still point into it; dead_at is
//     when that count reached 0 (the object may then be deleted). owners
//     is the shards it was committed to, in ownership order (varints after
//     a count), NULL when only this one; received is 1 once this shard
//     has logged receiving its ownership (see ownership.go). A row made by
//     receiving an object this shard never committed has no batches, size
//     0 and uploader -1. A remote segment's files have a row too, under
//     the segment's key: live_rows 1 while the segment is live (its size
//     is that of its .log, .index, .timeindex and .txnindex files).
//   - batches: one row per run of batches of one partition that are
//     contiguous both in one object and in offsets (one commit's batches of
//     a partition share a row): its last offset, its offset count (n, so
//     base offset = last_offset - n + 1), its byte range in the object, and
//     its greatest timestamp, stored relative to the object's commit time.
//     Keyed by (pid, last_offset): FindBatches is one range scan.
//   - producers: Kafka's producer state per (partition, producer id): the
//     epoch and the last five batches, encoded in a blob. Written behind:
//     the rows hold the state as of the entry meta.producers_at, at most
//     producerFlushEntries entries behind meta.applied; opening replays the
//     log's commits after it into the producer states (as Kafka rebuilds
//     producer state from its last snapshot), so the log is never trimmed
//     past it.
//   - remote_segments: one row per live remote segment (remote.go), keyed
//     by (pid, end_offset): its ID, key, offsets, max timestamp, file
//     sizes, uploader, registration time, and the object row of its
//     files. A dropped segment's row is deleted (its object row is then
//     dead).
//   - group_offsets: consumer groups' committed offsets (groupoffsets.go),
//     keyed by (group, topic name, partition): the topic's ID when
//     committed, the offset, leader epoch, metadata and commit time. Not
//     mirrored in memory. A topic's deletion deletes its rows here.
//   - topic_extents: the PID ranges of partitions added to topics since
//     their creation (addpartitions.go): from partition from_partition
//     on, partition i has PID first_pid + (i - from_partition).
//   - group_claims: each consumer group's latest claim epoch
//     (ClaimGroup); mirrored in the view, for the claim checks.
//   - group_metadata: each consumer group's membership as its
//     coordinator stored it (PutGroupMetadata): an opaque value and the
//     generation it is of. Not mirrored in memory.
//   - txns: each transactional ID's state (txn.go), the payload of its
//     latest txnStateRecord; mirrored in the view.
//   - txn_open: the producers' transactions open in each partition: the
//     producer's epoch and the transaction's first offset there (-1
//     before it wrote); mirrored in the view (partState.Open).
//   - txn_markers: each transaction marker, keyed by (pid, offset): the
//     producer, its epoch, COMMIT or ABORT, the coordinator epoch and the
//     time. Its batch row has object_id -1 (markerObject).
//   - aborted_txns: the aborted-transactions index, keyed by (pid,
//     last_offset, producer_id): an aborted transaction that wrote
//     batches, its first offset, the offset of its ABORT marker, and the
//     partition's last stable offset right after it (as a .txnindex
//     entry has it).
//   - scram_credentials: the SCRAM credentials (scram.go), keyed by
//     (user, mechanism): salt, iterations, StoredKey and ServerKey;
//     mirrored in the view. Shard 0's only.
//   - acls: the ACL bindings (acls.go), one row each, every column in
//     the key (Kafka's codes for the enumerations); mirrored in the view.
//     Shard 0's only. meta.security_version counts the security records
//     applied.
//   - client_quotas: the client quotas' values (quotas.go), keyed by the
//     entity and the quota key: per component (user, client-id, ip) its
//     kind (0 absent, 1 the default, 2 named) and name (empty unless
//     named); the value. Mirrored in the view. Shard 0's only.
//     meta.quota_version counts the quota records applied.
//   - pending_commits: the pending queue (the parallel commit, see
//     coordinator/state's pending.go): one row per pending commit, by its
//     object ID, its data the state's encoding of it
//     (state.AppendPendingCommit). Loaded into the view; a confirm or a
//     void deletes rows.
const Schema = `
CREATE TABLE IF NOT EXISTS pending_commits (
	object_id INTEGER PRIMARY KEY,
	data BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (
	k TEXT PRIMARY KEY,
	v INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS topics (
	topic_id BLOB PRIMARY KEY,
	name TEXT NOT NULL UNIQUE,
	partitions INTEGER NOT NULL,
	first_pid INTEGER NOT NULL,
	retention_ms INTEGER NOT NULL,
	retention_bytes INTEGER NOT NULL,
	flags INTEGER NOT NULL,
	max_message_bytes INTEGER NOT NULL,
	assigned BLOB,
	segment_bytes INTEGER NOT NULL DEFAULT 1073741824,
	segment_ms INTEGER NOT NULL DEFAULT 604800000,
	delete_retention_ms INTEGER NOT NULL DEFAULT 0,
	min_compaction_lag_ms INTEGER NOT NULL DEFAULT 0,
	max_compaction_lag_ms INTEGER NOT NULL DEFAULT 0,
	min_cleanable_dirty_ratio REAL NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS partitions (
	pid INTEGER PRIMARY KEY,
	topic_id BLOB NOT NULL,
	partition INTEGER NOT NULL,
	log_start INTEGER NOT NULL,
	high_watermark INTEGER NOT NULL,
	bytes INTEGER NOT NULL,
	diskless_start INTEGER NOT NULL DEFAULT 0,
	remote_bytes INTEGER NOT NULL DEFAULT 0,
	cleaned_to INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX IF NOT EXISTS partitions_tp ON partitions (topic_id, partition);
CREATE TABLE IF NOT EXISTS objects (
	object_id INTEGER PRIMARY KEY,
	key TEXT NOT NULL,
	size INTEGER NOT NULL,
	uploader INTEGER NOT NULL,
	committed_at INTEGER NOT NULL,
	live_rows INTEGER NOT NULL,
	dead_at INTEGER,
	owners BLOB,
	received INTEGER NOT NULL DEFAULT 0,
	compacted INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX IF NOT EXISTS objects_key ON objects (key);
CREATE INDEX IF NOT EXISTS objects_dead ON objects (dead_at) WHERE dead_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS batches (
	pid INTEGER NOT NULL,
	last_offset INTEGER NOT NULL,
	n INTEGER NOT NULL,
	object_id INTEGER NOT NULL,
	pos INTEGER NOT NULL,
	size INTEGER NOT NULL,
	ts INTEGER NOT NULL,
	PRIMARY KEY (pid, last_offset)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS producers (
	pid INTEGER NOT NULL,
	producer_id INTEGER NOT NULL,
	epoch INTEGER NOT NULL,
	batches BLOB NOT NULL,
	PRIMARY KEY (pid, producer_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS remote_segments (
	pid INTEGER NOT NULL,
	end_offset INTEGER NOT NULL,
	base_offset INTEGER NOT NULL,
	segment_id BLOB NOT NULL,
	key TEXT NOT NULL,
	object_id INTEGER NOT NULL,
	max_timestamp INTEGER NOT NULL,
	size INTEGER NOT NULL,
	index_size INTEGER NOT NULL,
	time_index_size INTEGER NOT NULL,
	txn_index_size INTEGER NOT NULL,
	uploader INTEGER NOT NULL,
	registered_at INTEGER NOT NULL,
	PRIMARY KEY (pid, end_offset)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS group_offsets (
	grp TEXT NOT NULL,
	topic TEXT NOT NULL,
	partition INTEGER NOT NULL,
	topic_id BLOB NOT NULL,
	committed_offset INTEGER NOT NULL,
	leader_epoch INTEGER NOT NULL,
	metadata TEXT NOT NULL,
	commit_time INTEGER NOT NULL,
	PRIMARY KEY (grp, topic, partition)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS group_offsets_topic ON group_offsets (topic_id);
CREATE TABLE IF NOT EXISTS topic_extents (
	topic_id BLOB NOT NULL,
	from_partition INTEGER NOT NULL,
	first_pid INTEGER NOT NULL,
	PRIMARY KEY (topic_id, from_partition)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS group_claims (
	grp TEXT NOT NULL PRIMARY KEY,
	epoch INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS txns (
	id TEXT NOT NULL PRIMARY KEY,
	state BLOB NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS txn_open (
	pid INTEGER NOT NULL,
	producer_id INTEGER NOT NULL,
	epoch INTEGER NOT NULL,
	first_offset INTEGER NOT NULL,
	PRIMARY KEY (pid, producer_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS txn_markers (
	pid INTEGER NOT NULL,
	offset INTEGER NOT NULL,
	producer_id INTEGER NOT NULL,
	epoch INTEGER NOT NULL,
	commit_marker INTEGER NOT NULL,
	coordinator_epoch INTEGER NOT NULL,
	ts INTEGER NOT NULL,
	PRIMARY KEY (pid, offset)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS aborted_txns (
	pid INTEGER NOT NULL,
	last_offset INTEGER NOT NULL,
	producer_id INTEGER NOT NULL,
	first_offset INTEGER NOT NULL,
	last_stable INTEGER NOT NULL,
	PRIMARY KEY (pid, last_offset, producer_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS scram_credentials (
	user_name TEXT NOT NULL,
	mechanism INTEGER NOT NULL,
	salt BLOB NOT NULL,
	iterations INTEGER NOT NULL,
	stored_key BLOB NOT NULL,
	server_key BLOB NOT NULL,
	PRIMARY KEY (user_name, mechanism)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS acls (
	resource_type INTEGER NOT NULL,
	resource_name TEXT NOT NULL,
	pattern_type INTEGER NOT NULL,
	principal TEXT NOT NULL,
	host TEXT NOT NULL,
	operation INTEGER NOT NULL,
	permission INTEGER NOT NULL,
	PRIMARY KEY (resource_type, resource_name, pattern_type, principal, host, operation, permission)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS client_quotas (
	user_kind INTEGER NOT NULL,
	user_name TEXT NOT NULL,
	client_kind INTEGER NOT NULL,
	client_name TEXT NOT NULL,
	ip_kind INTEGER NOT NULL,
	ip_name TEXT NOT NULL,
	quota_key TEXT NOT NULL,
	value REAL NOT NULL,
	PRIMARY KEY (user_kind, user_name, client_kind, client_name, ip_kind, ip_name, quota_key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS group_metadata (
	grp TEXT NOT NULL PRIMARY KEY,
	generation INTEGER NOT NULL,
	value BLOB NOT NULL,
	stored_at INTEGER NOT NULL
) WITHOUT ROWID;
`

// AddedColumns are the columns added to tables after databases (and
// snapshots) were first written: opening a database that lacks one adds
// it, with its default, which is what a record written before it means;
// then runs fill, if any, for values the default cannot say.
var AddedColumns = []struct{ Table, Column, Decl, Fill string }{
	{"topics", "assigned", "BLOB", ""},
	{"topics", "segment_bytes", "INTEGER NOT NULL DEFAULT 1073741824", ""},
	{"topics", "segment_ms", "INTEGER NOT NULL DEFAULT 604800000", ""},
	{"topics", "delete_retention_ms", "INTEGER NOT NULL DEFAULT 0", ""},
	{"topics", "min_compaction_lag_ms", "INTEGER NOT NULL DEFAULT 0", ""},
	{"topics", "max_compaction_lag_ms", "INTEGER NOT NULL DEFAULT 0", ""},
	{"topics", "min_cleanable_dirty_ratio", "REAL NOT NULL DEFAULT 0", ""},
	{"objects", "owners", "BLOB", ""},
	{"objects", "received", "INTEGER NOT NULL DEFAULT 0", ""},
	{"objects", "compacted", "INTEGER NOT NULL DEFAULT 0", ""}, // 1: written by a compaction (compact record)
	// Before remote segments, every batch from the log start was diskless.
	{"partitions", "diskless_start", "INTEGER NOT NULL DEFAULT 0", "UPDATE partitions SET diskless_start = log_start"},
	{"partitions", "remote_bytes", "INTEGER NOT NULL DEFAULT 0", ""},
	{"partitions", "cleaned_to", "INTEGER NOT NULL DEFAULT 0", ""},
}

// Keys of the meta table.
const (
	MetaApplied     = "applied"
	metaAppliedCRC  = "applied_crc" // the checksum of the entry at applied
	MetaProducersAt = "producers_at"
	// The chain (chainState) after the entry at applied and after the one
	// at producers_at: the checksum of the last entry applied (-1: not
	// known), and the epoch at producers_at.
	metaChainCRC          = "chain_crc"
	MetaProducersChainCRC = "producers_chain_crc"
	MetaProducersEpoch    = "producers_epoch"
	metaEpoch             = "epoch"
	metaNextPID           = "next_pid"
	metaNextObjectID      = "next_object_id"
	metaNextProducerID    = "next_producer_id"
	metaSecurityVersion   = "security_version"
	metaQuotaVersion      = "quota_version"
)
