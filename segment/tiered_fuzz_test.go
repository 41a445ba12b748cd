package segment_test

// Fuzz targets for the decoders: BatchIter and ParseBatch (framing),
// Validate (the produce path), RecordReader and Builder (records, and
// re-encoding what was decoded), and the tiered-storage formats:
// ParseProducerSnapshot, ParseLeaderEpochCheckpoint,
// RemoteLogSegmentMetadata.Unmarshal, the index lookups over raw bytes,
// and the producer and epoch state derived from batches. Each also runs its seeds under plain
// `go test`; `make fuzz` runs them with the fuzzer.

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/internal/testbatch"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/segment"
)

// fzTieredLog is a run of batches with producers, transactions, markers
// and leader epochs: the kind of .log whose state the offloader derives.
func fzTieredLog(t testing.TB) []byte {
	var out []byte
	add := func(base int64, epoch int32, pid int64, pepoch int16, seq int32, txn bool, n int) {
		b := kbatch.NewBuilder(kbatch.CodecNone)
		b.SetBaseOffset(base)
		b.SetPartitionLeaderEpoch(epoch)
		if pid >= 0 {
			b.SetProducer(pid, pepoch, seq)
		}
		b.SetTransactional(txn)
		for i := range n {
			b.Append(testbatch.Timestamp+base+int64(i), []byte("k"), []byte("v"))
		}
		batch, err := b.Build(nil)
		require.NoError(t, err)
		out = append(out, batch...)
	}
	marker := func(base int64, epoch int32, commit bool, pid int64, pepoch int16) {
		m := kbatch.AppendEndTxnMarker(nil, kbatch.EndTxnMarker{Commit: commit, ProducerID: pid, ProducerEpoch: pepoch, CoordinatorEpoch: 3, Timestamp: testbatch.Timestamp + base})
		kbatch.Batch(m).SetBaseOffset(base)
		kbatch.Batch(m).SetPartitionLeaderEpoch(epoch)
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
			require.Equal(t, kafkaerr.CorruptMessage, fzRequireError(t, err))
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
			require.Equal(t, kafkaerr.CorruptMessage, fzRequireError(t, err))
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
		MaxTimestampMs:      testbatch.Timestamp,
		BrokerID:            1,
		EventTimestampMs:    testbatch.Timestamp + 1000,
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
			require.Equal(t, kafkaerr.CorruptMessage, fzRequireError(t, err))
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
		tim = binary.BigEndian.AppendUint64(tim, uint64(testbatch.Timestamp+int64(100*i)))
		tim = binary.BigEndian.AppendUint32(tim, uint32(10*i+3))
	}
	f.Add(off, tim, int64(0), int64(25), testbatch.Timestamp+250)
	f.Add(off, tim, int64(1<<40), int64(1<<40+3), testbatch.Timestamp)
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
		wantTs, wantTsOff, wantFound := kbatch.NoTimestamp, base, false
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

// fzUnhex decodes hex with white space in it.
func fzUnhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	require.NoError(t, err)
	return b
}

// fzRequireError checks that err is a *kafkaerr.Error with a message, and
// returns its code.
func fzRequireError(t testing.TB, err error) kafkaerr.Code {
	t.Helper()
	var ke *kafkaerr.Error
	require.True(t, errors.As(err, &ke), "not a *kafkaerr.Error: %T %v", err, err)
	require.NotEmpty(t, ke.Message, "no message in %v", err)
	return ke.Code
}

// fzSeeds are a few batches of every codec, and their concatenation.
func fzSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	var all []byte
	for _, codec := range kbatch.Codecs {
		b := kbatch.NewBuilder(codec)
		b.SetProducer(7, 1, 0)
		b.Append(testbatch.Timestamp, []byte("key"), []byte("value"))
		b.Append(testbatch.Timestamp+5, nil, []byte{})
		raw, err := b.Build(nil)
		require.NoError(t, err)
		seeds = append(seeds, raw)
		all = append(all, raw...)
	}
	return append(seeds, all)
}
