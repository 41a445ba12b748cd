package kafkaserver

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// joinStatic sends a JoinGroup of version with member ID member (""
// for none) and group instance ID instance, and returns where its answer
// comes. metadata is the member's metadata of protocol "range".
func (h *groupHarness) joinStatic(version int16, member, instance, metadata string) <-chan *kmsg.JoinGroupResponse {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = version
	req.Group, req.MemberID, req.InstanceID, req.ProtocolType = "g", member, &instance, "consumer"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = int32(session.Milliseconds()), int32(rebalance.Milliseconds())
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte(metadata)}}
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { ch <- h.gs.join(h.ctx, req, "client", "host").(*kmsg.JoinGroupResponse) }()
	return ch
}

func (h *groupHarness) heartbeatStatic(member, instance string, generation int32) int16 {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = 4
	req.Group, req.MemberID, req.InstanceID, req.Generation = "g", member, &instance, generation
	return h.gs.heartbeat(req).(*kmsg.HeartbeatResponse).ErrorCode
}

func (h *groupHarness) syncStatic(member, instance string, generation int32, assignments map[string]string) <-chan *kmsg.SyncGroupResponse {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 5
	req.Group, req.MemberID, req.InstanceID, req.Generation = "g", member, &instance, generation
	for m, a := range assignments {
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m, MemberAssignment: []byte(a)})
	}
	ch := make(chan *kmsg.SyncGroupResponse, 1)
	go func() { ch <- h.gs.sync(h.ctx, req).(*kmsg.SyncGroupResponse) }()
	return ch
}

func (h *groupHarness) leaveMembers(members ...kmsg.LeaveGroupRequestMember) []int16 {
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version, req.Group, req.Members = 5, "g", members
	resp := h.gs.leave(req).(*kmsg.LeaveGroupResponse)
	require.Zero(h.t, resp.ErrorCode)
	var codes []int16
	for _, m := range resp.Members {
		codes = append(codes, m.ErrorCode)
	}
	return codes
}

// stableStatic forms a stable group of two static members, instances
// "ia" (the leader) and "ib", and returns their member IDs and the
// generation. ia's assignment is "pa", ib's "pb".
func stableStatic(t *testing.T, h *groupHarness) (a, b string, gen int32) {
	ja := h.joinStatic(9, "", "ia", "ma")
	ra := <-ja
	require.Zero(t, ra.ErrorCode, "a static member joins with no MEMBER_ID_REQUIRED")
	a = ra.MemberID
	require.True(t, strings.HasPrefix(a, "ia-"), "a static member's ID begins with its instance ID")
	require.Zero(t, (<-h.syncStatic(a, "ia", ra.Generation, map[string]string{a: "pa"})).ErrorCode)
	jb := h.joinStatic(9, "", "ib", "mb")
	require.True(t, pending(jb))
	require.Equal(t, kerr.RebalanceInProgress.Code, h.heartbeatStatic(a, "ia", ra.Generation))
	ra = <-h.joinStatic(9, a, "ia", "ma")
	rb := <-jb
	require.Equal(t, ra.Generation, rb.Generation)
	require.Equal(t, a, ra.LeaderID)
	b, gen = rb.MemberID, rb.Generation
	sb := h.syncStatic(b, "ib", gen, nil)
	require.Zero(t, (<-h.syncStatic(a, "ia", gen, map[string]string{a: "pa", b: "pb"})).ErrorCode)
	require.Equal(t, "pb", string((<-sb).MemberAssignment))
	return a, b, gen
}

