package coordinator

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/diskless-go/diskless/coordinator/store"

	"github.com/diskless-go/diskless/coordinator/state"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal"
)

// txnFixture is three shards with a topic of four partitions, for the
// transaction tests: a transactional ID's shard and its partitions' are
// mostly not the same.
type txnFixture struct {
	*shardsFixture
	tp func(p int32) wal.TopicPartition
}

func newTxnFixture(t *testing.T) *txnFixture {
	f := newShardsFixture(t, 3, memblob.OpenBucket(nil), nil)
	id, err := f.s.CreatePartitions(t.Context(), CreatePartitionsRequest{Name: "t", Partitions: 4})
	require.NoError(t, err)
	return &txnFixture{shardsFixture: f, tp: func(p int32) wal.TopicPartition { return wal.TopicPartition{TopicID: id, Partition: p} }}
}

// produce commits one batch of n records to tp from a producer, and
// returns its result.
func (f *txnFixture) produce(tp wal.TopicPartition, producerID int64, epoch int16, seq int32, n int32, transactional bool) wal.Result {
	f.t.Helper()
	c := coord(tp, 1, n, producerID, epoch, seq, f.clock.Now().UnixMilli())
	c.Transactional = transactional
	key := f.upload(f.clock.Now(), 200)
	res, err := f.s.CommitFile(context.Background(), CommitFileRequest{ObjectKey: key, Size: 200, Coordinates: []wal.Coordinate{c}})
	require.NoError(f.t, err)
	return res[0]
}

// state returns the partition's high watermark and last stable offset.
func (f *txnFixture) state(tp wal.TopicPartition) (hw, lso int64) {
	f.t.Helper()
	r, err := f.s.ListOffsets(context.Background(), tp, LatestTimestamp)
	require.NoError(f.t, err)
	found, err := f.s.FindBatches(context.Background(), tp, r.Offset, 1)
	require.NoError(f.t, err)
	require.Equal(f.t, found.LastStable, r.LastStable, "FindBatches and ListOffsets agree")
	return r.Offset, r.LastStable
}

func (f *txnFixture) txn(id string) Transaction {
	f.t.Helper()
	ts, err := f.s.Transactions(context.Background(), []string{id})
	require.NoError(f.t, err)
	require.Len(f.t, ts, 1)
	return ts[0]
}

// TestTxnCommitAbort: a transaction over two partitions holds the last
// stable offset at its first batch until it ends; its markers land at real
// offsets, as control batches; an abort is in the aborted index, a commit
// is not; the state survives a restart.
func TestTxnCommitAbort(t *testing.T) {
	ctx := t.Context()
	f := newTxnFixture(t)
	pid, epoch, err := f.s.InitTxnProducer(ctx, "tx", 60_000, -1, -1)
	require.NoError(t, err)
	require.Equal(t, int16(0), epoch)
	require.Equal(t, TxnEmpty, f.txn("tx").State)

	// A transactional batch before its partition is added: refused.
	r := f.produce(f.tp(0), pid, epoch, 0, 1, true)
	require.Equal(t, kafkaerr.InvalidTxnState, code(r.Err), "%v", r.Err)

	// Other producers' records before and inside the transaction.
	require.NoError(t, f.produce(f.tp(0), -1, -1, -1, 2, false).Err)
	errs, err := f.s.AddTxnPartitions(ctx, "tx", pid, epoch, []wal.TopicPartition{f.tp(0), f.tp(1)})
	require.NoError(t, err)
	require.Equal(t, []error{nil, nil}, errs)
	require.Equal(t, TxnOngoing, f.txn("tx").State)
	hw, lso := f.state(f.tp(0))
	require.Equal(t, int64(2), hw)
	require.Equal(t, int64(2), lso, "an open transaction that wrote nothing holds nothing back")

	r = f.produce(f.tp(0), pid, epoch, 0, 3, true) // offsets 2-4
	require.NoError(t, r.Err)
	require.Equal(t, int64(2), r.BaseOffset)
	require.NoError(t, f.produce(f.tp(0), -1, -1, -1, 1, false).Err) // 5
	require.NoError(t, f.produce(f.tp(1), pid, epoch, 0, 1, true).Err)
	hw, lso = f.state(f.tp(0))
	require.Equal(t, int64(6), hw)
	require.Equal(t, int64(2), lso)
	// The producer may not write outside its transaction meanwhile.
	r = f.produce(f.tp(0), pid, epoch, 3, 1, false)
	require.Equal(t, kafkaerr.InvalidTxnState, code(r.Err), "%v", r.Err)

	require.NoError(t, f.s.EndTxn(ctx, "tx", pid, epoch, false))
	require.Equal(t, TxnCompleteAbort, f.txn("tx").State)
	hw, lso = f.state(f.tp(0))
	require.Equal(t, int64(7), hw, "the ABORT marker takes offset 6")
	require.Equal(t, int64(7), lso)
	found, err := f.s.FindBatches(ctx, f.tp(0), 6, 1<<20)
	require.NoError(t, err)
	require.Len(t, found.Batches, 1)
	m := found.Batches[0].Marker
	require.NotNil(t, m)
	require.False(t, m.Commit)
	require.Equal(t, pid, m.ProducerID)
	require.Equal(t, int64(6), found.Batches[0].BaseOffset)
	aborted, err := f.s.AbortedTxns(ctx, f.tp(0), 0, 100)
	require.NoError(t, err)
	require.Equal(t, []AbortedTxn{{ProducerID: pid, FirstOffset: 2, LastOffset: 6, LastStable: 7}}, aborted)
	aborted, err = f.s.AbortedTxns(ctx, f.tp(0), 0, 1)
	require.NoError(t, err)
	require.Empty(t, aborted, "the range ends before the transaction")

	// A retry of the end is answered as the first; the other end is not.
	require.NoError(t, f.s.EndTxn(ctx, "tx", pid, epoch, false))
	require.Equal(t, kafkaerr.InvalidTxnState, code(f.s.EndTxn(ctx, "tx", pid, epoch, true)))
	// A late write of the ended transaction cannot open it again.
	r = f.produce(f.tp(0), pid, epoch, 3, 1, true)
	require.Equal(t, kafkaerr.InvalidTxnState, code(r.Err), "%v", r.Err)

	// The next transaction commits.
	_, err = f.s.AddTxnPartitions(ctx, "tx", pid, epoch, []wal.TopicPartition{f.tp(0)})
	require.NoError(t, err)
	require.NoError(t, f.produce(f.tp(0), pid, epoch, 3, 1, true).Err) // 7
	require.NoError(t, f.s.EndTxn(ctx, "tx", pid, epoch, true))        // marker at 8
	hw, lso = f.state(f.tp(0))
	require.Equal(t, int64(9), hw)
	require.Equal(t, int64(9), lso)
	aborted, err = f.s.AbortedTxns(ctx, f.tp(0), 0, 100)
	require.NoError(t, err)
	require.Len(t, aborted, 1, "a commit is not in the aborted index")

	f.restart()
	tx := f.txn("tx")
	require.Equal(t, TxnCompleteCommit, tx.State)
	require.Equal(t, pid, tx.ProducerID)
	hw, lso = f.state(f.tp(0))
	require.Equal(t, int64(9), hw)
	require.Equal(t, int64(9), lso)
	found, err = f.s.FindBatches(ctx, f.tp(0), 8, 1<<20)
	require.NoError(t, err)
	require.True(t, found.Batches[0].Marker.Commit)
	aborted, err = f.s.AbortedTxns(ctx, f.tp(0), 0, 100)
	require.NoError(t, err)
	require.Len(t, aborted, 1)
}

