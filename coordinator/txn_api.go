package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/diskless-go/diskless/coordinator/state"

	"github.com/diskless-go/diskless/clock"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal"
)

// --- a shard's leader -----------------------------------------------------

// Txn decides one operation on a transactional ID of this shard and
// returns the transaction after it, durable. See TxnRequest.
func (l *leader) Txn(ctx context.Context, req TxnRequest) (Transaction, error) {
	o := &state.TxnRequestOp{BaseOp: state.NewBaseOp(ctx), Req: req}
	if err := l.submit(ctx, o, o.Done); err != nil {
		return Transaction{}, err
	}
	return o.Out, nil
}

// ExpireTxns aborts this shard's Ongoing transactions older than their
// timeout (their state goes to PrepareAbort under a new epoch), removes
// the transactional IDs unused for leaderOptions.TxnIDExpiration, and returns
// them with the prepared ones unchanged for at least stale: the
// transactions whose end the caller must carry out.
func (l *leader) ExpireTxns(ctx context.Context, stale time.Duration) ([]Transaction, error) {
	o := &state.TxnExpireOp{BaseOp: state.NewBaseOp(ctx), Stale: stale.Milliseconds(), IDExpiry: max(l.opts.TxnIDExpiration.Milliseconds(), 0)}
	if err := l.submit(ctx, o, o.Done); err != nil {
		return nil, err
	}
	return o.Out, nil
}

// PartitionTxns carries out transactions' operations on partitions of this
// shard: opening a transaction in a partition, or writing its marker. The
// answers are by operation; a marker for a transaction no longer open is a
// no-op.
func (l *leader) PartitionTxns(ctx context.Context, ops []PartitionTxn) ([]error, error) {
	o := &state.PartitionTxnsOp{BaseOp: state.NewBaseOp(ctx), Ops: ops}
	if err := l.submit(ctx, o, o.Done); err != nil {
		return nil, err
	}
	return o.Errs, nil
}

// Transactions returns the states of the transactional IDs ids of this
// shard (those it knows), or of all of them when ids is nil.
func (l *leader) Transactions(ctx context.Context, ids []string) ([]Transaction, error) {
	o := &state.TxnListOp{BaseOp: state.NewBaseOp(ctx), IDs: ids}
	if err := l.submit(ctx, o, o.Done); err != nil {
		return nil, err
	}
	return o.Out, nil
}

// AbortedTxns returns the aborted transactions of tp that overlap the
// offsets from to to (both included), by first offset: what a
// read_committed Fetch of that range returns.
// With fetch set (a fetch's: FetchAbortedTxns) a range from below the log
// start is refused.
func (l *leader) AbortedTxns(ctx context.Context, tp wal.TopicPartition, from, to int64, fetch bool) ([]AbortedTxn, error) {
	p, err := l.pub.Lookup(tp)
	if err != nil {
		return nil, err
	}
	if fetch && from < p.LogStart {
		return nil, kafkaerr.New(kafkaerr.OffsetOutOfRange,
			"offset %d of %s is below its log start offset %d: the records there are deleted, and their aborted transactions with them", from, tp, p.LogStart)
	}
	if err := l.readBarrier(ctx, p.AppliedAt); err != nil {
		return nil, err
	}
	return l.store.Reader.AbortedTxns(ctx, p.PID, from, to)
}

// --- the Coordinator ------------------------------------------------------

// txnShard returns the shard of a transactional ID.
func (c *Coordinator) txnShard(id string) (shardAPI, error) {
	if id == "" {
		return nil, kafkaerr.New(kafkaerr.InvalidRequest, "a transactional ID is empty")
	}
	return c.shard(ShardOfTxn(id, c.Shards().NumShards()))
}

