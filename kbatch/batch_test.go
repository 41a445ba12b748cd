package kbatch

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kafkaerr"
)

// buildBatch builds a batch of n records with the given codec; mutate, if
// set, adjusts the builder before the records are appended.
func buildBatch(t testing.TB, codec Codec, n int, mutate func(*Builder)) []byte {
	t.Helper()
	b := NewBuilder(codec)
	if mutate != nil {
		mutate(b)
	}
	for i := 0; i < n; i++ {
		b.Append(vectorTimestamp+int64(i), []byte{'k', byte(i)}, []byte{'v', byte(i)})
	}
	out, err := b.Build(nil)
	require.NoError(t, err)
	return out
}

func TestBatchHeaderFields(t *testing.T) {
	raw := buildBatch(t, CodecGzip, 3, func(b *Builder) {
		b.SetProducer(77, 4, 10)
		b.SetTransactional(true)
		b.SetBaseOffset(1000)
		b.SetPartitionLeaderEpoch(9)
	})
	b, err := ParseBatch(raw)
	require.NoError(t, err)
	require.NoError(t, b.CheckCRC())
	require.Equal(t, len(raw), b.Size())
	require.Equal(t, int32(len(raw)-LogOverhead), b.Length())
	require.Equal(t, int64(1000), b.BaseOffset())
	require.Equal(t, int32(9), b.PartitionLeaderEpoch())
	require.Equal(t, int8(2), b.Magic())
	require.Equal(t, CodecGzip, b.Codec())
	require.Equal(t, AttrTransactional|Attributes(CodecGzip), b.Attributes())
	require.Equal(t, CreateTime, b.TimestampType())
	require.True(t, b.Transactional())
	require.False(t, b.Control())
	require.Equal(t, int32(2), b.LastOffsetDelta())
	require.Equal(t, int64(vectorTimestamp), b.BaseTimestamp())
	require.Equal(t, int64(vectorTimestamp+2), b.MaxTimestamp())
	require.Equal(t, int64(77), b.ProducerID())
	require.True(t, b.HasProducerID())
	require.Equal(t, int16(4), b.ProducerEpoch())
	require.Equal(t, int32(10), b.BaseSequence())
	require.Equal(t, int32(3), b.NumRecords())
	require.Equal(t, int64(1002), b.LastOffset())
	require.Equal(t, int64(1003), b.NextOffset())
	require.Equal(t, int32(12), b.LastSequence())
	_, ok := b.DeleteHorizon()
	require.False(t, ok)
	require.Equal(t, raw[HeaderSize:], b.RecordsData())
}

func TestAttributes(t *testing.T) {
	a := Attributes(0x78 | 0x03)
	require.Equal(t, CodecLZ4, a.Codec())
	require.Equal(t, LogAppendTime, a.TimestampType())
	require.True(t, a.Transactional())
	require.True(t, a.Control())
	require.True(t, a.DeleteHorizonSet())
	require.False(t, Attributes(5).Codec().Valid())
}

func TestDeleteHorizon(t *testing.T) {
	raw := buildBatch(t, CodecNone, 2, func(b *Builder) { b.SetDeleteHorizon(vectorTimestamp + 86_400_000) })
	b, err := ParseBatch(raw)
	require.NoError(t, err)
	h, ok := b.DeleteHorizon()
	require.True(t, ok)
	require.Equal(t, int64(vectorTimestamp+86_400_000), h)
	// Record timestamps stay right: their deltas are relative to the horizon.
	var rr RecordReader
	require.NoError(t, rr.Reset(b))
	for i := 0; rr.Next(); i++ {
		require.Equal(t, int64(vectorTimestamp+i), rr.Record().Timestamp)
	}
	require.NoError(t, rr.Err())
}

