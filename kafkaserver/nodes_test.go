package kafkaserver

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless"
)

// TestPartitionLeader checks that partition leaders spread evenly over
// the nodes, prefer the client's rack, and are all nodes' when no node
// is in it.
func TestPartitionLeader(t *testing.T) {
	nodes := []node{{id: 0, rack: "a"}, {id: 1, rack: "b"}, {id: 2, rack: "a"}}
	count := map[int32]int{}
	for p := range int32(30) {
		count[partitionLeader(nodes, "events", p, "").id]++
	}
	require.Equal(t, map[int32]int{0: 10, 1: 10, 2: 10}, count, "30 partitions over 3 nodes")

	count = map[int32]int{}
	for p := range int32(30) {
		count[partitionLeader(nodes, "events", p, "a").id]++
	}
	require.Equal(t, map[int32]int{0: 15, 2: 15}, count, "rack a's clients go to rack a's nodes")

	count = map[int32]int{}
	for p := range int32(30) {
		count[partitionLeader(nodes, "events", p, "c").id]++
	}
	require.Len(t, count, 3, "no node in rack c: every node")

	// Stable: the same membership gives the same answer.
	for p := range int32(10) {
		require.Equal(t, partitionLeader(nodes, "x", p, ""), partitionLeader(append([]node(nil), nodes...), "x", p, ""))
	}
}

// TestGroupCoordinator checks rendezvous hashing: groups spread over the
// nodes, and when a node goes only its groups move; when it comes back
// they return to it.
func TestGroupCoordinator(t *testing.T) {
	three := []node{{id: 0}, {id: 1}, {id: 2}}
	two := []node{{id: 0}, {id: 2}}
	count := map[int32]int{}
	moved := 0
	for i := range 3000 {
		g := fmt.Sprintf("group-%d", i)
		c3 := groupCoordinator(three, g).id
		count[c3]++
		c2 := groupCoordinator(two, g).id
		if c3 != 1 {
			require.Equal(t, c3, c2, "group %s was not on node 1: it stays", g)
		} else {
			moved++
		}
		require.NotEqual(t, int32(1), c2)
	}
	for id, n := range count {
		require.InDelta(t, 1000, n, 150, "node %d coordinates %d of 3000 groups", id, n)
	}
	require.Equal(t, count[1], moved)
}

// TestRackOfClientID checks the diskless_rack= token of a client ID.
func TestRackOfClientID(t *testing.T) {
	for id, want := range map[string]string{
		"":                                  "",
		"producer":                          "",
		"diskless_rack=eu-1a":               "eu-1a",
		"app,diskless_rack=eu-1b":           "eu-1b",
		"app,diskless_rack=eu-1b,other=1":   "eu-1b",
		"app diskless_rack=r2; diskless_az": "r2",
	} {
		require.Equal(t, want, rackOfClientID(id), "client ID %q", id)
	}
}

// TestOwnershipSettle checks when a node that becomes a group's
// coordinator must wait before it takes the group over: only while a node
// that coordinated it within the settle time is still live.
func TestOwnershipSettle(t *testing.T) {
	three, two := []node{{id: 0}, {id: 1}, {id: 2}}, []node{{id: 0}, {id: 2}}
	group := ""
	for i := 0; group == ""; i++ { // a group on node 1 of three, on node 0 of two
		if g := fmt.Sprintf("g%d", i); groupCoordinator(three, g).id == 1 && groupCoordinator(two, g).id == 0 {
			group = g
		}
	}
	newOwner := func(self int32, view []node) *ownership {
		o := &ownership{s: &Server{cfg: serverConfig{NodeID: self}, log: zap.NewNop()}, settle: time.Second}
		o.mu.owned, o.mu.view = map[string]int64{}, view
		return o
	}
	t0 := time.Now()

	// Node 1 dies: node 0 takes the group over at once (node 1 commits
	// nothing more).
	o := newOwner(0, three)
	require.Empty(t, o.observeLocked(two, t0))
	require.False(t, o.mustWaitLocked(group))

	// Node 1 comes back: node 0 gives the group up, and node 1 waits the
	// settle time, node 0 being live.
	o.mu.owned[group] = 1
	require.Equal(t, []string{group}, o.observeLocked(three, t0.Add(time.Second)))
	n1 := newOwner(1, two)
	n1.observeLocked(three, t0.Add(time.Second))
	require.True(t, n1.mustWaitLocked(group))
	n1.observeLocked(three, t0.Add(1500*time.Millisecond))
	require.True(t, n1.mustWaitLocked(group))
	n1.observeLocked(three, t0.Add(2*time.Second))
	require.False(t, n1.mustWaitLocked(group), "the settle time has passed")

	// A node that has just started waits too, unless it is alone.
	fresh := newOwner(1, three)
	fresh.mu.past = []pastView{{until: t0}}
	require.True(t, fresh.mustWaitLocked(group))
	alone := newOwner(1, []node{{id: 1}})
	alone.mu.past = []pastView{{until: t0}}
	require.False(t, alone.mustWaitLocked(group))
}

