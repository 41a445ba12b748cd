package coordinator

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kafkaerr"
)

// TestGroupOffsets: commits replace a partition's offset, fetches see
// every commit answered, deletes remove some or all, bad commits change
// nothing and carry Kafka's codes; the offsets survive a restart and a
// rebuild from the log, and a topic's deletion takes its offsets.
func TestGroupOffsets(t *testing.T) {
	ctx := context.Background()
	log := newTestLog()
	dir := t.TempDir()
	c := openTest(t, log, dir, nil)
	orders := mustCreate(t, c, "orders", 4, TopicConfig{})
	other := uuid.New() // a topic of another shard

	fetch := func(group string, parts []GroupPartition) []GroupOffset {
		t.Helper()
		got, err := c.FetchOffsets(ctx, group, parts)
		require.NoError(t, err)
		for i := range got {
			require.Positive(t, got[i].CommitTime)
			got[i].CommitTime = 0
		}
		return got
	}
	require.Empty(t, fetch("readers", nil))
	require.NotNil(t, fetch("readers", nil), "an empty list, not nil")

	require.NoError(t, c.CommitOffsets(ctx, "readers", 0, []GroupOffset{
		{Topic: "orders", TopicID: orders, Partition: 1, Offset: 10, LeaderEpoch: -1, Metadata: "a"},
		{Topic: "orders", TopicID: orders, Partition: 0, Offset: 5, LeaderEpoch: 3},
		{Topic: "elsewhere", TopicID: other, Partition: 7, Offset: 70, LeaderEpoch: -1},
	}))
	require.NoError(t, c.CommitOffsets(ctx, "readers", 0, []GroupOffset{{Topic: "orders", TopicID: orders, Partition: 1, Offset: 11, LeaderEpoch: 2, Metadata: "b"}}))
	require.NoError(t, c.CommitOffsets(ctx, "writers", 0, []GroupOffset{{Topic: "orders", TopicID: orders, Partition: 2, Offset: 1, LeaderEpoch: -1}}))
	want := []GroupOffset{
		{Topic: "elsewhere", TopicID: other, Partition: 7, Offset: 70, LeaderEpoch: -1},
		{Topic: "orders", TopicID: orders, Partition: 0, Offset: 5, LeaderEpoch: 3},
		{Topic: "orders", TopicID: orders, Partition: 1, Offset: 11, LeaderEpoch: 2, Metadata: "b"},
	}
	require.Equal(t, want, fetch("readers", nil))
	require.Equal(t, want[2:], fetch("readers", []GroupPartition{{Topic: "orders", Partition: 1}, {Topic: "orders", Partition: 3}}), "a partition without an offset is left out")
	require.Empty(t, fetch("readers", []GroupPartition{}))
	groups, err := c.OffsetGroups(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"readers", "writers"}, groups)

	// Bad commits: nothing lands.
	entries := c.Stats().Entries
	for _, bad := range []struct {
		group   string
		offsets []GroupOffset
		code    kafkaerr.Code
	}{
		{"", []GroupOffset{{Topic: "orders", Partition: 0}}, kafkaerr.InvalidGroupID},
		{"readers", []GroupOffset{{Topic: "orders", Partition: 0, Offset: 99}, {Topic: "bad/name", Partition: 0}}, kafkaerr.InvalidTopicException},
		{"readers", []GroupOffset{{Topic: "orders", Partition: 0, Offset: 99}, {Topic: "orders", Partition: -1}}, kafkaerr.UnknownTopicOrPartition},
		{"readers", []GroupOffset{{Topic: "orders", Partition: 0, Offset: 99, Metadata: strings.Repeat("m", MaxGroupOffsetMetadata+1)}}, kafkaerr.OffsetMetadataTooLarge},
		{"readers", []GroupOffset{{Topic: "orders", Partition: 0, Offset: 99}, {Topic: "orders", Partition: 0, Offset: 98}}, kafkaerr.InvalidRequest},
	} {
		err := c.CommitOffsets(ctx, bad.group, 0, bad.offsets)
		require.Equal(t, bad.code, code(err), "%v", err)
	}
	_, err = c.FetchOffsets(ctx, "", nil)
	require.Equal(t, kafkaerr.InvalidGroupID, code(err))
	require.Equal(t, entries, c.Stats().Entries, "no entry for a refused commit")
	require.Equal(t, want, fetch("readers", nil))

	// Restart, then rebuild from the log: the same offsets.
	require.NoError(t, c.Close())
	c = openTest(t, log, dir, nil)
	require.Equal(t, want, fetch("readers", nil))
	require.NoError(t, c.Close())
	for _, f := range []string{"shard-0.db", "shard-0.db-wal", "shard-0.db-shm"} {
		require.NoError(t, removeIfExists(filepath.Join(dir, f)))
	}
	c = openTest(t, log, dir, nil)
	require.Equal(t, want, fetch("readers", nil))

	// Deletes: one partition, then the topic (its offsets go with it in
	// this shard), then the whole group.
	require.NoError(t, c.DeleteOffsets(ctx, "readers", 0, []GroupPartition{{Topic: "orders", Partition: 0}, {Topic: "orders", Partition: 3}}))
	require.Equal(t, []GroupOffset{want[0], want[2]}, fetch("readers", nil))
	require.NoError(t, c.DeleteTopic(ctx, orders))
	require.Equal(t, want[:1], fetch("readers", nil))
	require.Empty(t, fetch("writers", nil))
	require.NoError(t, c.DeleteOffsets(ctx, "readers", 0, nil))
	require.Empty(t, fetch("readers", nil))
	groups, err = c.OffsetGroups(ctx)
	require.NoError(t, err)
	require.Empty(t, groups)
}

