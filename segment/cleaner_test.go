package segment

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// ltCompactOptions: compact policy, clean whenever anything is dirty.
func ltCompactOptions(clock *ltClock) *LogOptions {
	return &LogOptions{
		CleanupPolicy:          CleanupCompact,
		MinCleanableDirtyRatio: -1,
		IndexIntervalBytes:     128,
		Clock:                  clock.Now,
	}
}

func ltCompact(t *testing.T, l *Log) CompactResult {
	t.Helper()
	res, err := l.Compact(t.Context())
	require.NoError(t, err)
	return res
}

func ltOffsets(recs []ltRec) []int64 {
	out := []int64{}
	for _, r := range recs {
		out = append(out, r.Offset)
	}
	return out
}

// The example of diskless-notes.md §13: keys u1 u2 u1 u3 u2(null) u1 at
// offsets 0 to 5 compact to offset 3 (u3) and offset 5 (u1) once the
// tombstone's horizon has passed.
func TestCompactExample(t *testing.T) {
	example := []ltRec{
		{Offset: 0, Key: "u1", Value: []byte("a")},
		{Offset: 1, Key: "u2", Value: []byte("b")},
		{Offset: 2, Key: "u1", Value: []byte("c")},
		{Offset: 3, Key: "u3", Value: []byte("d")},
		{Offset: 4, Key: "u2", Value: nil},
		{Offset: 5, Key: "u1", Value: []byte("e")},
	}
	for i := range example {
		example[i].TS = ltT0 + int64(i)
	}
	for _, shape := range []string{"a batch per record", "one batch"} {
		t.Run(shape, func(t *testing.T) {
			clock := newLtClock(ltT0 + 1000)
			dir := t.TempDir()
			l := ltOpen(t, dir, ltCompactOptions(clock))
			if shape == "one batch" {
				ltAppend(t, l, ltBatch(t, 0, example...))
			} else {
				for _, r := range example {
					ltAppend(t, l, ltBatch(t, r.Offset, r))
				}
			}
			res := ltCompact(t, l)
			require.False(t, res.Cleaned, "the active segment is never cleaned")
			require.Equal(t, example, ltReadAll(t, l))

			require.NoError(t, l.Roll(t.Context()))
			res = ltCompact(t, l)
			require.True(t, res.Cleaned)
			require.Equal(t, int64(0), res.FirstDirtyOffset)
			require.Equal(t, int64(6), res.EndOffset)
			require.Equal(t, int64(3), res.RecordsRemoved)
			require.Equal(t, []ltRec{example[3], example[4], example[5]}, ltReadAll(t, l), "the tombstone stays until its horizon")
			require.Equal(t, int64(6), l.LatestOffset(), "offsets never change")

			// The tombstone's batch carries the delete horizon.
			horizon := clock.Now().UnixMilli() + DefaultDeleteRetention.Milliseconds()
			rr, err := l.Read(t.Context(), 4, 1)
			require.NoError(t, err)
			b, err := ParseBatch(rr.Records)
			require.NoError(t, err)
			require.NoError(t, b.CheckCRC())
			h, ok := b.DeleteHorizon()
			require.True(t, ok)
			require.Equal(t, horizon, h)
			require.Equal(t, Attributes(AttrDeleteHorizonSet), b.Attributes())
			if shape == "one batch" {
				require.Equal(t, int32(5), b.LastOffsetDelta(), "the last offset delta stays")
				require.Equal(t, int64(0), b.BaseOffset())
			}

			// Before the horizon, a clean keeps it; at the horizon it goes.
			clock.Set(horizon - 1)
			res = ltCompact(t, l)
			require.False(t, res.Cleaned, "nothing dirty, no horizon passed")
			clock.Set(horizon)
			res = ltCompact(t, l)
			require.True(t, res.Cleaned, "a passed horizon makes the log cleanable")
			got := ltReadAll(t, l)
			require.Equal(t, []ltRec{example[3], example[5]}, got)

			// And so it stays after a reopen, clean or not.
			require.NoError(t, l.Sync(t.Context()))
			crashed := ltCopyDir(t, dir)
			require.NoError(t, l.Close())
			require.Equal(t, got, ltReadAll(t, ltOpen(t, dir, ltCompactOptions(clock))))
			require.Equal(t, got, ltReadAll(t, ltOpen(t, crashed, ltCompactOptions(clock))))
		})
	}
}

