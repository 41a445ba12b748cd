package kafkaserver

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless/acl"
	"github.com/diskless-go/diskless/kafkaerr"
)

// The checks of the group and transaction APIs that need more than
// one call: OffsetFetch, FindCoordinator, InitProducerId,
// AddPartitionsToTxn, TxnOffsetCommit (see authz_apis.go for the table).

// authorizeOffsetFetch: DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED)
// and on each topic named (TOPIC_AUTHORIZATION_FAILED); a request for all
// of a group's topics answers only those the principal may describe.
func (s *Server) authorizeOffsetFetch(ctx context.Context, req *kmsg.OffsetFetchRequest) (kmsg.Response, func(kmsg.Response)) {
	deniedPartition := func(p int32) kmsg.OffsetFetchResponseTopicPartition {
		rp := kmsg.NewOffsetFetchResponseTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = p, -1, -1, int16(kafkaerr.TopicAuthorizationFailed)
		return rp
	}
	if req.Version < 8 {
		if deny := s.denyWhole(ctx, req, acl.OpDescribe, acl.ResourceGroup, req.Group, kafkaerr.GroupAuthorizationFailed); deny != nil {
			return deny, nil
		}
		if req.Topics == nil {
			return nil, func(r kmsg.Response) {
				resp := r.(*kmsg.OffsetFetchResponse)
				resp.Topics = filterTopics(s, ctx, resp.Topics, func(t kmsg.OffsetFetchResponseTopic) string { return t.Topic })
			}
		}
		return nil, authorizeTopics(s, ctx, acl.OpDescribe, &req.Topics, func(t kmsg.OffsetFetchRequestTopic) string { return t.Topic },
			func(resp *kmsg.OffsetFetchResponse, t kmsg.OffsetFetchRequestTopic) {
				rt := kmsg.NewOffsetFetchResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rt.Partitions = append(rt.Partitions, deniedPartition(p))
				}
				resp.Topics = append(resp.Topics, rt)
			})
	}
	var kept []kmsg.OffsetFetchRequestGroup
	var deniedGroups []string
	deniedTopics := map[string][]kmsg.OffsetFetchRequestGroupTopic{}
	allTopics := map[string]bool{}
	for _, g := range req.Groups {
		if !s.allow(ctx, acl.OpDescribe, acl.ResourceGroup, g.Group) {
			deniedGroups = append(deniedGroups, g.Group)
			continue
		}
		if g.Topics == nil {
			allTopics[g.Group] = true
		} else {
			topics, denied := splitTopics(s, ctx, acl.OpDescribe, g.Topics, func(t kmsg.OffsetFetchRequestGroupTopic) string { return t.Topic })
			if denied != nil {
				deniedTopics[g.Group] = append(deniedTopics[g.Group], denied...)
			}
			if topics == nil {
				topics = []kmsg.OffsetFetchRequestGroupTopic{}
			}
			g.Topics = topics
		}
		kept = append(kept, g)
	}
	req.Groups = kept
	if req.Groups == nil {
		req.Groups = []kmsg.OffsetFetchRequestGroup{}
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.OffsetFetchResponse)
		for i := range resp.Groups {
			g := &resp.Groups[i]
			if allTopics[g.Group] {
				g.Topics = filterTopics(s, ctx, g.Topics, func(t kmsg.OffsetFetchResponseGroupTopic) string { return t.Topic })
			}
			for _, t := range deniedTopics[g.Group] {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					d := deniedPartition(p)
					rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = d.Partition, d.Offset, d.LeaderEpoch, d.ErrorCode
					rt.Partitions = append(rt.Partitions, rp)
				}
				g.Topics = append(g.Topics, rt)
			}
		}
		for _, name := range deniedGroups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = name, int16(kafkaerr.GroupAuthorizationFailed)
			resp.Groups = append(resp.Groups, rg)
		}
	}
}

// filterTopics keeps the topics the request may describe.
func filterTopics[T any](s *Server, ctx context.Context, topics []T, name func(T) string) []T {
	ok := s.topicsAllowedQuietly(ctx, acl.OpDescribe, topicNames(topics, name))
	kept := topics[:0]
	for _, t := range topics {
		if ok[name(t)] {
			kept = append(kept, t)
		}
	}
	return kept
}