// TestGroupOffsetsShards: each group's offsets live in its shard,
// ShardOfGroup, and no other; OffsetGroups asks every shard.
func TestGroupOffsetsShards(t *testing.T) {
	ctx := context.Background()
	f := newShardsFixture(t, 4, nil, nil)
	var names []string
	used := map[int]bool{}
	for i := range 16 {
		g := fmt.Sprintf("group-%02d", i)
		names = append(names, g)
		used[ShardOfGroup(g, 4)] = true
		require.NoError(t, f.s.CommitOffsets(ctx, g, 0, []GroupOffset{{Topic: "t", Partition: int32(i), Offset: int64(i), LeaderEpoch: -1}}))
	}
	require.Len(t, used, 4, "16 groups over 4 shards")
	for _, g := range names {
		for i := range 4 {
			c, err := f.s.local(i)
			require.NoError(t, err)
			got, err := c.FetchOffsets(ctx, g, nil)
			require.NoError(t, err)
			if i == ShardOfGroup(g, 4) {
				require.Len(t, got, 1, "%s in shard %d", g, i)
			} else {
				require.Empty(t, got, "%s in shard %d", g, i)
			}
		}
	}
	groups, err := f.s.OffsetGroups(ctx)
	require.NoError(t, err)
	require.Equal(t, names, groups)
	f.restart()
	got, err := f.s.FetchOffsets(ctx, "group-05", nil)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, int64(5), got[0].Offset)
}

// TestShardOfGroup pins the hash: it is part of the format.
func TestShardOfGroup(t *testing.T) {
	require.Equal(t, 0, ShardOfGroup("any", 1))
	got := []int{ShardOfGroup("readers", 8), ShardOfGroup("writers", 8), ShardOfGroup("", 8), ShardOfGroup("group-05", 16)}
	require.Equal(t, []int{fnvMod("readers", 8), fnvMod("writers", 8), fnvMod("", 8), fnvMod("group-05", 16)}, got)
}

// fnvMod is FNV-1a 32 written out, modulo n.
func fnvMod(s string, n uint32) int {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return int(h % n)
}

