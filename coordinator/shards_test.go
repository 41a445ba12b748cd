package coordinator

import (
	"fmt"
	"testing"
	"time"

	"github.com/diskless-go/diskless/coordinator/store"

	"github.com/diskless-go/diskless/coordinator/state"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal"
)

func shardsOf(t *testing.T, s *Coordinator, id uuid.UUID, partitions int32) []int {
	t.Helper()
	var out []int
	for p := range partitions {
		i, err := s.Shards().ShardOf(wal.TopicPartition{TopicID: id, Partition: p})
		require.NoError(t, err)
		out = append(out, i)
	}
	return out
}

// TestShardsAssignment: each partition goes to the shard with the fewest
// (ties to the lowest number) and keeps it across restarts; added shards
// take the partitions created from then on.
func TestShardsAssignment(t *testing.T) {
	ctx := t.Context()
	f := newShardsFixture(t, 4, nil, nil)
	a, err := f.s.CreatePartitions(ctx, CreatePartitionsRequest{Name: "a", Partitions: 3})
	require.NoError(t, err)
	b, err := f.s.CreatePartitions(ctx, CreatePartitionsRequest{Name: "b", Partitions: 6, Config: TopicConfig{RetentionBytes: 5000}})
	require.NoError(t, err)
	require.Equal(t, []int{0, 1, 2}, shardsOf(t, f.s, a, 3))
	require.Equal(t, []int{3, 0, 1, 2, 3, 0}, shardsOf(t, f.s, b, 6))

	// Each shard's own record says which partitions it serves.
	c0, err := f.s.local(0)
	require.NoError(t, err)
	topics, err := c0.Topics(ctx)
	require.NoError(t, err)
	require.Len(t, topics, 2)
	require.Equal(t, []int32{0}, topics[0].Assigned)
	require.Equal(t, []int32{1, 5}, topics[1].Assigned)
	require.Equal(t, int64(5000), topics[1].Config.RetentionBytes)
	_, err = c0.FindBatches(ctx, wal.TopicPartition{TopicID: b, Partition: 2}, 0, 1)
	require.Equal(t, kafkaerr.UnknownTopicOrPartition, code(err), "a shard does not serve another's partition")
	all, err := f.s.Topics(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, []string{all[0].Name, all[1].Name})
	require.Equal(t, int32(6), all[1].Partitions)
	require.Equal(t, int64(5000), all[1].Config.RetentionBytes)

	_, err = f.s.CreatePartitions(ctx, CreatePartitionsRequest{Name: "a", Partitions: 1})
	require.Equal(t, kafkaerr.TopicAlreadyExists, code(err))
	_, err = f.s.CreatePartitions(ctx, CreatePartitionsRequest{Name: "bad/name", Partitions: 2})
	require.Equal(t, kafkaerr.InvalidTopicException, code(err))
	_, err = f.s.CreatePartitions(ctx, CreatePartitionsRequest{Name: "z", Partitions: 0})
	require.Equal(t, kafkaerr.InvalidPartitions, code(err))

	// Restarts keep the assignment: it is in the shards' logs.
	f.restart()
	require.Equal(t, []int{0, 1, 2}, shardsOf(t, f.s, a, 3))
	require.Equal(t, []int{3, 0, 1, 2, 3, 0}, shardsOf(t, f.s, b, 6))

	// Two more shards: they take the next partitions until they are even,
	// and the old partitions stay where they are.
	require.NoError(t, f.s.Close())
	f.logs = append(f.logs, newTestLog(), newTestLog())
	f.open()
	require.Equal(t, 6, f.s.Shards().NumShards())
	c, err := f.s.CreatePartitions(ctx, CreatePartitionsRequest{Name: "c", Partitions: 5})
	require.NoError(t, err)
	require.Equal(t, []int{4, 5, 4, 5, 1}, shardsOf(t, f.s, c, 5))
	require.Equal(t, []int{3, 0, 1, 2, 3, 0}, shardsOf(t, f.s, b, 6))
	res, err := f.s.CommitFile(ctx, CommitFileRequest{ObjectKey: "wal/x", Coordinates: coordsFor(
		wal.TopicPartition{TopicID: b, Partition: 4}, wal.TopicPartition{TopicID: c, Partition: 0})})
	require.NoError(t, err)
	for _, r := range res {
		require.NoError(t, r.Err)
	}

	// Deleting a topic frees its partitions on every shard; the name can
	// be used again.
	require.NoError(t, f.s.DeleteTopic(ctx, b))
	_, err = f.s.Shards().ShardOf(wal.TopicPartition{TopicID: b, Partition: 0})
	require.Equal(t, kafkaerr.UnknownTopicOrPartition, code(err))
	require.Equal(t, kafkaerr.UnknownTopicID, code(f.s.DeleteTopic(ctx, b)))
	for i := range 6 {
		ci, err := f.s.local(i)
		require.NoError(t, err)
		topics, err := ci.Topics(ctx)
		require.NoError(t, err)
		for _, tp := range topics {
			require.NotEqual(t, "b", tp.Name)
		}
	}
	_, err = f.s.CreatePartitions(ctx, CreatePartitionsRequest{Name: "b", Partitions: 2})
	require.NoError(t, err)
}

