package segment

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kbatch"
)

// TestIndexBytesByHand appends a known sequence and checks the .index and
// .timeindex bytes against entries derived by hand from Kafka's rules
// (docs/formats.md, "Offset index", "Time index"; LogSegment.append, LogSegment.recover).
//
// Every batch is 89 bytes: one record with key "k" and a 20-byte value
// (record: length 1 + attributes 1 + timestamp delta 1 + offset delta 1 +
// key length 1 + key 1 + value length 1 + value 20 + header count 1 = 28,
// after the 61-byte header). index.interval.bytes is 100. T = 1.7e12.
//
//	append  offsets        pos  bytes since entry   entry?       max ts so far   time entry
//	A1      0    (T+10)      0    0                  no (first)   T+10 @0
//	A2      1    (T+5)      89   89                  no           T+10 @0
//	A3      2 (T+30), 3 (T+20)
//	                       178  178 > 100            (3, 178)     T+30 @2         (T+30, 2)
//	A4      10   (T+25)    356  178 > 100            (10, 356)    T+30 @2         no: not > T+30
//	A5      11   (T+40)    445   89                  no           T+40 @11
//	A6      12   (T+35)    534  178 > 100            (12, 534)    T+40 @11        (T+40, 11)
//	roll: the final time entry (T+40, 11) is not newer than the last: none
//	A7      13   (T+50)    623  (new segment 13: first append, no entry)
//
// A3 is one append of two batches: its entry maps its last offset, 3, to
// its start, 178; the time entry holds the last offset of the batch that
// carried the max timestamp, 2. Segment 13 closes with the final time
// entry (T+50, 13).
//
// Rebuilt from the .log (recovery, per batch: A3's batches are at 178 and
// 267), the first entry becomes (2, 178) instead.
func TestIndexBytesByHand(t *testing.T) {
	const T = ltT0 // 0x18bcfe56800
	rec := func(ts int64) ltRec { return ltRec{TS: ts, Key: "k", Value: []byte("01234567890123456789")} }
	dir := t.TempDir()
	opts := &LogOptions{IndexIntervalBytes: 100, SegmentBytes: 89 * 7, Clock: newLtClock(T).Now}
	l := ltOpen(t, dir, opts)
	b0 := ltBatch(t, 0, rec(T+10))
	require.Len(t, b0, 89)
	ltAppend(t, l, b0)
	ltAppend(t, l, ltBatch(t, 1, rec(T+5)))
	ltAppend(t, l, ltBatch(t, 2, rec(T+30)), ltBatch(t, 3, rec(T+20)))
	ltAppend(t, l, ltBatch(t, 10, rec(T+25)))
	ltAppend(t, l, ltBatch(t, 11, rec(T+40)))
	ltAppend(t, l, ltBatch(t, 12, rec(T+35)))
	ltAppend(t, l, ltBatch(t, 13, rec(T+50))) // 623 + 89 > 7*89: rolls
	require.Equal(t, []int64{0, 13}, ltBases(l))

	wantIndex := unhex(t, `
		00000003 000000b2
		0000000a 00000164
		0000000c 00000216`)
	wantTime := unhex(t, `
		0000018bcfe5681e 00000002
		0000018bcfe56828 0000000b`)
	require.Equal(t, wantIndex, ltReadFile(t, ltSegPath(dir, 0, indexFileExt)))
	require.Equal(t, wantTime, ltReadFile(t, ltSegPath(dir, 0, timeIndexFileExt)))
	require.Empty(t, ltReadFile(t, ltSegPath(dir, 13, indexFileExt)))
	require.Empty(t, ltReadFile(t, ltSegPath(dir, 13, timeIndexFileExt)), "the active segment has no time entry yet")
	require.NoError(t, l.Close())
	require.Equal(t, unhex(t, "0000018bcfe56832 00000000"), ltReadFile(t, ltSegPath(dir, 13, timeIndexFileExt)), "close adds the final entry")

	// Reopened cleanly, the files are trusted and kept.
	l = ltOpen(t, dir, opts)
	require.NoError(t, l.Close())
	require.Equal(t, wantIndex, ltReadFile(t, ltSegPath(dir, 0, indexFileExt)))
	require.Equal(t, wantTime, ltReadFile(t, ltSegPath(dir, 0, timeIndexFileExt)))

	// Rebuilt from the log, one entry per batch.
	require.NoError(t, os.Remove(ltSegPath(dir, 0, indexFileExt)))
	require.NoError(t, os.Remove(ltSegPath(dir, 0, timeIndexFileExt)))
	l = ltOpen(t, dir, opts)
	require.NoError(t, l.Close())
	require.Equal(t, unhex(t, `
		00000002 000000b2
		0000000a 00000164
		0000000c 00000216`), ltReadFile(t, ltSegPath(dir, 0, indexFileExt)))
	require.Equal(t, wantTime, ltReadFile(t, ltSegPath(dir, 0, timeIndexFileExt)))
}

