package kafkaserver

import (
	"context"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/kafkaerr"
)

// The consumer group protocol of KIP-848 (ConsumerGroupHeartbeat and
// ConsumerGroupDescribe), the one Kafka 4 clients move to: the
// coordinator, not a member, assigns the partitions, and members converge
// on the assignment through their heartbeats.
//
// A group has an epoch, bumped whenever what its assignment depends on
// changes (a member joins, leaves or is expired, a subscription changes,
// a subscribed topic is created or deleted). The target assignment is
// computed for the group epoch by the assignor the members ask for
// ("uniform", sticky and balanced, the default; or "range", per topic).
// Each member then moves to it by Kafka's reconciliation: a partition it
// must give up is taken out of its assignment first, and the member
// keeps its epoch until it reports, in a heartbeat, that it no longer
// owns it; then it is at the new epoch, and is given each partition of
// its target as soon as no other member holds it. A partition is never
// held by two members at once. A member whose heartbeats stop for the
// session timeout, or that does not give up a partition within its
// rebalance timeout, is removed.
//
// Offset commits of a member carry its member epoch: an unknown member
// is UNKNOWN_MEMBER_ID, an epoch ahead of the member's FENCED_MEMBER_EPOCH,
// an older one STALE_MEMBER_EPOCH unless every partition committed is
// still the member's (so that a commit racing a new epoch that did not
// take those partitions away succeeds, as in Kafka 4.3).
//
// A member that names an instance ID is static (consumerstatic.go): when
// it leaves with epoch -2 it is kept, with its partitions, for its
// session timeout, and a member joining with the same instance ID
// meanwhile takes its place and its partitions with no new group epoch.
//
// On a cluster node, a group's state is stored in the coordinator as it
// changes, before the answers that depend on it (consumerstore.go): a
// node that takes the group over loads it, and its members carry on at
// their epochs with their assignments, a revocation under way included,
// their sessions starting at the load.
//
// A group moves between the protocols with its members
// (groupconvert.go): a classic group becomes a consumer group when a
// member of this protocol joins it, its classic members then served
// through their JoinGroup and SyncGroup by the coordinator's assignor
// (consumerclassic.go), and becomes classic again when the last member of
// this protocol leaves. An empty group of either kind becomes the other.

// The assignors served, and the one used when no member names one.
const (
	assignorUniform = "uniform"
	assignorRange   = "range"
)

// cgroup is one consumer group of the KIP-848 protocol; its fields are
// under groups.mu.
type cgroup struct {
	id string
	// epoch is the group epoch; targetEpoch the epoch target was
	// computed for (the assignment epoch).
	epoch, targetEpoch int32
	members            map[string]*cmember
	static             map[string]string     // member ID by instance ID (consumerstatic.go)
	target             map[string]assignment // by member ID
	assignor           string                // of the target
	// topics are the subscribed topics (ID: partition count) the target
	// was computed from; names their names.
	topics map[uuid.UUID]int32
	names  map[uuid.UUID]string
	// stored is the state last stored (nil: none, or deleted),
	// storedOnce whether it is known, and lastStore the last store
	// started (consumerstore.go).
	stored     []byte
	storedOnce bool
	lastStore  *consumerStore
}

// cmember is one member of a consumer group.
type cmember struct {
	id                   string
	instanceID           *string
	rack                 string
	clientID, clientHost string
	// epoch is the member epoch, prevEpoch the one before it.
	epoch, prevEpoch int32
	rebalanceTimeout time.Duration
	subscribed       []string // topic names, sorted
	regex            string   // a subscription by regular expression ("": none)
	re               *regexp.Regexp
	serverAssignor   string
	// assigned is what the member may consume; revoking what it was told
	// to give up and has not yet reported given up; owned what it last
	// reported owning.
	assigned, revoking, owned assignment
	sent                      assignment // the assignment last sent to it
	expires                   time.Time  // the session ends unless a heartbeat comes
	revokeBy                  time.Time  // the rebalance timeout of a revocation under way
	// classic is set for a member of the classic protocol
	// (consumerclassic.go).
	classic *classicMeta
}