// TestShardsCreateUndo: when a shard cannot create its part of a topic,
// the others' parts are deleted again and the name stays free.
func TestShardsCreateUndo(t *testing.T) {
	ctx := t.Context()
	f := newShardsFixture(t, 3, nil, nil)
	f.s.mu.Lock()
	down := f.s.mu.coords[2]
	f.s.mu.coords[2] = nil
	f.s.mu.Unlock()
	_, err := f.s.CreatePartitions(ctx, CreatePartitionsRequest{Name: "t", Partitions: 3})
	require.Equal(t, kafkaerr.NotLeaderOrFollower, code(err))
	topics, err := f.s.Topics(ctx)
	require.NoError(t, err)
	require.Empty(t, topics)
	for i := range 2 {
		c, err := f.s.local(i)
		require.NoError(t, err)
		topics, err := c.Topics(ctx)
		require.NoError(t, err)
		require.Empty(t, topics, "shard %d", i)
	}
	f.s.mu.Lock()
	f.s.mu.coords[2] = down
	f.s.mu.Unlock()
	_, err = f.s.CreatePartitions(ctx, CreatePartitionsRequest{Name: "t", Partitions: 3})
	require.NoError(t, err)
}

// TestShardsCommitFile: an object spanning shards is split, committed to
// each with one owners list, and its results come back in coordinate
// order; the commit calls per object are counted.
func TestShardsCommitFile(t *testing.T) {
	ctx := t.Context()
	f := newShardsFixture(t, 3, memblob.OpenBucket(nil), nil)
	id, err := f.s.CreatePartitions(ctx, CreatePartitionsRequest{Name: "t", Partitions: 6})
	require.NoError(t, err)
	tp := func(p int32) wal.TopicPartition { return wal.TopicPartition{TopicID: id, Partition: p} }
	unknown := wal.TopicPartition{TopicID: uuid.New()}
	key := f.upload(f.clock.Now(), 1000)
	coords := coordsFor(tp(0), tp(1), tp(0), tp(4), unknown, tp(2), tp(0))
	res, err := f.s.CommitFile(ctx, CommitFileRequest{ObjectKey: key, Size: 1000, Uploader: 7, Coordinates: coords})
	require.NoError(t, err)
	require.Len(t, res, len(coords))
	for i, want := range []int64{0, 0, 1, 0, -1, 0, 2} {
		require.Equal(t, want, res[i].BaseOffset, "coordinate %d", i)
	}
	require.Equal(t, kafkaerr.UnknownTopicOrPartition, code(res[4].Err))
	found, err := f.s.FindBatches(ctx, tp(0), 0, 1<<20)
	require.NoError(t, err)
	require.Equal(t, int64(3), found.HighWatermark)
	require.Len(t, found.Batches, 3, "contiguous in offsets, not in the object: a row each")

	var owners []int32
	for i := range 3 {
		c, err := f.s.local(i)
		require.NoError(t, err)
		ok, live, o, received := shardObject(t, c, key)
		require.True(t, ok, "shard %d", i)
		require.Positive(t, live)
		require.False(t, received)
		if owners == nil {
			owners = o
		}
		require.Equal(t, owners, o, "every shard records the same owners list")
	}
	require.ElementsMatch(t, []int32{0, 1, 2}, owners)

	// One shard only: no owners list.
	key2 := f.upload(f.clock.Now(), 500)
	_, err = f.s.CommitFile(ctx, CommitFileRequest{ObjectKey: key2, Coordinates: coordsFor(tp(1), tp(4))})
	require.NoError(t, err)
	c1, err := f.s.local(1)
	require.NoError(t, err)
	ok, _, o, _ := shardObject(t, c1, key2)
	require.True(t, ok)
	require.Nil(t, o)

	// No partition served: nothing committed.
	res, err = f.s.CommitFile(ctx, CommitFileRequest{ObjectKey: f.upload(f.clock.Now(), 10), Coordinates: coordsFor(unknown)})
	require.NoError(t, err)
	require.Equal(t, kafkaerr.UnknownTopicOrPartition, code(res[0].Err))

	// A shard that cannot answer fails its coordinates only.
	f.s.mu.Lock()
	down := f.s.mu.coords[2]
	f.s.mu.coords[2] = nil
	f.s.mu.Unlock()
	res, err = f.s.CommitFile(ctx, CommitFileRequest{ObjectKey: f.upload(f.clock.Now(), 10), Coordinates: coordsFor(tp(0), tp(2), tp(1))})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.Equal(t, kafkaerr.NotLeaderOrFollower, code(res[1].Err))
	require.NoError(t, res[2].Err)
	_, err = f.s.CommitFile(ctx, CommitFileRequest{ObjectKey: f.upload(f.clock.Now(), 10), Coordinates: coordsFor(tp(2), tp(5))})
	require.Equal(t, kafkaerr.NotLeaderOrFollower, code(err), "every shard of the object failed")
	f.s.mu.Lock()
	f.s.mu.coords[2] = down
	f.s.mu.Unlock()

	st := f.s.Stats()
	require.Equal(t, int64(4), st.Objects)
	require.Equal(t, int64(3+1+3+1), st.ShardCommits)
	require.Equal(t, []int64{0, 2, 0, 2}, st.CommitCalls)
	require.Len(t, st.Shards, 3)
	require.Equal(t, int64(3), st.Shards[1].Commits)
}

