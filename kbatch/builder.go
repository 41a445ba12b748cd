package kbatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Builder builds RecordBatch v2 batches the way Kafka's producers do
// (docs/formats.md, "What producers send"): base offset 0, offset deltas 0, 1, 2, ..., the base
// timestamp of the first record, the greatest record timestamp as max
// timestamp, the records compressed as one stream, the CRC last.
//
// A new Builder builds a producer's batch without idempotence: base offset
// 0, partition leader epoch -1, producer id, epoch and base sequence -1. The
// Set methods change that before Build. Append copies what it is given, so
// the caller may reuse its buffers at once.
//
// A Builder is not safe for concurrent use. Reset lets it build another
// batch while keeping its buffer.
type Builder struct {
	codec         Codec
	baseOffset    int64
	leaderEpoch   int32
	producerID    int64
	producerEpoch int16
	baseSequence  int32
	attrs         Attributes
	appendTime    int64

	records        []byte
	count          int32
	baseTimestamp  int64
	baseSet        bool
	maxTimestamp   int64
	lastDeltaIsSet bool
	lastDelta      int32
}

// NewBuilder returns a Builder for a batch compressed with codec.
func NewBuilder(codec Codec) *Builder {
	b := &Builder{}
	b.Reset(codec)
	return b
}

// Reset discards the records and settings, keeping the buffer, and starts a
// batch compressed with codec.
func (b *Builder) Reset(codec Codec) {
	*b = Builder{
		codec:         codec,
		leaderEpoch:   NoPartitionLeaderEpoch,
		producerID:    NoProducerID,
		producerEpoch: NoProducerEpoch,
		baseSequence:  NoSequence,
		records:       b.records[:0],
		baseTimestamp: NoTimestamp,
		maxTimestamp:  NoTimestamp,
	}
}

// SetProducer sets the producer id, epoch and the sequence of the first
// record, as an idempotent or transactional producer does.
func (b *Builder) SetProducer(id int64, epoch int16, baseSequence int32) {
	b.producerID, b.producerEpoch, b.baseSequence = id, epoch, baseSequence
}

// SetTransactional sets or clears the transactional attribute.
func (b *Builder) SetTransactional(on bool) { b.setAttr(AttrTransactional, on) }

// SetBaseOffset sets the base offset; producers leave it 0.
func (b *Builder) SetBaseOffset(offset int64) { b.baseOffset = offset }

// SetPartitionLeaderEpoch sets the partition leader epoch; producers leave
// it -1.
func (b *Builder) SetPartitionLeaderEpoch(epoch int32) { b.leaderEpoch = epoch }

// SetLogAppendTime makes the batch a LogAppendTime batch whose max
// timestamp is ts, as a broker builds it; records keep their own timestamp
// deltas.
func (b *Builder) SetLogAppendTime(ts int64) {
	b.setAttr(AttrLogAppendTime, true)
	b.appendTime = ts
}

// SetBaseTimestamp sets the timestamp that records' deltas are relative
// to. Without it, the first record appended sets it. Call it before Append.
func (b *Builder) SetBaseTimestamp(ts int64) { b.baseTimestamp, b.baseSet = ts, true }

// SetDeleteHorizon marks the batch as the log cleaner does when it keeps a
// tombstone or a transaction marker: attribute bit 6, and the delete horizon
// (milliseconds) as the base timestamp. Call it before Append.
func (b *Builder) SetDeleteHorizon(ms int64) {
	b.setAttr(AttrDeleteHorizonSet, true)
	b.SetBaseTimestamp(ms)
}

// SetLastOffsetDelta makes the batch claim lastOffsetDelta d whatever its
// records, as batches that the log cleaner has emptied or thinned do.
func (b *Builder) SetLastOffsetDelta(d int32) { b.lastDelta, b.lastDeltaIsSet = d, true }

func (b *Builder) setAttr(a Attributes, on bool) {
	if on {
		b.attrs |= a
	} else {
		b.attrs &^= a
	}
}

// SetControl marks the batch a control batch (or not), as the log cleaner
// does when it rewrites a transaction marker.
func (b *Builder) SetControl(on bool) { b.setAttr(AttrControl, on) }

// NumRecords returns how many records have been appended.
func (b *Builder) NumRecords() int { return int(b.count) }

// UncompressedSize returns the size the batch would have without
// compression: what the records take so far plus the header.
func (b *Builder) UncompressedSize() int { return HeaderSize + len(b.records) }

// Append adds a record with the given timestamp (milliseconds), key, value
// and headers. A nil key or value is null; an empty non-nil one is empty.
func (b *Builder) Append(timestamp int64, key, value []byte, headers ...Header) {
	if !b.baseSet {
		b.baseTimestamp, b.baseSet = timestamp, true
	}
	b.appendRecord(timestamp-b.baseTimestamp, b.count, key, value, headers)
	if timestamp > b.maxTimestamp {
		b.maxTimestamp = timestamp
	}
	b.count++
}

// AppendRecord adds a decoded record with its own attributes, timestamp
// delta, offset delta, key, value and headers, as the log cleaner copies the
// records it keeps. Without SetBaseTimestamp, the base timestamp is the
// first record's Timestamp minus its TimestampDelta.
func (b *Builder) AppendRecord(r *Record) {
	if !b.baseSet {
		b.baseTimestamp, b.baseSet = r.Timestamp-r.TimestampDelta, true
	}
	ts := b.baseTimestamp + r.TimestampDelta
	b.records = appendRecord(b.records, r.Attributes, r.TimestampDelta, r.OffsetDelta, r.Key, r.Value, r.headers, r.numHeaders)
	if ts > b.maxTimestamp {
		b.maxTimestamp = ts
	}
	b.count++
}