// TestGroupClaimFence: a cluster node commits a group's offsets under its
// claim on the group; once another node claimed the group since, the
// node's commits and deletes are refused with NOT_COORDINATOR and change
// nothing, and the node drops the group. Until the settle time has
// passed, its requests for the group are answered
// COORDINATOR_LOAD_IN_PROGRESS: a commit its socket held while it was
// paused (which the client retried at the other node since, and moved
// past) does not land under a new claim, moving the offset back. Its next
// request then takes the group over again, with a new claim.
func TestGroupClaimFence(t *testing.T) {
	ctx := t.Context()
	p := startBroker(t, &Config{Clustered: true})
	cl := p.client(t)
	_, err := p.b.CreateTopic(ctx, "orders", diskless.TopicConfig{Partitions: 1})
	require.NoError(t, err)
	commit := func(offset int64) int16 {
		t.Helper()
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation = 8, "fenced", -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "orders"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, offset
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl.Broker(0)) // no retries
		require.NoError(t, err)
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	committed := func() int64 {
		t.Helper()
		got, err := p.b.FetchOffsets(ctx, "fenced", nil)
		require.NoError(t, err)
		require.Len(t, got, 1)
		return got[0].Offset
	}

	require.Equal(t, int16(0), commit(10))
	require.Equal(t, int64(1), p.srv.claimOf("fenced"), "the takeover claimed the group")
	require.Equal(t, int64(10), committed())

	// Another node takes the group over (this one does not know), and
	// commits past what this one was sent meanwhile.
	other, err := p.b.ClaimGroup(ctx, "fenced")
	require.NoError(t, err)
	require.Equal(t, int64(2), other)
	require.NoError(t, p.b.CommitOffsets(ctx, "fenced", other, []diskless.GroupOffset{{Topic: "orders", Partition: 0, Offset: 20}}))
	fencedAt := time.Now()
	require.Equal(t, kerr.NotCoordinator.Code, commit(5))
	require.Equal(t, int64(20), committed(), "a fenced commit changes nothing")
	require.Zero(t, p.srv.claimOf("fenced"), "the group was dropped")

	// The commits queued behind it are not taken over with: they wait
	// for the settle time.
	if code := commit(6); time.Since(fencedAt) < p.srv.cfg.CoordinatorSettle {
		require.Equal(t, kerr.CoordinatorLoadInProgress.Code, code, "a commit right after the fence")
		require.Equal(t, int64(20), committed(), "a stale commit does not move the offset back")
		require.Zero(t, p.srv.claimOf("fenced"), "no takeover within the settle time")
	}

	// The next request after it takes the group over again.
	require.Eventually(t, func() bool { return commit(21) == 0 }, 10*time.Second, 50*time.Millisecond)
	require.GreaterOrEqual(t, time.Since(fencedAt), p.srv.cfg.CoordinatorSettle)
	require.Equal(t, int64(3), p.srv.claimOf("fenced"))
	require.Equal(t, int64(21), committed())

	// A delete under a superseded claim: refused too.
	del := kmsg.NewPtrOffsetDeleteRequest()
	del.Group = "fenced"
	dt := kmsg.NewOffsetDeleteRequestTopic()
	dt.Topic = "orders"
	dt.Partitions = append(dt.Partitions, kmsg.NewOffsetDeleteRequestTopicPartition())
	del.Topics = append(del.Topics, dt)
	// This node holds claim 3 (the commit lands); another node claims
	// the group; the delete is refused.
	require.Equal(t, int16(0), commit(22))
	_, err = p.b.ClaimGroup(ctx, "fenced")
	require.NoError(t, err)
	resp, err := del.RequestWith(ctx, cl.Broker(0))
	require.NoError(t, err)
	require.Equal(t, kerr.NotCoordinator.Code, resp.Topics[0].Partitions[0].ErrorCode)
	require.Equal(t, int64(22), committed(), "a fenced delete changes nothing")
}

