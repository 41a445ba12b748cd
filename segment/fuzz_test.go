package segment_test

// Fuzz targets for the decoders: BatchIter and ParseBatch (framing),
// Validate (the produce path), RecordReader and Builder (records, and
// re-encoding what was decoded), and the tiered-storage formats:
// ParseProducerSnapshot, ParseLeaderEpochCheckpoint,
// RemoteLogSegmentMetadata.Unmarshal, the index lookups over raw bytes,
// and the producer and epoch state derived from batches. Each also runs its seeds under plain
// `go test`; `make fuzz` runs them with the fuzzer.

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/segment"
)

// fzVectorBatch is kafka-format.md §17's producer batch: one record, key
// "k", value "v", timestamp 1 700 000 000 000, non-idempotent Java style.
const fzVectorBatch = `00000000000000000000003affffffff02e99b8dd80000000000000000018bcfe568000000018bcfe56800
	ffffffffffffffffffffffffffff0000000110000000026b027600`

func fzUnhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	require.NoError(t, err)
	return b
}

// fzWithRecords returns batch (uncompressed) with its records section
// replaced by records, and Length and CRC fixed.
func fzWithRecords(batch, records []byte) []byte {
	out := append(slices.Clone(batch[:61]), records...)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], kmCRC32C))
	return out
}

// fzSeeds returns the seed corpus every target starts from: batches from
// the Builder in every codec with and without headers, markers, the §17
// vector, batches franz-go's way, non-canonical records, several batches
// in a row, and corruptions of them.
func fzSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	for _, codec := range segment.Codecs {
		b := segment.NewBuilder(codec)
		b.Append(kmT0, []byte("key"), []byte("value"))
		b.Append(kmT0+5, nil, []byte{})
		b.Append(kmT0-5, []byte{}, nil)
		plain, err := b.Build(nil)
		require.NoError(t, err)

		b.Reset(codec)
		b.SetProducer(1234, 5, 100)
		b.SetTransactional(true)
		b.Append(kmT0, []byte("key"), []byte("value value value value"),
			segment.Header{Key: "h", Value: []byte("v")},
			segment.Header{Key: "null", Value: nil},
			segment.Header{Key: "", Value: []byte{}})
		b.Append(kmT0+1, []byte("key2"), []byte("value value value value"))
		withHeaders, err := b.Build(nil)
		require.NoError(t, err)
		seeds = append(seeds, plain, withHeaders)

		spec := kgoSpecs()[2] // headers, compressible
		kraw, _, _ := kgoBuild(t, codec, spec)
		seeds = append(seeds, kraw)
	}

	lat := segment.NewBuilder(segment.CodecNone)
	lat.SetLogAppendTime(kmT0 + 500)
	lat.Append(kmT0, []byte("k"), []byte("v"))
	latBatch, err := lat.Build(nil)
	require.NoError(t, err)
	seeds = append(seeds, latBatch)

	for _, commit := range []bool{true, false} {
		seeds = append(seeds, segment.AppendEndTxnMarker(nil, segment.EndTxnMarker{
			Commit: commit, ProducerID: 1000, ProducerEpoch: 3, CoordinatorEpoch: 7, Timestamp: kmT0,
		}))
	}

	vector := fzUnhex(t, fzVectorBatch)
	seeds = append(seeds,
		vector,
		// An overlong key length varint (82 00 for 1): legal, not canonical.
		fzWithRecords(vector, []byte{0x12, 0x00, 0x00, 0x00, 0x82, 0x00, 'k', 0x02, 'v', 0x00}),
		// A key length of -2: null, but not as a writer spells it.
		fzWithRecords(vector, []byte{0x0e, 0x00, 0x00, 0x00, 0x03, 0x02, 'v', 0x00}),
		// A header with a null value.
		fzWithRecords(vector, []byte{0x16, 0x00, 0x00, 0x00, 0x02, 'k', 0x02, 'v', 0x02, 0x02, 'h', 0x01}),
	)

	// Several batches in a row, and a partial one after them.
	var row []byte
	for _, s := range seeds[:4] {
		row = append(row, s...)
	}
	seeds = append(seeds, row, append(slices.Clone(row), vector[:40]...))

	// Corruptions.
	for _, s := range [][]byte{vector, seeds[1], seeds[3]} {
		seeds = append(seeds, s[:len(s)-1], s[:61], s[:30], s[:11])
		for _, at := range []int{9, 16, 18, 22, 60, 62, len(s) - 2} {
			c := slices.Clone(s)
			c[at] ^= 0x41
			seeds = append(seeds, c)
		}
	}
	return seeds
}

// fzCodes are the codes the package's errors may carry.
var fzCodes = []segment.ErrorCode{
	segment.UnknownServerError, segment.CorruptMessage, segment.MessageTooLarge,
	segment.RecordListTooLarge, segment.InvalidTimestamp,
	segment.UnsupportedCompressionType, segment.InvalidRecord,
}

