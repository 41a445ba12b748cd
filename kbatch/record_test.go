package kbatch

import (
	"bytes"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kafkaerr"
)

func TestRecordsNullAndEmpty(t *testing.T) {
	for _, codec := range Codecs {
		t.Run(codec.String(), func(t *testing.T) {
			b := NewBuilder(codec)
			b.Append(1, nil, nil)
			b.Append(2, []byte{}, []byte{})
			b.Append(3, []byte("k"), nil, Header{Key: "h", Value: nil}, Header{Key: "", Value: []byte{}}, Header{Key: "x", Value: []byte("y")})
			raw, err := b.Build(nil)
			require.NoError(t, err)
			batch, err := ParseBatch(raw)
			require.NoError(t, err)

			var rr RecordReader
			require.NoError(t, rr.Reset(batch))
			require.True(t, rr.Next())
			r := rr.Record()
			require.Nil(t, r.Key)
			require.Nil(t, r.Value)
			require.Zero(t, r.NumHeaders())
			require.Equal(t, 0, rr.Index())

			require.True(t, rr.Next())
			require.NotNil(t, r.Key)
			require.Empty(t, r.Key)
			require.NotNil(t, r.Value)
			require.Empty(t, r.Value)

			require.True(t, rr.Next())
			require.Equal(t, []byte("k"), r.Key)
			require.Nil(t, r.Value)
			require.Equal(t, 3, r.NumHeaders())
			hs := r.AppendHeaders(nil)
			require.Equal(t, []Header{{"h", nil}, {"", []byte{}}, {"x", []byte("y")}}, hs)
			require.Nil(t, hs[0].Value)
			require.NotNil(t, hs[1].Value)
			it := r.Headers()
			var keys []string
			for it.Next() {
				keys = append(keys, string(it.Key()))
			}
			require.Equal(t, []string{"h", "", "x"}, keys)
			require.Equal(t, int64(3), r.Timestamp)
			require.Equal(t, int64(2), r.TimestampDelta)
			require.Equal(t, int32(2), r.OffsetDelta)
			require.Equal(t, 2, rr.Index())

			require.False(t, rr.Next())
			require.NoError(t, rr.Err())
		})
	}
}

func TestRecordViewsDoNotGrowIntoNeighbours(t *testing.T) {
	raw := buildBatch(t, CodecNone, 2, nil)
	batch, _ := ParseBatch(raw)
	var rr RecordReader
	require.NoError(t, rr.Reset(batch))
	require.True(t, rr.Next())
	k := rr.Record().Key
	require.Equal(t, len(k), cap(k), "appending to a key must not overwrite the batch")
}

func TestRecordTimestamps(t *testing.T) {
	b := NewBuilder(CodecNone)
	ts := []int64{1000, 400, math.MaxInt32 * 4, -1}
	for _, x := range ts {
		b.Append(x, nil, []byte("v"))
	}
	raw, err := b.Build(nil)
	require.NoError(t, err)
	batch, _ := ParseBatch(raw)
	require.Equal(t, int64(1000), batch.BaseTimestamp())
	require.Equal(t, int64(math.MaxInt32*4), batch.MaxTimestamp())
	var rr RecordReader
	require.NoError(t, rr.Reset(batch))
	for i := 0; rr.Next(); i++ {
		require.Equal(t, ts[i], rr.Record().Timestamp)
		require.Equal(t, ts[i]-1000, rr.Record().TimestampDelta)
	}
	require.NoError(t, rr.Err())
}

func TestRecordReaderReuse(t *testing.T) {
	var rr RecordReader
	for i := 0; i < 3; i++ {
		for _, codec := range Codecs {
			raw := buildBatch(t, codec, 50, nil)
			batch, _ := ParseBatch(raw)
			require.NoError(t, rr.Reset(batch))
			n := 0
			for rr.Next() {
				require.Equal(t, []byte{'k', byte(n)}, rr.Record().Key)
				n++
			}
			require.NoError(t, rr.Err())
			require.Equal(t, 50, n)
		}
	}
}