// consumerGroupSession is group.consumer.session.timeout.ms, and
// consumerGroupHeartbeat group.consumer.heartbeat.interval.ms: Kafka's
// defaults.
const (
	consumerGroupSession   = 45 * time.Second
	consumerGroupHeartbeat = 5 * time.Second
)

// consumerHeartbeat answers ConsumerGroupHeartbeat for a group this node
// coordinates, with topics the broker's topics now. On a cluster node,
// what the heartbeat changed is stored before the answer
// (consumerstore.go); if the store fails, the answer is its error, and
// the next heartbeat stores again.
func (gs *groups) consumerHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest, topics []diskless.TopicDescription, clientID, clientHost string) kmsg.Response {
	resp, g, stored := gs.consumerHeartbeatLocked(req, topics, clientID, clientHost)
	if stored == nil {
		return resp
	}
	err := stored.wait()
	if err == nil {
		return resp
	}
	r := resp.(*kmsg.ConsumerGroupHeartbeatResponse)
	msg := "storing the group: " + err.Error()
	r.ErrorCode, r.ErrorMessage, r.MemberID, r.MemberEpoch, r.Assignment = codeOf(commitError(err)), &msg, nil, -1, nil
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.mu.consumer[g.id] == g {
		g.storedOnce = false // store again, whatever changes
		if m := g.members[req.MemberID]; m != nil {
			m.sent = nil // what was sent did not arrive
		}
	}
	return resp
}

// consumerHeartbeatLocked is consumerHeartbeat, but for the wait on the
// store: it returns the answer, the group, and the store to wait for
// (nil: none). It takes gs.mu.
func (gs *groups) consumerHeartbeatLocked(req *kmsg.ConsumerGroupHeartbeatRequest, topics []diskless.TopicDescription, clientID, clientHost string) (kmsg.Response, *cgroup, *consumerStore) {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	resp.MemberEpoch = -1
	fail := func(code int16, msg string) (kmsg.Response, *cgroup, *consumerStore) {
		resp.ErrorCode, resp.ErrorMessage = code, &msg
		return resp, nil, nil
	}
	re, code, msg := checkConsumerHeartbeat(req)
	if code != 0 {
		return fail(code, msg)
	}
	now := gs.opts.clock.Now()
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if cl := gs.mu.groups[req.Group]; cl != nil {
		switch {
		case len(cl.members) == 0:
			delete(gs.mu.groups, req.Group) // an empty classic group becomes a consumer group
		case req.MemberEpoch == 0 && cl.protocolType == "consumer":
			gs.upgradeLocked(cl, topics, now) // groupconvert.go
		default:
			return fail(int16(kafkaerr.GroupIDNotFound), "group "+req.Group+" is not a consumer group")
		}
	}
	g := gs.mu.consumer[req.Group]
	if req.MemberEpoch < 0 {
		resp.MemberID, resp.MemberEpoch = &req.MemberID, req.MemberEpoch
		code, msg, outcome := gs.consumerLeave(g, req, now)
		switch {
		case code != 0:
			return fail(code, msg)
		case g == nil:
			return resp, nil, nil
		case gs.mu.consumer[g.id] != g: // downgraded
			return resp, nil, outcomeStore(outcome)
		}
		return resp, g, gs.storeConsumerLocked(g)
	}
	if g == nil {
		kept := gs.mu.emptyGens[req.Group].generation // the epoch it had, as it went empty
		delete(gs.mu.emptyGens, req.Group)
		g = &cgroup{id: req.Group, epoch: kept, targetEpoch: kept, members: map[string]*cmember{}, target: map[string]assignment{}}
		gs.mu.consumer[req.Group] = g
		if gs.store != nil {
			// Whatever was stored for the name (a classic group's, of
			// a later generation than this group's epoch) goes first.
			gs.storeValueLocked(g.id, 0, nil)
			g.storedOnce = true
		}
	}
	var m *cmember
	changed := false // what the assignment depends on: the group epoch moves on
	if req.MemberEpoch == 0 {
		m, changed, code, msg = gs.consumerJoinLocked(g, req, re, clientID, clientHost)
	} else {
		m, code, msg = g.heartbeatMember(req)
	}
	if code != 0 {
		return fail(code, msg)
	}
	m.expires = now.Add(gs.opts.ConsumerSession)
	if m.update(req, re) {
		changed = true
	}
	gs.advance(g, m, changed, topics, now)
	resp.MemberID, resp.MemberEpoch = &m.id, m.epoch
	resp.HeartbeatIntervalMillis = int32(gs.opts.ConsumerHeartbeat.Milliseconds())
	if req.Topics != nil || req.MemberEpoch == 0 || !equalAssignment(m.assigned, m.sent) {
		a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		for _, id := range sortedIDs(m.assigned) {
			t := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			t.TopicID, t.Partitions = id, slices.Clone(m.assigned[id])
			a.Topics = append(a.Topics, t)
		}
		resp.Assignment = &a
		m.sent = cloneAssignment(m.assigned)
	}
	return resp, g, gs.storeConsumerLocked(g)
}

