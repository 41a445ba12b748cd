package kbatch

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/diskless-go/diskless/kafkaerr"
)

// Defaults of the topic settings that ValidateOptions mirrors; they are
// Apache Kafka 4's.
const (
	// DefaultMaxMessageBytes is max.message.bytes: 1 MiB plus LogOverhead.
	DefaultMaxMessageBytes = 1048588
	// DefaultSegmentBytes is segment.bytes: 1 GiB. It is the module's one
	// constant for it (segment, coordinator, replica and kafkaserver use it).
	DefaultSegmentBytes = 1 << 30
	// DefaultSegmentTime is segment.ms: 7 days. Like DefaultSegmentBytes
	// and DefaultRetentionTime, the module's one constant for it (segment
	// and the coordinator's records use it; kafkaserver's config table
	// shows it).
	DefaultSegmentTime = 7 * 24 * time.Hour
	// DefaultRetentionTime is retention.ms: 7 days.
	DefaultRetentionTime = 7 * 24 * time.Hour
	// DefaultTimestampAfterMax is message.timestamp.after.max.ms: 1 hour
	// (KIP-1030). message.timestamp.before.max.ms is unbounded by default.
	DefaultTimestampAfterMax = time.Hour
)

// TopicCompression is a topic's compression.type. The zero value,
// CompressionProducer, keeps each batch's own codec; TopicCodec(c) makes
// every batch use c, so a batch in another codec is rebuilt.
type TopicCompression struct {
	codec Codec
	set   bool
}

// CompressionProducer is the default compression.type, "producer".
var CompressionProducer = TopicCompression{}

// TopicCodec returns the compression.type that recompresses to c.
func TopicCodec(c Codec) TopicCompression { return TopicCompression{codec: c, set: true} }

// Codec returns the codec batches must have, and false for "producer".
func (t TopicCompression) Codec() (Codec, bool) { return t.codec, t.set }

// String returns the compression.type value: "producer", "uncompressed",
// "gzip", "snappy", "lz4" or "zstd".
func (t TopicCompression) String() string {
	switch {
	case !t.set:
		return "producer"
	case t.codec == CodecNone:
		return "uncompressed"
	}
	return t.codec.String()
}

// ParseTopicCompression parses a compression.type value as Kafka spells it.
func ParseTopicCompression(s string) (TopicCompression, error) {
	switch strings.ToLower(s) {
	case "producer":
		return CompressionProducer, nil
	case "uncompressed", "none":
		return TopicCodec(CodecNone), nil
	}
	for _, c := range Codecs[1:] {
		if strings.EqualFold(s, c.String()) {
			return TopicCodec(c), nil
		}
	}
	return TopicCompression{}, fmt.Errorf("kbatch: unknown compression.type %q", s)
}

// ValidateOptions are the topic settings and request facts that Kafka's
// produce path validates a batch against. The zero value holds Kafka's
// defaults; a nil *ValidateOptions means the zero value.
type ValidateOptions struct {
	// MaxMessageBytes is the topic's max.message.bytes, the largest batch
	// accepted, LogOverhead included. 0 means DefaultMaxMessageBytes.
	MaxMessageBytes int
	// SegmentBytes is the topic's record.bytes; an append larger than it
	// is RECORD_LIST_TOO_LARGE. 0 means DefaultSegmentBytes.
	SegmentBytes int
	// Compacted says the topic's cleanup.policy contains "compact": every
	// record needs a key.
	Compacted bool
	// TimestampType is the topic's message.timestamp.type.
	TimestampType TimestampType
	// TimestampBeforeMax is message.timestamp.before.max.ms: how far in the
	// past a CreateTime timestamp may be. 0 or negative means unbounded,
	// Kafka's default.
	TimestampBeforeMax time.Duration
	// TimestampAfterMax is message.timestamp.after.max.ms: how far in the
	// future a CreateTime timestamp may be. 0 means
	// DefaultTimestampAfterMax; negative means unbounded.
	TimestampAfterMax time.Duration
	// Now is the broker's clock for the timestamp bounds and for
	// LogAppendTime. The zero value means time.Now().
	Now time.Time
	// ProduceVersion is the produce request's version; below 7, zstd is
	// UNSUPPORTED_COMPRESSION_TYPE. 0 means a current version.
	ProduceVersion int16
	// Compression is the topic's compression.type.
	Compression TopicCompression
	// MaxUncompressedBytes bounds the decompressed size of a compressed
	// batch's records; 0 means DefaultMaxUncompressedBytes.
	MaxUncompressedBytes int
}

// resolved is ValidateOptions with the defaults applied.
type resolved struct {
	maxMessageBytes, segmentBytes, maxUncompressed int
	before, after                                  int64
	now                                            int64
	o                                              *ValidateOptions
}

