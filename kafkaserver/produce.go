package kafkaserver

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/kafkaerr"
)

// produce answers Produce: the whole request goes to the facade, which
// validates each partition's batch as a Kafka leader does, packs the good
// ones into the next WAL object and, unless acks is 0, answers once the
// object is committed. With acks 0 nothing is answered. The request's
// timeout bounds the wait; past it every partition still waiting is
// REQUEST_TIMED_OUT (its batch may still be committed: an idempotent
// producer's retry is then answered with the offset it got). Writing to
// the internal offsets topic is INVALID_TOPIC_EXCEPTION, as in Kafka.
// buffered is closed once the request's batches are in the facade's
// buffer (or none will be): the connection's next produce request waits
// for it, so that one producer's batches are committed in the order sent.
// The wait for the commit, from then on, is not counted in the request's
// time (quotas.go). ctx carries who asks, and nothing else: the request
// is served even if the server closes.
func (s *Server) produce(ctx context.Context, req *kmsg.ProduceRequest, buffered chan struct{}) (kmsg.Response, error) {
	var once sync.Once
	var bufferedAt atomic.Int64 // unix nanoseconds of the server's clock
	signal := func() {
		once.Do(func() {
			bufferedAt.Store(s.clock.Now().UnixNano())
			close(buffered)
		})
	}
	defer signal()
	use := usageOf(ctx)
	defer func() {
		if at := bufferedAt.Load(); at != 0 {
			use.waitedSince(s.clock, time.Unix(0, at))
		}
	}()
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	var parts []diskless.ProducePartition
	var slots []produceSlot // where each answer goes in resp
	badAcks := req.Acks != 0 && req.Acks != 1 && req.Acks != -1
	var added map[produceSlot]int16 // Produce 12's adds to the transaction (producetxn.go)
	if !badAcks {
		added = s.addProducedToTxn(ctx, req)
	}
	for i, rt := range req.Topics {
		t := kmsg.NewProduceResponseTopic()
		t.Topic = rt.Topic
		for j, rp := range rt.Partitions {
			p := kmsg.NewProduceResponseTopicPartition()
			p.Partition, p.BaseOffset, p.LogAppendTime, p.LogStartOffset = rp.Partition, -1, -1, -1
			switch {
			case badAcks:
				p.ErrorCode = int16(kafkaerr.InvalidRequiredAcks)
			case isInternal(rt.Topic):
				p.ErrorCode = int16(kafkaerr.InvalidTopicException)
			case added[produceSlot{i, j}] != 0:
				p.ErrorCode = added[produceSlot{i, j}]
			default:
				parts = append(parts, diskless.ProducePartition{Topic: rt.Topic, Partition: rp.Partition, Records: rp.Records})
				slots = append(slots, produceSlot{len(resp.Topics), len(t.Partitions)})
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	if len(parts) == 0 {
		if req.Acks == 0 {
			return nil, nil
		}
		return resp, nil
	}
	timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	wctx, cancel := context.WithTimeout(s.work, timeout)
	defer cancel()
	out, err := s.b.Produce(wctx, diskless.ProduceRequest{Acks: req.Acks, Version: req.Version, Partitions: parts, Buffered: signal})
	if req.Acks == 0 {
		if err != nil {
			s.log.Warn("produce with acks 0 failed", zap.Error(err))
		}
		return nil, nil
	}
	var whole int16 // an error for every partition
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		whole = int16(kafkaerr.RequestTimedOut)
	case errors.Is(err, diskless.ErrClosed):
		whole = int16(kafkaerr.NotLeaderOrFollower) // the broker is going away: ask again later
	case err != nil:
		whole = codeOf(err)
	}
	for i, sl := range slots {
		p := &resp.Topics[sl.t].Partitions[sl.p]
		if whole != 0 {
			p.ErrorCode = whole
			continue
		}
		r := out.Partitions[i]
		p.ErrorCode = int16(r.ErrorCode)
		p.BaseOffset, p.LogAppendTime, p.LogStartOffset = r.BaseOffset, r.LogAppendTime, r.LogStartOffset
		if r.Err != nil {
			p.ErrorMessage = messageOf(r.Err)
		}
		for _, re := range r.RecordErrors {
			e := kmsg.NewProduceResponseTopicPartitionErrorRecord()
			msg := re.Message
			e.RelativeOffset, e.ErrorMessage = int32(re.BatchIndex), &msg
			p.ErrorRecords = append(p.ErrorRecords, e)
		}
	}
	return resp, nil
}

// initProducerID answers InitProducerId: for idempotent producers a new
// producer ID at epoch 0 (a producer asking to bump its epoch gets a new
// ID, which it accepts the same way); with a transactional ID, the
// transactional ID's producer at its next epoch (initTxnProducerID).
func (s *Server) initProducerID(ctx context.Context, req *kmsg.InitProducerIDRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		return s.initTxnProducerID(ctx, req, resp), nil
	}
	id, epoch, err := s.b.InitProducerID(ctx)
	if err != nil {
		code := kafkaerr.CodeOf(err)
		if code == kafkaerr.UnknownServerError {
			code = kafkaerr.CoordinatorNotAvailable
		}
		resp.ErrorCode = int16(code)
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, epoch
	return resp, nil
}
