package diskless

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/diskless-go/diskless/clock"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/replica"
	"github.com/diskless-go/diskless/wal"
)

// FetchRequest is a Kafka fetch request.
type FetchRequest struct {
	// Partitions are what to read, each from its offset.
	Partitions []FetchPartition
	// MinBytes: wait (up to MaxWait) until at least this many bytes are
	// there to answer with. 0 answers at once.
	MinBytes int32
	// MaxBytes bounds the whole response (at least one batch is always
	// returned); 0 means 50 MiB, Kafka's fetch.max.bytes.
	MaxBytes int32
	// MaxWait bounds the wait for MinBytes: a long poll that new commits
	// wake.
	MaxWait time.Duration
	// ReadCommitted is Kafka's isolation level READ_COMMITTED: each
	// partition is read up to its last stable offset only (nothing of a
	// transaction still open, nor after it), and the answer lists the
	// aborted transactions of what it returns, for the consumer to skip.
	// Otherwise (READ_UNCOMMITTED) reads go to the high watermark.
	ReadCommitted bool
}

// FetchPartition is one partition to read.
type FetchPartition struct {
	Topic     string
	Partition int32
	// Offset is the first offset wanted.
	Offset int64
	// MaxBytes bounds this partition's records (at least one batch is
	// returned); 0 means 1 MiB, Kafka's max.partition.fetch.bytes.
	MaxBytes int32
}

// FetchResponse answers a FetchRequest, one entry per partition in the
// request's order.
type FetchResponse struct {
	Partitions []PartitionFetchResponse
}

// PartitionFetchResponse is one partition's answer.
type PartitionFetchResponse struct {
	Topic     string
	Partition int32
	// ErrorCode is Kafka's error code: OFFSET_OUT_OF_RANGE for an offset
	// outside [LogStartOffset, HighWatermark], UNKNOWN_TOPIC_OR_PARTITION,
	// KAFKA_STORAGE_ERROR when the objects cannot be read.
	ErrorCode kafkaerr.Code
	// Err is the error, of code ErrorCode (kafkaerr.CodeOf), wrapping
	// its cause.
	Err error
	// HighWatermark, LastStableOffset and LogStartOffset are the
	// partition's.
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
	// AbortedTransactions are, for ReadCommitted, the aborted
	// transactions that overlap Records, by first offset: a consumer
	// drops their producers' batches from each first offset until their
	// ABORT marker.
	AbortedTransactions []AbortedTxn
	// Records are plain Kafka record batches, with their offsets (and,
	// on LogAppendTime topics, their timestamps) written in, starting
	// with the batch that holds Offset.
	Records []byte
}

// Fetch reads each partition from its offset: the coordinator says where
// the batches are, the bytes come from the object cache (the tail is
// there already; older data costs a ranged GET per 4 MiB block), and each
// batch gets the offsets (and LogAppendTime) the coordinator assigned, so
// a consumer sees what a classic broker would serve. With MinBytes, it
// waits for new commits until MaxWait, unless a partition has an error
// (OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION, ...): then it answers
// at once, as Kafka's delayed fetch completes on a partition error.
func (b *Broker) Fetch(ctx context.Context, req FetchRequest) (FetchResponse, error) {
	if b.closed.Load() {
		return FetchResponse{}, ErrClosed
	}
	maxTotal := int64(req.MaxBytes)
	if maxTotal <= 0 {
		maxTotal = 50 << 20
	}
	deadline := b.clk.Now().Add(req.MaxWait)
	for {
		// The coordinator's reads see every commit acknowledged before
		// them (FindBatches waits for its database): a read that finds
		// less than MinBytes waits for the next commit, or the deadline.
		wake := b.commits()
		resp, total, err := b.fetchOnce(ctx, req, maxTotal)
		if err != nil {
			return resp, err
		}
		if total >= int64(req.MinBytes) || !b.clk.Now().Before(deadline) || hasError(resp) {
			return resp, nil
		}
		tc, t := clock.After(b.clk, clock.Until(b.clk, deadline))
		select {
		case <-wake:
		case <-tc:
		case <-ctx.Done():
			t.Stop()
			return resp, ctx.Err()
		}
		t.Stop()
	}
}

