package segment

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

func ltKey(off int64) string { return fmt.Sprintf("k%d", off%7) }

// ltFill appends n batches of 3 records from the log end offset, with
// timestamps a millisecond apart, and returns the records.
func ltFill(t testing.TB, l *Log, n int) []ltRec {
	t.Helper()
	var all []ltRec
	for i := 0; i < n; i++ {
		off := l.LatestOffset()
		recs := ltKV(off, 3, ltT0+off, ltKey)
		ltAppend(t, l, ltBatch(t, off, recs...))
		all = append(all, recs...)
	}
	return all
}

func TestLogAppendReadReopen(t *testing.T) {
	clock := newLtClock(ltT0)
	dir := t.TempDir()
	l := ltOpen(t, dir, ltOptions(clock))
	require.Equal(t, int64(0), l.EarliestOffset())
	require.Equal(t, int64(0), l.LatestOffset())
	want := ltFill(t, l, 100)
	require.Equal(t, int64(300), l.LatestOffset())
	require.Greater(t, len(l.Segments()), 2, "4 KiB segments roll")
	require.Equal(t, want, ltReadAll(t, l))

	// Every offset reads from the batch that holds it.
	for off := int64(0); off < 300; off++ {
		res, err := l.Read(t.Context(), off, 1)
		require.NoError(t, err)
		b, err := kbatch.ParseBatch(res.Records)
		require.NoError(t, err)
		require.LessOrEqual(t, b.BaseOffset(), off)
		require.GreaterOrEqual(t, b.LastOffset(), off)
	}

	// An unclean copy (no Close) recovers to the same log.
	require.NoError(t, l.Sync(t.Context()))
	crashed := ltCopyDir(t, dir)
	l2 := ltOpen(t, crashed, ltOptions(clock))
	require.Equal(t, want, ltReadAll(t, l2))
	require.Equal(t, l.Segments(), l2.Segments())

	// A clean reopen too, with the same files.
	size := l.Size()
	require.NoError(t, l.Close())
	require.NoError(t, l.Close(), "Close twice")
	_, err := l.Read(t.Context(), 0, 1)
	require.ErrorIs(t, err, ErrClosed)
	_, err = l.Append(t.Context(), ltBatch(t, 300, ltRec{TS: ltT0, Key: "a"}))
	require.ErrorIs(t, err, ErrClosed)
	require.FileExists(t, filepath.Join(dir, cleanShutdownFile))
	l3 := ltOpen(t, dir, ltOptions(clock))
	require.NoFileExists(t, filepath.Join(dir, cleanShutdownFile))
	require.Equal(t, want, ltReadAll(t, l3))
	require.Equal(t, size, l3.Size())
	more := ltFill(t, l3, 10)
	require.Equal(t, append(want, more...), ltReadAll(t, l3))
}

func TestLogReadOutOfRange(t *testing.T) {
	l := ltOpen(t, t.TempDir(), ltOptions(newLtClock(ltT0)))
	ltFill(t, l, 10)
	ctx := t.Context()
	res, err := l.Read(ctx, 30, 100)
	require.NoError(t, err, "reading at the log end offset")
	require.Empty(t, res.Records)
	require.Equal(t, int64(30), res.LogEndOffset)
	_, err = l.Read(ctx, 31, 100)
	require.ErrorIs(t, err, kafkaerr.ErrOffsetOutOfRange)
	require.Equal(t, kafkaerr.OffsetOutOfRange, kafkaerr.CodeOf(err))
	var re *OffsetRangeError
	require.ErrorAs(t, err, &re)
	require.Equal(t, OffsetRangeError{Offset: 31, LogStartOffset: 0, LogEndOffset: 30}, *re)
	_, err = l.Read(ctx, -1, 100)
	require.ErrorIs(t, err, kafkaerr.ErrOffsetOutOfRange)

	start, err := l.DeleteRecords(ctx, 14)
	require.NoError(t, err)
	require.Equal(t, int64(14), start)
	_, err = l.Read(ctx, 13, 100)
	require.ErrorIs(t, err, kafkaerr.ErrOffsetOutOfRange)
	res, err = l.Read(ctx, 14, 1)
	require.NoError(t, err)
	b, err := kbatch.ParseBatch(res.Records)
	require.NoError(t, err)
	require.Equal(t, int64(12), b.BaseOffset(), "the batch holding the log start offset")
}