// Kafka cleans only when something is dirty: a tombstone past its horizon
// goes with the next clean that new data triggers.
func TestCompactTombstoneGoesWithNextDirtyClean(t *testing.T) {
	clock := newLtClock(ltT0)
	l := ltOpen(t, t.TempDir(), &LogOptions{CleanupPolicy: CleanupCompact, DeleteRetention: time.Hour, Clock: clock.Now})
	ltAppend(t, l, ltBatch(t, 0, ltRec{TS: ltT0, Key: "a", Value: []byte("1")}))
	ltAppend(t, l, ltBatch(t, 1, ltRec{TS: ltT0, Key: "b"}))
	require.NoError(t, l.Roll(t.Context()))
	require.True(t, ltCompact(t, l).Cleaned)
	require.Len(t, ltReadAll(t, l), 2)

	// Reopen: the horizon is no longer known; dirty data triggers the
	// clean that drops the tombstone.
	dir := l.Dir()
	require.NoError(t, l.Close())
	l = ltOpen(t, dir, &LogOptions{CleanupPolicy: CleanupCompact, DeleteRetention: time.Hour, Clock: clock.Now})
	clock.Advance(2 * time.Hour)
	require.False(t, ltCompact(t, l).Cleaned)
	for i := int64(2); i < 10; i++ {
		ltAppend(t, l, ltBatch(t, i, ltRec{TS: ltT0, Key: "c", Value: []byte("x")}))
	}
	require.NoError(t, l.Roll(t.Context()))
	res := ltCompact(t, l)
	require.True(t, res.Cleaned)
	require.Equal(t, []int64{0, 9}, ltOffsets(ltReadAll(t, l)))
}

func TestCompactKeyComesBack(t *testing.T) {
	clock := newLtClock(ltT0)
	l := ltOpen(t, t.TempDir(), ltCompactOptions(clock))
	ltAppend(t, l, ltBatch(t, 0, ltRec{TS: ltT0, Key: "k", Value: []byte("v1")}))
	ltAppend(t, l, ltBatch(t, 1, ltRec{TS: ltT0, Key: "k"}))
	ltAppend(t, l, ltBatch(t, 2, ltRec{TS: ltT0, Key: "k", Value: []byte("v2")}))
	require.NoError(t, l.Roll(t.Context()))
	ltCompact(t, l)
	got := ltReadAll(t, l)
	require.Equal(t, []ltRec{{Offset: 2, TS: ltT0, Key: "k", Value: []byte("v2")}}, got, "the tombstone is superseded at once")

	// A tombstone kept with its horizon, then the key comes back: the
	// next clean drops the tombstone whatever its horizon.
	ltAppend(t, l, ltBatch(t, 3, ltRec{TS: ltT0, Key: "k"}))
	require.NoError(t, l.Roll(t.Context()))
	ltCompact(t, l)
	require.Equal(t, []int64{3}, ltOffsets(ltReadAll(t, l)))
	ltAppend(t, l, ltBatch(t, 4, ltRec{TS: ltT0, Key: "k", Value: []byte("v3")}))
	require.NoError(t, l.Roll(t.Context()))
	ltCompact(t, l)
	require.Equal(t, []ltRec{{Offset: 4, TS: ltT0, Key: "k", Value: []byte("v3")}}, ltReadAll(t, l))
}

