package kafkaserver

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/internal/kafkatest"
)

// staticHarness drives the KIP-848 coordinator of a groups by hand, in a
// synctest bubble, over one topic of four partitions.
type staticHarness struct {
	*groupHarness
	topic  uuid.UUID
	topics []diskless.TopicDescription
}

func newStaticHarness(t *testing.T) *staticHarness {
	h := &staticHarness{groupHarness: newGroupHarness(t, groupOptions{ConsumerSession: session}), topic: uuid.New()}
	td := diskless.TopicDescription{Name: "events", ID: h.topic}
	td.Config.Partitions = 4
	h.topics = []diskless.TopicDescription{td}
	return h
}

// hb sends a heartbeat of member id at epoch, naming instance (""
// none), reporting owned (nil: unchanged); a join (epoch 0) subscribes
// to the topic.
func (h *staticHarness) hb(id, instance string, epoch int32, owned []int32) *kmsg.ConsumerGroupHeartbeatResponse {
	h.t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version, req.Group, req.MemberID, req.MemberEpoch = 1, "g", id, epoch
	if instance != "" {
		req.InstanceID = &instance
	}
	if owned != nil {
		rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
		rt.TopicID, rt.Partitions = h.topic, owned
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{rt}
	}
	if epoch == 0 {
		req.SubscribedTopicNames = []string{"events"}
		req.RebalanceTimeoutMillis = 60000
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	}
	return h.gs.consumerHeartbeat(req, h.topics, "client", "/127.0.0.1").(*kmsg.ConsumerGroupHeartbeatResponse)
}

// partitions returns the partitions of an answer's assignment, nil when
// it carries none.
func partitions(resp *kmsg.ConsumerGroupHeartbeatResponse) []int32 {
	if resp.Assignment == nil {
		return nil
	}
	out := []int32{}
	for _, t := range resp.Assignment.Topics {
		out = append(out, t.Partitions...)
	}
	slices.Sort(out)
	return out
}

// describe returns the group's ConsumerGroupDescribe entry.
func (h *staticHarness) describe() kmsg.ConsumerGroupDescribeResponseGroup {
	h.t.Helper()
	d := kmsg.NewConsumerGroupDescribeResponseGroup()
	require.True(h.t, h.gs.consumerDescribe("g", &d))
	return d
}

// describedMember is what the test checks of a described member.
type describedMember struct {
	id, instance string
	epoch        int32
	assigned     []int32
}

func (h *staticHarness) members() []describedMember {
	h.t.Helper()
	var out []describedMember
	for _, m := range h.describe().Members {
		dm := describedMember{id: m.MemberID, epoch: m.MemberEpoch, assigned: []int32{}}
		if m.InstanceID != nil {
			dm.instance = *m.InstanceID
		}
		for _, tp := range m.Assignment.TopicPartitions {
			dm.assigned = append(dm.assigned, tp.Partitions...)
		}
		out = append(out, dm)
	}
	return out
}

// stable brings static members a (instance i-a) and b (i-b) to group
// epoch 2, a with partitions 0 and 1, b with 2 and 3.
func (h *staticHarness) stable() {
	h.t.Helper()
	r := h.hb("a", "i-a", 0, nil)
	require.Zero(h.t, r.ErrorCode)
	require.Equal(h.t, []int32{0, 1, 2, 3}, partitions(r))
	r = h.hb("b", "i-b", 0, nil)
	require.Zero(h.t, r.ErrorCode)
	require.Equal(h.t, int32(2), r.MemberEpoch)
	require.Equal(h.t, []int32{0, 1}, partitions(h.hb("a", "", 1, []int32{0, 1, 2, 3})))
	require.Equal(h.t, int32(2), h.hb("a", "", 1, []int32{0, 1}).MemberEpoch)
	require.Equal(h.t, []int32{2, 3}, partitions(h.hb("b", "", 2, []int32{})))
	require.Equal(h.t, []describedMember{
		{id: "a", instance: "i-a", epoch: 2, assigned: []int32{0, 1}},
		{id: "b", instance: "i-b", epoch: 2, assigned: []int32{2, 3}},
	}, h.members())
}