func TestLogReadMaxBytes(t *testing.T) {
	l := ltOpen(t, t.TempDir(), &LogOptions{IndexIntervalBytes: 100, Clock: newLtClock(ltT0).Now})
	var sizes []int
	for i := 0; i < 20; i++ {
		b := ltBatch(t, int64(i*2), ltKV(int64(i*2), 2, ltT0, ltKey)...)
		sizes = append(sizes, len(b))
		ltAppend(t, l, b)
	}
	ctx := t.Context()
	// At least one whole batch, however small maxBytes is.
	for _, maxBytes := range []int{-1, 0, 1, sizes[0] - 1} {
		res, err := l.Read(ctx, 0, maxBytes)
		require.NoError(t, err)
		require.Len(t, res.Records, sizes[0])
	}
	// Whole batches up to maxBytes, never a partial one.
	res, err := l.Read(ctx, 0, sizes[0]+sizes[1]+sizes[2]-1)
	require.NoError(t, err)
	require.Len(t, res.Records, sizes[0]+sizes[1])
	res, err = l.Read(ctx, 5, 1<<20)
	require.NoError(t, err)
	recs := ltDecode(t, res.Records)
	require.Equal(t, int64(4), recs[0].Offset)
	require.Equal(t, int64(39), recs[len(recs)-1].Offset)
}

func TestLogAppendErrors(t *testing.T) {
	l := ltOpen(t, t.TempDir(), &LogOptions{SegmentBytes: 1000, Clock: newLtClock(ltT0).Now})
	ctx := t.Context()
	ltAppend(t, l, ltBatch(t, 0, ltKV(0, 5, ltT0, ltKey)...))

	_, err := l.Append(ctx, ltBatch(t, 4, ltRec{TS: ltT0, Key: "a"}))
	require.ErrorIs(t, err, ErrOffsetsOutOfOrder, "below the log end offset")
	twoBad := append(ltBatch(t, 10, ltRec{TS: ltT0, Key: "a"}, ltRec{TS: ltT0, Key: "b"}), ltBatch(t, 11, ltRec{TS: ltT0, Key: "c"})...)
	_, err = l.Append(ctx, twoBad)
	require.ErrorIs(t, err, ErrOffsetsOutOfOrder, "overlapping batches")

	b := ltBatch(t, 5, ltRec{TS: ltT0, Key: "a"})
	b[len(b)-1] ^= 1
	_, err = l.Append(ctx, b)
	require.ErrorIs(t, err, kafkaerr.ErrCorruptMessage, "bad CRC")
	b = ltBatch(t, 5, ltRec{TS: ltT0, Key: "a"})
	_, err = l.Append(ctx, b[:len(b)-1])
	require.ErrorIs(t, err, kafkaerr.ErrCorruptMessage, "partial batch")

	big := ltBatch(t, 5, ltRec{TS: ltT0, Key: "a", Value: make([]byte, 1000)})
	_, err = l.Append(ctx, big)
	require.ErrorIs(t, err, kafkaerr.ErrRecordListTooLarge)
	require.Equal(t, kafkaerr.RecordListTooLarge, kafkaerr.CodeOf(err))

	info, err := l.Append(ctx, nil)
	require.NoError(t, err)
	require.Zero(t, info.Batches)

	// A gap is fine.
	info = ltAppend(t, l, ltBatch(t, 100, ltRec{TS: ltT0, Key: "a"}))
	require.Equal(t, int64(100), info.FirstOffset)
	require.Equal(t, int64(101), l.LatestOffset())
	res, err := l.Read(ctx, 50, 1)
	require.NoError(t, err)
	require.Equal(t, int64(100), ltDecode(t, res.Records)[0].Offset, "an offset in a gap reads the next batch")
}

