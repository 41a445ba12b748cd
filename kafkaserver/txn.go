package kafkaserver

import (
	"context"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/kafkaerr"
)

// Transactions: the transaction coordinator's APIs, served by any node
// (the facade takes each call to the shard of the transactional ID, and
// each marker to the shard of its partition), at the versions of the
// client-side protocol: transactions v1 (AddPartitionsToTxn 0-3, EndTxn
// 0-4, TxnOffsetCommit 0-4) and, once the cluster's transaction.version
// is 2, transactions v2 (EndTxn 5 bumps the epoch; a transactional
// Produce 12 and TxnOffsetCommit 5 add their partition or group
// themselves: producetxn.go). FindCoordinator for a transactional ID
// names a live node as for a group. The partition side of KIP-890 part 1
// is the facade's: a transactional batch to a partition not added is
// INVALID_TXN_STATE.

// txnCode is the code of a transaction call's error: one the client
// retries when the shard did not answer.
func txnCode(err error) int16 {
	code := kafkaerr.CodeOf(err)
	if code == kafkaerr.UnknownServerError {
		code = kafkaerr.CoordinatorNotAvailable
	}
	return int16(code)
}

// initTxnProducerID answers InitProducerId with a transactional ID.
func (s *Server) initTxnProducerID(ctx context.Context, req *kmsg.InitProducerIDRequest, resp *kmsg.InitProducerIDResponse) kmsg.Response {
	timeout := time.Duration(req.TransactionTimeoutMillis) * time.Millisecond
	pid, epoch := int64(-1), int16(-1)
	if req.Version >= 3 {
		pid, epoch = req.ProducerID, req.ProducerEpoch
	}
	id, e, err := s.b.InitTxnProducer(ctx, *req.TransactionalID, timeout, pid, epoch)
	if err != nil {
		resp.ErrorCode = txnCode(err)
		return resp
	}
	resp.ProducerID, resp.ProducerEpoch = id, e
	return resp
}

// addPartitionsToTxn answers AddPartitionsToTxn (versions 0 to 3).
func (s *Server) addPartitionsToTxn(ctx context.Context, req *kmsg.AddPartitionsToTxnRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	var parts []diskless.TxnPartition
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			parts = append(parts, diskless.TxnPartition{Topic: t.Topic, Partition: p})
		}
	}
	errs, err := s.b.AddTxnPartitions(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, parts)
	i := 0
	for _, t := range req.Topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition = p
			switch {
			case err != nil:
				rp.ErrorCode = txnCode(err)
			case isInternal(t.Topic):
				rp.ErrorCode = int16(kafkaerr.InvalidTopicException)
			default:
				rp.ErrorCode = codeOf(errs[i])
			}
			i++
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// addOffsetsToTxn answers AddOffsetsToTxn.
func (s *Server) addOffsetsToTxn(ctx context.Context, req *kmsg.AddOffsetsToTxnRequest) kmsg.Response {
	return errorResponse(req, txnCode(s.b.AddTxnOffsets(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group)))
}

