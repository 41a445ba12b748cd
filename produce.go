package diskless

import (
	"context"
	"time"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/wal"
)

// ProduceRequest is a Kafka produce request: record batches for any number
// of partitions.
type ProduceRequest struct {
	// Acks is 0 (answer once buffered), 1 or -1 (answer once committed:
	// in diskless both mean committed, there is no partial durability).
	// Any other value is INVALID_REQUIRED_ACKS for every partition, as in
	// Kafka.
	Acks int16
	// Version is the produce request's version, for the checks that
	// depend on it (zstd needs 7 or more). 0 means a current version.
	Version int16
	// Partitions are the batches, one per partition (as Kafka requires).
	Partitions []ProducePartition
	// Buffered, if set, is called once, before Produce returns, as soon
	// as the request's valid batches are in the produce buffer, or once
	// it is known that none will be (every batch was refused, or the
	// buffer refused the request). The batches of a partition are
	// committed in the order they enter the buffer, and an idempotent
	// producer's sequence numbers are checked in that order: a caller
	// with several requests of one producer in flight (a Kafka
	// connection that pipelines its produce requests) keeps their order
	// by starting each request's Produce only after the previous one's
	// Buffered. It must not block.
	Buffered func()
}

// ProducePartition is one partition's batch.
type ProducePartition struct {
	Topic     string
	Partition int32
	// Records is the partition's record batch (RecordBatch v2) as the
	// producer sent it. The broker keeps it: do not change it afterwards.
	Records []byte
}

// ProduceResponse answers a ProduceRequest, one entry per partition in
// the request's order.
type ProduceResponse struct {
	Partitions []PartitionProduceResponse
}

// PartitionProduceResponse is one partition's answer, as in Kafka's produce
// response.
type PartitionProduceResponse struct {
	Topic     string
	Partition int32
	// ErrorCode is Kafka's error code (NoError on success); Err says more.
	ErrorCode kafkaerr.Code
	Err       error
	// BaseOffset is the offset given to the batch's first record (-1 on
	// error, and with acks 0).
	BaseOffset int64
	// LogAppendTime is the commit time on LogAppendTime topics, else -1.
	LogAppendTime int64
	// LogStartOffset is the partition's log start offset, or -1.
	LogStartOffset int64
	// RecordErrors lists the records that failed validation, if any.
	RecordErrors []kafkaerr.RecordError
}

// Produce validates each partition's batch as a Kafka leader does, buffers
// the valid ones for the next WAL object and, unless Acks is 0, waits until
// that object is uploaded and committed. A request that mixes partitions
// waits for the one object they all go into; KIP-1163 advises producers
// not to mix latency classes (classic and diskless) in one request, since
// the whole request then waits for the slower one. Bad input is answered at
// once, per partition, with the code Kafka gives, and buffers nothing of
// that partition. The error is for the whole request: the broker is
// closed, or ctx ended while the buffer was full (REQUEST_TIMED_OUT).
func (b *Broker) Produce(ctx context.Context, req ProduceRequest) (ProduceResponse, error) {
	buffered := req.Buffered // called once: after buffer.Add, or on return
	signal := func() {
		if buffered != nil {
			buffered()
			buffered = nil
		}
	}
	defer signal()
	if b.closed.Load() {
		return ProduceResponse{}, ErrClosed
	}
	start := time.Now() // real time: the produce latency metric
	resp := ProduceResponse{Partitions: make([]PartitionProduceResponse, len(req.Partitions))}
	if req.Acks != 0 && req.Acks != 1 && req.Acks != -1 {
		// ReplicaManager.appendRecords: nothing is validated or appended.
		err := kafkaerr.New(kafkaerr.InvalidRequiredAcks, "acks must be -1, 0 or 1, not %d", req.Acks)
		for i, p := range req.Partitions {
			resp.Partitions[i] = PartitionProduceResponse{Topic: p.Topic, Partition: p.Partition, ErrorCode: kafkaerr.InvalidRequiredAcks, Err: err, BaseOffset: -1, LogAppendTime: -1, LogStartOffset: -1}
		}
		return resp, nil
	}
	var batches []wal.Batch
	var index []int // batches[i] answers resp.Partitions[index[i]]
	now := b.clk.Now()
	for i, p := range req.Partitions {
		r := &resp.Partitions[i]
		*r = PartitionProduceResponse{Topic: p.Topic, Partition: p.Partition, BaseOffset: -1, LogAppendTime: -1, LogStartOffset: -1}
		t, tp, err := b.partition(ctx, p.Topic, p.Partition)
		if err != nil {
			r.Err, r.ErrorCode = err, kafkaerr.CodeOf(err)
			continue
		}
		tt := kbatch.CreateTime
		if t.Config.LogAppendTime {
			tt = kbatch.LogAppendTime
		}
		res, err := b.validate(ctx, p.Records, &kbatch.ValidateOptions{
			MaxMessageBytes: int(t.Config.MaxMessageBytes),
			Compacted:       t.Config.Compact,
			TimestampType:   tt,
			Now:             now,
			ProduceVersion:  req.Version,
		})
		if err != nil {
			r.Err, r.ErrorCode = err, kafkaerr.CodeOf(err)
			if e, ok := err.(*kafkaerr.Error); ok {
				r.RecordErrors = e.RecordErrors
			}
			continue
		}
		batches = append(batches, wal.Batch{TopicPartition: tp, Data: res.Batch})
		index = append(index, i)
	}
	if len(batches) == 0 {
		return resp, nil
	}
	type answer struct {
		results []wal.Result
		err     error
	}
	done := make(chan answer, 1)
	wreq := &wal.Request{Batches: batches, Done: func(results []wal.Result, err error) { done <- answer{results, err} }}
	if req.Acks == 0 {
		wreq.Done = nil
	}
	err := b.buffer.Add(ctx, wreq)
	signal()
	if err != nil {
		code := kafkaerr.RequestTimedOut
		if err == wal.ErrClosed {
			return resp, ErrClosed
		}
		return resp, &kafkaerr.Error{Code: code, Message: "the produce buffer is full", Err: err}
	}
	if req.Acks == 0 {
		return resp, nil
	}
	var a answer
	select {
	case a = <-done:
	case <-ctx.Done():
		// The request will still be committed (or not); its answer is
		// dropped, as Kafka's when a client goes away.
		return resp, ctx.Err()
	}
	for j, i := range index {
		r := &resp.Partitions[i]
		if a.err != nil {
			r.Err, r.ErrorCode = a.err, kafkaerr.CodeOf(a.err)
			continue
		}
		res := a.results[j]
		if res.Err != nil {
			r.Err, r.ErrorCode = res.Err, kafkaerr.CodeOf(res.Err)
			continue
		}
		r.BaseOffset, r.LogAppendTime, r.LogStartOffset = res.BaseOffset, res.LogAppendTime, res.LogStartOffset
	}
	took := time.Since(start) // real time: a latency metric
	b.stats.total.Record(took)
	if m := b.metrics; m != nil {
		m.produce.Record(ctx, took.Seconds())
	}
	return resp, nil
}

