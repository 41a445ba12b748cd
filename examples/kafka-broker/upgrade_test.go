package main

import (
	"context"
	"encoding/json"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/diskless-go/diskless/cluster"
	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/internal/kafkatest"
	"github.com/diskless-go/diskless/kafkaerr"
)

// TestRollingUpgrade upgrades a three-node cluster one node at a time
// under a franz-go producer and consumer group: the nodes start as an
// older release (kept to version 1 of the commit call between nodes,
// -peer-versions commit=1) and are stopped and started again as this
// release one after another, so that for a while nodes of both releases
// forward commits to each other, each in the version its leader speaks.
// Each node advertises what it speaks in etcd; the cluster's feature
// level (diskless.version) stays at the older release's 1 while a node
// of it runs, UpdateFeatures to 2 being refused, and rises once every
// node supports 2 (client quotas, refused until then, are then set); a
// node of the older release can then no longer join.
// No record the producer sent fails (the clients retry what is
// retriable), and every acknowledged record is consumed.
func TestRollingUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, an S3 server and three broker processes")
	}
	older := []string{"-peer-versions", "commit=1", "-features", "diskless.version=1"}
	c := startCluster(t, 3, nil, older...)
	etcd := c.etcd.Client(t)
	// commitVersions returns the highest commit version each live node
	// advertises.
	commitVersions := func() map[int32]int {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		resp, err := etcd.Get(ctx, "diskless/members/", clientv3.WithPrefix())
		require.NoError(t, err)
		out := map[int32]int{}
		for _, kv := range resp.Kvs {
			var m cluster.Member
			require.NoError(t, json.Unmarshal(kv.Value, &m))
			out[m.ID] = m.Speaks["commit"]
		}
		return out
	}
	require.Equal(t, map[int32]int{0: 1, 1: 1, 2: 1}, commitVersions())

	const topic, group, partitions = "events", "readers", 6
	admin := c.procs[0].client(t)
	kafkatest.CreateTopic(t, admin, topic, partitions, nil)
	l := &clusterLog{}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan struct{}, 4)
	for m := range 3 {
		go func() {
			defer func() { done <- struct{}{} }()
			franzClients{}.consume(t, ctx, c.addrs(), topic, group, m, l)
		}()
	}
	stop := make(chan struct{})
	go func() {
		defer func() { done <- struct{}{} }()
		franzClients{}.produce(t, c.addrs(), topic, partitions, l, stop)
	}()
	progress := func(n int) {
		t.Helper()
		acks, consumed := l.ackCount()+n, l.consumedCount()+n
		require.Eventually(t, func() bool { return l.ackCount() >= acks && l.consumedCount() >= consumed }, 60*time.Second, 50*time.Millisecond,
			"%d acknowledged and %d consumed (now %d and %d)", acks, consumed, l.ackCount(), l.consumedCount())
	}

	// updateFeatures asks node i to raise diskless.version to 2.
	updateFeatures := func(i int) *kmsg.UpdateFeaturesResponse {
		req := kmsg.NewPtrUpdateFeaturesRequest()
		u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		u.Feature, u.MaxVersionLevel, u.UpgradeType = coordinator.FeatureDisklessVersion, 2, 1
		req.FeatureUpdates = append(req.FeatureUpdates, u)
		resp, err := req.RequestWith(t.Context(), c.procs[i].client(t))
		require.NoError(t, err)
		return resp
	}
	// finalized returns the level of diskless.version node i's ApiVersions
	// names finalized.
	finalized := func(i int) int16 {
		resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(t.Context(), c.procs[i].client(t))
		require.NoError(t, err)
		for _, f := range resp.FinalizedFeatures {
			if f.Name == coordinator.FeatureDisklessVersion {
				return f.MaxVersionLevel
			}
		}
		return 0
	}
	require.Equal(t, int16(1), finalized(0), "the older release's level")
	// alterQuota sets a client quota through node i and returns the
	// entry's error code.
	alterQuota := func(i int) int16 {
		req := kmsg.NewPtrAlterClientQuotasRequest()
		e := kmsg.NewAlterClientQuotasRequestEntry()
		e.Entity = []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "user", Name: kmsg.StringPtr("upgraded")}}
		e.Ops = []kmsg.AlterClientQuotasRequestEntryOp{{Key: "producer_byte_rate", Value: 1 << 20}}
		req.Entries = append(req.Entries, e)
		resp, err := req.RequestWith(t.Context(), c.procs[i].client(t))
		require.NoError(t, err)
		require.Len(t, resp.Entries, 1)
		return resp.Entries[0].ErrorCode
	}
	require.Equal(t, int16(kafkaerr.UnsupportedVersion), alterQuota(1), "client quota records wait for level 2")

	progress(300)
	want := map[int32]int{0: 1, 1: 1, 2: 1}
	for i, p := range c.procs {
		t.Logf("upgrading node %d at %d acknowledged, %d consumed", i, l.ackCount(), l.consumedCount())
		p.stop()
		c.procs[i] = startBrokerAt(t, p.addr, p.data, p.bucket, slices.DeleteFunc(slices.Clone(p.extra), func(a string) bool {
			return slices.Contains(older, a)
		})...)
		c.waitNodes(3)
		want[int32(i)] = coordinator.PeerVersions(nil)["commit"] // this release's
		require.Eventually(t, func() bool { return maps.Equal(commitVersions(), want) }, 30*time.Second, 100*time.Millisecond)
		progress(300)
		if i < len(c.procs)-1 {
			resp := updateFeatures(i)
			require.Equal(t, int16(kafkaerr.InvalidUpdateVersion), resp.ErrorCode, "a node of the older release still runs")
			require.Equal(t, int16(1), finalized(i))
		}
	}
	resp := updateFeatures(0)
	require.Zero(t, resp.ErrorCode, "every node speaks level 2: %v", resp.ErrorMessage)
	for i := range c.procs {
		require.Eventually(t, func() bool { return finalized(i) == 2 }, 10*time.Second, 50*time.Millisecond, "node %d sees level 2", i)
	}
	require.Zero(t, alterQuota(1), "level 2: client quotas are written")
	require.Eventually(t, func() bool {
		resp, err := kmsg.NewPtrDescribeClientQuotasRequest().RequestWith(t.Context(), c.procs[2].client(t))
		return err == nil && resp.ErrorCode == 0 && len(resp.Entries) == 1
	}, 10*time.Second, 50*time.Millisecond, "seen by another node")
	// A node of the older release can no longer join: it exits, saying why.
	ctx, cancelLate := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancelLate()
	late := exec.CommandContext(ctx, brokerBin, append([]string{"-addr", "127.0.0.1:0", "-data", t.TempDir(), "-bucket", c.procs[0].bucket,
		"-node-id", "7", "-etcd", strings.Join(c.etcd.Endpoints(), ",")}, older...)...)
	out, err := late.CombinedOutput()
	require.Error(t, err, "a node of the older release joined a cluster finalized at a level it does not support: %s", out)
	require.Contains(t, string(out), "finalized at level 2")
	close(stop)
	require.Eventually(t, func() bool { return l.missing() == 0 }, 90*time.Second, 50*time.Millisecond, "every acknowledged record consumed")
	cancel()
	for range 4 {
		<-done
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	require.Empty(t, l.errs, "no record failed")
}