// txnOffsetCommit answers TxnOffsetCommit: the offsets are the group's
// once the transaction commits. The group's coordinator answers it and
// checks the member and generation it names (KIP-447, groups.checkTxnCommit).
func (s *Server) txnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	var offsets []diskless.GroupOffset
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			o := diskless.GroupOffset{Topic: t.Topic, Partition: p.Partition, Offset: p.Offset, LeaderEpoch: p.LeaderEpoch}
			if req.Version < 2 {
				o.LeaderEpoch = -1
			}
			if p.Metadata != nil {
				o.Metadata = *p.Metadata
			}
			offsets = append(offsets, o)
		}
	}
	// The group's coordinator answers it (NOT_COORDINATOR elsewhere), and
	// checks the member and generation the request names.
	code, _ := s.coordinatesUnder(ctx, req.Group)
	if code == 0 {
		code = s.groups.checkTxnCommit(req.Group, req.Generation, req.MemberID, req.InstanceID)
	}
	if code == 0 {
		code = s.addCommittedToTxn(ctx, req) // version 5: the group joins the transaction
	}
	var err error
	if code == 0 {
		err = s.b.TxnCommitOffsets(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group, offsets)
	}
	for _, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			switch {
			case code != 0:
				rp.ErrorCode = code
			case err != nil:
				rp.ErrorCode = txnCode(err)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// endTxn answers EndTxn: it returns once the markers are written. From
// version 5 it is of transactions v2 (Kafka's KafkaApis.handleEndTxnRequest
// decides by the version alone): the end bumps the epoch and the answer
// names the producer ID and epoch to go on with, -1 and -1 on error.
func (s *Server) endTxn(ctx context.Context, req *kmsg.EndTxnRequest) kmsg.Response {
	if req.Version < 5 {
		return errorResponse(req, txnCode(s.b.EndTxn(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit)))
	}
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	id, epoch, err := s.b.EndTxnV2(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit)
	if err != nil {
		resp.ErrorCode = txnCode(err)
		return resp
	}
	resp.ProducerID, resp.ProducerEpoch = id, epoch
	return resp
}

// topicNames returns the topic names by ID.
func (s *Server) topicNames(ctx context.Context) map[uuid.UUID]string {
	out := map[uuid.UUID]string{}
	ts, err := s.b.DescribeTopics(ctx)
	if err != nil {
		return out
	}
	for _, t := range ts {
		out[t.ID] = t.Name
	}
	return out
}

// describeTransactions answers DescribeTransactions.
func (s *Server) describeTransactions(ctx context.Context, req *kmsg.DescribeTransactionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	ts, err := s.b.Transactions(ctx, req.TransactionalIDs)
	names := s.topicNames(ctx)
	for _, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.ProducerEpoch, st.StartTimestamp = id, -1, -1, -1
		i := slices.IndexFunc(ts, func(t diskless.Transaction) bool { return t.ID == id })
		switch {
		case err != nil:
			st.ErrorCode = txnCode(err)
		case i < 0:
			st.ErrorCode = int16(kafkaerr.TransactionalIDNotFound)
		default:
			t := ts[i]
			st.State, st.TimeoutMillis, st.ProducerID, st.ProducerEpoch = t.State.String(), t.TimeoutMs, t.ProducerID, t.Epoch
			if t.StartTime > 0 && t.State != diskless.TxnEmpty {
				st.StartTimestamp = t.StartTime
			}
			for _, tp := range t.Partitions {
				name := names[tp.TopicID]
				if n := len(st.Topics); n == 0 || st.Topics[n-1].Topic != name {
					rt := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
					rt.Topic = name
					st.Topics = append(st.Topics, rt)
				}
				st.Topics[len(st.Topics)-1].Partitions = append(st.Topics[len(st.Topics)-1].Partitions, tp.Partition)
			}
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp
}

// listTransactions answers ListTransactions, with its state, producer ID
// and (version 1) duration filters.
func (s *Server) listTransactions(ctx context.Context, req *kmsg.ListTransactionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	known := map[string]bool{}
	for st := diskless.TxnEmpty; st <= diskless.TxnCompleteAbort; st++ {
		known[st.String()] = true
	}
	for _, f := range req.StateFilters {
		if !known[f] {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, f)
		}
	}
	ts, err := s.b.Transactions(ctx, nil)
	if err != nil {
		resp.ErrorCode = txnCode(err)
		return resp
	}
	now := s.clock.Now().UnixMilli()
	for _, t := range ts {
		if len(req.StateFilters) > 0 && !slices.Contains(req.StateFilters, t.State.String()) {
			continue
		}
		if len(req.ProducerIDFilters) > 0 && !slices.Contains(req.ProducerIDFilters, t.ProducerID) {
			continue
		}
		if req.DurationFilterMillis > 0 && (t.State != diskless.TxnOngoing || now-t.StartTime < req.DurationFilterMillis) {
			continue
		}
		st := kmsg.NewListTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.TransactionState = t.ID, t.ProducerID, t.State.String()
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp
}