// authorizeFindCoordinator: DESCRIBE on the group or the transactional ID.
func (s *Server) authorizeFindCoordinator(ctx context.Context, req *kmsg.FindCoordinatorRequest) kmsg.Response {
	// Versions 0 to 3, one key (versions.go: batched keys are not served).
	rt, code := acl.ResourceGroup, int16(kafkaerr.GroupAuthorizationFailed)
	if req.CoordinatorType == 1 {
		rt, code = acl.ResourceTransactionalID, int16(kafkaerr.TransactionalIDAuthorizationFailed)
	}
	if s.allow(ctx, acl.OpDescribe, rt, req.CoordinatorKey) {
		return nil
	}
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	resp.ErrorCode, resp.NodeID, resp.Port = code, -1, -1
	return resp
}

// authorizeInitProducerID: WRITE on the transactional ID; an idempotent
// producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic
// (KIP-679), else CLUSTER_AUTHORIZATION_FAILED.
func (s *Server) authorizeInitProducerID(ctx context.Context, req *kmsg.InitProducerIDRequest) kmsg.Response {
	code := int16(0)
	switch {
	case req.TransactionalID != nil:
		if !s.allow(ctx, acl.OpWrite, acl.ResourceTransactionalID, *req.TransactionalID) {
			code = int16(kafkaerr.TransactionalIDAuthorizationFailed)
		}
	case !s.allowQuietly(ctx, acl.OpIdempotentWrite, acl.ResourceCluster, ClusterName) && !s.allowAnyOf(ctx, acl.OpWrite, acl.ResourceTopic):
		s.denied(identityOf(ctx), Action{Operation: acl.OpIdempotentWrite, ResourceType: acl.ResourceCluster, Name: ClusterName})
		code = int16(kafkaerr.ClusterAuthorizationFailed)
	}
	if code == 0 {
		return nil
	}
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
	return resp
}

// authorizeAddPartitionsToTxn: WRITE on the transactional ID (every
// partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and on each topic: if
// any is denied, nothing is added, its partitions answer
// TOPIC_AUTHORIZATION_FAILED and the others OPERATION_NOT_ATTEMPTED.
func (s *Server) authorizeAddPartitionsToTxn(ctx context.Context, req *kmsg.AddPartitionsToTxnRequest) kmsg.Response {
	answer := func(code func(topic string) int16) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, code(t.Topic)
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	if !s.allow(ctx, acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID) {
		return answer(func(string) int16 { return int16(kafkaerr.TransactionalIDAuthorizationFailed) })
	}
	ok := s.topicsAllowed(ctx, acl.OpWrite, topicNames(req.Topics, func(t kmsg.AddPartitionsToTxnRequestTopic) string { return t.Topic }))
	for _, allowed := range ok {
		if !allowed {
			return answer(func(topic string) int16 {
				if ok[topic] {
					return int16(kafkaerr.OperationNotAttempted)
				}
				return int16(kafkaerr.TopicAuthorizationFailed)
			})
		}
	}
	return nil
}

// authorizeTxnOffsetCommit: WRITE on the transactional ID, READ on the
// group (either denied: every partition), READ on each topic.
func (s *Server) authorizeTxnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) (kmsg.Response, func(kmsg.Response)) {
	answer := func(code int16) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	if !s.allow(ctx, acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID) {
		return answer(int16(kafkaerr.TransactionalIDAuthorizationFailed)), nil
	}
	if !s.allow(ctx, acl.OpRead, acl.ResourceGroup, req.Group) {
		return answer(int16(kafkaerr.GroupAuthorizationFailed)), nil
	}
	return nil, authorizeTopics(s, ctx, acl.OpRead, &req.Topics, func(t kmsg.TxnOffsetCommitRequestTopic) string { return t.Topic },
		func(resp *kmsg.TxnOffsetCommitResponse, t kmsg.TxnOffsetCommitRequestTopic) {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, int16(kafkaerr.TopicAuthorizationFailed)
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		})
}
