package kafkaserver

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless/kafkaerr"
)

// heartbeat answers Heartbeat: it extends the member's session, and tells
// it REBALANCE_IN_PROGRESS while the join barrier is open. A static
// member's heartbeat must come from the member its instance ID maps to
// (FENCED_INSTANCE_ID).
func (gs *groups) heartbeat(req *kmsg.HeartbeatRequest) kmsg.Response {
	if resp, ok := gs.classicToConsumer(req.Group, func(g *cgroup, now time.Time) (kmsg.Response, *consumerStore) {
		return gs.classicHeartbeatConsumer(g, req, now), nil
	}, nil); ok {
		return resp // a classic member of a consumer group (consumerclassic.go)
	}
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.mu.groups[req.Group]
	code := int16(kafkaerr.UnknownMemberID)
	if g != nil {
		code = g.validateMember(req.MemberID, req.InstanceID)
	}
	switch {
	case code != 0:
		resp.ErrorCode = code
	case req.Generation != g.generation:
		resp.ErrorCode = int16(kafkaerr.IllegalGeneration)
	case g.state == groupEmpty:
		resp.ErrorCode = int16(kafkaerr.UnknownMemberID)
	default:
		m := g.members[req.MemberID]
		m.expires = gs.opts.clock.Now().Add(m.session)
		if g.state == groupPreparingRebalance {
			resp.ErrorCode = int16(kafkaerr.RebalanceInProgress)
		}
	}
	return resp
}

// leave answers LeaveGroup: the members named leave (a rebalance starts),
// each answered on its own from version 3 on, as Kafka answers them: a
// member named by instance ID alone (an admin's removal) leaves if the
// group maps the instance ID, one named by member ID if it is a member
// (or a member ID handed out) and, if it names an instance ID too, the
// one the group maps it to (else FENCED_INSTANCE_ID).
func (gs *groups) leave(req *kmsg.LeaveGroupRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	leaving := req.Members
	if req.Version < 3 {
		leaving = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	if resp, ok := gs.classicToConsumer(req.Group, func(g *cgroup, _ time.Time) (kmsg.Response, *consumerStore) {
		return gs.classicLeaveConsumer(g, req, leaving)
	}, func(r kmsg.Response, code int16) {
		lr := r.(*kmsg.LeaveGroupResponse)
		lr.ErrorCode = code
		for i := range lr.Members {
			lr.Members[i].ErrorCode = code
		}
	}); ok {
		return resp // classic members of a consumer group (consumerclassic.go)
	}
	now := gs.opts.clock.Now()
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.mu.groups[req.Group]
	left := 0
	for _, l := range leaving {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID = l.MemberID, l.InstanceID
		switch {
		case g == nil:
			rm.ErrorCode = int16(kafkaerr.UnknownMemberID)
		case l.MemberID == "":
			if l.InstanceID != nil && g.members[g.static[*l.InstanceID]] != nil {
				gs.remove(g, g.members[g.static[*l.InstanceID]])
				left++
			} else {
				rm.ErrorCode = int16(kafkaerr.UnknownMemberID)
			}
		case g.members[l.MemberID] == nil && hasKey(g.pending, l.MemberID):
			delete(g.pending, l.MemberID)
			left++
		default:
			if rm.ErrorCode = g.validateMember(l.MemberID, l.InstanceID); rm.ErrorCode == 0 {
				gs.remove(g, g.members[l.MemberID])
				left++
			}
		}
		if req.Version < 3 {
			resp.ErrorCode = rm.ErrorCode
		} else {
			resp.Members = append(resp.Members, rm)
		}
	}
	if left > 0 {
		if g.state == groupStable || g.state == groupCompletingRebalance {
			gs.prepareRebalance(g, now, "member left")
		}
		gs.maybeCompleteJoin(g, now)
	}
	return resp
}

func hasKey[K comparable, V any](m map[K]V, k K) bool {
	_, ok := m[k]
	return ok
}

// remove takes a member out of its group, answering whatever it waits
// for with UNKNOWN_MEMBER_ID.
func (gs *groups) remove(g *group, m *member) {
	if m.join != nil {
		m.join <- joinAnswer{code: int16(kafkaerr.UnknownMemberID), generation: -1}
		m.join = nil // answered (joinStaticAgain checks it)
	}
	if m.sync != nil {
		m.sync <- syncAnswer{code: int16(kafkaerr.UnknownMemberID)}
		m.sync = nil
	}
	g.drop(m)
	gs.log.Info("group member removed", zap.String("group", g.id), zap.String("member", m.id), zap.Stringp("instance", m.instanceID))
}

// tick expires sessions and member IDs handed out, closes barriers whose
// time is up, and forgets empty groups.
func (gs *groups) tick(now time.Time) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gap := now.Sub(gs.mu.lastTick); !gs.mu.lastTick.IsZero() && gap > max(10*gs.opts.Tick, time.Second) {
		// The process was paused (SIGSTOP, a stalled VM): no member
		// could reach it meanwhile, so the pause does not count against
		// their sessions, nor against the barriers.
		gs.log.Warn("group coordinator was paused; sessions and barriers extended", zap.Duration("pause", gap))
		for _, g := range gs.mu.groups {
			for _, m := range g.members {
				m.expires = m.expires.Add(gap)
			}
			if !g.deadline.IsZero() {
				g.deadline = g.deadline.Add(gap)
			}
		}
		for _, cg := range gs.mu.consumer {
			for _, m := range cg.members {
				m.expires = m.expires.Add(gap)
			}
		}
	}
	gs.mu.lastTick = now
	gs.tickConsumers(now)
	for id, g := range gs.mu.groups {
		expired := false
		for _, m := range g.members {
			if m.join == nil && m.sync == nil && now.After(m.expires) {
				gs.log.Info("group member session expired", zap.String("group", g.id), zap.String("member", m.id))
				gs.remove(g, m)
				expired = true
			}
		}
		for pid, deadline := range g.pending {
			if now.After(deadline) {
				delete(g.pending, pid)
			}
		}
		if expired && (g.state == groupStable || g.state == groupCompletingRebalance) {
			gs.prepareRebalance(g, now, "session expired")
		}
		switch g.state {
		case groupPreparingRebalance:
			if !now.Before(g.deadline) {
				gs.completeJoin(g, now)
			} else {
				gs.maybeCompleteJoin(g, now)
			}
		case groupCompletingRebalance:
			if !now.Before(g.deadline) {
				for _, m := range g.members {
					if m.sync == nil {
						gs.remove(g, m) // never synced
					}
				}
				gs.prepareRebalance(g, now, "sync barrier timed out")
				gs.maybeCompleteJoin(g, now)
			}
		}
		if g.state == groupEmpty && len(g.members) == 0 && len(g.pending) == 0 {
			delete(gs.mu.groups, id)
			gs.keepEmptyLocked(id, emptyGroup{generation: g.generation, protocolType: g.protocolType})
		}
	}
}
