package diskless

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal"
)

// Transactions (KIP-98), kept by the coordinator: a transactional ID's
// state is a record of its shard's log, a transaction's markers are
// control batches at real offsets of its partitions, written by the
// coordinator with no object (they cost no PUT), and read_committed reads
// stop at each partition's last stable offset, with the aborted
// transactions of the range. See package coordinator (txn.go) for the
// records and the two-phase end across shards.
//
// A Kafka front end maps the protocol onto these methods: InitProducerId
// with a transactional ID to InitTxnProducer, AddPartitionsToTxn to
// AddTxnPartitions, AddOffsetsToTxn to AddTxnOffsets, TxnOffsetCommit to
// TxnCommitOffsets, EndTxn to EndTxn, DescribeTransactions and
// ListTransactions to Transactions; Produce of transactional batches is
// Produce, Fetch and ListOffsets at read_committed set ReadCommitted.

// Transaction is a transactional ID's state.
type Transaction = coordinator.Transaction

// TxnState is a transaction's state (Kafka's names: Empty, Ongoing,
// PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort).
type TxnState = coordinator.TxnState

// The transaction states.
const (
	TxnEmpty          = coordinator.TxnEmpty
	TxnOngoing        = coordinator.TxnOngoing
	TxnPrepareCommit  = coordinator.TxnPrepareCommit
	TxnPrepareAbort   = coordinator.TxnPrepareAbort
	TxnCompleteCommit = coordinator.TxnCompleteCommit
	TxnCompleteAbort  = coordinator.TxnCompleteAbort
)

// AbortedTxn is a producer's aborted transaction in a partition, from its
// first offset to its ABORT marker, as a read_committed Fetch returns it.
type AbortedTxn = coordinator.AbortedTxn

// InitTxnProducer is InitProducerId with a transactional ID: the producer
// ID and epoch its producer writes with. The first call for an ID gets a
// new producer ID at epoch 0, each later one the next epoch, which fences
// the producers of earlier epochs (PRODUCER_FENCED). A transaction an
// earlier epoch left open is aborted first, markers and all, before it
// returns. producerID and epoch are the caller's current ones when it asks
// for a bump (KIP-360), else -1 and -1. timeout is transaction.timeout.ms:
// a transaction open longer is aborted by the coordinator; above 15
// minutes (Kafka's transaction.max.timeout.ms) it is
// INVALID_TRANSACTION_TIMEOUT.
func (b *Broker) InitTxnProducer(ctx context.Context, txnID string, timeout time.Duration, producerID int64, epoch int16) (int64, int16, error) {
	if b.closed.Load() {
		return -1, -1, ErrClosed
	}
	ms := timeout.Milliseconds()
	if ms <= 0 || ms > coordinator.MaxTxnTimeoutMs {
		return -1, -1, kafkaerr.New(kafkaerr.InvalidTransactionTimeout, "transaction timeout %v is outside (0, 15m]", timeout)
	}
	id, e, err := b.coord.InitTxnProducer(ctx, txnID, int32(ms), producerID, epoch)
	return id, e, b.closedErr(err)
}

// TxnPartition names a partition of a transaction.
type TxnPartition struct {
	Topic     string
	Partition int32
}

// AddTxnPartitions adds partitions to the producer's transaction
// (AddPartitionsToTxn), starting one if none is ongoing: from when it
// returns, the producer's transactional batches to them are accepted (a
// transactional batch to a partition not added is INVALID_TXN_STATE, as
// with KIP-890's verification). The answers are by partition, nil when
// added; if a partition does not exist (UNKNOWN_TOPIC_OR_PARTITION), none
// is added and the others answer OPERATION_NOT_ATTEMPTED, as in Kafka.
// The error is for the whole request: PRODUCER_FENCED (an older epoch),
// INVALID_PRODUCER_ID_MAPPING (another producer), CONCURRENT_TRANSACTIONS
// (the last transaction is still ending: retry).
func (b *Broker) AddTxnPartitions(ctx context.Context, txnID string, producerID int64, epoch int16, parts []TxnPartition) ([]error, error) {
	if b.closed.Load() {
		return nil, ErrClosed
	}
	errs := make([]error, len(parts))
	tps := make([]wal.TopicPartition, len(parts))
	failed := false
	for i, p := range parts {
		_, tp, err := b.partition(ctx, p.Topic, p.Partition)
		tps[i], errs[i] = tp, err
		failed = failed || err != nil
	}
	if failed {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = kafkaerr.New(kafkaerr.OperationNotAttempted, "another partition of the request does not exist")
			}
		}
		return errs, nil
	}
	errs, err := b.coord.AddTxnPartitions(ctx, txnID, producerID, epoch, tps)
	return errs, b.closedErr(err)
}