// fzRequireError requires err to be a *segment.Error with a known code and
// a message, and returns its code.
func fzRequireError(t testing.TB, err error) segment.ErrorCode {
	t.Helper()
	var se *segment.Error
	require.True(t, errors.As(err, &se), "not a *segment.Error: %T %v", err, err)
	require.Contains(t, fzCodes, se.Code, "unknown code in %v", err)
	require.NotEmpty(t, se.Message, "no message in %v", err)
	require.Equal(t, se.Code, segment.Code(err))
	return se.Code
}

// FuzzBatches: iterating any bytes never panics, yields views that tile a
// prefix of the input, and agrees with ParseBatch on the first batch.
func FuzzBatches(f *testing.F) {
	for _, s := range fzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		it := segment.NewBatchIter(data)
		sum, n := 0, 0
		for it.Next() {
			b := it.Batch()
			require.Equal(t, sum, it.Pos(), "Pos is where the current batch starts")
			require.Equal(t, int(b.Length())+12, b.Size())
			require.GreaterOrEqual(t, b.Size(), 61)
			require.LessOrEqual(t, sum+b.Size(), len(data))
			require.Equal(t, data[sum:sum+b.Size()], []byte(b))
			require.Same(t, &data[sum], &b[0], "the batch is a view into the data")
			require.Equal(t, int8(2), b.Magic())
			// The accessors of a framed batch do not panic.
			_, _ = b.DeleteHorizon()
			_ = b.LastSequence()
			_ = b.NextOffset()
			_ = b.CheckCRC()
			_ = b.RecordsData()
			if n == 0 {
				pb, err := segment.ParseBatch(data)
				require.NoError(t, err, "ParseBatch fails where the iterator found a batch")
				require.Equal(t, []byte(b), []byte(pb))
			}
			sum += b.Size()
			n++
		}
		require.Equal(t, sum, it.Pos(), "the batches end where Pos says")
		require.LessOrEqual(t, it.Pos(), len(data))
		if err := it.Err(); err != nil {
			code := fzRequireError(t, err)
			require.Equal(t, segment.CorruptMessage, code)
			require.False(t, it.Partial())
		} else {
			require.Equal(t, it.Pos() < len(data), it.Partial())
		}
		require.False(t, it.Next(), "Next after the end")

		if n == 0 {
			_, perr := segment.ParseBatch(data)
			require.Error(t, perr, "ParseBatch finds a batch where the iterator found none")
			code := fzRequireError(t, perr)
			if err := it.Err(); err != nil {
				require.Equal(t, segment.Code(err), code, "ParseBatch: %v; iterator: %v", perr, err)
			} else {
				require.Equal(t, segment.CorruptMessage, code, "no whole batch: %v", perr)
			}
		}
	})
}

// fzStrict is a topic that checks everything that can be checked: keys
// (compacted), the LogAppendTime bit, and the codec (recompressing to zstd).
var fzStrict = &segment.ValidateOptions{
	Compacted:     true,
	TimestampType: segment.LogAppendTime,
	Compression:   segment.TopicCodec(segment.CodecZstd),
}

// FuzzValidate: Validate never panics nor writes to its input, fails only
// with a *segment.Error, and what it accepts is a whole batch whose records
// all read back.
func FuzzValidate(f *testing.F) {
	for _, s := range fzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fzValidate(t, data)
		// The same bytes framed as one batch with a correct CRC, so that
		// the fuzzer gets past the framing and the CRC to the records.
		if fixed := fzFrame(data); fixed != nil {
			fzValidate(t, fixed)
		}
	})
}

// fzFrame returns a copy of data with the length field saying the batch is
// all of data and the CRC correct, or nil if data is too short for that.
func fzFrame(data []byte) []byte {
	if len(data) < 61 {
		return nil
	}
	out := slices.Clone(data)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], kmCRC32C))
	return out
}