// InitTxnProducer is InitProducerId with a transactional ID: the
// producer ID and epoch the transactional ID's producer writes with from
// now on. The first call gets a new producer ID; each later one the next
// epoch, which fences the producers of the epochs before (their
// transactional writes and ends fail with PRODUCER_FENCED or
// INVALID_PRODUCER_EPOCH). A transaction the old epoch left open is
// aborted first, markers and all, and a prepared one finished, before it
// returns. producerID and epoch are the caller's (KIP-360), -1 and -1 for
// none; timeoutMs is transaction.timeout.ms, at most MaxTxnTimeoutMs
// (else INVALID_TRANSACTION_TIMEOUT).
func (c *Coordinator) InitTxnProducer(ctx context.Context, id string, timeoutMs int32, producerID int64, epoch int16) (int64, int16, error) {
	sh, err := c.txnShard(id)
	if err != nil {
		return -1, -1, err
	}
	req := TxnRequest{Op: TxnInit, ID: id, TimeoutMs: timeoutMs, ProducerID: producerID, Epoch: epoch}
	for {
		t, err := sh.Txn(ctx, req)
		if err != nil {
			return -1, -1, err
		}
		if !t.State.Preparing() {
			return t.ProducerID, t.Epoch, nil
		}
		if err := c.finishTxn(ctx, t); err != nil {
			return -1, -1, err
		}
		// Asked again as the holder of the epoch just ended: the abort
		// was this call's.
		req.ProducerID, req.Epoch = t.ProducerID, t.Epoch
	}
}

// AddTxnPartitions adds partitions to the transaction of a transactional
// ID's producer (AddPartitionsToTxn), starting it if none is ongoing, and
// opens it in each partition: from when it returns, the producer's
// transactional batches to those partitions are accepted. The answers are
// by partition (UNKNOWN_TOPIC_OR_PARTITION for one that does not exist);
// the error is for the whole request: PRODUCER_FENCED for an old epoch,
// INVALID_PRODUCER_ID_MAPPING for another producer,
// CONCURRENT_TRANSACTIONS while the last transaction is ending.
func (c *Coordinator) AddTxnPartitions(ctx context.Context, id string, producerID int64, epoch int16, parts []wal.TopicPartition) ([]error, error) {
	sh, err := c.txnShard(id)
	if err != nil {
		return nil, err
	}
	// The transaction's shard first: a partition's transaction is opened
	// only once the transaction holds the partition, so its end always
	// reaches it.
	n := c.Shards().NumShards()
	if _, err := sh.Txn(ctx, TxnRequest{Op: TxnAddPartitions, ID: id, ProducerID: producerID, Epoch: epoch, Partitions: parts, Shards: n}); err != nil {
		return nil, err
	}
	// The transaction's shard opened those it serves, in the same entry:
	// there the begin finds them open, appends nothing, and answers once
	// that entry is applied.
	ops := make([]PartitionTxn, len(parts))
	for i, tp := range parts {
		ops[i] = PartitionTxn{TopicPartition: tp, ProducerID: producerID, Epoch: epoch, Begin: true}
	}
	return c.partitionTxns(ctx, ops)
}

// errUnrouted marks a partition operation that reached no shard: this
// broker's catalog names none for its partition.
var errUnrouted = errors.New("coordinator: no shard known to serve the partition")

// partitionTxns sends partition operations to their shards, all shards
// at once, and returns the answers by operation (errUnrouted for those
// this broker knows no shard of).
func (c *Coordinator) partitionTxns(ctx context.Context, ops []PartitionTxn) ([]error, error) {
	errs := make([]error, len(ops))
	byShard := map[shardAPI][]int{}
	for i, op := range ops {
		sh, err := c.shardFor(ctx, op.TopicPartition)
		if err != nil {
			errs[i] = fmt.Errorf("%w: %w", errUnrouted, err)
			continue
		}
		byShard[sh] = append(byShard[sh], i)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []error
	for sh, idx := range byShard {
		wg.Go(func() {
			sub := make([]PartitionTxn, len(idx))
			for j, i := range idx {
				sub[j] = ops[i]
			}
			got, err := sh.PartitionTxns(ctx, sub)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = append(failed, err)
				return
			}
			for j, i := range idx {
				errs[i] = got[j]
			}
		})
	}
	wg.Wait()
	if len(failed) > 0 {
		return nil, errors.Join(failed...)
	}
	return errs, nil
}

