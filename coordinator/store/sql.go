package store

// Loading the committed view (store_load.go).
const (
	sqlLoadMeta       = "SELECT k, v FROM meta"
	sqlLoadTopics     = "SELECT topic_id, name, partitions, first_pid, retention_ms, retention_bytes, flags, max_message_bytes, assigned, segment_bytes, segment_ms, delete_retention_ms, min_compaction_lag_ms, max_compaction_lag_ms, min_cleanable_dirty_ratio FROM topics"
	sqlLoadPartitions = "SELECT pid, topic_id, partition, log_start, high_watermark, bytes, diskless_start, remote_bytes, cleaned_to FROM partitions"
	sqlLoadRemoteEnds = "SELECT pid, MAX(end_offset), COUNT(*), SUM(size) FROM remote_segments GROUP BY pid"
	sqlLoadProducers  = "SELECT pid, producer_id, epoch, batches FROM producers"
	sqlLoadClaims     = "SELECT grp, epoch FROM group_claims"
	sqlLoadObjects    = "SELECT object_id, key, committed_at, compacted FROM objects"
)

// Writing durable entries (store_write.go). A "Head" is the start of a
// multi-row statement (store.bulk adds the rows), a "Tail" its end.
const (
	sqlUpsertMetaHead    = "INSERT INTO meta (k, v) VALUES"
	sqlUpsertMetaTail    = "ON CONFLICT (k) DO UPDATE SET v = excluded.v"
	sqlUpsertMeta        = "INSERT INTO meta (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v"
	sqlInsertObjectsHead = "INSERT INTO objects (object_id, key, size, uploader, committed_at, live_rows, dead_at, owners) VALUES"
	sqlInsertBatchesHead = "INSERT INTO batches (pid, last_offset, n, object_id, pos, size, ts) VALUES"
	// sqlCommittedRows: an object's batch rows, for a retried commit (a
	// scan of batches: there is no index by object).
	sqlCommittedRows        = "SELECT o.committed_at, b.pid, b.last_offset, b.n, b.pos, b.size, b.ts FROM objects o JOIN batches b ON b.object_id = o.object_id WHERE o.key = ? ORDER BY b.pos"
	sqlUpsertPartitionsHead = "INSERT INTO partitions (pid, topic_id, partition, log_start, high_watermark, bytes, diskless_start, remote_bytes, cleaned_to) VALUES"
	sqlUpsertPartitionsTail = "ON CONFLICT (pid) DO UPDATE SET log_start = excluded.log_start, high_watermark = excluded.high_watermark, bytes = excluded.bytes, diskless_start = excluded.diskless_start, remote_bytes = excluded.remote_bytes, cleaned_to = excluded.cleaned_to"
	sqlUpsertProducersHead  = "INSERT INTO producers (pid, producer_id, epoch, batches) VALUES"
	sqlUpsertProducersTail  = "ON CONFLICT (pid, producer_id) DO UPDATE SET epoch = excluded.epoch, batches = excluded.batches"

	sqlInsertTopic = "INSERT INTO topics (topic_id, name, partitions, first_pid, retention_ms, retention_bytes, flags, max_message_bytes, assigned, segment_bytes, segment_ms, delete_retention_ms, min_compaction_lag_ms, max_compaction_lag_ms, min_cleanable_dirty_ratio) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	sqlDeleteTopic = "DELETE FROM topics WHERE topic_id = ?"

	sqlDeleteBatchesOfPIDs    = "DELETE FROM batches WHERE pid BETWEEN ? AND ?"
	sqlDeletePartitionsOfPIDs = "DELETE FROM partitions WHERE pid BETWEEN ? AND ?"
	sqlDeleteProducersOfPIDs  = "DELETE FROM producers WHERE pid BETWEEN ? AND ?"
	sqlDeleteBatchesBelow     = "DELETE FROM batches WHERE pid = ? AND last_offset < ?"
	sqlDeleteBatchesAtOrBelow = "DELETE FROM batches WHERE pid = ? AND last_offset <= ?"

	// The object IDs of batch rows, with how many rows of each, for
	// releaseRows.
	sqlBatchesOfPIDs    = "SELECT object_id, COUNT(*) FROM batches WHERE pid BETWEEN ? AND ? GROUP BY object_id"
	sqlBatchesBelow     = "SELECT object_id, COUNT(*) FROM batches WHERE pid = ? AND last_offset < ? GROUP BY object_id"
	sqlBatchesAtOrBelow = "SELECT object_id, COUNT(*) FROM batches WHERE pid = ? AND last_offset <= ? GROUP BY object_id"
	sqlReleaseRows      = "UPDATE objects SET live_rows = live_rows - ?1, dead_at = CASE WHEN live_rows - ?1 <= 0 THEN ?2 ELSE dead_at END WHERE object_id = ?3"
	sqlBytesBelow       = "SELECT COALESCE(SUM(size), 0) FROM batches WHERE pid = ? AND last_offset < ?"
	sqlBytesAtOrBelow   = "SELECT COALESCE(SUM(size), 0) FROM batches WHERE pid = ? AND last_offset <= ?"

	// Remote segments: the object IDs and sizes of those to drop, for
	// dropRemote, and the deletes of the same rows.
	sqlRemoteOfPIDs        = "SELECT object_id, size FROM remote_segments WHERE pid BETWEEN ? AND ?"
	sqlRemoteBelow         = "SELECT object_id, size FROM remote_segments WHERE pid = ? AND end_offset < ?"
	sqlDeleteRemoteOfPIDs  = "DELETE FROM remote_segments WHERE pid BETWEEN ? AND ?"
	sqlDeleteRemoteBelow   = "DELETE FROM remote_segments WHERE pid = ? AND end_offset < ?"
	sqlInsertRemoteObject  = "INSERT INTO objects (object_id, key, size, uploader, committed_at, live_rows, dead_at, owners) VALUES (?, ?, ?, ?, ?, 1, NULL, NULL)"
	sqlInsertRemoteSegment = "INSERT INTO remote_segments (pid, end_offset, base_offset, segment_id, key, object_id, max_timestamp, size, index_size, time_index_size, txn_index_size, uploader, registered_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	sqlKillObject          = "UPDATE objects SET live_rows = 0, dead_at = ? WHERE object_id = ?"

	sqlMarkReceived   = "UPDATE objects SET received = 1 WHERE key = ?"
	sqlInsertReceived = "INSERT INTO objects (object_id, key, size, uploader, committed_at, live_rows, dead_at, owners, received) VALUES (?, ?, 0, -1, ?, 0, ?, ?, 1)"
	sqlForgetObject   = "DELETE FROM objects WHERE object_id = ? AND live_rows <= 0"

	// The pending queue (pending.go).
	sqlInsertPending   = "INSERT INTO pending_commits (object_id, data) VALUES (?, ?)"
	sqlDeletePendingTo = "DELETE FROM pending_commits WHERE object_id <= ?"
	sqlDeletePending   = "DELETE FROM pending_commits"
	sqlLoadPending     = "SELECT data FROM pending_commits ORDER BY object_id"
	sqlVoidBytes       = "SELECT COALESCE(SUM(size), 0) FROM batches WHERE pid = ? AND last_offset >= ? AND last_offset < ? AND object_id = ?"
	sqlVoidBatches     = "DELETE FROM batches WHERE pid = ? AND last_offset >= ? AND last_offset < ? AND object_id = ?"
	sqlVoidObject      = "UPDATE objects SET live_rows = 0, dead_at = ? WHERE object_id = ?"
)

// Facts for decisions (store_facts.go).
const (
	// sqlObjectStatesHead is followed by "(?, ?, ...)": the rows of
	// those keys.
	sqlObjectStatesHead = "SELECT key, object_id, live_rows, COALESCE(dead_at, 0), owners, received FROM objects WHERE key IN "
	sqlRetentionBatches = "SELECT b.last_offset, b.size, b.ts + o.committed_at FROM batches b JOIN objects o ON o.object_id = b.object_id WHERE b.pid = ? AND b.last_offset >= ? ORDER BY b.last_offset"
	sqlRetentionRemote  = "SELECT end_offset, size, max_timestamp FROM remote_segments WHERE pid = ? AND end_offset >= ? ORDER BY end_offset"
)

// The read pool's statements (reads.go).
const (
	// sqlDeadObjectRows lists the dead objects for the lifecycle, the
	// longest dead first.
	sqlDeadObjectRows = "SELECT key, owners, received, dead_at FROM objects WHERE dead_at IS NOT NULL ORDER BY dead_at, object_id LIMIT ?"
)