// TestGroupClaims: each claim of a group returns a higher epoch; commits
// and deletes under an older claim are refused with NOT_COORDINATOR and
// change nothing, those under the latest (or none) land; the epochs
// survive a restart, a rebuild from the log and the deletion of the
// group's offsets, so no epoch is handed out twice.
func TestGroupClaims(t *testing.T) {
	ctx := context.Background()
	log := newTestLog()
	dir := t.TempDir()
	c := openTest(t, log, dir, nil)
	orders := mustCreate(t, c, "orders", 2, TopicConfig{})
	at := func(off int64) []GroupOffset {
		return []GroupOffset{{Topic: "orders", TopicID: orders, Partition: 0, Offset: off, LeaderEpoch: -1}}
	}
	offsetOf := func() int64 {
		t.Helper()
		got, err := c.FetchOffsets(ctx, "readers", nil)
		require.NoError(t, err)
		require.Len(t, got, 1)
		return got[0].Offset
	}

	_, err := c.ClaimGroup(ctx, "")
	require.Equal(t, kafkaerr.InvalidGroupID, code(err))
	first, err := c.ClaimGroup(ctx, "readers")
	require.NoError(t, err)
	require.Equal(t, int64(1), first)
	other, err := c.ClaimGroup(ctx, "writers")
	require.NoError(t, err)
	require.Equal(t, int64(1), other, "epochs are per group")
	require.NoError(t, c.CommitOffsets(ctx, "readers", first, at(10)))

	second, err := c.ClaimGroup(ctx, "readers")
	require.NoError(t, err)
	require.Equal(t, int64(2), second)
	entries := c.Stats().Entries
	err = c.CommitOffsets(ctx, "readers", first, at(5))
	require.Equal(t, kafkaerr.NotCoordinator, code(err), "%v", err)
	err = c.DeleteOffsets(ctx, "readers", first, nil)
	require.Equal(t, kafkaerr.NotCoordinator, code(err), "%v", err)
	require.Equal(t, entries, c.Stats().Entries, "no entry for a refused commit or delete")
	require.Equal(t, int64(10), offsetOf())
	require.NoError(t, c.CommitOffsets(ctx, "readers", second, at(20)))
	require.NoError(t, c.CommitOffsets(ctx, "readers", 0, at(21)), "no claim: not fenced")
	require.Equal(t, int64(21), offsetOf())

	// Pipelined: a claim and a commit under the old one in flight
	// together; the commit lands only if it was decided first.
	third := make(chan int64, 1)
	go func() {
		e, err := c.ClaimGroup(ctx, "readers")
		assert.NoError(t, err)
		third <- e
	}()
	err = c.CommitOffsets(ctx, "readers", second, at(30))
	require.Equal(t, int64(3), <-third)
	if err != nil {
		require.Equal(t, kafkaerr.NotCoordinator, code(err))
		require.Equal(t, int64(21), offsetOf())
	} else {
		require.Equal(t, int64(30), offsetOf())
	}
	require.Equal(t, kafkaerr.NotCoordinator, code(c.CommitOffsets(ctx, "readers", second, at(31))))

	// Restart, then rebuild from the log: the epochs are kept.
	require.NoError(t, c.Close())
	c = openTest(t, log, dir, nil)
	require.Equal(t, kafkaerr.NotCoordinator, code(c.CommitOffsets(ctx, "readers", second, at(32))))
	require.NoError(t, c.Close())
	for _, f := range []string{"shard-0.db", "shard-0.db-wal", "shard-0.db-shm"} {
		require.NoError(t, removeIfExists(filepath.Join(dir, f)))
	}
	c = openTest(t, log, dir, nil)
	require.Equal(t, kafkaerr.NotCoordinator, code(c.CommitOffsets(ctx, "readers", second, at(33))))
	require.NoError(t, c.CommitOffsets(ctx, "readers", 3, at(34)))

	// The group's offsets deleted: its epochs go on.
	require.NoError(t, c.DeleteOffsets(ctx, "readers", 3, nil))
	fourth, err := c.ClaimGroup(ctx, "readers")
	require.NoError(t, err)
	require.Equal(t, int64(4), fourth)
}

// TestGroupMetadata: a group's metadata is stored and read back by
// generation; a store of an older generation changes nothing, an empty
// one deletes it; a store under a superseded claim is NOT_COORDINATOR;
// the metadata survives a restart and a rebuild from the log.
func TestGroupMetadata(t *testing.T) {
	ctx := context.Background()
	log := newTestLog()
	dir := t.TempDir()
	c := openTest(t, log, dir, nil)
	get := func() GroupMetadata {
		t.Helper()
		m, err := c.GroupMetadata(ctx, "readers")
		require.NoError(t, err)
		return m
	}
	require.Equal(t, GroupMetadata{}, get())
	_, err := c.GroupMetadata(ctx, "")
	require.Equal(t, kafkaerr.InvalidGroupID, code(err))

	require.NoError(t, c.PutGroupMetadata(ctx, "readers", 0, 2, []byte("gen 2")))
	require.Equal(t, GroupMetadata{Generation: 2, Value: []byte("gen 2")}, get())
	require.NoError(t, c.PutGroupMetadata(ctx, "readers", 0, 1, []byte("gen 1")), "a late store of an older generation")
	require.Equal(t, GroupMetadata{Generation: 2, Value: []byte("gen 2")}, get(), "is ignored")
	require.NoError(t, c.PutGroupMetadata(ctx, "readers", 0, 3, []byte("gen 3")))
	require.Equal(t, GroupMetadata{Generation: 3, Value: []byte("gen 3")}, get())

	claim, err := c.ClaimGroup(ctx, "readers")
	require.NoError(t, err)
	_, err = c.ClaimGroup(ctx, "readers")
	require.NoError(t, err)
	require.Equal(t, kafkaerr.NotCoordinator, code(c.PutGroupMetadata(ctx, "readers", claim, 4, []byte("gen 4"))))
	require.Equal(t, kafkaerr.RecordListTooLarge, code(c.PutGroupMetadata(ctx, "readers", 0, 4, make([]byte, MaxGroupMetadata+1))))
	require.Equal(t, GroupMetadata{Generation: 3, Value: []byte("gen 3")}, get())

	require.NoError(t, c.Close())
	c = openTest(t, log, dir, nil)
	require.Equal(t, GroupMetadata{Generation: 3, Value: []byte("gen 3")}, get())
	require.NoError(t, c.Close())
	for _, f := range []string{"shard-0.db", "shard-0.db-wal", "shard-0.db-shm"} {
		require.NoError(t, removeIfExists(filepath.Join(dir, f)))
	}
	c = openTest(t, log, dir, nil)
	require.Equal(t, GroupMetadata{Generation: 3, Value: []byte("gen 3")}, get())

	require.NoError(t, c.PutGroupMetadata(ctx, "readers", 0, 0, nil))
	require.Equal(t, GroupMetadata{}, get(), "deleted, whatever the generation")
}