// AddTxnGroup adds a consumer group to the transaction (AddOffsetsToTxn),
// starting it if none is ongoing. Errors as AddTxnPartitions.
func (c *Coordinator) AddTxnGroup(ctx context.Context, id string, producerID int64, epoch int16, group string) error {
	sh, err := c.txnShard(id)
	if err != nil {
		return err
	}
	_, err = sh.Txn(ctx, TxnRequest{Op: TxnAddGroup, ID: id, ProducerID: producerID, Epoch: epoch, Group: group})
	return err
}

// TxnCommitOffsets commits a group's offsets in the transaction
// (TxnOffsetCommit): they become the group's committed offsets when, and
// only if, the transaction commits. The group must be in the transaction
// (AddTxnGroup), else INVALID_TXN_STATE. The caller checks the topics,
// as for CommitOffsets.
func (c *Coordinator) TxnCommitOffsets(ctx context.Context, id string, producerID int64, epoch int16, group string, offsets []GroupOffset) error {
	sh, err := c.txnShard(id)
	if err != nil {
		return err
	}
	_, err = sh.Txn(ctx, TxnRequest{Op: TxnCommitOffsets, ID: id, ProducerID: producerID, Epoch: epoch, Group: group, Offsets: offsets})
	return err
}

// EndTxn commits or aborts the producer's transaction (EndTxn) and
// returns once it is done: the markers are written to every partition in
// it and, on commit, its offsets are the groups'. A transaction whose
// partitions and groups are all in its own shard ends in one log entry;
// others in two phases (see Transactions in txn.go). A retry of an end done
// or under way is answered as the first; ending a transaction that is not
// ongoing is INVALID_TXN_STATE.
func (c *Coordinator) EndTxn(ctx context.Context, id string, producerID int64, epoch int16, commit bool) error {
	_, _, err := c.endTxn(ctx, id, producerID, epoch, commit, false)
	return err
}

// EndTxnV2 is EndTxn of transactions v2 (EndTxn version 5, KIP-890 part
// 2): the end bumps the producer's epoch, its markers carry the new one,
// and it returns the producer ID and epoch the producer goes on with (a
// new producer ID at epoch 0 when the epoch was exhausted). A retry of an
// end done comes at the epoch before and gets the same answer; an abort
// with no transaction ongoing bumps the epoch too. See
// state/txn_v2.go. The caller checks that the cluster's
// transaction.version allows it (TxnV2Level).
func (c *Coordinator) EndTxnV2(ctx context.Context, id string, producerID int64, epoch int16, commit bool) (int64, int16, error) {
	return c.endTxn(ctx, id, producerID, epoch, commit, true)
}

// endTxn is EndTxn and EndTxnV2: it returns the producer ID and epoch of
// the transaction once ended.
func (c *Coordinator) endTxn(ctx context.Context, id string, producerID int64, epoch int16, commit, v2 bool) (int64, int16, error) {
	sh, err := c.txnShard(id)
	if err != nil {
		return -1, -1, err
	}
	t, err := sh.Txn(ctx, TxnRequest{Op: TxnEnd, ID: id, ProducerID: producerID, Epoch: epoch, Commit: commit, Shards: c.Shards().NumShards(), V2: v2})
	if err != nil {
		return -1, -1, err
	}
	if t.State.Preparing() {
		if err := c.finishTxn(ctx, t); err != nil {
			return -1, -1, err
		}
		if t.V2 && t.NextProducerID >= 0 {
			// Complete moved the producer to its new ID (prepareComplete).
			return t.NextProducerID, 0, nil
		}
	}
	return t.ProducerID, t.Epoch, nil
}

// txnRetry is how long finishTxn waits between attempts at a partition
// whose shard did not answer.
const txnRetry = 50 * time.Millisecond