// TestGroupStaticRejoin: a static member that restarts (joins with its
// instance ID and no member ID) while the group is stable gets a new
// member ID with its old assignment, at the same generation, and no
// rebalance; its old member ID is fenced. A follower learns the leader;
// the leader, from version 9 on, that it leads but is to skip the
// assignment, and before version 9 the old leader ID, so that it follows.
func TestGroupStaticRejoin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newGroupHarness(t, groupOptions{})
		a, b, gen := stableStatic(t, h)

		// The follower restarts.
		rb := <-h.joinStatic(9, "", "ib", "mb-restarted")
		require.Zero(t, rb.ErrorCode)
		require.NotEqual(t, b, rb.MemberID)
		require.Equal(t, gen, rb.Generation, "no rebalance")
		require.Equal(t, a, rb.LeaderID)
		require.False(t, rb.SkipAssignment)
		require.Empty(t, rb.Members)
		require.Zero(t, h.heartbeatStatic(a, "ia", gen), "the other member carries on")
		require.Equal(t, kerr.FencedInstanceID.Code, h.heartbeatStatic(b, "ib", gen), "the old member ID is fenced")
		require.Equal(t, kerr.FencedInstanceID.Code, (<-h.syncStatic(b, "ib", gen, nil)).ErrorCode)
		require.Equal(t, kerr.UnknownMemberID.Code, h.heartbeat(b, gen), "without its instance ID, an unknown member")
		b = rb.MemberID
		sb := <-h.syncStatic(b, "ib", gen, nil)
		require.Zero(t, sb.ErrorCode)
		require.Equal(t, "pb", string(sb.MemberAssignment), "the assignment of the instance")

		// The leader restarts, version 9: told to lead, but to skip the
		// assignment; the members are its own new ID and b's.
		ra := <-h.joinStatic(9, "", "ia", "ma")
		require.Zero(t, ra.ErrorCode)
		require.Equal(t, gen, ra.Generation)
		require.Equal(t, ra.MemberID, ra.LeaderID)
		require.True(t, ra.SkipAssignment)
		require.ElementsMatch(t, []string{ra.MemberID, b}, memberIDs(ra))
		old := a
		a = ra.MemberID
		require.Equal(t, "pa", string((<-h.syncStatic(a, "ia", gen, nil)).MemberAssignment))
		require.Equal(t, kerr.FencedInstanceID.Code, h.heartbeatStatic(old, "ia", gen))

		// Version 8: the old leader ID, so that it follows.
		ra = <-h.joinStatic(8, "", "ia", "ma")
		require.Zero(t, ra.ErrorCode)
		require.Equal(t, a, ra.LeaderID, "the former leader ID")
		require.Empty(t, ra.Members)
		a = ra.MemberID
		require.Zero(t, h.heartbeatStatic(a, "ia", gen))
		require.Zero(t, h.heartbeatStatic(b, "ib", gen), "still no rebalance")

		// JoinGroup with a member ID the instance does not map to is
		// fenced; a known member ID with its instance ID is a rejoin as
		// any other (the leader's starts a rebalance).
		require.Equal(t, kerr.FencedInstanceID.Code, (<-h.joinStatic(9, old, "ia", "ma")).ErrorCode)
		require.Equal(t, kerr.UnknownMemberID.Code, (<-h.joinStatic(9, old, "ic", "ma")).ErrorCode, "an instance the group does not know")
		require.Zero(t, h.gs.checkCommit("g", gen, a, kmsg.StringPtr("ia"), 8, nil))
		require.Equal(t, kerr.FencedInstanceID.Code, h.gs.checkCommit("g", gen, old, kmsg.StringPtr("ia"), 8, nil))
		require.Equal(t, kerr.FencedInstanceID.Code, h.gs.checkTxnCommit("g", gen, old, kmsg.StringPtr("ia")))
		require.Equal(t, kerr.FencedInstanceID.Code, h.gs.checkTxnCommit("g", -1, "", kmsg.StringPtr("ia")))
		require.Zero(t, h.gs.checkTxnCommit("g", gen, a, kmsg.StringPtr("ia")))
	})
}

// TestGroupStaticRejoinRebalances: a static member that restarts while
// the group is at the sync barrier, or joining, makes a rebalance (or
// joins the one under way); one that does not join by the end of the
// join barrier stays a member (a restart brings it back), and goes when
// its session expires.
func TestGroupStaticRejoinRebalances(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newGroupHarness(t, groupOptions{})
		a, b, gen := stableStatic(t, h)

		// a rejoins (the leader: a rebalance); b does not join before
		// the rebalance timeout, but heartbeats. It stays a member.
		ja := h.joinStatic(9, a, "ia", "ma")
		require.True(t, pending(ja))
		for range rebalance/(5*time.Second) - 1 {
			time.Sleep(5 * time.Second)
			require.Equal(t, kerr.RebalanceInProgress.Code, h.heartbeatStatic(b, "ib", gen))
		}
		ra := <-ja
		require.Zero(t, ra.ErrorCode)
		require.Equal(t, gen+1, ra.Generation)
		require.ElementsMatch(t, []string{a, b}, memberIDs(ra), "the static member that did not join stays")
		gen = ra.Generation

		// b restarts at the sync barrier: a rebalance.
		jb := h.joinStatic(9, "", "ib", "mb")
		require.True(t, pending(jb))
		sa := h.syncStatic(a, "ia", gen, nil)
		require.Equal(t, kerr.RebalanceInProgress.Code, (<-sa).ErrorCode)
		ja = h.joinStatic(9, a, "ia", "ma")
		ra, rb := <-ja, <-jb
		require.Equal(t, gen+1, ra.Generation)
		require.Equal(t, gen+1, rb.Generation)
		b, gen = rb.MemberID, ra.Generation
		sb := h.syncStatic(b, "ib", gen, nil)
		require.Zero(t, (<-h.syncStatic(a, "ia", gen, map[string]string{a: "pa", b: "pb"})).ErrorCode)
		require.Zero(t, (<-sb).ErrorCode)

		// b goes quiet: its session expires, it is removed, and the group
		// rebalances without it; its instance ID is free again.
		for range 4 {
			time.Sleep(session / 3)
			if code := h.heartbeatStatic(a, "ia", gen); code != 0 {
				require.Equal(t, kerr.RebalanceInProgress.Code, code)
				break
			}
		}
		require.Equal(t, kerr.UnknownMemberID.Code, h.heartbeatStatic(b, "ib", gen), "b's session expired")
		ra = <-h.joinStatic(9, a, "ia", "ma")
		require.Equal(t, gen+1, ra.Generation)
		require.Equal(t, []string{a}, memberIDs(ra))
	})
}

