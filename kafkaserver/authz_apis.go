package kafkaserver

import (
	"context"
	"slices"

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
//	DescribeClientQuotas     DESCRIBE_CONFIGS cluster                    CLUSTER_AUTHORIZATION_FAILED
//	AlterClientQuotas        ALTER_CONFIGS cluster                       CLUSTER_AUTHORIZATION_FAILED (each entry)
//	UpdateFeatures           ALTER cluster                               CLUSTER_AUTHORIZATION_FAILED
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
				resp.Topics = append(resp.Topics, deniedOffsetCommitTopic(t, kafkaerr.GroupAuthorizationFailed))
			}
			return resp, nil
		}
		return nil, authorizeTopics(s, ctx, acl.OpRead, &req.Topics, func(t kmsg.OffsetCommitRequestTopic) string { return t.Topic },
			func(resp *kmsg.OffsetCommitResponse, t kmsg.OffsetCommitRequestTopic) {
				resp.Topics = append(resp.Topics, deniedOffsetCommitTopic(t, kafkaerr.TopicAuthorizationFailed))
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
		return s.denyWhole(ctx, req, acl.OpRead, acl.ResourceGroup, req.Group, kafkaerr.GroupAuthorizationFailed), nil
	case *kmsg.HeartbeatRequest:
		return s.denyWhole(ctx, req, acl.OpRead, acl.ResourceGroup, req.Group, kafkaerr.GroupAuthorizationFailed), nil
	case *kmsg.LeaveGroupRequest:
		return s.denyWhole(ctx, req, acl.OpRead, acl.ResourceGroup, req.Group, kafkaerr.GroupAuthorizationFailed), nil
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
			return errorResponse(req, code), nil
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
			resp.Groups = slices.DeleteFunc(resp.Groups, func(g kmsg.ListGroupsResponseGroup) bool {
				return !s.allowQuietly(ctx, acl.OpDescribe, acl.ResourceGroup, g.Group)
			})
		}
	case *kmsg.DeleteGroupsRequest:
		return nil, authorizeNames(s, ctx, acl.OpDelete, acl.ResourceGroup, &req.Groups, func(resp *kmsg.DeleteGroupsResponse, g string) {
			rg := kmsg.NewDeleteGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g, int16(kafkaerr.GroupAuthorizationFailed)
			resp.Groups = append(resp.Groups, rg)
		})
	case *kmsg.OffsetDeleteRequest:
		if deny := s.denyWhole(ctx, req, acl.OpDelete, acl.ResourceGroup, req.Group, kafkaerr.GroupAuthorizationFailed); deny != nil {
			return deny, nil
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
			return errorResponse(req, code), nil
		}
	case *kmsg.TxnOffsetCommitRequest:
		return s.authorizeTxnOffsetCommit(ctx, req)
	case *kmsg.EndTxnRequest:
		return s.denyWhole(ctx, req, acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID, kafkaerr.TransactionalIDAuthorizationFailed), nil
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
			resp.TransactionStates = slices.DeleteFunc(resp.TransactionStates, func(st kmsg.ListTransactionsResponseTransactionState) bool {
				return !s.allowQuietly(ctx, acl.OpDescribe, acl.ResourceTransactionalID, st.TransactionalID)
			})
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
	case *kmsg.DescribeClientQuotasRequest:
		if !s.allowCluster(ctx, acl.OpDescribeConfigs) {
			resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
			resp.ErrorCode = int16(kafkaerr.ClusterAuthorizationFailed)
			return resp, nil
		}
	case *kmsg.AlterClientQuotasRequest:
		if !s.allowCluster(ctx, acl.OpAlterConfigs) {
			return deniedAlterClientQuotas(req), nil
		}
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

// deniedOffsetCommitTopic answers topic t of an OffsetCommit refused with
// code: each partition with code.
func deniedOffsetCommitTopic(t kmsg.OffsetCommitRequestTopic, code kafkaerr.Code) kmsg.OffsetCommitResponseTopic {
	rt := kmsg.NewOffsetCommitResponseTopic()
	rt.Topic = t.Topic
	for _, p := range t.Partitions {
		rp := kmsg.NewOffsetCommitResponseTopicPartition()
		rp.Partition, rp.ErrorCode = p.Partition, int16(code)
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}

// denyWhole answers req whole with the error code code when the
// principal may not do op on the resource, and is nil when it may.
func (s *Server) denyWhole(ctx context.Context, req kmsg.Request, op acl.Operation, rt acl.ResourceType, name string, code kafkaerr.Code) kmsg.Response {
	if s.allow(ctx, op, rt, name) {
		return nil
	}
	return errorResponse(req, int16(code))
}

// authorizeTopics takes the topics the request may not do op on out of
// *topics, and returns what puts them back in the response, each through
// deniedTopic. nil if none was denied.
func authorizeTopics[T any, R kmsg.Response](s *Server, ctx context.Context, op acl.Operation, topics *[]T, name func(T) string, deniedTopic func(R, T)) func(kmsg.Response) {
	kept, denied := splitTopics(s, ctx, op, *topics, name)
	return keepAllowed(topics, kept, denied, deniedTopic)
}

// splitTopics splits topics, each named by name, into those the principal
// may do op on and the others.
func splitTopics[T any](s *Server, ctx context.Context, op acl.Operation, topics []T, name func(T) string) (kept, denied []T) {
	ok := s.topicsAllowed(ctx, op, topicNames(topics, name))
	for _, t := range topics {
		if ok[name(t)] {
			kept = append(kept, t)
		} else {
			denied = append(denied, t)
		}
	}
	return kept, denied
}

// topicNames is the name of each of items.
func topicNames[T any](items []T, name func(T) string) []string {
	names := make([]string, len(items))
	for i, it := range items {
		names[i] = name(it)
	}
	return names
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
	return keepAllowed(names, kept, denied, deniedName)
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
	return keepAllowed(resources, kept, denied, func(resp R, d denial) { deniedResource(resp, d.r, d.code) })
}

// keepAllowed leaves in *items only kept, the ones allowed, and returns
// what puts each denied one back in the response through deny; nil when
// none was denied.
func keepAllowed[T, D any, R kmsg.Response](items *[]T, kept []T, denied []D, deny func(R, D)) func(kmsg.Response) {
	if len(denied) == 0 {
		return nil
	}
	*items = kept
	if kept == nil {
		*items = []T{}
	}
	return func(r kmsg.Response) {
		if r == nil {
			return // Produce with acks 0
		}
		resp := r.(R)
		for _, d := range denied {
			deny(resp, d)
		}
	}
}
