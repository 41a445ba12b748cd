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
		it := NewBatchIter(data)
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
		ltAppend(t, l, ltBatchCodec(t, Codecs[i%3], off, recs...))
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
			b, err := ParseBatch(res.Records)
			require.NoError(t, err, what)
			require.LessOrEqual(t, b.BaseOffset(), r.Offset, what)
			require.GreaterOrEqual(t, b.LastOffset(), r.Offset, what)
		}
		for _, ts := range []int64{ltT0, ltT0 + 50, ltT0 + 100} {
			_, _, err := l.OffsetForTimestamp(t.Context(), ts)
			require.NoError(t, err, what)
		}
		require.NoError(t, l.Close())
		// Indexes found wrong are rebuilt on the next open.
		l, err = OpenLog(t.Context(), dir, &LogOptions{SegmentBytes: 2048, IndexIntervalBytes: 200, Clock: newLtClock(ltT0).Now})
		require.NoError(t, err, what)
		require.Equal(t, all, ltReadAll(t, l), what)
		require.NoError(t, l.Close())
	}
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
