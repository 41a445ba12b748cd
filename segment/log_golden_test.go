package segment

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/internal/fakeclock"
	"github.com/diskless-go/diskless/kbatch"
)

// go test ./segment -run TestGoldenLog -update-golden rewrites
// testdata/log-golden and testdata/log-golden.txt.
var updateGolden = flag.Bool("update-golden", false, "rewrite the golden log directory in testdata")

const goldenDir = "testdata/log-golden"

// goldenLogOptions are the settings the golden log is written with.
func goldenLogOptions(clock *fakeclock.Clock) *LogOptions {
	return &LogOptions{
		SegmentBytes:           1024,
		IndexIntervalBytes:     200,
		CleanupPolicy:          CleanupCompact,
		MinCleanableDirtyRatio: -1,
		DeleteRetention:        time.Hour,
		Clock:                  clock.Now,
	}
}

// writeGoldenLog writes the golden log into dir: keyed records with
// headers and tombstones, a multi-batch append, an offset gap, an
// idempotent producer's batch, a transaction marker, size rolls, a clean
// (with a delete horizon) and DeleteRecords. Everything is uncompressed so
// the bytes depend on no compressor's version.
func writeGoldenLog(t testing.TB, dir string) {
	ctx := context.Background()
	clock := newLtClock(ltT0)
	l, err := OpenLog(ctx, dir, goldenLogOptions(clock))
	require.NoError(t, err)
	build := func(base int64, n int, pid int64) []byte {
		b := kbatch.NewBuilder(kbatch.CodecNone)
		b.SetBaseOffset(base)
		b.SetPartitionLeaderEpoch(int32(base / 20))
		if pid >= 0 {
			b.SetProducer(pid, 0, int32(base))
		}
		for i := 0; i < n; i++ {
			off := base + int64(i)
			key := []byte(fmt.Sprintf("user-%d", off%20))
			var value []byte
			if off%7 != 6 {
				value = []byte(fmt.Sprintf("profile-%d", off))
			}
			var hs []kbatch.Header
			if off%3 == 0 {
				hs = append(hs, kbatch.Header{Key: "trace", Value: []byte(fmt.Sprint(off))})
			}
			b.Append(ltT0+off*1000, key, value, hs...)
		}
		out, err := b.Build(nil)
		require.NoError(t, err)
		return out
	}
	off := int64(0)
	appendAt := func(bs ...[]byte) {
		var all []byte
		for _, b := range bs {
			all = append(all, b...)
		}
		_, err := l.Append(ctx, all)
		require.NoError(t, err)
		off = l.LatestOffset()
	}
	for i := 0; i < 12; i++ {
		appendAt(build(off, 1+i%3, -1))
	}
	appendAt(build(off, 2, -1), build(off+2, 3, -1)) // two batches, one append
	off += 10                                        // a gap
	appendAt(build(off, 2, 42))
	marker := kbatch.AppendEndTxnMarker(nil, kbatch.EndTxnMarker{Commit: true, ProducerID: 43, ProducerEpoch: 1, CoordinatorEpoch: 2, Timestamp: ltT0 + off*1000})
	kbatch.Batch(marker).SetBaseOffset(off)
	appendAt(marker)
	for i := 0; i < 6; i++ {
		appendAt(build(off, 2, -1))
	}
	require.NoError(t, l.Roll(ctx))
	clock.Set(time.UnixMilli(ltT0 + 100_000))
	res, err := l.Compact(ctx)
	require.NoError(t, err)
	require.True(t, res.Cleaned)
	for i := 0; i < 4; i++ {
		appendAt(build(off, 2, -1))
	}
	_, err = l.DeleteRecords(ctx, 3)
	require.NoError(t, err)
	require.NoError(t, l.Close())
}

