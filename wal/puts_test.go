package wal

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/internal/fakeclock"
	"github.com/diskless-go/diskless/kbatch"
)

// PUT cost of S3 Standard, USD per 1,000 requests, and seconds in a
// 30-day month: the cost model of docs/architecture.md, "The cost model".
const (
	putPricePer1000 = 0.005
	secondsPerMonth = 30 * 24 * 3600
)

// putRates is what simulatePUTs measures.
type putRates struct {
	packed       float64 // objects per second, packed as this package packs them
	perPartition float64 // objects per second with one object per partition per flush
}

// simulatePUTs feeds ingress bytes per second of 1 KiB records, spread at
// random over the given number of partitions, into a Buffer with default
// options on a fake clock for dur. Ten producers each send a request every
// 10 ms (a batch per partition they have records for); every object is
// committed as soon as it closes. It counts objects, and the objects that
// one object per partition per flush would have needed.
func simulatePUTs(tb testing.TB, partitions int, ingress int64, dur time.Duration) putRates {
	const (
		producers  = 10
		tick       = 10 * time.Millisecond
		recordSize = 1024
	)
	// Batches of k 1 KiB records, built once and shared: the buffer only
	// looks at their size.
	perTick := int(ingress * int64(tick) / int64(time.Second) / recordSize)
	perProducer := (perTick + producers - 1) / producers
	batches := make([]kbatch.Batch, perProducer+1)
	for k := 1; k <= perProducer; k++ {
		b := kbatch.NewBuilder(kbatch.CodecNone)
		for i := 0; i < k; i++ {
			b.Append(0, []byte("key-0123456789ab"), make([]byte, recordSize-16-12))
		}
		raw, err := b.Build(nil)
		require.NoError(tb, err)
		batches[k] = kbatch.Batch(raw)
	}

	clk := fakeclock.New(epoch)
	buf, err := NewBuffer(&Options{Clock: clk})
	require.NoError(tb, err)
	defer buf.Close()
	rng := rand.New(rand.NewPCG(uint64(partitions), 7))
	var rates putRates
	counts := map[int32]int{}
	commit := func() {
		for {
			buf.mu.Lock()
			n := len(buf.mu.queue)
			buf.mu.Unlock()
			if n == 0 {
				return
			}
			o, err := buf.Next(context.Background())
			require.NoError(tb, err)
			coords, err := o.Encode(io.Discard, nil)
			require.NoError(tb, err)
			require.NoError(tb, o.Answer(make([]Result, len(coords))))
			rates.packed++
			rates.perPartition += float64(o.NumPartitions())
		}
	}
	sent := 0
	for now := time.Duration(0); now < dur; now += tick {
		for p := 0; p < producers && sent < perTick*int((now+tick)/tick); p++ {
			clear(counts)
			for i := 0; i < perProducer; i++ {
				counts[int32(rng.IntN(partitions))]++
			}
			req := &Request{}
			for part, k := range counts {
				req.Batches = append(req.Batches, Batch{TopicPartition{TopicID: topicID(0), Partition: part}, batches[k]})
			}
			require.NoError(tb, buf.Add(context.Background(), req))
			sent += perProducer
			commit()
		}
		clk.Advance(tick)
		commit()
	}
	secs := dur.Seconds()
	rates.packed /= secs
	rates.perPartition /= secs
	return rates
}

// TestPUTScaling: at a fixed ingress (50 MB/s of 1 KiB records), the
// objects per second stay within 10% from 1 to 10,000 partitions, while
// one object per partition per flush grows with the partitions.
func TestPUTScaling(t *testing.T) {
	dur := 3 * time.Second
	if testing.Short() {
		dur = time.Second
	}
	var rates []putRates
	for _, n := range []int{1, 100, 1000, 10000} {
		r := simulatePUTs(t, n, 50_000_000, dur)
		t.Logf("partitions=%d: packed %.2f objects/s, per partition %.1f objects/s", n, r.packed, r.perPartition)
		rates = append(rates, r)
	}
	lo, hi := rates[0].packed, rates[0].packed
	for _, r := range rates {
		lo, hi = min(lo, r.packed), max(hi, r.packed)
	}
	require.LessOrEqual(t, hi/lo, 1.10, "packed objects per second stay within 10%%")
	for i := 1; i < len(rates); i++ {
		require.Greater(t, rates[i].perPartition, 5*rates[i-1].perPartition/2, "per-partition objects grow with the partitions")
	}
	require.Greater(t, rates[3].perPartition/rates[3].packed, 1000.0)
}

// BenchmarkPUTScaling reports, for each partition count, the objects per
// second and their monthly PUT cost at 50 MB/s, packed and with one object
// per partition per flush (10 simulated seconds on a fake clock).
func BenchmarkPUTScaling(b *testing.B) {
	for _, n := range []int{1, 100, 1000, 10000} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			var r putRates
			for b.Loop() {
				r = simulatePUTs(b, n, 50_000_000, 10*time.Second)
			}
			b.ReportMetric(r.packed, "objects/s")
			b.ReportMetric(r.packed*secondsPerMonth*putPricePer1000/1000, "USD/month")
			b.ReportMetric(r.perPartition, "per-partition-objects/s")
			b.ReportMetric(r.perPartition*secondsPerMonth*putPricePer1000/1000, "per-partition-USD/month")
		})
	}
}
