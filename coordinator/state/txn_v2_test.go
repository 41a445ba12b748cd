package state

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kafkaerr"
)

// txnRun decides one TxnRequest against v in a group of its own, and
// returns its answer, its error and the records it wrote.
func txnRun(t *testing.T, v *View, now int64, r TxnRequest) (Transaction, error, []Record) {
	t.Helper()
	g := &Group{Spec: v, Now: now}
	o := &TxnRequestOp{BaseOp: NewBaseOp(t.Context()), Req: r}
	o.Check(g)
	o.Finish(nil)
	return o.Out, <-o.Done, g.Records
}

// txnAt is a view holding one transaction's state.
func txnAt(tx Transaction) *View {
	v := NewView(nil)
	v.Apply(TxnStateRecord{Txn: tx})
	return v
}

// TestTxnV2EndBumpsEpoch: a v2 end of an Ongoing transaction bumps the
// epoch and answers it; its retry at the epoch before is answered the
// same, writing nothing; the opposite result, a commit with nothing
// ongoing, and an older epoch are refused with Kafka's codes; an abort
// with nothing ongoing bumps again; a v1 end does not bump.
func TestTxnV2EndBumpsEpoch(t *testing.T) {
	v := txnAt(Transaction{ID: "x", ProducerID: 7, Epoch: 3, State: TxnOngoing, TimeoutMs: 60_000})
	end := func(epoch int16, commit, v2 bool) (Transaction, error, []Record) {
		return txnRun(t, v, 10, TxnRequest{Op: TxnEnd, ID: "x", ProducerID: 7, Epoch: epoch, Commit: commit, Shards: 1, V2: v2})
	}
	got, err, recs := end(3, true, true)
	require.NoError(t, err)
	require.Equal(t, TxnCompleteCommit, got.State)
	require.Equal(t, int64(7), got.ProducerID)
	require.Equal(t, int16(4), got.Epoch, "the end bumps the epoch")
	require.True(t, got.V2)
	require.Len(t, recs, 1)

	got, err, recs = end(3, true, true)
	require.NoError(t, err, "a retry at the epoch before")
	require.Equal(t, int16(4), got.Epoch)
	require.Equal(t, []Record{TxnStateRecord{Txn: got}}, recs, "a retry of an end done is answered through the log: the state written again, unchanged (a zombie's answer is fenced)")

	_, err, _ = end(3, false, true)
	require.Equal(t, kafkaerr.InvalidTxnState, kafkaerr.CodeOf(err), "a retry of the other result")
	_, err, _ = end(4, true, true)
	require.Equal(t, kafkaerr.InvalidTxnState, kafkaerr.CodeOf(err), "a commit with nothing ongoing")
	_, err, _ = end(2, true, true)
	require.Equal(t, kafkaerr.ProducerFenced, kafkaerr.CodeOf(err), "an older epoch")
	_, err, _ = txnRun(t, v, 10, TxnRequest{Op: TxnEnd, ID: "x", ProducerID: 8, Epoch: 4, V2: true, Shards: 1})
	require.Equal(t, kafkaerr.InvalidProducerIDMapping, kafkaerr.CodeOf(err))

	got, err, recs = end(4, false, true)
	require.NoError(t, err, "an abort with nothing ongoing")
	require.Equal(t, TxnCompleteAbort, got.State)
	require.Equal(t, int16(5), got.Epoch)
	require.Len(t, recs, 1)
	_, err, _ = end(3, true, true)
	require.Equal(t, kafkaerr.ProducerFenced, kafkaerr.CodeOf(err), "the first end's retry is too old now")

	// A v1 end (EndTxn below 5) of the next transaction keeps the epoch.
	_, err, _ = txnRun(t, v, 11, TxnRequest{Op: TxnAddGroup, ID: "x", ProducerID: 7, Epoch: 5, Group: "g"})
	require.NoError(t, err)
	got, err, _ = end(5, true, false)
	require.NoError(t, err)
	require.Equal(t, TxnCompleteCommit, got.State)
	require.Equal(t, int16(5), got.Epoch, "v1 never bumps")
	require.False(t, got.V2)
	_, err, _ = end(5, false, false)
	require.Equal(t, kafkaerr.InvalidTxnState, kafkaerr.CodeOf(err), "v1 has no abort of nothing")
}