// TestConsumerStaticErrors: a join with the instance ID of a member that
// has not left is UNRELEASED_INSTANCE_ID, whatever its member ID, and
// changes nothing; a heartbeat naming an instance ID with another member
// ID is FENCED_INSTANCE_ID, one naming an unknown instance ID
// UNKNOWN_MEMBER_ID; a leave with -2 without an instance ID is
// INVALID_REQUEST.
func TestConsumerStaticErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newStaticHarness(t)
		h.stable()
		require.Equal(t, kerr.UnreleasedInstanceID.Code, h.hb("c", "i-a", 0, nil).ErrorCode)
		require.Equal(t, kerr.UnreleasedInstanceID.Code, h.hb("a", "i-a", 0, nil).ErrorCode)
		d := h.describe()
		require.Equal(t, int32(2), d.Epoch)
		require.Equal(t, "Stable", d.State)
		require.Len(t, d.Members, 2)

		require.Equal(t, kerr.FencedInstanceID.Code, h.hb("c", "i-a", 2, nil).ErrorCode)
		require.Equal(t, kerr.FencedInstanceID.Code, h.hb("b", "i-a", 2, nil).ErrorCode)
		require.Equal(t, kerr.UnknownMemberID.Code, h.hb("a", "i-x", 2, nil).ErrorCode)
		require.Equal(t, kerr.FencedInstanceID.Code, h.hb("c", "i-a", -2, nil).ErrorCode)
		require.Equal(t, kerr.UnknownMemberID.Code, h.hb("c", "i-x", -2, nil).ErrorCode)
		require.Equal(t, kerr.InvalidRequest.Code, h.hb("a", "", -2, nil).ErrorCode)
		r := h.hb("a", "i-a", 2, nil)
		require.Zero(t, r.ErrorCode)
		require.Equal(t, int32(2), r.MemberEpoch)
		require.Equal(t, int32(2), h.describe().Epoch)
	})
}

// TestConsumerStaticRejoin: a static member that leaves with -2 is kept
// at that epoch with its partitions, and the group epoch stays; a member
// joining with its instance ID takes its place with its own member ID and
// the old one's partitions at once, at the same epoch; the old member ID
// is then fenced by instance ID, and unknown by member ID.
func TestConsumerStaticRejoin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newStaticHarness(t)
		h.stable()
		r := h.hb("a", "i-a", -2, nil)
		require.Zero(t, r.ErrorCode)
		require.Equal(t, int32(-2), r.MemberEpoch)
		require.Equal(t, "a", *r.MemberID)
		d := h.describe()
		require.Equal(t, int32(2), d.Epoch)
		require.Equal(t, "Reconciling", d.State, "as Kafka 4: a member at epoch -2 is not at the target epoch")
		require.Equal(t, []describedMember{
			{id: "a", instance: "i-a", epoch: -2, assigned: []int32{0, 1}},
			{id: "b", instance: "i-b", epoch: 2, assigned: []int32{2, 3}},
		}, h.members())
		// b is not given a's partitions; a's old epoch is fenced.
		r = h.hb("b", "", 2, []int32{2, 3})
		require.Zero(t, r.ErrorCode)
		require.Equal(t, int32(2), r.MemberEpoch)
		require.Equal(t, []int32{2, 3}, partitions(r))
		require.Equal(t, kerr.FencedMemberEpoch.Code, h.hb("a", "", 2, nil).ErrorCode)

		time.Sleep(session / 2)
		require.Zero(t, h.hb("b", "", 2, nil).ErrorCode)
		r = h.hb("a2", "i-a", 0, nil)
		require.Zero(t, r.ErrorCode)
		require.Equal(t, "a2", *r.MemberID)
		require.Equal(t, int32(2), r.MemberEpoch)
		require.Equal(t, []int32{0, 1}, partitions(r))
		require.Equal(t, int32(2), h.describe().Epoch)
		require.Equal(t, []describedMember{
			{id: "a2", instance: "i-a", epoch: 2, assigned: []int32{0, 1}},
			{id: "b", instance: "i-b", epoch: 2, assigned: []int32{2, 3}},
		}, h.members())
		require.Equal(t, kerr.FencedInstanceID.Code, h.hb("a", "i-a", 2, nil).ErrorCode)
		require.Equal(t, kerr.UnknownMemberID.Code, h.hb("a", "", 2, nil).ErrorCode)
		require.Equal(t, kerr.UnreleasedInstanceID.Code, h.hb("a3", "i-a", 0, nil).ErrorCode)

		// The new member's session is its own: past the old one's, it
		// stays.
		time.Sleep(session/2 + time.Second)
		require.Zero(t, h.hb("b", "", 2, nil).ErrorCode)
		r = h.hb("a2", "", 2, []int32{0, 1})
		require.Zero(t, r.ErrorCode)
		require.Equal(t, int32(2), r.MemberEpoch)
		require.Equal(t, int32(2), h.describe().Epoch)
	})
}