func TestSequenceWrap(t *testing.T) {
	require.Equal(t, int32(5), IncrementSequence(2, 3))
	require.Equal(t, int32(math.MaxInt32), IncrementSequence(math.MaxInt32-1, 1))
	require.Equal(t, int32(0), IncrementSequence(math.MaxInt32, 1))
	require.Equal(t, int32(2), IncrementSequence(math.MaxInt32-2, 5))

	raw := buildBatch(t, CodecNone, 5, func(b *Builder) { b.SetProducer(1, 0, math.MaxInt32-2) })
	b, err := ParseBatch(raw)
	require.NoError(t, err)
	require.Equal(t, int32(1), b.LastSequence())
	var rr RecordReader
	require.NoError(t, rr.Reset(b))
	want := []int32{math.MaxInt32 - 2, math.MaxInt32 - 1, math.MaxInt32, 0, 1}
	for i := 0; rr.Next(); i++ {
		require.Equal(t, want[i], rr.Record().Sequence)
	}

	noSeq, err := ParseBatch(buildBatch(t, CodecNone, 3, nil))
	require.NoError(t, err)
	require.Equal(t, NoSequence, noSeq.LastSequence())
}

func TestBatchIterFraming(t *testing.T) {
	one := buildBatch(t, CodecNone, 2, nil)
	two := buildBatch(t, CodecZstd, 3, nil)
	data := append(append([]byte{}, one...), two...)

	t.Run("whole", func(t *testing.T) {
		it := NewBatchIter(data)
		var sizes []int
		for it.Next() {
			require.Equal(t, it.Pos(), sum(sizes))
			sizes = append(sizes, it.Batch().Size())
		}
		require.NoError(t, it.Err())
		require.Equal(t, []int{len(one), len(two)}, sizes)
		require.Equal(t, len(data), it.Pos())
		require.False(t, it.Partial())
	})
	t.Run("partial tail is the end, not an error", func(t *testing.T) {
		for _, cut := range []int{1, 11, 12, 40, len(two) - 1} {
			it := NewBatchIter(data[:len(one)+cut])
			n := 0
			for it.Next() {
				n++
			}
			require.NoError(t, it.Err(), "cut %d", cut)
			require.Equal(t, 1, n)
			require.Equal(t, len(one), it.Pos())
			require.True(t, it.Partial())
		}
	})
	t.Run("length below 14 is corrupt", func(t *testing.T) {
		bad := append(append([]byte{}, one...), make([]byte, 12)...)
		binary.BigEndian.PutUint32(bad[len(one)+8:], 13)
		it := NewBatchIter(bad)
		require.True(t, it.Next())
		require.False(t, it.Next())
		require.Equal(t, kafkaerr.CorruptMessage, kafkaerr.CodeOf(it.Err()))
		require.Equal(t, len(one), it.Pos())
	})
	t.Run("magic outside 0..2 is corrupt", func(t *testing.T) {
		bad := append([]byte{}, one...)
		bad[magicOffset] = 3
		it := NewBatchIter(bad)
		require.False(t, it.Next())
		require.Equal(t, kafkaerr.CorruptMessage, kafkaerr.CodeOf(it.Err()))
	})
	t.Run("legacy magic is not supported", func(t *testing.T) {
		bad := append([]byte{}, one...)
		bad[magicOffset] = 1
		it := NewBatchIter(bad)
		require.False(t, it.Next())
		require.ErrorIs(t, it.Err(), kafkaerr.ErrCorruptMessage)
		require.Contains(t, it.Err().Error(), "legacy")
	})
	t.Run("v2 batch shorter than its header", func(t *testing.T) {
		short := append([]byte{}, one[:40]...)
		binary.BigEndian.PutUint32(short[lengthOffset:], 28)
		it := NewBatchIter(short)
		require.False(t, it.Next())
		require.Equal(t, kafkaerr.CorruptMessage, kafkaerr.CodeOf(it.Err()))
		_, err := ParseBatch(short)
		require.Equal(t, kafkaerr.CorruptMessage, kafkaerr.CodeOf(err))
	})
	t.Run("empty", func(t *testing.T) {
		it := NewBatchIter(nil)
		require.False(t, it.Next())
		require.NoError(t, it.Err())
		require.False(t, it.Partial())
	})
}