func TestLogOptionsValidation(t *testing.T) {
	for _, o := range []LogOptions{
		{SegmentBytes: -1}, {SegmentBytes: 10}, {SegmentBytes: 1 << 31},
		{SegmentTime: -1}, {SegmentJitter: -1}, {IndexIntervalBytes: -1},
		{SegmentIndexBytes: 23}, {SegmentIndexBytes: -5}, {CleanupPolicy: 7},
		{MinCleanableDirtyRatio: 1.5}, {MinCompactionLag: -1}, {CleanerBufferBytes: -1},
	} {
		_, err := OpenLog(t.Context(), t.TempDir(), &o)
		require.ErrorIs(t, err, ErrInvalidLogOptions, "%+v", o)
	}
	c, err := resolveLogOptions(nil)
	require.NoError(t, err)
	require.Equal(t, int64(kbatch.DefaultSegmentBytes), c.segmentBytes)
	require.Equal(t, int64(7*24*3600*1000), c.segmentMs)
	require.Equal(t, int64(4096), c.indexInterval)
	require.Equal(t, 1310720, c.offsetMaxEntries)
	require.Equal(t, 873813, c.timeMaxEntries)
	require.Equal(t, int64(7*24*3600*1000), c.retentionMs)
	require.Equal(t, int64(0), c.retentionBytes)
	require.Equal(t, CleanupDelete, c.policy)
	require.Equal(t, int64(24*3600*1000), c.deleteRetentionMs)
	require.Equal(t, 0.5, c.minDirtyRatio)

	for s, want := range map[string]CleanupPolicy{"delete": CleanupDelete, "compact": CleanupCompact, "compact,delete": CleanupCompactDelete, "delete, compact": CleanupCompactDelete} {
		p, err := ParseCleanupPolicy(s)
		require.NoError(t, err)
		require.Equal(t, want, p)
	}
	_, err = ParseCleanupPolicy("compress")
	require.Error(t, err)
	require.Equal(t, "compact,delete", CleanupCompactDelete.String())
}

