package diskless

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless/cluster/etcdcluster"
	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/internal/etcdtest"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/quota"
)

// TestClientQuotasBroker: client quotas through the Broker: set (an
// invalid entry answered INVALID_REQUEST, changing nothing), described
// with a filter, polled at their Version, removed; refused after Close.
func TestClientQuotasBroker(t *testing.T) {
	ctx := t.Context()
	b := openTest(t, nil)
	alice := quota.Entity{User: quota.Component{Set: true, Name: "alice"}}
	errs, err := b.AlterClientQuotas(ctx, []quota.Alteration{
		{Entity: alice, Changes: []quota.Change{{Key: quota.ProducerByteRate, Value: 1 << 20}}},
		{Entity: quota.Entity{IP: quota.Component{Set: true, Default: true}}, Changes: []quota.Change{{Key: quota.ProducerByteRate, Value: 1}}},
	}, false)
	require.NoError(t, err)
	require.Len(t, errs, 2)
	require.NoError(t, errs[0])
	require.Equal(t, kafkaerr.InvalidRequest, kafkaerr.CodeOf(errs[1]))
	st, err := b.ClientQuotas(ctx, -1)
	require.NoError(t, err)
	require.True(t, st.Changed)
	require.Equal(t, []quota.Quota{{Entity: alice, Values: map[string]float64{quota.ProducerByteRate: 1 << 20}}}, st.Quotas)
	same, err := b.ClientQuotas(ctx, st.Version)
	require.NoError(t, err)
	require.Equal(t, ClientQuotasState{Version: st.Version}, same)
	sec, err := b.Security(ctx, -1)
	require.NoError(t, err)
	require.Zero(t, sec.Version, "quotas do not move the security Version")

	got, err := b.DescribeClientQuotas(ctx, quota.Filter{Components: []quota.FilterComponent{{Type: quota.TypeUser, Match: quota.MatchAny}}, Strict: true})
	require.NoError(t, err)
	require.Equal(t, st.Quotas, got)
	got, err = b.DescribeClientQuotas(ctx, quota.Filter{Components: []quota.FilterComponent{{Type: quota.TypeClientID, Match: quota.MatchAny}}})
	require.NoError(t, err)
	require.Empty(t, got)
	_, err = b.DescribeClientQuotas(ctx, quota.Filter{Components: []quota.FilterComponent{{Type: "topic"}}})
	require.Equal(t, kafkaerr.UnsupportedVersion, kafkaerr.CodeOf(err))

	errs, err = b.AlterClientQuotas(ctx, []quota.Alteration{{Entity: alice, Changes: []quota.Change{{Key: quota.ProducerByteRate, Remove: true}}}}, false)
	require.NoError(t, err)
	require.Equal(t, []error{nil}, errs)
	st2, err := b.ClientQuotas(ctx, st.Version)
	require.NoError(t, err)
	require.True(t, st2.Changed)
	require.Greater(t, st2.Version, st.Version)
	require.Empty(t, st2.Quotas)

	require.NoError(t, b.Close())
	_, err = b.ClientQuotas(ctx, -1)
	require.ErrorIs(t, err, ErrClosed)
	_, err = b.AlterClientQuotas(ctx, nil, false)
	require.ErrorIs(t, err, ErrClosed)
	_, err = b.DescribeClientQuotas(ctx, quota.Filter{})
	require.ErrorIs(t, err, ErrClosed)
}

// TestClientQuotasCluster: quotas set on a broker of a three-broker
// cluster that does not lead shard 0 are seen by every broker's
// ClientQuotas (each polls until it does), with one Version; a removal
// on another broker likewise; and they survive the restart of every
// broker.
func TestClientQuotasCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("an etcd cluster")
	}
	etcd := etcdtest.Start(t, nil)
	brokers, cfgs := clusterOf(t, etcd, 3, 2, nil)
	ctx := t.Context()
	maker := brokers[1]
	for _, b := range brokers {
		if !b.coord.Shards().Leads(0) {
			maker = b
			break
		}
	}
	alice := quota.Entity{User: quota.Component{Set: true, Name: "alice"}, ClientID: quota.Component{Set: true, Default: true}}
	ip := quota.Entity{IP: quota.Component{Set: true, Name: "192.168.0.7"}}
	errs, err := maker.AlterClientQuotas(ctx, []quota.Alteration{
		{Entity: alice, Changes: []quota.Change{{Key: quota.ConsumerByteRate, Value: 4096}, {Key: quota.RequestPercentage, Value: 50}}},
		{Entity: ip, Changes: []quota.Change{{Key: quota.ConnectionCreationRate, Value: 5}}},
	}, false)
	require.NoError(t, err)
	require.Equal(t, []error{nil, nil}, errs)

	// seen waits until every broker's ClientQuotas shows want.
	seen := func(brokers []*Broker, want func(ClientQuotasState) bool) ClientQuotasState {
		t.Helper()
		var last ClientQuotasState
		for _, b := range brokers {
			require.Eventually(t, func() bool {
				st, err := b.ClientQuotas(ctx, -1)
				if err != nil || !want(st) {
					return false
				}
				last = st
				return true
			}, 30*time.Second, 10*time.Millisecond)
		}
		return last
	}
	want := seen(brokers, func(st ClientQuotasState) bool { return len(st.Quotas) == 2 })
	require.Equal(t, []quota.Quota{
		{Entity: ip, Values: map[string]float64{quota.ConnectionCreationRate: 5}},
		{Entity: alice, Values: map[string]float64{quota.ConsumerByteRate: 4096, quota.RequestPercentage: 50}},
	}, want.Quotas)
	for _, b := range brokers {
		st, err := b.ClientQuotas(ctx, -1)
		require.NoError(t, err)
		require.Equal(t, want, st, "the same state and Version everywhere")
	}

	// A removal on another broker.
	other := brokers[0]
	if other == maker {
		other = brokers[2]
	}
	errs, err = other.AlterClientQuotas(ctx, []quota.Alteration{{Entity: ip, Changes: []quota.Change{{Key: quota.ConnectionCreationRate, Remove: true}}}}, false)
	require.NoError(t, err)
	require.Equal(t, []error{nil}, errs)
	final := seen(brokers, func(st ClientQuotasState) bool { return len(st.Quotas) == 1 })
	require.Equal(t, alice, final.Quotas[0].Entity)
	require.Greater(t, final.Version, want.Version)

	// Every broker restarts.
	for _, b := range brokers {
		require.NoError(t, b.Close())
	}
	var again []*Broker
	for _, c := range cfgs {
		b, err := Open(ctx, c)
		require.NoError(t, err)
		t.Cleanup(func() { b.Close() })
		again = append(again, b)
	}
	waitLeaders(t, again, 2)
	after := seen(again, func(st ClientQuotasState) bool { return st.Version == final.Version })
	require.Equal(t, final, after)
}

