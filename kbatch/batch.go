package kbatch

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/diskless-go/diskless/kafkaerr"
)

// Byte offsets of the RecordBatch v2 header fields (docs/formats.md, "Batch header").
// They are part of the format.
const (
	baseOffsetOffset      = 0
	lengthOffset          = 8
	leaderEpochOffset     = 12
	magicOffset           = 16
	crcOffset             = 17
	attributesOffset      = 21
	lastOffsetDeltaOffset = 23
	baseTimestampOffset   = 27
	maxTimestampOffset    = 35
	producerIDOffset      = 43
	producerEpochOffset   = 51
	baseSequenceOffset    = 53
	recordsCountOffset    = 57

	// LogOverhead is the size of the base offset and length fields that
	// precede every batch: a batch's length field counts the bytes after it.
	LogOverhead = 12
	// HeaderSize is the size of a RecordBatch v2 header, up to and
	// including the record count; the records follow it.
	HeaderSize = 61
	// minBatchLength is the smallest length field a batch of any magic may
	// have (Kafka's LegacyRecord.RECORD_OVERHEAD_V0); below it the framing
	// is corrupt.
	minBatchLength = 14
)

// Magic is the only batch format version this package reads and writes.
const Magic = 2

// Values meaning "none" in batch and record fields.
const (
	NoProducerID           int64 = -1
	NoProducerEpoch        int16 = -1
	NoSequence             int32 = -1
	NoPartitionLeaderEpoch int32 = -1
	NoTimestamp            int64 = -1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// TimestampType says what a batch's timestamps mean: the producer's
// CreateTime or the broker's LogAppendTime (attribute bit 3).
type TimestampType int8

// The two timestamp types.
const (
	CreateTime    TimestampType = 0
	LogAppendTime TimestampType = 1
)

// String returns Kafka's name for t.
func (t TimestampType) String() string {
	if t == LogAppendTime {
		return "LogAppendTime"
	}
	return "CreateTime"
}

// Attributes is a batch's attribute field (docs/formats.md, "Attributes"). Kafka reads
// only its low byte.
type Attributes int16

// Attribute bits. They are part of the format.
const (
	AttrCodecMask        Attributes = 0x07
	AttrLogAppendTime    Attributes = 0x08
	AttrTransactional    Attributes = 0x10
	AttrControl          Attributes = 0x20
	AttrDeleteHorizonSet Attributes = 0x40
)

// Codec returns the compression codec (bits 0-2). It may be an invalid
// codec (5 to 7); see Codec.Valid.
func (a Attributes) Codec() Codec { return Codec(a & AttrCodecMask) }

// TimestampType returns the timestamp type (bit 3).
func (a Attributes) TimestampType() TimestampType {
	if a&AttrLogAppendTime != 0 {
		return LogAppendTime
	}
	return CreateTime
}

// Transactional reports bit 4: the batch is part of a transaction.
func (a Attributes) Transactional() bool { return a&AttrTransactional != 0 }

// Control reports bit 5: the batch holds control records (transaction
// markers), not user data.
func (a Attributes) Control() bool { return a&AttrControl != 0 }

// DeleteHorizonSet reports bit 6: the log cleaner has set the batch's base
// timestamp to its delete horizon.
func (a Attributes) DeleteHorizonSet() bool { return a&AttrDeleteHorizonSet != 0 }

// Batch is a view over the bytes of one RecordBatch v2, as ParseBatch and
// BatchIter return it: at least HeaderSize bytes long, and exactly as long
// as its length field says. Its accessors read the caller's bytes; nothing
// is copied, and the Set methods write into them. A Batch that did not come
// from ParseBatch or BatchIter must be checked the same way first.
//
// Layout (all integers big-endian; the CRC covers bytes 21 to the end):
//
//	 0  baseOffset            int64
//	 8  length                int32   bytes after this field
//	12  partitionLeaderEpoch  int32
//	16  magic                 int8    2
//	17  crc                   uint32  CRC32C of [21, end)
//	21  attributes            int16
//	23  lastOffsetDelta       int32
//	27  baseTimestamp         int64
//	35  maxTimestamp          int64
//	43  producerId            int64
//	51  producerEpoch         int16
//	53  baseSequence          int32
//	57  recordsCount          int32
//	61  records               raw, or one compressed stream
type Batch []byte

// ParseBatch returns a view of the batch at the start of b, which must hold
// it whole; bytes after it are ignored. It checks the framing and the magic,
// not the CRC (see Batch.CheckCRC) or the records.
func ParseBatch(b []byte) (Batch, error) {
	if len(b) < LogOverhead {
		return nil, kafkaerr.New(kafkaerr.CorruptMessage, "%d bytes are too few for a batch", len(b))
	}
	n, err := nextFrame(b)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		size, _ := frameSize(b)
		return nil, kafkaerr.New(kafkaerr.CorruptMessage, "batch of %d bytes is truncated to %d", size, len(b))
	}
	return checkBatch(b[:n])
}

