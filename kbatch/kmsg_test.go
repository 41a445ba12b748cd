package kbatch_test

// Differential tests against franz-go, an independent implementation of the
// same format: batches built here must decode with kmsg (and kgo's
// decompressors) to exactly what was appended, and batches built the way
// franz-go's producer builds them (pkg/kgo/sink.go appendTo) must decode
// here, and pass Validate, to exactly what franz-go encoded.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless/kbatch"
)

// kmT0 is the base timestamp of the test batches: 2023-11-14, in the past
// so that Validate's default future bound (one hour) accepts it.
const kmT0 = int64(1_700_000_000_000)

var kmCRC32C = crc32.MakeTable(crc32.Castagnoli)

// kmXerialMagic starts a snappy payload in the xerial framing.
var kmXerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// kmRecord is a record as a test appends it to a kbatch.Builder.
type kmRecord struct {
	ts      int64
	key     []byte
	value   []byte
	headers []kbatch.Header
}

// kmShape is a batch as a test builds it with a kbatch.Builder, and so
// what every header field must read back as.
type kmShape struct {
	name    string
	records []kmRecord

	idempotent    bool // SetProducer(producerID, producerEpoch, baseSequence)
	producerID    int64
	producerEpoch int16
	baseSequence  int32
	transactional bool

	logAppendTime bool // SetLogAppendTime(appendTime)
	appendTime    int64

	stored      bool // SetBaseOffset(baseOffset), SetPartitionLeaderEpoch(leaderEpoch)
	baseOffset  int64
	leaderEpoch int32
}

// want returns the header fields the shape's batch must carry with codec.
func (s *kmShape) want(codec kbatch.Codec) kmsg.RecordBatch {
	w := kmsg.RecordBatch{
		FirstOffset:          0,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           int16(codec),
		LastOffsetDelta:      int32(len(s.records) - 1),
		FirstTimestamp:       s.records[0].ts,
		MaxTimestamp:         math.MinInt64,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           int32(len(s.records)),
	}
	for _, r := range s.records {
		w.MaxTimestamp = max(w.MaxTimestamp, r.ts)
	}
	if s.stored {
		w.FirstOffset, w.PartitionLeaderEpoch = s.baseOffset, s.leaderEpoch
	}
	if s.idempotent {
		w.ProducerID, w.ProducerEpoch, w.FirstSequence = s.producerID, s.producerEpoch, s.baseSequence
	}
	if s.transactional {
		w.Attributes |= 0x10
	}
	if s.logAppendTime {
		w.Attributes |= 0x08
		w.MaxTimestamp = s.appendTime
	}
	return w
}

// build builds the shape's batch with a kbatch.Builder.
func (s *kmShape) build(t testing.TB, codec kbatch.Codec) []byte {
	t.Helper()
	b := kbatch.NewBuilder(codec)
	if s.stored {
		b.SetBaseOffset(s.baseOffset)
		b.SetPartitionLeaderEpoch(s.leaderEpoch)
	}
	if s.idempotent {
		b.SetProducer(s.producerID, s.producerEpoch, s.baseSequence)
	}
	b.SetTransactional(s.transactional)
	if s.logAppendTime {
		b.SetLogAppendTime(s.appendTime)
	}
	for _, r := range s.records {
		b.Append(r.ts, r.key, r.value, r.headers...)
	}
	raw, err := b.Build(nil)
	require.NoError(t, err)
	return raw
}

// kmWords are what kmValue draws from.
var kmWords = strings.Fields(`alpha bravo charlie delta echo foxtrot golf hotel
	india juliett kilo lima mike november oscar papa quebec romeo sierra tango
	uniform victor whiskey xray yankee zulu`)

// kmValue returns n bytes of words drawn at random: random enough that
// compressed codecs do real work, repetitive enough that every codec
// shrinks it (franz-go keeps compressed records only when they are smaller).
func kmValue(rng *rand.Rand, n int) []byte {
	v := make([]byte, 0, n+16)
	for len(v) < n {
		v = append(v, kmWords[rng.IntN(len(kmWords))]...)
		v = append(v, ' ')
	}
	return v[:n]
}