var zeroOptions ValidateOptions

func resolve(o *ValidateOptions) resolved {
	if o == nil {
		o = &zeroOptions
	}
	r := resolved{
		maxMessageBytes: o.MaxMessageBytes,
		segmentBytes:    o.SegmentBytes,
		maxUncompressed: o.MaxUncompressedBytes,
		before:          math.MaxInt64,
		after:           DefaultTimestampAfterMax.Milliseconds(),
		o:               o,
	}
	if r.maxMessageBytes <= 0 {
		r.maxMessageBytes = DefaultMaxMessageBytes
	}
	if r.segmentBytes <= 0 {
		r.segmentBytes = DefaultSegmentBytes
	}
	if r.maxUncompressed <= 0 {
		r.maxUncompressed = DefaultMaxUncompressedBytes
	}
	if o.TimestampBeforeMax > 0 {
		r.before = o.TimestampBeforeMax.Milliseconds()
	}
	switch {
	case o.TimestampAfterMax > 0:
		r.after = o.TimestampAfterMax.Milliseconds()
	case o.TimestampAfterMax < 0:
		r.after = math.MaxInt64
	}
	if o.Now.IsZero() {
		r.now = time.Now().UnixMilli() // a codec takes no Clock: the Broker passes its clock's time as Now
	} else {
		r.now = o.Now.UnixMilli()
	}
	return r
}

// ValidateResult is what Validate learns of a valid batch.
type ValidateResult struct {
	// Batch is the one batch of the request, a view into the input. Bytes
	// of a partial batch after it are not part of it: Kafka trims them.
	Batch Batch
	// MaxTimestamp is the greatest record timestamp, or NoTimestamp. On a
	// CreateTime topic it is what the leader writes as the batch's max
	// timestamp (Batch.SetMaxTimestamp).
	MaxTimestamp int64
	// MaxTimestampIndex is the position of the first record with
	// MaxTimestamp, or -1.
	MaxTimestampIndex int32
	// UncompressedBytes is the size of the records section decompressed.
	UncompressedBytes int
	// NeedsRebuild says Kafka would not append the batch as it is but
	// rebuild it (see Rebuild): the topic's compression.type names another
	// codec, or a compressed batch's records do not have offset deltas
	// 0, 1, 2, ...
	NeedsRebuild bool
}

// Validate checks the records of one partition of a produce request as a
// Kafka leader does before it appends them (docs/formats.md, "Produce validation"), in Kafka's
// order, and returns the first failure as an *Error with Kafka's code:
//
//   - framing: a batch length below 14 or a magic outside 0..2 is
//     CORRUPT_MESSAGE; no whole batch, a magic other than 2 or more than one
//     batch is INVALID_RECORD; zstd in a produce request below v7 is
//     UNSUPPORTED_COMPRESSION_TYPE;
//   - a base offset other than 0 is INVALID_RECORD; a batch larger than
//     max.message.bytes is MESSAGE_TOO_LARGE; a bad CRC or a batch shorter
//     than its header is CORRUPT_MESSAGE; an unknown codec is
//     UNKNOWN_SERVER_ERROR;
//   - a record count that is not positive or not lastOffsetDelta+1, the
//     control bit, and a producer id without a base sequence are
//     INVALID_RECORD;
//   - a malformed record, a count that does not match the records, and
//     bytes after the last record are INVALID_RECORD;
//   - a null key on a compacted topic (INVALID_RECORD) and a timestamp out
//     of bounds or a LogAppendTime batch from a client (INVALID_TIMESTAMP)
//     are collected for every record in RecordErrors, and fail the batch;
//   - an append larger than record.bytes is RECORD_LIST_TOO_LARGE.
//
// Validate reads the input and changes nothing; an uncompressed batch is
// validated without allocating. A compressed batch's records are read as
// they come out of the decompressor, as Kafka's LogValidator reads them:
// validating it holds the decoder's state, a 32 KiB read buffer and the
// record being read, not the whole decompressed payload (see
// DecompressionBytes for the bound). So a bad record is refused before a
// bad end of the compressed payload is seen, as in Kafka. The input must
// hold exactly what the request carried for the partition.
func Validate(records []byte, opts *ValidateOptions) (ValidateResult, error) {
	return validate(records, opts, false)
}