func TestIndexLookups(t *testing.T) {
	off := indexView{mem: unhex(t, "00000003 000000b2 0000000a 00000164 0000000c 00000216"), n: 3, entrySize: offsetIndexEntrySize}
	for _, c := range []struct {
		target int64
		want   offsetPosition
	}{
		{100, offsetPosition{offset: 100}},
		{102, offsetPosition{offset: 100}},
		{103, offsetPosition{offset: 103, position: 178, found: true}},
		{109, offsetPosition{offset: 103, position: 178, found: true}},
		{110, offsetPosition{offset: 110, position: 356, found: true}},
		{112, offsetPosition{offset: 112, position: 534, found: true}},
		{1 << 40, offsetPosition{offset: 112, position: 534, found: true}},
	} {
		got, err := off.lookupOffset(100, c.target)
		require.NoError(t, err)
		require.Equal(t, c.want, got, "target %d", c.target)
	}
	tim := indexView{mem: unhex(t, "0000000000000064 00000002 00000000000000c8 0000000b"), n: 2, entrySize: timeIndexEntrySize}
	for _, c := range []struct {
		target int64
		want   timestampOffset
	}{
		{0, timestampOffset{kbatch.NoTimestamp, 100, false}},
		{99, timestampOffset{kbatch.NoTimestamp, 100, false}},
		{100, timestampOffset{100, 102, true}},
		{199, timestampOffset{100, 102, true}},
		{200, timestampOffset{200, 111, true}},
		{1 << 50, timestampOffset{200, 111, true}},
	} {
		got, err := tim.lookupTime(100, c.target)
		require.NoError(t, err)
		require.Equal(t, c.want, got, "target %d", c.target)
	}

	_, err := checkOffsetIndex(unhex(t, "00000003 000000b2 00000003 00000164"), 100, 1000)
	require.Error(t, err, "offsets must increase")
	_, err = checkOffsetIndex(unhex(t, "00000003 000000b2 00000004 000000b2"), 100, 1000)
	require.Error(t, err, "positions must increase")
	_, err = checkOffsetIndex(unhex(t, "00000003 000003e8"), 100, 1000)
	require.Error(t, err, "positions within the log")
	_, err = checkOffsetIndex(unhex(t, "ffffffff 00000001"), 100, 1000)
	require.Error(t, err, "relative offsets are not negative")
	_, err = checkOffsetIndex(unhex(t, "00000003 000000"), 100, 1000)
	require.Error(t, err, "whole entries")
	_, err = checkTimeIndex(unhex(t, "00000000000000c8 00000002 0000000000000064 00000003"), 100, 1000)
	require.Error(t, err, "timestamps must not go back")
	_, err = checkTimeIndex(unhex(t, "0000000000000064 00000005"), 100, 104)
	require.Error(t, err, "offsets within the segment")
}

// TestIndexIntervalBoundary pins Kafka's "more than index.interval.bytes"
// (LogSegment.append and LogSegment.recover): with 89-byte batches and an
// interval of 178, the append that finds exactly 178 bytes since the last
// entry gets none; the next one, at 267, does.
//
//	append  offset (ts)   pos  bytes since entry  entry?
//	A0      0 (T)           0    0                no (first)
//	A1      1 (T+1)        89   89                no
//	A2      2 (T+2)       178  178                no: not more than 178
//	A3      3 (T+3)       267  267                (3, 267), time (T+3, 3)
//	A4      4 (T+4)       356   89                no
//	A5      5 (T+5)       445  178                no: not more than 178
//	A6      6 (T+6)       534  267                (6, 534), time (T+6, 6)
//
// Close adds no time entry: T+6 is the last one's. Rebuilt from the log,
// per batch, the entries are the same.
func TestIndexIntervalBoundary(t *testing.T) {
	const T = ltT0
	rec := func(ts int64) ltRec { return ltRec{TS: ts, Key: "k", Value: []byte("01234567890123456789")} }
	dir := t.TempDir()
	opts := &LogOptions{IndexIntervalBytes: 2 * 89, Clock: newLtClock(T).Now}
	l := ltOpen(t, dir, opts)
	for i := int64(0); i < 7; i++ {
		b := ltBatch(t, i, rec(T+i))
		require.Len(t, b, 89)
		ltAppend(t, l, b)
	}
	require.NoError(t, l.Close())
	wantIndex := unhex(t, `
		00000003 0000010b
		00000006 00000216`)
	wantTime := unhex(t, `
		0000018bcfe56803 00000003
		0000018bcfe56806 00000006`)
	require.Equal(t, wantIndex, ltReadFile(t, ltSegPath(dir, 0, indexFileExt)))
	require.Equal(t, wantTime, ltReadFile(t, ltSegPath(dir, 0, timeIndexFileExt)))

	require.NoError(t, os.Remove(ltSegPath(dir, 0, indexFileExt)))
	require.NoError(t, os.Remove(ltSegPath(dir, 0, timeIndexFileExt)))
	l = ltOpen(t, dir, opts)
	require.NoError(t, l.Close())
	require.Equal(t, wantIndex, ltReadFile(t, ltSegPath(dir, 0, indexFileExt)), "rebuilt by recovery")
	require.Equal(t, wantTime, ltReadFile(t, ltSegPath(dir, 0, timeIndexFileExt)), "rebuilt by recovery")
}