func kmShapes() []kmShape {
	rng := rand.New(rand.NewPCG(1, 2))

	var plain []kmRecord
	for i := range 20 {
		plain = append(plain, kmRecord{
			ts:    kmT0 + int64(i),
			key:   fmt.Appendf(nil, "key-%d", i),
			value: []byte(strings.Repeat(fmt.Sprintf("value-%d ", i), 1+i%4)),
		})
	}

	nulls := []kmRecord{
		{ts: kmT0, key: nil, value: nil},
		{ts: kmT0, key: []byte{}, value: []byte{}},
		{ts: kmT0, key: nil, value: []byte{}},
		{ts: kmT0, key: []byte{}, value: nil},
		{ts: kmT0, key: []byte("k"), value: nil},
		{ts: kmT0, key: nil, value: []byte("v")},
		{ts: kmT0, key: []byte{}, value: []byte("v")},
		{ts: kmT0, key: []byte("k"), value: []byte{}},
	}

	many := make([]kbatch.Header, 20)
	for i := range many {
		many[i] = kbatch.Header{Key: fmt.Sprintf("h%02d", i), Value: fmt.Appendf(nil, "value %d", i)}
	}
	many[7].Value = nil
	many[13].Value = []byte{}
	headers := []kmRecord{
		{ts: kmT0, key: []byte("k0"), value: []byte("v0"), headers: []kbatch.Header{
			{Key: "trace-id", Value: []byte("abc123")},
			{Key: "null", Value: nil},
			{Key: "empty", Value: []byte{}},
			{Key: "", Value: []byte("empty key")},
			{Key: "trace-id", Value: []byte("repeated key")},
		}},
		{ts: kmT0 + 1, key: nil, value: nil},
		{ts: kmT0 + 2, key: []byte{}, value: nil, headers: []kbatch.Header{{Key: "only", Value: nil}}},
		{ts: kmT0 + 3, key: nil, value: []byte{}, headers: many},
		{ts: kmT0 + 4, key: []byte("k4"), value: []byte("v4"), headers: []kbatch.Header{{Key: "e", Value: []byte{}}}},
	}

	five := plain[:5]

	timestamps := []kmRecord{
		{ts: kmT0 + 1000, key: []byte("a"), value: []byte("first, not the smallest")},
		{ts: kmT0, key: []byte("b"), value: []byte("earlier")},
		{ts: kmT0 - 5000, key: []byte("c"), value: []byte("earlier still")},
		{ts: kmT0 + 86_400_000, key: []byte("d"), value: []byte("a day later: the max")},
		{ts: kmT0 - 1, key: []byte("e"), value: []byte("back again")},
		{ts: 0, key: []byte("f"), value: []byte("the epoch: a delta of -1.7e12")},
		{ts: kmT0 + 86_400_000, key: []byte("g"), value: []byte("the max again")},
		{ts: kmT0 + 1000, key: []byte("h"), value: []byte("back to the first")},
	}

	var large []kmRecord
	for i := range 500 {
		large = append(large, kmRecord{
			ts:    kmT0 + int64(i/10),
			key:   fmt.Appendf(nil, "key-%03d", i),
			value: kmValue(rng, 1024),
		})
	}

	var wrap []kmRecord
	for i := range 6 {
		wrap = append(wrap, kmRecord{ts: kmT0 + int64(i), key: fmt.Appendf(nil, "seq-%d", i), value: []byte("v")})
	}

	return []kmShape{
		{name: "plain", records: plain},
		{name: "null-and-empty", records: nulls},
		{name: "headers", records: headers},
		{name: "idempotent", records: five, idempotent: true, producerID: 1234, producerEpoch: 5, baseSequence: 100},
		{name: "transactional", records: five, idempotent: true, producerID: 1234, producerEpoch: 5, baseSequence: 100, transactional: true},
		{name: "timestamps", records: timestamps},
		{name: "500x1KiB", records: large},
		{name: "log-append-time", records: five, logAppendTime: true, appendTime: kmT0 + 500},
		{name: "sequence-wrap", records: wrap, idempotent: true, producerID: 1234, producerEpoch: 5, baseSequence: math.MaxInt32 - 2},
		{name: "stored", records: five, stored: true, baseOffset: 1 << 40, leaderEpoch: 7,
			idempotent: true, producerID: math.MaxInt64, producerEpoch: math.MaxInt16, baseSequence: 0, transactional: true},
	}
}

