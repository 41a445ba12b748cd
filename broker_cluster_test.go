package diskless

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless/cluster"
	"github.com/diskless-go/diskless/cluster/etcdcluster"
	"github.com/diskless-go/diskless/internal/etcdtest"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

// clusterOf opens n brokers on one bucket and one etcd cluster, with
// shards coordinator shards, and waits until every shard has a leader.
// tr nil means each broker's default, TCP on 127.0.0.1.
func clusterOf(t *testing.T, etcd *etcdtest.Cluster, n, shards int, tr cluster.Transport) ([]*Broker, []*Config) {
	t.Helper()
	bucket := memblob.OpenBucket(nil)
	t.Cleanup(func() { bucket.Close() })
	var brokers []*Broker
	var cfgs []*Config
	for i := range n {
		c := &Config{
			Bucket: bucket, BrokerID: int32(i), Shards: shards, Linger: 5 * time.Millisecond, DataDir: t.TempDir(),
			Logger:  zaptest.NewLogger(t).Named(fmt.Sprintf("broker-%d", i)),
			Cluster: &ClusterConfig{Backend: &etcdcluster.Backend{Endpoints: etcd.Endpoints()}, LeaseTTL: 2 * time.Second, Transport: tr},
		}
		b, err := Open(t.Context(), c)
		require.NoError(t, err)
		t.Cleanup(func() { b.Close() })
		brokers = append(brokers, b)
		cfgs = append(cfgs, c)
	}
	waitLeaders(t, brokers, shards)
	return brokers, cfgs
}

// waitLeaders waits until every broker sees a live leader of every shard
// and every other broker (membership and elections are watched apart: a
// broker may see every shard led before it sees the last one to join).
func waitLeaders(t *testing.T, brokers []*Broker, shards int) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, b := range brokers {
			if len(b.Members()) < len(brokers) {
				return false
			}
			for i := range shards {
				if _, ok := b.ShardLeader(i); !ok {
					return false
				}
			}
		}
		return true
	}, 60*time.Second, 20*time.Millisecond, "every shard gets a leader")
}