// hasError reports whether a partition of resp has an error: Kafka
// answers such a fetch without waiting for MinBytes.
func hasError(resp FetchResponse) bool {
	for i := range resp.Partitions {
		if resp.Partitions[i].ErrorCode != kafkaerr.NoError {
			return true
		}
	}
	return false
}

// fetchOnce reads every partition once.
func (b *Broker) fetchOnce(ctx context.Context, req FetchRequest, maxTotal int64) (FetchResponse, int64, error) {
	resp := FetchResponse{Partitions: make([]PartitionFetchResponse, len(req.Partitions))}
	var total int64
	for i, p := range req.Partitions {
		r := &resp.Partitions[i]
		*r = PartitionFetchResponse{Topic: p.Topic, Partition: p.Partition, HighWatermark: -1, LastStableOffset: -1, LogStartOffset: -1}
		_, tp, err := b.partition(ctx, p.Topic, p.Partition)
		if err != nil {
			r.Err, r.ErrorCode = err, kafkaerr.CodeOf(err)
			continue
		}
		limit := int64(p.MaxBytes)
		if limit <= 0 {
			limit = 1 << 20
		}
		if total > 0 {
			limit = min(limit, maxTotal-total)
		}
		if limit <= 0 {
			continue
		}
		if req.ReadCommitted {
			// Nothing at or past the last stable offset is read.
			lso, err := b.coord.ListOffsets(ctx, tp, LatestTimestamp)
			if err == nil && p.Offset >= lso.LastStable && p.Offset <= lso.Offset {
				r.HighWatermark, r.LastStableOffset = lso.Offset, lso.LastStable
				if lo, err := b.coord.ListOffsets(ctx, tp, EarliestTimestamp); err == nil && p.Offset >= lo.Offset {
					r.LogStartOffset = lo.Offset
					continue
				}
			}
		}
		if data, start, hw, lso, ok := b.readLocal(ctx, tp, p.Offset, limit); ok {
			r.Records, r.LogStartOffset, r.HighWatermark, r.LastStableOffset = data, start, hw, lso
			total += b.committedOnly(ctx, req, tp, p.Offset, r)
			continue
		}
		objects := &keyRecorder{r: b.cache}
		data, found, err := replica.Read(ctx, b.coord, objects, tp, p.Offset, limit)
		r.HighWatermark, r.LastStableOffset, r.LogStartOffset = found.HighWatermark, found.LastStable, found.LogStart
		if err != nil {
			r.Err, r.ErrorCode = err, kafkaerr.CodeOf(err)
			if ctx.Err() != nil {
				return resp, total, ctx.Err()
			}
			switch r.ErrorCode {
			case kafkaerr.UnknownServerError, kafkaerr.CorruptMessage:
				// Reading the objects failed, or one does not hold what
				// the coordinator placed there (truncated, emptied,
				// overwritten): the store is damaged, not the request.
				r.ErrorCode = kafkaerr.KafkaStorageError
				r.Err = &kafkaerr.Error{Code: r.ErrorCode, Message: "reading the partition's objects", Err: err}
			}
			if r.ErrorCode == kafkaerr.KafkaStorageError && objects.last != "" {
				b.objectReadFailed(objects.last, p.Topic, p.Partition, err)
			}
			continue
		}
		r.Records = data
		if found.Remote != nil {
			b.stats.readTiered.Add(1)
		} else {
			b.stats.readDiskless.Add(1)
		}
		total += b.committedOnly(ctx, req, tp, p.Offset, r)
	}
	return resp, total, nil
}

// readLocal reads tp from offset in its materialised local log, when
// there is one and it holds offset (and offset is not below the log start
// offset, which may have moved past the local log's). ok is false when the
// read must go to the coordinator.
func (b *Broker) readLocal(ctx context.Context, tp wal.TopicPartition, offset, limit int64) (data []byte, start, hw, lso int64, ok bool) {
	if b.mat == nil {
		return nil, -1, -1, -1, false
	}
	log, err := b.mat.Log(tp)
	if err != nil || offset < log.EarliestOffset() || offset >= log.LatestOffset() {
		return nil, -1, -1, -1, false
	}
	lo, err := b.coord.ListOffsets(ctx, tp, EarliestTimestamp)
	if err != nil || offset < lo.Offset {
		return nil, -1, -1, -1, false
	}
	hi, err := b.coord.ListOffsets(ctx, tp, LatestTimestamp)
	if err != nil {
		return nil, -1, -1, -1, false
	}
	res, err := log.Read(ctx, offset, int(min(limit, 1<<30)))
	if err != nil || len(res.Records) == 0 {
		return nil, -1, -1, -1, false // replaced meanwhile (a reset), or moved: ask the coordinator
	}
	b.stats.readLocal.Add(1)
	return res.Records, lo.Offset, hi.Offset, hi.LastStable, true
}

