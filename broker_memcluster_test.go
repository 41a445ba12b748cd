package diskless

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless/cluster/memcluster"
	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/kbatch"
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
	svc, brokers, settled := memclusterOf(t, shards)
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

// memclusterOf opens three brokers on a memcluster.Service and waits
// until they settle: every broker sees the three, and names shard i's
// preferred member (ID i) as its leader, as the Service does. settled
// reports whether that holds now.
func memclusterOf(t *testing.T, shards int) (svc *memcluster.Service, brokers []*Broker, settled func() bool) {
	t.Helper()
	svc = memcluster.NewService(nil)
	bucket := memblob.OpenBucket(nil)
	t.Cleanup(func() { bucket.Close() })
	for i := range 3 {
		b, err := Open(t.Context(), &Config{
			Bucket: bucket, BrokerID: int32(i), Shards: shards, Linger: 5 * time.Millisecond, DataDir: t.TempDir(),
			Logger:  zaptest.NewLogger(t).Named(fmt.Sprintf("broker-%d", i)),
			Cluster: &ClusterConfig{Backend: svc, LeaseTTL: 2 * time.Second}, // as the etcd tests: 1 s is short under a loaded machine
		})
		require.NoError(t, err)
		t.Cleanup(func() { b.Close() })
		brokers = append(brokers, b)
	}
	// settled: every broker sees the three, and names shard i's
	// preferred member (ID i) as its leader, as the Service does.
	settled = func() bool {
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
	return svc, brokers, settled
}

// TestClusterMemclusterZombie: shard 0's leader becomes a zombie
// (memcluster.Service.PauseLease: its renewals are lost and its watch
// stalls, but it can still append): the others elect another leader
// once its lease has ended, and what the zombie's own produce calls get
// acknowledged is never lost nor doubled; once it resumes it learns that
// it lost the shard, registers again, and the cluster settles.
func TestClusterMemclusterZombie(t *testing.T) {
	const shards, parts = 3, 6
	svc, brokers, settled := memclusterOf(t, shards)
	_, err := brokers[1].CreateTopic(t.Context(), "t", TopicConfig{Partitions: parts})
	require.NoError(t, err)
	acked := map[int32][]string{} // by partition: the values acknowledged
	produce := func(b *Broker, first int) {
		// The zombie's watch is stalled: it forwards to the leaders it
		// last saw, which may have moved, until its call times out.
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		var req ProduceRequest
		req.Acks = -1
		for p := range int32(parts) {
			req.Partitions = append(req.Partitions, ProducePartition{Topic: "t", Partition: p, Records: batch(t, kbatch.CodecNone, first, 1, -1, 0)})
		}
		resp, err := b.Produce(ctx, req)
		if err != nil {
			t.Logf("produce from %d: %v", first, err)
			return
		}
		for _, r := range resp.Partitions {
			if r.Err != nil {
				t.Logf("produce %d to partition %d: %v", first, r.Partition, r.Err)
				continue
			}
			acked[r.Partition] = append(acked[r.Partition], fmt.Sprintf("value-%d", first))
		}
	}
	produce(brokers[2], 0)
	// A group of shard 0, with an offset committed before the pause.
	group := ""
	for i := 0; group == ""; i++ {
		if g := fmt.Sprintf("g%d", i); coordinator.ShardOfGroup(g, shards) == 0 {
			group = g
		}
	}
	commit := func(off int64) error {
		return brokers[1].CommitOffsets(t.Context(), group, 0, []GroupOffset{{Topic: "t", Partition: 0, Offset: off}})
	}
	require.NoError(t, commit(5))

	svc.PauseLease(0)
	require.Eventually(t, func() bool {
		id, ok := svc.Leader("diskless/", 0)
		return ok && id != 0
	}, time.Minute, 5*time.Millisecond, "another broker leads shard 0 once the zombie's lease ended")
	produce(brokers[0], 1000) // through the zombie: its own shard's appends are fenced
	// The new leader answers a commit; the zombie, which still believes
	// it leads shard 0, must not answer a read from its older state.
	require.Eventually(t, func() bool { return commit(9) == nil }, time.Minute, 5*time.Millisecond, "a commit through the new leader")
	got, err := brokers[0].FetchOffsets(t.Context(), group, nil)
	if err == nil {
		require.Equal(t, []GroupOffset{{Topic: "t", Partition: 0, Offset: 9}}, got, "a read after the commit holds it")
	} else {
		require.True(t, brokers[0].coord.Shards().Leads(0), "the zombie still believes it leads")
		require.ErrorIs(t, err, coordinator.ErrNotLeader, "the zombie refuses the read: its lease ended")
	}
	for i := range 3 {
		produce(brokers[1], 2000+i)
	}
	svc.ResumeLease(0)
	require.Eventually(t, settled, time.Minute, 20*time.Millisecond, "the zombie learns, registers again, and the shards settle")
	produce(brokers[2], 3000)

	for p := range int32(parts) {
		hw, err := brokers[1].ListOffsets(t.Context(), "t", p, LatestTimestamp)
		require.NoError(t, err)
		got := fetchAll(t, brokers[2], "t", p, hw.Offset)
		require.Len(t, got, int(hw.Offset), "partition %d: no gaps", p)
		count := map[string]int{}
		for _, v := range got {
			count[v]++
		}
		for _, v := range acked[p] {
			require.Equal(t, 1, count[v], "partition %d: acknowledged %s once", p, v)
		}
	}
}
