package kafkaserver

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless/kafkaerr"
)

// Static membership of classic groups (KIP-345), as Kafka's group
// coordinator has it. A member that names a group instance ID (JoinGroup
// version 5 on) is static: the group maps the instance ID to the member
// ID it has now (group.static). A static member joins with no
// MEMBER_ID_REQUIRED round trip, its member ID being the instance ID, a
// dash and a UUID. When it restarts it joins again with its instance ID
// and no member ID: it gets a new member ID, put in place of the old one
// with the old one's assignment, and, if the group is stable and the
// protocol the group would select did not change, no rebalance (the
// group's state is stored first, on a cluster node, so that a takeover
// knows the new member ID). A request that names an instance ID with
// another member ID than the one mapped is FENCED_INSTANCE_ID: the older
// of two processes started with the same instance ID is fenced. A join
// barrier that closes keeps the static members that did not join (their
// session may still bring them back) and removes the dynamic ones; a
// static member goes when its session expires, or when LeaveGroup names
// it (by instance ID: kafka-consumer-groups --remove-members), and then a
// rebalance starts. The mapping is stored with the group (groupstore.go):
// the stored members carry their instance IDs.

// validateMember returns the error code of a request by memberID naming
// instanceID (nil: none), as Kafka validates members of classic groups:
// with an instance ID, the group must map it (UNKNOWN_MEMBER_ID) to
// memberID (FENCED_INSTANCE_ID); without, memberID must be a member.
// Called with gs.mu held.
func (g *group) validateMember(memberID string, instanceID *string) int16 {
	if instanceID == nil {
		if g.members[memberID] == nil {
			return int16(kafkaerr.UnknownMemberID)
		}
		return 0
	}
	switch mapped, ok := g.static[*instanceID]; {
	case !ok:
		return int16(kafkaerr.UnknownMemberID)
	case mapped != memberID:
		return int16(kafkaerr.FencedInstanceID)
	}
	return 0
}

// add makes m a member of g, the last in join order, and maps its
// instance ID if it has one. Called with gs.mu held.
func (g *group) add(m *member) {
	m.order = g.joins
	g.joins++
	g.members[m.id] = m
	if m.instanceID != nil {
		if g.static == nil {
			g.static = map[string]string{}
		}
		g.static[*m.instanceID] = m.id
	}
}

// drop takes m out of g's members, and its instance ID out of the static
// mapping. Called with gs.mu held.
func (g *group) drop(m *member) {
	delete(g.members, m.id)
	if m.instanceID != nil && g.static[*m.instanceID] == m.id {
		delete(g.static, *m.instanceID)
	}
}

// replaceStatic puts a member of ID newID in the place of the static
// member old (its join order, assignment, leadership and instance ID),
// and returns it. A JoinGroup or SyncGroup of old that waits is answered
// FENCED_INSTANCE_ID. Called with gs.mu held.
func (g *group) replaceStatic(old *member, newID string) *member {
	if old.join != nil {
		old.join <- joinAnswer{code: int16(kafkaerr.FencedInstanceID), generation: -1}
		old.join = nil
	}
	if old.sync != nil {
		old.sync <- syncAnswer{code: int16(kafkaerr.FencedInstanceID)}
		old.sync = nil
	}
	m := &member{id: newID, instanceID: old.instanceID, clientID: old.clientID, clientHost: old.clientHost,
		session: old.session, rebalance: old.rebalance, protocols: old.protocols, expires: old.expires,
		order: old.order, assignment: old.assignment}
	delete(g.members, old.id)
	g.members[newID] = m
	if g.leader == old.id {
		g.leader = newID
	}
	g.static[*m.instanceID] = newID
	return m
}

// newStaticMemberID returns a member ID for a static member, as Kafka
// makes them: its instance ID, a dash and a UUID (franz-go relies on the
// prefix to tell that a leader ID is its own former one).
func newStaticMemberID(instanceID string) string {
	return instanceID + "-" + uuid.NewString()
}

