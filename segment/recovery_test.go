package segment

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/diskless-go/diskless/kbatch"
)

// refValidPrefix computes, independently of the Log's recovery, the
// records of the longest valid prefix of the .log files in dir: segments
// in base offset order, batches in file order, stopping at the first batch
// that is cut short, fails its framing or CRC, goes back in offsets or
// leaves its segment's range (then nothing after it counts).
func refValidPrefix(t testing.TB, dir string) []ltRec {
	t.Helper()
	var bases []int64
	for _, name := range ltFiles(t, dir) {
		if base, ext, suffix, ok := parseSegmentName(name); ok && ext == logFileExt && suffix == "" {
			bases = append(bases, base)
		}
	}
	slices.Sort(bases)
	var out []ltRec
	for i, base := range bases {
		next := int64(math.MaxInt64)
		if i+1 < len(bases) {
			next = bases[i+1]
		}
		data := ltReadFile(t, ltSegPath(dir, base, logFileExt))
		it := kbatch.NewBatchIter(data)
		prevNext := base
		for it.Next() {
			b := it.Batch()
			if b.CheckCRC() != nil || b.BaseOffset() < prevNext || b.LastOffsetDelta() < 0 ||
				b.LastOffset() >= next || b.LastOffset()-base > math.MaxInt32 {
				return out
			}
			out = append(out, ltDecode(t, b)...)
			prevNext = b.NextOffset()
		}
		if it.Err() != nil || it.Partial() {
			return out
		}
	}
	return out
}

// ltCrashBase writes a log of several segments with a few codecs, syncs
// it and returns its directory as a crash would leave it (no clean
// shutdown marker), and its records.
func ltCrashBase(t testing.TB) (string, []ltRec) {
	clock := newLtClock(ltT0)
	dir := t.TempDir()
	l, err := OpenLog(context.Background(), dir, &LogOptions{SegmentBytes: 2048, IndexIntervalBytes: 200, Clock: clock.Now})
	require.NoError(t, err)
	var all []ltRec
	for i := int64(0); i < 60; i++ {
		off := l.LatestOffset() + i%3 // gaps too
		recs := ltKV(off, int(1+i%4), ltT0+off, ltKey)
		ltAppend(t, l, ltBatchCodec(t, kbatch.Codecs[i%3], off, recs...))
		all = append(all, recs...)
	}
	require.NoError(t, l.Sync(context.Background()))
	crashed := ltCopyDir(t, dir)
	require.NoError(t, l.Close())
	return crashed, all
}

// mutateFile damages a file at a random position: truncates it, flips
// bytes, overwrites a run with garbage, or appends garbage.
func mutateFile(t testing.TB, rng *rand.Rand, path string) string {
	data := ltReadFile(t, path)
	pos := 0
	if len(data) > 0 {
		pos = rng.IntN(len(data))
	}
	var what string
	switch rng.IntN(4) {
	case 0:
		data, what = data[:pos], fmt.Sprintf("truncated at %d", pos)
	case 1:
		if len(data) == 0 {
			return "empty, unchanged"
		}
		for range 1 + rng.IntN(3) {
			data[rng.IntN(len(data))] ^= byte(1 + rng.IntN(255))
		}
		what = "bytes flipped"
	case 2:
		n := min(1+rng.IntN(64), len(data)-pos)
		for i := range n {
			data[pos+i] = byte(rng.Uint32())
		}
		what = fmt.Sprintf("%d bytes of garbage at %d", n, pos)
	case 3:
		g := make([]byte, 1+rng.IntN(100))
		for i := range g {
			g[i] = byte(rng.Uint32())
		}
		data, what = append(data, g...), fmt.Sprintf("%d bytes appended", len(g))
	}
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return filepath.Base(path) + ": " + what
}

