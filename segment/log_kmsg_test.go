package segment

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless/kbatch"
)

// kmsgCheckBatches decodes every batch of data with franz-go's kmsg (and
// kgo's decompressors) and requires it to agree with this package's
// decoding, field by field and record by record. It returns the last
// offset of the last batch.
func kmsgCheckBatches(t testing.TB, data []byte) int64 {
	t.Helper()
	it := kbatch.NewBatchIter(data)
	last := int64(-1)
	var rr kbatch.RecordReader
	for it.Next() {
		raw := []byte(it.Batch())
		var kb kmsg.RecordBatch
		require.NoError(t, kb.ReadFrom(raw))
		require.Equal(t, int32(len(raw)-12), kb.Length)
		require.Equal(t, int8(2), kb.Magic)
		require.Equal(t, crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)), uint32(kb.CRC))
		b := it.Batch()
		require.Equal(t, b.BaseOffset(), kb.FirstOffset)
		require.Equal(t, b.LastOffsetDelta(), kb.LastOffsetDelta)
		require.Equal(t, b.BaseTimestamp(), kb.FirstTimestamp)
		require.Equal(t, b.MaxTimestamp(), kb.MaxTimestamp)
		require.Equal(t, b.ProducerID(), kb.ProducerID)
		require.Equal(t, b.NumRecords(), kb.NumRecords)
		plain := kb.Records
		if codec := kgo.CompressionCodecType(kb.Attributes & 0x07); codec != kgo.CodecNone {
			var err error
			plain, err = kgo.DefaultDecompressor().Decompress(kb.Records, codec)
			require.NoError(t, err)
		}
		require.NoError(t, rr.Reset(b))
		for rr.Next() {
			r := rr.Record()
			l, m := binary.Varint(plain)
			require.Greater(t, m, 0)
			var kr kmsg.Record
			require.NoError(t, kr.ReadFrom(plain[:m+int(l)]))
			plain = plain[m+int(l):]
			require.Equal(t, r.Offset, kb.FirstOffset+int64(kr.OffsetDelta))
			ts := kb.FirstTimestamp + kr.TimestampDelta64
			if kb.Attributes&0x08 != 0 {
				ts = kb.MaxTimestamp
			}
			require.Equal(t, r.Timestamp, ts)
			require.Equal(t, r.Key, kr.Key)
			require.Equal(t, r.Value, kr.Value)
			require.Equal(t, r.NumHeaders(), len(kr.Headers))
		}
		require.NoError(t, rr.Err())
		require.Empty(t, plain)
		last = b.LastOffset()
	}
	require.NoError(t, it.Err())
	return last
}

// Batches read back from a log, compressed ones and those compaction
// rebuilt with a delete horizon among them, decode with kmsg.
func TestLogBatchesDecodeWithKmsg(t *testing.T) {
	clock := newLtClock(ltT0)
	l := ltOpen(t, t.TempDir(), ltCompactOptions(clock))
	for i := int64(0); i < 50; i++ {
		var recs []ltRec
		for j := int64(0); j < 3; j++ {
			off := i*3 + j
			r := ltRec{TS: ltT0 + off, Key: fmt.Sprint("k", off%10), Value: fmt.Appendf(nil, "value-%d", off)}
			if off%11 == 0 {
				r.Value = nil
			}
			recs = append(recs, r)
		}
		ltAppend(t, l, ltBatchCodec(t, kbatch.Codecs[i%5], i*3, recs...))
	}
	require.NoError(t, l.Roll(t.Context()))
	res := ltCompact(t, l)
	require.Positive(t, res.BatchesRewritten)
	horizons := 0
	for off := l.EarliestOffset(); off < l.LatestOffset(); {
		rr, err := l.Read(t.Context(), off, 1<<20)
		require.NoError(t, err)
		it := kbatch.NewBatchIter(rr.Records)
		for it.Next() {
			if _, ok := it.Batch().DeleteHorizon(); ok {
				horizons++
			}
		}
		off = kmsgCheckBatches(t, rr.Records) + 1
	}
	require.Positive(t, horizons)
}