// fzValidate runs FuzzValidate's checks on data, with the default options
// and with fzStrict.
func fzValidate(t *testing.T, data []byte) {
	t.Helper()
	orig := slices.Clone(data)
	for _, opts := range []*segment.ValidateOptions{nil, fzStrict} {
		res, err := segment.Validate(data, opts)
		require.Equal(t, orig, data, "Validate wrote to its input")
		if err != nil {
			fzRequireError(t, err)
			continue
		}
		b := res.Batch
		require.GreaterOrEqual(t, len(b), 61)
		require.LessOrEqual(t, len(b), len(data))
		require.Same(t, &data[0], &b[0], "the batch is a view into the input")
		require.Equal(t, data[:len(b)], []byte(b))
		require.NoError(t, b.CheckCRC())
		require.Equal(t, int64(0), b.BaseOffset())
		require.LessOrEqual(t, len(b), segment.DefaultMaxMessageBytes)
		require.False(t, b.Control())
		require.Equal(t, b.NumRecords()-1, b.LastOffsetDelta())
		require.Positive(t, b.NumRecords())
		require.False(t, b.HasProducerID() && b.BaseSequence() < 0)

		var rr segment.RecordReader
		require.NoError(t, rr.Reset(b))
		var maxTs int64 = segment.NoTimestamp
		maxIndex, n := int32(-1), int32(0)
		deltasInOrder := true
		for rr.Next() {
			r := rr.Record()
			if r.Timestamp > maxTs {
				maxTs, maxIndex = r.Timestamp, n
			}
			deltasInOrder = deltasInOrder && r.OffsetDelta == n
			if opts == fzStrict {
				require.NotNil(t, r.Key, "record %d: a null key on a compacted topic", n)
			}
			n++
		}
		require.NoError(t, rr.Err())
		require.Equal(t, b.NumRecords(), n)
		require.Equal(t, maxTs, res.MaxTimestamp)
		require.Equal(t, maxIndex, res.MaxTimestampIndex)
		if b.Codec() == segment.CodecNone {
			require.Equal(t, len(b.RecordsData()), res.UncompressedBytes)
		}
		if opts == fzStrict {
			require.NotEqual(t, segment.LogAppendTime, b.TimestampType(), "a client's LogAppendTime batch")
			require.Equal(t, b.Codec() != segment.CodecZstd || !deltasInOrder, res.NeedsRebuild)
		} else {
			require.Equal(t, b.Codec() != segment.CodecNone && !deltasInOrder, res.NeedsRebuild)
		}
		if res.NeedsRebuild && res.UncompressedBytes <= 1<<20 {
			fzRequireRebuild(t, b, opts)
			require.Equal(t, orig, data, "Rebuild wrote to its input")
		}
	}
}

// fzRequireRebuild rebuilds b, which passed Validate with opts, and
// requires the result to hold the same records with offset deltas 0, 1, 2,
// ... in the topic's codec.
func fzRequireRebuild(t testing.TB, b segment.Batch, opts *segment.ValidateOptions) {
	t.Helper()
	out, err := segment.Rebuild(nil, b, opts)
	if err != nil {
		require.Equal(t, segment.MessageTooLarge, fzRequireError(t, err), "Rebuild of a valid batch: %v", err)
		return
	}
	nb, err := segment.ParseBatch(out)
	require.NoError(t, err)
	require.Len(t, out, nb.Size())
	require.NoError(t, nb.CheckCRC())
	want := b.Codec()
	if opts != nil {
		if c, ok := opts.Compression.Codec(); ok {
			want = c
		}
	}
	require.Equal(t, want, nb.Codec())
	require.Equal(t, b.NumRecords(), nb.NumRecords())
	require.Equal(t, b.ProducerID(), nb.ProducerID())
	require.Equal(t, b.ProducerEpoch(), nb.ProducerEpoch())
	require.Equal(t, b.BaseSequence(), nb.BaseSequence())
	require.Equal(t, b.Transactional(), nb.Transactional())

	var ra, rb segment.RecordReader
	require.NoError(t, ra.Reset(b))
	require.NoError(t, rb.Reset(nb))
	for i := int32(0); ra.Next(); i++ {
		require.True(t, rb.Next(), "record %d: %v", i, rb.Err())
		x, y := ra.Record(), rb.Record()
		require.Equal(t, i, y.OffsetDelta)
		if opts == nil || opts.TimestampType == segment.CreateTime {
			require.Equal(t, x.Timestamp, y.Timestamp, "record %d: Timestamp", i)
		}
		kmBytes(t, x.Key, y.Key, "Key")
		kmBytes(t, x.Value, y.Value, "Value")
		require.Equal(t, x.AppendHeaders(nil), y.AppendHeaders(nil))
	}
	require.NoError(t, ra.Err())
	require.False(t, rb.Next())
	require.NoError(t, rb.Err())
}

// FuzzRecords: records that decode re-encode stably; re-encoding is
// idempotent; and an uncompressed batch whose records are canonical
// re-encodes to the same bytes.
func FuzzRecords(f *testing.F) {
	for _, s := range fzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fzRecords(t, data)
		// The same bytes framed as one batch, so that records the fuzzer
		// grows or shrinks stay inside it.
		if fixed := fzFrame(data); fixed != nil {
			fzRecords(t, fixed)
		}
	})
}

