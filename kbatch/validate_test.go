package kbatch

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kafkaerr"
)

var validateNow = time.UnixMilli(vectorTimestamp + 1000)

// fixCRC rewrites the length field and CRC of the batch at the start of raw
// after a test has edited it.
func fixCRC(raw []byte) []byte {
	binary.BigEndian.PutUint32(raw[lengthOffset:], uint32(len(raw)-LogOverhead))
	binary.BigEndian.PutUint32(raw[crcOffset:], Batch(raw).ComputeCRC())
	return raw
}

// edit returns a copy of batch with f applied and the CRC fixed.
func edit(batch []byte, f func(b []byte) []byte) []byte {
	return fixCRC(f(append([]byte{}, batch...)))
}

func put32(off int, v int32) func([]byte) []byte {
	return func(b []byte) []byte { binary.BigEndian.PutUint32(b[off:], uint32(v)); return b }
}

// TestValidateKafkaRows has a case for every row of docs/formats.md, "Produce validation", in
// order, with the code Apache Kafka gives. Row 16 (producer state) belongs
// to the coordinator.
func TestValidateKafkaRows(t *testing.T) {
	ok := buildBatch(t, CodecNone, 3, nil)
	zstd := buildBatch(t, CodecZstd, 3, nil)
	legacy := edit(ok, func(b []byte) []byte { b[magicOffset] = 1; return b })
	nullKey := func() []byte {
		b := NewBuilder(CodecNone)
		b.Append(vectorTimestamp, []byte("k"), []byte("v"))
		b.Append(vectorTimestamp, nil, []byte("v"))
		b.Append(vectorTimestamp, nil, nil)
		out, _ := b.Build(nil)
		return out
	}()
	stamped := func(ts ...int64) []byte {
		b := NewBuilder(CodecNone)
		for _, t := range ts {
			b.Append(t, []byte("k"), []byte("v"))
		}
		out, _ := b.Build(nil)
		return out
	}
	// firstRecord is where the first record's length varint sits.
	const firstRecord = HeaderSize

	cases := []struct {
		row    string
		name   string
		input  []byte
		opts   *ValidateOptions
		code   kafkaerr.Code
		recErr []int // indexes of records with errors
	}{
		{row: "1", name: "no batch at all", input: nil, code: kafkaerr.InvalidRecord},
		{row: "1", name: "only a partial batch", input: ok[:30], code: kafkaerr.InvalidRecord},
		{row: "1", name: "first batch is not magic 2", input: legacy, code: kafkaerr.InvalidRecord},
		{row: "1", name: "two batches", input: append(append([]byte{}, ok...), ok...), code: kafkaerr.InvalidRecord},
		{row: "1b", name: "zstd below produce v7", input: zstd, opts: &ValidateOptions{ProduceVersion: 6}, code: kafkaerr.UnsupportedCompressionType},
		{row: "1b", name: "zstd at produce v7", input: zstd, opts: &ValidateOptions{ProduceVersion: 7}},
		{row: "1c", name: "batch length below 14", input: put32(lengthOffset, 13)(bytes.Clone(ok)), code: kafkaerr.CorruptMessage},
		{row: "1c", name: "magic 3", input: edit(ok, func(b []byte) []byte { b[magicOffset] = 3; return b }), code: kafkaerr.CorruptMessage},
		{row: "1c", name: "corrupt framing after the batch", input: append(append([]byte{}, ok...), edit(ok, func(b []byte) []byte { b[magicOffset] = 9; return b })...), code: kafkaerr.CorruptMessage},
		{row: "2", name: "base offset not 0", input: edit(ok, func(b []byte) []byte { Batch(b).SetBaseOffset(5); return b }), code: kafkaerr.InvalidRecord},
		{row: "3", name: "larger than max.message.bytes", input: ok, opts: &ValidateOptions{MaxMessageBytes: len(ok) - 1}, code: kafkaerr.MessageTooLarge},
		{row: "3", name: "exactly max.message.bytes", input: ok, opts: &ValidateOptions{MaxMessageBytes: len(ok)}},
		{row: "4", name: "CRC mismatch", input: func() []byte { b := append([]byte{}, ok...); b[len(b)-1] ^= 1; return b }(), code: kafkaerr.CorruptMessage},
		{row: "4", name: "shorter than the header", input: fixCRC(append([]byte{}, ok[:40]...)), code: kafkaerr.CorruptMessage},
		{row: "4b", name: "unknown codec 5 (Kafka: IllegalArgumentException)", input: edit(ok, func(b []byte) []byte { b[attributesOffset+1] |= 5; return b }), code: kafkaerr.UnknownServerError},
		{row: "5", name: "more than one batch", input: append(append([]byte{}, zstd...), ok...), code: kafkaerr.InvalidRecord},
		{row: "6", name: "second batch of another magic", input: append(append([]byte{}, ok...), legacy...), code: kafkaerr.InvalidRecord},
		{row: "7", name: "negative last offset delta", input: edit(ok, put32(lastOffsetDeltaOffset, -1)), code: kafkaerr.InvalidRecord},
		{row: "7", name: "record count 0", input: edit(ok, put32(recordsCountOffset, 0)), code: kafkaerr.InvalidRecord},
		{row: "7", name: "count is not lastOffsetDelta+1", input: edit(ok, put32(recordsCountOffset, 2)), code: kafkaerr.InvalidRecord},
		{row: "8", name: "control bit from a client", input: edit(ok, func(b []byte) []byte { b[attributesOffset+1] |= byte(AttrControl); return b }), code: kafkaerr.InvalidRecord},
		{row: "9", name: "producer id without a sequence", input: buildBatch(t, CodecNone, 1, func(b *Builder) { b.SetProducer(7, 0, -1) }), code: kafkaerr.InvalidRecord},
		{row: "9", name: "producer id with a sequence", input: buildBatch(t, CodecNone, 1, func(b *Builder) { b.SetProducer(7, 0, 0) })},
		{row: "9", name: "no producer id, sequence 0 (franz-go)", input: buildBatch(t, CodecNone, 1, func(b *Builder) { b.SetProducer(-1, -1, 0) })},
		{row: "10", name: "record longer than the batch", input: edit(ok, func(b []byte) []byte { b[firstRecord] = 0x7e; return b }), code: kafkaerr.InvalidRecord},
		{row: "10", name: "record length negative", input: edit(ok, func(b []byte) []byte { b[firstRecord] = 0x01; return b }), code: kafkaerr.InvalidRecord},
		{row: "10", name: "varint longer than 5 bytes", input: edit(ok, func(b []byte) []byte {
			return append(append(b[:firstRecord:firstRecord], 0x80, 0x80, 0x80, 0x80, 0x80, 0x00), b[firstRecord:]...)
		}), code: kafkaerr.InvalidRecord},
		{row: "10", name: "fewer records than the count", input: edit(ok, func(b []byte) []byte {
			put32(recordsCountOffset, 4)(b)
			return put32(lastOffsetDeltaOffset, 3)(b)
		}), code: kafkaerr.InvalidRecord},
		{row: "10", name: "bytes after the last record", input: edit(ok, func(b []byte) []byte { return append(b, 0) }), code: kafkaerr.InvalidRecord},
		{row: "10", name: "truncated compressed records", input: edit(zstd, func(b []byte) []byte { return b[:len(b)-4] }), code: kafkaerr.InvalidRecord},
		{row: "10b", name: "undecodable compressed records (Kafka: KafkaException)", input: edit(zstd, func(b []byte) []byte {
			for i := HeaderSize; i < len(b); i++ {
				b[i] = 0xAA
			}
			return b
		}), code: kafkaerr.UnknownServerError},
		{row: "11", name: "record attributes set: no inner compression in v2, accepted", input: edit(ok, func(b []byte) []byte { b[firstRecord+1] = 0x07; return b })},
		{row: "12", name: "null keys on a compacted topic", input: nullKey, opts: &ValidateOptions{Compacted: true}, code: kafkaerr.InvalidRecord, recErr: []int{1, 2}},
		{row: "12", name: "null keys on a deleting topic", input: nullKey},
		{row: "13", name: "timestamp too old", input: stamped(vectorTimestamp, vectorTimestamp-5000), opts: &ValidateOptions{Now: validateNow, TimestampBeforeMax: 5 * time.Second}, code: kafkaerr.InvalidTimestamp, recErr: []int{1}},
		{row: "13", name: "timestamp at the before bound", input: stamped(vectorTimestamp - 4000), opts: &ValidateOptions{Now: validateNow, TimestampBeforeMax: 5 * time.Second}},
		{row: "13", name: "timestamp past the default after bound (1 h)", input: stamped(vectorTimestamp, vectorTimestamp+2*3600_000), opts: &ValidateOptions{Now: validateNow}, code: kafkaerr.InvalidTimestamp, recErr: []int{1}},
		{row: "13", name: "after bound off", input: stamped(vectorTimestamp + 2*3600_000), opts: &ValidateOptions{Now: validateNow, TimestampAfterMax: -1}},
		{row: "13", name: "timestamp -1 is not checked", input: stamped(-1), opts: &ValidateOptions{Now: validateNow, TimestampBeforeMax: time.Millisecond}},
		{row: "13", name: "key and timestamp errors: INVALID_TIMESTAMP wins", input: func() []byte {
			b := NewBuilder(CodecNone)
			b.Append(vectorTimestamp, nil, nil)
			b.Append(vectorTimestamp+2*3600_000, []byte("k"), nil)
			out, _ := b.Build(nil)
			return out
		}(), opts: &ValidateOptions{Now: validateNow, Compacted: true}, code: kafkaerr.InvalidTimestamp, recErr: []int{0, 1}},
		{row: "13b", name: "LogAppendTime bit on a LogAppendTime topic", input: buildBatch(t, CodecNone, 2, func(b *Builder) { b.SetLogAppendTime(vectorTimestamp) }), opts: &ValidateOptions{Now: validateNow, TimestampType: LogAppendTime}, code: kafkaerr.InvalidTimestamp, recErr: []int{0, 1}},
		{row: "13b", name: "LogAppendTime bit on a CreateTime topic with good timestamps (Kafka accepts)", input: buildBatch(t, CodecNone, 2, func(b *Builder) { b.SetLogAppendTime(vectorTimestamp) }), opts: &ValidateOptions{Now: validateNow}},
		{row: "13b", name: "LogAppendTime bit with timestamp -1 on a CreateTime topic", input: buildBatch(t, CodecNone, 1, func(b *Builder) { b.SetLogAppendTime(-1) }), opts: &ValidateOptions{Now: validateNow}, code: kafkaerr.InvalidTimestamp, recErr: []int{0}},
		{row: "14", name: "larger than record.bytes", input: ok, opts: &ValidateOptions{MaxMessageBytes: 1 << 20, SegmentBytes: len(ok) - 1}, code: kafkaerr.RecordListTooLarge},
		{row: "-", name: "partial batch after the batch is trimmed", input: append(append([]byte{}, ok...), ok[:20]...)},
	}
	for _, c := range cases {
		t.Run(c.row+"/"+c.name, func(t *testing.T) {
			before := bytes.Clone(c.input)
			res, err := Validate(c.input, c.opts)
			require.Equal(t, before, c.input, "Validate changed its input")
			if c.code == kafkaerr.NoError {
				require.NoError(t, err)
				require.NotNil(t, res.Batch)
				require.Equal(t, c.input[:res.Batch.Size()], []byte(res.Batch))
				return
			}
			require.Error(t, err)
			var e *kafkaerr.Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, c.code, e.Code, "%v", err)
			require.NotEmpty(t, e.Message)
			require.Equal(t, c.code == kafkaerr.CorruptMessage, e.Retriable())
			var idx []int
			for _, re := range e.RecordErrors {
				idx = append(idx, re.BatchIndex)
				require.NotEmpty(t, re.Message)
			}
			require.Equal(t, c.recErr, idx)
		})
	}
}

