package store

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/coordinator/state"
)

// applierFixture is a store with one topic of one partition, and the
// committed view its entries were applied to.
type applierFixture struct {
	t    *testing.T
	db   *DB
	root *state.View
	off  int64
	pid  int64
}

func newApplierFixture(t *testing.T) *applierFixture {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "shard-0.db"), 2)
	require.NoError(t, err)
	f := &applierFixture{t: t, db: db, root: state.NewView(nil)}
	t.Cleanup(func() {
		db.StopApplier()
		db.Close()
	})
	f.pid = f.root.NextPID
	f.write(state.CreateTopicRecord{TopicID: uuid.New(), Name: "t", Partitions: 1, FirstPID: f.pid})
	return f
}

// write applies one entry of records, as a leader's loop does.
func (f *applierFixture) write(records ...state.Record) error {
	f.off++
	eff := state.ApplyEntry(f.root, records)
	return f.db.Write(context.Background(), f.root, f.off, uint32(f.off), state.ChainState{Epoch: 1, CRC: uint32(f.off), Known: true}, records, &eff)
}

// commitRecord is the commit of one batch of n records to the partition,
// in object key.
func (f *applierFixture) commitRecord(key string, n int64) state.CommitFileRecord {
	p := f.root.Part(f.pid)
	return state.CommitFileRecord{ObjectID: f.root.NextObjectID, Key: key, Size: 100, Uploader: 1, CommitTime: 1_000,
		Rows: []state.CommitRow{{PID: f.pid, BaseOffset: p.HW, LastOffset: p.HW + n - 1, BytePos: 0, ByteSize: 100, MaxTimestamp: 1_000}}}
}