// TestTxnOpenSurvivesRestart: an open transaction's hold on the last
// stable offset, and its acceptance of the producer's batches, survive a
// restart of the shards.
func TestTxnOpenSurvivesRestart(t *testing.T) {
	ctx := t.Context()
	f := newTxnFixture(t)
	pid, epoch, err := f.s.InitTxnProducer(ctx, "tx", 60_000, -1, -1)
	require.NoError(t, err)
	_, err = f.s.AddTxnPartitions(ctx, "tx", pid, epoch, []wal.TopicPartition{f.tp(2)})
	require.NoError(t, err)
	require.NoError(t, f.produce(f.tp(2), pid, epoch, 0, 2, true).Err)
	require.NoError(t, f.produce(f.tp(2), -1, -1, -1, 1, false).Err)
	f.restart()
	hw, lso := f.state(f.tp(2))
	require.Equal(t, []int64{3, 0}, []int64{hw, lso})
	require.NoError(t, f.produce(f.tp(2), pid, epoch, 2, 1, true).Err)
	require.NoError(t, f.s.EndTxn(ctx, "tx", pid, epoch, true))
	hw, lso = f.state(f.tp(2))
	require.Equal(t, []int64{5, 5}, []int64{hw, lso})
}

// TestTxnFencing: a new InitProducerId of a transactional ID bumps the
// epoch and aborts the transaction the old epoch left open; the old
// producer's adds, writes and ends are refused, and its records stay
// aborted.
// TestTxnLateBegin: a transaction holds two partitions, and the begin of
// one of them is still on its way (its call delayed) when an
// InitProducerId aborts the transaction under a new epoch. The abort's
// marker still goes to that partition, raising the producer's epoch
// there, so that the late begin is fenced, and the old epoch's writes
// with it: it cannot open a transaction that nothing would end.
func TestTxnLateBegin(t *testing.T) {
	ctx := t.Context()
	f := newTxnFixture(t)
	pid, old, err := f.s.InitTxnProducer(ctx, "tx", 60_000, -1, -1)
	require.NoError(t, err)
	sh, err := f.s.txnShard("tx")
	require.NoError(t, err)
	// late: a partition of a shard other than the transaction's, which
	// the transaction's own entry does not open.
	late := wal.TopicPartition{Partition: -1}
	for p := range int32(4) {
		if s, err := f.s.Shards().ShardOf(f.tp(p)); err == nil && s != ShardOfTxn("tx", f.s.Shards().NumShards()) && p != 0 {
			late = f.tp(p)
		}
	}
	require.NotEqual(t, int32(-1), late.Partition)
	_, err = sh.Txn(ctx, TxnRequest{Op: TxnAddPartitions, ID: "tx", ProducerID: pid, Epoch: old, Partitions: []wal.TopicPartition{f.tp(0), late}, Shards: f.s.Shards().NumShards()})
	require.NoError(t, err)
	begin := func(tp wal.TopicPartition, epoch int16) error {
		errs, err := f.s.partitionTxns(ctx, []PartitionTxn{{TopicPartition: tp, ProducerID: pid, Epoch: epoch, Begin: true}})
		require.NoError(t, err)
		return errs[0]
	}
	require.NoError(t, begin(f.tp(0), old))
	require.NoError(t, f.produce(f.tp(0), pid, old, 0, 2, true).Err)

	_, epoch, err := f.s.InitTxnProducer(ctx, "tx", 60_000, -1, -1)
	require.NoError(t, err)
	require.Greater(t, epoch, old)
	hw, lso := f.state(late)
	require.Equal(t, []int64{1, 1}, []int64{hw, lso}, "the abort's marker reached the partition its begin had not")

	require.Equal(t, kafkaerr.ProducerFenced, code(begin(late, old)), "the late begin is fenced")
	require.NotEqual(t, kafkaerr.NoError, code(f.produce(late, pid, old, 0, 1, true).Err), "and the old epoch's writes")
	hw, lso = f.state(late)
	require.Equal(t, []int64{1, 1}, []int64{hw, lso}, "no transaction hangs there")
}