// frameSize reads the length field of the batch at the start of b (which
// holds at least LogOverhead bytes) and returns the batch's total size, or a
// corrupt-message error when the length is below Kafka's minimum.
func frameSize(b []byte) (int64, error) {
	length := int32(binary.BigEndian.Uint32(b[lengthOffset:]))
	if length < minBatchLength {
		return 0, kafkaerr.New(kafkaerr.CorruptMessage, "batch length %d is less than the minimum %d", length, minBatchLength)
	}
	return int64(length) + LogOverhead, nil
}

// checkBatch checks the magic and minimum size of a batch that nextFrame
// has framed.
func checkBatch(b []byte) (Batch, error) {
	if magic := int8(b[magicOffset]); magic != Magic {
		return nil, kafkaerr.New(kafkaerr.CorruptMessage, "magic %d (the legacy message format) is not supported; only magic 2", magic)
	}
	if len(b) < HeaderSize {
		return nil, kafkaerr.New(kafkaerr.CorruptMessage, "batch of %d bytes is shorter than the %d-byte header", len(b), HeaderSize)
	}
	return Batch(b), nil
}

// Size returns the batch's size in bytes, LogOverhead included.
func (b Batch) Size() int { return len(b) }

// BaseOffset returns the offset of the batch's first record. Producers send 0.
func (b Batch) BaseOffset() int64 { return int64(binary.BigEndian.Uint64(b[baseOffsetOffset:])) }

// Length returns the length field: the batch's size minus LogOverhead.
func (b Batch) Length() int32 { return int32(binary.BigEndian.Uint32(b[lengthOffset:])) }

// PartitionLeaderEpoch returns the leader epoch the batch was appended in,
// or NoPartitionLeaderEpoch as producers send it.
func (b Batch) PartitionLeaderEpoch() int32 {
	return int32(binary.BigEndian.Uint32(b[leaderEpochOffset:]))
}

// Magic returns the format version, 2.
func (b Batch) Magic() int8 { return int8(b[magicOffset]) }

// CRC returns the stored checksum.
func (b Batch) CRC() uint32 { return binary.BigEndian.Uint32(b[crcOffset:]) }

// Attributes returns the attribute field.
func (b Batch) Attributes() Attributes {
	return Attributes(binary.BigEndian.Uint16(b[attributesOffset:]))
}

// Codec returns the compression codec of the records section.
func (b Batch) Codec() Codec { return b.Attributes().Codec() }

// TimestampType returns the batch's timestamp type.
func (b Batch) TimestampType() TimestampType { return b.Attributes().TimestampType() }

// Transactional reports whether the batch is part of a transaction.
func (b Batch) Transactional() bool { return b.Attributes().Transactional() }

// Control reports whether the batch holds control records.
func (b Batch) Control() bool { return b.Attributes().Control() }

// LastOffsetDelta returns the last offset minus the base offset. Compaction
// preserves it even when trailing records are removed.
func (b Batch) LastOffsetDelta() int32 {
	return int32(binary.BigEndian.Uint32(b[lastOffsetDeltaOffset:]))
}

// BaseTimestamp returns the field records' timestamp deltas are relative to.
// When DeleteHorizonSet, it holds the delete horizon instead.
func (b Batch) BaseTimestamp() int64 { return int64(binary.BigEndian.Uint64(b[baseTimestampOffset:])) }

// DeleteHorizon returns the delete horizon the log cleaner set, in
// milliseconds, and whether it set one.
func (b Batch) DeleteHorizon() (int64, bool) {
	if !b.Attributes().DeleteHorizonSet() {
		return NoTimestamp, false
	}
	return b.BaseTimestamp(), true
}

// MaxTimestamp returns the greatest record timestamp (CreateTime) or the
// broker's append time (LogAppendTime).
func (b Batch) MaxTimestamp() int64 { return int64(binary.BigEndian.Uint64(b[maxTimestampOffset:])) }

// ProducerID returns the producer id, or NoProducerID.
func (b Batch) ProducerID() int64 { return int64(binary.BigEndian.Uint64(b[producerIDOffset:])) }