func fzRecords(t *testing.T, data []byte) {
	t.Helper()
	b, err := segment.ParseBatch(data)
	if err != nil {
		return
	}
	rr := segment.RecordReader{MaxUncompressedBytes: 1 << 20}
	recs, err := fzReadAll(&rr, b)
	wellFormed, canonical := false, false
	if b.Codec() == segment.CodecNone {
		// An independent walk of the records agrees with the
		// reader on what is well formed.
		wellFormed, canonical = fzWalkRecords(b.RecordsData(), b.NumRecords())
		require.Equal(t, wellFormed, err == nil, "walker says well formed: %v; reader: %v", wellFormed, err)
	}
	if err != nil {
		fzRequireError(t, err)
		return
	}
	require.Len(t, recs, int(b.NumRecords()))

	// Stability: what decoded re-encodes to records that decode
	// to the same fields.
	out := fzReEncode(t, b, recs, b.Codec())
	nb, err := segment.ParseBatch(out)
	require.NoError(t, err)
	require.Len(t, out, nb.Size())
	require.NoError(t, nb.CheckCRC())
	require.Equal(t, b.Codec(), nb.Codec())
	require.Equal(t, b.BaseOffset(), nb.BaseOffset())
	require.Equal(t, b.PartitionLeaderEpoch(), nb.PartitionLeaderEpoch())
	require.Equal(t, b.ProducerID(), nb.ProducerID())
	require.Equal(t, b.ProducerEpoch(), nb.ProducerEpoch())
	require.Equal(t, b.BaseSequence(), nb.BaseSequence())
	require.Equal(t, b.Transactional(), nb.Transactional())
	require.Equal(t, b.TimestampType(), nb.TimestampType())
	require.Equal(t, b.BaseTimestamp(), nb.BaseTimestamp())
	require.Equal(t, b.Attributes()&segment.AttrDeleteHorizonSet, nb.Attributes()&segment.AttrDeleteHorizonSet)
	if b.TimestampType() == segment.LogAppendTime {
		require.Equal(t, b.MaxTimestamp(), nb.MaxTimestamp())
	} else {
		want := segment.NoTimestamp
		for i := range recs {
			want = max(want, b.BaseTimestamp()+recs[i].TimestampDelta)
		}
		require.Equal(t, want, nb.MaxTimestamp())
	}
	if len(recs) == 0 {
		require.Equal(t, b.LastOffsetDelta(), nb.LastOffsetDelta())
	} else {
		require.Equal(t, int32(len(recs)-1), nb.LastOffsetDelta())
	}

	rr2 := segment.RecordReader{MaxUncompressedBytes: 1 << 20}
	recs2, err := fzReadAll(&rr2, nb)
	require.NoError(t, err)
	require.Len(t, recs2, len(recs))
	for i := range recs {
		fzRequireSameRecord(t, i, &recs[i], &recs2[i])
	}

	// Idempotence: re-encoding the re-decoded records gives the
	// same record bytes.
	enc := fzRecordBytes(t, b, recs)
	require.Equal(t, enc, fzRecordBytes(t, nb, recs2))

	// What parses re-encodes to the same bytes, when it was
	// written canonically (non-minimal varints and lengths below
	// -1 are legal, and re-encode minimally).
	if canonical {
		require.Equal(t, b.RecordsData(), enc, "canonical records re-encode to other bytes")
	}
}

// fzReadAll reads every record of b, stopping at the first error. The
// records alias rr's buffer and b.
func fzReadAll(rr *segment.RecordReader, b segment.Batch) ([]segment.Record, error) {
	if err := rr.Reset(b); err != nil {
		return nil, err
	}
	var recs []segment.Record
	for rr.Next() {
		recs = append(recs, *rr.Record())
	}
	return recs, rr.Err()
}

// fzReEncode builds recs into a batch with codec and b's header fields.
func fzReEncode(t testing.TB, b segment.Batch, recs []segment.Record, codec segment.Codec) []byte {
	t.Helper()
	bld := segment.NewBuilder(codec)
	bld.SetBaseOffset(b.BaseOffset())
	bld.SetPartitionLeaderEpoch(b.PartitionLeaderEpoch())
	bld.SetProducer(b.ProducerID(), b.ProducerEpoch(), b.BaseSequence())
	bld.SetTransactional(b.Transactional())
	if b.TimestampType() == segment.LogAppendTime {
		bld.SetLogAppendTime(b.MaxTimestamp())
	}
	if _, ok := b.DeleteHorizon(); ok {
		bld.SetDeleteHorizon(b.BaseTimestamp())
	}
	bld.SetBaseTimestamp(b.BaseTimestamp())
	for i := range recs {
		bld.AppendRecord(&recs[i])
	}
	if len(recs) == 0 {
		bld.SetLastOffsetDelta(b.LastOffsetDelta())
	}
	out, err := bld.Build(nil)
	require.NoError(t, err)
	return out
}

// fzRecordBytes returns the uncompressed records section that recs encode
// to with b's base timestamp.
func fzRecordBytes(t testing.TB, b segment.Batch, recs []segment.Record) []byte {
	t.Helper()
	out := fzReEncode(t, b, recs, segment.CodecNone)
	nb, err := segment.ParseBatch(out)
	require.NoError(t, err)
	return nb.RecordsData()
}

