package kafkaserver

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/acl"
	"github.com/diskless-go/diskless/kafkaerr"
)

// fetch answers Fetch. Version 7 on, with incremental fetch sessions
// (KIP-227, sessions.go): session ID 0 with epoch 0 is a full fetch that
// asks for a session, with epoch -1 a full fetch without one; a known
// session at its epoch is an incremental fetch of the session's
// partitions, answered with those that changed; an unknown session is
// FETCH_SESSION_ID_NOT_FOUND, a wrong epoch INVALID_FETCH_SESSION_EPOCH.
// The wait for MinBytes up to MaxWait is the facade's long poll, which
// commits wake. At isolation level READ_COMMITTED (1) each partition
// is read up to its last stable offset, with the aborted transactions of
// what is returned. A partition without records carries an empty record
// set, never a null one, as Kafka's does (librdkafka reads a null one as
// a MessageSetSize of -1 and stops). A client over its quotas is
// answered without records (quotas.go).
func (s *Server) fetch(ctx context.Context, req *kmsg.FetchRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	plan := s.sessions.plan(req, s.clock.Now())
	if plan.code != 0 {
		resp.ErrorCode = plan.code
		return resp, nil
	}
	all := plan.parts // a new session holds every partition; a denied one is checked again each fetch
	denied := s.fetchDenied(ctx, &plan)
	if to := s.readReplicas(req, plan); to != nil {
		return s.redirectFetch(ctx, resp, plan, to, denied)
	}
	maxBytes := req.MaxBytes
	if req.Version < 3 || maxBytes <= 0 {
		maxBytes = 1<<31 - 1
	}
	maxBytes = s.fetchMaxBytes(ctx, maxBytes)
	read := s.clock.Now()
	out, err := s.b.Fetch(ctx, diskless.FetchRequest{
		Partitions: plan.reads, MaxBytes: maxBytes,
		MinBytes: req.MinBytes, MaxWait: time.Duration(max(req.MaxWaitMillis, 0)) * time.Millisecond,
		ReadCommitted: req.IsolationLevel == 1,
	})
	if err != nil {
		return nil, err
	}
	usageOf(ctx).waitedSince(s.clock, read) // the read and the long poll: not request time
	var bytes int64
	for _, r := range out.Partitions {
		bytes += int64(len(r.Records))
	}
	if d := s.fetchThrottle(ctx, bytes); d > 0 {
		// Over a quota: answered without records, and the session as it
		// was, so that the client fetches them again after the throttle
		// (Kafka's throttled fetch response). A new session is not made.
		if plan.session != nil {
			resp.SessionID = plan.sessionID
		}
		return resp, nil
	}
	var served map[*sessionPartition]bool
	for i, r := range out.Partitions {
		sp := plan.parts[i]
		if !s.sessions.changed(sp, int16(r.ErrorCode), r.HighWatermark, r.LastStableOffset, r.LogStartOffset, len(r.Records)) && plan.session != nil {
			continue // an incremental answer holds only what changed
		}
		if plan.session != nil && len(r.Records) > 0 {
			if served == nil {
				served = map[*sessionPartition]bool{}
			}
			served[sp] = true
		}
		if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != r.Topic {
			t := kmsg.NewFetchResponseTopic()
			t.Topic = r.Topic
			resp.Topics = append(resp.Topics, t)
		}
		t := &resp.Topics[len(resp.Topics)-1]
		p := kmsg.NewFetchResponseTopicPartition()
		p.Partition, p.ErrorCode = r.Partition, int16(r.ErrorCode)
		p.HighWatermark, p.LastStableOffset, p.LogStartOffset = r.HighWatermark, r.LastStableOffset, r.LogStartOffset
		for _, a := range r.AbortedTransactions {
			at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
			at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
			p.AbortedTransactions = append(p.AbortedTransactions, at)
		}
		p.RecordBatches = r.Records
		if p.RecordBatches == nil {
			p.RecordBatches = []byte{} // empty, not null
		}
		t.Partitions = append(t.Partitions, p)
	}
	appendDenied(resp, denied)
	switch {
	case plan.session != nil:
		resp.SessionID = plan.sessionID
		s.sessions.rotate(plan.session, served)
	case plan.newSession:
		resp.SessionID = s.sessions.create(all, s.clock.Now())
	}
	return resp, nil
}