// validate is Validate; whole decompresses a compressed batch's records
// whole before it reads them, as Validate did before it streamed them
// (the tests' reference).
func validate(records []byte, opts *ValidateOptions, whole bool) (ValidateResult, error) {
	o := resolve(opts)
	res := ValidateResult{MaxTimestamp: NoTimestamp, MaxTimestampIndex: -1}

	// ProduceRequest.validateRecords: one batch of magic 2.
	n, err := nextFrame(records)
	if err != nil {
		return res, err
	}
	if n == 0 {
		return res, kafkaerr.New(kafkaerr.InvalidRecord, "produce requests must have at least one record batch per partition")
	}
	first := records[:n]
	if magic := int8(first[magicOffset]); magic != Magic {
		return res, kafkaerr.New(kafkaerr.InvalidRecord, "produce requests must have only magic 2 record batches, not magic %d", magic)
	}
	codec := Attributes(binary.BigEndian.Uint16(first[attributesOffset:])).Codec()
	if v := o.o.ProduceVersion; v > 0 && v < 7 && codec == CodecZstd {
		return res, kafkaerr.New(kafkaerr.UnsupportedCompressionType, "produce requests below version 7 (this one is %d) may not use zstd", v)
	}
	if m, err := nextFrame(records[n:]); err != nil {
		return res, err
	} else if m > 0 {
		return res, kafkaerr.New(kafkaerr.InvalidRecord, "produce requests may hold exactly one record batch per partition")
	}

	// UnifiedLog.analyzeAndValidateRecords.
	if off := int64(binary.BigEndian.Uint64(first[baseOffsetOffset:])); off != 0 {
		return res, kafkaerr.New(kafkaerr.InvalidRecord, "the base offset of a produced batch must be 0, not %d", off)
	}
	if len(first) > o.maxMessageBytes {
		return res, kafkaerr.New(kafkaerr.MessageTooLarge, "the batch of %d bytes exceeds max.message.bytes %d", len(first), o.maxMessageBytes)
	}
	if len(first) < HeaderSize {
		return res, kafkaerr.New(kafkaerr.CorruptMessage, "batch of %d bytes is shorter than the %d-byte header", len(first), HeaderSize)
	}
	b := Batch(first)
	if err := b.CheckCRC(); err != nil {
		return res, err
	}
	if !codec.Valid() {
		return res, kafkaerr.New(kafkaerr.UnknownServerError, "unknown compression type id %d", int8(codec))
	}

	// LogValidator.validateBatch.
	if b.LastOffsetDelta() < 0 {
		return res, kafkaerr.New(kafkaerr.InvalidRecord, "batch has an invalid offset range [0, %d]", b.LastOffsetDelta())
	}
	count := b.NumRecords()
	if count <= 0 {
		return res, kafkaerr.New(kafkaerr.InvalidRecord, "invalid reported count for record batch: %d", count)
	}
	if int64(b.LastOffsetDelta())+1 != int64(count) {
		return res, kafkaerr.New(kafkaerr.InvalidRecord, "inconsistent batch offset range [0, %d] and count of records %d", b.LastOffsetDelta(), count)
	}
	if b.Control() {
		return res, kafkaerr.New(kafkaerr.InvalidRecord, "clients are not allowed to write control records")
	}
	if b.HasProducerID() && b.BaseSequence() < 0 {
		return res, kafkaerr.New(kafkaerr.InvalidRecord, "invalid sequence number %d in a batch with producer id %d", b.BaseSequence(), b.ProducerID())
	}

	// The records.
	target, recompress := o.o.Compression.Codec()
	if !recompress {
		target = codec
	}
	data := b.RecordsData()
	var stream *recordStream // the records as they are decompressed
	switch {
	case codec != CodecNone && !whole:
		st, err := openRecordStream(data, codec, o.maxUncompressed)
		if err != nil {
			return res, decompressError(codec, o.maxUncompressed, err)
		}
		defer st.Close()
		stream, data = st, nil
	case codec != CodecNone:
		pooled := bufPool.Get().(*[]byte)
		defer func() { bufPool.Put(pooled) }()
		out, err := appendDecompressed((*pooled)[:0], data, codec, o.maxUncompressed)
		if cap(out) <= maxPooledBuffer {
			*pooled = out[:0]
		}
		if err != nil {
			return res, decompressError(codec, o.maxUncompressed, err)
		}
		data = out
	}
	res.UncompressedBytes = len(data)
	// Kafka checks inner offsets only on its compressed path, taken
	// when the batch or the topic's codec is compressed.
	checkDeltas := codec != CodecNone || target != CodecNone
	res.NeedsRebuild = target != codec

	base := newRecordBase(b)
	lat := base.logAppendTime
	var recordErrors []kafkaerr.RecordError
	timestampError := false
	var r Record
	for i := int32(0); i < count; i++ {
		if stream != nil {
			if err := stream.record(&base, &r); err != nil {
				return res, err
			}
		} else {
			n, err := decodeRecord(data, &base, &r)
			if err != nil {
				return res, err
			}
			data = data[n:]
		}
		switch ts := r.Timestamp; {
		case o.o.Compacted && r.Key == nil:
			recordErrors = append(recordErrors, kafkaerr.RecordError{BatchIndex: int(i), Message: "compacted topic cannot accept a record without a key"})
		case o.o.TimestampType == CreateTime && ts != NoTimestamp:
			if diff := o.now - ts; diff > o.before || -diff > o.after {
				timestampError = true
				recordErrors = append(recordErrors, kafkaerr.RecordError{BatchIndex: int(i), Message: timestampMessage(ts, &o)})
			}
		case lat:
			timestampError = true
			recordErrors = append(recordErrors, kafkaerr.RecordError{BatchIndex: int(i), Message: "producer should not set timestamp type to LogAppendTime"})
		}
		if r.Timestamp > res.MaxTimestamp {
			res.MaxTimestamp, res.MaxTimestampIndex = r.Timestamp, i
		}
		if checkDeltas && r.OffsetDelta != i {
			res.NeedsRebuild = true
		}
	}
	left := len(data)
	if stream != nil {
		var err error
		if left, err = stream.rest(); err != nil {
			return res, err
		}
		res.UncompressedBytes = stream.total
	}
	if left != 0 {
		return res, kafkaerr.New(kafkaerr.InvalidRecord, "incorrect declared batch size: %d bytes remain after %d records", left, count)
	}
	if recordErrors != nil {
		if timestampError {
			return res, &kafkaerr.Error{Code: kafkaerr.InvalidTimestamp, Message: "one or more records have been rejected due to invalid timestamp", RecordErrors: recordErrors}
		}
		return res, &kafkaerr.Error{Code: kafkaerr.InvalidRecord, Message: fmt.Sprintf("one or more records have been rejected due to %d record errors", len(recordErrors)), RecordErrors: recordErrors}
	}

	// UnifiedLog.append.
	if len(first) > o.segmentBytes {
		return res, kafkaerr.New(kafkaerr.RecordListTooLarge, "the append of %d bytes exceeds record.bytes %d", len(first), o.segmentBytes)
	}
	res.Batch = b
	return res, nil
}