// fzRequireSameRecord requires every field of got to equal want's.
func fzRequireSameRecord(t testing.TB, i int, want, got *segment.Record) {
	t.Helper()
	require.Equal(t, want.Attributes, got.Attributes, "record %d: Attributes", i)
	require.Equal(t, want.TimestampDelta, got.TimestampDelta, "record %d: TimestampDelta", i)
	require.Equal(t, want.OffsetDelta, got.OffsetDelta, "record %d: OffsetDelta", i)
	require.Equal(t, want.Timestamp, got.Timestamp, "record %d: Timestamp", i)
	require.Equal(t, want.Offset, got.Offset, "record %d: Offset", i)
	require.Equal(t, want.Sequence, got.Sequence, "record %d: Sequence", i)
	kmBytes(t, want.Key, got.Key, "Key")
	kmBytes(t, want.Value, got.Value, "Value")
	require.Equal(t, want.NumHeaders(), got.NumHeaders(), "record %d: NumHeaders", i)
	wi, gi := want.Headers(), got.Headers()
	for j := 0; wi.Next(); j++ {
		require.True(t, gi.Next(), "record %d: header %d", i, j)
		kmBytes(t, wi.Key(), gi.Key(), "header key")
		kmBytes(t, wi.Value(), gi.Value(), "header value")
	}
	require.False(t, gi.Next(), "record %d: extra headers", i)
}

// fzVarint reads a varint as Java's ByteUtils.readVarint does (at most 5
// bytes; bits past 32 are dropped) and reports whether its bytes are the
// minimal encoding of its value.
func fzVarint(b []byte) (v int32, n int, canonical, ok bool) {
	var x uint32
	for i := 0; i < 5 && i < len(b); i++ {
		x |= uint32(b[i]&0x7f) << (7 * i)
		if b[i] < 0x80 {
			v = int32(x>>1) ^ -int32(x&1)
			return v, i + 1, bytes.Equal(binary.AppendVarint(nil, int64(v)), b[:i+1]), true
		}
	}
	return 0, 0, false, false
}

// fzVarlong reads a varlong as Java's ByteUtils.readVarlong does (at most
// 10 bytes), with fzVarint's results.
func fzVarlong(b []byte) (v int64, n int, canonical, ok bool) {
	var x uint64
	for i := 0; i < 10 && i < len(b); i++ {
		x |= uint64(b[i]&0x7f) << (7 * i)
		if b[i] < 0x80 {
			v = int64(x>>1) ^ -int64(x&1)
			return v, i + 1, bytes.Equal(binary.AppendVarint(nil, v), b[:i+1]), true
		}
	}
	return 0, 0, false, false
}

// fzWalkRecords walks count records in data with the rules of Kafka's
// DefaultRecord.readFrom, written apart from the package's decoder. It
// reports whether they are well formed (Kafka reads them, with nothing
// left over) and whether they are also canonical: every varint minimal
// and no length below -1, so that a writer would produce the same bytes.
func fzWalkRecords(data []byte, count int32) (wellFormed, canonical bool) {
	if count < 0 {
		return false, false
	}
	canonical = true
	for range count {
		size, n, c, ok := fzVarint(data)
		if !ok || size < 0 || int64(size) > int64(len(data)-n) {
			return false, false
		}
		canonical = canonical && c
		body := data[n : n+int(size)]
		data = data[n+int(size):]
		if len(body) == 0 {
			return false, false
		}
		p := 1 // attributes
		if _, m, c, ok := fzVarlong(body[p:]); ok {
			p, canonical = p+m, canonical && c
		} else {
			return false, false
		}
		if _, m, c, ok := fzVarint(body[p:]); ok {
			p, canonical = p+m, canonical && c
		} else {
			return false, false
		}
		for range 2 { // key, value: any negative length is null
			l, m, c, ok := fzVarint(body[p:])
			if !ok {
				return false, false
			}
			p, canonical = p+m, canonical && c && l >= -1
			if l >= 0 {
				if int64(l) > int64(len(body)-p) {
					return false, false
				}
				p += int(l)
			}
		}
		hc, m, c, ok := fzVarint(body[p:])
		if !ok || hc < 0 {
			return false, false
		}
		p, canonical = p+m, canonical && c
		for range hc {
			kl, m, c, ok := fzVarint(body[p:])
			if !ok || kl < 0 || int64(kl) > int64(len(body)-p-m) {
				return false, false
			}
			p, canonical = p+m+int(kl), canonical && c
			vl, m, c, ok := fzVarint(body[p:])
			if !ok {
				return false, false
			}
			p, canonical = p+m, canonical && c && vl >= -1
			if vl >= 0 {
				if int64(vl) > int64(len(body)-p) {
					return false, false
				}
				p += int(vl)
			}
		}
		if p != len(body) {
			return false, false
		}
	}
	if len(data) != 0 {
		return false, false
	}
	return true, canonical
}