func TestRecordReaderErrors(t *testing.T) {
	ok := buildBatch(t, CodecNone, 2, nil)
	cases := []struct {
		name string
		raw  []byte
		code kafkaerr.Code
	}{
		{"negative count", edit(ok, put32(recordsCountOffset, -1)), kafkaerr.InvalidRecord},
		{"count beyond the records", edit(ok, put32(recordsCountOffset, 3)), kafkaerr.InvalidRecord},
		{"bytes after the records", edit(ok, func(b []byte) []byte { return append(b, 0, 0) }), kafkaerr.InvalidRecord},
		{"unknown codec", edit(ok, func(b []byte) []byte { b[attributesOffset+1] |= 6; return b }), kafkaerr.UnknownServerError},
		{"negative header count", edit(buildBatch(t, CodecNone, 1, nil), func(b []byte) []byte {
			b[len(b)-1] = 0x01 // header count -1
			return b
		}), kafkaerr.InvalidRecord},
		{"negative header key length", func() []byte {
			bld := NewBuilder(CodecNone)
			bld.Append(0, nil, nil, Header{Key: "a", Value: []byte("b")})
			raw, _ := bld.Build(nil)
			i := bytes.LastIndex(raw, []byte{0x02, 'a'})
			raw[i] = 0x01
			return fixCRC(raw)
		}(), kafkaerr.InvalidRecord},
		{"header value past the record", func() []byte {
			bld := NewBuilder(CodecNone)
			bld.Append(0, nil, nil, Header{Key: "a", Value: []byte("b")})
			raw, _ := bld.Build(nil)
			raw[len(raw)-2] = 0x20
			return fixCRC(raw)
		}(), kafkaerr.InvalidRecord},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			batch, err := ParseBatch(c.raw)
			require.NoError(t, err)
			var rr RecordReader
			err = rr.Reset(batch)
			for err == nil && rr.Next() {
			}
			if err == nil {
				err = rr.Err()
			}
			require.Equal(t, c.code, kafkaerr.CodeOf(err), "%v", err)
			require.False(t, rr.Next())
		})
	}
}

func TestDecompressionBound(t *testing.T) {
	b := NewBuilder(CodecZstd)
	b.Append(0, nil, make([]byte, 2<<20))
	raw, err := b.Build(nil)
	require.NoError(t, err)
	batch, _ := ParseBatch(raw)
	rr := RecordReader{MaxUncompressedBytes: 1 << 20}
	require.Equal(t, kafkaerr.MessageTooLarge, kafkaerr.CodeOf(rr.Reset(batch)))
	_, err = Validate(raw, &ValidateOptions{MaxUncompressedBytes: 1 << 20})
	require.Equal(t, kafkaerr.MessageTooLarge, kafkaerr.CodeOf(err))
	_, err = Validate(raw, nil)
	require.NoError(t, err)
}

func TestControlRecords(t *testing.T) {
	raw := AppendEndTxnMarker(nil, EndTxnMarker{Commit: false, ProducerID: 5, ProducerEpoch: 1, CoordinatorEpoch: 2, Timestamp: 10})
	batch, err := ParseBatch(raw)
	require.NoError(t, err)
	require.Equal(t, AttrTransactional|AttrControl, batch.Attributes())
	require.Equal(t, NoSequence, batch.BaseSequence())
	require.Equal(t, int64(10), batch.BaseTimestamp())
	require.Equal(t, int64(10), batch.MaxTimestamp())
	var rr RecordReader
	require.NoError(t, rr.Reset(batch))
	require.True(t, rr.Next())
	cr, err := ParseControlRecord(rr.Record())
	require.NoError(t, err)
	require.Equal(t, ControlRecord{Type: ControlAbort, CoordinatorEpoch: 2}, cr)
	require.Equal(t, "ABORT(coordinatorEpoch=2)", cr.String())

	// Validate rejects a marker from a client (row 8).
	_, err = Validate(raw, nil)
	require.Equal(t, kafkaerr.InvalidRecord, kafkaerr.CodeOf(err))

	cases := []struct {
		name       string
		key, value []byte
		want       ControlRecord
		code       kafkaerr.Code
	}{
		{"short key", []byte{0, 0, 0}, nil, ControlRecord{}, kafkaerr.InvalidRecord},
		{"negative version", []byte{0x80, 0, 0, 1}, make([]byte, 6), ControlRecord{}, kafkaerr.InvalidRecord},
		{"higher version read as 0", []byte{0, 3, 0, 1, 9}, []byte{0, 0, 0, 0, 0, 4}, ControlRecord{Version: 3, Type: ControlCommit, CoordinatorEpoch: 4}, kafkaerr.NoError},
		{"short marker value", []byte{0, 0, 0, 1}, []byte{0, 0, 0, 0, 0}, ControlRecord{}, kafkaerr.InvalidRecord},
		{"negative marker version", []byte{0, 0, 0, 0}, []byte{0xff, 0xff, 0, 0, 0, 0}, ControlRecord{}, kafkaerr.InvalidRecord},
		{"unknown type", []byte{0, 0, 0, 42}, nil, ControlRecord{Type: ControlUnknown}, kafkaerr.NoError},
		{"leader change", []byte{0, 0, 0, 2}, nil, ControlRecord{Type: ControlLeaderChange}, kafkaerr.NoError},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseControlRecord(&Record{Key: c.key, Value: c.value})
			require.Equal(t, c.code, kafkaerr.CodeOf(err))
			require.Equal(t, c.want, got)
		})
	}
}