// HasProducerID reports whether the batch has a producer id (it is >= 0).
func (b Batch) HasProducerID() bool { return b.ProducerID() > NoProducerID }

// ProducerEpoch returns the producer epoch, or NoProducerEpoch.
func (b Batch) ProducerEpoch() int16 { return int16(binary.BigEndian.Uint16(b[producerEpochOffset:])) }

// BaseSequence returns the sequence number of the first record, or
// NoSequence.
func (b Batch) BaseSequence() int32 { return int32(binary.BigEndian.Uint32(b[baseSequenceOffset:])) }

// NumRecords returns the record count field.
func (b Batch) NumRecords() int32 { return int32(binary.BigEndian.Uint32(b[recordsCountOffset:])) }

// RecordsData returns the records section: raw records, or one compressed
// stream. It aliases the batch.
func (b Batch) RecordsData() []byte { return b[HeaderSize:] }

// LastOffset returns BaseOffset + LastOffsetDelta.
func (b Batch) LastOffset() int64 { return b.BaseOffset() + int64(b.LastOffsetDelta()) }

// NextOffset returns LastOffset + 1: the offset after the batch.
func (b Batch) NextOffset() int64 { return b.LastOffset() + 1 }

// LastSequence returns the sequence number of the last record, wrapping
// from MaxInt32 to 0 as Kafka does, or NoSequence when the batch has none.
func (b Batch) LastSequence() int32 {
	seq := b.BaseSequence()
	if seq == NoSequence {
		return NoSequence
	}
	return IncrementSequence(seq, b.LastOffsetDelta())
}

// IncrementSequence returns seq advanced by inc, wrapping past MaxInt32 to
// 0 as Kafka's DefaultRecordBatch.incrementSequence does.
func IncrementSequence(seq, inc int32) int32 {
	const maxInt32 = 1<<31 - 1
	if seq > maxInt32-inc {
		return inc - (maxInt32 - seq) - 1
	}
	return seq + inc
}

// ComputeCRC returns the CRC32C of bytes [21, end): what CRC should hold.
func (b Batch) ComputeCRC() uint32 { return crc32.Checksum(b[attributesOffset:], castagnoli) }

// CheckCRC returns a CORRUPT_MESSAGE error if the stored CRC does not match
// the bytes.
func (b Batch) CheckCRC() error {
	if stored, computed := b.CRC(), b.ComputeCRC(); stored != computed {
		return kafkaerr.New(kafkaerr.CorruptMessage, "batch CRC %08x does not match computed %08x", stored, computed)
	}
	return nil
}

// SetBaseOffset writes the base offset, as a Kafka leader does on append.
// The CRC does not cover it and is left alone.
func (b Batch) SetBaseOffset(offset int64) {
	binary.BigEndian.PutUint64(b[baseOffsetOffset:], uint64(offset))
}

// SetPartitionLeaderEpoch writes the partition leader epoch, as a Kafka
// leader does on append. The CRC does not cover it and is left alone.
func (b Batch) SetPartitionLeaderEpoch(epoch int32) {
	binary.BigEndian.PutUint32(b[leaderEpochOffset:], uint32(epoch))
}

// SetMaxTimestamp sets the timestamp type and max timestamp and recomputes
// the CRC, as Kafka's DefaultRecordBatch.setMaxTimestamp does; when both
// already hold those values it changes nothing. A leader calls it on every
// append: with LogAppendTime and the append time on LogAppendTime topics,
// with CreateTime and the greatest record timestamp (ValidateResult's
// MaxTimestamp) on the others, since Kafka never trusts the producer's
// value.
func (b Batch) SetMaxTimestamp(t TimestampType, ts int64) {
	if b.TimestampType() == t && b.MaxTimestamp() == ts {
		return
	}
	attrs := b.Attributes() &^ AttrLogAppendTime
	if t == LogAppendTime {
		attrs |= AttrLogAppendTime
	}
	binary.BigEndian.PutUint16(b[attributesOffset:], uint16(attrs))
	binary.BigEndian.PutUint64(b[maxTimestampOffset:], uint64(ts))
	binary.BigEndian.PutUint32(b[crcOffset:], b.ComputeCRC())
}

// SetLogAppendTime stamps the batch with the broker's append time: it sets
// attribute bit 3, writes ts as the max timestamp and recomputes the CRC.
// The base timestamp and the records' deltas are left alone: readers use
// the max timestamp for every record of a LogAppendTime batch.
func (b Batch) SetLogAppendTime(ts int64) { b.SetMaxTimestamp(LogAppendTime, ts) }
