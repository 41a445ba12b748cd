package etcdcluster_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/diskless-go/diskless/cluster"
	"github.com/diskless-go/diskless/cluster/etcdcluster"
	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/internal/etcdtest"
	"github.com/diskless-go/diskless/kafkaerr"
)

// TestFeatures: the first broker of a cluster finalizes the levels the
// live brokers support; a level is raised only when every live member
// supports it, never lowered, and not for an unknown feature; a broker
// that does not support a finalized level cannot join; every node sees
// a raised level.
func TestFeatures(t *testing.T) {
	etcd := etcdtest.Start(t, nil)
	var mem cluster.Mem
	conn, err := (&etcdcluster.Backend{Client: etcd.Client(t)}).Connect(t.Context(), &cluster.ConnectOptions{Prefix: "features-test/", Logger: zaptest.NewLogger(t)})
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	const feature = "diskless.version"
	join := func(id int32, features map[string]int) (*etcdcluster.Node, error) {
		l := &leads{shards: map[int]metalog.Log{}}
		n, err := conn.Join(t.Context(), &cluster.JoinOptions{
			Member: cluster.Member{ID: id, Features: features}, Shards: 1, LeaseTTL: time.Second, Transport: &mem,
		}, l.callbacks())
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { n.Close() })
		return n.(*etcdcluster.Node), nil
	}
	old, err := join(0, map[string]int{feature: 1})
	require.NoError(t, err)
	require.Equal(t, map[string]int{feature: 1}, old.Features().Levels, "finalized at what the first broker supports")
	upgraded, err := join(1, map[string]int{feature: 2})
	require.NoError(t, err)
	require.Equal(t, map[string]int{feature: 1}, upgraded.Features().Levels)
	require.Eventually(t, func() bool { return len(upgraded.Members()) == 2 }, 10*time.Second, 10*time.Millisecond)

	err = upgraded.UpdateFeatures(t.Context(), map[string]int{feature: 2}, false)
	require.Equal(t, kafkaerr.InvalidUpdateVersion, kafkaerr.CodeOf(err), "%v", err)
	require.ErrorContains(t, err, "broker 0 (up to 1)")
	require.Equal(t, 1, upgraded.Features().Levels[feature], "nothing changed")

	require.NoError(t, old.Close())
	require.Eventually(t, func() bool { return len(upgraded.Members()) == 1 }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, upgraded.UpdateFeatures(t.Context(), map[string]int{feature: 2}, true), "validate only")
	require.Equal(t, 1, upgraded.Features().Levels[feature], "validate only changes nothing")
	require.NoError(t, upgraded.UpdateFeatures(t.Context(), map[string]int{feature: 2}, false))
	require.Equal(t, 2, upgraded.Features().Levels[feature])
	epoch := upgraded.Features().Epoch
	require.Positive(t, epoch)

	for _, bad := range []map[string]int{{feature: 1}, {"no.such.feature": 1}, {feature: 3}} {
		err := upgraded.UpdateFeatures(t.Context(), bad, false)
		require.Equal(t, kafkaerr.InvalidUpdateVersion, kafkaerr.CodeOf(err), "%v: %v", bad, err)
	}

	_, err = join(2, map[string]int{feature: 1})
	require.Equal(t, kafkaerr.InvalidUpdateVersion, kafkaerr.CodeOf(err), "%v", err)
	require.ErrorContains(t, err, "finalized at level 2")
	_, err = join(3, nil) // a release before features: level 1
	require.Equal(t, kafkaerr.InvalidUpdateVersion, kafkaerr.CodeOf(err), "%v", err)

	newer, err := join(4, map[string]int{feature: 2})
	require.NoError(t, err)
	require.Equal(t, 2, newer.Features().Levels[feature], "a joining broker reads the levels")
	require.GreaterOrEqual(t, newer.Features().Epoch, epoch)
	require.Eventually(t, func() bool { return len(upgraded.Members()) == 2 }, 10*time.Second, 10*time.Millisecond, "the refused ones left")
}
