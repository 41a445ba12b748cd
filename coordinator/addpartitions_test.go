package coordinator

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal"
)

// TestAddPartitions: partitions added to a topic take PIDs no other
// topic has (one was created between), take commits and serve them as
// the first ones do, survive a restart and a rebuild from the log, and go
// with the topic's deletion; an addition to fewer partitions, or to an
// unknown topic, is refused with Kafka's codes and changes nothing.
func TestAddPartitions(t *testing.T) {
	ctx := context.Background()
	log := newTestLog()
	dir := t.TempDir()
	c := openTest(t, log, dir, nil)
	orders := mustCreate(t, c, "orders", 2, TopicConfig{})
	other := mustCreate(t, c, "other", 3, TopicConfig{})

	entries := c.Stats().Entries
	require.Equal(t, kafkaerr.InvalidPartitions, code(c.AddPartitions(ctx, AddPartitionsRequest{TopicID: orders, Partitions: 2})))
	require.Equal(t, kafkaerr.InvalidPartitions, code(c.AddPartitions(ctx, AddPartitionsRequest{TopicID: orders, Partitions: 1})))
	require.Equal(t, kafkaerr.UnknownTopicOrPartition, code(c.AddPartitions(ctx, AddPartitionsRequest{TopicID: wal.TopicPartition{}.TopicID, Partitions: 4})))
	require.Equal(t, entries, c.Stats().Entries, "no entry for a refused addition")

	require.NoError(t, c.AddPartitions(ctx, AddPartitionsRequest{TopicID: orders, Partitions: 5}))
	info, ok := c.pub.Topic(orders)
	require.True(t, ok)
	require.Equal(t, int32(5), info.Partitions)
	require.Equal(t, int32(5), info.Config.Partitions)
	require.Nil(t, info.Assigned, "this shard still serves all")
	require.NoError(t, c.AddPartitions(ctx, AddPartitionsRequest{TopicID: orders, Partitions: 6}), "twice")

	// A commit over old and new partitions of both topics.
	var coords []wal.Coordinate
	for i, tp := range []wal.TopicPartition{{TopicID: orders, Partition: 0}, {TopicID: orders, Partition: 4}, {TopicID: orders, Partition: 5}, {TopicID: other, Partition: 2}} {
		coords = append(coords, coord(tp, int64(1+100*i), int32(i+1), -1, 0, -1, 1_764_500_000_000))
	}
	results, err := c.CommitFile(ctx, CommitFileRequest{ObjectKey: "wal/000001", Size: 401, Coordinates: coords})
	require.NoError(t, err)
	for i, r := range results {
		require.NoError(t, r.Err, "coordinate %d", i)
	}
	check := func() {
		t.Helper()
		for i, cd := range coords {
			found, err := c.FindBatches(ctx, cd.TopicPartition, 0, 1<<20)
			require.NoError(t, err, "%s", cd.TopicPartition)
			require.Len(t, found.Batches, 1, "%s", cd.TopicPartition)
			require.Equal(t, int64(1+100*i), found.Batches[0].BytePos, "%s: its own batch", cd.TopicPartition)
			require.Equal(t, int64(i+1), found.HighWatermark)
		}
		_, err := c.FindBatches(ctx, wal.TopicPartition{TopicID: orders, Partition: 6}, 0, 1<<20)
		require.Equal(t, kafkaerr.UnknownTopicOrPartition, code(err))
	}
	check()

	require.NoError(t, c.Close())
	c = openTest(t, log, dir, nil)
	check()
	require.NoError(t, c.Close())
	for _, f := range []string{"shard-0.db", "shard-0.db-wal", "shard-0.db-shm"} {
		require.NoError(t, removeIfExists(filepath.Join(dir, f)))
	}
	c = openTest(t, log, dir, nil)
	check()

	// A topic created after: PIDs of its own.
	third := mustCreate(t, c, "third", 2, TopicConfig{})
	_, err = c.CommitFile(ctx, CommitFileRequest{ObjectKey: "wal/000002", Size: 101, Coordinates: []wal.Coordinate{coord(wal.TopicPartition{TopicID: third, Partition: 1}, 1, 9, -1, 0, -1, 1_764_500_000_000)}})
	require.NoError(t, err)
	check()

	require.NoError(t, c.DeleteTopic(ctx, orders))
	for p := range int32(6) {
		_, err := c.FindBatches(ctx, wal.TopicPartition{TopicID: orders, Partition: p}, 0, 1<<20)
		require.Equal(t, kafkaerr.UnknownTopicOrPartition, code(err), "partition %d", p)
	}
	found, err := c.FindBatches(ctx, wal.TopicPartition{TopicID: other, Partition: 2}, 0, 1<<20)
	require.NoError(t, err)
	require.Len(t, found.Batches, 1, "another topic's partition stays")
	var n int
	require.NoError(t, c.store.Rdb.QueryRow("SELECT COUNT(*) FROM topic_extents").Scan(&n))
	require.Zero(t, n, "the deleted topic's extents are gone")
}

// TestAddPartitionsShards: partitions added to a topic over four shards
// go to the least loaded, every partition is served by exactly one
// shard, each takes commits, and the shards agree on the count after a
// restart.
func TestAddPartitionsShards(t *testing.T) {
	ctx := context.Background()
	f := newShardsFixture(t, 4, nil, nil)
	id, err := f.s.CreatePartitions(ctx, CreatePartitionsRequest{Name: "wide", Partitions: 3})
	require.NoError(t, err)
	require.Equal(t, kafkaerr.InvalidPartitions, code(f.s.AddPartitions(ctx, id, 3)))
	require.NoError(t, f.s.AddPartitions(ctx, id, 10))
	check := func() {
		t.Helper()
		ts, err := f.s.Topics(ctx)
		require.NoError(t, err)
		require.Len(t, ts, 1)
		require.Equal(t, int32(10), ts[0].Partitions)
		servedBy := map[int32]int{}
		for i := range 4 {
			c, err := f.s.local(i)
			require.NoError(t, err)
			info, ok := c.pub.Topic(id)
			if !ok {
				continue
			}
			require.Equal(t, int32(10), info.Partitions, "shard %d", i)
			for p := range int32(10) {
				if _, err := c.pub.Lookup(wal.TopicPartition{TopicID: id, Partition: p}); err == nil {
					servedBy[p]++
				}
			}
		}
		for p := range int32(10) {
			require.Equal(t, 1, servedBy[p], "partition %d served by one shard", p)
		}
	}
	check()
	for p := range int32(10) {
		tp := wal.TopicPartition{TopicID: id, Partition: p}
		results, err := f.s.CommitFile(ctx, CommitFileRequest{ObjectKey: wal.NewObjectKey(testPrefix, f.clock.Now()), Size: 101, Coordinates: coordsFor(tp)})
		require.NoError(t, err, "partition %d", p)
		require.NoError(t, results[0].Err, "partition %d", p)
	}
	f.restart()
	check()
	for p := range int32(10) {
		found, err := f.s.FindBatches(ctx, wal.TopicPartition{TopicID: id, Partition: p}, 0, 1<<20)
		require.NoError(t, err, "partition %d", p)
		require.Len(t, found.Batches, 1, fmt.Sprintf("partition %d", p))
	}
}