// TestCommitDeadline: a coordinator with a CommitDeadline refuses an
// object named longer ago, with a retriable error; other keys have no time
// and are not checked.
func TestCommitDeadline(t *testing.T) {
	ctx := t.Context()
	clock := newTestClock()
	c := openTest(t, newTestLog(), "", &leaderOptions{Clock: clock, Prefix: "p/", CommitDeadline: time.Minute})
	id := mustCreate(t, c, "t", 1, TopicConfig{})
	commit := func(key string) error {
		_, err := c.CommitFile(ctx, CommitFileRequest{ObjectKey: key, Coordinates: coordsFor(wal.TopicPartition{TopicID: id})})
		return err
	}
	require.NoError(t, commit(wal.NewObjectKey("p/", clock.Now().Add(-time.Minute))))
	err := commit(wal.NewObjectKey("p/", clock.Now().Add(-time.Minute-time.Millisecond)))
	require.Equal(t, kafkaerr.RequestTimedOut, code(err))
	require.True(t, kafkaerr.RequestTimedOut.Retriable())
	require.NoError(t, commit(wal.NewObjectKey("q/", clock.Now().Add(-time.Hour))), "not a WAL key under the prefix")
	require.NoError(t, commit("wal/plain"))
	_, err = openLeader(ctx, newTestLog(), &leaderOptions{CommitDeadline: -1})
	require.ErrorIs(t, err, ErrInvalidOptions)
}

