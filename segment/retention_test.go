package segment

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kafkaerr"
)

// ltSegmentsOf appends n batches of one record each with timestamp
// ltT0+i*1000, rolling after every perSeg batches, and returns the
// segments' base offsets.
func ltSegmentsOf(t *testing.T, l *Log, n, perSeg int) []int64 {
	t.Helper()
	for i := 0; i < n; i++ {
		if i > 0 && i%perSeg == 0 {
			require.NoError(t, l.Roll(t.Context()))
		}
		off := l.LatestOffset()
		ltAppend(t, l, ltBatch(t, off, ltRec{TS: ltT0 + int64(i)*1000, Key: "k", Value: []byte("0123456789")}))
	}
	var bases []int64
	for _, s := range l.Segments() {
		bases = append(bases, s.BaseOffset)
	}
	return bases
}

func ltBases(l *Log) []int64 {
	var bases []int64
	for _, s := range l.Segments() {
		bases = append(bases, s.BaseOffset)
	}
	return bases
}

func TestRetentionBytes(t *testing.T) {
	clock := newLtClock(ltT0)
	l := ltOpen(t, t.TempDir(), &LogOptions{RetentionBytes: 1, RetentionTime: -1, Clock: clock.Now})
	ltSegmentsOf(t, l, 10, 2) // 5 segments of 2 batches
	segSize := l.Segments()[0].Size
	l.cfg.retentionBytes = 3*segSize - 1
	n, err := l.DeleteOldSegments(t.Context())
	require.NoError(t, err)
	// diff = 5s - (3s-1) = 2s+1: delete while diff - s >= 0: two segments.
	require.Equal(t, 2, n)
	require.Equal(t, []int64{4, 6, 8}, ltBases(l))
	require.Equal(t, int64(4), l.EarliestOffset())
	n, err = l.DeleteOldSegments(t.Context())
	require.NoError(t, err)
	require.Zero(t, n, "3 segments are below 3 segment sizes - 1 + one segment")

	// The smallest retention.bytes keeps the last segment: deleting it
	// would take the log below the limit.
	l.cfg.retentionBytes = 1
	n, err = l.DeleteOldSegments(t.Context())
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, []int64{8}, ltBases(l))
	require.Equal(t, int64(8), l.EarliestOffset())
}

// retention.bytes deletes a segment while the log stays at least
// retention.bytes without it: a log that would be exactly retention.bytes
// loses it (diff - size == 0), one that would be a byte below keeps it.
func TestRetentionBytesExactly(t *testing.T) {
	for _, c := range []struct {
		name  string
		limit func(seg int64) int64
		bases []int64
	}{
		{"exactly three segments remain", func(s int64) int64 { return 3 * s }, []int64{4, 6, 8}},
		{"one byte more", func(s int64) int64 { return 3*s + 1 }, []int64{2, 4, 6, 8}},
		{"one byte less", func(s int64) int64 { return 3*s - 1 }, []int64{4, 6, 8}},
	} {
		t.Run(c.name, func(t *testing.T) {
			clock := newLtClock(ltT0)
			l := ltOpen(t, t.TempDir(), &LogOptions{RetentionBytes: 1, RetentionTime: -1, Clock: clock.Now})
			ltSegmentsOf(t, l, 10, 2) // 5 segments of the same size
			segs := l.Segments()
			for _, s := range segs {
				require.Equal(t, segs[0].Size, s.Size)
			}
			l.cfg.retentionBytes = c.limit(segs[0].Size)
			_, err := l.DeleteOldSegments(t.Context())
			require.NoError(t, err)
			require.Equal(t, c.bases, ltBases(l))
		})
	}
}

func TestRetentionTime(t *testing.T) {
	clock := newLtClock(ltT0)
	dir := t.TempDir()
	l := ltOpen(t, dir, &LogOptions{RetentionTime: time.Hour, Clock: clock.Now})
	ltSegmentsOf(t, l, 10, 2) // segment i's largest timestamp: ltT0 + (2i+1)*1000
	clock.Set(time.UnixMilli(ltT0 + 3600_000 + 3000))
	n, err := l.DeleteOldSegments(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, n, "now - largest > retention.ms: only segment 0 (largest ltT0+1000)")
	require.Equal(t, []int64{2, 4, 6, 8}, ltBases(l))

	clock.Set(time.UnixMilli(ltT0 + 3600_000 + 7000))
	n, err = l.DeleteOldSegments(t.Context())
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, []int64{6, 8}, ltBases(l))
	for _, name := range ltFiles(t, dir) {
		require.False(t, strings.HasPrefix(name, "0000000000000000000"+"0") || strings.Contains(name, deletedSuffix), name)
	}

	// Everything old: the active segment is rolled and deleted.
	clock.Set(time.UnixMilli(ltT0 + 100*3600_000))
	n, err = l.DeleteOldSegments(t.Context())
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, []int64{10}, ltBases(l))
	res, err := l.Read(t.Context(), 10, 100)
	require.NoError(t, err)
	require.Empty(t, res.Records)
	ltAppend(t, l, ltBatch(t, 10, ltRec{TS: ltT0, Key: "k"}))
	require.Equal(t, int64(11), l.LatestOffset())
}

