package coordinator

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal"
)

// TestTxnV2HangingTransaction: a late AddPartitionsToTxn and write of a
// transaction that ended. After a v1 end the epoch is unchanged, so the
// late add opens a new transaction that its producer never ends (a
// hanging transaction, which holds the last stable offset back until it
// times out); after a v2 end (EndTxnV2) the epoch moved on and the
// markers carry it: the late add is PRODUCER_FENCED at the
// coordinator, its partition's begin is PRODUCER_FENCED too (the
// partition's producer state took the marker's epoch), a write at the
// old epoch is INVALID_PRODUCER_EPOCH, and the transaction stays ended.
func TestTxnV2HangingTransaction(t *testing.T) {
	ctx := t.Context()
	f := newTxnFixture(t)
	run := func(id string, v2 bool) (pid int64, old, now int16) {
		pid, old, err := f.s.InitTxnProducer(ctx, id, 60_000, -1, -1)
		require.NoError(t, err)
		errs, err := f.s.AddTxnPartitions(ctx, id, pid, old, []wal.TopicPartition{f.tp(0), f.tp(1)})
		require.NoError(t, err)
		require.Equal(t, []error{nil, nil}, errs)
		require.NoError(t, f.produce(f.tp(0), pid, old, 0, 2, true).Err)
		require.NoError(t, f.produce(f.tp(1), pid, old, 0, 1, true).Err)
		if !v2 {
			require.NoError(t, f.s.EndTxn(ctx, id, pid, old, true))
			return pid, old, old
		}
		id2, now, err := f.s.EndTxnV2(ctx, id, pid, old, true)
		require.NoError(t, err)
		require.Equal(t, pid, id2)
		return pid, old, now
	}

	// v1: the late add opens a transaction no one will end.
	pid, old, now := run("tx-v1", false)
	require.Equal(t, old, now, "a v1 end keeps the epoch")
	errs, err := f.s.AddTxnPartitions(ctx, "tx-v1", pid, old, []wal.TopicPartition{f.tp(0)})
	require.NoError(t, err)
	require.Equal(t, []error{nil}, errs)
	require.Equal(t, TxnOngoing, f.txn("tx-v1").State, "the late add opened a new transaction")
	require.NoError(t, f.produce(f.tp(0), pid, old, 2, 1, true).Err, "and the late write joins it")
	hw, lso := f.state(f.tp(0))
	require.Less(t, lso, hw, "the hanging transaction holds the last stable offset back")

	// v2: fenced.
	pid, old, now = run("tx-v2", true)
	require.Equal(t, old+1, now, "a v2 end bumps the epoch")
	tx := f.txn("tx-v2")
	require.Equal(t, TxnCompleteCommit, tx.State)
	require.Equal(t, now, tx.Epoch)
	found, err := f.s.FindBatches(ctx, f.tp(1), 0, 1<<20)
	require.NoError(t, err)
	last := found.Batches[len(found.Batches)-1]
	require.NotNil(t, last.Marker)
	require.Equal(t, pid, last.Marker.ProducerID)
	require.Equal(t, now, last.Marker.ProducerEpoch, "the marker carries the bumped epoch")

	_, err = f.s.AddTxnPartitions(ctx, "tx-v2", pid, old, []wal.TopicPartition{f.tp(1)})
	require.Equal(t, kafkaerr.ProducerFenced, code(err), "%v", err)
	errs, err = f.s.partitionTxns(ctx, []PartitionTxn{{TopicPartition: f.tp(1), ProducerID: pid, Epoch: old, Begin: true}})
	require.NoError(t, err)
	require.Equal(t, kafkaerr.ProducerFenced, code(errs[0]), "the partition took the marker's epoch: %v", errs[0])
	r := f.produce(f.tp(1), pid, old, 1, 1, false)
	require.Equal(t, kafkaerr.InvalidProducerEpoch, code(r.Err), "%v", r.Err)
	require.Equal(t, TxnCompleteCommit, f.txn("tx-v2").State, "nothing opened")
	hw, lso = f.state(f.tp(1))
	require.Equal(t, hw, lso, "nothing hangs")

	// The producer goes on at the new epoch, from sequence 0.
	errs, err = f.s.AddTxnPartitions(ctx, "tx-v2", pid, now, []wal.TopicPartition{f.tp(1)})
	require.NoError(t, err)
	require.Equal(t, []error{nil}, errs)
	require.NoError(t, f.produce(f.tp(1), pid, now, 0, 1, true).Err)
	_, next, err := f.s.EndTxnV2(ctx, "tx-v2", pid, now, false)
	require.NoError(t, err)
	require.Equal(t, now+1, next)
	// Its retry, at the epoch before, gets the same answer.
	id, again, err := f.s.EndTxnV2(ctx, "tx-v2", pid, now, false)
	require.NoError(t, err)
	require.Equal(t, pid, id)
	require.Equal(t, next, again)
}
