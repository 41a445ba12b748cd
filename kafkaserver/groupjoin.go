package kafkaserver

import (
	"bytes"
	"context"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless/kafkaerr"
)

// join answers JoinGroup. A member without an ID gets one; from version 4
// on, with MEMBER_ID_REQUIRED, and must join again with it, unless it is
// static (it names a group instance ID: groupstatic.go), which joins at
// once, or takes the place of the member its instance ID maps to. Every join
// starts a rebalance (or joins the one under way), and the answer waits
// for the join barrier: every member has joined, or the rebalance timeout
// has passed (the members that did not join are removed).
func (gs *groups) join(ctx context.Context, req *kmsg.JoinGroupRequest, clientID, clientHost string) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.Generation, resp.MemberID = -1, req.MemberID
	fail := func(code int16) kmsg.Response { resp.ErrorCode = code; return resp }
	session, rebalance := ms(req.SessionTimeoutMillis), ms(req.RebalanceTimeoutMillis)
	if req.Version == 0 {
		rebalance = session
	}
	switch {
	case req.Group == "":
		return fail(int16(kafkaerr.InvalidGroupID))
	case session < gs.opts.MinSessionTimeout || session > gs.opts.MaxSessionTimeout:
		return fail(int16(kafkaerr.InvalidSessionTimeout))
	case req.ProtocolType == "" || len(req.Protocols) == 0:
		return fail(int16(kafkaerr.InconsistentGroupProtocol))
	}
	if gs.hasConsumerMembers(req.Group) {
		if resp, ok := gs.joinConsumer(ctx, req, clientID, clientHost, session, rebalance); ok {
			return resp // a classic member of a consumer group (consumerclassic.go)
		}
	}
	now := gs.opts.clock.Now()
	gs.mu.Lock()
	if cg := gs.mu.consumer[req.Group]; cg != nil {
		if len(cg.members) > 0 { // since the check above: join again
			gs.mu.Unlock()
			return fail(int16(kafkaerr.RebalanceInProgress))
		}
		delete(gs.mu.consumer, req.Group) // an empty consumer group becomes a classic one
	}
	g := gs.mu.groups[req.Group]
	if g == nil {
		if req.MemberID != "" {
			gs.mu.Unlock()
			return fail(int16(kafkaerr.UnknownMemberID))
		}
		g = &group{id: req.Group, generation: gs.mu.emptyGens[req.Group].generation, members: map[string]*member{}, pending: map[string]time.Time{}}
		delete(gs.mu.emptyGens, req.Group)
		gs.mu.groups[req.Group] = g
	}
	if len(g.members) > 0 && (req.ProtocolType != g.protocolType || !g.supports(req.MemberID, req.Protocols)) {
		gs.mu.Unlock()
		return fail(int16(kafkaerr.InconsistentGroupProtocol))
	}
	id := req.MemberID
	switch _, pending := g.pending[id]; {
	case id == "" && req.InstanceID != nil:
		if old := g.members[g.static[*req.InstanceID]]; old != nil {
			return gs.joinStaticAgain(ctx, g, old, req, resp, session, rebalance, now)
		}
		id = newStaticMemberID(*req.InstanceID) // static: joins with no MEMBER_ID_REQUIRED
	case id == "":
		id = clientID + "-" + uuid.NewString()
		if req.Version >= 4 {
			g.pending[id] = now.Add(session)
			gs.mu.Unlock()
			resp.MemberID = id
			return fail(int16(kafkaerr.MemberIDRequired))
		}
	case pending && req.InstanceID == nil:
		delete(g.pending, id)
	default:
		if code := g.validateMember(id, req.InstanceID); code != 0 {
			gs.mu.Unlock()
			return fail(code)
		}
	}
	m := g.members[id]
	if m != nil && m.join == nil && (g.state == groupStable && id != g.leader || g.state == groupCompletingRebalance) && m.sameMetadata(g.protocol, req.Protocols) {
		// A member that joins again with the same metadata while the
		// group is stable (not its leader) or at the sync barrier gets
		// the current generation, with no rebalance, as in Kafka: a
		// client that restarts its session on a coordinator error
		// (sarama does) carries on.
		a := joinAnswer{generation: g.generation, protocolType: g.protocolType, protocol: g.protocol, leader: g.leader}
		if id == g.leader {
			a.members = g.joinMembers()
		}
		m.clientID, m.clientHost = clientID, clientHost
		m.session, m.rebalance, m.protocols = session, rebalance, req.Protocols
		m.expires = now.Add(session)
		gs.mu.Unlock()
		resp.Generation, resp.MemberID = a.generation, id
		resp.ProtocolType, resp.Protocol = &a.protocolType, &a.protocol
		resp.LeaderID, resp.Members = a.leader, a.members
		return resp
	}
	if m == nil {
		m = &member{id: id, instanceID: req.InstanceID}
		g.add(m)
	}
	if m.join != nil { // an earlier JoinGroup of the member still waits: it loses
		m.join <- joinAnswer{code: int16(kafkaerr.RebalanceInProgress), generation: -1}
	}
	m.clientID, m.clientHost = clientID, clientHost
	m.session, m.rebalance, m.protocols = session, rebalance, req.Protocols
	m.expires = now.Add(session)
	ch := make(chan joinAnswer, 1)
	m.join = ch
	g.protocolType = req.ProtocolType
	if g.state != groupPreparingRebalance {
		gs.prepareRebalance(g, now, "member joined: "+id)
	} else if now.Before(g.initialUntil) {
		g.initialUntil = minTime(now.Add(gs.opts.InitialRebalanceDelay), g.initialCap)
	}
	gs.maybeCompleteJoin(g, now)
	gs.mu.Unlock()
	return gs.awaitJoin(ctx, ch, resp, id)
}