// TestReceiveOwnership: receiving is logged once; a shard that holds no
// batch declines; a shard that never had the object makes a row, and then
// refuses its commit.
func TestReceiveOwnership(t *testing.T) {
	ctx := t.Context()
	log := newTestLog()
	dir := t.TempDir()
	clock := newTestClock()
	opts := &leaderOptions{Shard: 1, Clock: clock}
	c := openTest(t, log, dir, opts)
	id := mustCreate(t, c, "t", 2, TopicConfig{})
	tp := wal.TopicPartition{TopicID: id}
	commit := func(key string, owners []int) error {
		_, err := c.CommitFile(ctx, CommitFileRequest{ObjectKey: key, Owners: owners, Coordinates: coordsFor(tp)})
		return err
	}
	require.NoError(t, commit("wal/a", []int{0, 1, 2}))
	receive := func(key string, owners ...int) OwnershipResult {
		res, err := c.ReceiveOwnership(ctx, OwnershipRequest{ObjectKey: key, Owners: owners, From: 0})
		require.NoError(t, err)
		return res
	}
	entries := c.Stats().Entries
	require.True(t, receive("wal/a", 0, 1, 2).Accepted, "it holds a batch")
	require.Equal(t, entries+1, c.Stats().Entries)
	require.Equal(t, int64(1), c.Stats().Received)
	require.True(t, receive("wal/a", 0, 1, 2).Accepted)
	require.Equal(t, entries+1, c.Stats().Entries, "receiving twice logs once")
	_, _, _, received := shardObject(t, c, "wal/a")
	require.True(t, received)

	// The first owner owns it without receiving it.
	require.NoError(t, commit("wal/b", []int{1, 0}))
	require.True(t, receive("wal/b", 1, 0).Accepted)
	require.Equal(t, entries+2, c.Stats().Entries, "one commit, no receipt")

	// No batch left: decline, and say since when.
	require.NoError(t, commit("wal/c", []int{2, 1}))
	clock.Advance(time.Second)
	trimmedAt := clock.Now()
	_, err := c.DeleteRecords(ctx, tp, -1)
	require.NoError(t, err)
	clock.Advance(time.Second)
	res := receive("wal/c", 2, 1)
	require.False(t, res.Accepted)
	require.Equal(t, trimmedAt.UnixMilli(), res.DeadSince.UnixMilli())

	// Never had it: a row with no batch, received; its commit is refused.
	res, err = c.ReceiveOwnership(ctx, OwnershipRequest{ObjectKey: "wal/d", Owners: []int{0, 1}, DeadSince: clock.Now().Add(time.Hour)})
	require.NoError(t, err)
	require.True(t, res.Accepted)
	found, live, owners, received := shardObject(t, c, "wal/d")
	require.True(t, found)
	require.Zero(t, live)
	require.Equal(t, []int32{0, 1}, owners)
	require.True(t, received)
	require.Equal(t, kafkaerr.KafkaStorageError, code(commit("wal/d", []int{0, 1})), "refused, retriably")
	known, err := c.KnownKeys(ctx, []string{"wal/a", "wal/d", "wal/zz"})
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"wal/a": true, "wal/d": true}, known)
	require.Equal(t, kafkaerr.InvalidRequest, code(func() error {
		_, err := c.ReceiveOwnership(ctx, OwnershipRequest{ObjectKey: "wal/e", Owners: []int{0, 2}})
		return err
	}()), "owners without this shard")
	require.Equal(t, kafkaerr.InvalidRequest, code(commit("wal/f", []int{1, 1})))

	// All of it is in the log: a rebuild has the same rows.
	before := checksum(t, c)
	require.NoError(t, c.Close())
	require.NoError(t, removeIfExists(dir+"/shard-1.db"))
	c = openTest(t, log, dir, opts)
	require.Equal(t, before, checksum(t, c))
	require.True(t, receive("wal/d", 0, 1).Accepted)
}

