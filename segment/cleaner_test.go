package segment

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/internal/fakeclock"
	"github.com/diskless-go/diskless/kbatch"
)

// ltCompactOptions: compact policy, clean whenever anything is dirty.
func ltCompactOptions(clock *fakeclock.Clock) *LogOptions {
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

// The example of docs/formats.md, "Compaction": keys u1 u2 u1 u3 u2(null) u1 at
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
			b, err := kbatch.ParseBatch(rr.Records)
			require.NoError(t, err)
			require.NoError(t, b.CheckCRC())
			h, ok := b.DeleteHorizon()
			require.True(t, ok)
			require.Equal(t, horizon, h)
			require.Equal(t, kbatch.Attributes(kbatch.AttrDeleteHorizonSet), b.Attributes())
			if shape == "one batch" {
				require.Equal(t, int32(5), b.LastOffsetDelta(), "the last offset delta stays")
				require.Equal(t, int64(0), b.BaseOffset())
			}

			// Before the horizon, a clean keeps it; at the horizon it goes.
			clock.Set(time.UnixMilli(horizon - 1))
			res = ltCompact(t, l)
			require.False(t, res.Cleaned, "nothing dirty, no horizon passed")
			clock.Set(time.UnixMilli(horizon))
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
		b := ltBatchCodec(t, kbatch.Codecs[i%5], i*2, ltRec{TS: ltT0 + i, Key: fmt.Sprint("u", i), Value: []byte("x")}, ltRec{TS: ltT0 + i, Key: "dup", Value: []byte(fmt.Sprint(i))})
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
	it := kbatch.NewBatchIter(data)
	i := 0
	for it.Next() {
		b := it.Batch()
		orig := kbatch.Batch(untouched[i])
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
		b := kbatch.NewBuilder(kbatch.CodecGzip)
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
	marker := kbatch.AppendEndTxnMarker(nil, kbatch.EndTxnMarker{Commit: true, ProducerID: 9, ProducerEpoch: 1, Timestamp: ltT0})
	kbatch.Batch(marker).SetBaseOffset(6)
	ltAppend(t, l, marker)
	ltAppend(t, l, ltBatch(t, 7, ltRec{TS: ltT0, Key: "a", Value: []byte("new")}, ltRec{TS: ltT0, Key: "b", Value: []byte("new")}))
	ltAppend(t, l, ltBatch(t, 9, ltRec{TS: ltT0, Key: "z", Value: []byte("z")}))
	require.NoError(t, l.Roll(t.Context()))
	res := ltCompact(t, l)
	require.Equal(t, 1, res.BatchesRemoved)

	var batches []kbatch.Batch
	for off := l.EarliestOffset(); off < l.LatestOffset(); {
		rr, err := l.Read(t.Context(), off, 1)
		require.NoError(t, err)
		b, err := kbatch.ParseBatch(rr.Records)
		require.NoError(t, err)
		require.NoError(t, b.CheckCRC())
		batches = append(batches, b)
		off = b.NextOffset()
	}
	require.Len(t, batches, 5)
	empty := batches[0]
	require.Equal(t, int64(2), empty.BaseOffset())
	require.Equal(t, kbatch.HeaderSize, empty.Size())
	require.Equal(t, int32(0), empty.NumRecords())
	require.Equal(t, int32(1), empty.LastOffsetDelta())
	require.Equal(t, kbatch.NoTimestamp, empty.BaseTimestamp())
	require.Equal(t, ltT0+7, empty.MaxTimestamp(), "the max timestamp stays")
	require.Equal(t, int64(7), empty.ProducerID())
	require.Equal(t, int16(2), empty.ProducerEpoch())
	require.Equal(t, int32(2), empty.BaseSequence())
	require.Equal(t, int32(3), empty.LastSequence())
	require.Equal(t, kbatch.CodecNone, empty.Codec())
	require.Equal(t, int64(4), batches[1].BaseOffset())
	// The COMMIT marker has no data batch of its transaction before it:
	// it is stamped with a delete horizon (docs/formats.md, "Compaction", rule 5).
	require.True(t, batches[2].Control())
	require.True(t, batches[2].Transactional())
	h, ok := batches[2].DeleteHorizon()
	require.True(t, ok)
	require.Equal(t, ltT0+DefaultDeleteRetention.Milliseconds(), h)
	require.Equal(t, kbatch.Batch(marker).MaxTimestamp(), batches[2].MaxTimestamp())
	require.Equal(t, ltDecode(t, marker), ltDecode(t, batches[2]), "the same record")
	require.Equal(t, int64(7), batches[3].BaseOffset())

	// Once producer 7 writes again, its empty batch has nothing to keep.
	ltAppend(t, l, idem(10, 7, 4, "q"))
	require.NoError(t, l.Roll(t.Context()))
	res = ltCompact(t, l)
	require.Equal(t, 1, res.BatchesRemoved)
	rr, err := l.Read(t.Context(), 2, 1)
	require.NoError(t, err)
	first, err := kbatch.ParseBatch(rr.Records)
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
	b, err := kbatch.ParseBatch(rr.Records)
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
	clock.Set(time.UnixMilli(ltT0 + time.Hour.Milliseconds()))
	require.False(t, ltCompact(t, l).Cleaned)
	clock.Set(time.UnixMilli(ltT0 + time.Hour.Milliseconds() + 1))
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

// ltTxnBatch builds a transactional data batch of producer pid at base.
func ltTxnBatch(t testing.TB, base, pid int64, recs ...ltRec) []byte {
	t.Helper()
	b := kbatch.NewBuilder(kbatch.CodecNone)
	b.SetBaseOffset(base)
	b.SetProducer(pid, 0, int32(base))
	b.SetTransactional(true)
	for _, r := range recs {
		b.Append(r.TS, []byte(r.Key), r.Value)
	}
	out, err := b.Build(nil)
	require.NoError(t, err)
	return out
}

// ltMarker builds producer pid's COMMIT or ABORT marker at base.
func ltMarker(base, pid int64, commit bool) []byte {
	m := kbatch.AppendEndTxnMarker(nil, kbatch.EndTxnMarker{Commit: commit, ProducerID: pid, Timestamp: ltT0})
	kbatch.Batch(m).SetBaseOffset(base)
	return m
}

// ltDescribeBatches describes the log's batches, one string each: the
// base offset, then "data" and the record count, or the marker's type,
// and "horizon" when the batch has a delete horizon.
func ltDescribeBatches(t *testing.T, l *Log) []string {
	t.Helper()
	var out []string
	var rr kbatch.RecordReader
	for off := l.EarliestOffset(); off < l.LatestOffset(); {
		res, err := l.Read(t.Context(), off, 1)
		require.NoError(t, err)
		if len(res.Records) == 0 {
			break
		}
		b, err := kbatch.ParseBatch(res.Records)
		require.NoError(t, err)
		require.NoError(t, b.CheckCRC())
		s := fmt.Sprintf("%d data %d", b.BaseOffset(), b.NumRecords())
		if b.Control() {
			s = fmt.Sprintf("%d empty control", b.BaseOffset())
			if b.NumRecords() > 0 {
				typ, err := controlType(&rr, b)
				require.NoError(t, err)
				s = fmt.Sprintf("%d %s", b.BaseOffset(), typ)
			}
		}
		if _, ok := b.DeleteHorizon(); ok {
			s += " horizon"
		}
		out = append(out, s)
		off = b.NextOffset()
	}
	return out
}

// ltDataRecs returns the records of the log's data batches.
func ltDataRecs(t *testing.T, l *Log) []ltRec {
	t.Helper()
	var out []ltRec
	for off := l.EarliestOffset(); off < l.LatestOffset(); {
		res, err := l.Read(t.Context(), off, 1)
		require.NoError(t, err)
		if len(res.Records) == 0 {
			break
		}
		b, err := kbatch.ParseBatch(res.Records)
		require.NoError(t, err)
		if !b.Control() {
			out = append(out, ltDecode(t, b)...)
		}
		off = b.NextOffset()
	}
	return out
}

// Aborted transactions (docs/formats.md, "Compaction", rule 5): their data batches
// are dropped whatever their keys and never supersede committed records;
// their ABORT marker stays while a data batch of theirs does, then is
// stamped with a delete horizon, then goes once the horizon passes.
func TestCompactAbortedTransactions(t *testing.T) {
	clock := newLtClock(ltT0)
	dir := t.TempDir()
	opts := ltCompactOptions(clock)
	l := ltOpen(t, dir, opts)
	kv := func(k, v string) ltRec { return ltRec{TS: ltT0, Key: k, Value: []byte(v)} }
	ltAppend(t, l, ltBatch(t, 0, kv("k", "v1")))
	ltAppend(t, l, ltTxnBatch(t, 1, 5, kv("k", "v2"), kv("a", "x"))) // producer 5, aborted
	ltAppend(t, l, ltMarker(3, 5, false))
	ltAppend(t, l, ltTxnBatch(t, 4, 5, kv("w", "1"))) // producer 5, committed
	ltAppend(t, l, ltMarker(5, 5, true))
	ltAppend(t, l, ltBatch(t, 6, kv("z", "1")))
	ltAppend(t, l, ltTxnBatch(t, 7, 7, kv("k", "v3"))) // producer 7, aborted: its last data batch
	ltAppend(t, l, ltMarker(8, 7, false))
	ltAppend(t, l, ltBatch(t, 9, kv("q", "1")))
	require.NoError(t, l.Roll(t.Context()))

	res := ltCompact(t, l)
	require.True(t, res.Cleaned)
	recs := ltDataRecs(t, l)
	require.Equal(t, []ltRec{{Offset: 0, TS: ltT0, Key: "k", Value: []byte("v1")}}, recs[:1],
		"the aborted k=v2 and k=v3 do not supersede the committed k=v1")
	require.Equal(t, []int64{0, 4, 6, 9}, ltOffsets(recs))
	require.Equal(t, []string{
		"0 data 1",
		// 1: aborted, dropped.
		"3 ABORT", // kept: a data batch of its transaction was there
		"4 data 1",
		"5 COMMIT", // kept: its transaction's data is there
		"6 data 1",
		"7 data 0", // aborted, but producer 7's last data batch: kept empty
		"8 ABORT",  // kept: its transaction's (empty) batch is there
		"9 data 1",
	}, ltDescribeBatches(t, l))

	// The next clean finds no data of producer 5's aborted transaction:
	// its marker is stamped. Producer 7's stays as it is.
	ltAppend(t, l, ltBatch(t, 10, kv("r", "1")))
	require.NoError(t, l.Roll(t.Context()))
	require.True(t, ltCompact(t, l).Cleaned)
	horizon := clock.Now().UnixMilli() + DefaultDeleteRetention.Milliseconds()
	want := []string{"0 data 1", "3 ABORT horizon", "4 data 1", "5 COMMIT", "6 data 1", "7 data 0", "8 ABORT", "9 data 1", "10 data 1"}
	require.Equal(t, want, ltDescribeBatches(t, l))
	rr, err := l.Read(t.Context(), 3, 1)
	require.NoError(t, err)
	h, ok := kbatch.Batch(rr.Records).DeleteHorizon()
	require.True(t, ok)
	require.Equal(t, horizon, h)

	// Before the horizon nothing changes; at it, the marker goes.
	clock.Set(time.UnixMilli(horizon - 1))
	require.False(t, ltCompact(t, l).Cleaned)
	clock.Set(time.UnixMilli(horizon))
	require.True(t, ltCompact(t, l).Cleaned, "the marker's horizon makes the log cleanable")
	want = []string{"0 data 1", "4 data 1", "5 COMMIT", "6 data 1", "7 data 0", "8 ABORT", "9 data 1", "10 data 1"}
	require.Equal(t, want, ltDescribeBatches(t, l))

	// Producer 7 writes again: its empty aborted batch goes, then its
	// ABORT marker is stamped, then it goes.
	ltAppend(t, l, ltTxnBatch(t, 11, 7, kv("s", "1")))
	ltAppend(t, l, ltMarker(12, 7, true))
	require.NoError(t, l.Roll(t.Context()))
	require.True(t, ltCompact(t, l).Cleaned)
	require.Equal(t, []string{"0 data 1", "4 data 1", "5 COMMIT", "6 data 1", "8 ABORT", "9 data 1", "10 data 1", "11 data 1", "12 COMMIT"},
		ltDescribeBatches(t, l))
	ltAppend(t, l, ltBatch(t, 13, kv("r", "2")))
	require.NoError(t, l.Roll(t.Context()))
	require.True(t, ltCompact(t, l).Cleaned)
	require.Equal(t, []string{"0 data 1", "4 data 1", "5 COMMIT", "6 data 1", "8 ABORT horizon", "9 data 1", "11 data 1", "12 COMMIT", "13 data 1"},
		ltDescribeBatches(t, l))
	clock.Advance(DefaultDeleteRetention)
	require.True(t, ltCompact(t, l).Cleaned)
	want = []string{"0 data 1", "4 data 1", "5 COMMIT", "6 data 1", "9 data 1", "11 data 1", "12 COMMIT", "13 data 1"}
	require.Equal(t, want, ltDescribeBatches(t, l))

	// So it stays after a crash and a clean reopen.
	require.NoError(t, l.Sync(t.Context()))
	crashed := ltCopyDir(t, dir)
	require.NoError(t, l.Close())
	for _, d := range []string{crashed, dir} {
		l := ltOpen(t, d, opts)
		require.Equal(t, want, ltDescribeBatches(t, l))
		require.Equal(t, []byte("v1"), ltDataRecs(t, l)[0].Value)
		require.NoError(t, l.Close())
	}
}

// A COMMIT marker stays while a data batch of its transaction does; once
// none is left it is stamped with a delete horizon, and removed when the
// horizon has passed.
func TestCompactCommitMarker(t *testing.T) {
	clock := newLtClock(ltT0)
	opts := ltCompactOptions(clock)
	opts.DeleteRetention = time.Hour
	l := ltOpen(t, t.TempDir(), opts)
	kv := func(k, v string) ltRec { return ltRec{TS: ltT0, Key: k, Value: []byte(v)} }
	ltAppend(t, l, ltTxnBatch(t, 0, 6, kv("c", "1")))
	ltAppend(t, l, ltMarker(1, 6, true))
	ltAppend(t, l, ltBatch(t, 2, kv("c", "2"))) // supersedes the transaction's only record
	ltAppend(t, l, ltTxnBatch(t, 3, 6, kv("d", "1")))
	ltAppend(t, l, ltMarker(4, 6, true))
	ltAppend(t, l, ltBatch(t, 5, kv("z", "1")))
	require.NoError(t, l.Roll(t.Context()))

	require.True(t, ltCompact(t, l).Cleaned)
	require.Equal(t, []string{"1 COMMIT", "2 data 1", "3 data 1", "4 COMMIT", "5 data 1"}, ltDescribeBatches(t, l),
		"the emptied batch at 0 goes (producer 6 wrote after it); its marker stays this round, as the batch was there")

	ltAppend(t, l, ltBatch(t, 6, kv("y", "1")))
	require.NoError(t, l.Roll(t.Context()))
	require.True(t, ltCompact(t, l).Cleaned)
	horizon := clock.Now().UnixMilli() + time.Hour.Milliseconds()
	require.Equal(t, []string{"1 COMMIT horizon", "2 data 1", "3 data 1", "4 COMMIT", "5 data 1", "6 data 1"}, ltDescribeBatches(t, l))
	rr, err := l.Read(t.Context(), 1, 1)
	require.NoError(t, err)
	b := kbatch.Batch(rr.Records)
	h, ok := b.DeleteHorizon()
	require.True(t, ok)
	require.Equal(t, horizon, h)
	require.True(t, b.Control())
	require.True(t, b.Transactional())
	require.Equal(t, int64(6), b.ProducerID())
	require.Equal(t, ltT0, b.MaxTimestamp())
	require.Equal(t, ltDecode(t, ltMarker(1, 6, true)), ltDecode(t, b), "the same control record")

	// A clean before the horizon (new dirty data) keeps the stamped
	// marker as it is.
	clock.Set(time.UnixMilli(horizon - 1))
	require.False(t, ltCompact(t, l).Cleaned)
	ltAppend(t, l, ltBatch(t, 7, kv("x", "1")))
	require.NoError(t, l.Roll(t.Context()))
	require.True(t, ltCompact(t, l).Cleaned)
	require.Equal(t, []string{"1 COMMIT horizon", "2 data 1", "3 data 1", "4 COMMIT", "5 data 1", "6 data 1", "7 data 1"}, ltDescribeBatches(t, l))
	rr, err = l.Read(t.Context(), 1, 1)
	require.NoError(t, err)
	h, _ = kbatch.Batch(rr.Records).DeleteHorizon()
	require.Equal(t, horizon, h, "the horizon is not restarted")
	clock.Set(time.UnixMilli(horizon))
	require.True(t, ltCompact(t, l).Cleaned)
	require.Equal(t, []string{"2 data 1", "3 data 1", "4 COMMIT", "5 data 1", "6 data 1", "7 data 1"}, ltDescribeBatches(t, l))
}

// Nothing at or after the first offset of a transaction that no marker has
// closed yet (the last stable offset) is cleaned: its records neither go
// nor supersede earlier ones, even within a segment that is cleaned. Once
// the transaction commits, the next clean goes past it.
func TestCompactOpenTransactionBlocksCleaning(t *testing.T) {
	clock := newLtClock(ltT0)
	l := ltOpen(t, t.TempDir(), ltCompactOptions(clock))
	kv := func(k, v string) ltRec { return ltRec{TS: ltT0, Key: k, Value: []byte(v)} }
	ltAppend(t, l, ltBatch(t, 0, kv("k", "a")))
	ltAppend(t, l, ltBatch(t, 1, kv("k", "b")))
	require.NoError(t, l.Roll(t.Context()))
	ltAppend(t, l, ltBatch(t, 2, kv("m", "1")))
	ltAppend(t, l, ltTxnBatch(t, 3, 9, kv("k", "c"))) // open
	ltAppend(t, l, ltBatch(t, 4, kv("k", "d")))
	ltAppend(t, l, ltBatch(t, 5, kv("m", "2")))
	ltAppend(t, l, ltBatch(t, 6, kv("m", "3")))
	require.NoError(t, l.Roll(t.Context()))

	res := ltCompact(t, l)
	require.True(t, res.Cleaned)
	require.Equal(t, int64(3), res.EndOffset, "the last stable offset")
	require.Equal(t, []int64{1, 2, 3, 4, 5, 6}, ltOffsets(ltDataRecs(t, l)),
		"k=b and m=1 stay: the records at and after 3 do not count yet")
	require.Equal(t, []string{"1 data 1", "2 data 1", "3 data 1", "4 data 1", "5 data 1", "6 data 1"}, ltDescribeBatches(t, l))

	// Still open: nothing more to clean.
	require.False(t, ltCompact(t, l).Cleaned)
	require.Equal(t, []int64{1, 2, 3, 4, 5, 6}, ltOffsets(ltDataRecs(t, l)))

	ltAppend(t, l, ltMarker(7, 9, true))
	require.NoError(t, l.Roll(t.Context()))
	res = ltCompact(t, l)
	require.True(t, res.Cleaned)
	require.Equal(t, int64(8), res.EndOffset)
	require.Equal(t, []int64{4, 6}, ltOffsets(ltDataRecs(t, l)))
	require.Equal(t, []string{"3 data 0", "4 data 1", "6 data 1", "7 COMMIT"}, ltDescribeBatches(t, l),
		"producer 9's last data batch stays empty, and so its marker")
}

// min.cleanable.dirty.ratio: the log is cleaned when the dirty share is
// more than the ratio, not when it equals it. A clean segment and a dirty
// one of the same size make exactly 0.5, the default.
func TestCompactDirtyRatioBoundary(t *testing.T) {
	clock := newLtClock(ltT0)
	l := ltOpen(t, t.TempDir(), &LogOptions{CleanupPolicy: CleanupCompact, Clock: clock.Now})
	seg := func(prefix string, base int64) {
		for i := int64(0); i < 4; i++ {
			ltAppend(t, l, ltBatch(t, base+i, ltRec{TS: ltT0, Key: fmt.Sprint(prefix, i), Value: []byte("v")}))
		}
		require.NoError(t, l.Roll(t.Context()))
	}
	seg("a", 0)
	res := ltCompact(t, l)
	require.True(t, res.Cleaned)
	require.Zero(t, res.RecordsRemoved, "distinct keys: the clean segment keeps its size")
	seg("b", 4)
	segs := l.Segments()
	require.Equal(t, segs[0].Size, segs[1].Size)
	res = ltCompact(t, l)
	require.Equal(t, 0.5, res.DirtyRatio)
	require.False(t, res.Cleaned, "a ratio of exactly min.cleanable.dirty.ratio is not more than it")
	seg("c", 8)
	res = ltCompact(t, l)
	require.Greater(t, res.DirtyRatio, 0.5)
	require.True(t, res.Cleaned)
}

// min.compaction.lag.ms holds back a segment whose largest timestamp is
// more than now - lag (LogCleanerManager.cleanableOffsets): one exactly at
// now - lag is cleaned. max.compaction.lag.ms forces a clean once the
// first dirty batch is older than now - lag, not at it.
func TestCompactLagBoundaries(t *testing.T) {
	t.Run("min.compaction.lag.ms", func(t *testing.T) {
		clock := newLtClock(ltT0)
		opts := ltCompactOptions(clock)
		opts.MinCompactionLag = time.Hour
		l := ltOpen(t, t.TempDir(), opts)
		ltAppend(t, l, ltBatch(t, 0, ltRec{TS: ltT0, Key: "k", Value: []byte("1")}))
		ltAppend(t, l, ltBatch(t, 1, ltRec{TS: ltT0, Key: "k", Value: []byte("2")}))
		require.NoError(t, l.Roll(t.Context()))
		clock.Set(time.UnixMilli(ltT0 + time.Hour.Milliseconds() - 1))
		require.False(t, ltCompact(t, l).Cleaned, "largest timestamp > now - lag")
		clock.Set(time.UnixMilli(ltT0 + time.Hour.Milliseconds()))
		require.True(t, ltCompact(t, l).Cleaned, "largest timestamp == now - lag")
		require.Equal(t, []int64{1}, ltOffsets(ltReadAll(t, l)))
	})
	t.Run("max.compaction.lag.ms", func(t *testing.T) {
		clock := newLtClock(ltT0)
		opts := &LogOptions{CleanupPolicy: CleanupCompact, MinCleanableDirtyRatio: 1, MaxCompactionLag: time.Hour, Clock: clock.Now}
		l := ltOpen(t, t.TempDir(), opts)
		ltAppend(t, l, ltBatch(t, 0, ltRec{TS: ltT0, Key: "k", Value: []byte("1")}))
		ltAppend(t, l, ltBatch(t, 1, ltRec{TS: ltT0, Key: "k", Value: []byte("2")}))
		require.NoError(t, l.Roll(t.Context()))
		clock.Set(time.UnixMilli(ltT0 + time.Hour.Milliseconds()))
		require.False(t, ltCompact(t, l).Cleaned, "first batch's timestamp == now - lag")
		clock.Set(time.UnixMilli(ltT0 + time.Hour.Milliseconds() + 1))
		require.True(t, ltCompact(t, l).Cleaned, "first batch's timestamp < now - lag")
	})
}

// A batch that already has a delete horizon and loses a record keeps that
// horizon: the rebuild does not restart it, nor drop it.
func TestCompactRebuildKeepsHorizon(t *testing.T) {
	clock := newLtClock(ltT0)
	l := ltOpen(t, t.TempDir(), ltCompactOptions(clock))
	ltAppend(t, l, ltBatch(t, 0, ltRec{TS: ltT0, Key: "dead"}, ltRec{TS: ltT0 + 1, Key: "k2", Value: []byte("v")}))
	ltAppend(t, l, ltBatch(t, 2, ltRec{TS: ltT0, Key: "z", Value: []byte("1")}))
	require.NoError(t, l.Roll(t.Context()))
	require.True(t, ltCompact(t, l).Cleaned)
	horizon := ltT0 + DefaultDeleteRetention.Milliseconds()
	readFirst := func() kbatch.Batch {
		rr, err := l.Read(t.Context(), 0, 1)
		require.NoError(t, err)
		b, err := kbatch.ParseBatch(rr.Records)
		require.NoError(t, err)
		require.NoError(t, b.CheckCRC())
		return b
	}
	h, ok := readFirst().DeleteHorizon()
	require.True(t, ok)
	require.Equal(t, horizon, h)
	require.Equal(t, int32(2), readFirst().NumRecords())

	clock.Advance(time.Hour)
	ltAppend(t, l, ltBatch(t, 3, ltRec{TS: ltT0, Key: "k2", Value: []byte("w")}))
	require.NoError(t, l.Roll(t.Context()))
	require.True(t, ltCompact(t, l).Cleaned)
	b := readFirst()
	require.Equal(t, int32(1), b.NumRecords(), "k2 went")
	h, ok = b.DeleteHorizon()
	require.True(t, ok, "the horizon stays")
	require.Equal(t, horizon, h, "the original horizon, not a new one")
	require.Equal(t, []ltRec{{Offset: 0, TS: ltT0, Key: "dead"}}, ltDecode(t, b), "the tombstone keeps its timestamp")
	require.Equal(t, int32(1), b.LastOffsetDelta())
}

// A crash right after a cleaned group of six segments is renamed to
// .swap: OpenLog completes the swap, deleting all six old segments (not
// only the one whose base offset the cleaned segment has), and opens to
// the cleaned log.
func TestCompactCrashDuringSwapMultiSegmentGroup(t *testing.T) {
	for _, step := range []string{"after swap rename", "after old deleted"} {
		t.Run(step, func(t *testing.T) {
			clock := newLtClock(ltT0)
			dir := t.TempDir()
			opts := ltCompactOptions(clock)
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
				if i > 0 && i%5 == 0 {
					require.NoError(t, l.Roll(t.Context()))
				}
				ltAppend(t, l, ltBatch(t, i, ltRec{TS: ltT0 + i, Key: fmt.Sprint("k", i%4), Value: []byte(fmt.Sprint(i))}))
			}
			require.NoError(t, l.Roll(t.Context()))
			require.Equal(t, []int64{0, 5, 10, 15, 20, 25, 30}, ltBases(l))
			res := ltCompact(t, l)
			require.Equal(t, 6, res.SegmentsRead)
			require.Equal(t, 1, res.SegmentsWritten, "one group")
			after := ltReadAll(t, l)
			require.Equal(t, []int64{26, 27, 28, 29}, ltOffsets(after))
			require.NotEmpty(t, snapshot)
			opts.hooks = nil
			l2 := ltOpen(t, snapshot, opts)
			require.Equal(t, []int64{0, 30}, ltBases(l2))
			require.Equal(t, after, ltReadAll(t, l2))
			for _, name := range ltFiles(t, snapshot) {
				require.NotContains(t, name, swapSuffix)
				require.NotContains(t, name, deletedSuffix)
			}
		})
	}
}

// groupSegments bounds each group by segment.bytes, by segment.index.bytes
// for each index, and by the int32 span of relative offsets; a group may
// fill each bound exactly.
func TestGroupSegmentsLimits(t *testing.T) {
	view := func(base, size int64, offN, timN int) segView {
		return segView{seg: &logSegment{base: base}, size: size, off: indexView{n: offN}, tim: indexView{n: timN}}
	}
	bases := func(groups [][]segView) [][]int64 {
		var out [][]int64
		for _, g := range groups {
			var bs []int64
			for _, v := range g {
				bs = append(bs, v.seg.base)
			}
			out = append(out, bs)
		}
		return out
	}
	for _, c := range []struct {
		name             string
		views            []segView
		maxSize, maxIdx  int64
		firstUncleanable int64
		want             [][]int64
	}{
		{"log size", []segView{view(0, 60, 0, 0), view(10, 40, 0, 0), view(20, 1, 0, 0)}, 100, 1000, 30, [][]int64{{0, 10}, {20}}},
		{"offset index size", []segView{view(0, 1, 6, 0), view(10, 1, 4, 0), view(20, 1, 1, 0)}, 1000, 80, 30, [][]int64{{0, 10}, {20}}},
		{"time index size", []segView{view(0, 1, 0, 6), view(10, 1, 0, 4), view(20, 1, 0, 1)}, 1000, 120, 30, [][]int64{{0, 10}, {20}}},
		{"relative offsets", []segView{view(0, 1, 0, 0), view(10, 1, 0, 0), view(math.MaxInt32+1, 1, 0, 0)}, 1000, 1000, math.MaxInt32 + 2, [][]int64{{0, 10}, {math.MaxInt32 + 1}}},
		{"all fit", []segView{view(0, 1, 1, 1), view(10, 1, 1, 1), view(20, 1, 1, 1)}, 1000, 1000, 30, [][]int64{{0, 10, 20}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, bases(groupSegments(c.views, c.maxSize, c.maxIdx, c.firstUncleanable)))
		})
	}
}