func TestTxnFencing(t *testing.T) {
	ctx := t.Context()
	f := newTxnFixture(t)
	pid, old, err := f.s.InitTxnProducer(ctx, "tx", 60_000, -1, -1)
	require.NoError(t, err)
	_, err = f.s.AddTxnPartitions(ctx, "tx", pid, old, []wal.TopicPartition{f.tp(0), f.tp(3)})
	require.NoError(t, err)
	require.NoError(t, f.produce(f.tp(0), pid, old, 0, 2, true).Err)

	pid2, epoch, err := f.s.InitTxnProducer(ctx, "tx", 60_000, -1, -1)
	require.NoError(t, err)
	require.Equal(t, pid, pid2)
	require.Equal(t, old+2, epoch, "one epoch for the abort, as Kafka")
	require.Equal(t, TxnEmpty, f.txn("tx").State)
	hw, lso := f.state(f.tp(0))
	require.Equal(t, []int64{3, 3}, []int64{hw, lso}, "the old transaction is aborted, marker and all")
	aborted, err := f.s.AbortedTxns(ctx, f.tp(0), 0, 10)
	require.NoError(t, err)
	require.Equal(t, []AbortedTxn{{ProducerID: pid, FirstOffset: 0, LastOffset: 2, LastStable: 3}}, aborted)
	hw, lso = f.state(f.tp(3))
	require.Equal(t, []int64{1, 1}, []int64{hw, lso}, "a partition added and not written gets its marker too, as in Kafka")
	aborted, err = f.s.AbortedTxns(ctx, f.tp(3), 0, 10)
	require.NoError(t, err)
	require.Empty(t, aborted, "a transaction that wrote nothing is not in the index")

	// The zombie.
	_, err = f.s.AddTxnPartitions(ctx, "tx", pid, old, []wal.TopicPartition{f.tp(0)})
	require.Equal(t, kafkaerr.ProducerFenced, code(err), "%v", err)
	require.Equal(t, kafkaerr.ProducerFenced, code(f.s.EndTxn(ctx, "tx", pid, old, true)))
	r := f.produce(f.tp(0), pid, old, 2, 1, true)
	require.NotEqual(t, kafkaerr.NoError, code(r.Err))
	_, _, err = f.s.InitTxnProducer(ctx, "tx", 60_000, pid, old)
	require.Equal(t, kafkaerr.ProducerFenced, code(err), "KIP-360: only the current epoch may ask for the next")

	// The new producer works.
	_, err = f.s.AddTxnPartitions(ctx, "tx", pid, epoch, []wal.TopicPartition{f.tp(0)})
	require.NoError(t, err)
	require.NoError(t, f.produce(f.tp(0), pid, epoch, 0, 1, true).Err)
	require.NoError(t, f.s.EndTxn(ctx, "tx", pid, epoch, true))
	hw, lso = f.state(f.tp(0))
	require.Equal(t, []int64{5, 5}, []int64{hw, lso})

	// Bad requests change nothing.
	_, _, err = f.s.InitTxnProducer(ctx, "tx", MaxTxnTimeoutMs+1, -1, -1)
	require.Equal(t, kafkaerr.InvalidTransactionTimeout, code(err))
	_, err = f.s.AddTxnPartitions(ctx, "tx", pid+1, epoch, []wal.TopicPartition{f.tp(0)})
	require.Equal(t, kafkaerr.InvalidProducerIDMapping, code(err))
	_, err = f.s.AddTxnPartitions(ctx, "nope", pid, epoch, []wal.TopicPartition{f.tp(0)})
	require.Equal(t, kafkaerr.InvalidProducerIDMapping, code(err))
	require.Equal(t, TxnCompleteCommit, f.txn("tx").State)
}

