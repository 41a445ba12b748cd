package cluster_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/diskless-go/diskless/cluster"
	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/internal/etcdtest"
)

// leads records which shards a node was told it leads.
type leads struct {
	mu     sync.Mutex
	shards map[int]metalog.Fence
}

func (l *leads) callbacks() cluster.Callbacks {
	return cluster.Callbacks{
		Lead: func(_ context.Context, shard int, fence metalog.Fence) error {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.shards[shard] = fence
			return nil
		},
		Unlead: func(shard int) {
			l.mu.Lock()
			defer l.mu.Unlock()
			delete(l.shards, shard)
		},
		Serve: func(context.Context, int, string, []byte) func() []byte { return func() []byte { return nil } },
	}
}

func (l *leads) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.shards)
}

// TestNodes: two nodes see each other; every shard has one leader, which
// the other node knows, spread over both; the fence is the election key;
// when a node leaves, its membership goes at once and the other leads
// every shard.
func TestNodes(t *testing.T) {
	etcd := etcdtest.Start(t, nil)
	client := etcd.Client(t)
	var mem cluster.Mem
	const shards = 4
	var nodes []*cluster.Node
	var ls []*leads
	for id := range 2 {
		l := &leads{shards: map[int]metalog.Fence{}}
		n, err := cluster.Join(t.Context(), client, &cluster.Options{
			Member: cluster.Member{ID: int32(id), Rack: "r"}, Shards: shards, Prefix: "nodes/", LeaseTTL: time.Second,
			Transport: &mem, Logger: zaptest.NewLogger(t),
		}, l.callbacks())
		require.NoError(t, err)
		t.Cleanup(func() { n.Close() })
		nodes, ls = append(nodes, n), append(ls, l)
	}
	require.Eventually(t, func() bool {
		return len(nodes[0].Members()) == 2 && len(nodes[1].Members()) == 2 && ls[0].count() == shards/2 && ls[1].count() == shards/2
	}, 30*time.Second, 10*time.Millisecond, "both members seen, the shards spread")
	for i := range shards {
		a, okA := nodes[0].Leader(i)
		b, okB := nodes[1].Leader(i)
		require.True(t, okA && okB)
		require.Equal(t, a.ID, b.ID, "both nodes name the same leader of shard %d", i)
		require.True(t, nodes[a.ID].Leading(i))
		fence := ls[a.ID].shards[i]
		resp, err := client.Get(t.Context(), fence.Key)
		require.NoError(t, err)
		require.Len(t, resp.Kvs, 1, "the fence is the leader's election key")
		require.Equal(t, fence.Revision, resp.Kvs[0].CreateRevision)
	}
	require.NoError(t, nodes[0].Close())
	require.Eventually(t, func() bool { return len(nodes[1].Members()) == 1 && ls[1].count() == shards }, 30*time.Second, 10*time.Millisecond,
		"the other node leads every shard")
	require.Zero(t, ls[0].count(), "a closed node was told it leads nothing")
}