// fetchDenied takes the partitions of topics the request may not READ
// out of plan, and returns them: each is answered
// TOPIC_AUTHORIZATION_FAILED, in every fetch of a session too, so that a
// change of the ACLs is seen by the next fetch.
func (s *Server) fetchDenied(ctx context.Context, plan *fetchPlan) []*sessionPartition {
	if s.authz == nil || len(plan.parts) == 0 {
		return nil
	}
	ok := s.topicsAllowed(ctx, acl.OpRead, topicNames(plan.parts, func(sp *sessionPartition) string { return sp.tp.topic }))
	var denied []*sessionPartition
	parts, reads := plan.parts[:0:0], plan.reads[:0:0]
	for i, sp := range plan.parts {
		if ok[sp.tp.topic] {
			parts, reads = append(parts, sp), append(reads, plan.reads[i])
		} else {
			denied = append(denied, sp)
		}
	}
	plan.parts, plan.reads = parts, reads
	return denied
}

// appendDenied answers each denied partition TOPIC_AUTHORIZATION_FAILED.
func appendDenied(resp *kmsg.FetchResponse, denied []*sessionPartition) {
	for _, sp := range denied {
		if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != sp.tp.topic {
			t := kmsg.NewFetchResponseTopic()
			t.Topic = sp.tp.topic
			resp.Topics = append(resp.Topics, t)
		}
		t := &resp.Topics[len(resp.Topics)-1]
		p := kmsg.NewFetchResponseTopicPartition()
		p.Partition, p.ErrorCode, p.RecordBatches = sp.tp.partition, int16(kafkaerr.TopicAuthorizationFailed), []byte{}
		p.HighWatermark, p.LastStableOffset, p.LogStartOffset = -1, -1, -1
		t.Partitions = append(t.Partitions, p)
	}
}

// readReplicas returns, for a full fetch from a client in another rack
// than this node's when some live node is in the client's (Fetch's
// rack_id, version 11 on), the node each partition is to be read from
// (KIP-392): the one Metadata names to a client of that rack. It returns
// nil when this node is to answer: the client told no rack, or is in
// this node's, or no node is in its, or the fetch is an incremental one
// (the client chose this node already), or the server is not clustered.
func (s *Server) readReplicas(req *kmsg.FetchRequest, plan fetchPlan) []node {
	if req.Version < 11 || req.Rack == "" || !s.cfg.Clustered || plan.session != nil {
		return nil
	}
	nodes := s.nodes()
	self, inRack := false, false
	for _, n := range nodes {
		if n.rack == req.Rack {
			inRack = true
			self = self || n.id == s.cfg.NodeID
		}
	}
	if !inRack || self {
		return nil
	}
	to := make([]node, len(plan.reads))
	for i, r := range plan.reads {
		to[i] = partitionLeader(nodes, r.Topic, r.Partition, req.Rack)
	}
	return to
}

// redirectFetch answers a full fetch with each partition's preferred
// read replica (to) and no records, as Kafka's leader does when it
// chooses a follower for a client (KIP-392), with the high watermark and
// log start offset the client would have read; a partition that cannot
// be read carries its error instead. No fetch session is created: the
// client fetches from the replicas next.
func (s *Server) redirectFetch(ctx context.Context, resp *kmsg.FetchResponse, plan fetchPlan, to []node, denied []*sessionPartition) (kmsg.Response, error) {
	defer appendDenied(resp, denied)
	for i, r := range plan.reads {
		if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != r.Topic {
			t := kmsg.NewFetchResponseTopic()
			t.Topic = r.Topic
			resp.Topics = append(resp.Topics, t)
		}
		t := &resp.Topics[len(resp.Topics)-1]
		p := kmsg.NewFetchResponseTopicPartition()
		p.Partition, p.RecordBatches = r.Partition, []byte{}
		hw, err := s.b.ListOffsets(ctx, r.Topic, r.Partition, diskless.LatestTimestamp)
		var start diskless.ListOffsetsResult
		if err == nil {
			start, err = s.b.ListOffsets(ctx, r.Topic, r.Partition, diskless.EarliestTimestamp)
		}
		if err != nil {
			p.ErrorCode = codeOf(err)
		} else {
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = hw.Offset, hw.LastStable, start.Offset
			p.PreferredReadReplica = to[i].id
		}
		t.Partitions = append(t.Partitions, p)
	}
	return resp, nil
}

// The special timestamps of ListOffsets beyond the facade's: -4 asks for
// the local log start offset (KIP-405), which with no tiered storage is
// the log start offset; -5 for the greatest offset in remote storage
// (KIP-1005), which with none is -1.
const (
	earliestLocalTimestamp = -4
	latestTieredTimestamp  = -5
)