// AddTxnOffsets adds a consumer group to the producer's transaction
// (AddOffsetsToTxn), starting one if none is ongoing, so that
// TxnCommitOffsets may commit the group's offsets in it. Errors as
// AddTxnPartitions.
func (b *Broker) AddTxnOffsets(ctx context.Context, txnID string, producerID int64, epoch int16, group string) error {
	if b.closed.Load() {
		return ErrClosed
	}
	return b.closedErr(b.coord.AddTxnGroup(ctx, txnID, producerID, epoch, group))
}

// TxnCommitOffsets commits a group's offsets in the producer's transaction
// (TxnOffsetCommit): they become the group's committed offsets when the
// transaction commits, and never if it aborts. The group must have been
// added (AddTxnOffsets), else INVALID_TXN_STATE; every partition must
// exist (UNKNOWN_TOPIC_OR_PARTITION).
func (b *Broker) TxnCommitOffsets(ctx context.Context, txnID string, producerID int64, epoch int16, group string, offsets []GroupOffset) error {
	if b.closed.Load() {
		return ErrClosed
	}
	out, err := b.coordOffsets(ctx, offsets)
	if err != nil {
		return err
	}
	return b.closedErr(b.coord.TxnCommitOffsets(ctx, txnID, producerID, epoch, group, out))
}

// EndTxn commits or aborts the producer's transaction and returns once it
// is done: a COMMIT or ABORT marker is written to every partition in it
// and, on commit, its offsets are the groups'. A retry of an end done or
// under way is answered as the first; ending a transaction that is not
// ongoing is INVALID_TXN_STATE; an older epoch is PRODUCER_FENCED.
func (b *Broker) EndTxn(ctx context.Context, txnID string, producerID int64, epoch int16, commit bool) error {
	if b.closed.Load() {
		return ErrClosed
	}
	return b.closedErr(b.coord.EndTxn(ctx, txnID, producerID, epoch, commit))
}

// Transactions returns the states of the transactional IDs ids (those
// that exist), or of every one when ids is nil, by ID.
func (b *Broker) Transactions(ctx context.Context, ids []string) ([]Transaction, error) {
	if b.closed.Load() {
		return nil, ErrClosed
	}
	ts, err := b.coord.Transactions(ctx, ids)
	return ts, b.closedErr(err)
}

// PendingTxnOffsets returns the partitions of a group with offsets
// committed in transactions that have not ended yet (Ongoing, or ending):
// a consumer that reads the group's offsets with require_stable waits
// for them (UNSTABLE_OFFSET_COMMIT), as KIP-447 has it.
func (b *Broker) PendingTxnOffsets(ctx context.Context, group string) ([]GroupPartition, error) {
	if b.closed.Load() {
		return nil, ErrClosed
	}
	ts, err := b.coord.Transactions(ctx, nil)
	if err != nil {
		return nil, b.closedErr(err)
	}
	var out []GroupPartition
	for _, t := range ts {
		if t.State == TxnEmpty || t.State == TxnCompleteCommit || t.State == TxnCompleteAbort {
			continue
		}
		for _, o := range t.Offsets {
			if o.Group == group {
				out = append(out, GroupPartition{Topic: o.Topic, Partition: o.Partition})
			}
		}
	}
	return out, nil
}

// expireTransactions aborts the transactions past their timeout in the
// shards this broker leads, and finishes the ends a leader left half done
// for stale or longer.
func (b *Broker) expireTransactions(ctx context.Context, stale time.Duration) {
	n, err := b.coord.ExpireTransactions(ctx, stale)
	if err != nil && ctx.Err() == nil {
		b.cfg.Logger.Warn("diskless: ending timed-out transactions", zap.Error(err))
	}
	if n > 0 {
		b.stats.txnsExpired.Add(int64(n))
	}
}

// txnStale is how long a prepared transaction may wait for the broker
// ending it before the shard's leader finishes it itself.
const txnStale = 10 * time.Second