func TestLogRollRules(t *testing.T) {
	ctx := context.Background()
	t.Run("size", func(t *testing.T) {
		l := ltOpen(t, t.TempDir(), &LogOptions{SegmentBytes: 500, Clock: newLtClock(ltT0).Now})
		b := ltBatch(t, 0, ltRec{TS: ltT0, Key: "k", Value: make([]byte, 100)})
		n := len(b)
		for i := 0; i < 10; i++ {
			ltAppend(t, l, ltBatch(t, int64(i), ltRec{TS: ltT0, Key: "k", Value: make([]byte, 100)}))
		}
		per := 500 / n
		for _, s := range l.Segments()[:len(l.Segments())-1] {
			require.Equal(t, int64(per*n), s.Size)
		}
	})
	t.Run("time in record time", func(t *testing.T) {
		clock := newLtClock(ltT0)
		l := ltOpen(t, t.TempDir(), &LogOptions{SegmentTime: time.Hour, Clock: clock.Now})
		ltAppend(t, l, ltBatch(t, 0, ltRec{TS: ltT0, Key: "a"}))
		clock.Advance(100 * time.Hour) // wall time does not count
		ltAppend(t, l, ltBatch(t, 1, ltRec{TS: ltT0 + 3600_000, Key: "a"}))
		require.Len(t, l.Segments(), 1, "exactly segment.ms is not past it")
		ltAppend(t, l, ltBatch(t, 2, ltRec{TS: ltT0 + 3600_001, Key: "a"}))
		require.Len(t, l.Segments(), 2)
		require.Equal(t, int64(2), l.Segments()[1].BaseOffset)
	})
	t.Run("time with jitter", func(t *testing.T) {
		clock := newLtClock(ltT0)
		l := ltOpen(t, t.TempDir(), &LogOptions{SegmentTime: 2 * time.Hour, SegmentJitter: 10 * time.Hour, Clock: clock.Now})
		for i := int64(0); i < 20; i++ {
			base := l.LatestOffset()
			first := ltT0 + i*10*3600_000
			ltAppend(t, l, ltBatch(t, base, ltRec{TS: first, Key: "a"}))
			jitter := l.active().jitterMs
			require.GreaterOrEqual(t, jitter, int64(0))
			require.Less(t, jitter, int64(2*3600_000), "the jitter is below min(jitter, segment.ms)")
			ltAppend(t, l, ltBatch(t, base+1, ltRec{TS: first + 2*3600_000 - jitter, Key: "a"}))
			require.Equal(t, base, l.Segments()[len(l.Segments())-1].BaseOffset, "exactly segment.ms - jitter is not past it")
			ltAppend(t, l, ltBatch(t, base+2, ltRec{TS: first + 2*3600_000 - jitter + 1, Key: "a"}))
			require.Equal(t, base+2, l.Segments()[len(l.Segments())-1].BaseOffset)
		}
	})
	t.Run("time without timestamps uses the clock", func(t *testing.T) {
		clock := newLtClock(ltT0)
		l := ltOpen(t, t.TempDir(), &LogOptions{SegmentTime: time.Hour, Clock: clock.Now})
		ltAppend(t, l, ltBatch(t, 0, ltRec{TS: -1, Key: "a"}))
		ltAppend(t, l, ltBatch(t, 1, ltRec{TS: -1, Key: "a"}))
		require.Len(t, l.Segments(), 1)
		clock.Advance(time.Hour + time.Millisecond)
		ltAppend(t, l, ltBatch(t, 2, ltRec{TS: -1, Key: "a"}))
		require.Len(t, l.Segments(), 2)
	})
	t.Run("offset index full", func(t *testing.T) {
		// 32 bytes: 4 offset entries, 2 time entries (full at 1).
		l := ltOpen(t, t.TempDir(), &LogOptions{SegmentIndexBytes: 32, IndexIntervalBytes: 1, Clock: newLtClock(ltT0).Now})
		n := int64(len(ltBatch(t, 0, ltRec{TS: -1, Key: "a"})))
		for i := int64(0); i < 20; i++ {
			ltAppend(t, l, ltBatch(t, i, ltRec{TS: -1, Key: "a"})) // no timestamps: no time entries
		}
		for _, s := range l.Segments()[:len(l.Segments())-1] {
			require.Equal(t, 5*n, s.Size, "4 entries after the first append")
		}
	})
	t.Run("time index full", func(t *testing.T) {
		l := ltOpen(t, t.TempDir(), &LogOptions{SegmentIndexBytes: 32, IndexIntervalBytes: 1, Clock: newLtClock(ltT0).Now})
		n := int64(len(ltBatch(t, 0, ltRec{TS: ltT0, Key: "a"})))
		for i := int64(0); i < 20; i++ {
			ltAppend(t, l, ltBatch(t, i, ltRec{TS: ltT0 + i, Key: "a"}))
		}
		for _, s := range l.Segments()[:len(l.Segments())-1] {
			require.Equal(t, 2*n, s.Size, "one time entry fills a 2-entry time index")
		}
	})
	t.Run("relative offset overflow", func(t *testing.T) {
		l := ltOpen(t, t.TempDir(), &LogOptions{Clock: newLtClock(ltT0).Now})
		ltAppend(t, l, ltBatch(t, 0, ltRec{TS: ltT0, Key: "a"}))
		ltAppend(t, l, ltBatch(t, 1<<31-1, ltRec{TS: ltT0, Key: "a"}))
		require.Len(t, l.Segments(), 1)
		ltAppend(t, l, ltBatch(t, 1<<31, ltRec{TS: ltT0, Key: "a"}))
		require.Len(t, l.Segments(), 2)
		require.Equal(t, int64(1<<31), l.Segments()[1].BaseOffset)
		res, err := l.Read(ctx, 5, 1)
		require.NoError(t, err)
		require.Equal(t, int64(1<<31-1), ltDecode(t, res.Records)[0].Offset)
	})
	t.Run("empty active segment is replaced", func(t *testing.T) {
		dir := t.TempDir()
		l := ltOpen(t, dir, &LogOptions{Clock: newLtClock(ltT0).Now})
		ltAppend(t, l, ltBatch(t, 1<<32, ltRec{TS: ltT0, Key: "a"}))
		require.Equal(t, []SegmentInfo{{BaseOffset: 1 << 32, Size: 69, LargestTimestamp: ltT0, Active: true}}, l.Segments())
		require.Equal(t, int64(0), l.EarliestOffset())
		require.NoFileExists(t, ltSegPath(dir, 0, logFileExt))
		res, err := l.Read(ctx, 0, 1)
		require.NoError(t, err)
		require.Equal(t, int64(1<<32), ltDecode(t, res.Records)[0].Offset)
	})
	t.Run("forced", func(t *testing.T) {
		l := ltOpen(t, t.TempDir(), &LogOptions{Clock: newLtClock(ltT0).Now})
		require.NoError(t, l.Roll(ctx))
		require.Len(t, l.Segments(), 1, "an empty segment does not roll")
		ltAppend(t, l, ltBatch(t, 0, ltRec{TS: ltT0, Key: "a"}))
		require.NoError(t, l.Roll(ctx))
		require.Len(t, l.Segments(), 2)
		require.Equal(t, int64(1), l.Segments()[1].BaseOffset)
	})
}

