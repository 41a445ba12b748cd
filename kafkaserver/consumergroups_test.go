package kafkaserver

import (
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless/internal/kafkatest"
)

// cgMember drives one member of a KIP-848 consumer group by hand.
type cgMember struct {
	t     *testing.T
	cl    *kgo.Client
	group string
	id    string
	epoch int32
	topic [16]byte
}

// heartbeat sends a heartbeat at the member's epoch reporting owned (nil:
// unchanged) and returns the answer; a successful one moves the member
// to the epoch it is given.
func (m *cgMember) heartbeat(owned []int32, edit ...func(*kmsg.ConsumerGroupHeartbeatRequest)) *kmsg.ConsumerGroupHeartbeatResponse {
	m.t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch = m.group, m.id, m.epoch
	if owned != nil {
		rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
		rt.TopicID, rt.Partitions = m.topic, owned
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{rt}
		if len(owned) == 0 {
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		}
	}
	if m.epoch == 0 {
		req.SubscribedTopicNames = []string{"events"}
		req.RebalanceTimeoutMillis = 60000
	}
	for _, e := range edit {
		e(req)
	}
	resp, err := req.RequestWith(m.t.Context(), m.cl)
	require.NoError(m.t, err)
	if resp.ErrorCode == 0 {
		m.epoch = resp.MemberEpoch
	}
	return resp
}

// assigned returns the partitions of an answer's assignment, nil when it
// carries none.
func (m *cgMember) assigned(resp *kmsg.ConsumerGroupHeartbeatResponse) []int32 {
	m.t.Helper()
	if resp.Assignment == nil {
		return nil
	}
	out := []int32{}
	for _, t := range resp.Assignment.Topics {
		require.Equal(m.t, m.topic, t.TopicID)
		out = append(out, t.Partitions...)
	}
	slices.Sort(out)
	return out
}

// commit commits offset 1 of partition as the member at epoch.
func (m *cgMember) commit(epoch, partition int32) int16 {
	m.t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.MemberID, req.Generation = 9, m.group, m.id, epoch
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "events"
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = partition, 1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(m.t.Context(), m.cl)
	require.NoError(m.t, err)
	return resp.Topics[0].Partitions[0].ErrorCode
}

