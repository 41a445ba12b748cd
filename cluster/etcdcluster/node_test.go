package etcdcluster_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/diskless-go/diskless/cluster"
	"github.com/diskless-go/diskless/cluster/etcdcluster"
	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/internal/etcdtest"
)

// leads records which shards a node was told it leads, with their logs.
type leads struct {
	mu       sync.Mutex
	shards   map[int]metalog.Log
	appended atomic.Int64 // Callbacks.Appended calls
}

func (l *leads) callbacks() cluster.Callbacks {
	return cluster.Callbacks{
		Lead: func(_ context.Context, shard int, log metalog.Log) error {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.shards[shard] = log
			return nil
		},
		Unlead: func(shard int) {
			l.mu.Lock()
			defer l.mu.Unlock()
			delete(l.shards, shard)
		},
		Serve:    func(context.Context, int, string, []byte) func() []byte { return func() []byte { return nil } },
		Appended: func() { l.appended.Add(1) },
	}
}

func (l *leads) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.shards)
}

// TestNodes: two nodes see each other; every shard has one leader, which
// the other node knows, spread over both; the leader's log takes appends,
// which a follower's log of the shard reads and which wake both nodes
// (Appended); when a node leaves, its membership goes at once and the
// other leads every shard.
func TestNodes(t *testing.T) {
	etcd := etcdtest.Start(t, nil)
	client := etcd.Client(t)
	var mem cluster.Mem
	const shards = 4
	var nodes []*etcdcluster.Node
	var ls []*leads
	backend := &etcdcluster.Backend{Client: client}
	conn, err := backend.Connect(t.Context(), &cluster.ConnectOptions{Prefix: "nodes/", Logger: zaptest.NewLogger(t)})
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	for id := range 2 {
		l := &leads{shards: map[int]metalog.Log{}}
		n, err := conn.Join(t.Context(), &cluster.JoinOptions{
			Member: cluster.Member{ID: int32(id), Rack: "r"}, Shards: shards, LeaseTTL: time.Second, Transport: &mem,
		}, l.callbacks())
		require.NoError(t, err)
		t.Cleanup(func() { n.Close() })
		nodes, ls = append(nodes, n.(*etcdcluster.Node)), append(ls, l)
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
		ls[a.ID].mu.Lock()
		log := ls[a.ID].shards[i]
		ls[a.ID].mu.Unlock()
		r := <-log.Append([]byte("entry"))
		require.NoError(t, r.Err, "the leader's log takes appends")
		follower, err := conn.OpenLog(t.Context(), i)
		require.NoError(t, err)
		var got []string
		require.NoError(t, follower.Read(t.Context(), 0, func(_ int64, e []byte) error { got = append(got, string(e)); return nil }))
		require.Equal(t, []string{"entry"}, got, "a follower reads shard %d's log", i)
		require.NoError(t, follower.Close())
	}
	require.Eventually(t, func() bool { return ls[0].appended.Load() > 0 && ls[1].appended.Load() > 0 }, 30*time.Second, 10*time.Millisecond,
		"appends wake every node")
	require.NoError(t, nodes[0].Close())
	require.Eventually(t, func() bool { return len(nodes[1].Members()) == 1 && ls[1].count() == shards }, 30*time.Second, 10*time.Millisecond,
		"the other node leads every shard")
	require.Zero(t, ls[0].count(), "a closed node was told it leads nothing")
}
