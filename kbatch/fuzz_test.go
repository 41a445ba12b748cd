package kbatch_test

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

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

// fzVectorBatch is the producer batch of docs/formats.md, "Test vectors": one record, key
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
	for _, codec := range kbatch.Codecs {
		b := kbatch.NewBuilder(codec)
		b.Append(kmT0, []byte("key"), []byte("value"))
		b.Append(kmT0+5, nil, []byte{})
		b.Append(kmT0-5, []byte{}, nil)
		plain, err := b.Build(nil)
		require.NoError(t, err)

		b.Reset(codec)
		b.SetProducer(1234, 5, 100)
		b.SetTransactional(true)
		b.Append(kmT0, []byte("key"), []byte("value value value value"),
			kbatch.Header{Key: "h", Value: []byte("v")},
			kbatch.Header{Key: "null", Value: nil},
			kbatch.Header{Key: "", Value: []byte{}})
		b.Append(kmT0+1, []byte("key2"), []byte("value value value value"))
		withHeaders, err := b.Build(nil)
		require.NoError(t, err)
		seeds = append(seeds, plain, withHeaders)

		spec := kgoSpecs()[2] // headers, compressible
		kraw, _, _ := kgoBuild(t, codec, spec)
		seeds = append(seeds, kraw)
	}

	lat := kbatch.NewBuilder(kbatch.CodecNone)
	lat.SetLogAppendTime(kmT0 + 500)
	lat.Append(kmT0, []byte("k"), []byte("v"))
	latBatch, err := lat.Build(nil)
	require.NoError(t, err)
	seeds = append(seeds, latBatch)

	for _, commit := range []bool{true, false} {
		seeds = append(seeds, kbatch.AppendEndTxnMarker(nil, kbatch.EndTxnMarker{
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
var fzCodes = []kafkaerr.Code{
	kafkaerr.UnknownServerError, kafkaerr.CorruptMessage, kafkaerr.MessageTooLarge,
	kafkaerr.RecordListTooLarge, kafkaerr.InvalidTimestamp,
	kafkaerr.UnsupportedCompressionType, kafkaerr.InvalidRecord,
}

// fzRequireError requires err to be a *kafkaerr.Error with a known code and
// a message, and returns its code.
func fzRequireError(t testing.TB, err error) kafkaerr.Code {
	t.Helper()
	var se *kafkaerr.Error
	require.True(t, errors.As(err, &se), "not a *kafkaerr.Error: %T %v", err, err)
	require.Contains(t, fzCodes, se.Code, "unknown code in %v", err)
	require.NotEmpty(t, se.Message, "no message in %v", err)
	require.Equal(t, se.Code, kafkaerr.CodeOf(err))
	return se.Code
}

// FuzzBatches: iterating any bytes never panics, yields views that tile a
// prefix of the input, and agrees with ParseBatch on the first batch.
func FuzzBatches(f *testing.F) {
	for _, s := range fzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		it := kbatch.NewBatchIter(data)
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
				pb, err := kbatch.ParseBatch(data)
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
			require.Equal(t, kafkaerr.CorruptMessage, code)
			require.False(t, it.Partial())
		} else {
			require.Equal(t, it.Pos() < len(data), it.Partial())
		}
		require.False(t, it.Next(), "Next after the end")

		if n == 0 {
			_, perr := kbatch.ParseBatch(data)
			require.Error(t, perr, "ParseBatch finds a batch where the iterator found none")
			code := fzRequireError(t, perr)
			if err := it.Err(); err != nil {
				require.Equal(t, kafkaerr.CodeOf(err), code, "ParseBatch: %v; iterator: %v", perr, err)
			} else {
				require.Equal(t, kafkaerr.CorruptMessage, code, "no whole batch: %v", perr)
			}
		}
	})
}

// fzStrict is a topic that checks everything that can be checked: keys
// (compacted), the LogAppendTime bit, and the codec (recompressing to zstd).
var fzStrict = &kbatch.ValidateOptions{
	Compacted:     true,
	TimestampType: kbatch.LogAppendTime,
	Compression:   kbatch.TopicCodec(kbatch.CodecZstd),
}

// FuzzValidate: Validate never panics nor writes to its input, fails only
// with a *kafkaerr.Error, and what it accepts is a whole batch whose records
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
	for _, opts := range []*kbatch.ValidateOptions{nil, fzStrict} {
		res, err := kbatch.Validate(data, opts)
		require.Equal(t, orig, data, "Validate wrote to its input")
		// Streaming the records out of the decompressor accepts what
		// decompressing them whole accepts, with the same result (a
		// refusal's code may differ: the stream meets a bad record
		// before a bad end of the payload, as Kafka's reader does).
		whole, werr := kbatch.ValidateWhole(data, opts)
		require.Equal(t, werr == nil, err == nil, "streamed: %v; whole: %v", err, werr)
		if err != nil {
			fzRequireError(t, err)
			continue
		}
		require.Equal(t, whole, res)
		b := res.Batch
		require.GreaterOrEqual(t, len(b), 61)
		require.LessOrEqual(t, len(b), len(data))
		require.Same(t, &data[0], &b[0], "the batch is a view into the input")
		require.Equal(t, data[:len(b)], []byte(b))
		require.NoError(t, b.CheckCRC())
		require.Equal(t, int64(0), b.BaseOffset())
		require.LessOrEqual(t, len(b), kbatch.DefaultMaxMessageBytes)
		require.False(t, b.Control())
		require.Equal(t, b.NumRecords()-1, b.LastOffsetDelta())
		require.Positive(t, b.NumRecords())
		require.False(t, b.HasProducerID() && b.BaseSequence() < 0)

		var rr kbatch.RecordReader
		require.NoError(t, rr.Reset(b))
		var maxTs int64 = kbatch.NoTimestamp
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
		if b.Codec() == kbatch.CodecNone {
			require.Equal(t, len(b.RecordsData()), res.UncompressedBytes)
		}
		if opts == fzStrict {
			require.NotEqual(t, kbatch.LogAppendTime, b.TimestampType(), "a client's LogAppendTime batch")
			require.Equal(t, b.Codec() != kbatch.CodecZstd || !deltasInOrder, res.NeedsRebuild)
		} else {
			require.Equal(t, b.Codec() != kbatch.CodecNone && !deltasInOrder, res.NeedsRebuild)
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
func fzRequireRebuild(t testing.TB, b kbatch.Batch, opts *kbatch.ValidateOptions) {
	t.Helper()
	out, err := kbatch.Rebuild(nil, b, opts)
	if err != nil {
		require.Equal(t, kafkaerr.MessageTooLarge, fzRequireError(t, err), "Rebuild of a valid batch: %v", err)
		return
	}
	nb, err := kbatch.ParseBatch(out)
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

	var ra, rb kbatch.RecordReader
	require.NoError(t, ra.Reset(b))
	require.NoError(t, rb.Reset(nb))
	for i := int32(0); ra.Next(); i++ {
		require.True(t, rb.Next(), "record %d: %v", i, rb.Err())
		x, y := ra.Record(), rb.Record()
		require.Equal(t, i, y.OffsetDelta)
		if opts == nil || opts.TimestampType == kbatch.CreateTime {
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
	b, err := kbatch.ParseBatch(data)
	if err != nil {
		return
	}
	rr := kbatch.RecordReader{MaxUncompressedBytes: 1 << 20}
	recs, err := fzReadAll(&rr, b)
	wellFormed, canonical := false, false
	if b.Codec() == kbatch.CodecNone {
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
	nb, err := kbatch.ParseBatch(out)
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
	require.Equal(t, b.Attributes()&kbatch.AttrDeleteHorizonSet, nb.Attributes()&kbatch.AttrDeleteHorizonSet)
	if b.TimestampType() == kbatch.LogAppendTime {
		require.Equal(t, b.MaxTimestamp(), nb.MaxTimestamp())
	} else {
		want := kbatch.NoTimestamp
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

	rr2 := kbatch.RecordReader{MaxUncompressedBytes: 1 << 20}
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
func fzReadAll(rr *kbatch.RecordReader, b kbatch.Batch) ([]kbatch.Record, error) {
	if err := rr.Reset(b); err != nil {
		return nil, err
	}
	var recs []kbatch.Record
	for rr.Next() {
		recs = append(recs, *rr.Record())
	}
	return recs, rr.Err()
}

// fzReEncode builds recs into a batch with codec and b's header fields.
func fzReEncode(t testing.TB, b kbatch.Batch, recs []kbatch.Record, codec kbatch.Codec) []byte {
	t.Helper()
	bld := kbatch.NewBuilder(codec)
	bld.SetBaseOffset(b.BaseOffset())
	bld.SetPartitionLeaderEpoch(b.PartitionLeaderEpoch())
	bld.SetProducer(b.ProducerID(), b.ProducerEpoch(), b.BaseSequence())
	bld.SetTransactional(b.Transactional())
	if b.TimestampType() == kbatch.LogAppendTime {
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
func fzRecordBytes(t testing.TB, b kbatch.Batch, recs []kbatch.Record) []byte {
	t.Helper()
	out := fzReEncode(t, b, recs, kbatch.CodecNone)
	nb, err := kbatch.ParseBatch(out)
	require.NoError(t, err)
	return nb.RecordsData()
}

// fzRequireSameRecord requires every field of got to equal want's.
func fzRequireSameRecord(t testing.TB, i int, want, got *kbatch.Record) {
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
