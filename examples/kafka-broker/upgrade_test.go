package main

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/diskless-go/diskless/cluster"
	"github.com/diskless-go/diskless/internal/kafkatest"
)

// TestRollingUpgrade upgrades a three-node cluster one node at a time
// under a franz-go producer and consumer group: the nodes start as an
// older release (kept to version 1 of the commit call between nodes,
// -peer-versions commit=1) and are stopped and started again as this
// release one after another, so that for a while nodes of both releases
// forward commits to each other, each in the version its leader speaks.
// Each node advertises what it speaks in etcd; no record the producer
// sent fails (the clients retry what is retriable), and every
// acknowledged record is consumed.
func TestRollingUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, an S3 server and three broker processes")
	}
	older := []string{"-peer-versions", "commit=1"}
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

	progress(300)
	want := map[int32]int{0: 1, 1: 1, 2: 1}
	for i, p := range c.procs {
		t.Logf("upgrading node %d at %d acknowledged, %d consumed", i, l.ackCount(), l.consumedCount())
		p.stop()
		c.procs[i] = startBrokerAt(t, p.addr, p.data, p.bucket, slices.DeleteFunc(slices.Clone(p.extra), func(a string) bool {
			return slices.Contains(older, a)
		})...)
		c.waitNodes(3)
		want[int32(i)] = 2
		require.Eventually(t, func() bool { return maps.Equal(commitVersions(), want) }, 30*time.Second, 100*time.Millisecond)
		progress(300)
	}
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