func TestCompactKeepsBatchesByteForByte(t *testing.T) {
	clock := newLtClock(ltT0)
	dir := t.TempDir()
	l := ltOpen(t, dir, ltCompactOptions(clock))
	var untouched [][]byte
	for i := int64(0); i < 20; i++ {
		b := ltBatchCodec(t, Codecs[i%5], i*2, ltRec{TS: ltT0 + i, Key: fmt.Sprint("u", i), Value: []byte("x")}, ltRec{TS: ltT0 + i, Key: "dup", Value: []byte(fmt.Sprint(i))})
		ltAppend(t, l, b)
		untouched = append(untouched, b)
	}
	require.NoError(t, l.Roll(t.Context()))
	res := ltCompact(t, l)
	require.Equal(t, 19, res.BatchesRewritten)
	require.Equal(t, int64(19), res.RecordsRemoved)
	// Each batch but the last lost its "dup" record and was rebuilt in
	// its own codec; the last is untouched.
	data := ltReadFile(t, ltSegPath(dir, 0, logFileExt))
	it := NewBatchIter(data)
	i := 0
	for it.Next() {
		b := it.Batch()
		orig := Batch(untouched[i])
		require.NoError(t, b.CheckCRC())
		require.Equal(t, orig.BaseOffset(), b.BaseOffset())
		require.Equal(t, orig.LastOffsetDelta(), b.LastOffsetDelta())
		require.Equal(t, orig.Codec(), b.Codec())
		require.Equal(t, orig.PartitionLeaderEpoch(), b.PartitionLeaderEpoch())
		if i == 19 {
			require.Equal(t, untouched[i], []byte(b), "untouched batches are copied byte for byte")
		} else {
			require.Equal(t, int32(1), b.NumRecords())
		}
		i++
	}
	require.Equal(t, 20, i)
}

func TestCompactEmptyBatches(t *testing.T) {
	clock := newLtClock(ltT0)
	l := ltOpen(t, t.TempDir(), ltCompactOptions(clock))
	idem := func(base int64, pid int64, seq int32, key string) []byte {
		b := NewBuilder(CodecGzip)
		b.SetBaseOffset(base)
		b.SetProducer(pid, 2, seq)
		b.Append(ltT0+base, []byte(key), []byte("v"))
		b.Append(ltT0+base+5, []byte(key), []byte("v"))
		out, err := b.Build(nil)
		require.NoError(t, err)
		return out
	}
	// Producer 7's batches at 0 and 2 lose every record to later ones;
	// the one at 2 is its last data batch and stays as a bare header.
	// Producer 8's batch at 4 keeps records; the control batch stays.
	ltAppend(t, l, idem(0, 7, 0, "a"))
	ltAppend(t, l, idem(2, 7, 2, "b"))
	ltAppend(t, l, idem(4, 8, 0, "c"))
	marker := AppendEndTxnMarker(nil, EndTxnMarker{Commit: true, ProducerID: 9, ProducerEpoch: 1, Timestamp: ltT0})
	Batch(marker).SetBaseOffset(6)
	ltAppend(t, l, marker)
	ltAppend(t, l, ltBatch(t, 7, ltRec{TS: ltT0, Key: "a", Value: []byte("new")}, ltRec{TS: ltT0, Key: "b", Value: []byte("new")}))
	ltAppend(t, l, ltBatch(t, 9, ltRec{TS: ltT0, Key: "z", Value: []byte("z")}))
	require.NoError(t, l.Roll(t.Context()))
	res := ltCompact(t, l)
	require.Equal(t, 1, res.BatchesRemoved)

	var batches []Batch
	for off := l.EarliestOffset(); off < l.LatestOffset(); {
		rr, err := l.Read(t.Context(), off, 1)
		require.NoError(t, err)
		b, err := ParseBatch(rr.Records)
		require.NoError(t, err)
		require.NoError(t, b.CheckCRC())
		batches = append(batches, b)
		off = b.NextOffset()
	}
	require.Len(t, batches, 5)
	empty := batches[0]
	require.Equal(t, int64(2), empty.BaseOffset())
	require.Equal(t, HeaderSize, empty.Size())
	require.Equal(t, int32(0), empty.NumRecords())
	require.Equal(t, int32(1), empty.LastOffsetDelta())
	require.Equal(t, NoTimestamp, empty.BaseTimestamp())
	require.Equal(t, ltT0+7, empty.MaxTimestamp(), "the max timestamp stays")
	require.Equal(t, int64(7), empty.ProducerID())
	require.Equal(t, int16(2), empty.ProducerEpoch())
	require.Equal(t, int32(2), empty.BaseSequence())
	require.Equal(t, int32(3), empty.LastSequence())
	require.Equal(t, CodecNone, empty.Codec())
	require.Equal(t, int64(4), batches[1].BaseOffset())
	require.True(t, batches[2].Control())
	require.Equal(t, []byte(marker), []byte(batches[2]))
	require.Equal(t, int64(7), batches[3].BaseOffset())

	// Once producer 7 writes again, its empty batch has nothing to keep.
	ltAppend(t, l, idem(10, 7, 4, "q"))
	require.NoError(t, l.Roll(t.Context()))
	res = ltCompact(t, l)
	require.Equal(t, 1, res.BatchesRemoved)
	rr, err := l.Read(t.Context(), 2, 1)
	require.NoError(t, err)
	first, err := ParseBatch(rr.Records)
	require.NoError(t, err)
	require.Equal(t, int64(4), first.BaseOffset(), "the empty batch at 2 is gone")
}

