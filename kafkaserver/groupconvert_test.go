package kafkaserver

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless/internal/kafkatest"
)

// classicMember drives one member of the classic protocol by hand.
type classicMember struct {
	t          *testing.T
	cl         *kgo.Client
	group, id  string
	instance   *string
	generation int32
}

// join sends JoinGroup subscribing to "events" and saying it owns owned;
// a member with no ID takes the one MEMBER_ID_REQUIRED hands out. It
// returns the answer (with no ID: the second).
func (m *classicMember) join(owned ...int32) *kmsg.JoinGroupResponse {
	m.t.Helper()
	md := kmsg.NewConsumerMemberMetadata()
	md.Version, md.Topics = 1, []string{"events"}
	if len(owned) > 0 {
		op := kmsg.NewConsumerMemberMetadataOwnedPartition()
		op.Topic, op.Partitions = "events", owned
		md.OwnedPartitions = append(md.OwnedPartitions, op)
	}
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.MemberID, req.InstanceID, req.ProtocolType = m.group, m.id, m.instance, "consumer"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 30000, 30000
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "cooperative-sticky", md.AppendTo(nil)
	req.Protocols = append(req.Protocols, p)
	resp, err := req.RequestWith(m.t.Context(), m.cl)
	require.NoError(m.t, err)
	if resp.ErrorCode == kerr.MemberIDRequired.Code {
		m.id = resp.MemberID
		return m.join(owned...)
	}
	if resp.ErrorCode == 0 {
		m.id, m.generation = resp.MemberID, resp.Generation
	}
	return resp
}

// sync sends SyncGroup at the member's generation (with assignments, for
// a leader: member ID to partitions) and returns its error code and the
// partitions assigned.
func (m *classicMember) sync(assignments map[string][]int32) (int16, []int32) {
	m.t.Helper()
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.MemberID, req.InstanceID, req.Generation = m.group, m.id, m.instance, m.generation
	req.ProtocolType, req.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("cooperative-sticky")
	for _, id := range slices.Sorted(maps.Keys(assignments)) {
		a := kmsg.NewConsumerMemberAssignment()
		a.Version = 1
		at := kmsg.NewConsumerMemberAssignmentTopic()
		at.Topic, at.Partitions = "events", assignments[id]
		a.Topics = append(a.Topics, at)
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID, ga.MemberAssignment = id, a.AppendTo(nil)
		req.GroupAssignment = append(req.GroupAssignment, ga)
	}
	resp, err := req.RequestWith(m.t.Context(), m.cl)
	require.NoError(m.t, err)
	if resp.ErrorCode != 0 {
		return resp.ErrorCode, nil
	}
	var a kmsg.ConsumerMemberAssignment
	require.NoError(m.t, a.ReadFrom(resp.MemberAssignment))
	out := []int32{}
	for _, t := range a.Topics {
		require.Equal(m.t, "events", t.Topic)
		out = append(out, t.Partitions...)
	}
	slices.Sort(out)
	return 0, out
}

// heartbeat sends Heartbeat at the member's generation.
func (m *classicMember) heartbeat() int16 {
	m.t.Helper()
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.InstanceID, req.Generation = m.group, m.id, m.instance, m.generation
	resp, err := req.RequestWith(m.t.Context(), m.cl)
	require.NoError(m.t, err)
	return resp.ErrorCode
}

// describeClassic returns DescribeGroups' answer for group.
func describeClassic(t *testing.T, cl *kgo.Client, group string) kmsg.DescribeGroupsResponseGroup {
	t.Helper()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(t.Context(), cl)
	require.NoError(t, err)
	return resp.Groups[0]
}

