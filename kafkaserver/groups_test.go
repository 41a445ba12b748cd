package kafkaserver

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupHarness drives a group coordinator in a synctest bubble: time
// moves only when every goroutine waits, so session timeouts and barrier
// deadlines are exact.
type groupHarness struct {
	t   *testing.T
	gs  *groups
	ctx context.Context
}

func newGroupHarness(t *testing.T, opts groupOptions) *groupHarness {
	ctx, cancel := context.WithCancel(t.Context())
	h := &groupHarness{t: t, gs: newGroups(opts, nil), ctx: ctx}
	t.Cleanup(func() {
		cancel()
		synctest.Wait()
		h.gs.Close()
	})
	return h
}

const (
	session   = 10 * time.Second
	rebalance = 30 * time.Second
)

// join sends a JoinGroup (version 9) and returns where its answer comes.
func (h *groupHarness) join(member string, protocols ...string) <-chan *kmsg.JoinGroupResponse {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 9
	req.Group, req.MemberID, req.ProtocolType = "g", member, "consumer"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = int32(session.Milliseconds()), int32(rebalance.Milliseconds())
	if len(protocols) == 0 {
		protocols = []string{"range"}
	}
	for _, p := range protocols {
		req.Protocols = append(req.Protocols, kmsg.JoinGroupRequestProtocol{Name: p, Metadata: []byte(member + "/" + p)})
	}
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { ch <- h.gs.join(h.ctx, req, "client", "host").(*kmsg.JoinGroupResponse) }()
	return ch
}

// newMember joins with an empty member ID and returns the ID the
// coordinator hands out with MEMBER_ID_REQUIRED.
func (h *groupHarness) newMember() string {
	r := <-h.join("")
	require.Equal(h.t, kerr.MemberIDRequired.Code, r.ErrorCode)
	require.NotEmpty(h.t, r.MemberID)
	return r.MemberID
}

func (h *groupHarness) sync(member string, generation int32, assignments map[string]string) <-chan *kmsg.SyncGroupResponse {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 5
	req.Group, req.MemberID, req.Generation = "g", member, generation
	for m, a := range assignments {
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m, MemberAssignment: []byte(a)})
	}
	ch := make(chan *kmsg.SyncGroupResponse, 1)
	go func() { ch <- h.gs.sync(h.ctx, req).(*kmsg.SyncGroupResponse) }()
	return ch
}

func (h *groupHarness) heartbeat(member string, generation int32) int16 {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = 4
	req.Group, req.MemberID, req.Generation = "g", member, generation
	return h.gs.heartbeat(req).(*kmsg.HeartbeatResponse).ErrorCode
}

// pending reports whether nothing has arrived on ch yet, once every
// goroutine of the bubble is blocked.
func pending[T any](ch <-chan T) bool {
	synctest.Wait()
	select {
	case v := <-ch:
		panic(fmt.Sprintf("%+v", v))
	default:
		return true
	}
}

func memberIDs(r *kmsg.JoinGroupResponse) []string {
	var ids []string
	for _, m := range r.Members {
		ids = append(ids, m.MemberID)
	}
	return ids
}