func TestOffsetForTimestamp(t *testing.T) {
	l := ltOpen(t, t.TempDir(), ltOptions(newLtClock(ltT0)))
	ctx := t.Context()
	// Timestamps go up by 10 per record, except a dip at offset 50.
	var recs []ltRec
	for off := int64(0); off < 200; off += 2 {
		r := []ltRec{{TS: ltT0 + off*10, Key: "a"}, {TS: ltT0 + (off+1)*10, Key: "b"}}
		if off == 50 {
			r[0].TS = ltT0
		}
		ltAppend(t, l, ltBatch(t, off, r...))
		r[0].Offset, r[1].Offset = off, off+1
		recs = append(recs, r...)
	}
	require.Greater(t, len(l.Segments()), 1)
	for _, target := range []int64{0, ltT0 - 5, ltT0, ltT0 + 1, ltT0 + 495, ltT0 + 500, ltT0 + 505, ltT0 + 1234, ltT0 + 1990, ltT0 + 1991} {
		got, found, err := l.OffsetForTimestamp(ctx, target)
		require.NoError(t, err)
		var want *ltRec
		for i := range recs {
			if recs[i].TS >= target {
				want = &recs[i]
				break
			}
		}
		if want == nil {
			require.False(t, found, "target %d", target)
			continue
		}
		require.True(t, found, "target %d", target)
		require.Equal(t, TimestampOffset{Timestamp: want.TS, Offset: want.Offset, LeaderEpoch: 3}, got, "target %d", target)
	}
	_, _, err := l.OffsetForTimestamp(ctx, -1)
	require.Error(t, err)

	// Not below the log start offset.
	_, err = l.DeleteRecords(ctx, 101)
	require.NoError(t, err)
	got, found, err := l.OffsetForTimestamp(ctx, ltT0)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, int64(101), got.Offset)
}

