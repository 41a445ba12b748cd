package segment

// Helpers of the Log tests (log_*_test.go, cleaner_test.go, ...).

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/internal/fakeclock"
	"github.com/diskless-go/diskless/kbatch"
)

// ltT0 is the record time the Log tests start at.
const ltT0 = int64(1_700_000_000_000)

// newLtClock returns a manual clock reading ms (Unix milliseconds).
func newLtClock(ms int64) *fakeclock.Clock { return fakeclock.New(time.UnixMilli(ms)) }

// ltRec is a record as the tests append and read it. A nil value is a
// tombstone.
type ltRec struct {
	Offset int64
	TS     int64
	Key    string
	Value  []byte
}

func (r ltRec) String() string {
	v := "<nil>"
	if r.Value != nil {
		v = string(r.Value)
	}
	return fmt.Sprintf("%d@%d %s=%s", r.Offset, r.TS, r.Key, v)
}

// ltBatch builds an uncompressed batch at base whose records take offset
// deltas 0, 1, 2, ...
func ltBatch(t testing.TB, base int64, recs ...ltRec) []byte {
	return ltBatchCodec(t, kbatch.CodecNone, base, recs...)
}

func ltBatchCodec(t testing.TB, codec kbatch.Codec, base int64, recs ...ltRec) []byte {
	t.Helper()
	b := kbatch.NewBuilder(codec)
	b.SetBaseOffset(base)
	b.SetPartitionLeaderEpoch(3)
	for _, r := range recs {
		var key []byte
		if r.Key != "" {
			key = []byte(r.Key)
		}
		b.Append(r.TS, key, r.Value)
	}
	out, err := b.Build(nil)
	require.NoError(t, err)
	return out
}

// ltKV returns n records with keys from keyOf and values "v<offset>".
func ltKV(first int64, n int, ts int64, keyOf func(off int64) string) []ltRec {
	recs := make([]ltRec, n)
	for i := range recs {
		off := first + int64(i)
		recs[i] = ltRec{Offset: off, TS: ts + int64(i), Key: keyOf(off), Value: fmt.Appendf(nil, "v%d", off)}
	}
	return recs
}

// ltDecode returns the records of the batches in data.
func ltDecode(t testing.TB, data []byte) []ltRec {
	t.Helper()
	var out []ltRec
	it := kbatch.NewBatchIter(data)
	var rr kbatch.RecordReader
	for it.Next() {
		b := it.Batch()
		require.NoError(t, b.CheckCRC())
		require.NoError(t, rr.Reset(b))
		for rr.Next() {
			r := rr.Record()
			rec := ltRec{Offset: r.Offset, TS: r.Timestamp, Key: string(r.Key)}
			if r.Value != nil {
				rec.Value = append([]byte{}, r.Value...)
			}
			out = append(out, rec)
		}
		require.NoError(t, rr.Err())
	}
	require.NoError(t, it.Err())
	require.False(t, it.Partial())
	return out
}

// ltOptions are small settings for tests: 4 KiB segments, an index entry
// every 256 bytes, the given clock.
func ltOptions(clock *fakeclock.Clock) *LogOptions {
	return &LogOptions{
		SegmentBytes:       4096,
		IndexIntervalBytes: 256,
		RetentionTime:      -1,
		Clock:              clock.Now,
	}
}

func ltOpen(t testing.TB, dir string, opts *LogOptions) *Log {
	t.Helper()
	l, err := OpenLog(context.Background(), dir, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func ltAppend(t testing.TB, l *Log, batches ...[]byte) AppendInfo {
	t.Helper()
	var all []byte
	for _, b := range batches {
		all = append(all, b...)
	}
	info, err := l.Append(context.Background(), all)
	require.NoError(t, err)
	return info
}

// ltReadAll reads the log from its start to its end, batch by batch, and
// returns its records (those at or after the log start offset).
func ltReadAll(t testing.TB, l *Log) []ltRec {
	t.Helper()
	ctx := context.Background()
	var out []ltRec
	off := l.EarliestOffset()
	for {
		res, err := l.Read(ctx, off, 1)
		require.NoError(t, err)
		if len(res.Records) == 0 {
			// The log end offset, or a gap before it with no batch after
			// (an empty last segment).
			require.LessOrEqual(t, off, res.LogEndOffset)
			return out
		}
		b, err := kbatch.ParseBatch(res.Records)
		require.NoError(t, err)
		require.Equal(t, len(res.Records), b.Size(), "maxBytes 1 returns exactly one batch")
		require.GreaterOrEqual(t, b.LastOffset(), off)
		for _, r := range ltDecode(t, res.Records) {
			if r.Offset >= off {
				out = append(out, r)
			}
		}
		off = b.NextOffset()
	}
}

// ltFiles returns the names of the files in dir, sorted.
func ltFiles(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// ltCopyDir copies the regular files of src into a new directory, as a
// crash would leave them (the page cache survives a process crash).
func ltCopyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		in, err := os.Open(filepath.Join(src, e.Name()))
		require.NoError(t, err)
		out, err := os.Create(filepath.Join(dst, e.Name()))
		require.NoError(t, err)
		_, err = io.Copy(out, in)
		require.NoError(t, err)
		require.NoError(t, in.Close())
		require.NoError(t, out.Close())
	}
	return dst
}

func ltReadFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

func ltSegPath(dir string, base int64, ext string) string { return segmentPath(dir, base, ext, "") }