// describeLogDir prints a partition directory as text: every file, every
// batch and record of the .log files, every index entry and checkpoint.
func describeLogDir(t testing.TB, dir string) string {
	var sb strings.Builder
	for _, name := range ltFiles(t, dir) {
		data := ltReadFile(t, filepath.Join(dir, name))
		fmt.Fprintf(&sb, "== %s (%d bytes)\n", name, len(data))
		base, ext, _, ok := parseSegmentName(name)
		switch {
		case !ok:
			fmt.Fprintf(&sb, "%q\n", data)
		case ext == logFileExt:
			it := kbatch.NewBatchIter(data)
			var rr kbatch.RecordReader
			for it.Next() {
				b := it.Batch()
				fmt.Fprintf(&sb, "batch @%d: offsets %d-%d size %d ple %d attrs 0x%02x crc %08x baseTs %d maxTs %d pid %d epoch %d seq %d count %d\n",
					it.Pos(), b.BaseOffset(), b.LastOffset(), b.Size(), b.PartitionLeaderEpoch(), uint16(b.Attributes()), b.CRC(),
					b.BaseTimestamp(), b.MaxTimestamp(), b.ProducerID(), b.ProducerEpoch(), b.BaseSequence(), b.NumRecords())
				require.NoError(t, rr.Reset(b))
				for rr.Next() {
					r := rr.Record()
					v := "null"
					if r.Value != nil {
						v = fmt.Sprintf("%q", r.Value)
					}
					fmt.Fprintf(&sb, "  record %d ts %d key %q value %s", r.Offset, r.Timestamp, r.Key, v)
					for _, h := range r.AppendHeaders(nil) {
						fmt.Fprintf(&sb, " header %s=%q", h.Key, h.Value)
					}
					sb.WriteString("\n")
				}
				require.NoError(t, rr.Err())
			}
			require.NoError(t, it.Err())
		case ext == indexFileExt:
			for i := 0; i+offsetIndexEntrySize <= len(data); i += offsetIndexEntrySize {
				e := decodeOffsetEntry(data[i:], base)
				fmt.Fprintf(&sb, "offset %d (relative %d) -> position %d\n", e.offset, e.offset-base, e.position)
			}
		case ext == timeIndexFileExt:
			for i := 0; i+timeIndexEntrySize <= len(data); i += timeIndexEntrySize {
				fmt.Fprintf(&sb, "timestamp %d -> offset %d (relative %d)\n", int64(binary.BigEndian.Uint64(data[i:])), decodeTimeEntry(data[i:], base).offset, int32(binary.BigEndian.Uint32(data[i+8:])))
			}
		}
	}
	return sb.String()
}

// TestGoldenLog writes the golden log afresh and requires the same files
// byte for byte as testdata/log-golden; then opens a copy of the committed
// directory and reads every batch back.
func TestGoldenLog(t *testing.T) {
	fresh := t.TempDir()
	writeGoldenLog(t, fresh)
	if *updateGolden {
		require.NoError(t, os.RemoveAll(goldenDir))
		require.NoError(t, os.MkdirAll(goldenDir, 0o755))
		for _, name := range ltFiles(t, fresh) {
			require.NoError(t, os.WriteFile(filepath.Join(goldenDir, name), ltReadFile(t, filepath.Join(fresh, name)), 0o644))
		}
		require.NoError(t, os.WriteFile(goldenDir+".txt", []byte(describeLogDir(t, goldenDir)), 0o644))
	}
	require.Equal(t, ltFiles(t, goldenDir), ltFiles(t, fresh))
	for _, name := range ltFiles(t, goldenDir) {
		require.Equal(t, ltReadFile(t, filepath.Join(goldenDir, name)), ltReadFile(t, filepath.Join(fresh, name)), name)
	}
	require.Equal(t, string(ltReadFile(t, goldenDir+".txt")), describeLogDir(t, goldenDir))

	dir := ltCopyDir(t, goldenDir)
	l := ltOpen(t, dir, goldenLogOptions(newLtClock(ltT0+100_000)))
	require.Equal(t, int64(3), l.EarliestOffset())
	require.Equal(t, int64(62), l.LatestOffset())
	got := ltReadAll(t, l)
	require.Len(t, got, 29)
	require.Equal(t, int64(14), got[0].Offset, "3 to 12 were compacted away, 13 is in a batch but superseded")
	// Below 54 (the cleaned part), one record per key.
	keys := map[string]bool{}
	for _, r := range got {
		if r.Offset < 54 {
			require.False(t, keys[r.Key], "compaction left one record per key: %v", r)
			keys[r.Key] = true
		}
	}
	// Every batch read back decodes with franz-go's kmsg too.
	for off := l.EarliestOffset(); off < l.LatestOffset(); {
		res, err := l.Read(t.Context(), off, 1<<20)
		require.NoError(t, err)
		last := kmsgCheckBatches(t, res.Records)
		off = last + 1
	}
	// Reopened, nothing changes on disk.
	require.NoError(t, l.Close())
	for _, name := range ltFiles(t, goldenDir) {
		require.Equal(t, ltReadFile(t, filepath.Join(goldenDir, name)), ltReadFile(t, filepath.Join(dir, name)), name)
	}
}