// TestSchemaUpgrade: a database written before the columns of shards
// and the remote segments existed gets them, with the values that mean
// what old records meant (the diskless start is the log start).
func TestSchemaUpgrade(t *testing.T) {
	ctx := t.Context()
	log := newTestLog()
	dir := t.TempDir()
	c := openTest(t, log, dir, nil)
	id := mustCreate(t, c, "t", 1, TopicConfig{})
	tp := wal.TopicPartition{TopicID: id}
	_, err := c.CommitFile(ctx, CommitFileRequest{ObjectKey: "wal/a", Coordinates: coordsFor(tp, tp)})
	require.NoError(t, err)
	_, err = c.DeleteRecords(ctx, tp, 1)
	require.NoError(t, err)
	before := tableRows(t, c)
	require.NoError(t, c.Close())
	st, err := store.Open(ctx, dir+"/shard-0.db", 1)
	require.NoError(t, err)
	for _, col := range store.AddedColumns {
		_, err := st.W.ExecContext(ctx, "ALTER TABLE "+col.Table+" DROP COLUMN "+col.Column)
		require.NoError(t, err)
	}
	_, err = st.W.ExecContext(ctx, "DROP TABLE remote_segments")
	require.NoError(t, err)
	require.NoError(t, st.MarkClean(ctx))
	require.NoError(t, st.Close())
	c = openTest(t, log, dir, nil)
	require.Equal(t, before, tableRows(t, c))
	res, err := c.FindBatches(ctx, tp, 1, 1<<20)
	require.NoError(t, err)
	require.Equal(t, int64(1), res.DisklessStart)
	dead, err := c.DeadObjects(ctx, 10)
	require.NoError(t, err)
	require.Empty(t, dead)
}

// tableRows returns the rows of the tables that records fill (not meta,
// whose offsets a reopening moves).
func tableRows(t *testing.T, c *leader) []string {
	t.Helper()
	var out []string
	for _, table := range []string{"topics", "partitions", "objects", "batches", "remote_segments"} {
		rows, err := c.store.Rdb.Query("SELECT * FROM " + table)
		require.NoError(t, err)
		cols, err := rows.Columns()
		require.NoError(t, err)
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			require.NoError(t, rows.Scan(ptrs...))
			out = append(out, fmt.Sprintf("%s %v %v", table, cols, vals))
		}
		require.NoError(t, rows.Close())
	}
	return out
}