// joinMembers returns the members as JoinGroup tells the leader them: in
// join order, each with its metadata of the group's protocol.
func (g *group) joinMembers() []kmsg.JoinGroupResponseMember {
	var all []kmsg.JoinGroupResponseMember
	for _, m := range g.ordered() {
		jm := kmsg.NewJoinGroupResponseMember()
		jm.MemberID, jm.InstanceID = m.id, m.instanceID
		for _, p := range m.protocols {
			if p.Name == g.protocol {
				jm.ProtocolMetadata = p.Metadata
			}
		}
		all = append(all, jm)
	}
	return all
}

// sameMetadata reports whether protocols has protocol with the metadata
// the member has for it (a member loaded from the store knows only the
// group's protocol).
func (m *member) sameMetadata(protocol string, protocols []kmsg.JoinGroupRequestProtocol) bool {
	var mine []byte
	known := false
	for _, p := range m.protocols {
		if p.Name == protocol {
			mine, known = p.Metadata, true
		}
	}
	for _, p := range protocols {
		if p.Name == protocol {
			return known && bytes.Equal(p.Metadata, mine)
		}
	}
	return false
}

// supports reports whether protocols (those of member id, which may be
// new) has one that every other member supports.
func (g *group) supports(id string, protocols []kmsg.JoinGroupRequestProtocol) bool {
	for _, p := range protocols {
		all := true
		for mid, m := range g.members {
			if mid != id && !m.has(p.Name) {
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

func (m *member) has(protocol string) bool {
	return slices.ContainsFunc(m.protocols, func(p kmsg.JoinGroupRequestProtocol) bool { return p.Name == protocol })
}

// ordered returns the members in join order.
func (g *group) ordered() []*member {
	ms := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *member) int { return a.order - b.order })
	return ms
}

// selectProtocol picks the protocol every member supports that most
// members prefer (each votes for the first of its protocols that all
// support), as Kafka does; ties go to the earliest member's preference.
func (g *group) selectProtocol() string {
	ms := g.ordered()
	votes := map[string]int{}
	var order []string
	for _, m := range ms {
		for _, p := range m.protocols {
			if g.supports("", []kmsg.JoinGroupRequestProtocol{p}) {
				if votes[p.Name] == 0 {
					order = append(order, p.Name)
				}
				votes[p.Name]++
				break
			}
		}
	}
	best := ""
	for _, name := range order {
		if best == "" || votes[name] > votes[best] {
			best = name
		}
	}
	return best
}

// rebalanceTimeout is the longest rebalance timeout of the members.
func (g *group) rebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalance)
	}
	return d
}