// checkConsumerHeartbeat checks what a ConsumerGroupHeartbeat must be
// whatever the group's state, and compiles its regular expression (nil:
// none). It returns the error code and message of a request refused.
func checkConsumerHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest) (*regexp.Regexp, int16, string) {
	switch {
	case req.Group == "":
		return nil, int16(kafkaerr.InvalidGroupID), "the group ID is empty"
	case req.MemberEpoch < leaveStaticEpoch:
		return nil, int16(kafkaerr.InvalidRequest), "member epoch below -2"
	case req.MemberEpoch == leaveStaticEpoch && req.InstanceID == nil:
		return nil, int16(kafkaerr.InvalidRequest), "InstanceId can't be null"
	case req.InstanceID != nil && strings.TrimSpace(*req.InstanceID) == "":
		return nil, int16(kafkaerr.InvalidRequest), "InstanceId can't be empty"
	case req.Version >= 1 && req.MemberID == "":
		return nil, int16(kafkaerr.InvalidRequest), "MemberID can't be empty" // version 1: the client makes it
	case req.MemberEpoch != 0 && req.MemberID == "":
		return nil, int16(kafkaerr.InvalidRequest), "MemberID can't be empty"
	case req.ServerAssignor != nil && *req.ServerAssignor != assignorUniform && *req.ServerAssignor != assignorRange:
		return nil, int16(kafkaerr.UnsupportedAssignor), "assignor " + *req.ServerAssignor + " is not served; uniform and range are"
	}
	var re *regexp.Regexp
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != "" {
		var err error
		if re, err = regexp.Compile("^(?:" + *req.SubscribedTopicRegex + ")$"); err != nil {
			return nil, int16(kafkaerr.InvalidRegularExpression), "SubscribedTopicRegex: " + err.Error()
		}
	}
	switch {
	case req.MemberEpoch != 0:
	case req.SubscribedTopicNames == nil && re == nil:
		return nil, int16(kafkaerr.InvalidRequest), "SubscribedTopicNames or SubscribedTopicRegex must be set when joining"
	case req.RebalanceTimeoutMillis < 0:
		return nil, int16(kafkaerr.InvalidRequest), "RebalanceTimeoutMs must be set when joining"
	case req.Topics == nil || len(req.Topics) > 0:
		return nil, int16(kafkaerr.InvalidRequest), "Topics must be empty when joining"
	}
	return re, 0, ""
}

