package kafkaserver

import (
	"context"
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless/acl"
	"github.com/diskless-go/diskless/kafkaerr"
)

// Each API's checks, mirrored from Kafka's request handlers: the
// operation and resource each asks, and the error each denial answers.
// authorizeRequest runs before the handler: a request denied whole is
// answered at once (deny); otherwise the resources the principal may not
// touch are taken out of the request, the handler serves the rest, and
// after puts the denied ones back in the response, each with its error
// (or drops from a listing what the principal may not see).
//
//	API                      checks                                      denied
//	Produce                  WRITE transactional ID; WRITE each topic    TRANSACTIONAL_ID_ / TOPIC_AUTHORIZATION_FAILED
//	Fetch                    READ each topic (fetch.go)                  TOPIC_AUTHORIZATION_FAILED
//	ListOffsets              DESCRIBE each topic                         TOPIC_AUTHORIZATION_FAILED
//	Metadata                 DESCRIBE each topic; CREATE cluster or      TOPIC_AUTHORIZATION_FAILED; all topics: the
//	                         topic to auto-create                        ones not described are left out
//	OffsetCommit             READ group; READ each topic                 GROUP_ / TOPIC_AUTHORIZATION_FAILED
//	OffsetFetch              DESCRIBE group; DESCRIBE each topic         GROUP_ / TOPIC_AUTHORIZATION_FAILED (all topics: left out)
//	FindCoordinator          DESCRIBE group or transactional ID          GROUP_ / TRANSACTIONAL_ID_AUTHORIZATION_FAILED
//	Join/Sync/Heartbeat/Leave READ group                                 GROUP_AUTHORIZATION_FAILED
//	ConsumerGroupHeartbeat   READ group; DESCRIBE subscribed topics      GROUP_ / TOPIC_AUTHORIZATION_FAILED
//	DescribeGroups, ConsumerGroupDescribe  DESCRIBE each group           GROUP_AUTHORIZATION_FAILED
//	ListGroups               DESCRIBE cluster, else DESCRIBE each group  left out
//	DeleteGroups             DELETE each group                           GROUP_AUTHORIZATION_FAILED
//	OffsetDelete             DELETE group; READ each topic               GROUP_ / TOPIC_AUTHORIZATION_FAILED
//	CreateTopics             CREATE cluster, else CREATE each topic      TOPIC_AUTHORIZATION_FAILED
//	DeleteTopics             DELETE each topic                           TOPIC_AUTHORIZATION_FAILED
//	DeleteRecords            DELETE each topic                           TOPIC_AUTHORIZATION_FAILED
//	CreatePartitions         ALTER each topic                            TOPIC_AUTHORIZATION_FAILED
//	OffsetForLeaderEpoch     DESCRIBE each topic                         TOPIC_AUTHORIZATION_FAILED
//	DescribeProducers        READ each topic                             TOPIC_AUTHORIZATION_FAILED
//	InitProducerId           WRITE transactional ID; without one         TRANSACTIONAL_ID_ / CLUSTER_AUTHORIZATION_FAILED
//	                         IDEMPOTENT_WRITE cluster or WRITE any topic
//	AddPartitionsToTxn       WRITE transactional ID; WRITE each topic    TRANSACTIONAL_ID_ / TOPIC_AUTHORIZATION_FAILED,
//	                                                                     the others OPERATION_NOT_ATTEMPTED
//	AddOffsetsToTxn          WRITE transactional ID; READ group          TRANSACTIONAL_ID_ / GROUP_AUTHORIZATION_FAILED
//	TxnOffsetCommit          WRITE transactional ID; READ group; READ    TRANSACTIONAL_ID_ / GROUP_ / TOPIC_AUTHORIZATION_FAILED
//	                         each topic
//	EndTxn                   WRITE transactional ID                      TRANSACTIONAL_ID_AUTHORIZATION_FAILED
//	DescribeTransactions     DESCRIBE each transactional ID              TRANSACTIONAL_ID_AUTHORIZATION_FAILED
//	ListTransactions         DESCRIBE each transactional ID              left out
//	DescribeConfigs          DESCRIBE_CONFIGS topic or cluster           TOPIC_ / CLUSTER_AUTHORIZATION_FAILED
//	AlterConfigs, Incremental ALTER_CONFIGS topic or cluster             TOPIC_ / CLUSTER_AUTHORIZATION_FAILED
//	DescribeLogDirs          DESCRIBE cluster                            CLUSTER_AUTHORIZATION_FAILED
//	DescribeAcls             DESCRIBE cluster                            CLUSTER_AUTHORIZATION_FAILED
//	CreateAcls, DeleteAcls   ALTER cluster                               CLUSTER_AUTHORIZATION_FAILED
//	DescribeUserScramCredentials  DESCRIBE cluster                       CLUSTER_AUTHORIZATION_FAILED
//	AlterUserScramCredentials     ALTER cluster                          CLUSTER_AUTHORIZATION_FAILED
//	ApiVersions, SaslHandshake, SaslAuthenticate, DescribeCluster: none