func TestRetentionStopsAtFirstKept(t *testing.T) {
	clock := newLtClock(ltT0)
	l := ltOpen(t, t.TempDir(), &LogOptions{RetentionTime: time.Hour, Clock: clock.Now})
	ltAppend(t, l, ltBatch(t, 0, ltRec{TS: ltT0 + 10*3600_000, Key: "k"})) // a new segment first
	require.NoError(t, l.Roll(t.Context()))
	ltAppend(t, l, ltBatch(t, 1, ltRec{TS: ltT0, Key: "k"})) // an old one after it
	require.NoError(t, l.Roll(t.Context()))
	ltAppend(t, l, ltBatch(t, 2, ltRec{TS: ltT0 + 10*3600_000, Key: "k"}))
	clock.Set(time.UnixMilli(ltT0 + 5*3600_000))
	n, err := l.DeleteOldSegments(t.Context())
	require.NoError(t, err)
	require.Zero(t, n, "the oldest segment is kept, so nothing after it goes")
}

func TestDeleteRecordsAndLogStartRule(t *testing.T) {
	clock := newLtClock(ltT0)
	dir := t.TempDir()
	opts := &LogOptions{CleanupPolicy: CleanupCompact, RetentionBytes: 1, RetentionTime: time.Millisecond, Clock: clock.Now}
	l := ltOpen(t, dir, opts)
	ltSegmentsOf(t, l, 10, 2)
	ctx := t.Context()

	// compact only: retention.bytes and retention.ms do not apply.
	clock.Set(time.UnixMilli(ltT0 + 100*3600_000))
	n, err := l.DeleteOldSegments(ctx)
	require.NoError(t, err)
	require.Zero(t, n)

	start, err := l.DeleteRecords(ctx, 5)
	require.NoError(t, err)
	require.Equal(t, int64(5), start)
	require.Equal(t, []int64{4, 6, 8}, ltBases(l), "segments wholly below 5 are gone")
	start, err = l.DeleteRecords(ctx, 3)
	require.NoError(t, err)
	require.Equal(t, int64(5), start, "a lower offset changes nothing")
	_, err = l.DeleteRecords(ctx, 11)
	require.ErrorIs(t, err, kafkaerr.ErrOffsetOutOfRange)

	// The log start offset survives a reopen, clean or not.
	require.NoError(t, l.Sync(ctx))
	crashed := ltCopyDir(t, dir)
	require.NoError(t, l.Close())
	for _, d := range []string{dir, crashed} {
		l2 := ltOpen(t, d, opts)
		require.Equal(t, int64(5), l2.EarliestOffset(), d)
		_, err = l2.Read(ctx, 4, 1)
		require.ErrorIs(t, err, kafkaerr.ErrOffsetOutOfRange)
		require.NoError(t, l2.Close())
	}

	// Up to the log end offset: the active segment stays (the log start
	// rule never deletes the last segment), but nothing is readable.
	l3 := ltOpen(t, dir, opts)
	start, err = l3.DeleteRecords(ctx, DeleteRecordsHighWatermark)
	require.NoError(t, err)
	require.Equal(t, int64(10), start)
	require.Equal(t, []int64{8}, ltBases(l3))
	res, err := l3.Read(ctx, 10, 100)
	require.NoError(t, err)
	require.Empty(t, res.Records)
}

func TestFileDeleteDelay(t *testing.T) {
	clock := newLtClock(ltT0)
	dir := t.TempDir()
	opts := &LogOptions{FileDeleteDelay: time.Minute, RetentionTime: -1, Clock: clock.Now}
	l := ltOpen(t, dir, opts)
	ltSegmentsOf(t, l, 6, 2)
	_, err := l.DeleteRecords(t.Context(), 4)
	require.NoError(t, err)
	for _, base := range []int64{0, 2} {
		for _, ext := range []string{logFileExt, indexFileExt, timeIndexFileExt} {
			require.FileExists(t, segmentPath(dir, base, ext, deletedSuffix))
			require.NoFileExists(t, segmentPath(dir, base, ext, ""))
		}
	}
	// A crash now: the next open removes the .deleted files.
	crashed := ltCopyDir(t, dir)
	l2 := ltOpen(t, crashed, opts)
	require.Equal(t, []int64{4}, ltBases(l2))
	for _, name := range ltFiles(t, crashed) {
		require.NotContains(t, name, deletedSuffix)
	}

	clock.Advance(59 * time.Second)
	_, err = l.DeleteOldSegments(t.Context())
	require.NoError(t, err)
	require.FileExists(t, segmentPath(dir, 0, logFileExt, deletedSuffix))
	clock.Advance(time.Second)
	_, err = l.DeleteOldSegments(t.Context())
	require.NoError(t, err)
	require.NoFileExists(t, segmentPath(dir, 0, logFileExt, deletedSuffix))
	require.NoFileExists(t, filepath.Join(dir, "00000000000000000002.log.deleted"))
}

// A reader that holds a segment keeps reading it while it is deleted.
func TestReaderSurvivesDeletion(t *testing.T) {
	dir := t.TempDir()
	l := ltOpen(t, dir, &LogOptions{RetentionTime: -1, Clock: newLtClock(ltT0).Now})
	ltSegmentsOf(t, l, 4, 2)
	l.mu.RLock()
	v := l.mu.segs[0].view()
	v.seg.acquire()
	l.mu.RUnlock()
	_, err := l.DeleteRecords(t.Context(), 4)
	require.NoError(t, err)
	require.NoFileExists(t, ltSegPath(dir, 0, logFileExt))
	recs, found, err := v.read(1, 1<<20)
	require.NoError(t, err)
	require.True(t, found)
	require.Len(t, ltDecode(t, recs), 1)
	v.seg.release()
	_, err = v.seg.file.Stat()
	require.Error(t, err, "the last reference closed the file")
}