// The last batch of a clean stays even when it loses every record, so the
// cleaned segment ends where the old ones did.
func TestCompactKeepsLastBatchOfRound(t *testing.T) {
	clock := newLtClock(ltT0)
	l := ltOpen(t, t.TempDir(), ltCompactOptions(clock))
	ltAppend(t, l, ltBatch(t, 0, ltRec{TS: ltT0, Key: "a", Value: []byte("1")}))
	ltAppend(t, l, ltBatch(t, 1, ltRec{TS: ltT0}))
	require.NoError(t, l.Roll(t.Context()))
	ltCompact(t, l)
	rr, err := l.Read(t.Context(), 1, 1)
	require.NoError(t, err)
	b, err := ParseBatch(rr.Records)
	require.NoError(t, err)
	require.Equal(t, int64(1), b.BaseOffset())
	require.Equal(t, int32(0), b.NumRecords(), "a record without a key is dropped, its batch kept empty")
}

func TestCompactDirtyRatioAndLags(t *testing.T) {
	clock := newLtClock(ltT0)
	opts := &LogOptions{CleanupPolicy: CleanupCompactDelete, RetentionTime: -1, Clock: clock.Now}
	l := ltOpen(t, t.TempDir(), opts)
	for i := int64(0); i < 10; i++ {
		ltAppend(t, l, ltBatch(t, i, ltRec{TS: ltT0, Key: fmt.Sprint("a", i), Value: []byte("v")}))
	}
	require.NoError(t, l.Roll(t.Context()))
	res := ltCompact(t, l)
	require.True(t, res.Cleaned)
	require.Equal(t, 1.0, res.DirtyRatio)

	// A small dirty segment beside a larger clean one: ratio < 0.5.
	for i := int64(10); i < 13; i++ {
		ltAppend(t, l, ltBatch(t, i, ltRec{TS: ltT0, Key: fmt.Sprint(i), Value: []byte("x")}))
	}
	clean := l.Segments()[0].Size
	require.NoError(t, l.Roll(t.Context()))
	res = ltCompact(t, l)
	require.False(t, res.Cleaned)
	dirty := l.Segments()[1].Size
	require.InDelta(t, float64(dirty)/float64(clean+dirty), res.DirtyRatio, 1e-9)
	require.Less(t, res.DirtyRatio, 0.5)

	// max.compaction.lag.ms forces it once the dirty data is old enough.
	l.cfg.maxCompactionLagMs = time.Hour.Milliseconds()
	clock.Set(ltT0 + time.Hour.Milliseconds())
	require.False(t, ltCompact(t, l).Cleaned)
	clock.Set(ltT0 + time.Hour.Milliseconds() + 1)
	require.True(t, ltCompact(t, l).Cleaned)

	// min.compaction.lag.ms holds back segments younger than the lag.
	l.cfg.maxCompactionLagMs = 1<<63 - 1
	l.cfg.minDirtyRatio = 0
	l.cfg.minCompactionLagMs = time.Hour.Milliseconds()
	ltAppend(t, l, ltBatch(t, 13, ltRec{TS: clock.Now().UnixMilli(), Key: "a0", Value: []byte("w")}))
	require.NoError(t, l.Roll(t.Context()))
	require.False(t, ltCompact(t, l).Cleaned)
	clock.Advance(time.Hour + time.Millisecond)
	require.True(t, ltCompact(t, l).Cleaned)
	got := ltReadAll(t, l)
	require.Equal(t, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}, ltOffsets(got))
}