// TestFuzzWalker checks the test's own record walker on hand-made records.
func TestFuzzWalker(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		records               string
		count                 int32
		wellFormed, canonical bool
	}{
		{"vector", "10 00 00 00 02 6b 02 76 00", 1, true, true},
		{"two", "10 00 00 00 02 6b 02 76 00 10 00 00 02 02 6b 02 76 00", 2, true, true},
		{"none", "", 0, true, true},
		{"count too high", "10 00 00 00 02 6b 02 76 00", 2, false, false},
		{"left over", "10 00 00 00 02 6b 02 76 00 00", 1, false, false},
		{"overlong key length", "12 00 00 00 82 00 6b 02 76 00", 1, true, false},
		{"overlong record length", "90 00 00 00 00 02 6b 02 76 00", 1, true, false},
		{"key length -2", "0e 00 00 00 03 02 76 00", 1, true, false},
		{"null key and value", "0c 00 00 00 01 01 00", 1, true, true},
		{"null header value", "16 00 00 00 02 6b 02 76 02 02 68 01", 1, true, true},
		{"header value -3", "16 00 00 00 02 6b 02 76 02 02 68 05", 1, true, false},
		{"null header key", "16 00 00 00 02 6b 02 76 02 01 02 76", 1, false, false},
		{"body too short", "0e 00 00 00 02 6b 02 76 00", 1, false, false},
		{"empty body", "00", 1, false, false},
		{"six-byte varlong", "1a 00 80 80 80 80 80 00 00 02 6b 02 76 00", 1, true, false},
		{"six-byte varint", "1a 00 00 80 80 80 80 80 00 02 6b 02 76 00", 1, false, false},
		{"negative count", "", -1, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wf, c := fzWalkRecords(fzUnhex(t, tc.records), tc.count)
			require.Equal(t, tc.wellFormed, wf, "well formed")
			require.Equal(t, tc.canonical, c, "canonical")
		})
	}
}

// fzTieredLog is a run of batches with producers, transactions, markers
// and leader epochs: the kind of .log whose state the offloader derives.
func fzTieredLog(t testing.TB) []byte {
	var out []byte
	add := func(base int64, epoch int32, pid int64, pepoch int16, seq int32, txn bool, n int) {
		b := segment.NewBuilder(segment.CodecNone)
		b.SetBaseOffset(base)
		b.SetPartitionLeaderEpoch(epoch)
		if pid >= 0 {
			b.SetProducer(pid, pepoch, seq)
		}
		b.SetTransactional(txn)
		for i := range n {
			b.Append(kmT0+base+int64(i), []byte("k"), []byte("v"))
		}
		batch, err := b.Build(nil)
		require.NoError(t, err)
		out = append(out, batch...)
	}
	marker := func(base int64, epoch int32, commit bool, pid int64, pepoch int16) {
		m := segment.AppendEndTxnMarker(nil, segment.EndTxnMarker{Commit: commit, ProducerID: pid, ProducerEpoch: pepoch, CoordinatorEpoch: 3, Timestamp: kmT0 + base})
		segment.Batch(m).SetBaseOffset(base)
		segment.Batch(m).SetPartitionLeaderEpoch(epoch)
		out = append(out, m...)
	}
	add(0, 0, -1, -1, -1, false, 2)
	add(2, 0, 7, 0, 0, true, 3)
	add(5, 1, 8, 2, 10, false, 2)
	marker(7, 1, true, 7, 0)
	add(8, 3, 9, 0, 0, true, 1)
	marker(9, 3, false, 9, 1)
	add(10, 2, 8, 2, 12, false, 1)
	return out
}

// FuzzProducerSnapshot: ParseProducerSnapshot never panics, fails only
// with CORRUPT_MESSAGE, reads no more entries than the bytes hold, and
// what it reads re-encodes to bytes it reads back the same (the input
// itself when it has no trailing bytes).
func FuzzProducerSnapshot(f *testing.F) {
	vector := fzUnhex(f, `00013f88be640000000100000000000003e80003000000090000000000000063000000040000018bcfe568
		00ffffffffffffffffffffffff`)
	f.Add(vector)
	f.Add(segment.AppendProducerSnapshot(nil, nil))
	f.Add(segment.AppendProducerSnapshot(nil, segment.ProducerSnapshotFromBatches(fzTieredLog(f))))
	f.Add(vector[:55])
	f.Add(append(slices.Clone(vector), 0))
	f.Fuzz(func(t *testing.T, data []byte) {
		orig := slices.Clone(data)
		entries, err := segment.ParseProducerSnapshot(data)
		require.Equal(t, orig, data, "ParseProducerSnapshot wrote to its input")
		if err != nil {
			require.Equal(t, segment.CorruptMessage, fzRequireError(t, err))
			return
		}
		require.LessOrEqual(t, 10+46*len(entries), len(data))
		again := segment.AppendProducerSnapshot(nil, entries)
		if len(data) == 10+46*len(entries) {
			require.Equal(t, data, again)
		}
		back, err := segment.ParseProducerSnapshot(again)
		require.NoError(t, err)
		require.Equal(t, len(entries), len(back))
		for i := range entries {
			require.Equal(t, entries[i], back[i])
		}
	})
}

