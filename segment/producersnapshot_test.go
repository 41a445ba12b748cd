package segment

import (
	"encoding/binary"
	"hash/crc32"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

// docs/formats.md, "Test vectors": a producer snapshot of one entry {pid 1000, epoch
// 3, lastSeq 9, lastOffset 99, offsetDelta 4, ts T, coordEpoch -1,
// txnFirst -1}, 56 bytes, CRC 3f88be64.
const vectorProducerSnapshot = `00013f88be640000000100000000000003e80003000000090000000000000063000000040000018bcfe568
	00ffffffffffffffffffffffff`

var vectorSnapshotEntry = ProducerSnapshotEntry{
	ProducerID: 1000, ProducerEpoch: 3, LastSequence: 9, LastOffset: 99, OffsetDelta: 4,
	Timestamp: vectorTimestamp, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1,
}

func TestVectorProducerSnapshot(t *testing.T) {
	want := unhex(t, vectorProducerSnapshot)
	require.Len(t, want, 56)
	require.Equal(t, uint32(0x3f88be64), binary.BigEndian.Uint32(want[2:]))

	got := AppendProducerSnapshot(nil, []ProducerSnapshotEntry{vectorSnapshotEntry})
	require.Equal(t, want, got)
	// Appending after other bytes covers only the snapshot's own.
	prefixed := AppendProducerSnapshot([]byte("xyz"), []ProducerSnapshotEntry{vectorSnapshotEntry})
	require.Equal(t, want, prefixed[3:])

	entries, err := ParseProducerSnapshot(want)
	require.NoError(t, err)
	require.Equal(t, []ProducerSnapshotEntry{vectorSnapshotEntry}, entries)

	// The entry is what the producer state of its batch is: an idempotent
	// batch of 5 records at offsets 95..99 with sequences 5..9.
	b := kbatch.NewBuilder(kbatch.CodecNone)
	b.SetBaseOffset(95)
	b.SetProducer(1000, 3, 5)
	for range 5 {
		b.Append(vectorTimestamp, []byte("k"), []byte("v"))
	}
	batch, err := b.Build(nil)
	require.NoError(t, err)
	require.Equal(t, []ProducerSnapshotEntry{vectorSnapshotEntry}, ProducerSnapshotFromBatches(batch))
	require.Equal(t, want, AppendProducerSnapshot(nil, ProducerSnapshotFromBatches(batch)))
}

func TestProducerSnapshotEmpty(t *testing.T) {
	got := AppendProducerSnapshot(nil, nil)
	require.Len(t, got, 10)
	entries, err := ParseProducerSnapshot(got)
	require.NoError(t, err)
	require.Empty(t, entries)
}

func TestParseProducerSnapshotCorrupt(t *testing.T) {
	good := unhex(t, vectorProducerSnapshot)
	withCRC := func(b []byte) []byte {
		binary.BigEndian.PutUint32(b[2:], crc32c(b[6:]))
		return b
	}
	cases := map[string][]byte{
		"empty":            nil,
		"short header":     good[:9],
		"version 0":        append([]byte{0, 0}, good[2:]...),
		"version 2":        append([]byte{0, 2}, good[2:]...),
		"bad crc":          append(slices.Clone(good[:len(good)-1]), good[len(good)-1]^1),
		"truncated entry":  withCRC(slices.Clone(good[:len(good)-1])),
		"count too large":  withCRC(append(slices.Clone(good[:6]), append([]byte{0, 0, 0, 2}, good[10:]...)...)),
		"negative count":   withCRC(append(slices.Clone(good[:6]), append([]byte{0xff, 0xff, 0xff, 0xff}, good[10:]...)...)),
		"huge count":       withCRC(append(slices.Clone(good[:6]), append([]byte{0x7f, 0xff, 0xff, 0xff}, good[10:]...)...)),
		"crc covers count": func() []byte { b := slices.Clone(good); b[9] = 0; return b }(),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseProducerSnapshot(b)
			require.Error(t, err)
			require.Equal(t, kafkaerr.CorruptMessage, kafkaerr.CodeOf(err), "%v", err)
		})
	}
	// Bytes after the entries are covered by the CRC and ignored, as Kafka
	// ignores them.
	trailing := withCRC(append(slices.Clone(good), 1, 2, 3))
	entries, err := ParseProducerSnapshot(trailing)
	require.NoError(t, err)
	require.Equal(t, []ProducerSnapshotEntry{vectorSnapshotEntry}, entries)
}

func crc32c(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }

