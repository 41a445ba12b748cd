package kafkaserver

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/diskless-go/diskless/internal/kafkatest"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// convertHarness runs franz-go members of one group over a topic of four
// partitions, some of the classic protocol and some of the consumer
// protocol, and tracks what each owns and consumes.
type convertHarness struct {
	t       *testing.T
	p       *testBroker
	mu      sync.Mutex
	owned   map[string]map[int32]bool // member name -> partitions
	seen    map[string]int            // record value -> times consumed
	changed chan struct{}
	members map[string]*kgo.Client
	wg      sync.WaitGroup
}

// start starts the member name; consumer says whether it uses the
// consumer protocol (a server-side balancer). Each member commits what
// it consumed after each poll, and what it gives up before it does.
func (h *convertHarness) start(ctx context.Context, name string, consumer bool, opts ...kgo.Opt) {
	h.mu.Lock()
	h.owned[name] = map[int32]bool{}
	h.mu.Unlock()
	update := func(ps map[string][]int32, on bool) {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, p := range ps["events"] {
			if on {
				h.owned[name][p] = true
			} else {
				delete(h.owned[name], p)
			}
		}
		h.notify()
	}
	opts = append([]kgo.Opt{
		kgo.ConsumerGroup("g"), kgo.ConsumeTopics("events"), kgo.DisableAutoCommit(),
		kgo.HeartbeatInterval(200 * time.Millisecond), kgo.FetchMaxWait(300 * time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { update(ps, true) }),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, ps map[string][]int32) {
			_ = cl.CommitUncommittedOffsets(ctx)
			update(ps, false)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { update(ps, false) }),
	}, opts...)
	if consumer {
		opts = append(opts, kgo.ServerSideBalancer())
	}
	cl := h.p.client(h.t, opts...)
	h.members[name] = cl
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		for {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil || fs.IsClientClosed() {
				return
			}
			h.mu.Lock()
			for _, r := range fs.Records() {
				h.seen[string(r.Value)]++
			}
			h.notify()
			h.mu.Unlock()
			_ = cl.CommitUncommittedOffsets(ctx)
		}
	}()
}

func (h *convertHarness) notify() {
	select {
	case h.changed <- struct{}{}:
	default:
	}
}

// waitFor waits until cond holds (called with h.mu held).
func (h *convertHarness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	timeout := time.After(60 * time.Second)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		h.mu.Lock()
		ok := cond()
		h.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-h.changed:
		case <-tick.C:
		case <-timeout:
			h.mu.Lock()
			defer h.mu.Unlock()
			h.t.Fatalf("waiting for %s: owned %v, %d records seen", what, h.owned, len(h.seen))
		}
	}
}

// split reports whether the members named own, between them, each of
// the four partitions exactly once, each owning at least one.
func (h *convertHarness) split(names ...string) bool {
	count := map[int32]int{}
	for _, n := range names {
		if len(h.owned[n]) == 0 {
			return false
		}
		for p := range h.owned[n] {
			count[p]++
		}
	}
	for p := range int32(4) {
		if count[p] != 1 {
			return false
		}
	}
	for n, ps := range h.owned {
		if len(ps) > 0 && !contains(names, n) {
			return false
		}
	}
	return true
}

func contains(names []string, n string) bool {
	for _, m := range names {
		if m == n {
			return true
		}
	}
	return false
}

// TestGroupConversionClients moves a group of franz-go members from the
// classic protocol to the consumer protocol and back, as a rolling
// upgrade and its rollback would: two classic members (cooperative-sticky,
// franz-go's default) share the partitions; a member of the consumer
// protocol joins, the group becomes a consumer group and the three share
// them, the classic members served through their JoinGroup and SyncGroup;
// it leaves, and the group is classic again, the two sharing them. Every
// record produced in each phase is consumed.
func TestGroupConversionClients(t *testing.T) {
	p := startBroker(t, &Config{GroupInitialRebalanceDelay: -1, ConsumerGroupHeartbeatInterval: 200 * time.Millisecond})
	admin := p.client(t)
	kafkatest.CreateTopic(t, admin, "events", 4, nil)
	h := &convertHarness{t: t, p: p, owned: map[string]map[int32]bool{}, seen: map[string]int{}, changed: make(chan struct{}, 1),
		members: map[string]*kgo.Client{}}
	ctx, cancel := context.WithCancel(t.Context())
	defer func() {
		cancel()
		for _, cl := range h.members {
			cl.Close()
		}
		h.wg.Wait()
	}()
	round := 0
	produce := func() {
		round++
		produceRound(t, p, "events", 4, round, 40)
		h.waitFor(fmt.Sprintf("round %d consumed", round), func() bool {
			for i := range 40 {
				if h.seen[fmt.Sprintf("round %d record %04d", round, i)] == 0 {
					return false
				}
			}
			return true
		})
	}

	h.start(ctx, "c0", false)
	h.start(ctx, "c1", false)
	h.waitFor("the classic members to share the partitions", func() bool { return h.split("c0", "c1") })
	produce()
	require.Equal(t, "consumer", describeClassic(t, admin, "g").ProtocolType)

	h.start(ctx, "n2", true)
	h.waitFor("the three to share the partitions", func() bool { return h.split("c0", "c1", "n2") })
	d := describeConsumer(t, admin, "g")
	require.Zero(t, d.ErrorCode, "a consumer group now")
	require.Len(t, d.Members, 3)
	produce()

	h.members["n2"].Close()
	h.waitFor("the classic members to share the partitions again", func() bool { return h.split("c0", "c1") })
	require.Eventually(t, func() bool {
		dg := describeClassic(t, admin, "g")
		return dg.ErrorCode == 0 && dg.State == "Stable" && len(dg.Members) == 2
	}, 30*time.Second, 100*time.Millisecond, "a classic group again")
	produce()
}