// FuzzStateOfBatches: ProducerSnapshotFromBatches and
// LeaderEpochsOfBatches never panic on any bytes; the producers come out
// by ascending ID and round-trip through a snapshot; the epochs ascend
// with their start offsets, and round-trip through a checkpoint.
func FuzzStateOfBatches(f *testing.F) {
	f.Add(fzTieredLog(f))
	for _, s := range fzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		orig := slices.Clone(data)
		producers := segment.ProducerSnapshotFromBatches(data)
		epochs := segment.LeaderEpochsOfBatches(data)
		require.Equal(t, orig, data, "the walks wrote to their input")
		for i := 1; i < len(producers); i++ {
			require.Less(t, producers[i-1].ProducerID, producers[i].ProducerID)
		}
		back, err := segment.ParseProducerSnapshot(segment.AppendProducerSnapshot(nil, producers))
		require.NoError(t, err)
		require.Equal(t, len(producers), len(back))
		for i := 1; i < len(epochs); i++ {
			require.Less(t, epochs[i-1].Epoch, epochs[i].Epoch)
			require.Less(t, epochs[i-1].StartOffset, epochs[i].StartOffset)
		}
		for _, e := range epochs {
			require.GreaterOrEqual(t, e.Epoch, int32(0))
			require.GreaterOrEqual(t, e.StartOffset, int64(0))
		}
		parsed, err := segment.ParseLeaderEpochCheckpoint(segment.AppendLeaderEpochCheckpoint(nil, epochs))
		require.NoError(t, err)
		require.Equal(t, len(epochs), len(parsed))
		for i := range epochs {
			require.Equal(t, epochs[i], parsed[i])
		}
	})
}

// FuzzLeaderEpochCheckpoint: ParseLeaderEpochCheckpoint never panics,
// fails only with CORRUPT_MESSAGE, and what it reads is what the file it
// writes for those entries reads back.
func FuzzLeaderEpochCheckpoint(f *testing.F) {
	for _, s := range []string{
		"", "0", "0\n0\n", "0\n2\n0 1\n1 2\n", "0\r\n1\r\n5\t7 \r\n", "0\n1\n 5 7\n", "1\n0\n",
		"0\n2\n5 7\n", "0\n1\n2147483648 7\n", "0\n1\n+5 -7", "0\n-1\n",
	} {
		f.Add([]byte(s))
	}
	f.Add(segment.AppendLeaderEpochCheckpoint(nil, segment.LeaderEpochsOfBatches(fzTieredLog(f))))
	f.Fuzz(func(t *testing.T, data []byte) {
		orig := slices.Clone(data)
		entries, err := segment.ParseLeaderEpochCheckpoint(data)
		require.Equal(t, orig, data, "ParseLeaderEpochCheckpoint wrote to its input")
		if err != nil {
			require.Equal(t, segment.CorruptMessage, fzRequireError(t, err))
			return
		}
		again := segment.AppendLeaderEpochCheckpoint(nil, entries)
		back, err := segment.ParseLeaderEpochCheckpoint(again)
		require.NoError(t, err)
		require.Equal(t, len(entries), len(back))
		for i := range entries {
			require.Equal(t, entries[i], back[i])
		}
		require.Equal(t, again, segment.AppendLeaderEpochCheckpoint(nil, back), "re-encoding is stable")
	})
}

// fzRemoteMetadata is a RemoteLogSegmentMetadata to seed from.
func fzRemoteMetadata() segment.RemoteLogSegmentMetadata {
	return segment.RemoteLogSegmentMetadata{
		TopicID:             uuid.MustParse("00112233-4455-6677-8899-aabbccddeeff"),
		Topic:               "orders",
		Partition:           3,
		SegmentID:           uuid.MustParse("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"),
		StartOffset:         100,
		EndOffset:           199,
		MaxTimestampMs:      kmT0,
		BrokerID:            1,
		EventTimestampMs:    kmT0 + 1000,
		SegmentLeaderEpochs: []segment.EpochEntry{{Epoch: 5, StartOffset: 100}, {Epoch: 6, StartOffset: 150}},
		SegmentSizeInBytes:  4096,
		State:               segment.CopySegmentFinished,
		TxnIndexEmpty:       true,
	}
}