// TestGroupUpgradeDowngrade walks a group from the classic protocol to
// the consumer protocol and back with its members, as Kafka 4 does: a
// member of the consumer protocol joining a stable classic group takes
// it over at its generation, the classic member is reconciled through
// its joins (giving partitions up first), commits are checked against
// its member epoch, and when the member of the consumer protocol leaves,
// the group is classic again and rebalances.
func TestGroupUpgradeDowngrade(t *testing.T) {
	p := startBroker(t, &Config{GroupInitialRebalanceDelay: -1})
	cl := p.client(t)
	kafkatest.CreateTopic(t, cl, "events", 4, nil)
	topic := topicID(t, cl, "events")

	// A stable classic group of one member, at generation 1.
	c := &classicMember{t: t, cl: cl, group: "g"}
	jr := c.join()
	require.Zero(t, jr.ErrorCode)
	require.EqualValues(t, 1, jr.Generation)
	code, parts := c.sync(map[string][]int32{c.id: {0, 1, 2, 3}})
	require.Zero(t, code)
	require.Equal(t, []int32{0, 1, 2, 3}, parts)

	// A member of the consumer protocol joins: the group is a consumer
	// group, at group epoch 2; the new member waits for the classic one
	// to give up half the partitions.
	a := &cgMember{t: t, cl: cl, group: "g", id: "a", topic: topic}
	r := a.heartbeat([]int32{})
	require.Zero(t, r.ErrorCode)
	require.EqualValues(t, 2, r.MemberEpoch)
	require.Empty(t, a.assigned(r))
	d := describeConsumer(t, cl, "g")
	require.Zero(t, d.ErrorCode)
	require.EqualValues(t, 2, d.Epoch)
	require.Len(t, d.Members, 2)

	// The classic member is told to join again; its commits are checked
	// against its member epoch, as generations.
	require.Equal(t, kerr.RebalanceInProgress.Code, c.heartbeat())
	require.Zero(t, commitAs(t, cl, "g", c.id, 1, 0))
	require.Equal(t, kerr.IllegalGeneration.Code, commitAs(t, cl, "g", c.id, 5, 0))

	// It joins, still owning everything: it stays at epoch 1 and is
	// given the half it keeps.
	jr = c.join(0, 1, 2, 3)
	require.Zero(t, jr.ErrorCode)
	require.EqualValues(t, 1, jr.Generation)
	require.Empty(t, jr.LeaderID, "the coordinator assigns: no member leads")
	code, kept := c.sync(nil)
	require.Zero(t, code)
	require.Len(t, kept, 2)
	// It gives the rest up and joins again: epoch 2.
	jr = c.join(kept...)
	require.Zero(t, jr.ErrorCode)
	require.EqualValues(t, 2, jr.Generation)
	code, parts = c.sync(nil)
	require.Zero(t, code)
	require.Equal(t, kept, parts)
	require.Zero(t, c.heartbeat())

	// The other half is the new member's now.
	r = a.heartbeat([]int32{})
	require.Zero(t, r.ErrorCode)
	got := a.assigned(r)
	require.Len(t, got, 2)
	require.ElementsMatch(t, []int32{0, 1, 2, 3}, append(slices.Clone(kept), got...))

	// A classic JoinGroup with another protocol type is refused.
	bad := kmsg.NewPtrJoinGroupRequest()
	bad.Group, bad.ProtocolType, bad.SessionTimeoutMillis, bad.RebalanceTimeoutMillis = "g", "connect", 30000, 30000
	bp := kmsg.NewJoinGroupRequestProtocol()
	bp.Name = "default"
	bad.Protocols = append(bad.Protocols, bp)
	bresp, err := bad.RequestWith(t.Context(), cl)
	require.NoError(t, err)
	require.Equal(t, kerr.InconsistentGroupProtocol.Code, bresp.ErrorCode)

	// The member of the consumer protocol leaves: the group is classic
	// again, at generation 2 (the group epoch), and rebalances.
	r = a.heartbeat(nil, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -1 })
	require.Zero(t, r.ErrorCode)
	dg := describeClassic(t, cl, "g")
	require.Zero(t, dg.ErrorCode)
	require.Equal(t, "PreparingRebalance", dg.State)
	require.Equal(t, "consumer", dg.ProtocolType)
	require.Len(t, dg.Members, 1)
	require.Equal(t, c.id, dg.Members[0].MemberID)
	require.Equal(t, kerr.RebalanceInProgress.Code, c.heartbeat())
	jr = c.join(kept...)
	require.Zero(t, jr.ErrorCode)
	require.EqualValues(t, 3, jr.Generation)
	require.Equal(t, c.id, jr.LeaderID, "its leader assigns again")
	code, parts = c.sync(map[string][]int32{c.id: {0, 1, 2, 3}})
	require.Zero(t, code)
	require.Equal(t, []int32{0, 1, 2, 3}, parts)
	require.Equal(t, "Stable", describeClassic(t, cl, "g").State)
}

// TestGroupUpgradeRefused: a classic group of another protocol type than
// "consumer" is not converted (GROUP_ID_NOT_FOUND), nor is one a member
// of the consumer protocol heartbeats to at an epoch other than 0.
func TestGroupUpgradeRefused(t *testing.T) {
	p := startBroker(t, &Config{GroupInitialRebalanceDelay: -1})
	cl := p.client(t)
	kafkatest.CreateTopic(t, cl, "events", 2, nil)
	topic := topicID(t, cl, "events")

	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.ProtocolType, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = "connect", "connect", 30000, 30000
	pr := kmsg.NewJoinGroupRequestProtocol()
	pr.Name = "default"
	req.Protocols = append(req.Protocols, pr)
	resp, err := req.RequestWith(t.Context(), cl)
	require.NoError(t, err)
	require.Equal(t, kerr.MemberIDRequired.Code, resp.ErrorCode)
	req.MemberID = resp.MemberID
	resp, err = req.RequestWith(t.Context(), cl)
	require.NoError(t, err)
	require.Zero(t, resp.ErrorCode)

	a := &cgMember{t: t, cl: cl, group: "connect", id: "a", topic: topic}
	require.Equal(t, kerr.GroupIDNotFound.Code, a.heartbeat([]int32{}).ErrorCode)
	require.Equal(t, "connect", describeClassic(t, cl, "connect").ProtocolType, "still the classic group")
}

