package kafkaserver

import (
	"context"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/kafkaerr"
)

// Members of the classic protocol in a consumer group of the KIP-848
// protocol, as Kafka 4 serves them while a group moves from one protocol
// to the other (groupconvert.go). Such a member speaks JoinGroup,
// SyncGroup, Heartbeat and LeaveGroup, but the coordinator, not a leader
// among the members, assigns its partitions, with the group's assignor,
// and it reconciles as every member of the group does (consumergroups.go):
//
//   - JoinGroup reads the member's subscription, rack and owned
//     partitions from the metadata of its first protocol (Kafka's
//     ConsumerProtocolSubscription: every protocol of a consumer carries
//     the same subscription), moves the group epoch on if the
//     subscription changed, and reconciles the member with the partitions
//     it says it owns. The answer comes at once: the generation is the
//     member epoch, the protocol the member's first, and no member is the
//     leader (the members send SyncGroup with no assignments).
//   - SyncGroup answers the member's assignment (without what it must
//     give up), encoded as a ConsumerProtocolAssignment of the version of
//     its metadata; REBALANCE_IN_PROGRESS if the group epoch moved on and
//     the member is not giving up partitions.
//   - Heartbeat is REBALANCE_IN_PROGRESS when the member must join again:
//     the group epoch moved on, it must give up partitions, or a
//     partition of its target that another member held is free.
//   - LeaveGroup removes the members named, and the group epoch moves on.
//
// Each checks the member as a classic group does: UNKNOWN_MEMBER_ID for a
// member the group does not have, or one of the consumer protocol;
// FENCED_INSTANCE_ID for an instance ID mapped to another member;
// ILLEGAL_GENERATION for a generation other than the member epoch. A
// member that joins with a known instance ID and no member ID takes the
// place of the one the instance ID maps to, as in Kafka, whether or not
// that one left. Its session is the session timeout it joined with; a
// member that must give up partitions and does not join again within its
// rebalance timeout is removed, as a member of the consumer protocol is.
//
// Simplification against Kafka: Kafka also removes a classic member that
// does not send SyncGroup within its rebalance timeout of its join; here
// its session timeout does.

// classicMeta is what a member of the classic protocol in a consumer
// group has that others do not.
type classicMeta struct {
	session   time.Duration
	protocols []kmsg.JoinGroupRequestProtocol
}

// subscription decodes the consumer protocol subscription of a classic
// member's protocols: the first one's (every protocol of a consumer
// carries the same).
func subscription(protocols []kmsg.JoinGroupRequestProtocol) (kmsg.ConsumerMemberMetadata, bool) {
	var md kmsg.ConsumerMemberMetadata
	if len(protocols) == 0 || md.ReadFrom(protocols[0].Metadata) != nil {
		return md, false
	}
	return md, true
}

// encodeAssignment encodes a as a ConsumerProtocolAssignment of version
// (capped at the highest known), naming its topics by names; a topic
// with no name (deleted) is left out.
func encodeAssignment(a assignment, names map[uuid.UUID]string, version int16) []byte {
	out := kmsg.NewConsumerMemberAssignment()
	out.Version = min(max(version, 0), 3)
	for _, id := range sortedIDs(a) {
		name, ok := names[id]
		if !ok || len(a[id]) == 0 {
			continue
		}
		t := kmsg.NewConsumerMemberAssignmentTopic()
		t.Topic, t.Partitions = name, slices.Clone(a[id])
		out.Topics = append(out.Topics, t)
	}
	slices.SortFunc(out.Topics, func(x, y kmsg.ConsumerMemberAssignmentTopic) int {
		switch {
		case x.Topic < y.Topic:
			return -1
		case x.Topic > y.Topic:
			return 1
		}
		return 0
	})
	return out.AppendTo(nil)
}

// metadataVersion returns the version of a classic member's subscription
// (that of its assignments).
func (c *classicMeta) metadataVersion() int16 {
	md, _ := subscription(c.protocols)
	return md.Version
}