// FuzzRemoteLogSegmentMetadata: Unmarshal never panics, fails only with
// CORRUPT_MESSAGE and then leaves its value alone, and what it reads
// Marshal writes, to bytes that read back the same and write again the
// same.
func FuzzRemoteLogSegmentMetadata(f *testing.F) {
	m := fzRemoteMetadata()
	for _, edit := range []func(*segment.RemoteLogSegmentMetadata){
		func(*segment.RemoteLogSegmentMetadata) {},
		func(m *segment.RemoteLogSegmentMetadata) {
			m.CustomMetadata = []byte("custom")
			m.TxnIndexEmpty = false
		},
		func(m *segment.RemoteLogSegmentMetadata) { m.CustomMetadata = []byte{} },
		func(m *segment.RemoteLogSegmentMetadata) {
			m.Topic = ""
			m.SegmentLeaderEpochs = m.SegmentLeaderEpochs[:1]
		},
	} {
		c := m
		edit(&c)
		b, err := c.Marshal()
		require.NoError(f, err)
		f.Add(b)
		f.Add(b[:len(b)-1])
		// Version 1, its tagged fields replaced by BrokerLeaderEpoch (tag
		// 1) and an unknown tag 9.
		tags := 1 // none: a count of 0
		if c.TxnIndexEmpty {
			tags = 4 // count 1, tag 0, size 1, true
		}
		v1 := slices.Clone(b[:len(b)-tags])
		v1[2] = 1
		f.Add(append(v1, 0x02, 0x01, 0x04, 0, 0, 0, 7, 0x09, 0x01, 0xff))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		orig := slices.Clone(data)
		var got segment.RemoteLogSegmentMetadata
		err := got.Unmarshal(data)
		require.Equal(t, orig, data, "Unmarshal wrote to its input")
		if err != nil {
			require.Equal(t, segment.CorruptMessage, fzRequireError(t, err))
			require.Equal(t, segment.RemoteLogSegmentMetadata{}, got)
			return
		}
		b, err := got.Marshal()
		require.NoError(t, err, "Marshal refuses what Unmarshal read")
		var back segment.RemoteLogSegmentMetadata
		require.NoError(t, back.Unmarshal(b))
		require.Equal(t, got, back)
		b2, err := back.Marshal()
		require.NoError(t, err)
		require.Equal(t, b, b2)
	})
}

// FuzzIndexLookup: LookupOffsetIndex and LookupTimeIndex never panic on
// any bytes and, when the entries ascend as Kafka writes them (offsets
// strictly, timestamps never going back), agree with a linear scan: the
// last entry at or below the target, else the base.
func FuzzIndexLookup(f *testing.F) {
	var off, tim []byte
	for i := range 5 {
		off = binary.BigEndian.AppendUint32(off, uint32(10*i+3))
		off = binary.BigEndian.AppendUint32(off, uint32(1000*i))
		tim = binary.BigEndian.AppendUint64(tim, uint64(kmT0+int64(100*i)))
		tim = binary.BigEndian.AppendUint32(tim, uint32(10*i+3))
	}
	f.Add(off, tim, int64(0), int64(25), kmT0+250)
	f.Add(off, tim, int64(1<<40), int64(1<<40+3), kmT0)
	f.Add(off[:7], tim[:13], int64(0), int64(-1), int64(-1))
	f.Add([]byte{}, []byte{}, int64(5), int64(5), int64(0))
	f.Fuzz(func(t *testing.T, off, tim []byte, base, target, ts int64) {
		gotOff, gotPos := segment.LookupOffsetIndex(off, base, target)
		gotTs, gotTsOff, found := segment.LookupTimeIndex(tim, base, ts)

		ascending, wantOff, wantPos := true, base, int64(0)
		for i := 0; i+8 <= len(off); i += 8 {
			o := base + int64(int32(binary.BigEndian.Uint32(off[i:])))
			if i > 0 && o <= base+int64(int32(binary.BigEndian.Uint32(off[i-8:]))) {
				ascending = false
			}
			if o <= target {
				wantOff, wantPos = o, int64(int32(binary.BigEndian.Uint32(off[i+4:])))
			}
		}
		if ascending {
			require.Equal(t, wantOff, gotOff)
			require.Equal(t, wantPos, gotPos)
		}

		ascending = true
		wantTs, wantTsOff, wantFound := segment.NoTimestamp, base, false
		for i := 0; i+12 <= len(tim); i += 12 {
			tsi := int64(binary.BigEndian.Uint64(tim[i:]))
			if i > 0 && tsi < int64(binary.BigEndian.Uint64(tim[i-12:])) {
				ascending = false
			}
			if tsi <= ts {
				wantTs, wantTsOff, wantFound = tsi, base+int64(int32(binary.BigEndian.Uint32(tim[i+8:]))), true
			}
		}
		if ascending {
			require.Equal(t, wantFound, found)
			require.Equal(t, wantTs, gotTs)
			require.Equal(t, wantTsOff, gotTsOff)
		}
	})
}