func TestValidateResult(t *testing.T) {
	b := NewBuilder(CodecNone)
	for _, ts := range []int64{5, 9, 3, 9, -1} {
		b.Append(vectorTimestamp+ts, []byte("k"), []byte("value"))
	}
	raw, err := b.Build(nil)
	require.NoError(t, err)
	res, err := Validate(raw, &ValidateOptions{Now: validateNow})
	require.NoError(t, err)
	require.Equal(t, int64(vectorTimestamp+9), res.MaxTimestamp)
	require.Equal(t, int32(1), res.MaxTimestampIndex, "the first record with the max")
	require.Equal(t, len(raw)-HeaderSize, res.UncompressedBytes)
	require.False(t, res.NeedsRebuild)

	// The leader's append: offset, epoch, recomputed max timestamp.
	res.Batch.SetBaseOffset(100)
	res.Batch.SetPartitionLeaderEpoch(3)
	res.Batch.SetMaxTimestamp(CreateTime, res.MaxTimestamp)
	require.NoError(t, res.Batch.CheckCRC())
}

func TestValidateNeedsRebuild(t *testing.T) {
	plain := buildBatch(t, CodecNone, 3, nil)
	gz := buildBatch(t, CodecGzip, 3, nil)

	// Inner offsets 0, 0, 0: Kafka ignores them uncompressed and rebuilds
	// compressed.
	sameDeltas := func(codec Codec) []byte {
		var rr RecordReader
		src, _ := ParseBatch(buildBatch(t, codec, 3, nil))
		require.NoError(t, rr.Reset(src))
		b := NewBuilder(codec)
		for rr.Next() {
			r := *rr.Record()
			r.OffsetDelta = 0
			b.AppendRecord(&r)
		}
		out, err := b.Build(nil)
		require.NoError(t, err)
		return out
	}

	cases := []struct {
		name  string
		input []byte
		topic TopicCompression
		want  bool
	}{
		{"uncompressed, producer", plain, CompressionProducer, false},
		{"uncompressed, uncompressed", plain, TopicCodec(CodecNone), false},
		{"uncompressed to zstd", plain, TopicCodec(CodecZstd), true},
		{"gzip, producer", gz, CompressionProducer, false},
		{"gzip, gzip", gz, TopicCodec(CodecGzip), false},
		{"gzip to lz4", gz, TopicCodec(CodecLZ4), true},
		{"gzip to uncompressed", gz, TopicCodec(CodecNone), true},
		{"uncompressed, bad deltas", sameDeltas(CodecNone), CompressionProducer, false},
		{"gzip, bad deltas", sameDeltas(CodecGzip), CompressionProducer, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opts := &ValidateOptions{Now: validateNow, Compression: c.topic}
			res, err := Validate(c.input, opts)
			require.NoError(t, err)
			require.Equal(t, c.want, res.NeedsRebuild)
			if !c.want {
				return
			}
			out, err := Rebuild(nil, res.Batch, opts)
			require.NoError(t, err)
			again, err := Validate(out, opts)
			require.NoError(t, err)
			require.False(t, again.NeedsRebuild, "a rebuilt batch needs no rebuild")
			want, _ := c.topic.Codec()
			if c.topic == CompressionProducer {
				want = res.Batch.Codec()
			}
			require.Equal(t, want, again.Batch.Codec())
			// The rebuild renumbers the inner offsets 0, 1, 2, ...
			recs := recordsOf(t, res.Batch)
			for i := range recs {
				recs[i].Offset = int64(i)
			}
			require.Equal(t, recs, recordsOf(t, again.Batch))
		})
	}
}