// prepareRebalance opens the join barrier. Members waiting at the sync
// barrier are told REBALANCE_IN_PROGRESS and join again.
func (gs *groups) prepareRebalance(g *group, now time.Time, why string) {
	if g.state == groupCompletingRebalance {
		for _, m := range g.members {
			if m.sync != nil {
				m.sync <- syncAnswer{code: int16(kafkaerr.RebalanceInProgress)}
				m.sync = nil
				m.expires = now.Add(m.session)
			}
		}
	}
	if g.state == groupEmpty && gs.opts.InitialRebalanceDelay > 0 {
		g.initialCap = now.Add(g.rebalanceTimeout())
		g.initialUntil = minTime(now.Add(gs.opts.InitialRebalanceDelay), g.initialCap)
	}
	g.state = groupPreparingRebalance
	g.deadline = now.Add(g.rebalanceTimeout())
	gs.log.Info("group rebalancing", zap.String("group", g.id), zap.Int32("generation", g.generation), zap.String("reason", why))
}

// maybeCompleteJoin closes the join barrier once every member (and every
// member ID handed out) has joined, unless the initial delay runs.
func (gs *groups) maybeCompleteJoin(g *group, now time.Time) {
	if g.state != groupPreparingRebalance || now.Before(g.initialUntil) || len(g.pending) > 0 {
		return
	}
	for _, m := range g.members {
		if m.join == nil {
			return
		}
	}
	gs.completeJoin(g, now)
}

// completeJoin closes the join barrier: members that did not join are
// removed, the generation advances, a protocol and a leader are chosen,
// and every waiting JoinGroup is answered (the leader with every member's
// metadata). The sync barrier opens.
func (gs *groups) completeJoin(g *group, now time.Time) {
	var joined *member // the first in join order
	for _, m := range g.ordered() {
		switch {
		case m.join != nil:
			if joined == nil {
				joined = m
			}
		case m.instanceID == nil:
			g.drop(m) // dynamic, and did not join
		}
	}
	if joined == nil && len(g.members) > 0 {
		// Only static members that did not join: the barrier waits
		// again, until they join or their sessions expire, as in Kafka.
		g.deadline = now.Add(g.rebalanceTimeout())
		gs.log.Warn("group could not complete its rebalance: no member joined", zap.String("group", g.id), zap.Int("members", len(g.members)))
		return
	}
	clear(g.pending)
	g.generation++
	if len(g.members) == 0 {
		g.state, g.protocol, g.leader = groupEmpty, "", ""
		gs.log.Info("group empty", zap.String("group", g.id), zap.Int32("generation", g.generation))
		gs.storeLocked(g, g.metadataValue(now)) // no members, its generation kept
		return
	}
	g.protocol = g.selectProtocol()
	ms := g.ordered()
	if l := g.members[g.leader]; l == nil || l.join == nil {
		g.leader = joined.id // the leader must have joined
	}
	all := g.joinMembers()
	g.state = groupCompletingRebalance
	g.deadline = now.Add(g.rebalanceTimeout())
	for _, m := range ms {
		m.assignment = nil
		if m.join == nil {
			continue // static, and did not join: it still may, with its instance ID
		}
		a := joinAnswer{generation: g.generation, protocolType: g.protocolType, protocol: g.protocol, leader: g.leader}
		if m.id == g.leader {
			a.members = all
		}
		m.join <- a
		m.join = nil
		m.expires = now.Add(m.session)
	}
	gs.log.Info("group joined", zap.String("group", g.id), zap.Int32("generation", g.generation),
		zap.String("protocol", g.protocol), zap.String("leader", g.leader), zap.Int("members", len(ms)))
}