// authorizeRequest checks req for the principal of ctx; see above. It may
// take denied resources out of req. deny, if not nil, is the whole
// answer; after, if not nil, completes the handler's response.
func (s *Server) authorizeRequest(ctx context.Context, req kmsg.Request) (deny kmsg.Response, after func(kmsg.Response)) {
	switch req := req.(type) {
	case *kmsg.ProduceRequest:
		return s.authorizeProduce(ctx, req)
	case *kmsg.ListOffsetsRequest:
		return nil, authorizeTopics(s, ctx, acl.OpDescribe, &req.Topics, func(t kmsg.ListOffsetsRequestTopic) string { return t.Topic },
			func(resp *kmsg.ListOffsetsResponse, t kmsg.ListOffsetsRequestTopic) {
				rt := kmsg.NewListOffsetsResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewListOffsetsResponseTopicPartition()
					rp.Partition, rp.ErrorCode, rp.Timestamp, rp.Offset, rp.LeaderEpoch = p.Partition, int16(kafkaerr.TopicAuthorizationFailed), -1, -1, -1
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			})
	case *kmsg.MetadataRequest:
		return s.authorizeMetadata(ctx, req)
	case *kmsg.OffsetCommitRequest:
		if !s.allow(ctx, acl.OpRead, acl.ResourceGroup, req.Group) {
			resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
			for _, t := range req.Topics {
				rt := kmsg.NewOffsetCommitResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetCommitResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p.Partition, int16(kafkaerr.GroupAuthorizationFailed)
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			return resp, nil
		}
		return nil, authorizeTopics(s, ctx, acl.OpRead, &req.Topics, func(t kmsg.OffsetCommitRequestTopic) string { return t.Topic },
			func(resp *kmsg.OffsetCommitResponse, t kmsg.OffsetCommitRequestTopic) {
				rt := kmsg.NewOffsetCommitResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetCommitResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p.Partition, int16(kafkaerr.TopicAuthorizationFailed)
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			})
	case *kmsg.OffsetFetchRequest:
		return s.authorizeOffsetFetch(ctx, req)
	case *kmsg.FindCoordinatorRequest:
		return s.authorizeFindCoordinator(ctx, req), nil
	case *kmsg.JoinGroupRequest:
		if !s.allow(ctx, acl.OpRead, acl.ResourceGroup, req.Group) {
			resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
			resp.ErrorCode, resp.Generation, resp.MemberID = int16(kafkaerr.GroupAuthorizationFailed), -1, req.MemberID
			return resp, nil
		}
	case *kmsg.SyncGroupRequest:
		if !s.allow(ctx, acl.OpRead, acl.ResourceGroup, req.Group) {
			resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
			resp.ErrorCode = int16(kafkaerr.GroupAuthorizationFailed)
			return resp, nil
		}
	case *kmsg.HeartbeatRequest:
		if !s.allow(ctx, acl.OpRead, acl.ResourceGroup, req.Group) {
			resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
			resp.ErrorCode = int16(kafkaerr.GroupAuthorizationFailed)
			return resp, nil
		}
	case *kmsg.LeaveGroupRequest:
		if !s.allow(ctx, acl.OpRead, acl.ResourceGroup, req.Group) {
			resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
			resp.ErrorCode = int16(kafkaerr.GroupAuthorizationFailed)
			return resp, nil
		}
	case *kmsg.ConsumerGroupHeartbeatRequest:
		code := int16(0)
		if !s.allow(ctx, acl.OpRead, acl.ResourceGroup, req.Group) {
			code = int16(kafkaerr.GroupAuthorizationFailed)
		} else if len(req.SubscribedTopicNames) > 0 {
			for _, ok := range s.topicsAllowed(ctx, acl.OpDescribe, req.SubscribedTopicNames) {
				if !ok {
					code = int16(kafkaerr.TopicAuthorizationFailed)
				}
			}
		}
		if code != 0 {
			resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
			resp.ErrorCode = code
			return resp, nil
		}
	case *kmsg.ConsumerGroupDescribeRequest:
		addDenied := authorizeNames(s, ctx, acl.OpDescribe, acl.ResourceGroup, &req.Groups, func(resp *kmsg.ConsumerGroupDescribeResponse, g string) {
			rg := kmsg.NewConsumerGroupDescribeResponseGroup()
			rg.Group, rg.ErrorCode = g, int16(kafkaerr.GroupAuthorizationFailed)
			resp.Groups = append(resp.Groups, rg)
		})
		return nil, func(r kmsg.Response) {
			// A group whose members name a topic the principal may not
			// describe (subscribed, assigned or to be assigned) is
			// TOPIC_AUTHORIZATION_FAILED, as Kafka 4 answers, so that
			// its names do not leak.
			resp := r.(*kmsg.ConsumerGroupDescribeResponse)
			for i := range resp.Groups {
				g := &resp.Groups[i]
				var names []string
				for _, m := range g.Members {
					names = append(names, m.SubscribedTopics...)
					for _, a := range []kmsg.Assignment{m.Assignment, m.TargetAssignment} {
						for _, tp := range a.TopicPartitions {
							names = append(names, tp.Topic)
						}
					}
				}
				for _, ok := range s.topicsAllowedQuietly(ctx, acl.OpDescribe, names) {
					if !ok {
						name := g.Group
						*g = kmsg.NewConsumerGroupDescribeResponseGroup()
						g.Group, g.ErrorCode = name, int16(kafkaerr.TopicAuthorizationFailed)
						break
					}
				}
			}
			if addDenied != nil {
				addDenied(r)
			}
		}
	case *kmsg.DescribeGroupsRequest:
		return nil, authorizeNames(s, ctx, acl.OpDescribe, acl.ResourceGroup, &req.Groups, func(resp *kmsg.DescribeGroupsResponse, g string) {
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g, int16(kafkaerr.GroupAuthorizationFailed)
			resp.Groups = append(resp.Groups, rg)
		})
	case *kmsg.ListGroupsRequest:
		if s.allowQuietly(ctx, acl.OpDescribe, acl.ResourceCluster, ClusterName) {
			return nil, nil
		}
		return nil, func(r kmsg.Response) {
			resp := r.(*kmsg.ListGroupsResponse)
			kept := resp.Groups[:0]
			for _, g := range resp.Groups {
				if s.allowQuietly(ctx, acl.OpDescribe, acl.ResourceGroup, g.Group) {
					kept = append(kept, g)
				}
			}
			resp.Groups = kept
		}
	case *kmsg.DeleteGroupsRequest:
		return nil, authorizeNames(s, ctx, acl.OpDelete, acl.ResourceGroup, &req.Groups, func(resp *kmsg.DeleteGroupsResponse, g string) {
			rg := kmsg.NewDeleteGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g, int16(kafkaerr.GroupAuthorizationFailed)
			resp.Groups = append(resp.Groups, rg)
		})
	case *kmsg.OffsetDeleteRequest:
		if !s.allow(ctx, acl.OpDelete, acl.ResourceGroup, req.Group) {
			resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
			resp.ErrorCode = int16(kafkaerr.GroupAuthorizationFailed)
			return resp, nil
		}
		return nil, authorizeTopics(s, ctx, acl.OpRead, &req.Topics, func(t kmsg.OffsetDeleteRequestTopic) string { return t.Topic },
			func(resp *kmsg.OffsetDeleteResponse, t kmsg.OffsetDeleteRequestTopic) {
				rt := kmsg.NewOffsetDeleteResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetDeleteResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p.Partition, int16(kafkaerr.TopicAuthorizationFailed)
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			})
	case *kmsg.CreateTopicsRequest:
		var addDenied func(kmsg.Response)
		if !s.allowQuietly(ctx, acl.OpCreate, acl.ResourceCluster, ClusterName) {
			addDenied = authorizeTopics(s, ctx, acl.OpCreate, &req.Topics, func(t kmsg.CreateTopicsRequestTopic) string { return t.Topic },
				func(resp *kmsg.CreateTopicsResponse, t kmsg.CreateTopicsRequestTopic) {
					rt := kmsg.NewCreateTopicsResponseTopic()
					rt.Topic, rt.ErrorCode, rt.NumPartitions, rt.ReplicationFactor = t.Topic, int16(kafkaerr.TopicAuthorizationFailed), -1, -1
					resp.Topics = append(resp.Topics, rt)
				})
		}
		return nil, func(r kmsg.Response) {
			// A created topic's configs are shown only with
			// DESCRIBE_CONFIGS on it, as Kafka answers (version 5 on).
			resp := r.(*kmsg.CreateTopicsResponse)
			for i := range resp.Topics {
				t := &resp.Topics[i]
				if t.ErrorCode == 0 && req.Version >= 5 && !s.allowQuietly(ctx, acl.OpDescribeConfigs, acl.ResourceTopic, t.Topic) {
					t.ConfigErrorCode, t.Configs, t.NumPartitions, t.ReplicationFactor = int16(kafkaerr.TopicAuthorizationFailed), nil, -1, -1
				}
			}
			if addDenied != nil {
				addDenied(r)
			}
		}
	case *kmsg.DeleteTopicsRequest:
		return s.authorizeDeleteTopics(ctx, req)
	case *kmsg.DeleteRecordsRequest:
		return nil, authorizeTopics(s, ctx, acl.OpDelete, &req.Topics, func(t kmsg.DeleteRecordsRequestTopic) string { return t.Topic },
			func(resp *kmsg.DeleteRecordsResponse, t kmsg.DeleteRecordsRequestTopic) {
				rt := kmsg.NewDeleteRecordsResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewDeleteRecordsResponseTopicPartition()
					rp.Partition, rp.LowWatermark, rp.ErrorCode = p.Partition, -1, int16(kafkaerr.TopicAuthorizationFailed)
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			})
	case *kmsg.CreatePartitionsRequest:
		return nil, authorizeTopics(s, ctx, acl.OpAlter, &req.Topics, func(t kmsg.CreatePartitionsRequestTopic) string { return t.Topic },
			func(resp *kmsg.CreatePartitionsResponse, t kmsg.CreatePartitionsRequestTopic) {
				rt := kmsg.NewCreatePartitionsResponseTopic()
				rt.Topic, rt.ErrorCode = t.Topic, int16(kafkaerr.TopicAuthorizationFailed)
				resp.Topics = append(resp.Topics, rt)
			})
	case *kmsg.OffsetForLeaderEpochRequest:
		return nil, authorizeTopics(s, ctx, acl.OpDescribe, &req.Topics, func(t kmsg.OffsetForLeaderEpochRequestTopic) string { return t.Topic },
			func(resp *kmsg.OffsetForLeaderEpochResponse, t kmsg.OffsetForLeaderEpochRequestTopic) {
				rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
					rp.Partition, rp.ErrorCode, rp.LeaderEpoch, rp.EndOffset = p.Partition, int16(kafkaerr.TopicAuthorizationFailed), -1, -1
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			})
	case *kmsg.DescribeProducersRequest:
		return nil, authorizeTopics(s, ctx, acl.OpRead, &req.Topics, func(t kmsg.DescribeProducersRequestTopic) string { return t.Topic },
			func(resp *kmsg.DescribeProducersResponse, t kmsg.DescribeProducersRequestTopic) {
				rt := kmsg.NewDescribeProducersResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewDescribeProducersResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p, int16(kafkaerr.TopicAuthorizationFailed)
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			})
	case *kmsg.InitProducerIDRequest:
		return s.authorizeInitProducerID(ctx, req), nil
	case *kmsg.AddPartitionsToTxnRequest:
		return s.authorizeAddPartitionsToTxn(ctx, req), nil
	case *kmsg.AddOffsetsToTxnRequest:
		code := int16(0)
		switch {
		case !s.allow(ctx, acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID):
			code = int16(kafkaerr.TransactionalIDAuthorizationFailed)
		case !s.allow(ctx, acl.OpRead, acl.ResourceGroup, req.Group):
			code = int16(kafkaerr.GroupAuthorizationFailed)
		}
		if code != 0 {
			resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
			resp.ErrorCode = code
			return resp, nil
		}
	case *kmsg.TxnOffsetCommitRequest:
		return s.authorizeTxnOffsetCommit(ctx, req)
	case *kmsg.EndTxnRequest:
		if !s.allow(ctx, acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID) {
			resp := req.ResponseKind().(*kmsg.EndTxnResponse)
			resp.ErrorCode = int16(kafkaerr.TransactionalIDAuthorizationFailed)
			return resp, nil
		}
	case *kmsg.DescribeTransactionsRequest:
		addDenied := authorizeNames(s, ctx, acl.OpDescribe, acl.ResourceTransactionalID, &req.TransactionalIDs, func(resp *kmsg.DescribeTransactionsResponse, id string) {
			st := kmsg.NewDescribeTransactionsResponseTransactionState()
			st.TransactionalID, st.ErrorCode, st.ProducerID, st.ProducerEpoch = id, int16(kafkaerr.TransactionalIDAuthorizationFailed), -1, -1
			resp.TransactionStates = append(resp.TransactionStates, st)
		})
		return nil, func(r kmsg.Response) {
			// Only the partitions of topics the principal may describe,
			// as Kafka answers.
			resp := r.(*kmsg.DescribeTransactionsResponse)
			for i := range resp.TransactionStates {
				st := &resp.TransactionStates[i]
				st.Topics = filterTopics(s, ctx, st.Topics, func(t kmsg.DescribeTransactionsResponseTransactionStateTopic) string { return t.Topic })
			}
			if addDenied != nil {
				addDenied(r)
			}
		}
	case *kmsg.ListTransactionsRequest:
		return nil, func(r kmsg.Response) {
			resp := r.(*kmsg.ListTransactionsResponse)
			kept := resp.TransactionStates[:0]
			for _, st := range resp.TransactionStates {
				if s.allowQuietly(ctx, acl.OpDescribe, acl.ResourceTransactionalID, st.TransactionalID) {
					kept = append(kept, st)
				}
			}
			resp.TransactionStates = kept
		}
	case *kmsg.DescribeConfigsRequest:
		return nil, authorizeConfigs(s, ctx, acl.OpDescribeConfigs, &req.Resources,
			func(r kmsg.DescribeConfigsRequestResource) (kmsg.ConfigResourceType, string) {
				return r.ResourceType, r.ResourceName
			},
			func(resp *kmsg.DescribeConfigsResponse, r kmsg.DescribeConfigsRequestResource, code int16) {
				rr := kmsg.NewDescribeConfigsResponseResource()
				rr.ResourceType, rr.ResourceName, rr.ErrorCode = r.ResourceType, r.ResourceName, code
				resp.Resources = append(resp.Resources, rr)
			})
	case *kmsg.AlterConfigsRequest:
		return nil, authorizeConfigs(s, ctx, acl.OpAlterConfigs, &req.Resources,
			func(r kmsg.AlterConfigsRequestResource) (kmsg.ConfigResourceType, string) {
				return r.ResourceType, r.ResourceName
			},
			func(resp *kmsg.AlterConfigsResponse, r kmsg.AlterConfigsRequestResource, code int16) {
				rr := kmsg.NewAlterConfigsResponseResource()
				rr.ResourceType, rr.ResourceName, rr.ErrorCode = r.ResourceType, r.ResourceName, code
				resp.Resources = append(resp.Resources, rr)
			})
	case *kmsg.IncrementalAlterConfigsRequest:
		return nil, authorizeConfigs(s, ctx, acl.OpAlterConfigs, &req.Resources,
			func(r kmsg.IncrementalAlterConfigsRequestResource) (kmsg.ConfigResourceType, string) {
				return r.ResourceType, r.ResourceName
			},
			func(resp *kmsg.IncrementalAlterConfigsResponse, r kmsg.IncrementalAlterConfigsRequestResource, code int16) {
				rr := kmsg.NewIncrementalAlterConfigsResponseResource()
				rr.ResourceType, rr.ResourceName, rr.ErrorCode = r.ResourceType, r.ResourceName, code
				resp.Resources = append(resp.Resources, rr)
			})
	case *kmsg.DescribeLogDirsRequest:
		if !s.allowCluster(ctx, acl.OpDescribe) {
			resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
			if req.Version >= 3 {
				resp.ErrorCode = int16(kafkaerr.ClusterAuthorizationFailed)
			}
			return resp, nil
		}
	}
	return nil, nil
}

// authorizeTopics takes the topics the request may not do op on out of
// *topics, and returns what puts them back in the response, each through
// deniedTopic. nil if none was denied.
func authorizeTopics[T any, R kmsg.Response](s *Server, ctx context.Context, op acl.Operation, topics *[]T, name func(T) string, deniedTopic func(R, T)) func(kmsg.Response) {
	names := make([]string, len(*topics))
	for i, t := range *topics {
		names[i] = name(t)
	}
	ok := s.topicsAllowed(ctx, op, names)
	var kept, denied []T
	for _, t := range *topics {
		if ok[name(t)] {
			kept = append(kept, t)
		} else {
			denied = append(denied, t)
		}
	}
	if len(denied) == 0 {
		return nil
	}
	*topics = kept
	if kept == nil {
		*topics = []T{}
	}
	return func(r kmsg.Response) {
		if r == nil {
			return // Produce with acks 0
		}
		resp := r.(R)
		for _, t := range denied {
			deniedTopic(resp, t)
		}
	}
}

// authorizeNames is authorizeTopics for a list of names of resources of
// type rt (groups, transactional IDs).
func authorizeNames[R kmsg.Response](s *Server, ctx context.Context, op acl.Operation, rt acl.ResourceType, names *[]string, deniedName func(R, string)) func(kmsg.Response) {
	actions := make([]Action, len(*names))
	for i, n := range *names {
		actions[i] = Action{Operation: op, ResourceType: rt, Name: n}
	}
	var kept, denied []string
	for i, ok := range s.allowed(ctx, actions...) {
		if ok {
			kept = append(kept, (*names)[i])
		} else {
			denied = append(denied, (*names)[i])
		}
	}
	if len(denied) == 0 {
		return nil
	}
	*names = kept
	if kept == nil {
		*names = []string{}
	}
	return func(r kmsg.Response) {
		resp := r.(R)
		for _, n := range denied {
			deniedName(resp, n)
		}
	}
}

// authorizeConfigs checks each config resource: a topic's with op on the
// topic, a broker's (or broker logger's) with op on the cluster.
func authorizeConfigs[T any, R kmsg.Response](s *Server, ctx context.Context, op acl.Operation, resources *[]T, key func(T) (kmsg.ConfigResourceType, string), deniedResource func(R, T, int16)) func(kmsg.Response) {
	type denial struct {
		r    T
		code int16
	}
	var kept []T
	var denied []denial
	for _, r := range *resources {
		typ, name := key(r)
		switch typ {
		case kmsg.ConfigResourceTypeTopic:
			if !s.allow(ctx, op, acl.ResourceTopic, name) {
				denied = append(denied, denial{r, int16(kafkaerr.TopicAuthorizationFailed)})
				continue
			}
		case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
			if !s.allowCluster(ctx, op) {
				denied = append(denied, denial{r, int16(kafkaerr.ClusterAuthorizationFailed)})
				continue
			}
		}
		kept = append(kept, r)
	}
	if len(denied) == 0 {
		return nil
	}
	*resources = kept
	if kept == nil {
		*resources = []T{}
	}
	return func(r kmsg.Response) {
		resp := r.(R)
		for _, d := range denied {
			deniedResource(resp, d.r, d.code)
		}
	}
}

// authorizeProduce: WRITE on the transactional ID, if any (denied: every
// partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED), and WRITE on each
// topic.
func (s *Server) authorizeProduce(ctx context.Context, req *kmsg.ProduceRequest) (kmsg.Response, func(kmsg.Response)) {
	// Transactional batches need a transactional ID the principal may
	// WRITE, as in Kafka: without the check, a client could add records
	// to another producer's transaction (its ID and epoch are what
	// DescribeProducers shows) by leaving the request's ID null.
	txnDenied := req.TransactionID != nil && !s.allow(ctx, acl.OpWrite, acl.ResourceTransactionalID, *req.TransactionID)
	if req.TransactionID == nil && hasTransactionalBatches(req) {
		s.denied(identityOf(ctx), Action{Operation: acl.OpWrite, ResourceType: acl.ResourceTransactionalID})
		txnDenied = true
	}
	if txnDenied {
		if req.Acks == 0 {
			return nil, nil // nothing is answered; nothing is written either
		}
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = p.Partition, int16(kafkaerr.TransactionalIDAuthorizationFailed), -1, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	return nil, authorizeTopics(s, ctx, acl.OpWrite, &req.Topics, func(t kmsg.ProduceRequestTopic) string { return t.Topic },
		func(resp *kmsg.ProduceResponse, t kmsg.ProduceRequestTopic) {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = p.Partition, int16(kafkaerr.TopicAuthorizationFailed), -1, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		})
}

// hasTransactionalBatches reports whether a batch of the request is
// transactional (RecordBatch v2 attributes bit 4), as Kafka's
// RequestUtils.hasTransactionalRecords: every batch of every partition
// is looked at, by its header only; what does not parse is left to the
// produce path's validation.
func hasTransactionalBatches(req *kmsg.ProduceRequest) bool {
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			for b := p.Records; len(b) >= batchHeaderBytes && b[16] == 2; {
				if binary.BigEndian.Uint16(b[21:23])&0x10 != 0 {
					return true
				}
				n := int(int32(binary.BigEndian.Uint32(b[8:12])))
				if n < batchHeaderBytes-12 || 12+n > len(b) {
					break
				}
				b = b[12+n:]
			}
		}
	}
	return false
}