// kmCodec returns franz-go's codec for c.
func kmCodec(c kbatch.Codec) kgo.CompressionCodec {
	switch c {
	case kbatch.CodecGzip:
		return kgo.GzipCompression()
	case kbatch.CodecSnappy:
		return kgo.SnappyCompression()
	case kbatch.CodecLZ4:
		return kgo.Lz4Compression()
	case kbatch.CodecZstd:
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

// kmBytes requires got to equal want, telling nil (null) from empty.
func kmBytes(t testing.TB, want, got []byte, what string) {
	t.Helper()
	require.Equal(t, want == nil, got == nil, "%s: null vs non-null (want %q, got %q)", what, want, got)
	require.Equal(t, string(want), string(got), what)
}

// kmWrapSequence is record sequence baseSequence+delta, wrapping past
// MaxInt32 to 0 (computed independently of kbatch.IncrementSequence).
func kmWrapSequence(base, delta int32) int32 {
	if base < 0 {
		return kbatch.NoSequence
	}
	return int32((int64(base) + int64(delta)) % (math.MaxInt32 + 1))
}

// kmReadBatch decodes raw with kmsg, checks the framing fields every batch
// must have, and returns it with its records decompressed with kgo's
// decompressor and decoded with kmsg.
func kmReadBatch(t testing.TB, raw []byte) (kmsg.RecordBatch, []kmsg.Record, []byte) {
	t.Helper()
	var kb kmsg.RecordBatch
	require.NoError(t, kb.ReadFrom(raw), "kmsg.RecordBatch.ReadFrom")
	require.Equal(t, int32(len(raw)-12), kb.Length, "Length")
	require.Equal(t, int8(2), kb.Magic, "Magic")
	require.Equal(t, crc32.Checksum(raw[21:], kmCRC32C), uint32(kb.CRC), "CRC")
	require.Equal(t, raw[61:], kb.Records, "Records is everything after the header")

	plain := kb.Records
	if codec := kgo.CompressionCodecType(kb.Attributes & 0x07); codec != kgo.CodecNone {
		var err error
		plain, err = kgo.DefaultDecompressor().Decompress(kb.Records, codec)
		require.NoError(t, err, "kgo decompressing codec %d", codec)
	}
	return kb, kmReadRecords(t, plain, int(kb.NumRecords)), plain
}

// kmReadRecords decodes the n records of an uncompressed records section
// with kmsg.Record.ReadFrom, which reads one record and does not say how
// much it read: the length varint frames each record here.
func kmReadRecords(t testing.TB, plain []byte, n int) []kmsg.Record {
	t.Helper()
	var out []kmsg.Record
	for len(plain) > 0 {
		l, m := binary.Varint(plain) // zig-zag, as Kafka's varints
		require.Greater(t, m, 0, "record %d: length varint", len(out))
		size := m + int(l)
		require.LessOrEqual(t, size, len(plain), "record %d runs past the records", len(out))
		var r kmsg.Record
		require.NoError(t, r.ReadFrom(plain[:size]), "record %d: kmsg.Record.ReadFrom", len(out))
		// kmsg encodes what it decoded to the same bytes: it read the
		// whole record and nothing more.
		require.Equal(t, plain[:size], r.AppendTo(nil), "record %d: kmsg re-encoding", len(out))
		out = append(out, r)
		plain = plain[size:]
	}
	require.Len(t, out, n, "records in the batch")
	return out
}

// kmRequireHeader requires every header field of kb to equal want's.
func kmRequireHeader(t testing.TB, want, kb kmsg.RecordBatch) {
	t.Helper()
	require.Equal(t, want.FirstOffset, kb.FirstOffset, "FirstOffset")
	require.Equal(t, want.PartitionLeaderEpoch, kb.PartitionLeaderEpoch, "PartitionLeaderEpoch")
	require.Equal(t, want.Magic, kb.Magic, "Magic")
	require.Equal(t, want.Attributes, kb.Attributes, "Attributes")
	require.Equal(t, want.LastOffsetDelta, kb.LastOffsetDelta, "LastOffsetDelta")
	require.Equal(t, want.FirstTimestamp, kb.FirstTimestamp, "FirstTimestamp")
	require.Equal(t, want.MaxTimestamp, kb.MaxTimestamp, "MaxTimestamp")
	require.Equal(t, want.ProducerID, kb.ProducerID, "ProducerID")
	require.Equal(t, want.ProducerEpoch, kb.ProducerEpoch, "ProducerEpoch")
	require.Equal(t, want.FirstSequence, kb.FirstSequence, "FirstSequence")
	require.Equal(t, want.NumRecords, kb.NumRecords, "NumRecords")
}

// kmRequireOursAgree decodes raw with ParseBatch and a RecordReader and
// requires every batch and record field to agree with kmsg's decoding of
// the same bytes.
func kmRequireOursAgree(t testing.TB, raw []byte, kb kmsg.RecordBatch, krs []kmsg.Record) {
	t.Helper()
	b, err := kbatch.ParseBatch(raw)
	require.NoError(t, err)
	require.NoError(t, b.CheckCRC())
	require.Equal(t, len(raw), b.Size())
	require.Equal(t, kb.FirstOffset, b.BaseOffset(), "BaseOffset")
	require.Equal(t, kb.Length, b.Length(), "Length")
	require.Equal(t, kb.PartitionLeaderEpoch, b.PartitionLeaderEpoch(), "PartitionLeaderEpoch")
	require.Equal(t, kb.Magic, b.Magic(), "Magic")
	require.Equal(t, uint32(kb.CRC), b.CRC(), "CRC")
	require.Equal(t, uint32(kb.CRC), b.ComputeCRC(), "ComputeCRC")
	require.Equal(t, kbatch.Attributes(kb.Attributes), b.Attributes(), "Attributes")
	require.Equal(t, kbatch.Codec(kb.Attributes&0x07), b.Codec(), "Codec")
	require.Equal(t, kb.Attributes&0x08 != 0, b.TimestampType() == kbatch.LogAppendTime, "TimestampType")
	require.Equal(t, kb.Attributes&0x10 != 0, b.Transactional(), "Transactional")
	require.Equal(t, kb.Attributes&0x20 != 0, b.Control(), "Control")
	require.Equal(t, kb.LastOffsetDelta, b.LastOffsetDelta(), "LastOffsetDelta")
	require.Equal(t, kb.FirstTimestamp, b.BaseTimestamp(), "BaseTimestamp")
	require.Equal(t, kb.MaxTimestamp, b.MaxTimestamp(), "MaxTimestamp")
	require.Equal(t, kb.ProducerID, b.ProducerID(), "ProducerID")
	require.Equal(t, kb.ProducerID >= 0, b.HasProducerID(), "HasProducerID")
	require.Equal(t, kb.ProducerEpoch, b.ProducerEpoch(), "ProducerEpoch")
	require.Equal(t, kb.FirstSequence, b.BaseSequence(), "BaseSequence")
	require.Equal(t, kmWrapSequence(kb.FirstSequence, kb.LastOffsetDelta), b.LastSequence(), "LastSequence")
	require.Equal(t, kb.NumRecords, b.NumRecords(), "NumRecords")
	require.Equal(t, kb.Records, b.RecordsData(), "RecordsData")
	require.Equal(t, kb.FirstOffset+int64(kb.LastOffsetDelta), b.LastOffset(), "LastOffset")

	logAppendTime := kb.Attributes&0x08 != 0
	var rr kbatch.RecordReader
	require.NoError(t, rr.Reset(b))
	for i, kr := range krs {
		require.True(t, rr.Next(), "record %d: %v", i, rr.Err())
		require.Equal(t, i, rr.Index())
		r := rr.Record()
		what := func(f string) string { return fmt.Sprintf("record %d: %s", i, f) }
		require.Equal(t, kr.Attributes, r.Attributes, what("Attributes"))
		require.Equal(t, kr.TimestampDelta64, r.TimestampDelta, what("TimestampDelta"))
		require.Equal(t, kr.OffsetDelta, r.OffsetDelta, what("OffsetDelta"))
		wantTs := kb.FirstTimestamp + kr.TimestampDelta64
		if logAppendTime {
			wantTs = kb.MaxTimestamp
		}
		require.Equal(t, wantTs, r.Timestamp, what("Timestamp"))
		require.Equal(t, kb.FirstOffset+int64(kr.OffsetDelta), r.Offset, what("Offset"))
		require.Equal(t, kmWrapSequence(kb.FirstSequence, kr.OffsetDelta), r.Sequence, what("Sequence"))
		kmBytes(t, kr.Key, r.Key, what("Key"))
		kmBytes(t, kr.Value, r.Value, what("Value"))
		require.Equal(t, len(kr.Headers), r.NumHeaders(), what("NumHeaders"))
		it := r.Headers()
		for j, kh := range kr.Headers {
			require.True(t, it.Next(), what(fmt.Sprintf("header %d", j)))
			require.Equal(t, kh.Key, string(it.Key()), what(fmt.Sprintf("header %d key", j)))
			kmBytes(t, kh.Value, it.Value(), what(fmt.Sprintf("header %d value", j)))
		}
		require.False(t, it.Next(), what("headers end"))
		hs := r.AppendHeaders(nil)
		require.Len(t, hs, len(kr.Headers), what("AppendHeaders"))
		for j, kh := range kr.Headers {
			require.Equal(t, kh.Key, hs[j].Key, what(fmt.Sprintf("AppendHeaders %d key", j)))
			kmBytes(t, kh.Value, hs[j].Value, what(fmt.Sprintf("AppendHeaders %d value", j)))
		}
	}
	require.False(t, rr.Next(), "records after the %d kmsg decoded", len(krs))
	require.NoError(t, rr.Err())
}

// TestKmsgDecodesOurBatches: every batch the Builder builds, in every
// codec, decodes with franz-go to exactly what was appended, and our own
// decoding agrees with franz-go's field by field.
func TestKmsgDecodesOurBatches(t *testing.T) {
	for _, codec := range kbatch.Codecs {
		for _, s := range kmShapes() {
			t.Run(codec.String()+"/"+s.name, func(t *testing.T) {
				raw := s.build(t, codec)
				kb, krs, plain := kmReadBatch(t, raw)
				kmRequireHeader(t, s.want(codec), kb)

				// The records section, decompressed by franz-go, is
				// what the uncompressed batch holds.
				require.Equal(t, s.build(t, kbatch.CodecNone)[61:], plain, "decompressed records")

				first := s.records[0].ts
				for i, want := range s.records {
					kr := krs[i]
					what := func(f string) string { return fmt.Sprintf("record %d: %s", i, f) }
					require.Equal(t, int8(0), kr.Attributes, what("Attributes"))
					require.Equal(t, want.ts-first, kr.TimestampDelta64, what("TimestampDelta64"))
					require.Equal(t, int32(i), kr.OffsetDelta, what("OffsetDelta"))
					kmBytes(t, want.key, kr.Key, what("Key"))
					kmBytes(t, want.value, kr.Value, what("Value"))
					require.Len(t, kr.Headers, len(want.headers), what("Headers"))
					for j, h := range want.headers {
						require.Equal(t, h.Key, kr.Headers[j].Key, what(fmt.Sprintf("header %d key", j)))
						kmBytes(t, h.Value, kr.Headers[j].Value, what(fmt.Sprintf("header %d value", j)))
					}
				}
				kmRequireOursAgree(t, raw, kb, krs)
			})
		}
	}
}

// TestKmsgDecodesEndTxnMarker: COMMIT and ABORT markers decode with kmsg,
// its control record key and end-transaction-marker value included, and a
// marker franz-go's types encode is byte for byte ours.
func TestKmsgDecodesEndTxnMarker(t *testing.T) {
	for _, commit := range []bool{true, false} {
		t.Run(map[bool]string{true: "commit", false: "abort"}[commit], func(t *testing.T) {
			m := kbatch.EndTxnMarker{Commit: commit, ProducerID: 1000, ProducerEpoch: 3, CoordinatorEpoch: 7, Timestamp: kmT0}
			raw := kbatch.AppendEndTxnMarker(nil, m)
			require.Len(t, raw, 78)

			kb, krs, _ := kmReadBatch(t, raw)
			kmRequireHeader(t, kmsg.RecordBatch{
				FirstOffset: 0, PartitionLeaderEpoch: -1, Magic: 2, Attributes: 0x30,
				LastOffsetDelta: 0, FirstTimestamp: kmT0, MaxTimestamp: kmT0,
				ProducerID: 1000, ProducerEpoch: 3, FirstSequence: -1, NumRecords: 1,
			}, kb)
			require.Equal(t, int32(66), kb.Length)

			kr := krs[0]
			require.Equal(t, int8(0), kr.Attributes)
			require.Equal(t, int64(0), kr.TimestampDelta64)
			require.Equal(t, int32(0), kr.OffsetDelta)
			require.Empty(t, kr.Headers)
			var key kmsg.ControlRecordKey
			require.NoError(t, key.ReadFrom(kr.Key))
			require.Len(t, kr.Key, 4)
			wantType := kmsg.ControlRecordKeyType(0)
			if commit {
				wantType = 1
			}
			require.Equal(t, kmsg.ControlRecordKey{Version: 0, Type: wantType}, key)
			var value kmsg.EndTxnMarker
			require.NoError(t, value.ReadFrom(kr.Value))
			require.Len(t, kr.Value, 6)
			require.Equal(t, kmsg.EndTxnMarker{Version: 0, CoordinatorEpoch: 7}, value)

			kmRequireOursAgree(t, raw, kb, krs)
			b, err := kbatch.ParseBatch(raw)
			require.NoError(t, err)
			var rr kbatch.RecordReader
			require.NoError(t, rr.Reset(b))
			require.True(t, rr.Next())
			cr, err := kbatch.ParseControlRecord(rr.Record())
			require.NoError(t, err)
			wantCR := kbatch.ControlRecord{Type: kbatch.ControlAbort, CoordinatorEpoch: 7}
			if commit {
				wantCR.Type = kbatch.ControlCommit
			}
			require.Equal(t, wantCR, cr)

			// The same marker from franz-go's types.
			rec := kmsg.Record{
				Key:   (&kmsg.ControlRecordKey{Type: wantType}).AppendTo(nil),
				Value: (&kmsg.EndTxnMarker{CoordinatorEpoch: 7}).AppendTo(nil),
			}
			kraw := kgoAssemble(kmsg.RecordBatch{
				PartitionLeaderEpoch: -1, Magic: 2, Attributes: 0x30,
				FirstTimestamp: kmT0, MaxTimestamp: kmT0,
				ProducerID: 1000, ProducerEpoch: 3, FirstSequence: -1, NumRecords: 1,
				Records: kgoAppendRecord(nil, rec),
			})
			require.Equal(t, kraw, raw, "franz-go's marker and ours")
		})
	}
}

// kgoAppendRecord appends r with its Length computed, as franz-go's
// promisedRec.appendTo writes it.
func kgoAppendRecord(dst []byte, r kmsg.Record) []byte {
	r.Length = 0
	body := len(r.AppendTo(nil)) - 1 // a Length of 0 takes one byte
	r.Length = int32(body)
	return r.AppendTo(dst)
}

// kgoAssemble encodes kb with kmsg and fixes Length and CRC as franz-go's
// sink.go does: Length is the size after the field, the CRC is CRC-32C of
// everything from the attributes on, written at byte 17.
func kgoAssemble(kb kmsg.RecordBatch) []byte {
	raw := kb.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], kmCRC32C))
	return raw
}

