package main

import (
	"context"
	"crypto/rand"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/diskless-go/diskless/internal/kafkatest"
)

// throttleHooks counts the throttles each node answered a client with.
type throttleHooks struct {
	mu     sync.Mutex
	byNode map[int32]int
	first  map[int32]time.Time // real time: when each node first throttled, for the log
	lost   atomic.Int64        // connections lost
}

var (
	_ kgo.HookBrokerThrottle   = (*throttleHooks)(nil)
	_ kgo.HookBrokerDisconnect = (*throttleHooks)(nil)
)

func (h *throttleHooks) OnBrokerDisconnect(kgo.BrokerMetadata, net.Conn) { h.lost.Add(1) }

func (h *throttleHooks) OnBrokerThrottle(m kgo.BrokerMetadata, d time.Duration, _ bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if d > 0 {
		h.byNode[m.NodeID]++
		if _, ok := h.first[m.NodeID]; !ok {
			h.first[m.NodeID] = time.Now()
		}
	}
}

func (h *throttleHooks) nodes() map[int32]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[int32]int{}
	for k, v := range h.byNode {
		out[k] = v
	}
	return out
}

// TestClusterQuotas: a produce quota set with AlterClientQuotas on one
// node of three, while a producer of that client ID writes to partitions
// led by every node, is enforced by every node (each its own share, as
// Kafka's per-broker quotas): each answers it with throttles, and it is
// never disconnected; a producer of another client ID is not throttled. The time from the change to the first throttle of the other
// nodes is logged (a few hundred milliseconds: the quota refresh).
func TestClusterQuotas(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, an S3 server and three broker processes")
	}
	c := startCluster(t, 3, nil)
	admin := c.procs[0].client(t)
	const topic = "metered"
	kafkatest.CreateTopic(t, admin, topic, 6, nil)
	limited := "limited"
	var produced atomic.Int64
	// One producer per node, each to a partition that node leads, so
	// that a throttle of one node does not slow the traffic of another.
	md, err := kadm.NewClient(admin).Metadata(t.Context(), topic)
	require.NoError(t, err)
	leads := map[int32]int32{} // node: a partition it leads
	for _, p := range md.Topics[topic].Partitions {
		leads[p.Leader] = p.Partition
	}
	require.Len(t, leads, 3, "every node leads a partition")
	produce := func(clientID string, partition int32, hooks *throttleHooks, stop <-chan struct{}) {
		cl := c.procs[2].client(t, kgo.SeedBrokers(c.addrs()...), kgo.ClientID(clientID), kgo.WithHooks(hooks),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(topic))
		value := make([]byte, 16<<10)
		_, _ = rand.Read(value) // incompressible: the quota counts the request's bytes
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if clientID == limited {
				produced.Add(1)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: value, Partition: partition}).FirstErr()
			cancel()
			if err != nil && t.Context().Err() == nil {
				t.Errorf("%s: %v", clientID, err)
				return
			}
		}
	}
	limitedHooks, freeHooks := &throttleHooks{byNode: map[int32]int{}, first: map[int32]time.Time{}}, &throttleHooks{byNode: map[int32]int{}, first: map[int32]time.Time{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, p := range leads {
		wg.Go(func() { produce(limited, p, limitedHooks, stop) })
		wg.Go(func() { produce("free", p, freeHooks, stop) })
	}
	time.Sleep(3 * time.Second) // unthrottled: the rates' windows fill at full speed
	require.Empty(t, limitedHooks.nodes(), "no quota yet")
	res, err := kadm.NewClient(admin).AlterClientQuotas(t.Context(), []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &limited}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 32 << 10}},
	}})
	require.NoError(t, err)
	for _, r := range res {
		require.NoError(t, r.Err)
	}
	changedAt := time.Now() // real time: logged, not asserted
	require.Eventually(t, func() bool {
		n := limitedHooks.nodes()
		return n[0] > 0 && n[1] > 0 && n[2] > 0
	}, 60*time.Second, 100*time.Millisecond, "every node throttles the limited client (throttles by node: %v)", limitedHooks.nodes())
	limitedHooks.mu.Lock()
	for n, at := range limitedHooks.first {
		t.Logf("node %d first throttled %v after the change on node 0", n, at.Sub(changedAt).Round(time.Millisecond))
	}
	limitedHooks.mu.Unlock()
	t.Logf("throttles by node: %v; %d records produced", limitedHooks.nodes(), produced.Load())
	require.Zero(t, limitedHooks.lost.Load(), "the throttled client keeps its connections")
	close(stop)
	wg.Wait()
	require.Empty(t, freeHooks.nodes(), "the other client ID is not throttled")
}