// TestConsumerStaticExpires: a static member that left with -2 and does
// not come back is removed when its session, running from its last
// heartbeat, expires; then the group epoch moves on and the others get
// its partitions.
func TestConsumerStaticExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newStaticHarness(t)
		h.stable()
		time.Sleep(session / 2)
		require.Zero(t, h.hb("b", "", 2, nil).ErrorCode)
		require.Zero(t, h.hb("a", "i-a", -2, nil).ErrorCode)
		time.Sleep(session/2 - time.Second)
		require.Zero(t, h.hb("b", "", 2, nil).ErrorCode)
		require.Len(t, h.members(), 2) // a's session has not ended yet
		time.Sleep(2 * time.Second)
		synctest.Wait()
		require.Equal(t, []describedMember{{id: "b", instance: "i-b", epoch: 2, assigned: []int32{2, 3}}}, h.members())
		require.Equal(t, int32(3), h.describe().Epoch)
		r := h.hb("b", "", 2, []int32{2, 3})
		require.Zero(t, r.ErrorCode)
		require.Equal(t, int32(3), r.MemberEpoch)
		require.Equal(t, []int32{0, 1, 2, 3}, partitions(r))

		// The instance ID is free: a join with it is a new member, and a
		// new group epoch.
		r = h.hb("a2", "i-a", 0, nil)
		require.Zero(t, r.ErrorCode)
		require.Equal(t, int32(4), h.describe().Epoch)
	})
}

// TestConsumerStaticRejoinSameID: a static member that left with -2 and
// joins again with the same member ID gets its partitions back, with no
// new group epoch.
func TestConsumerStaticRejoinSameID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newStaticHarness(t)
		h.stable()
		require.Zero(t, h.hb("b", "i-b", -2, nil).ErrorCode)
		r := h.hb("b", "i-b", 0, nil)
		require.Zero(t, r.ErrorCode)
		require.Equal(t, int32(2), r.MemberEpoch)
		require.Equal(t, []int32{2, 3}, partitions(r))
		require.Equal(t, int32(2), h.describe().Epoch)
		require.Equal(t, "Stable", h.describe().State)
	})
}

// TestConsumerStaticLeaveRevoking: a static member that leaves with -2
// while it gives up partitions keeps the rest; those it was giving up go
// to the member they are for.
func TestConsumerStaticLeaveRevoking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newStaticHarness(t)
		require.Equal(t, []int32{0, 1, 2, 3}, partitions(h.hb("a", "i-a", 0, nil)))
		require.Zero(t, h.hb("b", "i-b", 0, nil).ErrorCode)
		require.Equal(t, []int32{0, 1}, partitions(h.hb("a", "", 1, []int32{0, 1, 2, 3}))) // giving up 2 and 3
		require.Empty(t, partitions(h.hb("b", "", 2, []int32{})))
		require.Zero(t, h.hb("a", "i-a", -2, nil).ErrorCode)
		require.Equal(t, []int32{2, 3}, partitions(h.hb("b", "", 2, []int32{})))
		require.Equal(t, []describedMember{
			{id: "a", instance: "i-a", epoch: -2, assigned: []int32{0, 1}},
			{id: "b", instance: "i-b", epoch: 2, assigned: []int32{2, 3}},
		}, h.members())
	})
}

// TestConsumerStaticLeave: a static member that leaves with -1 leaves at
// once, and its instance ID is free.
func TestConsumerStaticLeave(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newStaticHarness(t)
		h.stable()
		require.Zero(t, h.hb("a", "i-a", -1, nil).ErrorCode)
		require.Equal(t, int32(3), h.describe().Epoch)
		require.Len(t, h.members(), 1)
		r := h.hb("a2", "i-a", 0, nil)
		require.Zero(t, r.ErrorCode)
		require.Equal(t, int32(4), h.describe().Epoch)
	})
}

