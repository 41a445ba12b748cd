package state

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestProducerIDRangeAtInit: on shard 1, a transactional ID that holds a
// producer ID given before the shards' ranges (one of shard 0's, maybe)
// gets a new one, in the shard's range, at its next InitProducerId, at
// epoch 0; not while its transaction is open (the abort's markers carry
// the old ID); one already in the range keeps it and bumps its epoch.
func TestProducerIDRangeAtInit(t *testing.T) {
	init := func(tx Transaction) Transaction {
		t.Helper()
		v := txnAt(tx)
		g := &Group{Shard: 1, Spec: v, Now: 10}
		o := &TxnRequestOp{BaseOp: NewBaseOp(t.Context()), Req: TxnRequest{Op: TxnInit, ID: tx.ID, ProducerID: tx.ProducerID, Epoch: tx.Epoch, TimeoutMs: 60_000}}
		o.Check(g)
		o.Finish(nil)
		require.NoError(t, <-o.Done)
		return o.Out
	}
	got := init(Transaction{ID: "x", ProducerID: 5, Epoch: 3, State: TxnCompleteCommit, TimeoutMs: 60_000})
	require.Equal(t, int64(1)<<producerIDShift, got.ProducerID, "a new ID, the first of shard 1's range")
	require.Equal(t, int16(0), got.Epoch)

	got = init(Transaction{ID: "x", ProducerID: 5, Epoch: 3, State: TxnOngoing, TimeoutMs: 60_000})
	require.Equal(t, int64(5), got.ProducerID, "kept while a transaction is open")
	require.Equal(t, TxnPrepareAbort, got.State)

	in := int64(1)<<producerIDShift + 9
	got = init(Transaction{ID: "x", ProducerID: in, Epoch: 3, State: TxnCompleteAbort, TimeoutMs: 60_000})
	require.Equal(t, in, got.ProducerID, "in the range: kept")
	require.Equal(t, int16(4), got.Epoch)
}
