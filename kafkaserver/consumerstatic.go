package kafkaserver

import (
	"time"

	"go.uber.org/zap"

	"github.com/diskless-go/diskless/kafkaerr"
)

// Static membership of consumer groups of the KIP-848 protocol, as Kafka
// 4's group coordinator has it (for classic groups, see groupstatic.go).
// A member that names an instance ID when it joins is static: the group
// maps the instance ID to its member ID (cgroup.static).
//
// A static member that leaves with member epoch -2 (leaveStaticEpoch)
// does not leave: it is kept, at epoch -2, with its assignment (less
// what it was giving up, now free), and the group epoch stays; its
// session timeout runs on from its last heartbeat. If a member joins with
// the instance ID before then, it takes the place of the one that left
// (replaceStatic): it keeps its own member ID, joins at member epoch 0
// and is moved at once to the target epoch with the old one's
// assignment, with no new group epoch. If nobody comes back, the member
// is removed when its session expires, and the group epoch moves on as
// for any member that goes.
//
// A member joining with the instance ID of a member that has not left
// with -2 is UNRELEASED_INSTANCE_ID, whatever its member ID (franz-go
// retries it a few times). A heartbeat or a leave (member epoch not 0)
// naming an instance ID the group does not map is UNKNOWN_MEMBER_ID (a
// leave to no group GROUP_ID_NOT_FOUND), and one naming it with another
// member ID than the one mapped FENCED_INSTANCE_ID: the older of two
// processes with the same instance ID is fenced. Heartbeats that omit the
// instance ID (clients send it only in full heartbeats) are checked by
// member ID alone. A leave with -2 must name the instance ID
// (INVALID_REQUEST), as in Kafka. franz-go (v1.22.3) omits it: a static
// franz-go member that closes stays until its session expires, and its
// restart is UNRELEASED_INSTANCE_ID until then, as with Kafka.

// leaveStaticEpoch is the member epoch of a static member that leaves for
// a while: LEAVE_GROUP_STATIC_MEMBER_EPOCH.
const leaveStaticEpoch = -2

// staticMember returns the member the instance ID maps to, or nil.
// Called with gs.mu held.
func (g *cgroup) staticMember(instanceID string) *cmember {
	if id, ok := g.static[instanceID]; ok {
		return g.members[id]
	}
	return nil
}

// checkStatic returns the error code of a request by memberID naming
// instanceID at a non-zero member epoch: UNKNOWN_MEMBER_ID if g does not
// map the instance ID, FENCED_INSTANCE_ID if it maps it to another
// member; and the member. Called with gs.mu held.
func (g *cgroup) checkStatic(memberID, instanceID string) (*cmember, int16, string) {
	m := g.staticMember(instanceID)
	switch {
	case m == nil:
		return nil, int16(kafkaerr.UnknownMemberID), "instance " + instanceID + " is unknown"
	case m.id != memberID:
		return nil, int16(kafkaerr.FencedInstanceID), "member " + memberID + " with instance " + instanceID + " was fenced by member " + m.id
	}
	return m, 0, ""
}

// addConsumer makes m a member of g and maps its instance ID if it has
// one. Called with gs.mu held.
func (g *cgroup) addConsumer(m *cmember) {
	g.members[m.id] = m
	if m.instanceID != nil {
		if g.static == nil {
			g.static = map[string]string{}
		}
		g.static[*m.instanceID] = m.id
	}
}

// dropConsumer takes m out of g's members, its target and, if mapped to
// it, its instance ID. Called with gs.mu held.
func (g *cgroup) dropConsumer(m *cmember) {
	delete(g.members, m.id)
	delete(g.target, m.id)
	if m.instanceID != nil && g.static[*m.instanceID] == m.id {
		delete(g.static, *m.instanceID)
	}
}

// leaveStatic keeps the static member m, that leaves with epoch -2, at
// that epoch: what it was giving up is free, what it holds stays its, and
// the group epoch stays. Called with gs.mu held.
func (gs *groups) leaveStatic(g *cgroup, m *cmember) {
	m.epoch = leaveStaticEpoch
	m.revoking, m.revokeBy = nil, time.Time{}
	gs.log.Info("consumer group static member left for now", zap.String("group", g.id), zap.String("member", m.id),
		zap.Stringp("instance", m.instanceID), zap.Time("expires", m.expires))
}

// replaceStatic puts a new member of ID id in the place of the static
// member old, that left with epoch -2: the new one has old's
// subscription, assignment and target, at member epoch 0, so that its
// join moves it to the target epoch with old's partitions and the group
// epoch stays. It returns the new member. Called with gs.mu held.
func (gs *groups) replaceStatic(g *cgroup, old *cmember, id string) *cmember {
	m := &cmember{id: id, instanceID: old.instanceID, rack: old.rack, clientID: old.clientID, clientHost: old.clientHost,
		rebalanceTimeout: old.rebalanceTimeout, subscribed: old.subscribed, regex: old.regex, re: old.re,
		serverAssignor: old.serverAssignor, assigned: cloneAssignment(old.assigned), owned: assignment{}}
	target, hasTarget := g.target[old.id]
	g.dropConsumer(old)
	g.addConsumer(m)
	if hasTarget {
		g.target[id] = target
	}
	gs.log.Info("consumer group static member replaced", zap.String("group", g.id), zap.Stringp("instance", m.instanceID),
		zap.String("old_member", old.id), zap.String("member", id), zap.Int32("group_epoch", g.epoch))
	return m
}