// sync answers SyncGroup. At the sync barrier the answer waits for the
// leader's SyncGroup, which carries every member's assignment; in a
// stable group it is the member's assignment.
func (gs *groups) sync(ctx context.Context, req *kmsg.SyncGroupRequest) kmsg.Response {
	if resp, ok := gs.classicToConsumer(req.Group, func(g *cgroup, now time.Time) (kmsg.Response, *consumerStore) {
		return gs.classicSyncConsumer(g, req, now)
	}, func(r kmsg.Response, code int16) { r.(*kmsg.SyncGroupResponse).ErrorCode = code }); ok {
		return resp // a classic member of a consumer group (consumerclassic.go)
	}
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	fail := func(code int16) kmsg.Response { resp.ErrorCode = code; return resp }
	now := gs.opts.clock.Now()
	gs.mu.Lock()
	g := gs.mu.groups[req.Group]
	code := int16(kafkaerr.UnknownMemberID)
	if g != nil {
		code = g.validateMember(req.MemberID, req.InstanceID) // FENCED_INSTANCE_ID: another member has the instance ID
	}
	var m *member
	if code == 0 {
		m = g.members[req.MemberID]
	}
	switch {
	case code != 0:
	case g.state == groupEmpty:
		code = int16(kafkaerr.UnknownMemberID)
	case req.Generation != g.generation:
		code = int16(kafkaerr.IllegalGeneration)
	case req.ProtocolType != nil && *req.ProtocolType != g.protocolType, req.Protocol != nil && *req.Protocol != g.protocol:
		code = int16(kafkaerr.InconsistentGroupProtocol)
	case g.state == groupPreparingRebalance:
		code = int16(kafkaerr.RebalanceInProgress)
	}
	if code != 0 {
		gs.mu.Unlock()
		return fail(code)
	}
	m.expires = now.Add(m.session)
	if g.state == groupStable {
		a := syncAnswer{protocolType: g.protocolType, protocol: g.protocol, assignment: m.assignment}
		gs.mu.Unlock()
		return fillSync(resp, a)
	}
	// CompletingRebalance: wait for the leader.
	if m.sync != nil {
		m.sync <- syncAnswer{code: int16(kafkaerr.RebalanceInProgress)}
	}
	ch := make(chan syncAnswer, 1)
	m.sync = ch
	if m.id == g.leader {
		for _, a := range req.GroupAssignment {
			if am := g.members[a.MemberID]; am != nil {
				am.assignment = a.MemberAssignment
			}
		}
		// The generation is stored before the members learn their
		// assignments (on a cluster node), as Kafka appends it to
		// __consumer_offsets first: a node that takes the group over
		// then knows every assignment a member has.
		var err error
		current := true
		if gs.store != nil {
			stored := gs.storeLocked(g, g.metadataValue(now))
			gen := g.generation
			gs.mu.Unlock()
			err = <-stored
			gs.mu.Lock()
			current = gs.mu.groups[g.id] == g && g.generation == gen && g.state == groupCompletingRebalance
		}
		switch {
		case !current:
			// Forgotten, or rebalancing again: the members waiting were
			// answered.
		case err != nil:
			code := codeOf(commitError(err))
			for _, am := range g.members {
				am.assignment = nil
				if am.sync != nil {
					am.sync <- syncAnswer{code: code}
					am.sync = nil
				}
			}
		default:
			g.state = groupStable
			for _, am := range g.members {
				if am.sync != nil {
					am.sync <- syncAnswer{protocolType: g.protocolType, protocol: g.protocol, assignment: am.assignment}
					am.sync = nil
					am.expires = gs.opts.clock.Now().Add(am.session)
				}
			}
			gs.log.Info("group stable", zap.String("group", g.id), zap.Int32("generation", g.generation))
			if g.protocolType == "consumer" && gs.log.Core().Enabled(zap.DebugLevel) {
				// Who was assigned what, for tests and audits: a commit
				// is checked against the member and generation only (as
				// in Kafka), not against the assignment.
				for _, am := range g.members {
					var a kmsg.ConsumerMemberAssignment
					if len(am.assignment) > 0 && a.ReadFrom(am.assignment) != nil {
						continue
					}
					parts := make(map[string][]int32, len(a.Topics))
					for _, t := range a.Topics {
						parts[t.Topic] = append(parts[t.Topic], t.Partitions...)
					}
					gs.log.Debug("member assigned", zap.String("group", g.id), zap.Int32("generation", g.generation),
						zap.String("member", am.id), zap.Any("assigned", parts))
				}
			}
		}
	}
	gs.mu.Unlock()
	select {
	case a := <-ch:
		return fillSync(resp, a)
	case <-ctx.Done():
		return fail(int16(kafkaerr.NotCoordinator))
	}
}

func fillSync(resp *kmsg.SyncGroupResponse, a syncAnswer) kmsg.Response {
	resp.ErrorCode = a.code
	if a.code == 0 {
		resp.ProtocolType, resp.Protocol, resp.MemberAssignment = &a.protocolType, &a.protocol, a.assignment
	}
	return resp
}
