package kbatch

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The test vectors of docs/formats.md, "Test vectors", generated with Go's hash/crc32
// and cross-checked with Java's CRC32C.

const vectorTimestamp = 1700000000000 // 0x18bcfe56800

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	require.NoError(t, err)
	return b
}

var (
	vectorRecord        = "10 00 00 00 02 6b 02 76 00"
	vectorProducerBatch = `00000000000000000000003affffffff02e99b8dd80000000000000000018bcfe568000000018bcfe56800
		ffffffffffffffffffffffffffff0000000110000000026b027600`
	vectorStoredBatch = `000000000000002a0000003a0000000502e99b8dd80000000000000000018bcfe568000000018bcfe56800
		ffffffffffffffffffffffffffff0000000110000000026b027600`
	vectorLogAppendTime = `000000000000002a0000003a00000005024a32b9690008000000000000018bcfe568000000018bcfe569f4
		ffffffffffffffffffffffffffff0000000110000000026b027600`
	vectorCommitMarker = `0000000000000064000000420000000502ad320ccb0030000000000000018bcfe568000000018bcfe568
		0000000000000003e80003ffffffff00000001 20 00 00 00 08 00000001 0c 000000000007 00`
)

func TestVectorRecord(t *testing.T) {
	got := appendRecord(nil, 0, 0, 0, []byte("k"), []byte("v"), nil, 0)
	require.Equal(t, unhex(t, vectorRecord), got)
}

func TestVectorProducerBatch(t *testing.T) {
	b := NewBuilder(CodecNone)
	b.Append(vectorTimestamp, []byte("k"), []byte("v"))
	got, err := b.Build(nil)
	require.NoError(t, err)
	require.Equal(t, unhex(t, vectorProducerBatch), got)

	batch, err := ParseBatch(got)
	require.NoError(t, err)
	require.NoError(t, batch.CheckCRC())
	require.Equal(t, uint32(0xe99b8dd8), batch.CRC())
	require.Equal(t, int32(0x3a), batch.Length())
	require.Equal(t, 70, batch.Size())
}

func TestVectorStoredAtOffset42(t *testing.T) {
	batch, err := ParseBatch(unhex(t, vectorProducerBatch))
	require.NoError(t, err)
	batch.SetBaseOffset(42)
	batch.SetPartitionLeaderEpoch(5)
	require.Equal(t, unhex(t, vectorStoredBatch), []byte(batch))
	require.NoError(t, batch.CheckCRC(), "offset and epoch are outside the CRC")
	require.Equal(t, int64(42), batch.BaseOffset())
	require.Equal(t, int64(42), batch.LastOffset())
	require.Equal(t, int64(43), batch.NextOffset())
}

func TestVectorLogAppendTime(t *testing.T) {
	batch, err := ParseBatch(unhex(t, vectorStoredBatch))
	require.NoError(t, err)
	batch.SetLogAppendTime(vectorTimestamp + 500)
	require.Equal(t, unhex(t, vectorLogAppendTime), []byte(batch))
	require.NoError(t, batch.CheckCRC())
	require.Equal(t, LogAppendTime, batch.TimestampType())

	// Every record of a LogAppendTime batch reads the batch's max timestamp.
	var rr RecordReader
	require.NoError(t, rr.Reset(batch))
	require.True(t, rr.Next())
	require.Equal(t, int64(vectorTimestamp+500), rr.Record().Timestamp)
	require.Equal(t, int64(0), rr.Record().TimestampDelta)
}

func TestVectorCommitMarker(t *testing.T) {
	got := AppendEndTxnMarker(nil, EndTxnMarker{
		Commit: true, ProducerID: 1000, ProducerEpoch: 3, CoordinatorEpoch: 7, Timestamp: vectorTimestamp,
	})
	require.Len(t, got, 78)
	batch, err := ParseBatch(got)
	require.NoError(t, err)
	batch.SetBaseOffset(100)
	batch.SetPartitionLeaderEpoch(5)
	require.Equal(t, unhex(t, vectorCommitMarker), []byte(batch))
	require.Equal(t, uint32(0xad320ccb), batch.CRC())

	require.True(t, batch.Control())
	require.True(t, batch.Transactional())
	var rr RecordReader
	require.NoError(t, rr.Reset(batch))
	require.True(t, rr.Next())
	cr, err := ParseControlRecord(rr.Record())
	require.NoError(t, err)
	require.Equal(t, ControlRecord{Version: 0, Type: ControlCommit, CoordinatorEpoch: 7}, cr)
	require.False(t, rr.Next())
	require.NoError(t, rr.Err())
}