// TestGroupTakeoverKeepsGeneration: a cluster node stores a classic
// group's generation when it completes; a node that takes the group over
// (here the same node, after another claimed the group in between) loads
// it, so the member's heartbeats and commits at its generation are
// accepted with no rebalance.
func TestGroupTakeoverKeepsGeneration(t *testing.T) {
	ctx := t.Context()
	p := startBroker(t, &Config{Clustered: true, GroupInitialRebalanceDelay: -1})
	cl := p.client(t)
	_, err := p.b.CreateTopic(ctx, "orders", diskless.TopicConfig{Partitions: 1})
	require.NoError(t, err)
	const group = "kept"
	send := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := cl.Broker(0).Request(ctx, req) // no retries
		require.NoError(t, err)
		return resp
	}

	join := kmsg.NewPtrJoinGroupRequest()
	join.Version, join.Group, join.ProtocolType = 9, group, "consumer"
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 30000, 30000
	proto := kmsg.NewJoinGroupRequestProtocol()
	proto.Name, proto.Metadata = "range", []byte("subscription")
	join.Protocols = append(join.Protocols, proto)
	jr := send(join).(*kmsg.JoinGroupResponse)
	require.Equal(t, kerr.MemberIDRequired.Code, jr.ErrorCode)
	join.MemberID = jr.MemberID
	jr = send(join).(*kmsg.JoinGroupResponse)
	require.Zero(t, jr.ErrorCode)
	member, gen := jr.MemberID, jr.Generation

	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version, sync.Group, sync.MemberID, sync.Generation = 5, group, member, gen
	sync.ProtocolType, sync.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	sa := kmsg.NewSyncGroupRequestGroupAssignment()
	sa.MemberID, sa.MemberAssignment = member, []byte("assignment")
	sync.GroupAssignment = append(sync.GroupAssignment, sa)
	sr := send(sync).(*kmsg.SyncGroupResponse)
	require.Zero(t, sr.ErrorCode)
	require.Equal(t, []byte("assignment"), sr.MemberAssignment)
	md, err := p.b.GroupMetadata(ctx, group)
	require.NoError(t, err)
	require.Equal(t, int64(gen), md.Generation, "the generation is stored before SyncGroup answers")

	commit := func(offset int64) int16 {
		t.Helper()
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation, req.MemberID = 8, group, gen, member
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "orders"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, offset
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return send(req).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	}
	require.Zero(t, commit(5))

	// Another node takes the group over: this one's commit is fenced and
	// it drops the group. Its next request past the settle time takes the
	// group over again, loading the stored generation.
	_, err = p.b.ClaimGroup(ctx, group)
	require.NoError(t, err)
	require.Equal(t, kerr.NotCoordinator.Code, commit(6))
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.Generation = 4, group, member, gen
	require.Eventually(t, func() bool { return send(hb).(*kmsg.HeartbeatResponse).ErrorCode == 0 },
		10*time.Second, 50*time.Millisecond, "the member carries on at its generation")
	require.Zero(t, commit(7))
	sr = send(sync).(*kmsg.SyncGroupResponse)
	require.Zero(t, sr.ErrorCode)
	require.Equal(t, []byte("assignment"), sr.MemberAssignment, "the assignment was loaded")
	got, err := p.b.FetchOffsets(ctx, group, nil)
	require.NoError(t, err)
	require.Equal(t, int64(7), got[0].Offset)

	// The member leaves: the group is empty; stored with no members and
	// its generation, which it goes on from when it forms again, here
	// after another takeover (as in Kafka: an empty group keeps its
	// generation until it is deleted).
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version, leave.Group = 3, group
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = member
	leave.Members = append(leave.Members, lm)
	require.Zero(t, send(leave).(*kmsg.LeaveGroupResponse).ErrorCode)
	require.Eventually(t, func() bool {
		md, err := p.b.GroupMetadata(ctx, group)
		if err != nil || md.Value == nil || md.Generation != int64(gen)+1 {
			return false
		}
		var v kmsg.GroupMetadataValue
		return v.ReadFrom(md.Value) == nil && len(v.Members) == 0 && v.Generation == gen+1
	}, 10*time.Second, 10*time.Millisecond, "the empty group is stored with its generation and no members")
	rejoin := func() int32 {
		t.Helper()
		join.MemberID = ""
		jr := send(join).(*kmsg.JoinGroupResponse)
		require.Equal(t, kerr.MemberIDRequired.Code, jr.ErrorCode)
		join.MemberID = jr.MemberID
		jr = send(join).(*kmsg.JoinGroupResponse)
		require.Zero(t, jr.ErrorCode)
		member = jr.MemberID
		return jr.Generation
	}
	_, err = p.b.ClaimGroup(ctx, group)
	require.NoError(t, err)
	// A commit outside the group (it has no members) is fenced, and the
	// node drops the group; its next request takes it over again.
	gen, member = -1, ""
	require.Equal(t, kerr.NotCoordinator.Code, commit(8), "fenced: dropped")
	time.Sleep(p.srv.cfg.CoordinatorSettle) // before it is taken over again
	gen = int32(md.Generation)
	require.Equal(t, gen+2, rejoin(), "the generation goes on after the group was empty")

	// Deleted, the group starts again at generation 1.
	leave.Members[0].MemberID = member
	require.Zero(t, send(leave).(*kmsg.LeaveGroupResponse).ErrorCode)
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Version, del.Groups = 2, []string{group}
	require.Eventually(t, func() bool {
		return send(del).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode == 0
	}, 10*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool {
		md, err := p.b.GroupMetadata(ctx, group)
		return err == nil && md.Value == nil
	}, 10*time.Second, 10*time.Millisecond, "a deleted group's stored state is deleted")
	require.Equal(t, int32(1), rejoin(), "a deleted group starts again")
}