func TestLogSyncAndCheckpoints(t *testing.T) {
	dir := t.TempDir()
	l := ltOpen(t, dir, ltOptions(newLtClock(ltT0)))
	ltFill(t, l, 60)
	require.NoError(t, l.Sync(t.Context()))
	rp, ok, err := readCheckpoint(dir, recoveryPointFile)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(180), rp)
	require.NoError(t, l.Close())
	for name, want := range map[string]string{
		recoveryPointFile:  "0\n1\n180\n",
		logStartOffsetFile: "0\n1\n0\n",
		cleanShutdownFile:  `{"version":0,"brokerEpoch":-1}`,
	} {
		require.Equal(t, want, string(ltReadFile(t, filepath.Join(dir, name))), name)
	}
	for _, name := range ltFiles(t, dir) {
		require.False(t, strings.HasSuffix(name, ".tmp"), name)
	}
	_, ok = parseCheckpoint([]byte("0\n1\n-5\n"))
	require.False(t, ok)
	_, ok = parseCheckpoint([]byte("1\n1\n5\n"))
	require.False(t, ok)
}

func TestErrorCodeOffsetOutOfRange(t *testing.T) {
	require.Equal(t, "OFFSET_OUT_OF_RANGE", kafkaerr.OffsetOutOfRange.String())
	require.False(t, kafkaerr.OffsetOutOfRange.Retriable())
	err := offsetOutOfRange(5, 10, 20)
	require.True(t, errors.Is(err, kafkaerr.ErrOffsetOutOfRange))
	require.Contains(t, err.Error(), "OFFSET_OUT_OF_RANGE")
	_ = os.ErrNotExist
}

// An append whose offsets span more than a segment's int32 relative
// offsets (gaps are allowed) is split into segments, and every batch
// survives a crash and a clean close. Kafka fails such an append
// (LogSegmentOffsetOverflowException) rather than lose data; a Log splits
// it before the first batch whose last offset does not fit.
func TestLogAppendOffsetOverflow(t *testing.T) {
	const maxRel = math.MaxInt32
	rec := func(n int) []ltRec {
		recs := make([]ltRec, n)
		for i := range recs {
			recs[i] = ltRec{TS: ltT0 + int64(i), Key: fmt.Sprint("k", i), Value: []byte("v")}
		}
		return recs
	}
	for _, c := range []struct {
		name     string
		appends  [][][]byte // appends, each of batches
		segments []int64
	}{{
		name:     "a gap of 3e9 in one append",
		appends:  [][][]byte{{ltBatch(t, 0, rec(1)...), ltBatch(t, 3_000_000_000, rec(1)...)}},
		segments: []int64{0, 3_000_000_000},
	}, {
		name: "a multi-record batch straddling 2^31 in one append",
		// The batch starts within reach of base 0 and ends one past it.
		appends:  [][][]byte{{ltBatch(t, 0, rec(1)...), ltBatch(t, maxRel-1, rec(3)...), ltBatch(t, maxRel+2, rec(2)...)}},
		segments: []int64{0, maxRel - 1},
	}, {
		name:     "a multi-record batch straddling 2^31 in its own append",
		appends:  [][][]byte{{ltBatch(t, 0, rec(1)...)}, {ltBatch(t, maxRel-1, rec(3)...)}},
		segments: []int64{0, maxRel - 1},
	}, {
		name:     "a multi-record batch ending exactly at 2^31-1 fits",
		appends:  [][][]byte{{ltBatch(t, 0, rec(1)...), ltBatch(t, maxRel-2, rec(3)...)}},
		segments: []int64{0},
	}, {
		name: "three chunks in one append",
		appends: [][][]byte{{ltBatch(t, 5, rec(2)...), ltBatch(t, 6+maxRel, rec(1)...), ltBatch(t, 7+maxRel, rec(4)...),
			ltBatch(t, 7+2*maxRel, rec(1)...)}},
		segments: []int64{0, 6 + maxRel, 7 + 2*maxRel},
	}} {
		t.Run(c.name, func(t *testing.T) {
			clock := newLtClock(ltT0)
			dir := t.TempDir()
			opts := &LogOptions{IndexIntervalBytes: 1, Clock: clock.Now}
			l := ltOpen(t, dir, opts)
			var want []ltRec
			var last AppendInfo
			for _, batches := range c.appends {
				last = ltAppend(t, l, batches...)
				for _, b := range batches {
					want = append(want, ltDecode(t, b)...)
				}
			}
			require.Equal(t, want[len(want)-1].Offset, last.LastOffset)
			require.Equal(t, c.segments, ltBases(l))
			require.Equal(t, want, ltReadAll(t, l))
			leo := l.LatestOffset()
			require.Equal(t, want[len(want)-1].Offset+1, leo)

			require.NoError(t, l.Sync(t.Context()))
			crashed := ltCopyDir(t, dir)
			require.NoError(t, l.Close())
			for _, d := range []string{crashed, dir} {
				l2 := ltOpen(t, d, opts)
				require.Equal(t, leo, l2.LatestOffset(), d)
				require.Equal(t, want, ltReadAll(t, l2), d)
				require.Equal(t, c.segments, ltBases(l2), d)
				require.NoError(t, l2.Close())
			}
		})
	}
}