// psBatch builds a data batch of n records at base for a producer.
func psBatch(t testing.TB, base int64, pid int64, epoch int16, seq int32, txn bool, n int, ts int64) []byte {
	t.Helper()
	b := kbatch.NewBuilder(kbatch.CodecNone)
	b.SetBaseOffset(base)
	b.SetPartitionLeaderEpoch(1)
	if pid >= 0 {
		b.SetProducer(pid, epoch, seq)
	}
	b.SetTransactional(txn)
	for i := range n {
		b.Append(ts+int64(i), []byte("k"), []byte("v"))
	}
	out, err := b.Build(nil)
	require.NoError(t, err)
	return out
}

func psMarker(at int64, commit bool, pid int64, epoch int16, coordEpoch int32, ts int64) []byte {
	m := kbatch.AppendEndTxnMarker(nil, kbatch.EndTxnMarker{Commit: commit, ProducerID: pid, ProducerEpoch: epoch, CoordinatorEpoch: coordEpoch, Timestamp: ts})
	kbatch.Batch(m).SetBaseOffset(at)
	return m
}

// The rules of ProducerAppendInfo.append, producer by producer.
func TestProducerSnapshotFromBatches(t *testing.T) {
	const T = vectorTimestamp
	emptiedMarker := psEmptied(psMarker(40, true, 12, 0, 9, T+40))
	var log []byte
	for _, b := range [][]byte{
		psBatch(t, 0, -1, -1, -1, false, 2, T),            // no producer: skipped
		psBatch(t, 2, 7, 1, 0, true, 3, T+2),              // pid 7 opens a transaction at 2
		psBatch(t, 5, 8, 0, 10, false, 2, T+5),            // pid 8, idempotent
		psBatch(t, 7, 7, 1, 3, true, 2, T+7),              // pid 7, same transaction
		psMarker(9, true, 7, 1, 4, T+100),                 // pid 7 commits
		psBatch(t, 10, 9, 0, 0, false, 1, T+10),           // pid 9, epoch 0
		psMarker(11, false, 9, 1, 5, T+11),                // an abort with a new epoch forgets the batch
		psBatch(t, 12, 10, 2, 0, true, 2, T+12),           // pid 10 opens a transaction at 12
		psBatch(t, 14, 11, 0, 2147483646, false, 3, T+14), // pid 11, sequences wrap
		emptiedMarker,                            // an emptied control batch changes nothing
		psBatch(t, 41, 8, 0, 12, false, 1, T+41), // pid 8 again
	} {
		log = append(log, b...)
	}
	got := ProducerSnapshotFromBatches(log)
	want := []ProducerSnapshotEntry{
		{ProducerID: 7, ProducerEpoch: 1, LastSequence: 4, LastOffset: 8, OffsetDelta: 1, Timestamp: T + 100, CoordinatorEpoch: 4, CurrentTxnFirstOffset: -1},
		{ProducerID: 8, ProducerEpoch: 0, LastSequence: 12, LastOffset: 41, OffsetDelta: 0, Timestamp: T + 41, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1},
		{ProducerID: 9, ProducerEpoch: 1, LastSequence: -1, LastOffset: -1, OffsetDelta: 0, Timestamp: T + 11, CoordinatorEpoch: 5, CurrentTxnFirstOffset: -1},
		{ProducerID: 10, ProducerEpoch: 2, LastSequence: 1, LastOffset: 13, OffsetDelta: 1, Timestamp: T + 13, CoordinatorEpoch: -1, CurrentTxnFirstOffset: 12},
		{ProducerID: 11, ProducerEpoch: 0, LastSequence: 0, LastOffset: 16, OffsetDelta: 2, Timestamp: T + 16, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1},
		{ProducerID: 12, ProducerEpoch: -1, LastSequence: -1, LastOffset: -1, OffsetDelta: 0, Timestamp: -1, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1},
	}
	require.Equal(t, want, got)

	// Round trip through the file format.
	parsed, err := ParseProducerSnapshot(AppendProducerSnapshot(nil, got))
	require.NoError(t, err)
	require.Equal(t, want, parsed)

	// Framing stops the walk; what came before counts.
	cutGot := ProducerSnapshotFromBatches(log[:len(log)-10])
	require.Len(t, cutGot, len(want))
	require.Equal(t, int64(6), cutGot[1].LastOffset, "pid 8's last batch is cut off")
	cutGot[1] = want[1]
	require.Equal(t, want, cutGot)
	require.Empty(t, ProducerSnapshotFromBatches(nil))
}

// psEmptied returns a control batch emptied of its records, as the
// cleaner leaves a marker whose transaction is gone.
func psEmptied(b []byte) []byte {
	out := slices.Clone(b[:kbatch.HeaderSize])
	binary.BigEndian.PutUint32(out[lengthOffset:], uint32(len(out)-kbatch.LogOverhead))
	binary.BigEndian.PutUint32(out[57:], 0)                              // records count
	binary.BigEndian.PutUint32(out[17:], kbatch.Batch(out).ComputeCRC()) // crc
	return out
}