// TestTxnV2TwoPhase: a v2 end that needs PREPARE prepares under the
// bumped epoch, which its markers and its Complete carry; a retry while
// it is prepared is answered as it is, for the caller to finish.
func TestTxnV2TwoPhase(t *testing.T) {
	v := txnAt(Transaction{ID: "x", ProducerID: 7, Epoch: 3, State: TxnOngoing, TimeoutMs: 60_000})
	got, err, _ := txnRun(t, v, 10, TxnRequest{Op: TxnEnd, ID: "x", ProducerID: 7, Epoch: 3, Commit: false, V2: true})
	require.NoError(t, err)
	require.Equal(t, TxnPrepareAbort, got.State)
	require.Equal(t, int16(4), got.Epoch)

	again, err, recs := txnRun(t, v, 11, TxnRequest{Op: TxnEnd, ID: "x", ProducerID: 7, Epoch: 3, Commit: false, V2: true})
	require.NoError(t, err)
	require.Equal(t, TxnPrepareAbort, again.State)
	require.Empty(t, recs)
	_, err, _ = txnRun(t, v, 11, TxnRequest{Op: TxnEnd, ID: "x", ProducerID: 7, Epoch: 4, Commit: false, V2: true})
	require.Equal(t, kafkaerr.ProducerFenced, kafkaerr.CodeOf(err), "only the retry's epoch is valid while prepared")

	done, err, _ := txnRun(t, v, 12, TxnRequest{Op: TxnComplete, ID: "x", ProducerID: 7, Epoch: 4})
	require.NoError(t, err)
	require.Equal(t, TxnCompleteAbort, done.State)
	require.Equal(t, int16(4), done.Epoch)
}

// TestTxnV2EpochExhausted: a v2 end at the epoch before the last takes a
// new producer ID, written with an InitProducerIDRecord; the markers are
// the old ID's at the last epoch, and once complete the producer is the
// new ID at epoch 0; the end's retry, as the old ID, is answered with the
// new one, and so is a second Complete.
func TestTxnV2EpochExhausted(t *testing.T) {
	for _, onePhase := range []bool{true, false} {
		v := txnAt(Transaction{ID: "x", ProducerID: 7, Epoch: maxEpoch - 1, State: TxnOngoing, TimeoutMs: 60_000})
		next := v.NextProducerID
		shards := 0
		if onePhase {
			shards = 1
		}
		got, err, recs := txnRun(t, v, 10, TxnRequest{Op: TxnEnd, ID: "x", ProducerID: 7, Epoch: maxEpoch - 1, Commit: true, V2: true, Shards: shards})
		require.NoError(t, err)
		require.Equal(t, InitProducerIDRecord{ProducerID: next}, recs[0])
		if !onePhase {
			require.Equal(t, TxnPrepareCommit, got.State)
			require.Equal(t, int64(7), got.ProducerID, "the markers are the old ID's")
			require.Equal(t, int16(maxEpoch), got.Epoch, "at the last epoch")
			require.Equal(t, next, got.NextProducerID)
			got, err, _ = txnRun(t, v, 11, TxnRequest{Op: TxnComplete, ID: "x", ProducerID: 7, Epoch: maxEpoch, Commit: true})
			require.NoError(t, err)
		}
		require.Equal(t, TxnCompleteCommit, got.State)
		require.Equal(t, next, got.ProducerID)
		require.Equal(t, int16(0), got.Epoch)
		require.Equal(t, int64(7), got.PrevProducerID)

		retry, err, recs := txnRun(t, v, 12, TxnRequest{Op: TxnEnd, ID: "x", ProducerID: 7, Epoch: maxEpoch - 1, Commit: true, V2: true, Shards: shards})
		require.NoError(t, err, "the retry of the old ID")
		require.Equal(t, next, retry.ProducerID)
		require.Equal(t, int16(0), retry.Epoch)
		require.Len(t, recs, 1, "answered through the log")
		_, err, recs = txnRun(t, v, 12, TxnRequest{Op: TxnComplete, ID: "x", ProducerID: 7, Epoch: maxEpoch, Commit: true})
		require.NoError(t, err, "a second Complete (a crash between the markers and the answer)")
		require.Empty(t, recs)
	}
}