// TestChecksSeePending: KnownKeys and ReceiveOwnership are
// decided against the speculative view: a commit sent to the log and not
// yet durable counts as known (the orphan collector must not delete its
// object), and a receipt not yet durable is not logged twice.
func TestChecksSeePending(t *testing.T) {
	ctx := t.Context()
	root := state.NewView(nil)
	spec := state.NewView(root)
	now := time.UnixMilli(1_764_500_000_000)
	key := wal.NewObjectKey("p/", now.Add(-time.Hour))
	newer := wal.NewObjectKey("p/", now)
	spec.Apply(state.CommitFileRecord{ObjectID: 0, Key: newer, CommitTime: now.UnixMilli(), Owners: []int32{0, 1}})
	spec.Apply(state.CommitFileRecord{ObjectID: 1, Key: key, CommitTime: now.UnixMilli(), Owners: []int32{0, 1}})
	g := &state.Group{Shard: 1, Prefix: "p/", Spec: spec, Now: now.UnixMilli(), Facts: &state.Facts{}}

	known := &state.KnownKeysOp{BaseOp: state.NewBaseOp(ctx), Keys: []string{key, "p/wal/other"}}
	known.Check(g)
	require.False(t, known.Finished)
	require.Equal(t, map[string]bool{key: true}, known.Known)

	recv := &state.ReceiveOp{BaseOp: state.NewBaseOp(ctx), Req: OwnershipRequest{ObjectKey: key, Owners: []int{0, 1}}}
	recv.Check(g)
	require.True(t, recv.Res.Accepted, "a commit on its way may hold batches")
	require.Len(t, g.Records, 1)
	recv = &state.ReceiveOp{BaseOp: state.NewBaseOp(ctx), Req: OwnershipRequest{ObjectKey: key, Owners: []int{0, 1}}}
	recv.Check(g)
	require.True(t, recv.Res.Accepted)
	require.Len(t, g.Records, 1, "received once")

	commit := &state.CommitOp{BaseOp: state.NewBaseOp(ctx), Req: CommitFileRequest{ObjectKey: key}}
	commit.Check(g)
	require.False(t, commit.Finished, "a commit of an object committed lately is answered as the first was")
	require.Len(t, g.Records, 1, "and logs nothing")

	// One the store holds without rows (every batch was a duplicate, or
	// its rows are gone) is answered as checking its batches now says,
	// and logs nothing; one only received from another shard is refused.
	old := wal.NewObjectKey("p/", now.Add(-2*time.Hour))
	g.Facts.Objects = map[string]state.ObjectState{old: {ID: 7}}
	commit = &state.CommitOp{BaseOp: state.NewBaseOp(ctx), Req: CommitFileRequest{ObjectKey: old}}
	commit.Check(g)
	require.False(t, commit.Finished)
	require.Len(t, g.Records, 1, "logs nothing")
	g.Facts.Objects = map[string]state.ObjectState{old: {ID: 7, Received: true}}
	commit = &state.CommitOp{BaseOp: state.NewBaseOp(ctx), Req: CommitFileRequest{ObjectKey: old}}
	commit.Check(g)
	require.Equal(t, kafkaerr.KafkaStorageError, code(<-commit.Done), "one only received is refused, retriably: its batches were not appended")

	// One received on the way to the log (no row yet) is refused so too.
	stranger := wal.NewObjectKey("p/", now.Add(-time.Minute))
	recv = &state.ReceiveOp{BaseOp: state.NewBaseOp(ctx), Req: OwnershipRequest{ObjectKey: stranger, Owners: []int{0, 1}}}
	recv.Check(g)
	require.True(t, recv.Res.Accepted)
	commit = &state.CommitOp{BaseOp: state.NewBaseOp(ctx), Req: CommitFileRequest{ObjectKey: stranger}}
	commit.Check(g)
	require.Equal(t, kafkaerr.KafkaStorageError, code(<-commit.Done), "a pending receipt refuses the commit retriably")
}

// TestShardsProducerIDRanges: each shard gives producer IDs from a range
// of its own (shard s from s<<48), so that the transactional producers of
// the shards and the idempotent ones (shard 0's) never share an ID: an ID
// shared would make a partition take one producer's batches for the
// other's duplicates.
func TestShardsProducerIDRanges(t *testing.T) {
	ctx := t.Context()
	f := newShardsFixture(t, 3, nil, nil)
	seen := map[int64]string{}
	add := func(pid int64, who string) {
		t.Helper()
		prev, dup := seen[pid]
		require.False(t, dup, "producer ID %d given to %s and to %s", pid, prev, who)
		seen[pid] = who
	}
	for i := range 3 {
		pid, _, err := f.s.InitProducerID(ctx)
		require.NoError(t, err)
		add(pid, fmt.Sprintf("idempotent producer %d", i))
	}
	perShard := map[int]int{}
	for n := 0; len(perShard) < 3 || perShard[1] < 2 || perShard[2] < 2; n++ {
		id := fmt.Sprintf("txn-%d", n)
		shard := ShardOfTxn(id, 3)
		pid, _, err := f.s.InitTxnProducer(ctx, id, 60_000, -1, -1)
		require.NoError(t, err)
		require.Equal(t, int64(shard), pid>>48, "%s, of shard %d, got producer ID %d", id, shard, pid)
		add(pid, id)
		perShard[shard]++
	}
}