// TestGroupRebalance walks a group through its states: a first member
// joins and syncs alone; a second joins, the first learns of the
// rebalance from its heartbeat and rejoins; the leader gets both members'
// metadata and assigns; the follower's SyncGroup waits for the leader's;
// a member whose session expires is removed and the other rejoins alone.
func TestGroupRebalance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newGroupHarness(t, groupOptions{})
		a := h.newMember()
		ja := <-h.join(a)
		require.Equal(t, int16(0), ja.ErrorCode)
		require.Equal(t, int32(1), ja.Generation)
		require.Equal(t, a, ja.LeaderID)
		require.Equal(t, "range", *ja.Protocol)
		require.Equal(t, []string{a}, memberIDs(ja))
		sa := <-h.sync(a, 1, map[string]string{a: "all"})
		require.Equal(t, int16(0), sa.ErrorCode)
		require.Equal(t, "all", string(sa.MemberAssignment))
		require.Equal(t, int16(0), h.heartbeat(a, 1))

		b := h.newMember()
		jb := h.join(b)
		require.True(t, pending(jb), "b waits for a to rejoin")
		require.Equal(t, kerr.RebalanceInProgress.Code, h.heartbeat(a, 1))
		ja = <-h.join(a)
		rb := <-jb
		require.Equal(t, int32(2), ja.Generation)
		require.Equal(t, int32(2), rb.Generation)
		require.Equal(t, a, ja.LeaderID, "the leader stays")
		require.Equal(t, []string{a, b}, memberIDs(ja))
		require.Equal(t, ja.Members[1].ProtocolMetadata, []byte(b+"/range"))
		require.Empty(t, rb.Members, "only the leader gets the members")

		sb := h.sync(b, 2, nil)
		require.True(t, pending(sb), "the follower waits for the leader's assignment")
		require.Equal(t, kerr.IllegalGeneration.Code, (<-h.sync(a, 1, nil)).ErrorCode)
		sa = <-h.sync(a, 2, map[string]string{a: "p0", b: "p1"})
		require.Equal(t, "p0", string(sa.MemberAssignment))
		require.Equal(t, "p1", string((<-sb).MemberAssignment))
		require.Equal(t, int16(0), h.heartbeat(b, 2))

		// b goes quiet; a heartbeats until b's session has expired.
		for range 4 {
			time.Sleep(session / 3)
			code := h.heartbeat(a, 2)
			if code != 0 {
				require.Equal(t, kerr.RebalanceInProgress.Code, code)
				break
			}
		}
		require.Equal(t, kerr.UnknownMemberID.Code, h.heartbeat(b, 2), "b was removed")
		ja = <-h.join(a)
		require.Equal(t, int32(3), ja.Generation)
		require.Equal(t, []string{a}, memberIDs(ja))
	})
}

// TestGroupBarriers checks the initial delay and the barrier deadlines: a
// member that heartbeats but does not rejoin within the rebalance timeout
// is removed and the others go on; a leader that does not sync within it
// is removed, and the follower that waited is told to rejoin.
func TestGroupBarriers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newGroupHarness(t, groupOptions{InitialRebalanceDelay: time.Second})
		a, b := h.newMember(), h.newMember()
		ja, jb := h.join(a), h.join(b)
		require.True(t, pending(ja), "the initial delay waits for more members")
		time.Sleep(time.Second)
		ra, rb := <-ja, <-jb
		require.Equal(t, int32(1), ra.Generation, "both in the first generation")
		require.Equal(t, int32(1), rb.Generation)
		leader, follower := ra.LeaderID, b
		if leader == b {
			follower = a
		}
		sf := h.sync(follower, 1, nil)
		require.True(t, pending(sf))
		require.Equal(t, int16(0), (<-h.sync(leader, 1, map[string]string{a: "x", b: "y"})).ErrorCode)
		require.Equal(t, int16(0), (<-sf).ErrorCode)

		// c joins; only the leader rejoins. The follower heartbeats (and
		// is told to rejoin) but does not: at the rebalance timeout it is
		// removed and the others go on.
		c := h.newMember()
		jc := h.join(c)
		jl := h.join(leader)
		require.True(t, pending(jc))
		for range rebalance/(5*time.Second) - 1 { // up to 5 s before the deadline
			time.Sleep(5 * time.Second)
			require.Equal(t, kerr.RebalanceInProgress.Code, h.heartbeat(follower, 1))
		}
		rc, rl := <-jc, <-jl
		require.Equal(t, int32(2), rc.Generation)
		require.ElementsMatch(t, []string{leader, c}, memberIDs(rl))
		require.Equal(t, kerr.UnknownMemberID.Code, h.heartbeat(follower, 1))

		// The leader heartbeats but never syncs: at the deadline it is
		// removed, and c, waiting at the sync barrier, is told to rejoin.
		sc := h.sync(c, 2, nil)
		for range rebalance/(5*time.Second) - 1 { // up to 5 s before the deadline
			time.Sleep(5 * time.Second)
			require.Equal(t, int16(0), h.heartbeat(leader, 2))
		}
		require.True(t, pending(sc))
		require.Equal(t, kerr.RebalanceInProgress.Code, (<-sc).ErrorCode)
		require.Equal(t, kerr.UnknownMemberID.Code, h.heartbeat(leader, 2))
		rc = <-h.join(c)
		require.Equal(t, int32(3), rc.Generation)
		require.Equal(t, c, rc.LeaderID)
	})
}