// markerDone reports whether a marker's answer ends its part of a
// transaction's end: written (nil), or its partition gone with its data:
// its shard said so, or no shard serves it in a catalog every shard
// answered. A partition this broker knows no shard of while some shard
// did not answer (it restarted on a wiped folder and cannot reach that
// shard yet) is not gone: skipping its marker would leave a committed
// transaction's batches there unended, and a later abort would abort
// them. Any other error is tried again.
func (c *Coordinator) markerDone(err error) bool {
	switch {
	case err == nil:
		return true
	case kafkaerr.CodeOf(err) != kafkaerr.UnknownTopicOrPartition:
		return false
	}
	return !errors.Is(err, errUnrouted) || c.catalogWhole()
}

// finishTxn carries out a prepared transaction's end: the markers to
// every partition, on commit the offsets to every group, then the
// Complete state. Each step is retried until it is done or ctx ends; each
// may run again (a marker for a transaction ended is a no-op, offsets
// commit the same values).
func (c *Coordinator) finishTxn(ctx context.Context, t Transaction) error {
	commit := t.State == TxnPrepareCommit
	ops := make([]PartitionTxn, len(t.Partitions))
	for i, tp := range t.Partitions {
		ops[i] = PartitionTxn{TopicPartition: tp, ProducerID: t.ProducerID, Epoch: t.Epoch, Commit: commit}
	}
	for len(ops) > 0 {
		errs, err := c.partitionTxns(ctx, ops)
		var left []PartitionTxn
		for i, op := range ops {
			if err != nil || !c.markerDone(errs[i]) {
				left = append(left, op)
			}
		}
		if ops = left; len(ops) > 0 {
			if err := clock.Sleep(ctx, c.clock, txnRetry); err != nil {
				return err
			}
		}
	}
	if commit {
		byGroup := map[string][]GroupOffset{}
		for _, o := range t.Offsets {
			byGroup[o.Group] = append(byGroup[o.Group], o.GroupOffset)
		}
		for g, offs := range byGroup {
			for {
				err := c.CommitOffsets(ctx, g, 0, offs)
				if err == nil {
					break
				}
				if sh := kafkaerr.CodeOf(err); sh != kafkaerr.UnknownServerError && !sh.Retriable() {
					return err
				}
				if err := clock.Sleep(ctx, c.clock, txnRetry); err != nil {
					return err
				}
			}
		}
	}
	sh, err := c.txnShard(t.ID)
	if err != nil {
		return err
	}
	_, err = sh.Txn(ctx, TxnRequest{Op: TxnComplete, ID: t.ID, ProducerID: t.ProducerID, Epoch: t.Epoch, Commit: commit})
	return err
}

// ExpireTransactions aborts the transactions of the shards this process
// leads that are older than their timeout, and finishes those left
// prepared for longer than stale (a leader that crashed between PREPARE
// and the last marker): the Broker calls it periodically. It returns how
// many it ended.
func (c *Coordinator) ExpireTransactions(ctx context.Context, stale time.Duration) (int, error) {
	n := 0
	var errs []error
	for _, sh := range c.locals() {
		if sh == nil {
			continue
		}
		ts, err := sh.ExpireTxns(ctx, stale)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, t := range ts {
			if err := c.finishTxn(ctx, t); err != nil {
				errs = append(errs, err)
				continue
			}
			n++
		}
	}
	return n, errors.Join(errs...)
}