// TestConsumerStaticRestartFranz restarts a static franz-go member of a
// KIP-848 group (kgo.InstanceID with kgo.ServerSideBalancer): once it has
// left with -2, started again with the same instance ID, it gets the
// partitions it had, under a new member ID, with no new group epoch, and
// the other member's partitions never move. franz-go (v1.22.3) sends its
// leave with -2 but without the instance ID, which Kafka, and so the
// server, refuse (INVALID_REQUEST): the test sends the leave that the
// Java client sends, with the instance ID, once the member is closed.
func TestConsumerStaticRestartFranz(t *testing.T) {
	p := startBroker(t, &Config{ConsumerGroupHeartbeatInterval: 100 * time.Millisecond})
	admin := p.client(t)
	kafkatest.CreateTopic(t, admin, "events", 4, nil)

	// b's callbacks: how many, and the partitions b holds.
	var bMu sync.Mutex
	bChanges, bHolds := 0, map[int32]bool{}
	member := func(instance string, watch bool) *kgo.Client {
		change := func(assigned bool) func(context.Context, *kgo.Client, map[string][]int32) {
			return func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
				if !watch {
					return
				}
				bMu.Lock()
				defer bMu.Unlock()
				bChanges++
				for _, p := range ps["events"] {
					bHolds[p] = assigned
				}
			}
		}
		cl := kafkatest.Client(t, p.addr, kgo.ConsumerGroup("g"), kgo.ConsumeTopics("events"), kgo.ServerSideBalancer(),
			kgo.InstanceID(instance), kgo.OnPartitionsAssigned(change(true)), kgo.OnPartitionsRevoked(change(false)))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			for ctx.Err() == nil && !cl.PollFetches(ctx).IsClientClosed() {
			}
		}()
		t.Cleanup(func() { cancel(); <-done })
		return cl
	}
	// describe returns the group epoch and, by instance ID, each
	// member's ID, epoch and partitions.
	type desc struct {
		id         string
		epoch      int32
		partitions []int32
	}
	describe := func() (int32, string, map[string]desc) {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{"g"}
		resp, err := req.RequestWith(t.Context(), admin)
		require.NoError(t, err)
		g := resp.Groups[0]
		if g.ErrorCode != 0 {
			return 0, "", nil
		}
		out := map[string]desc{}
		for _, m := range g.Members {
			d := desc{id: m.MemberID, epoch: m.MemberEpoch, partitions: []int32{}}
			for _, tp := range m.Assignment.TopicPartitions {
				d.partitions = append(d.partitions, tp.Partitions...)
			}
			slices.Sort(d.partitions)
			out[*m.InstanceID] = d
		}
		return g.Epoch, g.State, out
	}
	stableWith := func(n int) (int32, map[string]desc) {
		var epoch int32
		var ms map[string]desc
		require.Eventually(t, func() bool {
			var state string
			epoch, state, ms = describe()
			if state != "Stable" || len(ms) != n {
				return false
			}
			for _, m := range ms {
				if m.epoch != epoch || len(m.partitions) != 4/n {
					return false
				}
			}
			return true
		}, 20*time.Second, 50*time.Millisecond)
		return epoch, ms
	}

	bState := func() (int, []int32) {
		bMu.Lock()
		defer bMu.Unlock()
		var held []int32
		for p, ok := range bHolds {
			if ok {
				held = append(held, p)
			}
		}
		slices.Sort(held)
		return bChanges, held
	}
	a := member("i-a", false)
	member("i-b", true)
	epoch, before := stableWith(2)
	var seen int
	require.Eventually(t, func() bool { // b's callback has run
		var held []int32
		seen, held = bState()
		return slices.Equal(held, before["i-b"].partitions)
	}, 20*time.Second, 50*time.Millisecond)

	a.Close()
	leave := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	instance := "i-a"
	leave.Group, leave.MemberID, leave.InstanceID, leave.MemberEpoch = "g", before["i-a"].id, &instance, -2
	resp, err := leave.RequestWith(t.Context(), admin)
	require.NoError(t, err)
	require.Zero(t, resp.ErrorCode)
	after, _, ms := describe() // kept, with its partitions
	require.Equal(t, epoch, after)
	require.Equal(t, desc{id: before["i-a"].id, epoch: -2, partitions: before["i-a"].partitions}, ms["i-a"])

	member("i-a", false)
	require.Eventually(t, func() bool {
		_, _, ms = describe()
		return ms["i-a"].epoch == epoch
	}, 20*time.Second, 50*time.Millisecond)
	after, ms = stableWith(2)
	require.Equal(t, epoch, after, "no new group epoch")
	require.NotEqual(t, before["i-a"].id, ms["i-a"].id, "a new member ID")
	require.Equal(t, before["i-a"].partitions, ms["i-a"].partitions)
	require.Equal(t, before["i-b"], ms["i-b"])
	changes, held := bState()
	require.Equal(t, seen, changes, "b's partitions did not move")
	require.Equal(t, before["i-b"].partitions, held)
}