// TestConsumerStoredClassic: a consumer group with a member of the
// classic protocol is stored at version 2 with its session timeout and
// protocols, and loads with them; without one, at version 1.
func TestConsumerStoredClassic(t *testing.T) {
	md := kmsg.NewConsumerMemberMetadata()
	md.Version, md.Topics = 3, []string{"events"}
	protocols := []kmsg.JoinGroupRequestProtocol{{Name: "cooperative-sticky", Metadata: md.AppendTo(nil)}, {Name: "range", Metadata: md.AppendTo(nil)}}
	g := &cgroup{id: "g", epoch: 3, targetEpoch: 3, members: map[string]*cmember{}, target: map[string]assignment{}}
	g.addConsumer(&cmember{id: "a", epoch: 3, assigned: assignment{}, owned: assignment{}})
	require.Contains(t, string(g.appendStored(nil)), `"version":1`)
	g.addConsumer(&cmember{id: "c", epoch: 3, assigned: assignment{}, owned: assignment{},
		classic: &classicMeta{session: 10 * time.Second, protocols: protocols}})
	value := g.appendStored(nil)
	require.Contains(t, string(value), `"version":2`)

	now := time.Unix(1000, 0)
	back, err := decodeConsumerStored("g", value, now, time.Minute)
	require.NoError(t, err)
	require.Nil(t, back.members["a"].classic)
	c := back.members["c"]
	require.NotNil(t, c.classic)
	require.Equal(t, 10*time.Second, c.classic.session)
	require.Equal(t, protocols, c.classic.protocols)
	require.Equal(t, now.Add(10*time.Second), c.expires, "a classic member's session is its own")
	require.Equal(t, int16(3), c.classic.metadataVersion())
}

// commitAs commits offset 1 of events' partition as member at generation
// (OffsetCommit version 8, the classic protocol's) and returns its code.
func commitAs(t *testing.T, cl *kgo.Client, group, member string, generation, partition int32) int16 {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.MemberID, req.Generation = 8, group, member, generation
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "events"
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = partition, 1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(t.Context(), cl)
	require.NoError(t, err)
	return resp.Topics[0].Partitions[0].ErrorCode
}

// describeConsumer returns ConsumerGroupDescribe's answer for group.
func describeConsumer(t *testing.T, cl *kgo.Client, group string) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(t.Context(), cl)
	require.NoError(t, err)
	return resp.Groups[0]
}

// TestGroupConvertedStatic: a static classic member of a converted group
// that restarts (joins with its instance ID and no member ID) takes its
// own place with its partitions and no new group epoch; the old process
// is fenced. When it replaces the last member of the consumer protocol
// (its instance ID), the group is classic again, stable, with no
// rebalance.
func TestGroupConvertedStatic(t *testing.T) {
	p := startBroker(t, &Config{GroupInitialRebalanceDelay: -1})
	cl := p.client(t)
	kafkatest.CreateTopic(t, cl, "events", 2, nil)
	topic := topicID(t, cl, "events")

	c := &classicMember{t: t, cl: cl, group: "g", instance: kmsg.StringPtr("c")}
	require.Zero(t, c.join().ErrorCode)
	code, _ := c.sync(map[string][]int32{c.id: {0, 1}})
	require.Zero(t, code)
	a := &cgMember{t: t, cl: cl, group: "g", id: "a", topic: topic}
	require.Zero(t, a.heartbeat([]int32{}, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.InstanceID = kmsg.StringPtr("a") }).ErrorCode)
	jr := c.join(0, 1)
	require.Zero(t, jr.ErrorCode)
	code, kept := c.sync(nil)
	require.Zero(t, code)
	jr = c.join(kept...)
	require.Zero(t, jr.ErrorCode)
	epoch := describeConsumer(t, cl, "g").Epoch

	// The classic member restarts: a new member ID, the same partitions
	// and epoch; the old one is fenced.
	old := *c
	c.id = ""
	jr = c.join(kept...)
	require.Zero(t, jr.ErrorCode)
	require.NotEqual(t, old.id, c.id)
	require.Equal(t, epoch, describeConsumer(t, cl, "g").Epoch, "no new group epoch")
	code, parts := c.sync(nil)
	require.Zero(t, code)
	require.Equal(t, kept, parts)
	require.Equal(t, kerr.FencedInstanceID.Code, old.heartbeat())

	// A classic member takes the place of the static member of the
	// consumer protocol, its last: the group is classic, stable, at once.
	d := &classicMember{t: t, cl: cl, group: "g", instance: kmsg.StringPtr("a")}
	jr = d.join()
	require.Zero(t, jr.ErrorCode)
	dg := describeClassic(t, cl, "g")
	require.Equal(t, "Stable", dg.State)
	require.Len(t, dg.Members, 2)
	code, parts = d.sync(nil)
	require.Zero(t, code)
	require.ElementsMatch(t, []int32{0, 1}, append(parts, kept...), "it has the partitions of the member it replaced")
	require.Zero(t, c.heartbeat(), "the other member carries on at the generation")
}
