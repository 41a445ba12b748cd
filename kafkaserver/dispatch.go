package kafkaserver

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handle serves one request, checked by the authorizer if there is one
// (authorizeRequest); ctx carries the request's identity and usage. A nil
// response sends nothing (Produce with acks 0); an error closes the
// connection.
func (s *Server) handle(ctx context.Context, r *request, c *conn) (kmsg.Response, error) {
	return s.authorized(ctx, r.kreq, func(ctx context.Context) (kmsg.Response, error) {
		return s.dispatch(ctx, r, c)
	})
}

// authorized serves req with serve, after the authorizer's checks of it
// (which may answer it whole, or take resources out of it and put their
// errors in serve's answer).
func (s *Server) authorized(ctx context.Context, req kmsg.Request, serve func(context.Context) (kmsg.Response, error)) (kmsg.Response, error) {
	if s.authz == nil {
		return serve(ctx)
	}
	deny, after := s.authorizeRequest(ctx, req)
	if deny != nil {
		return deny, nil
	}
	resp, err := serve(ctx)
	if err == nil && after != nil {
		after(resp)
	}
	return resp, err
}

// coordinated serves req with serve when this broker coordinates group,
// else answers it whole with the error code coordinates gives.
func (s *Server) coordinated(ctx context.Context, req kmsg.Request, group string, serve func() kmsg.Response) kmsg.Response {
	if code := s.coordinates(ctx, group); code != 0 {
		return errorResponse(req, code)
	}
	return serve()
}

// errorResponse is req's response with only its top-level ErrorCode set,
// to code: the answer to a request refused whole. It knows the responses
// refused so; any other is a programming error (a test reaches every
// use).
func errorResponse(req kmsg.Request, code int16) kmsg.Response {
	resp := req.ResponseKind()
	switch r := resp.(type) {
	case *kmsg.SyncGroupResponse:
		r.ErrorCode = code
	case *kmsg.HeartbeatResponse:
		r.ErrorCode = code
	case *kmsg.LeaveGroupResponse:
		r.ErrorCode = code
	case *kmsg.ConsumerGroupHeartbeatResponse:
		r.ErrorCode = code
	case *kmsg.OffsetDeleteResponse:
		r.ErrorCode = code
	case *kmsg.OffsetFetchResponse:
		r.ErrorCode = code
	case *kmsg.AddOffsetsToTxnResponse:
		r.ErrorCode = code
	case *kmsg.EndTxnResponse:
		r.ErrorCode = code
	default:
		panic(fmt.Sprintf("kafkaserver: errorResponse of %T", resp))
	}
	return resp
}