// A segment refuses an append whose offsets do not fit its int32 relative
// offsets, with an error rather than the index's panic, whatever its
// caller does.
func TestSegmentAppendRejectsOffsetOverflow(t *testing.T) {
	cfg, err := resolveLogOptions(&LogOptions{IndexIntervalBytes: 1})
	require.NoError(t, err)
	var mu sync.RWMutex
	s, err := createSegment(t.TempDir(), 10, "", &cfg, &mu)
	require.NoError(t, err)
	defer s.release()
	for _, b := range [][]byte{
		ltBatch(t, 10+math.MaxInt32, ltRec{TS: ltT0, Key: "a"}, ltRec{TS: ltT0, Key: "b"}), // last offset past the range
		ltBatch(t, 9, ltRec{TS: ltT0, Key: "a"}),                                           // below the base offset
	} {
		a, err := analyzeAppend(b)
		require.NoError(t, err)
		require.Error(t, s.append(b, &a, true, nil))
		require.Zero(t, s.size, "nothing written")
	}
	for i, base := range []int64{10, 10 + math.MaxInt32 - 1} {
		b := ltBatch(t, base, ltRec{TS: ltT0, Key: "a"}, ltRec{TS: ltT0, Key: "b"})
		a, err := analyzeAppend(b)
		require.NoError(t, err)
		require.NoError(t, s.append(b, &a, true, nil), "a last offset of exactly base + MaxInt32 fits, and is indexed (%d)", i)
	}
	require.Equal(t, 1, s.off.n)
	require.NoError(t, s.finish(true))
}

// TestCreateLog: a log created at an offset starts there: its first
// segment is named after it, and appends below it are refused.
func TestCreateLog(t *testing.T) {
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "p-0")
	l, err := CreateLog(ctx, dir, 1000, nil)
	require.NoError(t, err)
	require.Equal(t, int64(1000), l.EarliestOffset())
	require.Equal(t, int64(1000), l.LatestOffset())
	require.Equal(t, int64(1000), l.Segments()[0].BaseOffset)
	b := kbatch.NewBuilder(kbatch.CodecNone)
	b.Append(1, nil, []byte("v"))
	raw, err := b.Build(nil)
	require.NoError(t, err)
	_, err = l.Append(ctx, raw) // base offset 0
	require.ErrorIs(t, err, ErrOffsetsOutOfOrder)
	kbatch.Batch(raw).SetBaseOffset(1000)
	_, err = l.Append(ctx, raw)
	require.NoError(t, err)
	require.NoError(t, l.Close())
	l, err = OpenLog(ctx, dir, nil)
	require.NoError(t, err)
	require.Equal(t, int64(1000), l.EarliestOffset())
	require.Equal(t, int64(1001), l.LatestOffset())
	require.NoError(t, l.Close())
	_, err = CreateLog(ctx, dir, 5, nil)
	require.Error(t, err, "not empty")
}