// TestGroupGenerationAfterEmpty: a group that went empty, and was
// dropped from memory, goes on from its generation when it forms again
// (single node).
func TestGroupGenerationAfterEmpty(t *testing.T) {
	ctx := t.Context()
	p := startBroker(t, &Config{GroupInitialRebalanceDelay: -1})
	cl := p.client(t)
	send := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := cl.Broker(0).Request(ctx, req)
		require.NoError(t, err)
		return resp
	}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version, join.Group, join.ProtocolType = 9, "again", "consumer"
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 30000, 30000
	proto := kmsg.NewJoinGroupRequestProtocol()
	proto.Name, proto.Metadata = "range", []byte("subscription")
	join.Protocols = append(join.Protocols, proto)
	var gens []int32
	for range 3 {
		join.MemberID = ""
		jr := send(join).(*kmsg.JoinGroupResponse)
		join.MemberID = jr.MemberID
		jr = send(join).(*kmsg.JoinGroupResponse)
		require.Zero(t, jr.ErrorCode)
		gens = append(gens, jr.Generation)
		leave := kmsg.NewPtrLeaveGroupRequest()
		leave.Version, leave.Group = 3, "again"
		lm := kmsg.NewLeaveGroupRequestMember()
		lm.MemberID = jr.MemberID
		leave.Members = append(leave.Members, lm)
		require.Zero(t, send(leave).(*kmsg.LeaveGroupResponse).ErrorCode)
		require.Eventually(t, func() bool { // empty, then dropped from memory
			d := kmsg.NewPtrDescribeGroupsRequest()
			d.Version, d.Groups = 5, []string{"again"}
			return send(d).(*kmsg.DescribeGroupsResponse).Groups[0].State == "Dead"
		}, 10*time.Second, 10*time.Millisecond)
	}
	require.Equal(t, []int32{1, 3, 5}, gens, "each join a generation, each emptying one more")
}
