package coordinator

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/wal"
)

// TestPartialTopicRepaired: a topic left with partitions no shard serves
// (here its part on shard 1 deleted behind the catalog's back, as an undo
// that reached only some shards leaves it) is repaired by the leader of
// shard 0 once every catalog refresh for repairAfter has found it
// partial: the missing partitions are assigned and created again, and the
// partitions that were served keep their records.
func TestPartialTopicRepaired(t *testing.T) {
	ctx := context.Background()
	clk := newTestClock()
	toA := &toCoordinator{}
	opts := func(fw Forwarder) *Options {
		return &Options{Dir: t.TempDir(), Forwarder: fw, ApplyInterval: -1, SnapshotEvery: -1, Clock: clk, CatalogInterval: time.Hour}
	}
	b, err := Open(ctx, []metalog.Log{nil, newTestLog()}, opts(toA))
	require.NoError(t, err)
	defer b.Close()
	a, err := Open(ctx, []metalog.Log{newTestLog(), nil}, opts(&toCoordinator{to: b}))
	require.NoError(t, err)
	defer a.Close()
	toA.to = a

	id, err := a.CreatePartitions(ctx, CreatePartitionsRequest{Name: "orders", Partitions: 4})
	require.NoError(t, err)
	served := func() (n int, onShard0 []int32) {
		a.Shards().RefreshTopics(ctx)
		for p := range int32(4) {
			sh, err := a.Shards().ShardOf(wal.TopicPartition{TopicID: id, Partition: p})
			if err == nil {
				n++
				if sh == 0 {
					onShard0 = append(onShard0, p)
				}
			}
		}
		return n, onShard0
	}
	n, kept := served()
	require.Equal(t, 4, n)
	require.NotEmpty(t, kept)
	require.Less(t, len(kept), 4, "both shards serve some")
	tp := wal.TopicPartition{TopicID: id, Partition: kept[0]}
	_, err = a.CommitFile(ctx, CommitFileRequest{ObjectKey: wal.NewObjectKey("", clk.Now()), Size: 100, Coordinates: []wal.Coordinate{{TopicPartition: tp, Offset: 1, Size: 99, NumRecords: 3, ProducerID: -1}}})
	require.NoError(t, err)

	l1, err := b.localShard(1)
	require.NoError(t, err)
	require.NoError(t, l1.DeleteTopic(ctx, id))
	n, _ = served()
	require.Equal(t, len(kept), n, "partial: shard 1's partitions are gone")

	a.repairTopics(ctx)
	clk.Advance(repairAfter - time.Millisecond)
	n, _ = served()
	a.repairTopics(ctx)
	require.Equal(t, len(kept), n, "not before repairAfter")
	n, _ = served()
	require.Equal(t, len(kept), n)

	b.repairTopics(ctx)
	n, _ = served()
	require.Equal(t, len(kept), n, "only the leader of shard 0 repairs")
	clk.Advance(time.Millisecond) // a's repair ticker may run it too
	served()
	a.repairTopics(ctx)
	n, onShard0 := served()
	require.Equal(t, 4, n, "repaired: every partition served again")
	require.Subset(t, onShard0, kept)
	res, err := a.ListOffsets(ctx, tp, LatestTimestamp)
	require.NoError(t, err)
	require.Equal(t, int64(3), res.Offset, "the partitions served all along keep their records")
	b.Shards().RefreshTopics(ctx)
	ts, err := b.Topics(ctx)
	require.NoError(t, err)
	require.Len(t, ts, 1)
	require.Equal(t, int32(4), ts[0].Partitions)
}