func TestBuilder(t *testing.T) {
	t.Run("no records", func(t *testing.T) {
		b := NewBuilder(CodecNone)
		_, err := b.Build(nil)
		require.ErrorIs(t, err, ErrNoRecords)
	})
	t.Run("empty batch claiming offsets, as the cleaner leaves", func(t *testing.T) {
		b := NewBuilder(CodecNone)
		b.SetLastOffsetDelta(4)
		b.SetProducer(3, 1, 10)
		raw, err := b.Build(nil)
		require.NoError(t, err)
		require.Len(t, raw, HeaderSize)
		batch, _ := ParseBatch(raw)
		require.Equal(t, int32(0), batch.NumRecords())
		require.Equal(t, int32(4), batch.LastOffsetDelta())
		require.Equal(t, NoTimestamp, batch.BaseTimestamp())
		require.Equal(t, int32(14), batch.LastSequence())
	})
	t.Run("invalid codec", func(t *testing.T) {
		b := NewBuilder(Codec(7))
		b.Append(0, nil, nil)
		_, err := b.Build(nil)
		require.Error(t, err)
	})
	t.Run("appends to dst and can build again", func(t *testing.T) {
		b := NewBuilder(CodecLZ4)
		b.Append(0, []byte("k"), []byte("v"))
		one, err := b.Build([]byte("xyz"))
		require.NoError(t, err)
		require.Equal(t, []byte("xyz"), one[:3])
		two, err := b.Build(nil)
		require.NoError(t, err)
		require.Equal(t, one[3:], two)
		require.Equal(t, 1, b.NumRecords())
		require.Equal(t, HeaderSize+9, b.UncompressedSize())
		b.Reset(CodecNone)
		require.Zero(t, b.NumRecords())
	})
	t.Run("transactional toggles", func(t *testing.T) {
		b := NewBuilder(CodecNone)
		b.SetTransactional(true)
		b.SetTransactional(false)
		b.Append(0, nil, nil)
		raw, _ := b.Build(nil)
		batch, _ := ParseBatch(raw)
		require.False(t, batch.Transactional())
	})
}

func TestVarints(t *testing.T) {
	for _, v := range []int32{0, 1, -1, 63, -64, 64, 300, -300, math.MaxInt32, math.MinInt32} {
		enc := appendVarint(nil, v)
		require.Equal(t, sizeVarint(v), len(enc))
		got, n := readVarint(enc)
		require.Equal(t, v, got)
		require.Equal(t, len(enc), n)
	}
	for _, v := range []int64{0, 1, -1, 1 << 40, -(1 << 40), math.MaxInt64, math.MinInt64} {
		enc := appendVarlong(nil, v)
		require.Equal(t, sizeVarlong(v), len(enc))
		got, n := readVarlong(enc)
		require.Equal(t, v, got)
		require.Equal(t, len(enc), n)
	}
	// Java's rules: a fifth (tenth) byte with the continuation bit is an
	// error; overlong encodings are accepted; a short input is truncated.
	_, n := readVarint([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0})
	require.Equal(t, -1, n)
	v, n := readVarint([]byte{0x80, 0x00})
	require.Equal(t, int32(0), v)
	require.Equal(t, 2, n)
	_, n = readVarint([]byte{0x80})
	require.Equal(t, 0, n)
	_, n = readVarlong(bytes.Repeat([]byte{0x80}, 11))
	require.Equal(t, -1, n)
	v64, n := readVarlong(append(bytes.Repeat([]byte{0x80}, 9), 0x7f))
	require.Equal(t, 10, n, "Java accepts a tenth byte without the continuation bit")
	require.Equal(t, int64(1)<<62, v64, "its high bits overflow as in Java")
}
