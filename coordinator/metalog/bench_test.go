package metalog_test

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless/coordinator/metalog"
)

// logBenchEntrySize is the size of the entries of the log benchmarks.
const logBenchEntrySize = 1 << 10

// logBenchImpls opens each metalog.Log of the benchmarks.
var logBenchImpls = []struct {
	name string
	open func(b *testing.B) metalog.Log
}{
	{"mem", func(b *testing.B) metalog.Log { return metalog.NewMem(nil) }},
	{"file", func(b *testing.B) metalog.Log {
		l, err := metalog.OpenFile(b.TempDir(), nil)
		if err != nil {
			b.Fatal(err)
		}
		return l
	}},
	{"file-nosync", func(b *testing.B) metalog.Log {
		l, err := metalog.OpenFile(b.TempDir(), &metalog.FileOptions{NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		return l
	}},
	{"bucket-mem", func(b *testing.B) metalog.Log {
		bucket := memblob.OpenBucket(nil)
		b.Cleanup(func() { bucket.Close() })
		l, err := metalog.OpenBucket(b.Context(), bucket, "meta/0/", &metalog.BucketOptions{MaxQueued: 256})
		if err != nil {
			b.Fatal(err)
		}
		return l
	}},
}

// BenchmarkAppend appends 1 KiB entries as fast as the log takes them,
// with up to MaxInFlight appends pending (MaxQueued 256 for the bucket
// log), and reports entries/s and the latency of an append from the call
// to its result, under that load (p50-ns, p99-ns).
func BenchmarkAppend(b *testing.B) {
	for _, impl := range logBenchImpls {
		b.Run("log="+impl.name, func(b *testing.B) {
			l := impl.open(b)
			defer l.Close()
			benchmarkLogAppend(b, l, max(l.MaxInFlight(), 256))
		})
	}
}

// BenchmarkAppendSerial appends one entry at a time, each after the
// result of the one before: the latency of a lone append (for the file
// log, one write and one fsync).
func BenchmarkAppendSerial(b *testing.B) {
	for _, impl := range logBenchImpls {
		b.Run("log="+impl.name, func(b *testing.B) {
			l := impl.open(b)
			defer l.Close()
			benchmarkLogAppend(b, l, 1)
		})
	}
}

func benchmarkLogAppend(b *testing.B, l metalog.Log, inFlight int) {
	entry := bytes.Repeat([]byte{0xab}, logBenchEntrySize)
	lats := make([]time.Duration, 0, 1<<16)
	b.SetBytes(logBenchEntrySize)
	b.ReportAllocs()
	n := 0
	if inFlight == 1 {
		for b.Loop() {
			at := time.Now()
			if r := <-l.Append(entry); r.Err != nil {
				b.Fatal(r.Err)
			}
			lats = append(lats, time.Since(at))
			n++
		}
	} else {
		type sent struct {
			at time.Time
			ch <-chan metalog.AppendResult
		}
		queue := make(chan sent, inFlight-1) // with the one being sent: inFlight
		done := make(chan struct{})
		go func() {
			defer close(done)
			for s := range queue {
				if r := <-s.ch; r.Err != nil {
					b.Error(r.Err)
					return
				}
				lats = append(lats, time.Since(s.at))
			}
		}()
		for b.Loop() {
			queue <- sent{time.Now(), l.Append(entry)}
			n++
		}
		close(queue)
		<-done
	}
	elapsed := b.Elapsed()
	if len(lats) == 0 {
		return
	}
	slices.Sort(lats)
	b.ReportMetric(float64(n)/elapsed.Seconds(), "entries/s")
	b.ReportMetric(float64(lats[len(lats)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lats[len(lats)*99/100].Nanoseconds()), "p99-ns")
	if fl, ok := l.(*metalog.File); ok {
		if st := fl.Stats(); st.Syncs > 0 {
			b.ReportMetric(float64(st.Appends)/float64(st.Syncs), "entries/fsync")
			b.ReportMetric(float64(st.SyncTime.Nanoseconds())/float64(st.Syncs), "ns/fsync")
		}
	}
}
