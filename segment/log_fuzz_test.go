package segment

// Fuzz targets for the Log's parsing of its files: FuzzLogRecovery (a .log
// file of any content, opened after a crash or a clean shutdown) and
// FuzzIndex (.index and .timeindex files of any content beside a valid
// log). Their seeds run under plain `go test`; `make fuzz` fuzzes them.

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kbatch"
)

// refValidBatches is refValidPrefix's walk, returning the batches whole.
func refValidBatches(t testing.TB, dir string) [][]byte {
	t.Helper()
	var bases []int64
	for _, name := range ltFiles(t, dir) {
		if base, ext, suffix, ok := parseSegmentName(name); ok && ext == logFileExt && suffix == "" {
			bases = append(bases, base)
		}
	}
	slices.Sort(bases)
	var out [][]byte
	for i, base := range bases {
		next := int64(math.MaxInt64)
		if i+1 < len(bases) {
			next = bases[i+1]
		}
		it := kbatch.NewBatchIter(ltReadFile(t, ltSegPath(dir, base, logFileExt)))
		prevNext := base
		for it.Next() {
			b := it.Batch()
			if b.CheckCRC() != nil || b.BaseOffset() < prevNext || b.LastOffsetDelta() < 0 ||
				b.BaseOffset() > math.MaxInt64-1-int64(b.LastOffsetDelta()) ||
				b.LastOffset() >= next || b.LastOffset()-base > math.MaxInt32 {
				return out
			}
			out = append(out, slices.Clone([]byte(b)))
			prevNext = b.NextOffset()
		}
		if it.Err() != nil || it.Partial() {
			return out
		}
	}
	return out
}

// ltReadBatches reads the log's batches one by one from its start.
func ltReadBatches(t testing.TB, l *Log) [][]byte {
	t.Helper()
	var out [][]byte
	for off := l.EarliestOffset(); ; {
		res, err := l.Read(context.Background(), off, 1)
		require.NoError(t, err)
		if len(res.Records) == 0 {
			return out
		}
		b, err := kbatch.ParseBatch(res.Records)
		require.NoError(t, err)
		require.Equal(t, len(b), len(res.Records))
		out = append(out, res.Records)
		off = b.NextOffset()
	}
}

// fuzzLogSeeds returns .log contents: a valid log in several codecs with
// gaps, cut at several places, and with a corrupt batch inside.
func fuzzLogSeeds(t testing.TB) [][]byte {
	var valid []byte
	off := int64(0)
	for i := 0; i < 8; i++ {
		recs := ltKV(off, 1+i%3, ltT0+off, ltKey)
		if i == 5 {
			recs[0].Value = nil
		}
		valid = append(valid, ltBatchCodec(t, kbatch.Codecs[i%5], off, recs...)...)
		off += int64(len(recs)) + int64(i%2)
	}
	marker := kbatch.AppendEndTxnMarker(nil, kbatch.EndTxnMarker{ProducerID: 1, Timestamp: ltT0})
	kbatch.Batch(marker).SetBaseOffset(off)
	valid = append(valid, marker...)
	corrupt := slices.Clone(valid)
	corrupt[len(corrupt)/2] ^= 0xff
	return [][]byte{valid, valid[:len(valid)-1], valid[:100], valid[:12], corrupt, {}, []byte("not a log at all")}
}

// FuzzLogRecovery opens a log whose one .log file holds the input, after
// a crash (no marker: every batch is checked) or after a clean shutdown
// with empty index files (the tail is scanned, and a bad one recovered).
// OpenLog must not fail or panic, the log must hold exactly the longest
// valid prefix, and take appends after it.
func FuzzLogRecovery(f *testing.F) {
	for _, s := range fuzzLogSeeds(f) {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, clean bool) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(ltSegPath(dir, 0, logFileExt), data, 0o644))
		if clean {
			for _, ext := range []string{indexFileExt, timeIndexFileExt} {
				require.NoError(t, os.WriteFile(ltSegPath(dir, 0, ext), nil, 0o644))
			}
			require.NoError(t, writeCleanShutdown(dir))
		}
		want := refValidBatches(t, dir)
		l, err := OpenLog(t.Context(), dir, &LogOptions{IndexIntervalBytes: 100, Clock: newLtClock(ltT0).Now})
		require.NoError(t, err)
		defer l.Close()
		got := ltReadBatches(t, l)
		if len(want) == 0 {
			want = nil
		}
		require.Equal(t, want, got)
		var size int64
		for _, b := range want {
			size += int64(len(b))
		}
		require.Equal(t, size, l.Size())
		next := l.LatestOffset()
		if len(want) > 0 {
			require.Equal(t, kbatch.Batch(want[len(want)-1]).NextOffset(), next)
		}
		if next < math.MaxInt64-10 {
			ltAppend(t, l, ltBatch(t, next, ltRec{TS: ltT0, Key: "after"}))
			got = ltReadBatches(t, l)
			require.Equal(t, next, kbatch.Batch(got[len(got)-1]).BaseOffset())
		}
	})
}