// TestClientQuotasFeatureLevel: while a broker of the cluster supports
// only diskless.version 1 (an older release), the cluster's finalized
// level stays at 1 and AlterClientQuotas is refused with
// UNSUPPORTED_VERSION on every broker, writing nothing, and the reads
// answer none (version 0) without asking shard 0's leader; once that broker
// is upgraded and UpdateFeatures raises the level to 2, quotas are set
// and seen everywhere.
func TestClientQuotasFeatureLevel(t *testing.T) {
	if testing.Short() {
		t.Skip("an etcd cluster")
	}
	etcd := etcdtest.Start(t, nil)
	bucket := memblob.OpenBucket(nil)
	t.Cleanup(func() { bucket.Close() })
	ctx := t.Context()
	var cfgs []*Config
	open := func(i int, features map[string]int) *Broker {
		c := &Config{
			Bucket: bucket, BrokerID: int32(i), Shards: 1, Linger: 5 * time.Millisecond, DataDir: t.TempDir(),
			Logger: zaptest.NewLogger(t).Named(fmt.Sprintf("broker-%d", i)),
			Cluster: &ClusterConfig{Backend: &etcdcluster.Backend{Endpoints: etcd.Endpoints()}, LeaseTTL: 2 * time.Second,
				Features: features},
		}
		if i < len(cfgs) {
			c.DataDir = cfgs[i].DataDir
			cfgs[i] = c
		} else {
			cfgs = append(cfgs, c)
		}
		b, err := Open(ctx, c)
		require.NoError(t, err)
		t.Cleanup(func() { b.Close() })
		return b
	}
	old := open(0, map[string]int{coordinator.FeatureDisklessVersion: 1})
	upgraded := open(1, nil)
	waitLeaders(t, []*Broker{old, upgraded}, 1)
	require.Equal(t, 1, upgraded.Features().Finalized[coordinator.FeatureDisklessVersion])

	alice := []quota.Alteration{{Entity: quota.Entity{User: quota.Component{Set: true, Name: "alice"}}, Changes: []quota.Change{{Key: quota.ProducerByteRate, Value: 1024}}}}
	for _, b := range []*Broker{old, upgraded} {
		for _, validateOnly := range []bool{false, true} {
			_, err := b.AlterClientQuotas(ctx, alice, validateOnly)
			require.Equal(t, kafkaerr.UnsupportedVersion, kafkaerr.CodeOf(err), "%v", err)
		}
		st, err := b.ClientQuotas(ctx, -1)
		require.NoError(t, err)
		require.Equal(t, ClientQuotasState{Changed: true, Quotas: []quota.Quota{}}, st, "nothing written")
		st, err = b.ClientQuotas(ctx, 0)
		require.NoError(t, err)
		require.Equal(t, ClientQuotasState{}, st)
		qs, err := b.DescribeClientQuotas(ctx, quota.Filter{})
		require.NoError(t, err)
		require.Empty(t, qs)
		_, err = b.DescribeClientQuotas(ctx, quota.Filter{Components: []quota.FilterComponent{{Type: "group"}}})
		require.Equal(t, kafkaerr.UnsupportedVersion, kafkaerr.CodeOf(err), "a filter is still checked")
	}
	require.Equal(t, kafkaerr.InvalidUpdateVersion, kafkaerr.CodeOf(upgraded.UpdateFeatures(ctx, map[string]int{coordinator.FeatureDisklessVersion: 2}, false)),
		"a broker does not support level 2")

	// The old broker is upgraded; the level is raised.
	require.NoError(t, old.Close())
	old = open(0, nil)
	waitLeaders(t, []*Broker{old, upgraded}, 1)
	require.Eventually(t, func() bool {
		return upgraded.UpdateFeatures(ctx, map[string]int{coordinator.FeatureDisklessVersion: 2}, false) == nil
	}, 30*time.Second, 20*time.Millisecond, "every live broker supports level 2")
	require.Eventually(t, func() bool {
		return upgraded.Features().Finalized[coordinator.FeatureDisklessVersion] == 2 && old.Features().Finalized[coordinator.FeatureDisklessVersion] == 2
	}, 30*time.Second, 20*time.Millisecond)
	errs, err := upgraded.AlterClientQuotas(ctx, alice, false)
	require.NoError(t, err)
	require.Equal(t, []error{nil}, errs)
	require.Eventually(t, func() bool {
		st, err := old.ClientQuotas(ctx, -1)
		return err == nil && len(st.Quotas) == 1
	}, 30*time.Second, 10*time.Millisecond)
}