func (b *Builder) appendRecord(tsDelta int64, offsetDelta int32, key, value []byte, headers []Header) {
	size := 1 + sizeVarlong(tsDelta) + sizeVarint(offsetDelta) +
		sizeBytes(key) + sizeBytes(value) + sizeVarint(int32(len(headers)))
	for i := range headers {
		size += sizeVarint(int32(len(headers[i].Key))) + len(headers[i].Key) + sizeBytes(headers[i].Value)
	}
	dst := appendVarint(b.records, int32(size))
	dst = append(dst, 0)
	dst = appendVarlong(dst, tsDelta)
	dst = appendVarint(dst, offsetDelta)
	dst = appendBytes(dst, key)
	dst = appendBytes(dst, value)
	dst = appendVarint(dst, int32(len(headers)))
	for i := range headers {
		dst = appendVarint(dst, int32(len(headers[i].Key)))
		dst = append(dst, headers[i].Key...)
		dst = appendBytes(dst, headers[i].Value)
	}
	b.records = dst
}

// appendRecord appends a record whose headers are already encoded.
func appendRecord(dst []byte, attrs int8, tsDelta int64, offsetDelta int32, key, value, headers []byte, numHeaders int32) []byte {
	size := 1 + sizeVarlong(tsDelta) + sizeVarint(offsetDelta) +
		sizeBytes(key) + sizeBytes(value) + sizeVarint(numHeaders) + len(headers)
	dst = appendVarint(dst, int32(size))
	dst = append(dst, byte(attrs))
	dst = appendVarlong(dst, tsDelta)
	dst = appendVarint(dst, offsetDelta)
	dst = appendBytes(dst, key)
	dst = appendBytes(dst, value)
	dst = appendVarint(dst, numHeaders)
	return append(dst, headers...)
}

func sizeBytes(p []byte) int {
	if p == nil {
		return 1
	}
	return sizeVarint(int32(len(p))) + len(p)
}

func appendBytes(dst, p []byte) []byte {
	if p == nil {
		return appendVarint(dst, -1)
	}
	return append(appendVarint(dst, int32(len(p))), p...)
}

// ErrNoRecords is returned by Build for a batch with no records that does
// not claim a last offset delta (SetLastOffsetDelta).
var ErrNoRecords = errors.New("kbatch: a batch needs at least one record")

// Batch builds the batch into a new slice and returns it as a Batch, the
// view every other function of the package takes: Build with nothing to
// append to.
func (b *Builder) Batch() (Batch, error) {
	raw, err := b.Build(nil)
	return Batch(raw), err
}

// Build appends the batch to dst and returns the extended slice. The
// Builder keeps its records, so Build may be called again.
func (b *Builder) Build(dst []byte) ([]byte, error) {
	if !b.codec.Valid() {
		return dst, fmt.Errorf("kbatch: unknown codec %d", int8(b.codec))
	}
	if b.count == 0 && !b.lastDeltaIsSet {
		return dst, ErrNoRecords
	}
	start := len(dst)
	dst = append(dst, make([]byte, HeaderSize)...)
	var err error
	dst, err = appendCompressed(dst, b.records, b.codec)
	if err != nil {
		return dst[:start], err
	}
	if len(dst)-start-LogOverhead > math.MaxInt32 {
		return dst[:start], fmt.Errorf("kbatch: a batch of %d bytes is too large", len(dst)-start)
	}
	h := dst[start:]
	lastDelta := b.count - 1
	if b.lastDeltaIsSet {
		lastDelta = b.lastDelta
	}
	maxTs := b.maxTimestamp
	if b.attrs&AttrLogAppendTime != 0 {
		maxTs = b.appendTime
	}
	binary.BigEndian.PutUint64(h[baseOffsetOffset:], uint64(b.baseOffset))
	binary.BigEndian.PutUint32(h[lengthOffset:], uint32(len(h)-LogOverhead))
	binary.BigEndian.PutUint32(h[leaderEpochOffset:], uint32(b.leaderEpoch))
	h[magicOffset] = Magic
	binary.BigEndian.PutUint16(h[attributesOffset:], uint16(b.attrs|Attributes(b.codec)))
	binary.BigEndian.PutUint32(h[lastOffsetDeltaOffset:], uint32(lastDelta))
	binary.BigEndian.PutUint64(h[baseTimestampOffset:], uint64(b.baseTimestamp))
	binary.BigEndian.PutUint64(h[maxTimestampOffset:], uint64(maxTs))
	binary.BigEndian.PutUint64(h[producerIDOffset:], uint64(b.producerID))
	binary.BigEndian.PutUint16(h[producerEpochOffset:], uint16(b.producerEpoch))
	binary.BigEndian.PutUint32(h[baseSequenceOffset:], uint32(b.baseSequence))
	binary.BigEndian.PutUint32(h[recordsCountOffset:], uint32(b.count))
	binary.BigEndian.PutUint32(h[crcOffset:], Batch(h).ComputeCRC())
	return dst, nil
}