// kgoSpec is a batch as franz-go's producer would build it.
type kgoSpec struct {
	name          string
	records       []kmsg.Record // TimestampDelta64, Key, Value, Headers
	producerID    int64
	producerEpoch int16
	sequence      int32 // franz-go sends 0 when producerID < 0
	transactional bool
	compressible  bool // every codec must shrink it, so franz-go keeps it
}

// kgoBuild builds s the way pkg/kgo/sink.go appendTo does: the records
// encoded with kmsg, compressed with kgo's own compressor and kept only if
// smaller (else sent uncompressed, codec 0), the header from kmsg, then
// Length and CRC fixed. It returns the batch, the codec it ended up with
// and the uncompressed records section.
func kgoBuild(t testing.TB, codec kbatch.Codec, s kgoSpec) ([]byte, kbatch.Codec, []byte) {
	t.Helper()
	var plain []byte
	var maxDelta int64
	for i, r := range s.records {
		r.OffsetDelta = int32(i)
		plain = kgoAppendRecord(plain, r)
		maxDelta = max(maxDelta, r.TimestampDelta64)
	}

	records, used := plain, kbatch.CodecNone
	if codec != kbatch.CodecNone {
		c, err := kgo.DefaultCompressor(kmCodec(codec))
		require.NoError(t, err)
		require.NotNil(t, c)
		compressed, got := c.Compress(new(bytes.Buffer), plain)
		require.NotEqual(t, kgo.CompressionCodecType(kgo.CodecError), got, "kgo compressing")
		if compressed != nil && len(compressed) < len(plain) {
			records, used = slices.Clone(compressed), kbatch.Codec(got)
		}
	}

	attrs := int16(used)
	if s.transactional {
		attrs |= 0x10
	}
	seq := s.sequence
	if s.producerID < 0 {
		seq = 0
	}
	raw := kgoAssemble(kmsg.RecordBatch{
		FirstOffset:          0,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           attrs,
		LastOffsetDelta:      int32(len(s.records) - 1),
		FirstTimestamp:       kmT0,
		MaxTimestamp:         kmT0 + maxDelta,
		ProducerID:           s.producerID,
		ProducerEpoch:        s.producerEpoch,
		FirstSequence:        seq,
		NumRecords:           int32(len(s.records)),
		Records:              records,
	})
	return raw, used, plain
}