func timestampMessage(ts int64, o *resolved) string {
	lo, hi := o.now-o.before, o.now+o.after
	if o.before == math.MaxInt64 {
		lo = math.MinInt64
	}
	if o.after == math.MaxInt64 {
		hi = math.MaxInt64
	}
	return fmt.Sprintf("timestamp %d is out of range: it must be within [%d, %d]", ts, lo, hi)
}

// DecompressionBytes returns the most memory that Validate may allocate to
// decompress records, a produce request's records for one partition, with
// ValidateOptions.MaxUncompressedBytes limit (0: the default): nothing for
// an uncompressed batch (or one too short to say). Validate reads the
// records as they come out of the decompressor and holds none of them,
// however large (it skips keys, values and headers as they stream by), so
// what it allocates is the decoder's own state: gzip's 32 KiB window; an
// lz4 block of up to 4 MiB; a snappy block, up to the limit (a raw block,
// or a crafted xerial chunk, is decoded whole); zstd's window, up to the
// 8 MiB that pooled decoders keep or what a larger frame declares (within
// what the limit allows); and a 32 KiB read buffer, with room to spare
// for the readers themselves (streamOverhead). A caller that bounds the
// memory of many validations together takes this much from its budget
// before it calls Validate.
func DecompressionBytes(records []byte, limit int) int64 {
	if limit <= 0 {
		limit = DefaultMaxUncompressedBytes
	}
	if len(records) < HeaderSize {
		return 0
	}
	switch Attributes(binary.BigEndian.Uint16(records[attributesOffset:])).Codec() {
	case CodecNone:
		return 0
	case CodecGzip:
		return streamOverhead
	case CodecSnappy:
		return int64(limit) + streamOverhead
	case CodecLZ4:
		return 4<<20 + streamOverhead
	case CodecZstd:
		allowed := min(zstdMaxWindow, max(zstdPooledWindow, uint64(limit)+zstdMaxBlock))
		return int64(allowed) + zstdMaxBlock + streamOverhead
	}
	return 0 // an unknown codec is refused before anything is decompressed
}

// streamOverhead bounds what a streaming validation allocates besides a
// block or a window: the read buffer, gzip's window, the readers.
const streamOverhead = 256 << 10

// maxPooledBuffer is the largest decompression buffer kept for reuse.
const maxPooledBuffer = 4 << 20

var bufPool = sync.Pool{New: func() any { return new([]byte) }}