// TestGroupErrors checks the requests the coordinator refuses, and the
// rules of OffsetCommit.
func TestGroupErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newGroupHarness(t, groupOptions{})
		require.Equal(t, int16(0), h.gs.checkCommit("g", -1, "", nil, 8, nil), "no group: admin commits go")
		require.Equal(t, kerr.IllegalGeneration.Code, h.gs.checkCommit("g", 3, "m", nil, 8, nil), "no group: a stale member's commit does not")
		require.Equal(t, kerr.UnknownMemberID.Code, (<-h.join("ghost")).ErrorCode)

		a := h.newMember()
		require.Equal(t, kerr.InconsistentGroupProtocol.Code, func() int16 {
			req := kmsg.NewPtrJoinGroupRequest()
			req.Version, req.Group, req.MemberID, req.ProtocolType = 9, "g", a, "consumer"
			req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10_000, 10_000
			return h.gs.join(h.ctx, req, "c", "h").(*kmsg.JoinGroupResponse).ErrorCode
		}(), "no protocols")
		require.Equal(t, kerr.InvalidSessionTimeout.Code, func() int16 {
			req := kmsg.NewPtrJoinGroupRequest()
			req.Version, req.Group, req.ProtocolType = 9, "g", "consumer"
			req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 1000, 10_000
			req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
			return h.gs.join(h.ctx, req, "c", "h").(*kmsg.JoinGroupResponse).ErrorCode
		}(), "below group.min.session.timeout.ms")

		ja := <-h.join(a, "cooperative-sticky", "range")
		require.Equal(t, "cooperative-sticky", *ja.Protocol)
		b := h.newMember()
		require.Equal(t, kerr.InconsistentGroupProtocol.Code, (<-h.join(b, "roundrobin")).ErrorCode)
		jb := h.join(b, "range") // the only protocol both have
		require.True(t, pending(jb))
		require.Equal(t, kerr.RebalanceInProgress.Code, (<-h.sync(a, 1, nil)).ErrorCode)
		require.Equal(t, int16(0), h.gs.checkCommit("g", 1, a, nil, 8, nil), "commits of the last generation go during the join")
		ja = <-h.join(a, "cooperative-sticky", "range")
		require.Equal(t, "range", *ja.Protocol)
		require.Equal(t, "range", *(<-jb).Protocol)
		require.Equal(t, kerr.RebalanceInProgress.Code, h.gs.checkCommit("g", 2, a, nil, 8, nil), "not at the sync barrier")
		<-h.sync(a, 2, nil)
		require.Equal(t, int16(0), h.gs.checkCommit("g", 2, b, nil, 8, nil))
		require.Equal(t, kerr.IllegalGeneration.Code, h.gs.checkCommit("g", 1, b, nil, 8, nil))
		require.Equal(t, kerr.UnknownMemberID.Code, h.gs.checkCommit("g", -1, "", nil, 8, nil), "no admin commits while the group has members")
		require.Equal(t, kerr.UnknownMemberID.Code, h.heartbeat("nobody", 2))

		// LeaveGroup v3+: each member answered; the group rebalances and
		// empties.
		leave := kmsg.NewPtrLeaveGroupRequest()
		leave.Version, leave.Group = 5, "g"
		leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: a}, {MemberID: "nobody"}, {MemberID: b}}
		lr := h.gs.leave(leave).(*kmsg.LeaveGroupResponse)
		require.Equal(t, int16(0), lr.ErrorCode)
		require.Equal(t, []int16{0, kerr.UnknownMemberID.Code, 0}, []int16{lr.Members[0].ErrorCode, lr.Members[1].ErrorCode, lr.Members[2].ErrorCode})
		require.Equal(t, int16(0), h.gs.checkCommit("g", -1, "", nil, 8, nil), "empty again")
	})
}