func kgoSpecs() []kgoSpec {
	rng := rand.New(rand.NewPCG(3, 4))
	none := kgoSpec{producerID: -1, producerEpoch: -1}

	plain := none
	plain.name, plain.compressible = "plain", true
	for i := range 50 {
		plain.records = append(plain.records, kmsg.Record{
			TimestampDelta64: int64(i * 3),
			Key:              fmt.Appendf(nil, "key-%d", i),
			Value:            []byte(strings.Repeat("compressible value ", 1+i%5)),
		})
	}

	nulls := none
	nulls.name = "null-and-empty"
	nulls.records = []kmsg.Record{
		{Key: nil, Value: nil},
		{Key: []byte{}, Value: []byte{}},
		{Key: nil, Value: []byte{}},
		{Key: []byte{}, Value: nil},
		{Key: []byte("k"), Value: nil, TimestampDelta64: 5},
		{Key: nil, Value: []byte("v"), TimestampDelta64: -5},
	}

	headers := none
	headers.name, headers.compressible = "headers", true
	for i := range 30 {
		r := kmsg.Record{TimestampDelta64: int64(i), Key: fmt.Appendf(nil, "k%d", i), Value: []byte("value value value value")}
		for j := range i % 4 {
			r.Headers = append(r.Headers, kmsg.Header{Key: fmt.Sprintf("header-%d", j), Value: []byte("header value header value")})
		}
		switch i % 5 {
		case 1:
			r.Headers = append(r.Headers, kmsg.Header{Key: "null", Value: nil})
		case 2:
			r.Headers = append(r.Headers, kmsg.Header{Key: "empty", Value: []byte{}})
		case 3:
			r.Headers = append(r.Headers, kmsg.Header{Key: "", Value: []byte("empty key")}, kmsg.Header{Key: "null", Value: nil})
		}
		headers.records = append(headers.records, r)
	}

	idempotent := plain
	idempotent.name = "idempotent"
	idempotent.producerID, idempotent.producerEpoch, idempotent.sequence = 1234, 5, 100

	transactional := idempotent
	transactional.name, transactional.transactional = "transactional", true

	wrap := idempotent
	wrap.name, wrap.sequence = "sequence-wrap", math.MaxInt32-10

	large := none
	large.name, large.compressible = "500x1KiB", true
	for i := range 500 {
		large.records = append(large.records, kmsg.Record{
			TimestampDelta64: int64(i / 7),
			Key:              fmt.Appendf(nil, "key-%03d", i),
			Value:            kmValue(rng, 1024),
		})
	}

	// A single record of random bytes: compressing makes it larger, so
	// franz-go sends it uncompressed whatever the codec.
	random := none
	random.name = "incompressible"
	v := make([]byte, 64)
	for i := range v {
		v[i] = byte(rng.Uint32())
	}
	random.records = []kmsg.Record{{Key: []byte("k"), Value: v}}

	return []kgoSpec{plain, nulls, headers, idempotent, transactional, wrap, large, random}
}