func TestRebuild(t *testing.T) {
	bld := NewBuilder(CodecSnappy)
	bld.SetProducer(9, 2, 40)
	bld.SetTransactional(true)
	for i := 0; i < 20; i++ {
		bld.Append(vectorTimestamp+int64(i), []byte("key"), bytes.Repeat([]byte("value"), 20))
	}
	src, err := bld.Build(nil)
	require.NoError(t, err)
	b, err := ParseBatch(src)
	require.NoError(t, err)
	_, err = Validate(src, nil)
	require.NoError(t, err)

	t.Run("keeps the producer fields", func(t *testing.T) {
		out, err := Rebuild(nil, b, &ValidateOptions{Compression: TopicCodec(CodecLZ4)})
		require.NoError(t, err)
		nb, err := ParseBatch(out)
		require.NoError(t, err)
		require.Equal(t, CodecLZ4, nb.Codec())
		require.Equal(t, int64(9), nb.ProducerID())
		require.Equal(t, int16(2), nb.ProducerEpoch())
		require.Equal(t, int32(40), nb.BaseSequence())
		require.True(t, nb.Transactional())
		require.Equal(t, b.MaxTimestamp(), nb.MaxTimestamp())
		require.Equal(t, recordsOf(t, b), recordsOf(t, nb))
	})
	t.Run("LogAppendTime topic", func(t *testing.T) {
		out, err := Rebuild(nil, b, &ValidateOptions{Compression: TopicCodec(CodecNone), TimestampType: LogAppendTime, Now: validateNow})
		require.NoError(t, err)
		nb, err := ParseBatch(out)
		require.NoError(t, err)
		require.Equal(t, LogAppendTime, nb.TimestampType())
		require.Equal(t, validateNow.UnixMilli(), nb.MaxTimestamp())
	})
	t.Run("row 15: rebuilt batch larger than max.message.bytes", func(t *testing.T) {
		dst := []byte("prefix")
		out, err := Rebuild(dst, b, &ValidateOptions{Compression: TopicCodec(CodecNone), MaxMessageBytes: len(src)})
		require.Equal(t, kafkaerr.MessageTooLarge, kafkaerr.CodeOf(err))
		require.Equal(t, []byte("prefix"), out)
	})
}

