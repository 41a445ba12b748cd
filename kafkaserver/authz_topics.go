package kafkaserver

import (
	"context"
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless/acl"
	"github.com/diskless-go/diskless/kafkaerr"
)

// The checks of the topic APIs that need more than authorizeTopics:
// Produce, Metadata, DeleteTopics (see authz_apis.go for the table).

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
			resp.Topics = append(resp.Topics, deniedProduceTopic(t, kafkaerr.TransactionalIDAuthorizationFailed))
		}
		return resp, nil
	}
	return nil, authorizeTopics(s, ctx, acl.OpWrite, &req.Topics, func(t kmsg.ProduceRequestTopic) string { return t.Topic },
		func(resp *kmsg.ProduceResponse, t kmsg.ProduceRequestTopic) {
			resp.Topics = append(resp.Topics, deniedProduceTopic(t, kafkaerr.TopicAuthorizationFailed))
		})
}

// deniedProduceTopic answers topic t of a Produce refused with code: each
// partition with code and no offsets.
func deniedProduceTopic(t kmsg.ProduceRequestTopic, code kafkaerr.Code) kmsg.ProduceResponseTopic {
	rt := kmsg.NewProduceResponseTopic()
	rt.Topic = t.Topic
	for _, p := range t.Partitions {
		rp := kmsg.NewProduceResponseTopicPartition()
		rp.Partition, rp.ErrorCode, rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = p.Partition, int16(code), -1, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
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