// TestGroupPauseKeepsSessions: a pause of the coordinator's process
// (ticks far apart) does not count against members' sessions; time
// that passes with the coordinator running does.
func TestGroupPauseKeepsSessions(t *testing.T) {
	gs := newGroups(groupOptions{Tick: time.Hour}, nil) // only this test ticks
	defer gs.Close()
	v := kmsg.NewGroupMetadataValue()
	v.Version, v.ProtocolType, v.Generation = 3, "consumer", 4
	v.Protocol, v.Leader = kmsg.StringPtr("range"), kmsg.StringPtr("m1")
	vm := kmsg.NewGroupMetadataValueMember()
	vm.MemberID, vm.SessionTimeoutMillis, vm.RebalanceTimeoutMillis = "m1", 10_000, 30_000
	v.Members = append(v.Members, vm)
	t0 := time.Now()
	require.NoError(t, gs.restore("g", v.AppendTo(nil), t0))
	members := func() int {
		gi, ok := gs.describe("g")
		if !ok {
			return 0
		}
		return len(gi.members)
	}
	gs.tick(t0)
	require.Equal(t, 1, members())

	// A day without a tick (ten ticks is a pause): a pause, not the
	// member's silence.
	at := t0.Add(24 * time.Hour)
	gs.tick(at)
	require.Equal(t, 1, members(), "the pause does not end the session")
	// Then the coordinator runs on, ticking, past the session.
	for range 110 {
		at = at.Add(100 * time.Millisecond)
		gs.tick(at)
	}
	require.Zero(t, members(), "the session ends while the coordinator runs")
}

// TestGroupRejoinStable: as in Kafka, a follower that joins again with
// the same metadata while the group is stable gets the current
// generation at once, with no rebalance (its assignment stays); one with
// other metadata, or the leader, starts a rebalance.
func TestGroupRejoinStable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newGroupHarness(t, groupOptions{InitialRebalanceDelay: time.Second})
		a, b := h.newMember(), h.newMember()
		ja, jb := h.join(a), h.join(b)
		ra, rb := <-ja, <-jb
		require.Equal(t, ra.Generation, rb.Generation)
		gen := ra.Generation
		leader, follower := ra.LeaderID, b
		if leader == b {
			follower = a
		}
		sf := h.sync(follower, gen, nil)
		sl := <-h.sync(leader, gen, map[string]string{a: "pa", b: "pb"})
		require.Zero(t, sl.ErrorCode)
		require.Zero(t, (<-sf).ErrorCode)

		// The follower rejoins, unchanged: the same generation, at once.
		r := <-h.join(follower)
		require.Zero(t, r.ErrorCode)
		require.Equal(t, gen, r.Generation)
		require.Equal(t, leader, r.LeaderID)
		require.Zero(t, h.heartbeat(leader, gen), "no rebalance")
		s := <-h.sync(follower, gen, nil)
		require.Zero(t, s.ErrorCode)
		require.Equal(t, "p"+map[string]string{a: "a", b: "b"}[follower], string(s.MemberAssignment))

		// The leader rejoins: a rebalance.
		jl := h.join(leader)
		require.True(t, pending(jl), "the leader waits for the follower")
		require.Equal(t, kerr.RebalanceInProgress.Code, h.heartbeat(follower, gen))
		jf := h.join(follower)
		require.Equal(t, gen+1, (<-jl).Generation)
		require.Equal(t, gen+1, (<-jf).Generation)
	})
}