// batchHeaderBytes is a RecordBatch v2 header's size: base offset (8),
// length (4), leader epoch (4), magic (1), CRC (4), attributes (2), last
// offset delta (4), first and max timestamps (16), producer ID (8),
// epoch (2), base sequence (4), record count (4).
const batchHeaderBytes = 61

// autoCreates reports whether Metadata creates the unknown topics req
// names: the broker allows it, and so does the request (versions before
// 4 always do: the field came in version 4, and Kafka reads it as true
// before).
func (s *Server) autoCreates(req *kmsg.MetadataRequest) bool {
	return s.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
}

// authorizeMetadata: DESCRIBE on each topic asked for (TOPIC_AUTHORIZATION_FAILED),
// CREATE on the cluster or the topic for one that would be auto-created
// (TOPIC_AUTHORIZATION_FAILED); a request for every topic answers only
// those the principal may describe.
func (s *Server) authorizeMetadata(ctx context.Context, req *kmsg.MetadataRequest) (kmsg.Response, func(kmsg.Response)) {
	if req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0) {
		return nil, func(r kmsg.Response) {
			resp := r.(*kmsg.MetadataResponse)
			names := make([]string, 0, len(resp.Topics))
			for _, t := range resp.Topics {
				if t.Topic != nil {
					names = append(names, *t.Topic)
				}
			}
			ok := s.topicsAllowedQuietly(ctx, acl.OpDescribe, names)
			kept := resp.Topics[:0]
			for _, t := range resp.Topics {
				if t.Topic != nil && ok[*t.Topic] {
					kept = append(kept, t)
				}
			}
			resp.Topics = kept
		}
	}
	var index topicIndex
	var indexed bool
	var kept []kmsg.MetadataRequestTopic
	var denied []string
	byID, named := false, map[string]bool{}
	for _, t := range req.Topics {
		if t.Topic == nil {
			kept = append(kept, t) // by topic ID: the handler answers UNKNOWN_TOPIC_ID unless it is known, checked after
			byID = true
			continue
		}
		name := *t.Topic
		named[name] = true
		if !s.allow(ctx, acl.OpDescribe, acl.ResourceTopic, name) {
			denied = append(denied, name)
			continue
		}
		if s.autoCreates(req) {
			if !indexed {
				index, _ = s.topicIndex(ctx)
				indexed = true
			}
			if _, exists := index.byName[name]; !exists &&
				!s.allowQuietly(ctx, acl.OpCreate, acl.ResourceCluster, ClusterName) && !s.allow(ctx, acl.OpCreate, acl.ResourceTopic, name) {
				denied = append(denied, name)
				continue
			}
		}
		kept = append(kept, t)
	}
	req.Topics = kept
	if req.Topics == nil {
		req.Topics = []kmsg.MetadataRequestTopic{}
	}
	// Version 0 reads an empty list as every topic: the handler's answer
	// to it is dropped whole.
	none := req.Version == 0 && len(kept) == 0
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.MetadataResponse)
		if none {
			resp.Topics = resp.Topics[:0]
		}
		// Topics asked for by ID: those found are shown only if
		// described (those asked for by name were checked before).
		if byID {
			out := resp.Topics[:0]
			for _, t := range resp.Topics {
				if t.Topic != nil && t.ErrorCode == 0 && !named[*t.Topic] && !s.allow(ctx, acl.OpDescribe, acl.ResourceTopic, *t.Topic) {
					t.ErrorCode, t.Topic, t.Partitions = int16(kafkaerr.TopicAuthorizationFailed), nil, nil
				}
				out = append(out, t)
			}
			resp.Topics = out
		}
		for _, name := range denied {
			rt := kmsg.NewMetadataResponseTopic()
			rt.Topic, rt.ErrorCode = kmsg.StringPtr(name), int16(kafkaerr.TopicAuthorizationFailed)
			resp.Topics = append(resp.Topics, rt)
		}
	}
}

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
		if !s.allow(ctx, acl.OpDescribe, acl.ResourceGroup, req.Group) {
			resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
			resp.ErrorCode = int16(kafkaerr.GroupAuthorizationFailed)
			return resp, nil
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
					d := deniedPartition(p)
					rp := kmsg.NewOffsetFetchResponseTopicPartition()
					rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = d.Partition, d.Offset, d.LeaderEpoch, d.ErrorCode
					rt.Partitions = append(rt.Partitions, rp)
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
			names := make([]string, len(g.Topics))
			for i, t := range g.Topics {
				names[i] = t.Topic
			}
			ok := s.topicsAllowed(ctx, acl.OpDescribe, names)
			var topics []kmsg.OffsetFetchRequestGroupTopic
			for _, t := range g.Topics {
				if ok[t.Topic] {
					topics = append(topics, t)
				} else {
					deniedTopics[g.Group] = append(deniedTopics[g.Group], t)
				}
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
	names := make([]string, len(topics))
	for i, t := range topics {
		names[i] = name(t)
	}
	ok := s.topicsAllowedQuietly(ctx, acl.OpDescribe, names)
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

// authorizeDeleteTopics: DELETE on each topic, named or (version 6 on)
// given by ID; a topic given by ID needs DESCRIBE too, or its name is not
// answered, as in Kafka.
func (s *Server) authorizeDeleteTopics(ctx context.Context, req *kmsg.DeleteTopicsRequest) (kmsg.Response, func(kmsg.Response)) {
	if req.Version < 6 {
		return nil, authorizeNames(s, ctx, acl.OpDelete, acl.ResourceTopic, &req.TopicNames, func(resp *kmsg.DeleteTopicsResponse, name string) {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.ErrorCode = kmsg.StringPtr(name), int16(kafkaerr.TopicAuthorizationFailed)
			resp.Topics = append(resp.Topics, rt)
		})
	}
	index, _ := s.topicIndex(ctx)
	var kept, denied []kmsg.DeleteTopicsRequestTopic
	for _, t := range req.Topics {
		name := ""
		switch {
		case t.Topic != nil:
			name = *t.Topic
		default:
			if d, ok := index.byID[t.TopicID]; ok {
				name = d.Name
			}
		}
		switch {
		case name == "":
		case t.Topic == nil && !s.allow(ctx, acl.OpDescribe, acl.ResourceTopic, name):
			denied = append(denied, t) // by ID: not even its name is answered
			continue
		case !s.allow(ctx, acl.OpDelete, acl.ResourceTopic, name):
			t.Topic = kmsg.StringPtr(name)
			denied = append(denied, t)
			continue
		}
		kept = append(kept, t)
	}
	if len(denied) == 0 {
		return nil, nil
	}
	req.Topics = kept
	if req.Topics == nil {
		req.Topics = []kmsg.DeleteTopicsRequestTopic{}
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.DeleteTopicsResponse)
		for _, t := range denied {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.TopicID, rt.ErrorCode = t.Topic, t.TopicID, int16(kafkaerr.TopicAuthorizationFailed)
			resp.Topics = append(resp.Topics, rt)
		}
	}
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
	names := make([]string, len(req.Topics))
	for i, t := range req.Topics {
		names[i] = t.Topic
	}
	ok := s.topicsAllowed(ctx, acl.OpWrite, names)
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
