package kafkaserver

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/acl"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

// The partition-level admin APIs: OffsetForLeaderEpoch, CreatePartitions,
// DescribeProducers and DescribeLogDirs. Every partition has leader epoch
// 0 and this broker as its only replica.

// leaderEpoch is the leader epoch of every partition.
const leaderEpoch = 0

// checkLeaderEpoch returns the code for a request's current leader epoch
// of a partition, as Kafka's leader checks it: -1 is "not known", an
// older epoch FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH.
func checkLeaderEpoch(current int32) int16 {
	switch {
	case current == -1 || current == leaderEpoch:
		return 0
	case current > leaderEpoch:
		return int16(kafkaerr.UnknownLeaderEpoch)
	}
	return int16(kafkaerr.FencedLeaderEpoch)
}

// offsetForLeaderEpoch answers OffsetForLeaderEpoch (clients validate
// their position with it after a leader change, KIP-320): the end offset
// of the epoch asked for. With one epoch, 0, from the log start: epoch 0
// ends at the high watermark, a later one is unknown (-1, -1), an earlier
// one ends where epoch 0 starts, at the log start offset, as Kafka's
// leader epoch cache answers.
func (s *Server) offsetForLeaderEpoch(ctx context.Context, req *kmsg.OffsetForLeaderEpochRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewOffsetForLeaderEpochResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			p.Partition, p.LeaderEpoch, p.EndOffset = rp.Partition, -1, -1
			if code := checkLeaderEpoch(rp.CurrentLeaderEpoch); code != 0 {
				p.ErrorCode = code
				t.Partitions = append(t.Partitions, p)
				continue
			}
			switch {
			case rp.LeaderEpoch == -1 || rp.LeaderEpoch > leaderEpoch:
				// unknown: -1, -1
				if _, err := s.b.ListOffsets(ctx, rt.Topic, rp.Partition, diskless.LatestTimestamp); err != nil {
					p.ErrorCode = codeOf(err)
				}
			case rp.LeaderEpoch == leaderEpoch:
				hw, err := s.b.ListOffsets(ctx, rt.Topic, rp.Partition, diskless.LatestTimestamp)
				if err != nil {
					p.ErrorCode = codeOf(err)
					break
				}
				p.LeaderEpoch, p.EndOffset = leaderEpoch, hw.Offset
			default:
				lo, err := s.b.ListOffsets(ctx, rt.Topic, rp.Partition, diskless.EarliestTimestamp)
				if err != nil {
					p.ErrorCode = codeOf(err)
					break
				}
				p.LeaderEpoch, p.EndOffset = rp.LeaderEpoch, lo.Offset
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// createPartitions answers CreatePartitions with Kafka's checks: an
// unknown topic is UNKNOWN_TOPIC_OR_PARTITION, a count not above the
// current one INVALID_PARTITIONS, a replica assignment that does not name
// this broker for each new partition INVALID_REPLICA_ASSIGNMENT, a topic
// named twice INVALID_REQUEST, the internal topics INVALID_REQUEST; the
// facade's limits (Broker.AddPartitions) give INVALID_PARTITIONS or
// POLICY_VIOLATION. A valid increase adds the partitions
// (Broker.AddPartitions), empty, with the topic's config; validate-only
// requests are checked (Broker.ValidateAddPartitions) and change nothing.
func (s *Server) createPartitions(ctx context.Context, req *kmsg.CreatePartitionsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	x, err := s.topicIndex(ctx)
	if err != nil {
		return nil, err
	}
	seen := nameCounts(req.Topics, func(t kmsg.CreatePartitionsRequestTopic) string { return t.Topic })
	for _, t := range req.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		fail := func(code int16, format string, args ...any) {
			msg := fmt.Sprintf(format, args...)
			rt.ErrorCode, rt.ErrorMessage = code, &msg
		}
		desc, ok := x.topic(ctx, t.Topic)
		switch {
		case seen[t.Topic] > 1:
			fail(int16(kafkaerr.InvalidRequest), "topic %s is named %d times in the request", t.Topic, seen[t.Topic])
		case !ok:
			fail(int16(kafkaerr.UnknownTopicOrPartition), "topic %s does not exist", t.Topic)
		case isInternal(t.Topic):
			fail(int16(kafkaerr.InvalidRequest), "cannot add partitions to the internal topic %s", t.Topic)
		case t.Count == desc.Config.Partitions:
			fail(int16(kafkaerr.InvalidPartitions), "topic already has %d partitions", desc.Config.Partitions)
		case t.Count < desc.Config.Partitions:
			fail(int16(kafkaerr.InvalidPartitions), "topic currently has %d partitions, which is higher than the requested %d", desc.Config.Partitions, t.Count)
		case t.Assignment != nil && len(t.Assignment) != int(t.Count-desc.Config.Partitions):
			fail(int16(kafkaerr.InvalidReplicaAssignment), "increasing the number of partitions by %d but %d assignments provided", t.Count-desc.Config.Partitions, len(t.Assignment))
		default:
			for _, a := range t.Assignment {
				for _, r := range a.Replicas {
					if !slices.ContainsFunc(s.nodes(), func(n node) bool { return n.id == r }) {
						fail(int16(kafkaerr.InvalidReplicaAssignment), "unknown broker %d in the replica assignment", r)
					}
				}
			}
			if rt.ErrorCode != 0 {
				break
			}
			var err error
			if req.ValidateOnly {
				err = s.b.ValidateAddPartitions(ctx, t.Topic, t.Count)
			} else {
				err = s.b.AddPartitions(ctx, t.Topic, t.Count)
			}
			if err != nil {
				rt.ErrorCode, rt.ErrorMessage = codeOf(err), messageOf(err)
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// producerExpiry is how long a producer with no batch is still described
// (Kafka's producer.id.expiration.ms).
const producerExpiry = 24 * time.Hour

// scanLimit bounds the bytes DescribeProducers and DescribeLogDirs read
// of one partition: the facade does not expose its producer state or the
// partition sizes, so they are read from the log, from its start.
const scanLimit = 64 << 20

// partitionScan is what scanning a partition's log found.
type partitionScan struct {
	bytes     int64 // the bytes of its batches (up to scanLimit)
	truncated bool  // scanLimit was reached
	producers map[int64]*kmsg.DescribeProducersResponseTopicPartitionActiveProducer
}

// scan reads a partition from its log start offset to its high
// watermark, up to scanLimit bytes.
func (s *Server) scan(ctx context.Context, topic string, partition int32) (partitionScan, error) {
	out := partitionScan{producers: map[int64]*kmsg.DescribeProducersResponseTopicPartitionActiveProducer{}}
	lo, err := s.b.ListOffsets(ctx, topic, partition, diskless.EarliestTimestamp)
	if err != nil {
		return out, err
	}
	hi, err := s.b.ListOffsets(ctx, topic, partition, diskless.LatestTimestamp)
	if err != nil {
		return out, err
	}
	for next := lo.Offset; next < hi.Offset; {
		if out.bytes >= scanLimit {
			out.truncated = true
			break
		}
		f, err := s.b.Fetch(ctx, diskless.FetchRequest{Partitions: []diskless.FetchPartition{{Topic: topic, Partition: partition, Offset: next, MaxBytes: 4 << 20}}})
		if err != nil {
			return out, err
		}
		p := f.Partitions[0]
		if p.Err != nil {
			return out, p.Err
		}
		before := next
		it := kbatch.NewBatchIter(p.Records)
		for it.Next() {
			b := it.Batch()
			if b.NextOffset() <= next {
				continue
			}
			out.bytes += int64(b.Size())
			if ap := out.producers[b.ProducerID()]; ap != nil && b.Control() {
				ap.CurrentTxnStartOffset = -1 // its transaction ended
			}
			if pid := b.ProducerID(); pid >= 0 && !b.Control() {
				ap := out.producers[pid]
				if ap == nil {
					v := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
					ap = &v
					ap.ProducerID, ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = pid, -1, -1
					out.producers[pid] = ap
				}
				ap.ProducerEpoch = int32(b.ProducerEpoch())
				ap.LastSequence = b.LastSequence()
				ap.LastTimestamp = b.MaxTimestamp()
				if b.Transactional() && ap.CurrentTxnStartOffset < 0 {
					ap.CurrentTxnStartOffset = b.BaseOffset()
				}
			}
			next = b.NextOffset()
		}
		if err := it.Err(); err != nil {
			return out, err
		}
		if next == before {
			break // nothing more readable
		}
	}
	return out, nil
}

// describeProducers answers DescribeProducers: each partition's
// idempotent producers with a batch in the last producerExpiry, their
// epoch, last sequence and last timestamp, and the first offset of the
// transaction each has open (-1: none), read from the log; the
// coordinator epoch is -1 (the coordinator has none).
func (s *Server) describeProducers(ctx context.Context, req *kmsg.DescribeProducersRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	now := s.clock.Now().UnixMilli()
	for _, rt := range req.Topics {
		t := kmsg.NewDescribeProducersResponseTopic()
		t.Topic = rt.Topic
		for _, part := range rt.Partitions {
			p := kmsg.NewDescribeProducersResponseTopicPartition()
			p.Partition = part
			sc, err := s.scan(ctx, rt.Topic, part)
			if err != nil {
				p.ErrorCode, p.ErrorMessage = codeOf(err), messageOf(err)
			}
			for _, ap := range sc.producers {
				if now-ap.LastTimestamp <= producerExpiry.Milliseconds() {
					p.ActiveProducers = append(p.ActiveProducers, *ap)
				}
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// logDir is the one log directory DescribeLogDirs reports: the bucket.
func (s *Server) logDir() string { return s.cfg.LogDir }

// describeLogDirs answers DescribeLogDirs: one directory, the bucket
// (its total and usable bytes unknown: -1), holding every partition asked
// for (all when the topic list is null) with its size in bytes, no lag,
// never a future replica.
func (s *Server) describeLogDirs(ctx context.Context, req *kmsg.DescribeLogDirsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	x, err := s.topicIndex(ctx)
	if err != nil {
		return nil, err
	}
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir, dir.TotalBytes, dir.UsableBytes = s.logDir(), -1, -1
	want := req.Topics
	if want == nil {
		for _, name := range x.names {
			t := kmsg.NewDescribeLogDirsRequestTopic()
			t.Topic = name
			for p := range x.byName[name].Config.Partitions {
				t.Partitions = append(t.Partitions, p)
			}
			want = append(want, t)
		}
	}
	for _, rt := range want {
		desc, ok := x.topic(ctx, rt.Topic)
		if !ok {
			continue // Kafka leaves out what the broker does not host
		}
		t := kmsg.NewDescribeLogDirsResponseDirTopic()
		t.Topic = rt.Topic
		for _, part := range rt.Partitions {
			if part < 0 || part >= desc.Config.Partitions {
				continue
			}
			sc, err := s.scan(ctx, rt.Topic, part)
			if err != nil {
				return nil, err
			}
			p := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			p.Partition, p.Size = part, sc.bytes
			t.Partitions = append(t.Partitions, p)
		}
		if len(t.Partitions) > 0 {
			dir.Topics = append(dir.Topics, t)
		}
	}
	resp.Dirs = append(resp.Dirs, dir)
	return resp, nil
}

// describeCluster answers DescribeCluster (KIP-700): this broker, the
// controller, the cluster ID. Version 1 asks for an endpoint type: 1
// (brokers) is served, 2 (controllers) is UNSUPPORTED_ENDPOINT_TYPE, as a
// broker answers it. Version 2 asks whether fenced brokers are included;
// this one never is.
func (s *Server) describeCluster(ctx context.Context, req *kmsg.DescribeClusterRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	if req.Version >= 1 && req.EndpointType != 1 {
		msg := "the broker answers endpoint type 1 (brokers) only"
		resp.ErrorCode, resp.ErrorMessage = int16(kafkaerr.UnsupportedEndpointType), &msg
		return resp
	}
	resp.EndpointType = 1
	nodes := s.nodes()
	resp.ClusterID, resp.ControllerID = clusterID, s.controller(nodes)
	for _, n := range nodes {
		b := kmsg.NewDescribeClusterResponseBroker()
		b.NodeID, b.Host, b.Port, b.Rack = n.id, n.host, n.port, n.rackOrNil()
		resp.Brokers = append(resp.Brokers, b)
	}
	resp.ClusterAuthorizedOperations = -2147483648
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = s.authorizedOps(ctx, acl.ResourceCluster, ClusterName, clusterOperations)
	}
	return resp
}

// clusterOperations is the authorized operations bit field of the cluster
// with no ACLs: CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS,
// IDEMPOTENT_WRITE, ALTER, DESCRIBE (bits 4, 7, 10, 11, 12, 5, 8).
const clusterOperations = 1<<4 | 1<<5 | 1<<7 | 1<<8 | 1<<10 | 1<<11 | 1<<12