// TestClusterInProcess: three brokers on one bucket, producing to every
// partition from all three at once; every broker's Fetch returns the same
// batches at the same offsets, every produced record once.
func TestClusterInProcess(t *testing.T) {
	etcd := etcdtest.Start(t, nil)
	brokers, _ := clusterOf(t, etcd, 3, 4, nil)
	ctx := t.Context()
	require.Len(t, brokers[0].Members(), 3)

	_, err := brokers[1].CreateTopic(ctx, "t", TopicConfig{Partitions: 8})
	require.NoError(t, err, "created on a broker that may not lead shard 0")
	_, err = brokers[2].CreateTopic(ctx, "t", TopicConfig{Partitions: 8})
	require.Error(t, err, "a name is taken cluster-wide")

	const rounds, perBatch = 5, 3
	var wg sync.WaitGroup
	for bi, b := range brokers {
		wg.Go(func() {
			for r := range rounds {
				var req ProduceRequest
				req.Acks = -1
				for p := range int32(8) {
					first := bi*10_000 + r*perBatch
					req.Partitions = append(req.Partitions, ProducePartition{Topic: "t", Partition: p, Records: batch(t, kbatch.CodecNone, first, perBatch, -1, 0)})
				}
				resp, err := b.Produce(ctx, req)
				if !assertNoError(t, err) {
					return
				}
				for _, pr := range resp.Partitions {
					assertNoError(t, pr.Err)
				}
			}
		})
	}
	wg.Wait()

	want := int64(len(brokers) * rounds * perBatch)
	var first []map[int64]string
	for bi, b := range brokers {
		for p := range int32(8) {
			got := fetchAll(t, b, "t", p, want)
			require.Len(t, got, int(want), "broker %d partition %d", bi, p)
			if bi == 0 {
				first = append(first, got)
				seen := map[string]bool{}
				for _, v := range got {
					require.False(t, seen[v], "record %s twice", v)
					seen[v] = true
				}
				continue
			}
			require.Equal(t, first[p], got, "broker %d partition %d: the same records at the same offsets", bi, p)
		}
	}
	// Read your writes on every broker: what a broker acknowledged, its
	// next Fetch returns, whoever leads the partition's shard.
	for bi, b := range brokers {
		for p := range int32(8) {
			first := 90_000 + bi*100 + int(p)
			resp, err := b.Produce(ctx, ProduceRequest{Acks: -1, Partitions: []ProducePartition{{Topic: "t", Partition: p, Records: batch(t, kbatch.CodecNone, first, 1, -1, 0)}}})
			require.NoError(t, err)
			require.NoError(t, resp.Partitions[0].Err)
			off := resp.Partitions[0].BaseOffset
			f, err := b.Fetch(ctx, FetchRequest{Partitions: []FetchPartition{{Topic: "t", Partition: p, Offset: off, MaxBytes: 1 << 20}}})
			require.NoError(t, err)
			require.NoError(t, f.Partitions[0].Err)
			require.Equal(t, fmt.Sprintf("value-%d", first), records(t, f.Partitions[0].Records)[off], "broker %d partition %d", bi, p)
		}
	}
	var forwarded, followerReads int64
	for _, b := range brokers {
		s := b.Stats()
		require.Len(t, s.ShardLeaders, 4)
		forwarded += s.Forwarded
		followerReads += s.FollowerReads
	}
	require.Positive(t, forwarded, "brokers forwarded calls for shards they did not lead")
	require.Positive(t, followerReads, "followers answered reads of shards led elsewhere")
	require.Eventually(t, func() bool {
		for _, b := range brokers {
			if b.Stats().Leading == 0 {
				return false
			}
		}
		return true
	}, 60*time.Second, 50*time.Millisecond, "the shards spread over the brokers")
	leaders := brokers[0].Stats().ShardLeaders
	for _, b := range brokers[1:] {
		require.Eventually(t, func() bool { return slices.Equal(leaders, b.Stats().ShardLeaders) }, 10*time.Second, 20*time.Millisecond,
			"every broker sees the same leaders")
	}

	// Partitions added on one broker: spread over the shards, and every
	// broker produces to and fetches from them (the others learn of them
	// when asked for one).
	require.NoError(t, brokers[2].AddPartitions(ctx, "t", 12))
	require.Equal(t, kafkaerr.InvalidPartitions, kafkaerr.CodeOf(brokers[0].AddPartitions(ctx, "t", 12)))
	for bi, b := range brokers {
		for p := int32(8); p < 12; p++ {
			v := 80_000 + bi*100 + int(p)
			resp, err := b.Produce(ctx, ProduceRequest{Acks: -1, Partitions: []ProducePartition{{Topic: "t", Partition: p, Records: batch(t, kbatch.CodecNone, v, 1, -1, 0)}}})
			require.NoError(t, err)
			require.NoError(t, resp.Partitions[0].Err, "broker %d partition %d", bi, p)
		}
	}
	for bi, b := range brokers {
		for p := int32(8); p < 12; p++ {
			got := fetchAll(t, b, "t", p, 3)
			require.Len(t, got, 3, "broker %d partition %d", bi, p)
		}
	}

	// Committed offsets: each group's in its shard, whichever broker
	// leads it; what one broker committed, every other reads at once.
	var groups []string
	for g := range 8 {
		groups = append(groups, fmt.Sprintf("group-%d", g))
	}
	for round := range 3 {
		for gi, g := range groups {
			b := brokers[(gi+round)%len(brokers)]
			require.NoError(t, b.CommitOffsets(ctx, g, 0, []GroupOffset{{Topic: "t", Partition: int32(gi), Offset: int64(100*round + gi), LeaderEpoch: -1}}))
			for _, other := range brokers {
				got, err := other.FetchOffsets(ctx, g, nil)
				require.NoError(t, err)
				require.Len(t, got, 1)
				require.Equal(t, int64(100*round+gi), got[0].Offset, "round %d group %s", round, g)
			}
		}
	}
	got, err := brokers[2].OffsetGroups(ctx)
	require.NoError(t, err)
	require.Equal(t, groups, got)
	require.NoError(t, brokers[1].DeleteOffsets(ctx, groups[3], 0, nil))
	left, err := brokers[0].FetchOffsets(ctx, groups[3], nil)
	require.NoError(t, err)
	require.Empty(t, left)

	// Group claims, whichever broker leads the group's shard: a claim
	// taken on one broker fences commits under the claim before on any.
	for gi, g := range groups {
		a, b := brokers[gi%len(brokers)], brokers[(gi+1)%len(brokers)]
		first, err := a.ClaimGroup(ctx, g)
		require.NoError(t, err)
		second, err := b.ClaimGroup(ctx, g)
		require.NoError(t, err)
		require.Greater(t, second, first)
		commit := []GroupOffset{{Topic: "t", Partition: 0, Offset: 7, LeaderEpoch: -1}}
		err = a.CommitOffsets(ctx, g, first, commit)
		require.Equal(t, kafkaerr.NotCoordinator, kafkaerr.CodeOf(err), "group %s: %v", g, err)
		require.Equal(t, kafkaerr.NotCoordinator, kafkaerr.CodeOf(a.DeleteOffsets(ctx, g, first, nil)), "group %s", g)
		require.NoError(t, a.CommitOffsets(ctx, g, second, commit))
		// Group metadata, stored on one broker, read on another.
		require.Equal(t, kafkaerr.NotCoordinator, kafkaerr.CodeOf(a.PutGroupMetadata(ctx, g, first, 1, []byte("old"))), "group %s", g)
		require.NoError(t, b.PutGroupMetadata(ctx, g, second, 1, []byte("members of "+g)))
		m, err := brokers[(gi+2)%len(brokers)].GroupMetadata(ctx, g)
		require.NoError(t, err)
		require.Equal(t, GroupMetadata{Generation: 1, Value: []byte("members of " + g)}, m)
	}
}