// decoded is a record's fields, for comparing batches.
type decoded struct {
	Timestamp  int64
	Offset     int64
	Key, Value []byte
	Headers    []Header
}

func recordsOf(t testing.TB, b Batch) []decoded {
	t.Helper()
	var rr RecordReader
	require.NoError(t, rr.Reset(b))
	var out []decoded
	for rr.Next() {
		r := rr.Record()
		out = append(out, decoded{r.Timestamp, r.Offset, clone(r.Key), clone(r.Value), r.AppendHeaders(nil)})
	}
	require.NoError(t, rr.Err())
	return out
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

func TestValidateOptionDefaults(t *testing.T) {
	o := resolve(nil)
	require.Equal(t, DefaultMaxMessageBytes, o.maxMessageBytes)
	require.Equal(t, DefaultSegmentBytes, o.segmentBytes)
	require.Equal(t, int64(math.MaxInt64), o.before)
	require.Equal(t, int64(3600_000), o.after)
	require.InDelta(t, time.Now().UnixMilli(), o.now, 60_000)

	for in, want := range map[string]string{"producer": "producer", "uncompressed": "uncompressed", "ZSTD": "zstd", "lz4": "lz4", "gzip": "gzip", "snappy": "snappy"} {
		tc, err := ParseTopicCompression(in)
		require.NoError(t, err)
		require.Equal(t, want, tc.String())
	}
	_, err := ParseTopicCompression("brotli")
	require.Error(t, err)
}

func TestValidateAllocs(t *testing.T) {
	raw := buildBatch(t, CodecNone, 100, nil)
	opts := &ValidateOptions{Now: validateNow, Compacted: true}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := Validate(raw, opts); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs)
}