// dispatch serves one request with its handler.
func (s *Server) dispatch(ctx context.Context, r *request, c *conn) (kmsg.Response, error) {
	remote := c.remote
	switch req := r.kreq.(type) {
	case *kmsg.ApiVersionsRequest:
		resp := apiVersions(req)
		s.addFeatures(resp)
		return resp, nil
	case *kmsg.UpdateFeaturesRequest:
		return s.updateFeatures(ctx, req), nil
	case *kmsg.SASLHandshakeRequest:
		return c.saslHandshake(req)
	case *kmsg.SASLAuthenticateRequest:
		return c.saslAuthenticate(r, req)
	case *kmsg.MetadataRequest:
		return s.metadata(ctx, req, c.rack(r.clientID))
	case *kmsg.CreateTopicsRequest:
		return s.createTopics(ctx, req)
	case *kmsg.DeleteTopicsRequest:
		return s.deleteTopics(ctx, req)
	case *kmsg.DescribeConfigsRequest:
		return s.describeConfigs(ctx, req)
	case *kmsg.ListOffsetsRequest:
		return s.listOffsets(ctx, req)
	case *kmsg.DeleteRecordsRequest:
		return s.deleteRecords(ctx, req)
	case *kmsg.InitProducerIDRequest:
		return s.initProducerID(ctx, req)
	case *kmsg.FindCoordinatorRequest:
		return s.findCoordinator(req), nil
	case *kmsg.JoinGroupRequest:
		usageOf(ctx).exempt = true // it waits for the group's members: not request time
		if code := s.coordinates(ctx, req.Group); code != 0 {
			resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
			resp.ErrorCode, resp.Generation, resp.MemberID = code, -1, req.MemberID
			return resp, nil
		}
		return s.groups.join(ctx, req, r.clientID, remote), nil
	case *kmsg.SyncGroupRequest:
		usageOf(ctx).exempt = true // it waits for the group's leader: not request time
		return s.coordinated(ctx, req, req.Group, func() kmsg.Response { return s.groups.sync(ctx, req) }), nil
	case *kmsg.HeartbeatRequest:
		return s.coordinated(ctx, req, req.Group, func() kmsg.Response { return s.groups.heartbeat(req) }), nil
	case *kmsg.LeaveGroupRequest:
		return s.coordinated(ctx, req, req.Group, func() kmsg.Response { return s.groups.leave(req) }), nil
	case *kmsg.ConsumerGroupHeartbeatRequest:
		return s.consumerGroupHeartbeat(ctx, req, r.clientID, remote)
	case *kmsg.ConsumerGroupDescribeRequest:
		return s.consumerGroupDescribe(ctx, req), nil
	case *kmsg.OffsetCommitRequest:
		return s.offsetCommit(req)
	case *kmsg.OffsetForLeaderEpochRequest:
		return s.offsetForLeaderEpoch(ctx, req), nil
	case *kmsg.CreatePartitionsRequest:
		return s.createPartitions(ctx, req)
	case *kmsg.DescribeProducersRequest:
		return s.describeProducers(ctx, req), nil
	case *kmsg.DescribeLogDirsRequest:
		return s.describeLogDirs(ctx, req)
	case *kmsg.DescribeClusterRequest:
		return s.describeCluster(ctx, req), nil
	case *kmsg.DescribeGroupsRequest:
		return s.describeGroups(ctx, req), nil
	case *kmsg.ListGroupsRequest:
		return s.listGroups(ctx, req), nil
	case *kmsg.DeleteGroupsRequest:
		return s.deleteGroups(ctx, req), nil
	case *kmsg.OffsetDeleteRequest:
		return s.offsetDelete(ctx, req)
	case *kmsg.AlterConfigsRequest:
		return s.alterConfigs(ctx, req)
	case *kmsg.IncrementalAlterConfigsRequest:
		return s.incrementalAlterConfigs(ctx, req)
	case *kmsg.OffsetFetchRequest:
		return s.offsetFetch(ctx, req), nil
	case *kmsg.AddPartitionsToTxnRequest:
		return s.addPartitionsToTxn(ctx, req), nil
	case *kmsg.AddOffsetsToTxnRequest:
		return s.addOffsetsToTxn(ctx, req), nil
	case *kmsg.TxnOffsetCommitRequest:
		return s.txnOffsetCommit(ctx, req), nil
	case *kmsg.EndTxnRequest:
		return s.endTxn(ctx, req), nil
	case *kmsg.DescribeTransactionsRequest:
		return s.describeTransactions(ctx, req), nil
	case *kmsg.ListTransactionsRequest:
		return s.listTransactions(ctx, req), nil
	case *kmsg.CreateACLsRequest:
		return s.createACLs(ctx, req), nil
	case *kmsg.DescribeACLsRequest:
		return s.describeACLs(ctx, req), nil
	case *kmsg.DeleteACLsRequest:
		return s.deleteACLs(ctx, req), nil
	case *kmsg.DescribeUserSCRAMCredentialsRequest:
		return s.describeUserSCRAMCredentials(ctx, req), nil
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		return s.alterUserSCRAMCredentials(ctx, req), nil
	case *kmsg.DescribeClientQuotasRequest:
		return s.describeClientQuotas(ctx, req), nil
	case *kmsg.AlterClientQuotasRequest:
		return s.alterClientQuotas(ctx, req), nil
	}
	return nil, fmt.Errorf("no handler for %s", kmsg.NameForKey(r.kreq.Key()))
}