// TestTxnTimeout: a transaction open past its timeout is aborted by the
// coordinator under a new epoch, and the last stable offset moves past it.
func TestTxnTimeout(t *testing.T) {
	ctx := t.Context()
	f := newTxnFixture(t)
	pid, epoch, err := f.s.InitTxnProducer(ctx, "tx", 1000, -1, -1)
	require.NoError(t, err)
	_, err = f.s.AddTxnPartitions(ctx, "tx", pid, epoch, []wal.TopicPartition{f.tp(1)})
	require.NoError(t, err)
	require.NoError(t, f.produce(f.tp(1), pid, epoch, 0, 1, true).Err)
	n, err := f.s.ExpireTransactions(ctx, time.Minute)
	require.NoError(t, err)
	require.Zero(t, n, "not timed out yet")
	f.clock.Advance(1001 * time.Millisecond)
	n, err = f.s.ExpireTransactions(ctx, time.Minute)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	tx := f.txn("tx")
	require.Equal(t, TxnCompleteAbort, tx.State)
	require.Equal(t, epoch+1, tx.Epoch)
	hw, lso := f.state(f.tp(1))
	require.Equal(t, []int64{2, 2}, []int64{hw, lso})
	require.Equal(t, kafkaerr.ProducerFenced, code(f.s.EndTxn(ctx, "tx", pid, epoch, true)))
}

// TestTxnIDExpiry: a transactional ID whose transaction ended more than
// TxnIDExpiration (7 days) ago is removed at the next check (Kafka's
// transactional.id.expiration.ms), also after a restart; one used since,
// or with a transaction open, stays; an InitProducerId for a removed ID
// starts afresh.
func TestTxnIDExpiry(t *testing.T) {
	ctx := t.Context()
	f := newTxnFixture(t)
	pid, epoch, err := f.s.InitTxnProducer(ctx, "old", 60_000, -1, -1)
	require.NoError(t, err)
	_, err = f.s.AddTxnPartitions(ctx, "old", pid, epoch, []wal.TopicPartition{f.tp(1)})
	require.NoError(t, err)
	require.NoError(t, f.s.EndTxn(ctx, "old", pid, epoch, true))
	_, _, err = f.s.InitTxnProducer(ctx, "idle", 60_000, -1, -1) // Empty
	require.NoError(t, err)
	f.clock.Advance(7*24*time.Hour - time.Minute)
	_, _, err = f.s.InitTxnProducer(ctx, "fresh", 60_000, -1, -1)
	require.NoError(t, err)
	f.clock.Advance(2 * time.Minute)
	_, err = f.s.ExpireTransactions(ctx, time.Minute)
	require.NoError(t, err)
	ts, err := f.s.Transactions(ctx, nil)
	require.NoError(t, err)
	require.Len(t, ts, 1)
	require.Equal(t, "fresh", ts[0].ID)
	f.restart()
	ts, err = f.s.Transactions(ctx, nil)
	require.NoError(t, err)
	require.Len(t, ts, 1, "removed in the database too")
	again, epoch2, err := f.s.InitTxnProducer(ctx, "old", 60_000, -1, -1)
	require.NoError(t, err)
	require.NotEqual(t, pid, again, "a new producer ID")
	require.Zero(t, epoch2)
}

// TestTxnOffsets: offsets committed in a transaction become the group's
// only when it commits.
func TestTxnOffsets(t *testing.T) {
	ctx := t.Context()
	f := newTxnFixture(t)
	pid, epoch, err := f.s.InitTxnProducer(ctx, "tx", 60_000, -1, -1)
	require.NoError(t, err)
	off := []GroupOffset{{Topic: "t", TopicID: f.tp(0).TopicID, Partition: 0, Offset: 7, LeaderEpoch: -1}}
	require.Equal(t, kafkaerr.InvalidTxnState, code(f.s.TxnCommitOffsets(ctx, "tx", pid, epoch, "g", off)), "the group is not in the transaction")
	require.NoError(t, f.s.AddTxnGroup(ctx, "tx", pid, epoch, "g"))
	require.NoError(t, f.s.TxnCommitOffsets(ctx, "tx", pid, epoch, "g", off))
	got, err := f.s.FetchOffsets(ctx, "g", nil)
	require.NoError(t, err)
	require.Empty(t, got)
	require.NoError(t, f.s.EndTxn(ctx, "tx", pid, epoch, false))
	got, err = f.s.FetchOffsets(ctx, "g", nil)
	require.NoError(t, err)
	require.Empty(t, got, "aborted: not committed")

	require.NoError(t, f.s.AddTxnGroup(ctx, "tx", pid, epoch, "g"))
	require.NoError(t, f.s.TxnCommitOffsets(ctx, "tx", pid, epoch, "g", off))
	require.NoError(t, f.s.EndTxn(ctx, "tx", pid, epoch, true))
	got, err = f.s.FetchOffsets(ctx, "g", nil)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, int64(7), got[0].Offset)
}