// TestOursDecodesKgoBatches: batches built the way franz-go's producer
// builds them, in every codec, decode here to exactly what franz-go
// encoded, and pass Validate with the default options.
func TestOursDecodesKgoBatches(t *testing.T) {
	for _, codec := range kbatch.Codecs {
		for _, s := range kgoSpecs() {
			t.Run(codec.String()+"/"+s.name, func(t *testing.T) {
				raw, used, plain := kgoBuild(t, codec, s)
				if s.compressible {
					require.Equal(t, codec, used, "franz-go kept the compressed records")
				}
				if s.name == "incompressible" {
					require.Equal(t, kbatch.CodecNone, used, "franz-go sent it uncompressed")
				}

				// kmsg reads back what it wrote (a check of this
				// test's assembly, not of the package).
				kb, krs, kplain := kmReadBatch(t, raw)
				require.Equal(t, plain, kplain)
				seq := s.sequence
				if s.producerID < 0 {
					seq = 0
				}
				var maxDelta int64
				for _, r := range s.records {
					maxDelta = max(maxDelta, r.TimestampDelta64)
				}
				attrs := int16(used)
				if s.transactional {
					attrs |= 0x10
				}
				kmRequireHeader(t, kmsg.RecordBatch{
					FirstOffset: 0, PartitionLeaderEpoch: -1, Magic: 2, Attributes: attrs,
					LastOffsetDelta: int32(len(s.records) - 1), FirstTimestamp: kmT0, MaxTimestamp: kmT0 + maxDelta,
					ProducerID: s.producerID, ProducerEpoch: s.producerEpoch, FirstSequence: seq,
					NumRecords: int32(len(s.records)),
				}, kb)

				// Ours agrees with kmsg on every field, and the
				// records are the ones franz-go was given.
				kmRequireOursAgree(t, raw, kb, krs)
				b, err := kbatch.ParseBatch(raw)
				require.NoError(t, err)
				var rr kbatch.RecordReader
				require.NoError(t, rr.Reset(b))
				for i, want := range s.records {
					require.True(t, rr.Next(), "record %d: %v", i, rr.Err())
					r := rr.Record()
					require.Equal(t, want.TimestampDelta64, r.TimestampDelta, "record %d: TimestampDelta", i)
					require.Equal(t, kmT0+want.TimestampDelta64, r.Timestamp, "record %d: Timestamp", i)
					require.Equal(t, int32(i), r.OffsetDelta, "record %d: OffsetDelta", i)
					require.Equal(t, int64(i), r.Offset, "record %d: Offset", i)
					if s.producerID >= 0 {
						require.Equal(t, kmWrapSequence(s.sequence, int32(i)), r.Sequence, "record %d: Sequence", i)
					}
					kmBytes(t, want.Key, r.Key, fmt.Sprintf("record %d: Key", i))
					kmBytes(t, want.Value, r.Value, fmt.Sprintf("record %d: Value", i))
					hs := r.AppendHeaders(nil)
					require.Len(t, hs, len(want.Headers), "record %d: headers", i)
					for j, h := range want.Headers {
						require.Equal(t, h.Key, hs[j].Key, "record %d: header %d key", i, j)
						kmBytes(t, h.Value, hs[j].Value, fmt.Sprintf("record %d: header %d value", i, j))
					}
				}
				require.False(t, rr.Next())
				require.NoError(t, rr.Err())

				// A Kafka leader accepts what franz-go produces,
				// including base sequence 0 with producer id -1 (§3).
				res, err := kbatch.Validate(raw, nil)
				require.NoError(t, err)
				require.Equal(t, raw, []byte(res.Batch))
				require.Equal(t, kmT0+maxDelta, res.MaxTimestamp)
				require.Equal(t, len(plain), res.UncompressedBytes)
				require.False(t, res.NeedsRebuild)
			})
		}
	}
}

