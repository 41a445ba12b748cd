package wal

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/diskless-go/diskless/kbatch"
)

const benchObjectSize = 8 << 20

// benchObject fills an 8 MiB object as a Buffer would from producers of 1
// KiB records spread over the given number of partitions: batches of 16
// records where each partition gets many, of one record where the
// partitions outnumber the records, in arrival order that is not partition
// order.
func benchObject(tb testing.TB, partitions int) *Object {
	perBatch := min(max(benchObjectSize/1024/partitions, 1), 16)
	b := kbatch.NewBuilder(kbatch.CodecNone)
	value := make([]byte, 1024-16-12)
	for i := 0; i < perBatch; i++ {
		b.Append(1_764_500_000_000+int64(i), []byte("key-0123456789ab"), value)
	}
	raw, err := b.Build(nil)
	if err != nil {
		tb.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, uint64(partitions)))
	perm := rng.Perm(partitions)
	obj := NewObject("wal/bench")
	for i := 0; obj.Size()+int64(len(raw)) <= benchObjectSize; i++ {
		// Each batch its own copy, as batches of different requests are.
		data := append([]byte(nil), raw...)
		tp := TopicPartition{TopicID: topicID(perm[i%partitions] % 7), Partition: int32(perm[i%partitions])}
		obj.Add(&Request{Batches: []Batch{{tp, kbatch.Batch(data)}}})
	}
	return obj
}

// memWriter is a preallocated in-memory writer: Write copies into it.
type memWriter struct{ buf []byte }

func (w *memWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	return len(p), nil
}

// BenchmarkEncode encodes an 8 MiB object from the buffer's contents into a
// preallocated writer, coordinates included: every byte is copied once, as
// into a blob.Writer. Read it against BenchmarkMemmove (the targets are
// 0.5 of its speed at 100 partitions and 0.4 at 10,000: BENCHMARKS.md,
// "wal: encoding at 10,000 partitions"), and
// against BenchmarkCopyBatches, the cost of the copies alone.
func BenchmarkEncode(b *testing.B) {
	for _, n := range []int{1, 100, 10000} {
		obj := benchObject(b, n)
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			w := &memWriter{buf: make([]byte, 0, obj.Size())}
			coords := make([]Coordinate, 0, obj.NumBatches())
			b.SetBytes(obj.Size())
			b.ReportAllocs()
			for b.Loop() {
				w.buf = w.buf[:0]
				var err error
				if coords, err = obj.Encode(w, coords[:0]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(obj.NumPartitions()), "regions")
			b.ReportMetric(float64(len(coords)), "batches")
		})
	}
}

// BenchmarkAppendEncode is BenchmarkEncode with AppendEncode, into a
// preallocated slice: each batch copied once, in arrival order, to its
// place in the object (what the broker uses).
func BenchmarkAppendEncode(b *testing.B) {
	for _, n := range []int{1, 100, 10000} {
		obj := benchObject(b, n)
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			buf := make([]byte, 0, obj.Size())
			coords := make([]Coordinate, 0, obj.NumBatches())
			b.SetBytes(obj.Size())
			b.ReportAllocs()
			for b.Loop() {
				buf, coords = obj.AppendEncode(buf[:0], coords[:0])
			}
			b.ReportMetric(float64(obj.NumPartitions()), "regions")
			b.ReportMetric(float64(len(coords)), "batches")
		})
	}
}

// BenchmarkCopyBatches copies the batches of BenchmarkEncode's objects
// into the same preallocated writer, one Write each, in the order they lie
// in memory (arrival order), with no coordinates and no sorting: what
// copying an object batch by batch costs before any reordering, the floor
// of an encoder that copies each batch once.
func BenchmarkCopyBatches(b *testing.B) {
	for _, n := range []int{1, 100, 10000} {
		obj := benchObject(b, n)
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			w := &memWriter{buf: make([]byte, 0, obj.Size())}
			b.SetBytes(obj.Size())
			b.ReportAllocs()
			for b.Loop() {
				w.buf = w.buf[:0]
				for i := range obj.batches {
					w.Write(obj.batches[i].data)
				}
			}
		})
	}
}

// BenchmarkMemmove copies 8 MiB once: the reference for BenchmarkEncode.
// The source is written first: a fresh allocation that was never written
// is the kernel's zero page, which copying reads from the L1 cache.
func BenchmarkMemmove(b *testing.B) {
	src := make([]byte, benchObjectSize)
	for i := range src {
		src[i] = byte(i)
	}
	dst := make([]byte, benchObjectSize)
	b.SetBytes(benchObjectSize)
	b.ReportAllocs()
	for b.Loop() {
		copy(dst, src)
	}
}

// BenchmarkReadCoordinates checks a whole 8 MiB object of 100 partitions
// against its coordinates (framing, CRC and header of every batch), as a
// reader does after a GET.
func BenchmarkReadCoordinates(b *testing.B) {
	obj := benchObject(b, 100)
	w := &memWriter{}
	coords, err := obj.Encode(w, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(obj.Size())
	b.ReportAllocs()
	for b.Loop() {
		if err := CheckObject(w.buf, coords); err != nil {
			b.Fatal(err)
		}
	}
}