func sum(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}

func TestParseBatch(t *testing.T) {
	raw := buildBatch(t, CodecNone, 1, nil)
	b, err := ParseBatch(append(append([]byte{}, raw...), 1, 2, 3))
	require.NoError(t, err)
	require.Equal(t, raw, []byte(b), "bytes after the batch are not part of it")

	_, err = ParseBatch(raw[:11])
	require.Equal(t, kafkaerr.CorruptMessage, kafkaerr.CodeOf(err))
	_, err = ParseBatch(raw[:len(raw)-1])
	require.Equal(t, kafkaerr.CorruptMessage, kafkaerr.CodeOf(err))
	require.Contains(t, err.Error(), "truncated")
}

func TestCheckCRC(t *testing.T) {
	raw := buildBatch(t, CodecNone, 2, nil)
	b, err := ParseBatch(raw)
	require.NoError(t, err)
	for _, i := range []int{attributesOffset, baseTimestampOffset, len(raw) - 1} {
		raw[i] ^= 0x40
		require.ErrorIs(t, b.CheckCRC(), kafkaerr.ErrCorruptMessage, "byte %d", i)
		require.True(t, b.CheckCRC().(*kafkaerr.Error).Retriable())
		raw[i] ^= 0x40
	}
	for _, i := range []int{baseOffsetOffset, lengthOffset + 3, leaderEpochOffset} {
		raw[i] ^= 0x40
		require.NoError(t, b.CheckCRC(), "byte %d is outside the CRC", i)
		raw[i] ^= 0x40
	}
}

func TestSetMaxTimestamp(t *testing.T) {
	raw := buildBatch(t, CodecNone, 3, nil)
	b, err := ParseBatch(raw)
	require.NoError(t, err)
	before := append([]byte{}, raw...)

	b.SetMaxTimestamp(CreateTime, b.MaxTimestamp())
	require.Equal(t, before, raw, "no change when nothing differs")

	b.SetMaxTimestamp(CreateTime, vectorTimestamp+100)
	require.Equal(t, int64(vectorTimestamp+100), b.MaxTimestamp())
	require.NoError(t, b.CheckCRC())

	b.SetLogAppendTime(vectorTimestamp + 200)
	require.Equal(t, LogAppendTime, b.TimestampType())
	require.NoError(t, b.CheckCRC())

	// Back to CreateTime clears bit 3, as Kafka's setMaxTimestamp does.
	b.SetMaxTimestamp(CreateTime, vectorTimestamp+2)
	require.Equal(t, CreateTime, b.TimestampType())
	require.Equal(t, before, raw)
}

func TestErrorType(t *testing.T) {
	err := error(kafkaerr.New(kafkaerr.InvalidRecord, "bad %d", 1))
	require.ErrorIs(t, err, kafkaerr.ErrInvalidRecord)
	require.NotErrorIs(t, err, kafkaerr.ErrCorruptMessage)
	require.Equal(t, kafkaerr.InvalidRecord, kafkaerr.CodeOf(err))
	require.Equal(t, kafkaerr.NoError, kafkaerr.CodeOf(nil))
	require.Equal(t, "kafka: INVALID_RECORD: bad 1", err.Error())
	require.False(t, err.(*kafkaerr.Error).Retriable())
	require.True(t, kafkaerr.CorruptMessage.Retriable())
	var e *kafkaerr.Error
	require.ErrorAs(t, err, &e)

	many := &kafkaerr.Error{Code: kafkaerr.InvalidTimestamp, Message: "m", RecordErrors: []kafkaerr.RecordError{{BatchIndex: 0, Message: "a"}, {BatchIndex: 1, Message: "b"}, {BatchIndex: 2, Message: "c"}, {BatchIndex: 5, Message: "d"}}}
	require.Equal(t, "kafka: INVALID_TIMESTAMP: m; record 0: a; record 1: b; record 2: c (and 1 more)", many.Error())
}
