package coordinator

// Transactions, as records of the metadata log (Kafka's transaction
// coordinator and the partition side of KIP-98 and KIP-890 part 1).
//
// A transactional ID lives in one shard, ShardOfTxn (the FNV-1a hash of
// the ID modulo the shards, as groups), whichever shards serve its
// partitions. Its whole state is one record, txnStateRecord, written at
// every transition and applied by replacing what the view had: the
// producer ID and epoch, the state (Empty, Ongoing, PrepareCommit,
// PrepareAbort, CompleteCommit, CompleteAbort), the timeout, when the
// transaction began, its partitions, its groups and the offsets committed
// in it (TxnOffsetCommit: they become the groups' offsets only when it
// commits). The view and the table txns mirror it.
//
// The partitions' side is in their own shards, in two records:
//
//   - txnBeginRecord opens a producer's transaction in a partition: the
//     verification of KIP-890 part 1, written when AddPartitionsToTxn
//     adds the partition. A transactional batch is accepted only while
//     its producer's transaction is open in the partition at its epoch,
//     and the first one accepted sets the transaction's first offset
//     there (what holds the last stable offset back). A write that comes
//     after the transaction ended finds it closed and is refused with
//     INVALID_TXN_STATE, so it cannot hang a partition.
//   - txnMarkerRecord ends it: a COMMIT or ABORT control batch at the
//     partition's next offset (a real offset, as in Kafka), whose bytes
//     are a function of the record (kbatch.AppendEndTxnMarker): markers
//     are rows of the batches table with no object (object_id
//     markerObject) and a row of txn_markers, and cost no PUT. An abort
//     of a transaction that wrote batches adds a row to the
//     aborted-transactions index (aborted_txns), which read_committed
//     fetches return.
//
// A partition's open transactions are in its partState (Open) and in the
// table txn_open. Its last stable offset is the first offset of the
// oldest open transaction that wrote, else the high watermark.
//
// Ending a transaction is two-phase across shards: the transaction's
// shard records PrepareCommit or PrepareAbort first; then the markers go
// to each partition's shard (and, on commit, the offsets to each group's
// shard), retried until written; then the transaction's shard records
// the Complete state. A marker for a transaction no longer open in the
// partition is a no-op, so the second phase can run again, from the
// start, after a crash anywhere in it (the shard's leader finishes every
// prepared transaction it finds: TxnExpire): a transaction is finished or
// aborted, never half of both. A transaction whose partitions and groups
// are all in its own shard (every transaction of a single-shard
// coordinator) needs no PREPARE: its markers, its offsets and its
// Complete state are one entry, applied whole or not at all, so EndTxn
// costs one log append instead of three.
//
// Transactions v2 (KIP-890 part 2, state/txn_v2.go), once the cluster's
// transaction.version is 2 (features.go): EndTxnV2 prepares the end under
// the next epoch, so its markers carry it and each partition's producer
// state takes it; a late write of the ended transaction, at the old
// epoch, is then refused at the coordinator (PRODUCER_FENCED when it
// asks to be added) and at the partition (INVALID_PRODUCER_EPOCH),
// instead of opening a transaction no one ends. A v1 end (EndTxn) keeps
// the epoch, as before; both kinds of client may use one cluster.

// ShardOfTxn returns the shard that holds a transactional ID among n:
// the FNV-1a hash of the ID modulo n, as ShardOfGroup. Part of the
// format.
func ShardOfTxn(id string, n int) int { return ShardOfGroup(id, n) }

// --- the view -------------------------------------------------------------