// supportsClassic reports whether a classic member joining with
// protocols may join g: its protocol type is "consumer", and, if g has
// classic members, one of its protocols is one every classic member has.
func (g *cgroup) supportsClassic(protocolType string, protocols []kmsg.JoinGroupRequestProtocol) bool {
	if protocolType != "consumer" || len(protocols) == 0 {
		return false
	}
	for _, p := range protocols {
		all := true
		for _, m := range g.members {
			if m.classic != nil && !slices.ContainsFunc(m.classic.protocols, func(q kmsg.JoinGroupRequestProtocol) bool { return q.Name == p.Name }) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// classicMember returns the classic member of g that memberID and
// instanceID name, or the error code of the request: see above. Called
// with gs.mu held.
func (g *cgroup) classicMember(memberID string, instanceID *string) (*cmember, int16) {
	var m *cmember
	if instanceID != nil {
		var code int16
		if m, code, _ = g.checkStatic(memberID, *instanceID); code != 0 {
			return nil, code
		}
	} else {
		m = g.members[memberID]
	}
	if m == nil || m.classic == nil {
		return nil, int16(kafkaerr.UnknownMemberID)
	}
	return m, 0
}

// topicIDs returns the IDs of topics by name.
func topicIDs(topics []diskless.TopicDescription) map[string]uuid.UUID {
	ids := make(map[string]uuid.UUID, len(topics))
	for _, t := range topics {
		ids[t.Name] = t.ID
	}
	return ids
}

// classicJoinConsumer answers the JoinGroup of a classic member to the
// consumer group g, with the broker's topics now (see above); it returns
// the store to wait for before the answer. Called with gs.mu held.
func (gs *groups) classicJoinConsumer(g *cgroup, req *kmsg.JoinGroupRequest, topics []diskless.TopicDescription, clientID, clientHost string, session, rebalance time.Duration, now time.Time) (kmsg.Response, *consumerStore) {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.Generation, resp.MemberID = -1, req.MemberID
	fail := func(code int16) (kmsg.Response, *consumerStore) { resp.ErrorCode = code; return resp, nil }
	if !g.supportsClassic(req.ProtocolType, req.Protocols) {
		return fail(int16(kafkaerr.InconsistentGroupProtocol))
	}
	sub, ok := subscription(req.Protocols)
	if !ok {
		return fail(int16(kafkaerr.InconsistentGroupProtocol))
	}
	id, unknown := req.MemberID, req.MemberID == ""
	if unknown {
		id = uuid.NewString()
		if req.InstanceID == nil && req.Version >= 4 {
			resp.MemberID = id
			return fail(int16(kafkaerr.MemberIDRequired))
		}
	}
	var m, replaced *cmember
	changed := false
	switch old := g.members[g.static[deref(req.InstanceID)]]; {
	case req.InstanceID != nil && unknown && old != nil:
		m, replaced = gs.replaceStatic(g, old, id), old // its assignment, at epoch 0: no new group epoch
	case req.InstanceID != nil && !unknown:
		var code int16
		if m, code, _ = g.checkStatic(id, *req.InstanceID); code != 0 {
			return fail(code)
		}
	default:
		m = g.members[id]
	}
	if m != nil && m.classic == nil && m.epoch != 0 {
		return fail(int16(kafkaerr.UnknownMemberID)) // a member of the consumer protocol
	}
	if m == nil {
		m = &cmember{id: id, instanceID: req.InstanceID, assigned: assignment{}, owned: assignment{}}
		g.addConsumer(m)
		changed = true
		gs.log.Info("consumer group member joined with the classic protocol", zap.String("group", g.id), zap.String("member", id),
			zap.Stringp("instance", req.InstanceID))
	}
	m.clientID, m.clientHost = clientID, clientHost
	m.classic = &classicMeta{session: session, protocols: req.Protocols}
	m.rebalanceTimeout = rebalance
	if sub.Rack != nil {
		m.rack = *sub.Rack
	}
	names := slices.Compact(slices.Sorted(slices.Values(sub.Topics)))
	if !slices.Equal(names, m.subscribed) || m.regex != "" {
		m.subscribed, m.regex, m.re = names, "", nil
		changed = true
	}
	ids := topicIDs(topics)
	m.owned = assignment{}
	for _, t := range sub.OwnedPartitions {
		if tid, ok := ids[t.Topic]; ok {
			m.owned[tid] = slices.Sorted(slices.Values(t.Partitions))
		}
	}
	m.expires = now.Add(session)
	gs.advance(g, m, changed, topics, now)
	m.sent = cloneAssignment(m.assigned)
	resp.Generation, resp.MemberID = m.epoch, m.id
	resp.ProtocolType, resp.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr(req.Protocols[0].Name)
	if replaced != nil && replaced.classic == nil && g.onlyClassicBut(nil) {
		// The last member of the consumer protocol was replaced: the
		// group is classic again, stable, with no rebalance
		// (groupconvert.go).
		cl, outcome := gs.downgradeLocked(g, nil, nil, now)
		resp.Generation, resp.Protocol = cl.generation, kmsg.StringPtr(cl.protocol)
		return resp, outcomeStore(outcome)
	}
	return resp, gs.storeConsumerLocked(g)
}

// classicSyncConsumer answers the SyncGroup of a classic member of the
// consumer group g. Called with gs.mu held.
func (gs *groups) classicSyncConsumer(g *cgroup, req *kmsg.SyncGroupRequest, now time.Time) (kmsg.Response, *consumerStore) {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	m, code := g.classicMember(req.MemberID, req.InstanceID)
	switch {
	case code != 0:
	case req.Generation != m.epoch:
		code = int16(kafkaerr.IllegalGeneration)
	case req.ProtocolType != nil && *req.ProtocolType != "consumer",
		req.Protocol != nil && *req.Protocol != m.classic.protocols[0].Name:
		code = int16(kafkaerr.InconsistentGroupProtocol)
	case g.epoch > m.epoch && len(m.revoking) == 0:
		code = int16(kafkaerr.RebalanceInProgress)
	}
	if code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	m.expires = now.Add(m.classic.session)
	m.sent = cloneAssignment(m.assigned)
	resp.ProtocolType, resp.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr(m.classic.protocols[0].Name)
	resp.MemberAssignment = encodeAssignment(m.assigned, g.names, m.classic.metadataVersion())
	return resp, gs.storeConsumerLocked(g)
}

// classicHeartbeatConsumer answers the Heartbeat of a classic member of
// the consumer group g. Called with gs.mu held.
func (gs *groups) classicHeartbeatConsumer(g *cgroup, req *kmsg.HeartbeatRequest, now time.Time) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	m, code := g.classicMember(req.MemberID, req.InstanceID)
	switch {
	case code != 0:
	case req.Generation != m.epoch:
		code = int16(kafkaerr.IllegalGeneration)
	default:
		m.expires = now.Add(m.classic.session)
		if m.epoch < g.epoch || len(m.revoking) > 0 || g.freeForLocked(m) {
			code = int16(kafkaerr.RebalanceInProgress)
		}
	}
	resp.ErrorCode = code
	return resp
}

// freeForLocked reports whether a partition of m's target that m does
// not have is held by no other member: m gets it by joining again.
func (g *cgroup) freeForLocked(m *cmember) bool {
	held := assignment{}
	for _, o := range g.members {
		if o != m {
			merge(held, o.assigned)
			merge(held, o.revoking)
		}
	}
	for t, ps := range g.target[m.id] {
		for _, p := range ps {
			if !slices.Contains(m.assigned[t], p) && !slices.Contains(held[t], p) {
				return true
			}
		}
	}
	return false
}

// classicLeaveConsumer answers the LeaveGroup of classic members of the
// consumer group g, named as LeaveGroup names them (groupheartbeats.go).
// Called with gs.mu held.
func (gs *groups) classicLeaveConsumer(g *cgroup, req *kmsg.LeaveGroupRequest, leaving []kmsg.LeaveGroupRequestMember) (kmsg.Response, *consumerStore) {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	left := 0
	for _, l := range leaving {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID = l.MemberID, l.InstanceID
		var m *cmember
		switch {
		case l.InstanceID != nil && l.MemberID == "": // an admin's removal by instance ID
			if m = g.staticMember(*l.InstanceID); m == nil || m.classic == nil {
				rm.ErrorCode = int16(kafkaerr.UnknownMemberID)
			}
		default:
			m, rm.ErrorCode = g.classicMember(l.MemberID, l.InstanceID)
		}
		if rm.ErrorCode == 0 {
			rm.MemberID = m.id
			gs.removeConsumer(g, m, "left (LeaveGroup)")
			left++
		}
		if req.Version < 3 {
			resp.ErrorCode = rm.ErrorCode
		} else {
			resp.Members = append(resp.Members, rm)
		}
	}
	if left == 0 {
		return resp, nil
	}
	return resp, gs.storeConsumerLocked(g)
}

// classicToConsumer runs f, a request of the classic protocol, if the
// group id is a consumer group with members, and reports whether it
// was. Kafka's answers wait for the group's store (consumerstore.go); a
// failed store answers its error in place of the code of f's answer.
func (gs *groups) classicToConsumer(id string, f func(g *cgroup, now time.Time) (kmsg.Response, *consumerStore), setCode func(kmsg.Response, int16)) (kmsg.Response, bool) {
	now := gs.opts.clock.Now()
	gs.mu.Lock()
	g := gs.mu.consumer[id]
	if g == nil || len(g.members) == 0 {
		gs.mu.Unlock()
		return nil, false
	}
	resp, stored := f(g, now)
	gs.mu.Unlock()
	if stored != nil {
		if err := stored.wait(); err != nil {
			setCode(resp, codeOf(commitError(err)))
			gs.mu.Lock()
			g.storedOnce = false // store again, whatever changes
			gs.mu.Unlock()
		}
	}
	return resp, true
}

// hasConsumerMembers reports whether the group id is a consumer group
// with members.
func (gs *groups) hasConsumerMembers(id string) bool {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.mu.consumer[id]
	return g != nil && len(g.members) > 0
}

// joinConsumer answers a JoinGroup to a group that is a consumer group
// with members (classicJoinConsumer); ok is false if it is not (any
// more).
func (gs *groups) joinConsumer(ctx context.Context, req *kmsg.JoinGroupRequest, clientID, clientHost string, session, rebalance time.Duration) (kmsg.Response, bool) {
	var topics []diskless.TopicDescription
	if gs.topicsOf != nil {
		var err error
		if topics, err = gs.topicsOf(ctx); err != nil {
			resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
			resp.ErrorCode, resp.Generation, resp.MemberID = codeOf(err), -1, req.MemberID
			return resp, true
		}
	}
	return gs.classicToConsumer(req.Group, func(g *cgroup, now time.Time) (kmsg.Response, *consumerStore) {
		return gs.classicJoinConsumer(g, req, topics, clientID, clientHost, session, rebalance, now)
	}, func(r kmsg.Response, code int16) {
		jr := r.(*kmsg.JoinGroupResponse)
		jr.ErrorCode, jr.Generation = code, -1
	})
}
