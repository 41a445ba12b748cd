package kbatch_test

import (
	"hash/crc32"
	"testing"
	"time"

	"github.com/diskless-go/diskless/internal/testbatch"
	"github.com/diskless-go/diskless/kbatch"
)

// benchSizes are the batch sizes of BenchmarkValidate and BenchmarkCRC32C.
var benchSizes = []struct {
	name string
	size int
}{{"16KiB", 16 << 10}, {"1MiB", 1 << 20}}

// BenchmarkValidate measures the whole produce-path validation of an
// uncompressed batch, every record included. Read it against
// BenchmarkCRC32C over the same bytes: the target is half its speed or
// better.
func BenchmarkValidate(b *testing.B) {
	for _, s := range benchSizes {
		raw := testbatch.Text(b, kbatch.CodecNone, s.size)
		opts := &kbatch.ValidateOptions{MaxMessageBytes: 2 << 20, Now: time.UnixMilli(testbatch.Timestamp), Compacted: true}
		b.Run("size="+s.name, func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := kbatch.Validate(raw, opts); err != nil {
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
		raw := testbatch.Text(b, kbatch.CodecNone, s.size)
		b.Run("size="+s.name, func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			var sum uint32
			table := crc32.MakeTable(crc32.Castagnoli)
			for b.Loop() {
				sum += crc32.Checksum(raw[21:], table) // from the attributes on, as a batch's CRC
			}
			_ = sum
		})
	}
}

// BenchmarkBuild measures building a 16 KiB batch of 1 KiB text records
// with each codec; bytes are the uncompressed batch size.
func BenchmarkBuild(b *testing.B) {
	raw := testbatch.Text(b, kbatch.CodecNone, 16<<10)
	src, _ := kbatch.ParseBatch(raw)
	var recs []kbatch.Record
	var rr kbatch.RecordReader
	_ = rr.Reset(src)
	for rr.Next() {
		recs = append(recs, *rr.Record())
	}
	for _, codec := range kbatch.Codecs {
		b.Run("codec="+codec.String(), func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			bld := kbatch.NewBuilder(codec)
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
	plain := len(testbatch.Text(b, kbatch.CodecNone, 1<<20))
	for _, codec := range kbatch.Codecs {
		raw := testbatch.Text(b, codec, 1<<20)
		batch, _ := kbatch.ParseBatch(raw)
		b.Run("codec="+codec.String(), func(b *testing.B) {
			var rr kbatch.RecordReader
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
