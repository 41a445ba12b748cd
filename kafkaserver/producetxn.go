package kafkaserver

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

// Transactions v2's implicit adds (KIP-890 part 2). A transactional
// Produce of version 12 or later adds its partitions to the producer's
// transaction itself, starting it if none is ongoing, before its batches
// are written: Kafka's partition leader does it through
// AddPartitionsToTxnManager (the operation ADD_PARTITION that
// produceRequestVersionToTransactionSupportedOperation gives versions
// above 11), and so does this server, through the facade's
// AddTxnPartitions. TxnOffsetCommit from version 5 adds its group
// (AddTxnOffsets) the same way
// (txnOffsetCommitRequestVersionToTransactionSupportedOperation). Both
// are refused with UNSUPPORTED_VERSION while the cluster's
// transaction.version is below 2 (coordinator/features.go).
//
// The codes are Kafka's: the coordinator's PRODUCER_FENCED is
// INVALID_PRODUCER_EPOCH on Produce (AddPartitionsToTxnManager), and
// CONCURRENT_TRANSACTIONS or an unavailable coordinator is
// NOT_ENOUGH_REPLICAS (ReplicaManager), both by the table of
// errorversions.go; batches of more than one producer in one request are
// INVALID_PRODUCER_ID_MAPPING.

// produceSlot names a partition of a Produce request: its topic's index
// and its own in the topic.
type produceSlot struct{ t, p int }

// addProducedToTxn adds the partitions of a transactional Produce of
// version 12 or later to the producer's transaction. It returns the code
// each partition is answered with instead of being written (none for
// those added, and for every partition of a request that needs no add).
func (s *Server) addProducedToTxn(ctx context.Context, req *kmsg.ProduceRequest) map[produceSlot]int16 {
	if req.Version < 12 || req.TransactionID == nil || s.b == nil {
		return nil
	}
	var slots []produceSlot
	var parts []diskless.TxnPartition
	producer, epoch, mixed := int64(-1), int16(-1), false
	for i, rt := range req.Topics {
		if isInternal(rt.Topic) {
			continue
		}
		for j, rp := range rt.Partitions {
			b, err := kbatch.ParseBatch(rp.Records)
			if err != nil || !b.Transactional() || !b.HasProducerID() {
				continue // the produce answers it as it is
			}
			if len(slots) > 0 && (b.ProducerID() != producer || b.ProducerEpoch() != epoch) {
				mixed = true
			}
			producer, epoch = b.ProducerID(), b.ProducerEpoch()
			slots = append(slots, produceSlot{i, j})
			parts = append(parts, diskless.TxnPartition{Topic: rt.Topic, Partition: rp.Partition})
		}
	}
	if len(slots) == 0 {
		return nil
	}
	out := make(map[produceSlot]int16, len(slots))
	fail := func(code int16) map[produceSlot]int16 {
		for _, sl := range slots {
			out[sl] = code
		}
		return out
	}
	switch {
	case mixed:
		return fail(int16(kafkaerr.InvalidProducerIDMapping))
	case s.b.CheckTxnV2() != nil:
		return fail(int16(kafkaerr.UnsupportedVersion))
	}
	// A partition that does not exist fails the facade's add of the
	// others (OPERATION_NOT_ATTEMPTED): it is answered, and the others
	// are added again without it.
	for attempt := 0; attempt < 2 && len(slots) > 0; attempt++ {
		errs, err := s.b.AddTxnPartitions(ctx, *req.TransactionID, producer, epoch, parts)
		if err != nil {
			return fail(txnCode(err))
		}
		var left []produceSlot
		var leftParts []diskless.TxnPartition
		for k, e := range errs {
			switch code := kafkaerr.CodeOf(e); {
			case e == nil:
			case code == kafkaerr.OperationNotAttempted && attempt == 0:
				left, leftParts = append(left, slots[k]), append(leftParts, parts[k])
			default:
				out[slots[k]] = txnCode(e)
			}
		}
		slots, parts = left, leftParts
	}
	return out
}

// addCommittedToTxn adds a TxnOffsetCommit's group to the producer's
// transaction when the request is of version 5 or later, and returns the
// code of its failure (0 if added, or if the version needs no add).
func (s *Server) addCommittedToTxn(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) int16 {
	if req.Version < 5 {
		return 0
	}
	if err := s.b.CheckTxnV2(); err != nil {
		return int16(kafkaerr.UnsupportedVersion)
	}
	if err := s.b.AddTxnOffsets(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group); err != nil {
		return txnCode(err)
	}
	return 0
}