// After a crash, files damaged at random positions open to the longest
// valid prefix of the log, and never make OpenLog panic or fail.
func TestRecoveryFromDamage(t *testing.T) {
	base, all := ltCrashBase(t)
	require.Equal(t, all, refValidPrefix(t, base))
	names := ltFiles(t, base)
	var targets []string
	for _, n := range names {
		if _, _, _, ok := parseSegmentName(n); ok {
			targets = append(targets, n)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	iterations := 150
	if testing.Short() {
		iterations = 50
	}
	for i := 0; i < iterations; i++ {
		dir := ltCopyDir(t, base)
		var what []string
		for range 1 + rng.IntN(2) {
			what = append(what, mutateFile(t, rng, filepath.Join(dir, targets[rng.IntN(len(targets))])))
		}
		if rng.IntN(2) == 0 {
			// Without a recovery point every segment is checked; with
			// one, only those from it on, so damage below it stays.
			require.NoError(t, os.Remove(filepath.Join(dir, recoveryPointFile)))
		} else {
			require.NoError(t, writeCheckpoint(dir, recoveryPointFile, 0))
		}
		want := refValidPrefix(t, dir)
		l, err := OpenLog(t.Context(), dir, &LogOptions{SegmentBytes: 2048, IndexIntervalBytes: 200, Clock: newLtClock(ltT0).Now})
		require.NoError(t, err, "%d: %v", i, what)
		require.Equal(t, want, ltReadAll(t, l), "%d: %v", i, what)
		if len(want) > 0 {
			// The log end offset is after the last record, or the base
			// of an empty last segment after it (a gap).
			last := l.Segments()[len(l.Segments())-1]
			if last.Size > 0 || last.BaseOffset <= want[len(want)-1].Offset {
				require.Equal(t, want[len(want)-1].Offset+1, l.LatestOffset(), "%d: %v", i, what)
			} else {
				require.Equal(t, last.BaseOffset, l.LatestOffset(), "%d: %v", i, what)
			}
		}
		// The recovered log takes appends and reads them back.
		off := l.LatestOffset()
		ltAppend(t, l, ltBatch(t, off, ltRec{TS: ltT0, Key: "after"}))
		got := ltReadAll(t, l)
		require.Equal(t, off, got[len(got)-1].Offset)
		require.NoError(t, l.Close())
		// And reopens cleanly to the same records.
		l, err = OpenLog(t.Context(), dir, &LogOptions{SegmentBytes: 2048, IndexIntervalBytes: 200, Clock: newLtClock(ltT0).Now})
		require.NoError(t, err)
		require.Equal(t, got, ltReadAll(t, l))
		require.NoError(t, l.Close())
	}
}

// After a clean shutdown the .log files are trusted, but damaged index
// files are rebuilt, or (when the damage passes the checks on open)
// caught when a lookup lands on something that is not a batch: reads
// still return exactly the log's batches.
func TestCleanOpenDamagedIndexes(t *testing.T) {
	crashed, all := ltCrashBase(t)
	l, err := OpenLog(t.Context(), crashed, &LogOptions{SegmentBytes: 2048, IndexIntervalBytes: 200, Clock: newLtClock(ltT0).Now})
	require.NoError(t, err)
	require.NoError(t, l.Close())
	base := crashed
	var targets []string
	for _, n := range ltFiles(t, base) {
		if strings.HasSuffix(n, indexFileExt) || strings.HasSuffix(n, timeIndexFileExt) {
			targets = append(targets, n)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 100; i++ {
		dir := ltCopyDir(t, base)
		what := mutateFile(t, rng, filepath.Join(dir, targets[rng.IntN(len(targets))]))
		if rng.IntN(4) == 0 {
			require.NoError(t, os.Remove(filepath.Join(dir, targets[rng.IntN(len(targets))])))
			what += ", and an index removed"
		}
		l, err := OpenLog(t.Context(), dir, &LogOptions{SegmentBytes: 2048, IndexIntervalBytes: 200, Clock: newLtClock(ltT0).Now})
		require.NoError(t, err, what)
		require.Equal(t, all, ltReadAll(t, l), what)
		for _, r := range all {
			res, err := l.Read(t.Context(), r.Offset, 1)
			require.NoError(t, err, what)
			b, err := kbatch.ParseBatch(res.Records)
			require.NoError(t, err, what)
			require.LessOrEqual(t, b.BaseOffset(), r.Offset, what)
			require.GreaterOrEqual(t, b.LastOffset(), r.Offset, what)
		}
		ltCheckTimestamps(t, l, all, what)
		require.NoError(t, l.Close())
		// Indexes found wrong are rebuilt on the next open.
		l, err = OpenLog(t.Context(), dir, &LogOptions{SegmentBytes: 2048, IndexIntervalBytes: 200, Clock: newLtClock(ltT0).Now})
		require.NoError(t, err, what)
		require.Equal(t, all, ltReadAll(t, l), what)
		require.NoError(t, l.Close())
	}
}

// ltCheckTimestamps asks OffsetForTimestamp for every timestamp from
// before the first record to after the last and compares the answer with
// the first record (at or after the log start offset) that reaches it.
func ltCheckTimestamps(t *testing.T, l *Log, all []ltRec, what string) {
	t.Helper()
	start := l.EarliestOffset()
	maxTs := int64(kbatch.NoTimestamp)
	for _, r := range all {
		maxTs = max(maxTs, r.TS)
	}
	for ts := ltT0 - 1; ts <= maxTs+1; ts++ {
		var want *ltRec
		for i := range all {
			if all[i].Offset >= start && all[i].TS >= ts {
				want = &all[i]
				break
			}
		}
		got, found, err := l.OffsetForTimestamp(t.Context(), ts)
		require.NoError(t, err, what)
		if want == nil {
			require.False(t, found, "%s: timestamp %d", what, ts)
			continue
		}
		require.True(t, found, "%s: timestamp %d", what, ts)
		require.Equal(t, want.Offset, got.Offset, "%s: timestamp %d", what, ts)
		require.Equal(t, want.TS, got.Timestamp, "%s: timestamp %d", what, ts)
	}
}

// A time index entry in the middle of an inactive segment whose offset is
// changed, though it stays in range and in order, passes the checks on a
// clean open; OffsetForTimestamp must not believe it. It checks that the
// batch holding the entry's offset carries the entry's timestamp, scans
// when it does not, and the next open rebuilds the index.
func TestCleanOpenCorruptTimeIndexEntry(t *testing.T) {
	dir := t.TempDir()
	opts := &LogOptions{IndexIntervalBytes: 1, Clock: newLtClock(ltT0).Now}
	l := ltOpen(t, dir, opts)
	var all []ltRec
	for i := int64(0); i < 10; i++ {
		r := ltRec{Offset: i, TS: ltT0 + 10*i, Key: "k", Value: []byte("v")}
		ltAppend(t, l, ltBatch(t, i, r))
		all = append(all, r)
	}
	require.NoError(t, l.Roll(t.Context()))
	r := ltRec{Offset: 10, TS: ltT0 + 100, Key: "k", Value: []byte("v")}
	ltAppend(t, l, ltBatch(t, 10, r))
	all = append(all, r)
	require.NoError(t, l.Close())

	// Entries (T+10i, i) for i in 1..9; entry 3 is (T+40, 4): make it
	// (T+40, 7).
	path := ltSegPath(dir, 0, timeIndexFileExt)
	good := ltReadFile(t, path)
	require.Len(t, good, 9*timeIndexEntrySize)
	e := decodeTimeEntry(good[3*timeIndexEntrySize:], 0)
	require.Equal(t, timestampOffset{ltT0 + 40, 4, true}, e)
	bad := append([]byte(nil), good...)
	copy(bad[3*timeIndexEntrySize:], encodeTimeEntry(nil, ltT0+40, 7))
	require.NoError(t, os.WriteFile(path, bad, 0o644))

	l = ltOpen(t, dir, opts)
	got, found, err := l.OffsetForTimestamp(t.Context(), ltT0+40)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, int64(4), got.Offset, "not offset 7, where the corrupt entry points")
	ltCheckTimestamps(t, l, all, "corrupt time index entry")
	require.NoError(t, l.Close())
	require.NoFileExists(t, path, "a suspect index is removed on Close")
	l = ltOpen(t, dir, opts)
	require.Equal(t, good, ltReadFile(t, path), "and rebuilt on the next open")
	ltCheckTimestamps(t, l, all, "rebuilt time index")
}

// After a crash, only the segments from the one holding the recovery
// point on are checked and rebuilt (LogLoader: segments below the
// recovery point were flushed and are trusted): damage below it stays
// (reads of the damaged batch return it as it is, as Kafka's would), and
// damage from it on is truncated.
// A segment with no offset index entry still has its time index checked:
// its one entry, the final one, points at the batch with the greatest
// timestamp, and a corrupt offset there must not hide that batch.
func TestCleanOpenCorruptTimeIndexNoOffsetEntries(t *testing.T) {
	dir := t.TempDir()
	opts := &LogOptions{Clock: newLtClock(ltT0).Now}
	l := ltOpen(t, dir, opts)
	var all []ltRec
	for i, ts := range []int64{ltT0 + 5, ltT0 + 9, ltT0 + 2} {
		r := ltRec{Offset: int64(i), TS: ts, Key: "k", Value: []byte("v")}
		ltAppend(t, l, ltBatch(t, int64(i), r))
		all = append(all, r)
	}
	require.NoError(t, l.Roll(t.Context()))
	r := ltRec{Offset: 3, TS: ltT0 + 20, Key: "k", Value: []byte("v")}
	ltAppend(t, l, ltBatch(t, 3, r))
	all = append(all, r)
	require.NoError(t, l.Close())
	require.Empty(t, ltReadFile(t, ltSegPath(dir, 0, indexFileExt)))
	path := ltSegPath(dir, 0, timeIndexFileExt)
	require.Equal(t, encodeTimeEntry(nil, ltT0+9, 1), ltReadFile(t, path))
	require.NoError(t, os.WriteFile(path, encodeTimeEntry(nil, ltT0+9, 2), 0o644))

	l = ltOpen(t, dir, opts)
	got, found, err := l.OffsetForTimestamp(t.Context(), ltT0+9)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, int64(1), got.Offset)
	ltCheckTimestamps(t, l, all, "corrupt final time index entry")
}

func TestRecoveryStartsAtRecoveryPoint(t *testing.T) {
	clock := newLtClock(ltT0)
	dir := t.TempDir()
	opts := &LogOptions{SegmentBytes: 2048, IndexIntervalBytes: 200, Clock: clock.Now}
	l := ltOpen(t, dir, opts)
	all := ltFill(t, l, 80)
	require.NoError(t, l.Sync(t.Context()))
	segs := l.Segments()
	require.Greater(t, len(segs), 3)
	leo := l.LatestOffset()
	crashed := ltCopyDir(t, dir) // open: no clean shutdown marker
	rp, ok, err := readCheckpoint(crashed, recoveryPointFile)
	require.NoError(t, err)
	require.True(t, ok)
	last := segs[len(segs)-1]
	require.GreaterOrEqual(t, rp, last.BaseOffset, "the recovery point is in the last segment")

	// A flipped byte in the last record of segment 0's first batch (its
	// CRC fails, its framing does not) and in the last segment's last batch.
	damage := func(base int64, fromEnd int) {
		path := ltSegPath(crashed, base, logFileExt)
		data := ltReadFile(t, path)
		pos := 0
		if fromEnd == 0 {
			b, err := kbatch.ParseBatch(data)
			require.NoError(t, err)
			pos = b.Size() - 3
		} else {
			pos = len(data) - fromEnd
		}
		data[pos] ^= 0xff
		require.NoError(t, os.WriteFile(path, data, 0o644))
	}
	damage(0, 0)
	damage(last.BaseOffset, 3)

	core, logs := observer.New(zap.InfoLevel)
	opts.Logger = zap.New(core)
	l2 := ltOpen(t, crashed, opts)
	recovered := logs.FilterMessage("recovered segment").All()
	require.Len(t, recovered, 1, "only the segment holding the recovery point is rescanned")
	require.Equal(t, last.BaseOffset, recovered[0].ContextMap()["base"])
	var bases []int64
	for _, s := range segs {
		bases = append(bases, s.BaseOffset)
	}
	require.Equal(t, bases, ltBases(l2), "segment 0, below the recovery point, is not truncated")
	lastBatch := all[len(all)-3].Offset // ltFill appends batches of 3 records
	require.Equal(t, lastBatch, l2.LatestOffset(), "the last segment's damaged last batch is truncated")
	require.Less(t, l2.LatestOffset(), leo)
	res, err := l2.Read(t.Context(), 0, 1)
	require.NoError(t, err)
	require.Error(t, kbatch.Batch(res.Records).CheckCRC(), "segment 0's damaged batch is there as it was")
	var want []ltRec
	for _, r := range all {
		if r.Offset >= segs[1].BaseOffset && r.Offset < lastBatch {
			want = append(want, r)
		}
	}
	var got []ltRec
	for off := segs[1].BaseOffset; off < l2.LatestOffset(); {
		res, err := l2.Read(t.Context(), off, 1)
		require.NoError(t, err)
		b, err := kbatch.ParseBatch(res.Records)
		require.NoError(t, err)
		got = append(got, ltDecode(t, b)...)
		off = b.NextOffset()
	}
	require.Equal(t, want, got)
}

func TestRecoveryLeftoverFiles(t *testing.T) {
	dir, all := ltCrashBase(t)
	// Files a crash may leave: .cleaned output, .deleted files, a
	// temporary checkpoint, an orphaned index, swapped indexes without a
	// swapped log.
	for name, content := range map[string]string{
		"00000000000000000000.log.cleaned":       "partial",
		"00000000000000000000.index.cleaned":     "x",
		"00000000000000000007.log.deleted":       "old",
		"00000000000000000007.timeindex.deleted": "old",
		recoveryPointFile + tmpSuffix:            "0\n",
		"00000000000000099999.index":             "orphan!!",
		"00000000000000000000.timeindex.swap":    "x",
		"unrelated-file":                         "kept",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	l := ltOpen(t, dir, &LogOptions{SegmentBytes: 2048, IndexIntervalBytes: 200, Clock: newLtClock(ltT0).Now})
	require.Equal(t, all, ltReadAll(t, l))
	for _, name := range ltFiles(t, dir) {
		for _, bad := range []string{cleanedSuffix, deletedSuffix, swapSuffix, tmpSuffix, "99999"} {
			require.NotContains(t, name, bad)
		}
	}
	require.FileExists(t, filepath.Join(dir, "unrelated-file"))
}

func TestRecoveryEmptyDirWithLogStart(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, writeCheckpoint(dir, logStartOffsetFile, 500))
	l := ltOpen(t, dir, nil)
	require.Equal(t, int64(500), l.EarliestOffset())
	require.Equal(t, int64(500), l.LatestOffset())
	require.FileExists(t, ltSegPath(dir, 500, logFileExt))
	_, err := l.Append(t.Context(), ltBatch(t, 499, ltRec{TS: ltT0, Key: "a"}))
	require.ErrorIs(t, err, ErrOffsetsOutOfOrder)
	ltAppend(t, l, ltBatch(t, 500, ltRec{TS: ltT0, Key: "a"}))
}
