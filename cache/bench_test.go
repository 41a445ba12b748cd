package cache

import (
	"fmt"
	"runtime"
	"testing"
)

// BenchmarkReadHit reads ranges of an object that is in memory (default
// options: 4 MiB blocks, 16 shards), at offsets that move through the
// object by an odd stride so that some reads straddle two blocks.
// op=memmove is the reference: copying the same bytes from one slice.
// op=ReadRangeInto reads into the caller's buffer (no allocation);
// -parallel does so from GOMAXPROCS goroutines (shard locks contended);
// op=ReadRange allocates the result.
func BenchmarkReadHit(b *testing.B) {
	const objSize = 8 << 20
	for _, size := range []int{1 << 10, 16 << 10, 256 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("size=%dKiB", size>>10), func(b *testing.B) {
			bucket, _ := newMemBucket(b)
			c := newCache(b, bucket, nil)
			data := content("wal/hit", objSize)
			if err := c.Put(b.Context(), "wal/hit", data); err != nil {
				b.Fatal(err)
			}
			var offs []int64
			for off := int64(0); len(offs) < 1024; off = (off + int64(size) + 4099) % int64(objSize-size) {
				offs = append(offs, off)
			}
			dst := make([]byte, size)
			b.Run("op=memmove", func(b *testing.B) {
				b.SetBytes(int64(size))
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					off := offs[i%len(offs)]
					copy(dst, data[off:off+int64(size)])
					i++
				}
			})
			b.Run("op=ReadRangeInto", func(b *testing.B) {
				b.SetBytes(int64(size))
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if err := c.ReadRangeInto(b.Context(), "wal/hit", offs[i%len(offs)], dst, nil); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
			b.Run("op=ReadRangeInto-parallel", func(b *testing.B) {
				b.SetBytes(int64(size))
				b.ReportAllocs()
				bufs := make(chan []byte, runtime.GOMAXPROCS(0))
				for range cap(bufs) {
					bufs <- make([]byte, size)
				}
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					dst := <-bufs
					defer func() { bufs <- dst }()
					i := 0
					for pb.Next() {
						if err := c.ReadRangeInto(b.Context(), "wal/hit", offs[i%len(offs)], dst, nil); err != nil {
							b.Error(err)
							return
						}
						i++
					}
				})
			})
			b.Run("op=ReadRange", func(b *testing.B) {
				b.SetBytes(int64(size))
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if _, err := c.ReadRange(b.Context(), "wal/hit", offs[i%len(offs)], int64(size)); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
			if st := c.Stats(); st.GETs != 0 || st.Misses != 0 {
				b.Fatalf("a hit benchmark missed: %+v", st)
			}
		})
	}
}

// BenchmarkTailReader: per op, the broker Puts a new 8 MiB object
// (write-through, default options) and a consumer reads it from start to
// end in 100 kB reads. The bucket is empty, so a GET would fail the
// benchmark; gets/MiB is the target metric (0).
func BenchmarkTailReader(b *testing.B) {
	const objSize = 8 << 20
	bucket, _ := newMemBucket(b)
	c := newCache(b, bucket, nil)
	data := content("wal/tail", objSize)
	dst := make([]byte, 100_000)
	b.SetBytes(objSize)
	b.ReportAllocs()
	var read int64
	i := 0
	for b.Loop() {
		read += tailRead(b, c, fmt.Sprintf("wal/tail-%08d", i), data, dst)
		i++
	}
	b.ReportMetric(getsPerMiB(c.Stats().GETs, read), "gets/MiB")
}

// BenchmarkLaggingReader: per op, a lagging consumer reads one old 8 MiB
// object from start to end in 100 kB cold reads. Four objects take turns
// and memory holds 16 MiB, so every object has been evicted by the time it
// is read again: every op misses all its blocks. gets/block is the target
// metric (at most 1); gets/MiB is 0.25 with 4 MiB blocks.
func BenchmarkLaggingReader(b *testing.B) {
	const objSize = 8 << 20
	for _, blockSize := range []int64{1 << 20, 4 << 20} {
		b.Run(fmt.Sprintf("block=%dMiB", blockSize>>20), func(b *testing.B) {
			bucket, _ := newMemBucket(b)
			keys := laggingObjects(b, bucket, 4, objSize)
			c := newCache(b, bucket, &Options{BlockSize: blockSize, MemoryBytes: 16 << 20})
			dst := make([]byte, 100_000)
			b.SetBytes(objSize)
			b.ReportAllocs()
			var read int64
			i := 0
			for b.Loop() {
				read += readThrough(b, c, keys[i%len(keys)], objSize, dst, ClassCold)
				i++
			}
			st := c.Stats()
			b.ReportMetric(getsPerMiB(st.GETs, read), "gets/MiB")
			b.ReportMetric(float64(st.GETs)/float64(read/blockSize), "gets/block")
		})
	}
}
