package kafkaserver

import (
	"context"
	"maps"
	"net"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/diskless-go/diskless/acl"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// What the group coordinator says of its groups to those who look at them
// rather than join them: DescribeGroups, ListGroups and
// ConsumerGroupDescribe, read by Kafka's tools and by lag monitors.

// consumerGroupDescribe answers ConsumerGroupDescribe: a group that is
// not a consumer group of this protocol (a classic one, or one known only
// by its committed offsets) is GROUP_ID_NOT_FOUND, with Kafka 4's
// message. The authorized operations are told of groups described, not
// of those in error, as Kafka's KafkaApis does.
func (s *Server) consumerGroupDescribe(ctx context.Context, req *kmsg.ConsumerGroupDescribeRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	var names map[uuid.UUID]string
	if len(req.Groups) > 0 {
		names = s.topicNames(ctx)
	}
	for _, id := range req.Groups {
		g := kmsg.NewConsumerGroupDescribeResponseGroup()
		g.Group = id
		g.AuthorizedOperations = -2147483648
		switch code := s.coordinates(ctx, id); {
		case id == "":
			g.ErrorCode = int16(kafkaerr.InvalidGroupID)
		case code != 0:
			g.ErrorCode = code
		case s.groups.consumerDescribeNamed(id, &g, names):
		default:
			_, known := s.groups.describe(id)
			e, kept := s.groups.emptyOf(id)
			offsets := !known && s.hasOffsets(ctx, id)
			switch {
			case kept && e.consumer && offsets:
				// An empty consumer group, known by its offsets: as
				// Kafka describes the empty group it keeps.
				g.State, g.Epoch, g.AssignmentEpoch, g.AssignorName = "Empty", e.generation, e.generation, assignorUniform
			case !known && !offsets:
				g.ErrorCode, g.ErrorMessage = int16(kafkaerr.GroupIDNotFound), kmsg.StringPtr("Group "+id+" not found.")
			default:
				g.ErrorCode, g.ErrorMessage = int16(kafkaerr.GroupIDNotFound), kmsg.StringPtr("Group "+id+" is not a consumer group.")
			}
		}
		if req.IncludeAuthorizedOperations && g.ErrorCode == 0 {
			g.AuthorizedOperations = s.authorizedOps(ctx, acl.ResourceGroup, g.Group, groupOperations)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}

// info returns what DescribeGroups and ListGroups say of a consumer
// group. Its state is Kafka 4's (ConsumerGroup.maybeUpdateGroupState):
// Empty with no members; Assigning while the target assignment is not
// yet computed for the group epoch; Reconciling while a member is not at
// the target's epoch with its target (a static member away, at epoch
// -2, is not, as ModernGroupMember.isReconciledTo has it); else Stable.
func (g *cgroup) info() groupInfo {
	state := "Empty"
	if len(g.members) > 0 {
		state = "Stable"
		for _, m := range g.members {
			if m.epoch != g.targetEpoch || !equalAssignment(m.assigned, g.target[m.id]) {
				state = "Reconciling"
			}
		}
		if g.targetEpoch != g.epoch {
			state = "Assigning"
		}
	}
	return groupInfo{id: g.id, state: state, protocolType: "consumer", kind: "consumer"}
}

// preferredAssignor is the assignor Kafka 4 names in ConsumerGroupDescribe
// (ConsumerGroup.preferredServerAssignor): the one most members ask for,
// now, though the target may still be of another; uniform when tied or
// when none asks, as the assignment chooses. Called with gs.mu held.
func (g *cgroup) preferredAssignor() string {
	votes := map[string]int{}
	for _, m := range g.members {
		if m.serverAssignor != "" {
			votes[m.serverAssignor]++
		}
	}
	if votes[assignorRange] > votes[assignorUniform] {
		return assignorRange
	}
	return assignorUniform
}

// consumerDescribe fills the description of the consumer group id, or
// reports that there is none; its assignments name topics by the names
// the group knows.
func (gs *groups) consumerDescribe(id string, d *kmsg.ConsumerGroupDescribeResponseGroup) bool {
	return gs.consumerDescribeNamed(id, d, nil)
}

// consumerDescribeNamed is consumerDescribe, assignments naming topics by topics
// (the broker's names by ID; empty, when they could not be read: by the
// names the group knows); a topic deleted since is left out, as Kafka's
// ConsumerGroupMember.asConsumerGroupDescribeMember does.
func (gs *groups) consumerDescribeNamed(id string, d *kmsg.ConsumerGroupDescribeResponseGroup, topics map[uuid.UUID]string) bool {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.mu.consumer[id]
	if g == nil {
		return false
	}
	d.State, d.Epoch, d.AssignmentEpoch, d.AssignorName = g.info().state, g.epoch, g.targetEpoch, g.preferredAssignor()
	toKmsg := func(a assignment) kmsg.Assignment {
		out := kmsg.NewAssignment()
		for _, t := range sortedIDs(a) {
			name, named := g.names[t]
			if len(topics) > 0 {
				name, named = topics[t]
			}
			if !named {
				continue
			}
			tp := kmsg.NewAssignmentTopicPartition()
			tp.TopicID, tp.Topic, tp.Partitions = t, name, slices.Clone(a[t])
			out.TopicPartitions = append(out.TopicPartitions, tp)
		}
		return out
	}
	for _, mid := range slices.Sorted(maps.Keys(g.members)) {
		m := g.members[mid]
		dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		dm.MemberID, dm.InstanceID, dm.MemberEpoch = m.id, m.instanceID, m.epoch
		if m.rack != "" {
			dm.RackID = &m.rack
		}
		dm.ClientID, dm.ClientHost = m.clientID, kafkaClientHost(m.clientHost)
		dm.SubscribedTopics = slices.Clone(m.subscribed)
		if m.regex != "" {
			dm.SubscribedTopicRegex = &m.regex
		}
		dm.Assignment, dm.TargetAssignment = toKmsg(m.assigned), toKmsg(g.target[m.id])
		dm.MemberType = 1 // consumer; a member of the classic protocol (consumerclassic.go) 0, as Kafka 4.1's
		if m.classic != nil {
			dm.MemberType = 0
		}
		d.Members = append(d.Members, dm)
	}
	return true
}

// groupInfo is what DescribeGroups and ListGroups say of a group.
type groupInfo struct {
	id                     string
	state                  string // Kafka's state names: Empty, Stable, ...
	protocolType, protocol string
	kind                   string // "classic" or "consumer" (KIP-848)
	members                []memberInfo
}

// memberInfo describes one member of a classic group.
type memberInfo struct {
	id                   string
	instanceID           *string
	clientID, clientHost string
	metadata, assignment []byte
}

// describe returns the group's state, if the coordinator knows it.
func (gs *groups) describe(id string) (groupInfo, bool) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.mu.groups[id]
	if g == nil {
		if cg := gs.mu.consumer[id]; cg != nil {
			return cg.info(), true
		}
		return groupInfo{}, false
	}
	gi := groupInfo{id: id, state: g.state.String(), protocolType: g.protocolType, kind: "classic"}
	if g.state == groupStable {
		gi.protocol = g.protocol // Kafka names it in Stable only, with the members' metadata and assignments
	}
	for _, m := range g.ordered() {
		mi := memberInfo{id: m.id, instanceID: m.instanceID, clientID: m.clientID, clientHost: kafkaClientHost(m.clientHost)}
		if g.state == groupStable {
			for _, p := range m.protocols {
				if p.Name == g.protocol {
					mi.metadata = p.Metadata
				}
			}
			mi.assignment = m.assignment
		}
		gi.members = append(gi.members, mi)
	}
	return gi, true
}

// list returns every group the coordinator knows.
func (gs *groups) list() []groupInfo {
	gs.mu.Lock()
	ids := slices.Sorted(maps.Keys(gs.mu.groups))
	ids = append(ids, slices.Collect(maps.Keys(gs.mu.consumer))...)
	slices.Sort(ids)
	gs.mu.Unlock()
	var out []groupInfo
	for _, id := range ids {
		if gi, ok := gs.describe(id); ok {
			out = append(out, gi)
		}
	}
	return out
}

// kafkaClientHost returns a member's client host as Kafka tells it
// (Java's InetAddress.toString of the connection's address, the group
// coordinators' RequestContext.clientAddress): "/" and the address,
// without the port the coordinator keeps (host is the connection's remote
// address, host:port).
func kafkaClientHost(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "" || strings.HasPrefix(host, "/") {
		return host
	}
	return "/" + canonicalHost(host)
}
