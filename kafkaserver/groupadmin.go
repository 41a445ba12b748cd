package kafkaserver

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless/acl"
	"github.com/diskless-go/diskless/kafkaerr"
)

// The admin APIs of groups: DescribeGroups, ListGroups, DeleteGroups and
// OffsetDelete. A group the coordinator does not hold in memory but that
// has committed offsets (its members left, the broker restarted, or it
// only ever committed from outside a group) is an Empty classic group, as
// Kafka loads it from its offsets topic.

// describeGroups answers DescribeGroups as Kafka 4's
// GroupMetadataManager.describeGroups does. A group that does not exist is
// Dead with no error before version 6, GROUP_ID_NOT_FOUND from version 6
// on (KIP-1043); a group of the consumer protocol (KIP-848) is
// GROUP_ID_NOT_FOUND "not a classic group" from version 6 on, Dead
// before. The protocol, and the members' metadata and assignments, are
// told in Stable only. The authorized operations are told of groups with
// no error.
func (s *Server) describeGroups(ctx context.Context, req *kmsg.DescribeGroupsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range req.Groups {
		g := kmsg.NewDescribeGroupsResponseGroup()
		g.Group = id
		g.AuthorizedOperations = -2147483648 // not asked, or not known: Kafka's "omitted"
		notFound := func(msg string) {
			g.State = "Dead"
			if req.Version >= 6 {
				g.ErrorCode, g.ErrorMessage = int16(kafkaerr.GroupIDNotFound), &msg
			}
		}
		gi, known := s.groups.describe(id)
		switch code := s.coordinates(ctx, id); {
		case id == "":
			g.ErrorCode = int16(kafkaerr.InvalidGroupID)
		case code != 0:
			g.ErrorCode = code
		case known && gi.kind != "classic":
			notFound("Group " + id + " is not a classic group.")
		case known:
			g.State, g.ProtocolType, g.Protocol = gi.state, gi.protocolType, gi.protocol
			for _, m := range gi.members {
				rm := kmsg.NewDescribeGroupsResponseGroupMember()
				rm.MemberID, rm.InstanceID, rm.ClientID, rm.ClientHost = m.id, m.instanceID, m.clientID, m.clientHost
				rm.ProtocolMetadata, rm.MemberAssignment = m.metadata, m.assignment
				g.Members = append(g.Members, rm)
			}
		default:
			// Known by its committed offsets alone: empty, of the kind
			// and protocol type it had (groups.mu.emptyGens).
			e, _ := s.groups.emptyOf(id)
			switch {
			case !s.hasOffsets(ctx, id):
				notFound("Group " + id + " not found.")
			case e.consumer:
				notFound("Group " + id + " is not a classic group.")
			default:
				g.State, g.ProtocolType = "Empty", e.protocolType
			}
		}
		if req.IncludeAuthorizedOperations && g.ErrorCode == 0 {
			g.AuthorizedOperations = s.authorizedOps(ctx, acl.ResourceGroup, g.Group, groupOperations)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}

// groupOperations is the authorized operations bit field of a group
// (READ, DELETE, DESCRIBE: bits 3, 6, 8): with no ACLs, everything a group
// has.
const groupOperations = 1<<3 | 1<<6 | 1<<8

// hasOffsets reports whether group has committed offsets.
func (s *Server) hasOffsets(ctx context.Context, group string) bool {
	got, err := s.offsets.fetch(ctx, group, nil)
	return err == nil && len(got) > 0
}

// listGroups answers ListGroups: every group the coordinator holds and
// every group with committed offsets, filtered by state (version 4) and
// type (version 5; "classic" or "consumer"), both case-insensitive, the
// states trimmed, as Kafka 4's GroupMetadataManager.listGroups
// filters them; a filter naming nothing known matches no group.
func (s *Server) listGroups(ctx context.Context, req *kmsg.ListGroupsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	all := s.groups.list()
	seen := map[string]bool{}
	for _, gi := range all {
		seen[gi.id] = true
	}
	withOffsets, err := s.offsets.groups(ctx)
	if err != nil {
		resp.ErrorCode = codeOf(err)
		return resp
	}
	for _, id := range withOffsets {
		if !seen[id] && s.coordinatedHere(id) {
			e, _ := s.groups.emptyOf(id) // its kind and protocol type, as it went empty
			all = append(all, groupInfo{id: id, state: "Empty", kind: e.kind(), protocolType: e.protocolType})
		}
	}
	slices.SortFunc(all, func(a, b groupInfo) int { return strings.Compare(a.id, b.id) })
	match := func(filter []string, v string, trim bool) bool {
		return len(filter) == 0 || slices.ContainsFunc(filter, func(f string) bool {
			if trim {
				f = strings.TrimSpace(f)
			}
			return strings.EqualFold(f, v)
		})
	}
	for _, gi := range all {
		if !match(req.StatesFilter, gi.state, true) || !match(req.TypesFilter, gi.kind, false) {
			continue
		}
		g := kmsg.NewListGroupsResponseGroup()
		g.Group, g.ProtocolType, g.GroupState, g.GroupType = gi.id, gi.protocolType, gi.state, gi.kind
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}

// deleteGroups answers DeleteGroups: a group with members is
// NON_EMPTY_GROUP; an empty one is forgotten with its committed offsets;
// a group that does not exist is GROUP_ID_NOT_FOUND.
func (s *Server) deleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, id := range req.Groups {
		g := kmsg.NewDeleteGroupsResponseGroup()
		g.Group = id
		if id == "" {
			g.ErrorCode = int16(kafkaerr.InvalidGroupID)
			resp.Groups = append(resp.Groups, g)
			continue
		}
		code, claim := s.coordinatesUnder(ctx, id)
		if code != 0 {
			g.ErrorCode = code
			resp.Groups = append(resp.Groups, g)
			continue
		}
		known, code := s.groups.tryDelete(id)
		switch {
		case code != 0:
			g.ErrorCode = code
		case !known && !s.hasOffsets(ctx, id):
			g.ErrorCode = int16(kafkaerr.GroupIDNotFound)
		default:
			if err := s.offsets.delete(ctx, id, claim, nil); err != nil {
				s.fenced(id, claim, err)
				g.ErrorCode = codeOf(err)
			} else {
				s.groups.deleted(id)
			}
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}

// offsetDelete answers OffsetDelete: the group's committed offsets of the
// partitions named go, except those of topics its members subscribe to
// (GROUP_SUBSCRIBED_TO_TOPIC); a group that does not exist is
// GROUP_ID_NOT_FOUND, a classic group with members of another protocol
// type than "consumer" NON_EMPTY_GROUP, a partition that does not exist
// UNKNOWN_TOPIC_OR_PARTITION.
func (s *Server) offsetDelete(ctx context.Context, req *kmsg.OffsetDeleteRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	code, claim := s.coordinatesUnder(ctx, req.Group)
	subscribed, active := s.groups.subscribedTopics(req.Group)
	switch {
	case req.Group == "":
		resp.ErrorCode = int16(kafkaerr.InvalidGroupID)
		return resp, nil
	case code != 0:
		resp.ErrorCode = code
		return resp, nil
	case !active && !s.hasOffsets(ctx, req.Group):
		if _, known := s.groups.describe(req.Group); !known {
			resp.ErrorCode = int16(kafkaerr.GroupIDNotFound)
			return resp, nil
		}
	case active:
		// A classic group with members of another protocol than the
		// consumer's (Kafka Connect's, say) tells no subscriptions:
		// Kafka's ClassicGroup.validateOffsetDelete refuses it whole.
		if gi, _ := s.groups.describe(req.Group); gi.kind == "classic" && gi.protocolType != "consumer" && len(gi.members) > 0 {
			resp.ErrorCode = int16(kafkaerr.NonEmptyGroup)
			return resp, nil
		}
	}
	x, err := s.topicIndex(ctx)
	if err != nil {
		return nil, err
	}
	var tps []topicPartition
	var slots []*kmsg.OffsetDeleteResponseTopicPartition
	for _, rt := range req.Topics {
		t := kmsg.NewOffsetDeleteResponseTopic()
		t.Topic = rt.Topic
		t.Partitions = make([]kmsg.OffsetDeleteResponseTopicPartition, len(rt.Partitions))
		resp.Topics = append(resp.Topics, t)
	}
	for i, rt := range req.Topics {
		desc, known := x.topic(ctx, rt.Topic)
		for j, rp := range rt.Partitions {
			p := &resp.Topics[i].Partitions[j]
			*p = kmsg.NewOffsetDeleteResponseTopicPartition()
			p.Partition = rp.Partition
			switch {
			case !known || rp.Partition < 0 || rp.Partition >= desc.Config.Partitions:
				p.ErrorCode = int16(kafkaerr.UnknownTopicOrPartition)
			case subscribed[rt.Topic]:
				p.ErrorCode = int16(kafkaerr.GroupSubscribedToTopic)
			default:
				tps = append(tps, topicPartition{rt.Topic, rp.Partition})
				slots = append(slots, p)
			}
		}
	}
	if len(tps) > 0 {
		if err := s.offsets.delete(ctx, req.Group, claim, tps); err != nil {
			s.fenced(req.Group, claim, err)
			for _, p := range slots {
				p.ErrorCode = codeOf(err)
			}
		}
	}
	return resp, nil
}