// TestTxnV2StateRecord: the fields of a v2 end survive encoding; a state
// without them encodes as before.
func TestTxnV2StateRecord(t *testing.T) {
	for _, tx := range []Transaction{
		{ID: "x", ProducerID: 7, Epoch: 4, State: TxnCompleteCommit},
		{ID: "x", ProducerID: 7, Epoch: 4, State: TxnPrepareCommit, V2: true, PrevProducerID: -1, NextProducerID: 9},
		{ID: "x", ProducerID: 9, State: TxnCompleteCommit, V2: true, PrevProducerID: 7, NextProducerID: -1},
	} {
		b := TxnStateRecord{Txn: tx}.AppendTo(nil)
		d := Decoder{B: b}
		got := d.TxnState()
		require.NoError(t, d.Err)
		require.Empty(t, d.B)
		require.Equal(t, tx, got.Txn)
		if !tx.V2 {
			plain := tx
			plain.V2 = true
			require.Less(t, len(b), len(TxnStateRecord{Txn: plain}.AppendTo(nil)), "no v2 fields without V2")
		}
	}
	d := Decoder{B: append(TxnStateRecord{Txn: Transaction{ID: "x"}}.AppendTo(nil), 2, 0, 0)}
	d.TxnState()
	require.Error(t, d.Err, "an unknown v2 flag")
}

// TestTxnV2InitAfterEnd: a producer that did not hear the answer to its
// v2 end asks InitProducerId to carry on from the epoch before the bump
// (KIP-360): it gets the epoch the end gave, not bumped again, and the
// transaction is Empty; asking as an epoch older still is
// PRODUCER_FENCED; past an exhausted epoch, the old producer ID gets the
// new one. Without a v2 end, the same request is fenced, as before.
func TestTxnV2InitAfterEnd(t *testing.T) {
	v := txnAt(Transaction{ID: "x", ProducerID: 7, Epoch: 4, State: TxnCompleteCommit, TimeoutMs: 60_000, V2: true, PrevProducerID: -1, NextProducerID: -1})
	init := func(v *View, pid int64, epoch int16) (Transaction, error) {
		got, err, _ := txnRun(t, v, 10, TxnRequest{Op: TxnInit, ID: "x", ProducerID: pid, Epoch: epoch, TimeoutMs: 30_000})
		return got, err
	}
	got, err := init(v, 7, 3)
	require.NoError(t, err)
	require.Equal(t, int64(7), got.ProducerID)
	require.Equal(t, int16(4), got.Epoch, "the epoch the end gave")
	require.Equal(t, TxnEmpty, got.State)
	require.Equal(t, int32(30_000), got.TimeoutMs)
	_, err = init(v, 7, 2)
	require.Equal(t, kafkaerr.ProducerFenced, kafkaerr.CodeOf(err))
	got, err = init(v, 7, 4)
	require.NoError(t, err)
	require.Equal(t, int16(5), got.Epoch, "at the current epoch it bumps")
	_, err = init(v, 7, 3)
	require.Equal(t, kafkaerr.ProducerFenced, kafkaerr.CodeOf(err), "another InitProducerId came between")

	over := txnAt(Transaction{ID: "x", ProducerID: 9, Epoch: 0, State: TxnCompleteAbort, TimeoutMs: 60_000, V2: true, PrevProducerID: 7, NextProducerID: -1})
	got, err = init(over, 7, maxEpoch-1)
	require.NoError(t, err)
	require.Equal(t, int64(9), got.ProducerID)
	require.Equal(t, int16(0), got.Epoch)

	v1 := txnAt(Transaction{ID: "x", ProducerID: 7, Epoch: 4, State: TxnCompleteCommit, TimeoutMs: 60_000})
	_, err = init(v1, 7, 3)
	require.Equal(t, kafkaerr.ProducerFenced, kafkaerr.CodeOf(err))
}