// committedOnly cuts a partition's records, for a ReadCommitted request,
// to the batches below its last stable offset, and lists the aborted
// transactions they overlap. It returns the bytes left.
func (b *Broker) committedOnly(ctx context.Context, req FetchRequest, tp wal.TopicPartition, offset int64, r *PartitionFetchResponse) int64 {
	if !req.ReadCommitted || len(r.Records) == 0 {
		return int64(len(r.Records))
	}
	cut, last := 0, int64(-1)
	it := kbatch.NewBatchIter(r.Records)
	for it.Next() {
		bt := it.Batch()
		if bt.BaseOffset() >= r.LastStableOffset {
			break
		}
		cut += len(bt)
		last = bt.LastOffset()
	}
	r.Records = r.Records[:cut]
	if last < offset {
		r.Records = nil
		return 0
	}
	aborted, err := b.coord.FetchAbortedTxns(ctx, tp, offset, last)
	if err != nil {
		// Without the index the consumer cannot tell aborted records:
		// answer none, and it asks again. Below the log start the
		// error is OFFSET_OUT_OF_RANGE (FetchAbortedTxns): the records
		// came from a copy behind the move of the log start.
		r.Records, r.Err, r.ErrorCode = nil, err, kafkaerr.CodeOf(err)
		if r.ErrorCode == kafkaerr.UnknownServerError {
			r.ErrorCode = kafkaerr.KafkaStorageError
			r.Err = &kafkaerr.Error{Code: r.ErrorCode, Message: "reading the aborted transactions", Err: err}
		}
		return 0
	}
	r.AbortedTransactions = aborted
	return int64(len(r.Records))
}

// keyRecorder reads through r and remembers the last key read: when a
// read of replica.Read fails, the object it was at.
type keyRecorder struct {
	r    replica.ObjectReader
	last string
}

var _ replica.ObjectReader = (*keyRecorder)(nil)

// ReadRange reads through r.
func (k *keyRecorder) ReadRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	k.last = key
	return k.r.ReadRange(ctx, key, offset, length)
}

// storageLogInterval is how often a fetch that fails on one object is
// logged.
const storageLogInterval = time.Minute

// objectReadFailed counts a partition read of Fetch that failed on the
// object key, and logs it at warn once per storageLogInterval and key.
func (b *Broker) objectReadFailed(key, topic string, partition int32, err error) {
	b.stats.fetchStorageErrors.Add(1)
	if !b.storageLog.allow(key, b.clk.Now()) {
		return
	}
	b.cfg.Logger.Warn("diskless: fetch failed on a damaged or unreadable object; consumers get KAFKA_STORAGE_ERROR and retry",
		zap.String("key", key), zap.String("topic", topic), zap.Int32("partition", partition), zap.Error(err),
		zap.Duration("next_log_in", storageLogInterval))
}

// onceEvery lets an event of each key through once per
// storageLogInterval. It is safe for concurrent use; the zero value is
// ready.
type onceEvery struct {
	mu   sync.Mutex
	last map[string]time.Time
}

// allow reports whether the event of key at now is let through.
func (o *onceEvery) allow(key string, now time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if t, ok := o.last[key]; ok && now.Sub(t) < storageLogInterval {
		return false
	}
	if o.last == nil || len(o.last) >= 1024 {
		// Forget the keys whose interval is over, so that many damaged
		// objects cannot grow the map without bound.
		for k, t := range o.last {
			if now.Sub(t) >= storageLogInterval {
				delete(o.last, k)
			}
		}
		if o.last == nil {
			o.last = map[string]time.Time{}
		}
	}
	o.last[key] = now
	return true
}