// TestSnappyFramingBothWays: franz-go writes a raw snappy block, Java
// (and this package) the xerial framing; each reads the other's.
func TestSnappyFramingBothWays(t *testing.T) {
	spec := kgoSpecs()[6] // 500 records of 1 KiB: many xerial blocks
	require.Equal(t, "500x1KiB", spec.name)

	t.Run("raw-from-franz-go", func(t *testing.T) {
		raw, used, plain := kgoBuild(t, kbatch.CodecSnappy, spec)
		require.Equal(t, kbatch.CodecSnappy, used)
		b, err := kbatch.ParseBatch(raw)
		require.NoError(t, err)
		require.Equal(t, kbatch.CodecSnappy, b.Codec())
		require.False(t, bytes.HasPrefix(b.RecordsData(), kmXerialMagic), "franz-go writes a raw block")
		// A raw block starts with its decoded length as a uvarint.
		n, m := binary.Uvarint(b.RecordsData())
		require.Greater(t, m, 0)
		require.Equal(t, uint64(len(plain)), n)

		var rr kbatch.RecordReader
		require.NoError(t, rr.Reset(b))
		count := 0
		for rr.Next() {
			require.Equal(t, spec.records[count].Value, rr.Record().Value)
			count++
		}
		require.NoError(t, rr.Err())
		require.Len(t, spec.records, count)
	})

	t.Run("xerial-to-franz-go", func(t *testing.T) {
		s := kmShapes()[6]
		require.Equal(t, "500x1KiB", s.name)
		raw := s.build(t, kbatch.CodecSnappy)
		b, err := kbatch.ParseBatch(raw)
		require.NoError(t, err)
		data := b.RecordsData()
		require.True(t, bytes.HasPrefix(data, kmXerialMagic), "we write the xerial framing")
		require.Equal(t, []byte{0, 0, 0, 1, 0, 0, 0, 1}, data[8:16], "xerial version 1, minimum compatible version 1")

		plain, err := kgo.DefaultDecompressor().Decompress(data, kgo.CodecSnappy)
		require.NoError(t, err)
		require.Equal(t, s.build(t, kbatch.CodecNone)[61:], plain)
		krs := kmReadRecords(t, plain, len(s.records))
		for i, r := range s.records {
			require.Equal(t, r.value, krs[i].Value, "record %d", i)
		}
	})
}