// listOffsetsServes reports whether ListOffsets of version answers
// timestamp: a special one from the version that brought it, as Kafka
// 4's ReplicaManager (timestampMinSupportedVersion) does; another
// negative one never (UNSUPPORTED_VERSION).
func listOffsetsServes(timestamp int64, version int16) bool {
	switch timestamp {
	case diskless.LatestTimestamp, diskless.EarliestTimestamp:
		return true
	case diskless.MaxTimestamp:
		return version >= 7
	case earliestLocalTimestamp:
		return version >= 8
	case latestTieredTimestamp:
		return version >= 9
	}
	return timestamp >= 0
}

// listOffsets answers ListOffsets as Kafka 4 does (ReplicaManager.fetchOffset,
// Partition.fetchOffsetForTimestamp, UnifiedLog.fetchOffsetByTimestamp):
// -2 (and -4) is the log start offset, -1 the high watermark (the last
// stable offset at READ_COMMITTED), -3 the record with the greatest
// timestamp, -5 offset -1 (nothing is tiered), and a timestamp the first
// record at or after it (offset -1 when there is none). A record found
// by timestamp (-3 included) at or past the last stable offset at
// READ_COMMITTED is answered as none: offset and timestamp -1. A
// partition named twice is INVALID_REQUEST, answered once.
func (s *Server) listOffsets(ctx context.Context, req *kmsg.ListOffsetsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	named := map[topicPartition]int{}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			named[topicPartition{rt.Topic, rp.Partition}]++
		}
	}
	for _, rt := range req.Topics {
		t := kmsg.NewListOffsetsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			tp := topicPartition{rt.Topic, rp.Partition}
			p := kmsg.NewListOffsetsResponseTopicPartition()
			p.Partition, p.Offset, p.Timestamp, p.LeaderEpoch = rp.Partition, -1, -1, -1
			switch n := named[tp]; {
			case n > 1:
				named[tp] = 0 // answered: the next ones are left out
				p.ErrorCode = int16(kafkaerr.InvalidRequest)
			case n == 0:
				continue
			case !listOffsetsServes(rp.Timestamp, req.Version):
				p.ErrorCode = int16(kafkaerr.UnsupportedVersion)
			default:
				p.ErrorCode = s.listOffset(ctx, req.IsolationLevel, tp, rp.Timestamp, &p)
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

// listOffset fills p with what ListOffsets answers of tp at timestamp
// (one the request's version serves), and returns its error code.
func (s *Server) listOffset(ctx context.Context, isolation int8, tp topicPartition, timestamp int64, p *kmsg.ListOffsetsResponseTopicPartition) int16 {
	ts := timestamp
	switch timestamp {
	case earliestLocalTimestamp:
		ts = diskless.EarliestTimestamp
	case latestTieredTimestamp:
		ts = diskless.LatestTimestamp // only that the partition exists
	}
	r, err := s.b.ListOffsets(ctx, tp.topic, tp.partition, ts)
	if err != nil {
		return codeOf(err)
	}
	switch {
	case timestamp == latestTieredTimestamp:
		return 0
	case ts == diskless.LatestTimestamp && isolation == 1:
		r.Offset = r.LastStable // read_committed: the last stable offset
	case ts != diskless.LatestTimestamp && ts != diskless.EarliestTimestamp && isolation == 1 && r.Offset >= 0:
		latest, err := s.b.ListOffsets(ctx, tp.topic, tp.partition, diskless.LatestTimestamp)
		if err != nil {
			return codeOf(err)
		}
		if r.Offset >= latest.LastStable {
			return 0 // not yet readable at read_committed: none
		}
	}
	p.Offset, p.Timestamp = r.Offset, r.Timestamp
	if r.Offset >= 0 {
		p.LeaderEpoch = 0
	}
	return 0
}

// deleteRecords answers DeleteRecords: each partition's log start offset
// moves up to the offset asked (-1: the high watermark).
func (s *Server) deleteRecords(ctx context.Context, req *kmsg.DeleteRecordsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewDeleteRecordsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewDeleteRecordsResponseTopicPartition()
			p.Partition, p.LowWatermark = rp.Partition, -1
			if isInternal(rt.Topic) {
				p.ErrorCode = int16(kafkaerr.InvalidTopicException)
			} else if low, err := s.b.DeleteRecords(ctx, rt.Topic, rp.Partition, rp.Offset); err != nil {
				p.ErrorCode = codeOf(err)
			} else {
				p.LowWatermark = low
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}