// TestGroupStaticLeave: LeaveGroup names members by member ID, instance
// ID or both, each answered as Kafka answers it; a static member removed
// by its instance ID alone (an admin's removal) makes a rebalance.
func TestGroupStaticLeave(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newGroupHarness(t, groupOptions{})
		a, b, gen := stableStatic(t, h)
		codes := h.leaveMembers(
			kmsg.LeaveGroupRequestMember{InstanceID: kmsg.StringPtr("nope")},
			kmsg.LeaveGroupRequestMember{MemberID: a, InstanceID: kmsg.StringPtr("ib")},
			kmsg.LeaveGroupRequestMember{MemberID: "nobody"},
		)
		require.Equal(t, []int16{kerr.UnknownMemberID.Code, kerr.FencedInstanceID.Code, kerr.UnknownMemberID.Code}, codes)
		require.Zero(t, h.heartbeatStatic(a, "ia", gen), "nobody left: no rebalance")

		require.Equal(t, []int16{0}, h.leaveMembers(kmsg.LeaveGroupRequestMember{InstanceID: kmsg.StringPtr("ib")}))
		require.Equal(t, kerr.UnknownMemberID.Code, h.heartbeatStatic(b, "ib", gen))
		require.Equal(t, kerr.RebalanceInProgress.Code, h.heartbeatStatic(a, "ia", gen), "a rebalance")
		ra := <-h.joinStatic(9, a, "ia", "ma")
		require.Equal(t, gen+1, ra.Generation)
		require.Equal(t, []string{a}, memberIDs(ra))
		gi, ok := h.gs.describe("g")
		require.True(t, ok)
		require.Equal(t, "ia", *gi.members[0].instanceID)

		require.Equal(t, []int16{0}, h.leaveMembers(kmsg.LeaveGroupRequestMember{MemberID: a, InstanceID: kmsg.StringPtr("ia")}))
		require.Equal(t, int16(0), h.gs.checkCommit("g", -1, "", nil, 8, nil), "empty")
	})
}

// TestGroupStaticStored: the stored form of a group keeps its static
// members' instance IDs; a coordinator that loads it fences a stale
// member ID, and a static member that restarts joins again with no
// rebalance.
func TestGroupStaticStored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newGroupHarness(t, groupOptions{})
		a, b, gen := stableStatic(t, h)
		rb := <-h.joinStatic(9, "", "ib", "mb") // restarted: a new member ID
		h.gs.mu.Lock()
		value := h.gs.mu.groups["g"].metadataValue(time.Now())
		h.gs.mu.Unlock()

		other := newGroupHarness(t, groupOptions{})
		require.NoError(t, other.gs.restore("g", value, time.Now()))
		require.Zero(t, other.heartbeatStatic(a, "ia", gen))
		require.Zero(t, other.heartbeatStatic(rb.MemberID, "ib", gen))
		require.Equal(t, kerr.FencedInstanceID.Code, other.heartbeatStatic(b, "ib", gen), "the member ID replaced")
		ra := <-other.joinStatic(9, "", "ia", "ma")
		require.Zero(t, ra.ErrorCode)
		require.Equal(t, gen, ra.Generation, "no rebalance after the load")
		require.True(t, ra.SkipAssignment)
		require.Equal(t, "pa", string((<-other.syncStatic(ra.MemberID, "ia", gen, nil)).MemberAssignment))
		require.Equal(t, "pb", string((<-other.syncStatic(rb.MemberID, "ib", gen, nil)).MemberAssignment))
	})
}

// TestGroupStaticNoneJoined: a join barrier that closes with only static
// members that did not join waits again (as Kafka's does) rather than
// forming a generation of nobody; they join, or their sessions end.
func TestGroupStaticNoneJoined(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newGroupHarness(t, groupOptions{})
		a, b, gen := stableStatic(t, h)
		c := h.newMember()
		jc := h.join(c)
		require.True(t, pending(jc))
		require.Equal(t, []int16{0}, h.leaveMembers(kmsg.LeaveGroupRequestMember{MemberID: c}))
		require.Equal(t, kerr.UnknownMemberID.Code, (<-jc).ErrorCode)
		for range rebalance/(5*time.Second) + 2 { // past the barrier's deadline, heartbeating
			time.Sleep(5 * time.Second)
			require.Equal(t, kerr.RebalanceInProgress.Code, h.heartbeatStatic(a, "ia", gen), "still the same rebalance")
			require.Equal(t, kerr.RebalanceInProgress.Code, h.heartbeatStatic(b, "ib", gen))
		}
		ja, jb := h.joinStatic(9, a, "ia", "ma"), h.joinStatic(9, b, "ib", "mb")
		ra, rb := <-ja, <-jb
		require.Equal(t, gen+1, ra.Generation)
		require.Equal(t, gen+1, rb.Generation)
		require.ElementsMatch(t, []string{a, b}, memberIDs(ra))
	})
}