// committedBatches counts the batch rows the read pool sees.
func (f *applierFixture) committedBatches() int {
	var n int
	require.NoError(f.t, f.db.Rdb.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM batches").Scan(&n))
	return n
}

// TestApplierGather: with the applier, a commit's rows are written behind
// Write, and the facts a later group reads still see them: a key whose
// insert is queued or committed is found (a retried commit is answered as
// the first), with its rows, and only an unknown key is gathered beside
// the applier. A Gather that took a queued object for unknown would let
// the same object be committed twice.
func TestApplierGather(t *testing.T) {
	ctx := context.Background()
	f := newApplierFixture(t)
	var committed []int64
	var mu sync.Mutex
	commit := func() {
		require.NoError(t, f.db.CommitTxnThen(ctx, func() {
			mu.Lock()
			committed = append(committed, f.off)
			mu.Unlock()
		}))
	}
	commit() // the topic
	f.db.StartApplier(func(err error) { t.Errorf("applier: %v", err) })

	require.NoError(t, f.write(f.commitRecord("wal/1", 5)))
	require.Nil(t, f.db.gatherBehind(ctx, &state.Needs{Keys: []string{"wal/1"}, CommitKeys: []string{"wal/1"}}), "a queued key is never gathered beside the applier")
	facts := f.db.Gather(ctx, f.root, &state.Needs{Keys: []string{"wal/1"}, CommitKeys: []string{"wal/1"}}, 0)
	require.NoError(t, facts.Err)
	require.Contains(t, facts.Objects, "wal/1")
	require.EqualValues(t, 1, facts.Objects["wal/1"].Live)
	require.Len(t, facts.Commits["wal/1"].Rows, 1)
	require.EqualValues(t, 4, facts.Commits["wal/1"].Rows[0].LastOffset)

	unknown := &state.Needs{Keys: []string{"wal/2"}, CommitKeys: []string{"wal/2"}}
	got := f.db.gatherBehind(ctx, unknown)
	require.NotNil(t, got, "an unknown key is gathered beside the applier")
	require.NoError(t, got.Err)
	require.Empty(t, got.Objects)

	require.Equal(t, 0, f.committedBatches(), "not committed yet")
	commit()
	require.NoError(t, f.db.Sync())
	require.Equal(t, 1, f.committedBatches())
	mu.Lock()
	require.Equal(t, []int64{1, 2}, committed, "each commit's then, once it ran")
	mu.Unlock()
	require.Nil(t, f.db.gatherBehind(ctx, &state.Needs{Keys: []string{"wal/1"}}), "a committed key is found, and gathered on the writer")
	require.NotNil(t, f.db.gatherBehind(ctx, unknown))

	// A rare record's statements run on the caller, after the queue: an
	// object row it makes (received ownership) is found, and until its
	// transaction commits no group is gathered beside the applier.
	require.NoError(t, f.write(state.OwnershipRecord{ObjectID: f.root.NextObjectID, Key: "wal/3", Owners: []int32{0, 1}, Time: 2_000}))
	require.Nil(t, f.db.gatherBehind(ctx, unknown), "a statement outside the queue may have changed any object")
	facts = f.db.Gather(ctx, f.root, &state.Needs{Keys: []string{"wal/3"}}, 0)
	require.NoError(t, facts.Err)
	require.Contains(t, facts.Objects, "wal/3")
	commit()
	require.NoError(t, f.db.Sync())
	require.NotNil(t, f.db.gatherBehind(ctx, unknown))
	require.NoError(t, f.db.StopApplier())
}

// TestApplierMergesCommits: a COMMIT with another queued behind it is
// merged into that one, and its then runs after that one committed, in
// order: under load, fewer and larger commits.
func TestApplierMergesCommits(t *testing.T) {
	ctx := context.Background()
	f := newApplierFixture(t)
	require.NoError(t, f.db.CommitTxn(ctx))
	a := newApplier(nil)
	ins, err := f.db.W.PrepareContext(ctx, "INSERT INTO meta (k, v) VALUES (?, 1)")
	require.NoError(t, err)
	defer ins.Close()
	var seen []string
	visible := func(k string) bool { // on the applier's goroutine too
		var n int
		err := f.db.Rdb.QueryRowContext(ctx, "SELECT COUNT(*) FROM meta WHERE k = ?", k).Scan(&n)
		return err == nil && n == 1
	}
	then := func(name string) func() {
		return func() { seen = append(seen, name+map[bool]string{true: "+y", false: "-y"}[visible("y")]) }
	}
	for _, j := range []applierJob{
		{q: "BEGIN IMMEDIATE"}, {st: ins, args: []any{"x"}}, {q: "COMMIT", then: then("first")},
		{q: "BEGIN IMMEDIATE"}, {st: ins, args: []any{"y"}}, {q: "COMMIT", then: then("second")},
	} {
		require.NoError(t, a.enqueue(j))
	}
	go a.run(f.db.W)
	f.db.ap = a
	require.NoError(t, f.db.StopApplier())
	require.Equal(t, []string{"first+y", "second+y"}, seen, "the first commit's then ran after the second committed")
	require.True(t, visible("x"))
}

// TestApplierFailure: a statement that fails behind the loop stops the
// queue: the error reaches onErr once, Sync and the calls after it return
// it, and nothing queued after it runs.
func TestApplierFailure(t *testing.T) {
	ctx := context.Background()
	f := newApplierFixture(t)
	require.NoError(t, f.db.CommitTxn(ctx))
	var reported []error
	f.db.StartApplier(func(err error) { reported = append(reported, err) })
	require.NoError(t, f.write(f.commitRecord("wal/0", 1)), "queued: its rows are in the transaction the failure breaks")
	f.db.deferNow = true
	_, err := f.db.exec(ctx, "INSERT INTO meta (k, v) VALUES (?, NULL)", "bad") // v is NOT NULL
	require.NoError(t, err, "queued")
	_, _ = f.db.exec(ctx, "INSERT INTO meta (k, v) VALUES (?, 1)", "after") // queued, or refused if the failure came first
	f.db.deferNow = false
	syncErr := f.db.Sync()
	require.Error(t, syncErr)
	require.ErrorContains(t, syncErr, "NOT NULL")
	require.Len(t, reported, 1)
	require.True(t, errors.Is(reported[0], syncErr) || reported[0].Error() == syncErr.Error())
	require.Error(t, f.write(f.commitRecord("wal/1", 1)), "later writes fail with it")
	require.Error(t, f.db.StopApplier())
	var n int
	require.NoError(t, f.db.W.QueryRowContext(ctx, "SELECT COUNT(*) FROM meta WHERE k = 'after'").Scan(&n))
	require.Zero(t, n, "nothing after the failure ran")

	// Nothing of the failed transaction commits, even through a commit
	// of the caller's after the applier stopped (MarkClean's, at a close):
	// the database stays as of its last commit, meta with it.
	require.NoError(t, f.db.MarkClean(ctx))
	require.Zero(t, f.committedBatches(), "the commit queued before the failure is not in")
	var applied int64
	require.NoError(t, f.db.Rdb.QueryRowContext(ctx, "SELECT v FROM meta WHERE k = ?", MetaApplied).Scan(&applied))
	require.EqualValues(t, 1, applied, "meta says the topic's entry, the last committed")
}