// consumerJoinLocked makes the member of a heartbeat at epoch 0 a member
// of g: a new one, one that lost its epoch joining again, or one taking
// the place of the static member that left with its instance ID
// (consumerstatic.go). changed says whether the group epoch must move on.
// Called with gs.mu held.
func (gs *groups) consumerJoinLocked(g *cgroup, req *kmsg.ConsumerGroupHeartbeatRequest, re *regexp.Regexp, clientID, clientHost string) (m *cmember, changed bool, code int16, msg string) {
	var old *cmember // the static member that left, whose place the member takes
	if req.InstanceID != nil {
		if old = g.staticMember(*req.InstanceID); old != nil && old.epoch != leaveStaticEpoch {
			return nil, false, int16(kafkaerr.UnreleasedInstanceID), "instance " + *req.InstanceID + " is held by member " + old.id
		}
	}
	if m = g.members[req.MemberID]; m != nil && m != old { // a member that lost its epoch joins again
		gs.removeConsumer(g, m, "joined again")
	}
	id := req.MemberID
	if id == "" {
		id = uuid.NewString()
	}
	if old != nil {
		m = gs.replaceStatic(g, old, id)
		m.clientID, m.clientHost, m.classic = clientID, clientHost, nil
		return m, false, 0, ""
	}
	m = &cmember{id: id, instanceID: req.InstanceID, clientID: clientID, clientHost: clientHost, assigned: assignment{}, owned: assignment{}}
	g.addConsumer(m)
	gs.log.Info("consumer group member joined", zap.String("group", g.id), zap.String("member", id),
		zap.Stringp("instance", req.InstanceID), zap.Int32("group_epoch", g.epoch+1))
	return m, true, 0, ""
}

// heartbeatMember returns the member a heartbeat at a member epoch above
// 0 comes from, or why it is refused: a static member is checked as in
// consumerstatic.go; a member the group does not have, or one of the
// classic protocol, is UNKNOWN_MEMBER_ID; an epoch ahead of the member's,
// or behind it but for the one before with partitions it still holds,
// FENCED_MEMBER_EPOCH. Called with gs.mu held.
func (g *cgroup) heartbeatMember(req *kmsg.ConsumerGroupHeartbeatRequest) (*cmember, int16, string) {
	m := g.members[req.MemberID]
	if req.InstanceID != nil {
		var code int16
		var msg string
		if m, code, msg = g.checkStatic(req.MemberID, *req.InstanceID); code != 0 {
			return nil, code, msg
		}
	}
	switch {
	case m == nil:
		return nil, int16(kafkaerr.UnknownMemberID), "member " + req.MemberID + " is not in group " + req.Group
	case m.classic != nil:
		return nil, int16(kafkaerr.UnknownMemberID), "member " + req.MemberID + " uses the classic protocol"
	case req.MemberEpoch > m.epoch:
		return nil, int16(kafkaerr.FencedMemberEpoch), "member epoch is ahead of the coordinator's"
	case req.MemberEpoch < m.epoch && (req.MemberEpoch != m.prevEpoch || req.Topics == nil || !within(toAssignment(req.Topics), m.assigned)):
		return nil, int16(kafkaerr.FencedMemberEpoch), "member epoch is behind the coordinator's"
	}
	return m, 0, ""
}

