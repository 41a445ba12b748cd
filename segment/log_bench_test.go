package segment

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/diskless-go/diskless/internal/testbatch"
	"github.com/diskless-go/diskless/kbatch"
)

// BenchmarkAppend appends uncompressed batches of 1 KiB records to a Log
// with Kafka's default settings (1 GiB segments, an index entry every
// 4 KiB), beside plain file writes of the same bytes: what the Log adds to
// the write is the CRC check of every batch, the index entries (a small
// write each) and the roll rules. Neither syncs.
func BenchmarkAppend(b *testing.B) {
	for _, size := range []struct {
		name  string
		bytes int
	}{{"batch=1KiB", 1 << 10}, {"batch=16KiB", 16 << 10}, {"batch=1MiB", 1 << 20}} {
		batch := testbatch.Text(b, kbatch.CodecNone, size.bytes+1024)
		records := int64(kbatch.Batch(batch).LastOffsetDelta()) + 1
		b.Run(size.name+"/log", func(b *testing.B) {
			l, err := OpenLog(context.Background(), b.TempDir(), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			buf := slices.Clone(batch)
			ctx := context.Background()
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			off := int64(0)
			for b.Loop() {
				kbatch.Batch(buf).SetBaseOffset(off)
				if _, err := l.Append(ctx, buf); err != nil {
					b.Fatal(err)
				}
				off += records
			}
		})
		b.Run(size.name+"/file", func(b *testing.B) {
			// The same bytes written to plain files that roll at 1 GiB as
			// the log's segments do: the page cache writes back the same
			// amount either way.
			dir := b.TempDir()
			var f *os.File
			defer func() {
				if f != nil {
					f.Close()
				}
			}()
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			written, files := kbatch.DefaultSegmentBytes, 0
			for b.Loop() {
				if written+len(batch) > kbatch.DefaultSegmentBytes {
					if f != nil {
						if err := f.Close(); err != nil {
							b.Fatal(err)
						}
					}
					var err error
					if f, err = os.Create(filepath.Join(dir, fmt.Sprint(files))); err != nil {
						b.Fatal(err)
					}
					files++
					written = 0
				}
				if _, err := f.Write(batch); err != nil {
					b.Fatal(err)
				}
				written += len(batch)
			}
		})
	}
}

// benchReadSegment writes the 256 MiB segment BenchmarkRead reads: 16 KiB
// batches, Kafka's default index interval, rolled so it is inactive. It
// returns the log and the segment's last offset.
func benchReadSegment(b *testing.B) (*Log, int64) {
	l, err := OpenLog(context.Background(), b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	batch := testbatch.Text(b, kbatch.CodecNone, 16<<10)
	records := int64(kbatch.Batch(batch).LastOffsetDelta()) + 1
	off := int64(0)
	for l.Size() < 256<<20 {
		kbatch.Batch(batch).SetBaseOffset(off)
		if _, err := l.Append(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
		off += records
	}
	if err := l.Roll(context.Background()); err != nil {
		b.Fatal(err)
	}
	return l, off - 1
}

// BenchmarkRead reads the last offset of a 256 MiB segment (16 KiB
// batches): through the offset index (a binary search of ~16 000 entries
// and a scan of at most 4 KiB), through the index as it is after a reopen
// (whose entries are checked where they land: one more batch read and
// CRC), and by a linear scan of the same segment from its start (what a
// read costs without an index: the same code with an empty index). Each
// returns the same 16 KiB batch. Target: the index at least 100 times
// faster than the scan.
func BenchmarkRead(b *testing.B) {
	l, last := benchReadSegment(b)
	l.mu.RLock()
	seg := l.mu.segs[0]
	v := seg.view()
	l.mu.RUnlock()
	if v.size < 256<<20 {
		b.Fatalf("segment of %d bytes", v.size)
	}
	for _, c := range []struct {
		name string
		view func() segView
	}{
		{"index", func() segView { return v }},
		{"index-after-reopen", func() segView { u := v; u.trusted = false; return u }},
		{"linear-scan", func() segView { u := v; u.off.n = 0; return u }},
	} {
		b.Run(c.name, func(b *testing.B) {
			view := c.view()
			b.ReportAllocs()
			for b.Loop() {
				recs, found, err := view.read(last, 1)
				if err != nil || !found || kbatch.Batch(recs).LastOffset() != last {
					b.Fatalf("read %d: %v %v", last, found, err)
				}
			}
		})
	}
	b.Run("Log.Read", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := l.Read(context.Background(), last, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchCompactTemplate writes a compacted-topic log of about 64 MiB: 1 KiB
// records of text (a 12-byte key, a 1000-byte value) in batches of 16, over
// 16 MiB segments, with 20 000 keys in random order, so that most records
// are superseded; the last segment is rolled so everything is cleanable.
func benchCompactTemplate(b *testing.B, dir string, codec kbatch.Codec) int64 {
	l, err := OpenLog(context.Background(), dir, &LogOptions{SegmentBytes: 16 << 20, CleanupPolicy: CleanupCompact, Clock: newLtClock(ltT0).Now})
	if err != nil {
		b.Fatal(err)
	}
	rng := uint64(1)
	next := func() uint64 {
		rng = rng*6364136223846793005 + 1442695040888963407
		return rng >> 33
	}
	words := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"}
	value := make([]byte, 0, 1024)
	off := int64(0)
	for l.Size() < 64<<20 {
		bld := kbatch.NewBuilder(codec)
		bld.SetBaseOffset(off)
		for i := 0; i < 16; i++ {
			value = value[:0]
			for len(value) < 1000 {
				value = append(value, words[next()%uint64(len(words))]...)
				value = append(value, ' ')
			}
			bld.Append(ltT0+off, fmt.Appendf(nil, "key-%08d", next()%20000), value[:1000])
			off++
		}
		batch, err := bld.Build(nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := l.Append(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Roll(context.Background()); err != nil {
		b.Fatal(err)
	}
	size := l.Size()
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	return size
}

func benchCopyDir(b *testing.B, src, dst string) {
	ents, err := os.ReadDir(src)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range ents {
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			b.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dst, e.Name()))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			b.Fatal(err)
		}
		in.Close()
		out.Close()
	}
}

// BenchmarkCompact cleans a fresh copy of a 64 MiB dirty log each
// iteration (the copy and the open are not timed): build the key map,
// recopy every segment, swap the cleaned ones in. Bytes per second are of
// the log read.
func BenchmarkCompact(b *testing.B) {
	for _, codec := range []kbatch.Codec{kbatch.CodecNone, kbatch.CodecLZ4} {
		b.Run("codec="+codec.String(), func(b *testing.B) {
			template := b.TempDir()
			size := benchCompactTemplate(b, template, codec)
			opts := &LogOptions{SegmentBytes: 16 << 20, CleanupPolicy: CleanupCompact, Clock: newLtClock(ltT0).Now}
			b.SetBytes(size)
			b.ReportAllocs()
			var written int64
			for b.Loop() {
				b.StopTimer()
				dir, err := os.MkdirTemp(b.TempDir(), "c")
				if err != nil {
					b.Fatal(err)
				}
				benchCopyDir(b, template, dir)
				l, err := OpenLog(context.Background(), dir, opts)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				res, err := l.Compact(context.Background())
				if err != nil || !res.Cleaned {
					b.Fatalf("compact: %+v %v", res, err)
				}
				b.StopTimer()
				written = res.BytesWritten
				if err := l.Close(); err != nil {
					b.Fatal(err)
				}
				if err := os.RemoveAll(dir); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(written)/float64(size), "kept-ratio")
		})
	}
}