// TestConsumerGroupHeartbeat walks KIP-848's reconciliation by hand: the
// first member gets every partition; a second joins with none, the first
// is told to give half up and keeps its epoch until it reports them
// given up, and only then does the second get them; a member that leaves
// frees its partitions. Along the way: the errors of heartbeats and of
// offset commits at the wrong epoch, ConsumerGroupDescribe, ListGroups'
// group type, a classic JoinGroup refused, DeleteGroups of a group with
// members refused.
func TestConsumerGroupHeartbeat(t *testing.T) {
	p := startBroker(t, nil)
	cl := p.client(t)
	kafkatest.CreateTopic(t, cl, "events", 4, nil)
	topic := topicID(t, cl, "events")
	a := &cgMember{t: t, cl: cl, group: "g", id: "member-a", topic: topic}
	b := &cgMember{t: t, cl: cl, group: "g", id: "member-b", topic: topic}

	r := a.heartbeat([]int32{})
	require.Zero(t, r.ErrorCode)
	require.EqualValues(t, 1, r.MemberEpoch)
	require.Equal(t, []int32{0, 1, 2, 3}, a.assigned(r))
	require.EqualValues(t, 5000, r.HeartbeatIntervalMillis)
	require.Nil(t, a.assigned(a.heartbeat(nil)), "nothing changed: no assignment sent")

	r = b.heartbeat([]int32{})
	require.Zero(t, r.ErrorCode)
	require.EqualValues(t, 2, r.MemberEpoch)
	require.Equal(t, []int32{}, b.assigned(r), "every partition is still a's")
	r = a.heartbeat(nil)
	require.EqualValues(t, 1, r.MemberEpoch, "a keeps its epoch while it gives partitions up")
	keep := a.assigned(r)
	require.Len(t, keep, 2)
	require.Nil(t, b.assigned(b.heartbeat(nil)), "a has not given them up yet")
	require.EqualValues(t, kerr.StaleMemberEpoch.Code, b.commit(1, keep[0]))

	r = a.heartbeat(keep)
	require.EqualValues(t, 2, r.MemberEpoch)
	require.Equal(t, keep, a.assigned(r))
	r = b.heartbeat(nil)
	var rest []int32
	for p := range int32(4) {
		if !slices.Contains(keep, p) {
			rest = append(rest, p)
		}
	}
	require.Equal(t, rest, b.assigned(r))

	// Heartbeat errors.
	for _, c := range []struct {
		m    *cgMember
		edit func(*kmsg.ConsumerGroupHeartbeatRequest)
		code int16
	}{
		{a, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = 7 }, kerr.FencedMemberEpoch.Code},
		{a, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID = "nobody" }, kerr.UnknownMemberID.Code},
		{a, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID = "" }, kerr.InvalidRequest.Code},
		{a, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.ServerAssignor = kmsg.StringPtr("fancy") }, kerr.UnsupportedAssignor.Code},
		{&cgMember{t: t, cl: cl, group: "g", id: "c", topic: topic}, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicNames = nil }, kerr.InvalidRequest.Code},
		{&cgMember{t: t, cl: cl, group: "g", id: "c", topic: topic}, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicRegex = kmsg.StringPtr("(") }, kerr.InvalidRegularExpression.Code},
	} {
		r := c.m.heartbeat(nil, c.edit)
		require.Equal(t, c.code, r.ErrorCode, "%s", kerr.ErrorForCode(c.code))
		require.NotNil(t, r.ErrorMessage)
	}

	// Offset commits carry the member epoch.
	require.Zero(t, a.commit(2, keep[0]))
	require.Zero(t, a.commit(1, keep[0]), "the previous epoch, for a partition still the member's")
	require.EqualValues(t, kerr.FencedMemberEpoch.Code, a.commit(3, keep[0]))
	require.EqualValues(t, kerr.UnknownMemberID.Code, (&cgMember{t: t, cl: cl, group: "g", id: "nobody"}).commit(2, 0))
	require.EqualValues(t, kerr.UnknownMemberID.Code, (&cgMember{t: t, cl: cl, group: "g"}).commit(-1, 0), "a group with members")

	// Described, listed, not a classic group, not deleted.
	dreq := kmsg.NewPtrConsumerGroupDescribeRequest()
	dreq.Groups = []string{"g", "unknown"}
	dresp, err := dreq.RequestWith(t.Context(), cl)
	require.NoError(t, err)
	d := dresp.Groups[0]
	require.Zero(t, d.ErrorCode)
	require.Equal(t, "Stable", d.State)
	require.EqualValues(t, 2, d.Epoch)
	require.EqualValues(t, 2, d.AssignmentEpoch)
	require.Equal(t, "uniform", d.AssignorName)
	require.Len(t, d.Members, 2)
	require.Equal(t, "member-a", d.Members[0].MemberID)
	require.Equal(t, []string{"events"}, d.Members[0].SubscribedTopics)
	require.Equal(t, "events", d.Members[0].Assignment.TopicPartitions[0].Topic)
	require.Equal(t, keep, d.Members[0].Assignment.TopicPartitions[0].Partitions)
	require.Equal(t, keep, d.Members[0].TargetAssignment.TopicPartitions[0].Partitions)
	require.Equal(t, kerr.GroupIDNotFound.Code, dresp.Groups[1].ErrorCode)

	described, err := kadm.NewClient(cl).DescribeConsumerGroups(t.Context(), "g")
	require.NoError(t, err)
	require.NoError(t, described["g"].Err)
	require.Equal(t, "Stable", described["g"].State)
	require.Len(t, described["g"].Members, 2)

	lreq := kmsg.NewPtrListGroupsRequest()
	lreq.TypesFilter = []string{"consumer"}
	lresp, err := lreq.RequestWith(t.Context(), cl)
	require.NoError(t, err)
	require.Len(t, lresp.Groups, 1)
	require.Equal(t, "g", lresp.Groups[0].Group)
	require.Equal(t, "consumer", lresp.Groups[0].GroupType)

	jreq := kmsg.NewPtrJoinGroupRequest()
	jreq.Group, jreq.ProtocolType, jreq.SessionTimeoutMillis, jreq.RebalanceTimeoutMillis = "g", "consumer", 10000, 10000
	jp := kmsg.NewJoinGroupRequestProtocol()
	jp.Name = "range"
	jreq.Protocols = append(jreq.Protocols, jp)
	jresp, err := jreq.RequestWith(t.Context(), cl)
	require.NoError(t, err)
	require.Equal(t, kerr.InconsistentGroupProtocol.Code, jresp.ErrorCode)

	delreq := kmsg.NewPtrDeleteGroupsRequest()
	delreq.Groups = []string{"g"}
	delresp, err := delreq.RequestWith(t.Context(), cl)
	require.NoError(t, err)
	require.Equal(t, kerr.NonEmptyGroup.Code, delresp.Groups[0].ErrorCode)

	// a leaves: b gets everything, at a new epoch.
	r = a.heartbeat(nil, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -1 })
	require.Zero(t, r.ErrorCode)
	require.EqualValues(t, -1, r.MemberEpoch)
	r = b.heartbeat(nil)
	require.EqualValues(t, 3, r.MemberEpoch)
	require.Equal(t, []int32{0, 1, 2, 3}, b.assigned(r))
	require.Equal(t, kerr.UnknownMemberID.Code, a.heartbeat(nil, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = 2 }).ErrorCode)
}

