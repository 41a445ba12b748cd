package diskless

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless/cluster/memcluster"
)

// TestClusterMemcluster: three brokers in one process meet through a
// memcluster.Service instead of etcd, over its in-memory transport. A
// topic produced through one broker is fetched through another; when the
// lease of shard 0's leader expires (memcluster.Service.ExpireLease:
// as if it had been paused past its TTL) the broker registers again, the
// shards settle back on their preferred members, and produce and fetch
// go on with everything acknowledged before still there.
func TestClusterMemcluster(t *testing.T) {
	const shards = 3
	svc := memcluster.NewService(nil)
	bucket := memblob.OpenBucket(nil)
	t.Cleanup(func() { bucket.Close() })
	var brokers []*Broker
	for i := range 3 {
		b, err := Open(t.Context(), &Config{
			Bucket: bucket, BrokerID: int32(i), Shards: shards, Linger: 5 * time.Millisecond, DataDir: t.TempDir(),
			Logger:  zaptest.NewLogger(t).Named(fmt.Sprintf("broker-%d", i)),
			Cluster: &ClusterConfig{Backend: svc, LeaseTTL: time.Second},
		})
		require.NoError(t, err)
		t.Cleanup(func() { b.Close() })
		brokers = append(brokers, b)
	}
	// settled: every broker sees the three, and names shard i's
	// preferred member (ID i) as its leader, as the Service does.
	settled := func() bool {
		for i := range shards {
			if id, ok := svc.Leader("diskless/", i); !ok || id != int32(i) {
				return false
			}
		}
		for _, b := range brokers {
			if len(b.Members()) != 3 {
				return false
			}
			for i := range shards {
				if l, ok := b.ShardLeader(i); !ok || l.ID != int32(i) {
					return false
				}
			}
		}
		return true
	}
	require.Eventually(t, settled, time.Minute, 20*time.Millisecond, "the shards settle on their preferred members")
	_, err := brokers[1].CreateTopic(t.Context(), "t", TopicConfig{Partitions: 6})
	require.NoError(t, err)
	produceAll(t, brokers[2], []string{"t"}, 6, 0, 4)

	require.True(t, svc.ExpireLease(0))
	require.Eventually(t, func() bool { l, ok := brokers[1].ShardLeader(0); return !ok || l.ID != 0 }, time.Minute, 5*time.Millisecond,
		"the others see shard 0's leader gone")
	require.Eventually(t, settled, time.Minute, 20*time.Millisecond, "broker 0 registers again and leads shard 0 again")
	produceAll(t, brokers[1], []string{"t"}, 6, 4, 4)
	for p := range int32(6) {
		hw, err := brokers[0].ListOffsets(t.Context(), "t", p, LatestTimestamp)
		require.NoError(t, err)
		require.Equal(t, int64(8), hw.Offset)
		got := fetchAll(t, brokers[2], "t", p, 8)
		for o := range int64(8) {
			require.Equal(t, fmt.Sprintf("value-%d", o), got[o])
		}
	}
}