func TestCompactMapFull(t *testing.T) {
	clock := newLtClock(ltT0)
	dir := t.TempDir()
	opts := ltCompactOptions(clock)
	opts.CleanerBufferBytes = 10 * (mapEntryOverhead + 3) // 10 keys of 3 bytes
	l := ltOpen(t, dir, opts)
	var all []ltRec
	for i := int64(0); i < 40; i++ {
		r := ltRec{Offset: i, TS: ltT0, Key: fmt.Sprintf("k%02d", i%20), Value: []byte(fmt.Sprint(i))}
		ltAppend(t, l, ltBatch(t, i, r))
		all = append(all, r)
	}
	require.NoError(t, l.Roll(t.Context()))
	res := ltCompact(t, l)
	require.True(t, res.Cleaned)
	require.Equal(t, int64(10), res.EndOffset, "the map held 10 keys")
	require.Equal(t, all, ltReadAll(t, l), "no key repeats below offset 10")
	rp, ok, err := readCheckpoint(dir, cleanerOffsetFile)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(10), rp)
	for l.cfg.cleanerBufferBytes = 1 << 20; ; {
		if !ltCompact(t, l).Cleaned {
			break
		}
	}
	require.Equal(t, all[20:], ltReadAll(t, l))
}

func TestCompactNotCompacted(t *testing.T) {
	l := ltOpen(t, t.TempDir(), nil)
	_, err := l.Compact(t.Context())
	require.ErrorIs(t, err, ErrNotCompacted)
}

// A crash at any step of the swap opens to the old segments or the
// cleaned one, with the same records either way.
func TestCompactCrashDuringSwap(t *testing.T) {
	for _, step := range []string{"after swap rename", "after old deleted"} {
		t.Run(step, func(t *testing.T) {
			clock := newLtClock(ltT0)
			dir := t.TempDir()
			opts := ltCompactOptions(clock)
			opts.SegmentBytes = 600
			var snapshot string
			hook := func() {
				if snapshot == "" {
					snapshot = ltCopyDir(t, dir)
				}
			}
			opts.hooks = &logHooks{}
			if step == "after swap rename" {
				opts.hooks.afterSwapRename = hook
			} else {
				opts.hooks.afterOldDeleted = hook
			}
			l := ltOpen(t, dir, opts)
			for i := int64(0); i < 30; i++ {
				ltAppend(t, l, ltBatch(t, i, ltRec{TS: ltT0 + i, Key: fmt.Sprint("k", i%4), Value: []byte(fmt.Sprint(i))}))
			}
			require.NoError(t, l.Roll(t.Context()))
			before := ltReadAll(t, l)
			ltCompact(t, l)
			after := ltReadAll(t, l)
			require.NotEmpty(t, snapshot)
			names := ltFiles(t, snapshot)
			require.Contains(t, names, "00000000000000000000.log.swap", names)
			opts.hooks = nil
			l2 := ltOpen(t, snapshot, opts)
			got := ltReadAll(t, l2)
			// The first group's swap completes; later groups are as before.
			split := l2.Segments()[1].BaseOffset
			var want []ltRec
			for _, r := range after {
				if r.Offset < split {
					want = append(want, r)
				}
			}
			for _, r := range before {
				if r.Offset >= split {
					want = append(want, r)
				}
			}
			require.Equal(t, want, got)
			for _, name := range ltFiles(t, snapshot) {
				require.NotContains(t, name, swapSuffix)
				require.NotContains(t, name, deletedSuffix)
			}
		})
	}
}