// firstShare bounds the decompressed size that a compressed batch is first
// validated with: 8 times its size, at least 1 MiB, at most the bound of
// one batch.
func firstShare(records []byte) int {
	return min(max(8*len(records), 1<<20), kbatch.DefaultMaxUncompressedBytes)
}

// validate validates a produce batch with kbatch.Validate, within the
// broker's validation memory budget (Config.ValidationMemoryBytes): a
// compressed batch takes what decompressing it with a first, small share
// can cost (kbatch.DecompressionBytes); only one that inflates past that
// share is validated again with the whole per-batch bound
// (kbatch.DefaultMaxUncompressedBytes), having taken what that can cost.
// A codec whose validation costs the same at the share and at the bound
// (gzip, lz4) is validated once, at the bound.
// It waits for the budget with ctx, and its end is REQUEST_TIMED_OUT.
func (b *Broker) validate(ctx context.Context, records []byte, opts *kbatch.ValidateOptions) (kbatch.ValidateResult, error) {
	first := firstShare(records)
	limits := []int{first}
	switch {
	case kbatch.DecompressionBytes(records, first) == kbatch.DecompressionBytes(records, kbatch.DefaultMaxUncompressedBytes):
		// The bound costs no more than the share (gzip, lz4: validation
		// streams and holds only the decoder): one pass at the bound.
		limits[0] = kbatch.DefaultMaxUncompressedBytes
	case first < kbatch.DefaultMaxUncompressedBytes:
		limits = append(limits, kbatch.DefaultMaxUncompressedBytes)
	}
	var res kbatch.ValidateResult
	var err error
	for i, limit := range limits {
		cost := kbatch.DecompressionBytes(records, limit)
		if cost == 0 {
			return kbatch.Validate(records, opts) // uncompressed: nothing to decompress
		}
		cost = min(cost, max(b.cfg.ValidationMemoryBytes, 1)) // more than the whole budget goes alone
		if werr := b.validation.Acquire(ctx, cost); werr != nil {
			return res, &kafkaerr.Error{Code: kafkaerr.RequestTimedOut, Message: "waiting for validation memory", Err: werr}
		}
		o := *opts
		o.MaxUncompressedBytes = limit
		res, err = kbatch.Validate(records, &o)
		b.validation.Release(cost)
		maxMessage := opts.MaxMessageBytes
		if maxMessage <= 0 {
			maxMessage = kbatch.DefaultMaxMessageBytes
		}
		if i+1 < len(limits) && kafkaerr.CodeOf(err) == kafkaerr.MessageTooLarge && len(records) <= maxMessage {
			b.stats.revalidations.Add(1)
			continue // it decompressed past the first share
		}
		break
	}
	return res, err
}
