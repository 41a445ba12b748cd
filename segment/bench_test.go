package segment

import (
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"
	"time"
)

// benchSizes are the batch sizes of BenchmarkValidate and BenchmarkCRC32C.
var benchSizes = []struct {
	name string
	size int
}{{"16KiB", 16 << 10}, {"1MiB", 1 << 20}}

// benchBatch builds an uncompressed batch of at most size bytes of 1 KiB
// records (a 16-byte key and a 1008-byte value), as a producer sends it.
func benchBatch(tb testing.TB, codec Codec, size int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"}
	b := NewBuilder(codec)
	key := make([]byte, 16)
	value := make([]byte, 0, 1008)
	for i := 0; ; i++ {
		if b.UncompressedSize()+1024+16 > size {
			break
		}
		copy(key, fmt.Sprintf("key-%012d", i))
		value = value[:0]
		for len(value) < 1008 {
			value = append(value, words[rng.IntN(len(words))]...)
			value = append(value, ' ')
		}
		b.Append(vectorTimestamp+int64(i), key, value[:1008])
	}
	out, err := b.Build(nil)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// BenchmarkValidate measures the whole produce-path validation of an
// uncompressed batch, every record included. Read it against
// BenchmarkCRC32C over the same bytes: the target is half its speed or
// better.
func BenchmarkValidate(b *testing.B) {
	for _, s := range benchSizes {
		raw := benchBatch(b, CodecNone, s.size)
		opts := &ValidateOptions{MaxMessageBytes: 2 << 20, Now: time.UnixMilli(vectorTimestamp), Compacted: true}
		b.Run("size="+s.name, func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Validate(raw, opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCRC32C is the reference for BenchmarkValidate: only the
// checksum of the same bytes, with hash/crc32.
func BenchmarkCRC32C(b *testing.B) {
	for _, s := range benchSizes {
		raw := benchBatch(b, CodecNone, s.size)
		b.Run("size="+s.name, func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			var sum uint32
			for b.Loop() {
				sum += crc32.Checksum(raw[attributesOffset:], castagnoli)
			}
			_ = sum
		})
	}
}

// BenchmarkBuild measures building a 16 KiB batch of 1 KiB text records
// with each codec; bytes are the uncompressed batch size.
func BenchmarkBuild(b *testing.B) {
	raw := benchBatch(b, CodecNone, 16<<10)
	src, _ := ParseBatch(raw)
	var recs []Record
	var rr RecordReader
	_ = rr.Reset(src)
	for rr.Next() {
		recs = append(recs, *rr.Record())
	}
	for _, codec := range Codecs {
		b.Run("codec="+codec.String(), func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			bld := NewBuilder(codec)
			var dst []byte
			for b.Loop() {
				bld.Reset(codec)
				for i := range recs {
					bld.Append(recs[i].Timestamp, recs[i].Key, recs[i].Value)
				}
				var err error
				if dst, err = bld.Build(dst[:0]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(dst))/float64(len(raw)), "ratio")
		})
	}
}

// BenchmarkRecords measures iterating the records of a 1 MiB batch with
// each codec, decompression included; bytes are the uncompressed size.
func BenchmarkRecords(b *testing.B) {
	plain := len(benchBatch(b, CodecNone, 1<<20))
	for _, codec := range Codecs {
		raw := benchBatch(b, codec, 1<<20)
		batch, _ := ParseBatch(raw)
		b.Run("codec="+codec.String(), func(b *testing.B) {
			var rr RecordReader
			b.SetBytes(int64(plain))
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				if err := rr.Reset(batch); err != nil {
					b.Fatal(err)
				}
				for rr.Next() {
					n += len(rr.Record().Value)
				}
				if rr.Err() != nil {
					b.Fatal(rr.Err())
				}
			}
		})
	}
}