// update takes what a heartbeat says of its member (rack, rebalance
// timeout, assignor, subscription, the partitions it owns), and reports
// whether its subscription changed (the group epoch moves on).
func (m *cmember) update(req *kmsg.ConsumerGroupHeartbeatRequest, re *regexp.Regexp) (changed bool) {
	if req.RackID != nil {
		m.rack = *req.RackID
	}
	if req.RebalanceTimeoutMillis >= 0 {
		m.rebalanceTimeout = ms(req.RebalanceTimeoutMillis)
	}
	if req.ServerAssignor != nil {
		m.serverAssignor = *req.ServerAssignor
	}
	if req.SubscribedTopicNames != nil {
		names := slices.Compact(slices.Sorted(slices.Values(req.SubscribedTopicNames)))
		if !slices.Equal(names, m.subscribed) {
			m.subscribed = names
			changed = true
		}
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != m.regex {
		m.regex, m.re = *req.SubscribedTopicRegex, re
		changed = true
	}
	if req.Topics != nil {
		m.owned = toAssignment(req.Topics)
	}
	return changed
}

// consumerLeave handles the leave (member epoch -1 or -2) of req from g
// (nil: no such group), and returns its error code. A dynamic member
// unknown leaves with no error; a static one (named by its instance ID)
// is checked as in consumerstatic.go, and kept for its session if it
// leaves with -2. A member that leaves with -1 may leave only classic
// members: the group is then downgraded (groupconvert.go), and outcome
// is the outcome of the classic group's store. Called with gs.mu held.
func (gs *groups) consumerLeave(g *cgroup, req *kmsg.ConsumerGroupHeartbeatRequest, now time.Time) (code int16, msg string, outcome <-chan error) {
	switch {
	case req.InstanceID != nil:
		if g == nil {
			return int16(kafkaerr.GroupIDNotFound), "consumer group " + req.Group + " not found", nil
		}
		m, code, msg := g.checkStatic(req.MemberID, *req.InstanceID)
		switch {
		case code != 0:
			return code, msg, nil
		case m.classic != nil:
			return int16(kafkaerr.UnknownMemberID), "member " + m.id + " uses the classic protocol", nil
		case req.MemberEpoch == leaveStaticEpoch:
			gs.leaveStatic(g, m)
		default:
			_, outcome = gs.removeOrDowngrade(g, m, "left", now)
		}
	case g != nil:
		if m := g.members[req.MemberID]; m != nil && m.classic == nil {
			_, outcome = gs.removeOrDowngrade(g, m, "left", now)
		}
	}
	return 0, "", outcome
}

// advance moves g's epoch on if what its assignment depends on changed
// (m's subscription, or the subscribed topics, of topics now), computes
// the target assignment of a new epoch, and reconciles m. Called with
// gs.mu held.
func (gs *groups) advance(g *cgroup, m *cmember, changed bool, topics []diskless.TopicDescription, now time.Time) {
	subscribed, names := g.subscribedTopics(topics)
	if changed || !maps.Equal(subscribed, g.topics) {
		g.epoch++
	}
	if g.epoch > g.targetEpoch {
		g.assign(subscribed, names)
	}
	gs.reconcile(g, m, now)
}

// consumerGroupHeartbeat answers ConsumerGroupHeartbeat: NOT_COORDINATOR
// on a node that does not coordinate the group.
func (s *Server) consumerGroupHeartbeat(ctx context.Context, req *kmsg.ConsumerGroupHeartbeatRequest, clientID, clientHost string) (kmsg.Response, error) {
	if code := s.coordinates(ctx, req.Group); code != 0 {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode, resp.MemberEpoch = code, -1
		return resp, nil
	}
	topics, err := s.b.DescribeTopics(ctx)
	if err != nil {
		return nil, err
	}
	return s.groups.consumerHeartbeat(req, topics, clientID, clientHost), nil
}

// subscribedTopics returns the topics (ID: partitions) some member of g
// subscribes to, of topics, and their names.
func (g *cgroup) subscribedTopics(topics []diskless.TopicDescription) (map[uuid.UUID]int32, map[uuid.UUID]string) {
	out, names := map[uuid.UUID]int32{}, map[uuid.UUID]string{}
	for _, t := range topics {
		for _, m := range g.members {
			if m.subscribes(t.Name) {
				out[t.ID], names[t.ID] = t.Config.Partitions, t.Name
				break
			}
		}
	}
	return out, names
}

// subscribes reports whether the member subscribes to topic.
func (m *cmember) subscribes(topic string) bool {
	_, ok := slices.BinarySearch(m.subscribed, topic)
	return ok || m.re != nil && m.re.MatchString(topic)
}

// reconcile moves m towards its target assignment (see the package
// comment above): it completes a revocation m reports done, starts one
// for what m holds outside its target, moves m to the target epoch once
// it holds nothing outside it, and then gives it the partitions of its
// target no other member holds.
func (gs *groups) reconcile(g *cgroup, m *cmember, now time.Time) {
	if len(m.revoking) > 0 {
		if overlaps(m.owned, m.revoking) {
			return // still giving them up
		}
		m.revoking, m.revokeBy = nil, time.Time{}
	}
	target := g.target[m.id]
	if m.epoch < g.targetEpoch {
		keep, give := split(m.assigned, target)
		if len(give) > 0 {
			m.assigned, m.revoking = keep, give
			m.revokeBy = now.Add(m.rebalanceTimeout)
			return
		}
		m.prevEpoch, m.epoch = m.epoch, g.targetEpoch
	}
	held := assignment{}
	for _, o := range g.members {
		if o != m {
			merge(held, o.assigned)
			merge(held, o.revoking)
		}
	}
	for t, ps := range target {
		for _, p := range ps {
			if !slices.Contains(held[t], p) && !slices.Contains(m.assigned[t], p) {
				m.assigned[t] = append(m.assigned[t], p)
			}
		}
		slices.Sort(m.assigned[t])
	}
}

// removeConsumer removes m from g: its partitions are free, and the group
// epoch moves on.
func (gs *groups) removeConsumer(g *cgroup, m *cmember, why string) {
	g.dropConsumer(m)
	g.epoch++
	gs.log.Info("consumer group member removed", zap.String("group", g.id), zap.String("member", m.id), zap.String("why", why), zap.Int32("group_epoch", g.epoch))
}

// tickConsumers expires the sessions of consumer group members and the
// members that did not give up partitions within their rebalance timeout,
// and forgets empty groups that never committed (their offsets keep them
// listed).
func (gs *groups) tickConsumers(now time.Time) {
	for id, g := range gs.mu.consumer {
		removed := false
		for _, m := range g.members {
			why := ""
			switch {
			case now.After(m.expires):
				why = "session expired"
			case !m.revokeBy.IsZero() && now.After(m.revokeBy):
				why = "rebalance timeout: did not give up its partitions"
			default:
				continue
			}
			if downgraded, _ := gs.removeOrDowngrade(g, m, why, now); downgraded {
				break // a classic group now (groupconvert.go)
			}
			removed = true
		}
		if gs.mu.consumer[id] != g {
			continue
		}
		if removed {
			gs.storeConsumerLocked(g) // no answer waits on it
		}
		if len(g.members) == 0 {
			delete(gs.mu.consumer, id)
			gs.keepEmptyLocked(id, emptyGroup{generation: g.epoch, protocolType: "consumer", consumer: true})
		}
	}
}

// checkConsumerCommit returns the error code of an OffsetCommit to the
// consumer group g by memberID at epoch, of tps (see above); ok is false
// when the group is not a consumer group.
func (gs *groups) checkConsumerCommit(group string, epoch int32, memberID string, tps []topicPartition) (code int16, ok bool) {
	g := gs.mu.consumer[group]
	if g == nil {
		return 0, false
	}
	if len(g.members) == 0 && epoch < 0 {
		return 0, true
	}
	m := g.members[memberID]
	switch {
	case m == nil:
		return int16(kafkaerr.UnknownMemberID), true
	case m.classic != nil && epoch != m.epoch: // a classic member's generation is its member epoch
		return int16(kafkaerr.IllegalGeneration), true
	case epoch > m.epoch:
		return int16(kafkaerr.FencedMemberEpoch), true
	case epoch < m.epoch:
		ids := map[string]uuid.UUID{}
		for id, name := range g.names {
			ids[name] = id
		}
		for _, tp := range tps {
			id, ok := ids[tp.topic]
			if !ok || !slices.Contains(m.assigned[id], tp.partition) && !slices.Contains(m.revoking[id], tp.partition) {
				return int16(kafkaerr.StaleMemberEpoch), true
			}
		}
	}
	return 0, true
}