// sampleTxnEntries are entries of the transaction records, for the golden
// file, the round trip and the fuzzer's seeds.
func sampleTxnEntries() [][]byte {
	id := uuid.MustParse("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
	return [][]byte{
		state.AppendEntry(nil, state.Entry{Epoch: 11, Prev: 0x1234, Records: []state.Record{
			state.TxnStateRecord{Txn: Transaction{ID: "orders-app", ProducerID: 9, Epoch: 0, State: TxnEmpty, TimeoutMs: 60_000, UpdateTime: 1_764_500_001_000}},
			state.TxnStateRecord{Txn: Transaction{ID: "orders-app", ProducerID: 9, Epoch: 3, State: TxnPrepareCommit, TimeoutMs: 60_000,
				StartTime: 1_764_500_001_100, UpdateTime: 1_764_500_001_200,
				Partitions: []wal.TopicPartition{{TopicID: id, Partition: 0}, {TopicID: id, Partition: 5}},
				Groups:     []string{"readers"},
				Offsets:    []TxnOffset{{Group: "readers", GroupOffset: GroupOffset{Topic: "orders", TopicID: id, Partition: 2, Offset: 77, LeaderEpoch: -1, Metadata: "m"}}}}},
			state.TxnBeginRecord{PID: 10, ProducerID: 9, Epoch: 3},
			state.TxnMarkerRecord{PID: 10, ProducerID: 9, Epoch: 3, Commit: true, CoordinatorEpoch: 0, Offset: 120, First: 100, Time: 1_764_500_001_300},
			state.TxnMarkerRecord{PID: 11, ProducerID: 9, Epoch: 4, Commit: false, CoordinatorEpoch: 2, Offset: 7, First: -1, Time: 1_764_500_001_400},
		}}),
		// An expired transactional ID removed.
		state.AppendEntry(nil, state.Entry{Epoch: 12, Records: []state.Record{
			state.TxnStateRecord{Txn: Transaction{ID: "orders-app", ProducerID: 9, Epoch: 4, State: TxnDead, UpdateTime: 1_765_104_801_400}},
		}}),
	}
}

// TestTxnEntryGolden: the transaction records, byte for byte, are in
// testdata/entries-txn.golden; -update rewrites it. They round-trip, and
// a bad state or marker flag does not decode.
func TestTxnEntryGolden(t *testing.T) {
	checkGolden(t, "entries-txn.golden", sampleTxnEntries())
	for _, r := range []state.Record{
		state.TxnStateRecord{Txn: Transaction{ID: "x", State: TxnDead + 1}},
		state.TxnStateRecord{Txn: Transaction{}},
		state.TxnMarkerRecord{Offset: 3, First: 4},
	} {
		_, err := state.DecodeEntry(state.AppendEntry(nil, state.Entry{Records: []state.Record{r}}))
		require.ErrorIs(t, err, ErrCorruptEntry, "%+v", r)
	}
}

// TestTxnCrashAfterPrepare: a broker that dies after the transaction's
// shard recorded PrepareCommit and one of its two markers leaves the
// transaction prepared; after a restart, ExpireTransactions finishes it:
// both partitions have exactly one COMMIT marker, the group's offsets are
// committed, and the state is CompleteCommit.
func TestTxnCrashAfterPrepare(t *testing.T) {
	ctx := t.Context()
	f := newTxnFixture(t)
	pid, epoch, err := f.s.InitTxnProducer(ctx, "tx", 60_000, -1, -1)
	require.NoError(t, err)
	_, err = f.s.AddTxnPartitions(ctx, "tx", pid, epoch, []wal.TopicPartition{f.tp(0), f.tp(1)})
	require.NoError(t, err)
	require.NoError(t, f.s.AddTxnGroup(ctx, "tx", pid, epoch, "g"))
	off := []GroupOffset{{Topic: "t", TopicID: f.tp(0).TopicID, Partition: 0, Offset: 3, LeaderEpoch: -1}}
	require.NoError(t, f.s.TxnCommitOffsets(ctx, "tx", pid, epoch, "g", off))
	require.NoError(t, f.produce(f.tp(0), pid, epoch, 0, 2, true).Err)
	require.NoError(t, f.produce(f.tp(1), pid, epoch, 0, 1, true).Err)

	// The first phase and one marker, as EndTxn does them, then the crash.
	c, err := f.s.txnShard("tx")
	require.NoError(t, err)
	tx, err := c.Txn(ctx, TxnRequest{Op: TxnEnd, ID: "tx", ProducerID: pid, Epoch: epoch, Commit: true})
	require.NoError(t, err)
	require.Equal(t, TxnPrepareCommit, tx.State)
	errs, err := f.s.partitionTxns(ctx, []PartitionTxn{{TopicPartition: f.tp(0), ProducerID: pid, Epoch: epoch, Commit: true}})
	require.NoError(t, err)
	require.NoError(t, errs[0])
	f.restart()

	require.Equal(t, TxnPrepareCommit, f.txn("tx").State)
	hw, lso := f.state(f.tp(1))
	require.Equal(t, []int64{1, 0}, []int64{hw, lso}, "partition 1 waits for its marker")
	got, err := f.s.FetchOffsets(ctx, "g", nil)
	require.NoError(t, err)
	require.Empty(t, got)
	n, err := f.s.ExpireTransactions(ctx, time.Minute)
	require.NoError(t, err)
	require.Zero(t, n, "not stale yet: its broker may still be ending it")
	n, err = f.s.ExpireTransactions(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, 1, n)

	require.Equal(t, TxnCompleteCommit, f.txn("tx").State)
	for p, want := range []int64{3, 2} {
		hw, lso := f.state(f.tp(int32(p)))
		require.Equal(t, []int64{want, want}, []int64{hw, lso}, "partition %d: one marker", p)
		found, err := f.s.FindBatches(ctx, f.tp(int32(p)), want-1, 1<<20)
		require.NoError(t, err)
		require.True(t, found.Batches[0].Marker.Commit)
	}
	got, err = f.s.FetchOffsets(ctx, "g", nil)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, int64(3), got[0].Offset)
	// The producer goes on.
	_, err = f.s.AddTxnPartitions(ctx, "tx", pid, epoch, []wal.TopicPartition{f.tp(1)})
	require.NoError(t, err)
}