func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Errorf("unexpected error: %v", err)
		return false
	}
	return true
}

// fetchAll fetches partition p of topic from offset 0 until want records,
// and returns them by offset.
func fetchAll(t *testing.T, b *Broker, topic string, p int32, want int64) map[int64]string {
	t.Helper()
	out := map[int64]string{}
	var offset int64
	deadline := time.Now().Add(30 * time.Second)
	for int64(len(out)) < want && time.Now().Before(deadline) {
		f, err := b.Fetch(t.Context(), FetchRequest{MaxWait: 100 * time.Millisecond, Partitions: []FetchPartition{{Topic: topic, Partition: p, Offset: offset, MaxBytes: 1 << 20}}})
		require.NoError(t, err)
		r := f.Partitions[0]
		require.NoError(t, r.Err)
		for o, v := range records(t, r.Records) {
			out[o] = v
			offset = max(offset, o+1)
		}
	}
	return out
}

// TestClusterFailover: the broker leading shard 0 (producer IDs, topic
// admin) leaves; the others take its shards over, and produce, fetch and
// admin calls go on with everything acknowledged before still there.
func TestClusterFailover(t *testing.T) {
	etcd := etcdtest.Start(t, nil)
	brokers, _ := clusterOf(t, etcd, 3, 3, &cluster.Mem{})
	ctx := t.Context()
	_, err := brokers[0].CreateTopic(ctx, "t", TopicConfig{Partitions: 6})
	require.NoError(t, err)
	produceAll(t, brokers[2], []string{"t"}, 6, 0, 4)

	leader, ok := brokers[0].ShardLeader(0)
	require.True(t, ok)
	require.NoError(t, brokers[leader.ID].Close())
	var rest []*Broker
	for i, b := range brokers {
		if int32(i) != leader.ID {
			rest = append(rest, b)
		}
	}
	// The others learn of the leader's departure through etcd: until
	// then they still name it.
	require.Eventually(t, func() bool {
		for _, b := range rest {
			if l, ok := b.ShardLeader(0); !ok || l.ID == leader.ID {
				return false
			}
		}
		return true
	}, 60*time.Second, 20*time.Millisecond, "shard 0 gets a new leader")
	waitLeaders(t, rest, 3)
	produceAll(t, rest[0], []string{"t"}, 6, 4, 4)
	for p := range int32(6) {
		// Fetch on another broker may lag a little (its follower):
		// ListOffsets does not.
		hw, err := rest[1].ListOffsets(ctx, "t", p, LatestTimestamp)
		require.NoError(t, err)
		require.Equal(t, int64(8), hw.Offset)
		got := fetchAll(t, rest[1], "t", p, 8)
		for o := range int64(8) {
			require.Equal(t, fmt.Sprintf("value-%d", o), got[o])
		}
	}
	_, err = rest[1].CreateTopic(ctx, "u", TopicConfig{Partitions: 2})
	require.NoError(t, err)
	id, _, err := rest[0].InitProducerID(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, id, int64(0))
}