// TestConsumerGroupTimeouts: a member that stops heartbeating is removed
// after the session timeout, and one that does not give partitions up
// within its rebalance timeout is removed then; either way the others get
// its partitions.
func TestConsumerGroupTimeouts(t *testing.T) {
	p := startBroker(t, &Config{ConsumerGroupSessionTimeout: 500 * time.Millisecond})
	cl := p.client(t)
	kafkatest.CreateTopic(t, cl, "events", 2, nil)
	topic := topicID(t, cl, "events")
	a := &cgMember{t: t, cl: cl, group: "g", id: "a", topic: topic}
	b := &cgMember{t: t, cl: cl, group: "g", id: "b", topic: topic}
	require.Equal(t, []int32{0, 1}, a.assigned(a.heartbeat([]int32{})))
	b.heartbeat([]int32{})
	// a stops: b keeps heartbeating and gets both once a's session ends.
	require.Eventually(t, func() bool {
		return slices.Equal(b.assigned(b.heartbeat([]int32{})), []int32{0, 1})
	}, 10*time.Second, 100*time.Millisecond)
	require.Equal(t, kerr.UnknownMemberID.Code, a.heartbeat(nil).ErrorCode)

	// c joins with a rebalance timeout of 200 ms; b, told to give one up,
	// keeps heartbeating but never does: it is removed, c gets both.
	c := &cgMember{t: t, cl: cl, group: "g", id: "c", topic: topic}
	c.heartbeat([]int32{}, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RebalanceTimeoutMillis = 200 })
	b.heartbeat(nil, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RebalanceTimeoutMillis = 200 })
	require.Eventually(t, func() bool {
		c.heartbeat([]int32{})
		return b.heartbeat([]int32{0, 1}).ErrorCode == kerr.UnknownMemberID.Code
	}, 10*time.Second, 50*time.Millisecond)
	require.Equal(t, []int32{0, 1}, c.assigned(c.heartbeat([]int32{})))
}

// topicID returns the ID of topic, from Metadata.
func topicID(t *testing.T, cl *kgo.Client, topic string) [16]byte {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = &topic
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(t.Context(), cl)
	require.NoError(t, err)
	require.Zero(t, resp.Topics[0].ErrorCode)
	return resp.Topics[0].TopicID
}

// TestConsumerGroupAssignors: range gives each subscriber a contiguous
// run of each topic's partitions; uniform balances every partition of
// the subscribed topics over the members (no two loads more than one
// apart) and keeps a partition with its owner when a member joins, within
// the owner's share.
func TestConsumerGroupAssignors(t *testing.T) {
	t1, t2 := uuid.New(), uuid.New()
	topics := map[uuid.UUID]int32{t1: 5, t2: 1}
	names := map[uuid.UUID]string{t1: "t1", t2: "t2"}
	g := &cgroup{members: map[string]*cmember{}}
	for _, id := range []string{"a", "b"} {
		g.members[id] = &cmember{id: id, subscribed: []string{"t1", "t2"}, serverAssignor: assignorRange}
	}
	g.epoch = 1
	g.assign(topics, names)
	require.Equal(t, assignorRange, g.assignor)
	require.Equal(t, assignment{t1: {0, 1, 2}, t2: {0}}, g.target["a"])
	require.Equal(t, assignment{t1: {3, 4}}, g.target["b"])

	for _, m := range g.members {
		m.serverAssignor = assignorUniform
	}
	g.epoch = 2
	g.assign(topics, names)
	require.Equal(t, assignorUniform, g.assignor)
	before := map[string]assignment{"a": cloneAssignment(g.target["a"]), "b": cloneAssignment(g.target["b"])}
	count := func(a assignment) (n int) {
		for _, ps := range a {
			n += len(ps)
		}
		return n
	}
	require.Equal(t, 3, count(g.target["a"]))
	require.Equal(t, 3, count(g.target["b"]))

	g.members["c"] = &cmember{id: "c", subscribed: []string{"t1", "t2"}}
	g.epoch = 3
	g.assign(topics, names)
	for _, id := range []string{"a", "b", "c"} {
		require.Equal(t, 2, count(g.target[id]), "member %s", id)
	}
	for _, id := range []string{"a", "b"} {
		require.True(t, within(g.target[id], before[id]), "member %s kept only its own: %v of %v", id, g.target[id], before[id])
	}
	// A member subscribing to t2 alone gets only t2's partition or none.
	g.members["d"] = &cmember{id: "d", subscribed: []string{"t2"}}
	g.epoch = 4
	g.assign(topics, names)
	require.Empty(t, g.target["d"][t1])
	total := 0
	for _, a := range g.target {
		total += count(a)
	}
	require.Equal(t, 6, total, "every partition assigned once")

	// Four partitions held two and two, and a third member: two, one and
	// one, never two, two and none.
	t3 := uuid.New()
	g = &cgroup{members: map[string]*cmember{}}
	for _, id := range []string{"a", "b"} {
		g.members[id] = &cmember{id: id, subscribed: []string{"t3"}}
	}
	g.epoch = 1
	g.assign(map[uuid.UUID]int32{t3: 4}, map[uuid.UUID]string{t3: "t3"})
	g.members["c"] = &cmember{id: "c", subscribed: []string{"t3"}}
	g.epoch = 2
	g.assign(map[uuid.UUID]int32{t3: 4}, map[uuid.UUID]string{t3: "t3"})
	loads := []int{count(g.target["a"]), count(g.target["b"]), count(g.target["c"])}
	slices.Sort(loads)
	require.Equal(t, []int{1, 1, 2}, loads)
}