// Transactions returns the states of the transactional IDs ids (those
// that exist), or of every one when ids is nil (DescribeTransactions,
// ListTransactions).
func (c *Coordinator) Transactions(ctx context.Context, ids []string) ([]Transaction, error) {
	n := c.Shards().NumShards()
	byShard := map[int][]string{}
	if ids != nil {
		for _, id := range ids {
			i := ShardOfTxn(id, n)
			byShard[i] = append(byShard[i], id)
		}
	} else {
		for i := range n {
			byShard[i] = nil
		}
	}
	var out []Transaction
	for i, sub := range byShard {
		sh, err := c.shard(i)
		if err != nil {
			return nil, err
		}
		ts, err := sh.Transactions(ctx, sub)
		if err != nil {
			return nil, err
		}
		out = append(out, ts...)
	}
	slices.SortFunc(out, func(a, b Transaction) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// AbortedTxns returns the aborted transactions of tp overlapping offsets
// from to to, of those its shard still indexes (those wholly below the log
// start are gone): what a remote segment's transaction index holds.
func (c *Coordinator) AbortedTxns(ctx context.Context, tp wal.TopicPartition, from, to int64) ([]AbortedTxn, error) {
	sh, err := c.shardFor(ctx, tp)
	if err != nil {
		return nil, err
	}
	return sh.AbortedTxns(ctx, tp, from, to, false)
}

// FetchAbortedTxns returns the aborted transactions of tp overlapping
// offsets from to to: those a read_committed Fetch of the range returns.
// A range from below the partition's log start is refused
// (OFFSET_OUT_OF_RANGE), as Kafka refuses a fetch there: the records a
// broker read there came from a copy that had not yet applied the move of
// the log start (a follower, a broker's own cache), and the aborted
// transactions wholly below it are no longer indexed, so a consumer given
// them would take aborted records for committed ones.
func (c *Coordinator) FetchAbortedTxns(ctx context.Context, tp wal.TopicPartition, from, to int64) ([]AbortedTxn, error) {
	sh, err := c.shardFor(ctx, tp)
	if err != nil {
		return nil, err
	}
	return sh.AbortedTxns(ctx, tp, from, to, true)
}

// --- forwarding -------------------------------------------------------------

type (
	txnListCall struct{ IDs []string }
	// partTxnsAnswer is PartitionTxns' answers (gob encodes no nil in a
	// slice of pointers): Failed[i] says whether Errs[i] is one.
	partTxnsAnswer struct {
		Failed []bool
		Errs   []wireErr
	}
	// abortedCall is version 1 of the aborted-txns call's request;
	// abortedCallV2 version 2's, which says whether a range from below
	// the log start is refused (a fetch's).
	abortedCall struct {
		TP       wal.TopicPartition
		From, To int64
	}
	abortedCallV2 struct {
		TP       wal.TopicPartition
		From, To int64
		Fetch    bool
	}
)

func (r *remoteShard) Txn(ctx context.Context, req TxnRequest) (Transaction, error) {
	if req.V2 {
		if v, err := r.peerVersion(fwTxn); err != nil || v < 2 {
			if err == nil {
				err = errTxnV2Unspoken(r.shard)
			}
			return Transaction{}, err
		}
	}
	return remoteWait[Transaction](r.forward(ctx, fwTxn, txnBody(req)))()
}

func (r *remoteShard) PartitionTxns(ctx context.Context, ops []PartitionTxn) ([]error, error) {
	a, err := remoteCall[partTxnsAnswer](ctx, r, fwPartitionTxns, ops)
	if err != nil {
		return nil, err
	}
	if len(a.Failed) != len(ops) || len(a.Errs) != len(ops) {
		return nil, fmt.Errorf("coordinator: %d answers to %d partition operations", len(a.Errs), len(ops))
	}
	errs := make([]error, len(ops))
	for i := range a.Errs {
		if a.Failed[i] {
			errs[i] = a.Errs[i].err()
		}
	}
	return errs, nil
}

func (r *remoteShard) Transactions(ctx context.Context, ids []string) ([]Transaction, error) {
	return remoteCall[[]Transaction](ctx, r, fwTransactions, txnListCall{IDs: ids})
}

// AbortedTxns asks in version 2, which carries fetch, when the leader
// speaks it; a leader of a release before it does not refuse a fetch's
// range below the log start.
func (r *remoteShard) AbortedTxns(ctx context.Context, tp wal.TopicPartition, from, to int64, fetch bool) ([]AbortedTxn, error) {
	body := versioned(gobBody(abortedCall{TP: tp, From: from, To: to}), gobBody(abortedCallV2{TP: tp, From: from, To: to, Fetch: fetch}))
	return remoteWait[[]AbortedTxn](r.forward(ctx, fwAborted, body))()
}

// The transaction methods a Forwarder carries. Part of the peer protocol.
const (
	fwTxn           = "txn"
	fwPartitionTxns = "partition-txns"
	fwTransactions  = "transactions"
	fwAborted       = "aborted-txns"
)