// fuzzIndexBase writes the log FuzzIndex damages the indexes of: three
// segments, closed cleanly.
func fuzzIndexBase(t testing.TB, dir string) [][]byte {
	l, err := OpenLog(context.Background(), dir, &LogOptions{SegmentBytes: 1024, IndexIntervalBytes: 100, Clock: newLtClock(ltT0).Now})
	require.NoError(t, err)
	for i := int64(0); i < 30; i++ {
		off := l.LatestOffset() + i%2
		ltAppend(t, l, ltBatch(t, off, ltKV(off, int(1+i%3), ltT0+off*10-(i%4)*7, ltKey)...))
	}
	require.Len(t, l.Segments(), 3)
	batches := ltReadBatches(t, l)
	require.NoError(t, l.Close())
	return batches
}

// FuzzIndex opens a cleanly closed log whose index files of one segment
// hold the input. OpenLog must not fail or panic; reads must return
// exactly the log's batches for every offset, whatever the index says
// (a wrong one is rebuilt on open, or caught where a lookup lands), and
// timestamp lookups must not fail.
func FuzzIndex(f *testing.F) {
	base := f.TempDir()
	batches := fuzzIndexBase(f, base)
	var bases []int64
	for _, name := range ltFiles(f, base) {
		if b, ext, _, ok := parseSegmentName(name); ok && ext == logFileExt {
			bases = append(bases, b)
		}
	}
	for i, b := range bases {
		off := ltReadFile(f, ltSegPath(base, b, indexFileExt))
		tim := ltReadFile(f, ltSegPath(base, b, timeIndexFileExt))
		f.Add(uint8(i), off, tim)
		if len(off) >= 8 {
			f.Add(uint8(i), off[:len(off)-8], tim)
			f.Add(uint8(i), append(slices.Clone(off[8:]), off[:8]...), tim)
		}
		if len(tim) >= 12 {
			f.Add(uint8(i), off, tim[:len(tim)-12])
		}
		f.Add(uint8(i), []byte{0, 0, 0, 1, 0, 0, 0, 5}, []byte{0, 0, 1, 0x8b, 0xcf, 0xe5, 0x68, 0, 0, 0, 0, 1})
	}
	f.Fuzz(func(t *testing.T, sel uint8, off, tim []byte) {
		dir := ltCopyDir(t, base)
		b := bases[int(sel)%len(bases)]
		require.NoError(t, os.WriteFile(ltSegPath(dir, b, indexFileExt), off, 0o644))
		require.NoError(t, os.WriteFile(ltSegPath(dir, b, timeIndexFileExt), tim, 0o644))
		l, err := OpenLog(t.Context(), dir, &LogOptions{SegmentBytes: 1024, IndexIntervalBytes: 100, Clock: newLtClock(ltT0).Now})
		require.NoError(t, err)
		defer l.Close()
		require.Equal(t, batches, ltReadBatches(t, l))
		for _, want := range batches {
			wb := kbatch.Batch(want)
			for o := wb.BaseOffset(); o <= wb.LastOffset(); o++ {
				res, err := l.Read(t.Context(), o, 1)
				require.NoError(t, err)
				require.Equal(t, want, res.Records, "offset %d", o)
			}
		}
		for _, ts := range []int64{0, ltT0, ltT0 + 100, ltT0 + 333, ltT0 + 10_000} {
			got, found, err := l.OffsetForTimestamp(t.Context(), ts)
			require.NoError(t, err)
			if found {
				require.GreaterOrEqual(t, got.Timestamp, ts)
			}
		}
	})
}

// TestWriteFuzzSeeds writes the seeds of the fuzz targets to
// testdata/fuzz, with -update-golden.
func TestWriteFuzzSeeds(t *testing.T) {
	if !*updateGolden {
		t.Skip("only with -update-golden")
	}
	write := func(target, name string, args ...string) {
		dir := filepath.Join("testdata", "fuzz", target)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		content := "go test fuzz v1\n" + strings.Join(args, "\n") + "\n"
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	for i, s := range fuzzLogSeeds(t) {
		write("FuzzLogRecovery", fmt.Sprintf("seed-%d", i), "[]byte("+strconv.Quote(string(s))+")", "bool(true)")
	}
	base := t.TempDir()
	fuzzIndexBase(t, base)
	write("FuzzIndex", "seed-0", "byte('\\x00')",
		"[]byte("+strconv.Quote(string(ltReadFile(t, ltSegPath(base, 0, indexFileExt))))+")",
		"[]byte("+strconv.Quote(string(ltReadFile(t, ltSegPath(base, 0, timeIndexFileExt))))+")")
}