// TestTxnDeleteRecords: DeleteRecords past an aborted transaction drops
// its index entry and its marker row with the batches; the last stable
// offset never falls below the log start offset.
func TestTxnDeleteRecords(t *testing.T) {
	ctx := t.Context()
	f := newTxnFixture(t)
	pid, epoch, err := f.s.InitTxnProducer(ctx, "tx", 60_000, -1, -1)
	require.NoError(t, err)
	_, err = f.s.AddTxnPartitions(ctx, "tx", pid, epoch, []wal.TopicPartition{f.tp(0)})
	require.NoError(t, err)
	require.NoError(t, f.produce(f.tp(0), pid, epoch, 0, 2, true).Err) // 0-1
	require.NoError(t, f.s.EndTxn(ctx, "tx", pid, epoch, false))       // marker 2
	_, err = f.s.AddTxnPartitions(ctx, "tx", pid, epoch, []wal.TopicPartition{f.tp(0)})
	require.NoError(t, err)
	require.NoError(t, f.produce(f.tp(0), pid, epoch, 2, 2, true).Err) // 3-4, open
	aborted, err := f.s.AbortedTxns(ctx, f.tp(0), 0, 10)
	require.NoError(t, err)
	require.Len(t, aborted, 1)

	_, err = f.s.DeleteRecords(ctx, f.tp(0), 4)
	require.NoError(t, err)
	aborted, err = f.s.AbortedTxns(ctx, f.tp(0), 0, 10)
	require.NoError(t, err)
	require.Empty(t, aborted, "below the log start")
	hw, lso := f.state(f.tp(0))
	require.Equal(t, []int64{5, 4}, []int64{hw, lso}, "the open transaction's first offset is gone: the log start holds")
	require.NoError(t, f.s.EndTxn(ctx, "tx", pid, epoch, true))
	hw, lso = f.state(f.tp(0))
	require.Equal(t, []int64{6, 6}, []int64{hw, lso})
	f.restart()
	hw, lso = f.state(f.tp(0))
	require.Equal(t, []int64{6, 6}, []int64{hw, lso})
}

// logEnd returns the number of entries of log.
func logEnd(t *testing.T, log metalog.Log) int64 {
	t.Helper()
	var n int64
	require.NoError(t, log.Read(t.Context(), 0, func(offset int64, _ []byte) error {
		n = offset + 1
		return nil
	}))
	return n
}

// TestTxnEndOneEntry: a transaction whose partitions and group are all in
// its own shard ends in one log entry (its markers, its offsets and its
// Complete state together); one that spans shards takes three (PREPARE,
// the markers, Complete).
func TestTxnEndOneEntry(t *testing.T) {
	ctx := t.Context()
	f := newShardsFixture(t, 1, memblob.OpenBucket(nil), nil)
	id, err := f.s.CreatePartitions(ctx, CreatePartitionsRequest{Name: "t", Partitions: 2})
	require.NoError(t, err)
	tf := &txnFixture{shardsFixture: f, tp: func(p int32) wal.TopicPartition { return wal.TopicPartition{TopicID: id, Partition: p} }}
	pid, epoch, err := f.s.InitTxnProducer(ctx, "tx", 60_000, -1, -1)
	require.NoError(t, err)
	_, err = f.s.AddTxnPartitions(ctx, "tx", pid, epoch, []wal.TopicPartition{tf.tp(0), tf.tp(1)})
	require.NoError(t, err)
	require.NoError(t, f.s.AddTxnGroup(ctx, "tx", pid, epoch, "g"))
	require.NoError(t, f.s.TxnCommitOffsets(ctx, "tx", pid, epoch, "g", []GroupOffset{{Topic: "t", TopicID: id, Partition: 1, Offset: 9, LeaderEpoch: -1}}))
	require.NoError(t, tf.produce(tf.tp(0), pid, epoch, 0, 2, true).Err)
	before := logEnd(t, f.logs[0])
	require.NoError(t, f.s.EndTxn(ctx, "tx", pid, epoch, true))
	require.Equal(t, before+1, logEnd(t, f.logs[0]), "one entry")
	require.Equal(t, TxnCompleteCommit, tf.txn("tx").State)
	for p, want := range []int64{3, 1} {
		hw, lso := tf.state(tf.tp(int32(p)))
		require.Equal(t, []int64{want, want}, []int64{hw, lso}, "partition %d has its marker", p)
	}
	got, err := f.s.FetchOffsets(ctx, "g", nil)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, int64(9), got[0].Offset)
	require.NoError(t, f.s.EndTxn(ctx, "tx", pid, epoch, true), "a retry")
	require.Equal(t, before+2, logEnd(t, f.logs[0]), "a retry of an end done is answered through the log (one entry: the state again), so that a leader that no longer leads is fenced")
	require.Equal(t, TxnCompleteCommit, tf.txn("tx").State)
	for p, want := range []int64{3, 1} {
		hw, lso := tf.state(tf.tp(int32(p)))
		require.Equal(t, []int64{want, want}, []int64{hw, lso}, "partition %d: no second marker", p)
	}

	// Three shards, partitions in others: two phases.
	m := newTxnFixture(t)
	pid, epoch, err = m.s.InitTxnProducer(ctx, "tx", 60_000, -1, -1)
	require.NoError(t, err)
	parts := []wal.TopicPartition{m.tp(0), m.tp(1), m.tp(2), m.tp(3)}
	_, err = m.s.AddTxnPartitions(ctx, "tx", pid, epoch, parts)
	require.NoError(t, err)
	shard := ShardOfTxn("tx", 3)
	before = logEnd(t, m.logs[shard])
	require.NoError(t, m.s.EndTxn(ctx, "tx", pid, epoch, false))
	markersHere := int64(0)
	for _, tp := range parts {
		if i, err := m.s.Shards().ShardOf(tp); err == nil && i == shard {
			markersHere = 1
		}
	}
	require.Equal(t, before+2+markersHere, logEnd(t, m.logs[shard]), "PREPARE, Complete and (if any) the markers of its own partitions")
	for _, tp := range parts {
		hw, lso := m.state(tp)
		require.Equal(t, []int64{1, 1}, []int64{hw, lso})
	}
}

