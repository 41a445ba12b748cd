package kafkaserver

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless/internal/kafkatest"
)

// TestConsumerGroup runs a group of two franz-go consumers over a topic of
// six partitions, three rounds: each member gets three partitions, the
// two consume every record of the round exactly once, commit and leave.
// The second round is a new pair of members, the third a new pair after
// the broker process restarted on the same data folder and bucket: each
// starts where the previous committed, so it sees its round's records and
// no other.
func TestConsumerGroup(t *testing.T) {
	testConsumerGroup(t, &Config{GroupInitialRebalanceDelay: 300 * time.Millisecond})
}

// TestConsumerGroupKIP848 is TestConsumerGroup with the consumer group
// protocol of KIP-848: the broker assigns the partitions, the franz-go
// members (kgo.ServerSideBalancer) heartbeat with
// ConsumerGroupHeartbeat and reconcile.
func TestConsumerGroupKIP848(t *testing.T) {
	var heartbeats, joins atomic.Int64
	hook := requestHook(func(key int16) {
		switch key {
		case int16(kmsg.ConsumerGroupHeartbeat):
			heartbeats.Add(1)
		case int16(kmsg.JoinGroup):
			joins.Add(1)
		}
	})
	testConsumerGroup(t, &Config{ConsumerGroupHeartbeatInterval: 100 * time.Millisecond}, kgo.ServerSideBalancer(), kgo.WithHooks(hook))
	require.Positive(t, heartbeats.Load())
	require.Zero(t, joins.Load(), "no member used the classic protocol")
}

// requestHook is a franz-go hook that reports the API key of each request
// written.
type requestHook func(key int16)

// OnBrokerWrite implements kgo.HookBrokerWrite.
func (h requestHook) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err == nil {
		h(key)
	}
}

func testConsumerGroup(t *testing.T, cfg *Config, opts ...kgo.Opt) {
	p := startBroker(t, cfg)
	const topic, group, partitions, perRound = "orders", "billing", 6, 600
	kafkatest.CreateTopic(t, p.client(t), topic, partitions, nil)

	for round := 1; round <= 3; round++ {
		if round == 3 {
			p.stop()
			p = p.restart()
			requireCommitted(t, p, group, topic, partitions, 2*perRound/partitions)
		}
		recs := consumeInGroup(t, p, group, topic, partitions, perRound, func() { produceRound(t, p, topic, partitions, round, perRound) }, opts...)
		var values []string
		for _, r := range recs {
			values = append(values, string(r.Value))
		}
		slices.Sort(values)
		var want []string
		for i := range perRound {
			want = append(want, fmt.Sprintf("round %d record %04d", round, i))
		}
		require.Equal(t, want, values, "round %d: every record of the round once, no other", round)
		requireCommitted(t, p, group, topic, partitions, int64(round*perRound/partitions))
	}
}

// produceRound produces n records of a round, spread evenly over the
// partitions.
func produceRound(t *testing.T, p *testBroker, topic string, partitions, round, n int) {
	cl := p.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(topic))
	defer cl.Close()
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Partition: int32(i % partitions), Value: fmt.Appendf(nil, "round %d record %04d", round, i)})
	}
	require.NoError(t, cl.ProduceSync(t.Context(), rs...).FirstErr())
}

// consumeInGroup starts a member of group, waits until it holds every
// partition, starts a second and waits until the rebalance gives each
// half the partitions, calls produce, consumes n records with the two,
// commits what each consumed, and closes them (they leave the group).
// opts are more options of the members.
func consumeInGroup(t *testing.T, p *testBroker, group, topic string, partitions, n int, produce func(), opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	var mu sync.Mutex
	owned := map[int]map[int32]bool{} // member -> partitions
	var recs []*kgo.Record
	consumedBy := map[int32]int{} // partition -> member
	changed := make(chan struct{}, 1)
	notify := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var members []*kgo.Client
	var wg sync.WaitGroup
	start := func(m int) {
		mu.Lock()
		owned[m] = map[int32]bool{}
		mu.Unlock()
		update := func(ps map[string][]int32, on bool) {
			mu.Lock()
			defer mu.Unlock()
			for _, p := range ps[topic] {
				if on {
					owned[m][p] = true
				} else {
					delete(owned[m], p)
				}
			}
			notify()
		}
		cl := p.client(t, append([]kgo.Opt{
			kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
			kgo.HeartbeatInterval(250 * time.Millisecond), kgo.FetchMaxWait(500 * time.Millisecond),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { update(ps, true) }),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { update(ps, false) }),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { update(ps, false) }),
		}, opts...)...)
		members = append(members, cl)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				fs := cl.PollFetches(ctx)
				if ctx.Err() != nil {
					return
				}
				fs.EachError(func(topic string, p int32, err error) { t.Errorf("member %d fetching %s-%d: %v", m, topic, p, err) })
				mu.Lock()
				for _, r := range fs.Records() {
					if prev, ok := consumedBy[r.Partition]; ok && prev != m {
						t.Errorf("partition %d consumed by members %d and %d", r.Partition, prev, m)
					}
					consumedBy[r.Partition] = m
					recs = append(recs, r)
				}
				notify()
				mu.Unlock()
			}
		}()
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			mu.Lock()
			ok := cond()
			mu.Unlock()
			if ok {
				return
			}
			select {
			case <-changed:
			case <-timeout:
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("waiting for %s: owned %v, %d records", what, owned, len(recs))
			}
		}
	}
	start(0)
	waitFor("the first member to own every partition", func() bool { return len(owned[0]) == partitions })
	start(1)
	waitFor("each member to own half the partitions", func() bool {
		return len(owned[0]) == partitions/2 && len(owned[1]) == partitions/2
	})
	produce()
	waitFor(fmt.Sprintf("%d records", n), func() bool { return len(recs) >= n })
	cancel()
	wg.Wait()
	require.Len(t, recs, n)
	for _, cl := range members {
		require.NoError(t, cl.CommitUncommittedOffsets(t.Context()))
	}
	for _, cl := range members {
		cl.Close()
	}
	return recs
}

// requireCommitted checks that group has committed offset want on every
// partition of topic.
func requireCommitted(t *testing.T, p *testBroker, group, topic string, partitions int, want int64) {
	t.Helper()
	cl := p.client(t)
	defer cl.Close()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	resp, err := req.RequestWith(t.Context(), cl)
	require.NoError(t, err)
	require.NoError(t, kerr.ErrorForCode(resp.ErrorCode))
	require.Len(t, resp.Topics, 1)
	require.Equal(t, topic, resp.Topics[0].Topic)
	var got []string
	for _, p := range resp.Topics[0].Partitions {
		require.NoError(t, kerr.ErrorForCode(p.ErrorCode))
		got = append(got, fmt.Sprintf("%d:%d", p.Partition, p.Offset))
	}
	var exp []string
	for i := range partitions {
		exp = append(exp, fmt.Sprintf("%d:%d", i, want))
	}
	require.Equal(t, strings.Join(exp, " "), strings.Join(got, " "))
}