// joinStaticAgain answers the JoinGroup of a static member that joins
// with its instance ID and no member ID while the group maps the
// instance ID to old: a new member takes old's place. In a stable group
// whose selected protocol the new metadata does not change, there is no
// rebalance: the group's state is stored (on a cluster node) and the
// member gets the current generation; if it was the leader, from version
// 9 on it is told it leads, with the members, but to skip the
// assignment, and before version 9 it is given the old leader ID, so
// that it follows. Otherwise the member waits at the join barrier of a
// rebalance. Called with gs.mu held, which it releases.
func (gs *groups) joinStaticAgain(ctx context.Context, g *group, old *member, req *kmsg.JoinGroupRequest, resp *kmsg.JoinGroupResponse,
	session, rebalance time.Duration, now time.Time) kmsg.Response {
	oldLeader := g.leader
	was := *old
	id := newStaticMemberID(*req.InstanceID)
	m := g.replaceStatic(old, id)
	m.session, m.rebalance, m.protocols = session, rebalance, req.Protocols
	m.expires = now.Add(session)
	gs.log.Info("static member joined again: replaced", zap.String("group", g.id), zap.String("instance", *req.InstanceID),
		zap.String("old_member", old.id), zap.String("member", id), zap.Stringer("state", g.state))
	ch := make(chan joinAnswer, 1)
	m.join = ch
	if g.state != groupStable || g.selectProtocol() != g.protocol {
		if g.state == groupStable || g.state == groupCompletingRebalance {
			// At the sync barrier the leader may be assigning to the
			// old member ID: the group rebalances, as in Kafka.
			gs.prepareRebalance(g, now, "static member joined again: "+id)
		}
		gs.maybeCompleteJoin(g, now)
		gs.mu.Unlock()
		return gs.awaitJoin(ctx, ch, resp, id)
	}
	// Stable, and the protocol stays: store the new member ID, then
	// answer. Meanwhile the member counts as joined, should a rebalance
	// start (its answer then comes from the barrier).
	stored := gs.storeLocked(g, g.metadataValue(now))
	gs.mu.Unlock()
	err := <-stored
	gs.mu.Lock()
	if m.join != ch { // answered meanwhile: a rebalance, or the group dropped
		gs.mu.Unlock()
		return gs.awaitJoin(ctx, ch, resp, id)
	}
	m.join = nil
	if err != nil {
		resp.ErrorCode, resp.MemberID, resp.Generation, resp.LeaderID = codeOf(commitError(err)), "", g.generation, oldLeader
		if gs.mu.groups[g.id] == g && g.members[id] == m {
			// Not stored: the old member ID stays mapped, as in Kafka.
			back := g.replaceStatic(m, was.id)
			back.session, back.rebalance, back.protocols, back.expires = was.session, was.rebalance, was.protocols, was.expires
		}
		gs.mu.Unlock()
		return resp
	}
	a := joinAnswer{generation: g.generation, protocolType: g.protocolType, protocol: g.protocol, leader: oldLeader}
	if req.Version >= 9 {
		a.leader = g.leader
		if g.leader == id {
			a.members, a.skipAssignment = g.joinMembers(), true
		}
	}
	gs.mu.Unlock()
	ch <- a
	return gs.awaitJoin(ctx, ch, resp, id)
}

// awaitJoin waits for the answer to member id's JoinGroup on ch and
// fills resp with it.
func (gs *groups) awaitJoin(ctx context.Context, ch <-chan joinAnswer, resp *kmsg.JoinGroupResponse, id string) kmsg.Response {
	var a joinAnswer
	select {
	case a = <-ch:
	case <-ctx.Done():
		resp.ErrorCode = int16(kafkaerr.NotCoordinator) // shutting down
		return resp
	}
	resp.ErrorCode, resp.Generation, resp.MemberID = a.code, a.generation, id
	if a.code == 0 {
		resp.ProtocolType, resp.Protocol = &a.protocolType, &a.protocol
		resp.LeaderID, resp.Members, resp.SkipAssignment = a.leader, a.members, a.skipAssignment
	}
	return resp
}