// direct is a Forwarder to a Coordinator in the same process.
type direct struct{ to *Coordinator }

func (f direct) Forward(ctx context.Context, shard int, method string, body []byte) func() ([]byte, error) {
	answer := f.to.Shards().Serve(ctx, shard, method, body)
	return func() ([]byte, error) { return answer(), nil }
}

// TestTxnForwarded: a broker that leads no shard runs a transaction
// through its Forwarder (every call encoded, served by the leader's
// Coordinator): the same answers, markers and aborted index as at the
// leader, and the errors keep their codes.
func TestTxnForwarded(t *testing.T) {
	ctx := t.Context()
	lead, err := Open(ctx, []metalog.Log{newTestLog()}, &Options{Dir: t.TempDir(), ApplyInterval: -1, SnapshotEvery: -1})
	require.NoError(t, err)
	defer lead.Close()
	id, err := lead.CreatePartitions(ctx, CreatePartitionsRequest{Name: "t", Partitions: 2})
	require.NoError(t, err)
	other, err := Open(ctx, []metalog.Log{nil}, &Options{Dir: t.TempDir(), Forwarder: direct{lead}, ApplyInterval: -1, SnapshotEvery: -1})
	require.NoError(t, err)
	defer other.Close()
	tp := wal.TopicPartition{TopicID: id, Partition: 1}

	pid, epoch, err := other.InitTxnProducer(ctx, "tx", 60_000, -1, -1)
	require.NoError(t, err)
	errs, err := other.AddTxnPartitions(ctx, "tx", pid, epoch, []wal.TopicPartition{tp, {TopicID: id, Partition: 7}})
	require.NoError(t, err)
	require.NoError(t, errs[0])
	require.Equal(t, kafkaerr.UnknownTopicOrPartition, code(errs[1]))
	c := coord(tp, 1, 3, pid, epoch, 0, 1_764_500_000_000)
	c.Transactional = true
	res, err := other.CommitFile(ctx, CommitFileRequest{ObjectKey: "wal/x", Size: 200, Coordinates: []wal.Coordinate{c}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	lo, err := other.ListOffsets(ctx, tp, LatestTimestamp)
	require.NoError(t, err)
	require.Equal(t, []int64{3, 0}, []int64{lo.Offset, lo.LastStable})
	require.NoError(t, other.EndTxn(ctx, "tx", pid, epoch, false))
	found, err := other.FindBatches(ctx, tp, 3, 1<<20)
	require.NoError(t, err)
	require.Equal(t, int64(4), found.LastStable)
	require.NotNil(t, found.Batches[0].Marker)
	require.Equal(t, pid, found.Batches[0].Marker.ProducerID)
	aborted, err := other.AbortedTxns(ctx, tp, 0, 10)
	require.NoError(t, err)
	require.Equal(t, []AbortedTxn{{ProducerID: pid, FirstOffset: 0, LastOffset: 3, LastStable: 4}}, aborted)
	ts, err := other.Transactions(ctx, nil)
	require.NoError(t, err)
	require.Len(t, ts, 1)
	require.Equal(t, TxnCompleteAbort, ts[0].State)
	require.Equal(t, kafkaerr.ProducerFenced, code(other.EndTxn(ctx, "tx", pid, epoch+1, true)))

	// Past a DeleteRecords the aborted transaction is no longer indexed: a
	// fetch's range from below the log start is refused (its records came
	// from a copy behind the delete), a remote segment's is not.
	_, err = other.DeleteRecords(ctx, tp, 4)
	require.NoError(t, err)
	_, err = other.FetchAbortedTxns(ctx, tp, 0, 3)
	require.Equal(t, kafkaerr.OffsetOutOfRange, code(err), "%v", err)
	aborted, err = other.AbortedTxns(ctx, tp, 0, 3)
	require.NoError(t, err)
	require.Empty(t, aborted)
	aborted, err = other.FetchAbortedTxns(ctx, tp, 4, 10)
	require.NoError(t, err)
	require.Empty(t, aborted)
	_, err = lead.FetchAbortedTxns(ctx, tp, 3, 3)
	require.Equal(t, kafkaerr.OffsetOutOfRange, code(err), "%v", err)
}

// TestTxnReplayKeepsOpen: on opening, the producer states are rebuilt by
// replaying the commits after the producers table's offset; that replay
// must not touch the open transactions (it once set a new transaction's
// first offset to a batch of the transaction before, so its abort hid
// committed records from read_committed consumers).
func TestTxnReplayKeepsOpen(t *testing.T) {
	ctx := t.Context()
	f := newTxnFixture(t)
	pid, epoch, err := f.s.InitTxnProducer(ctx, "tx", 60_000, -1, -1)
	require.NoError(t, err)
	_, err = f.s.AddTxnPartitions(ctx, "tx", pid, epoch, []wal.TopicPartition{f.tp(0)})
	require.NoError(t, err)
	require.NoError(t, f.produce(f.tp(0), pid, epoch, 0, 2, true).Err) // 0-1
	require.NoError(t, f.s.EndTxn(ctx, "tx", pid, epoch, true))        // marker 2
	_, err = f.s.AddTxnPartitions(ctx, "tx", pid, epoch, []wal.TopicPartition{f.tp(0)})
	require.NoError(t, err) // open, nothing written
	// As after a SIGKILL: the producers table behind the database, so
	// that opening replays every commit into the producer states.
	shard, err := f.s.Shards().ShardOf(f.tp(0))
	require.NoError(t, err)
	require.NoError(t, f.s.Close())
	db, err := sql.Open("sqlite3", filepath.Join(f.dir, fmt.Sprintf("shard-%d.db", shard)))
	require.NoError(t, err)
	_, err = db.Exec("UPDATE meta SET v = -1 WHERE k = ?", store.MetaProducersAt)
	require.NoError(t, err)
	_, err = db.Exec("DELETE FROM meta WHERE k IN (?, ?)", store.MetaProducersChainCRC, store.MetaProducersEpoch)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	f.open()
	hw, lso := f.state(f.tp(0))
	require.Equal(t, []int64{3, 3}, []int64{hw, lso}, "the open transaction wrote nothing: it holds nothing back")
	require.NoError(t, f.s.EndTxn(ctx, "tx", pid, epoch, false))
	aborted, err := f.s.AbortedTxns(ctx, f.tp(0), 0, 10)
	require.NoError(t, err)
	require.Empty(t, aborted, "the committed records are not in an aborted range")
}

// unreachable is a Forwarder whose calls all fail: no leader answers.
type unreachable struct{}

func (unreachable) Forward(context.Context, int, string, []byte) func() ([]byte, error) {
	return func() ([]byte, error) { return nil, errors.New("no leader reachable") }
}

// TestTxnMarkerUnroutedIsNotGone: a broker whose catalog lacks a shard
// (it restarted on a wiped folder and cannot reach that shard's leader)
// knows no shard for a partition of a transaction it ends. That is not a
// partition gone with its data: the marker is tried again until it can
// be written, never skipped (a skipped commit marker left a committed
// transaction's records invisible, and a later abort aborted them: the
// simulation's seed 1781376451538423345). A shard's own
// UNKNOWN_TOPIC_OR_PARTITION, or a partition no shard serves in a
// catalog every shard answered, is gone.
func TestTxnMarkerUnroutedIsNotGone(t *testing.T) {
	ctx := t.Context()
	b, err := Open(ctx, []metalog.Log{nil, newTestLog()}, &Options{Dir: t.TempDir(), Forwarder: unreachable{}, ApplyInterval: -1, SnapshotEvery: -1})
	require.NoError(t, err)
	defer b.Close()
	require.False(t, b.catalogWhole(), "shard 0 has not answered")
	elsewhere := wal.TopicPartition{TopicID: uuid.New(), Partition: 0}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond) // the catalog refresh waits for shard 0 until then
	defer cancel()
	errs, err := b.partitionTxns(short, []PartitionTxn{{TopicPartition: elsewhere, ProducerID: 7, Commit: true}})
	require.NoError(t, err)
	require.ErrorIs(t, errs[0], errUnrouted)
	require.Equal(t, kafkaerr.UnknownTopicOrPartition, code(errs[0]))
	require.False(t, b.markerDone(errs[0]), "no shard known while one did not answer: tried again")
	require.True(t, b.markerDone(kafkaerr.New(kafkaerr.UnknownTopicOrPartition, "the shard has no such partition")), "the shard's own answer: gone")
	require.True(t, b.markerDone(nil))
	require.False(t, b.markerDone(kafkaerr.New(kafkaerr.NotLeaderOrFollower, "moving")))

	one, err := Open(ctx, []metalog.Log{newTestLog()}, &Options{Dir: t.TempDir(), ApplyInterval: -1, SnapshotEvery: -1})
	require.NoError(t, err)
	defer one.Close()
	errs, err = one.partitionTxns(ctx, []PartitionTxn{{TopicPartition: elsewhere, ProducerID: 7, Commit: true}})
	require.NoError(t, err)
	require.True(t, one.markerDone(errs[0]), "one process's catalog is whole: a partition no shard serves is gone")
}
