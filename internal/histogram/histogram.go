// Package histogram is a lock-free latency histogram with log-linear
// buckets (128 per power of two, so a quantile is within 0.8% of the true
// value: fine enough to tell a p50 of 1.15 times a floor from 1.20), for
// the p50 to max that the Broker's Stats and the benchmarks report.
package histogram

import (
	"math/bits"
	"sync/atomic"
	"time"
)

const (
	subBits = 7 // 128 buckets per power of two
	subs    = 1 << subBits
	buckets = (64 - subBits + 1) * subs
)

// Histogram records durations. Its zero value is ready; it is safe for
// concurrent use.
type Histogram struct {
	counts [buckets]atomic.Int64
	count  atomic.Int64
	sum    atomic.Int64
	max    atomic.Int64
}

// index returns the bucket of v (nanoseconds, >= 0).
func index(v uint64) int {
	if v < subs {
		return int(v)
	}
	e := bits.Len64(v) - 1
	return (e-subBits+1)*subs + int(v>>(e-subBits))&(subs-1)
}

// upper returns the largest value of bucket i.
func upper(i int) int64 {
	if i < subs {
		return int64(i)
	}
	e := i/subs + subBits - 1
	sub := uint64(i % subs)
	return int64((uint64(subs)+sub+1)<<(e-subBits) - 1)
}

// Record adds one duration.
func (h *Histogram) Record(d time.Duration) {
	v := max(int64(d), 0)
	h.counts[index(uint64(v))].Add(1)
	h.count.Add(1)
	h.sum.Add(v)
	for m := h.max.Load(); v > m && !h.max.CompareAndSwap(m, v); m = h.max.Load() {
	}
}

// Summary is a snapshot of a Histogram: a latency distribution. The root
// package exports it as diskless.Latency (the latencies of the Broker's
// Stats); this is its one declaration.
type Summary struct {
	// Count is how many durations were recorded.
	Count int64
	// Mean is their mean; P50, P90, P99 and P999 their quantiles, each
	// the upper bound of its bucket: within 0.8% of the true value, and
	// never above Max.
	Mean, P50, P90, P99, P999 time.Duration
	// Max is the greatest.
	Max time.Duration
}

// Snapshot returns the count, mean, quantiles and max so far. Quantiles
// are the upper bound of their bucket, never above Max.
func (h *Histogram) Snapshot() Summary {
	var counts [buckets]int64
	var n int64
	for i := range counts {
		counts[i] = h.counts[i].Load()
		n += counts[i]
	}
	s := Summary{Count: n, Max: time.Duration(h.max.Load())}
	if n == 0 {
		return s
	}
	s.Mean = time.Duration(h.sum.Load() / max(h.count.Load(), 1))
	q := func(p float64) time.Duration {
		rank := int64(p*float64(n-1)) + 1
		var seen int64
		for i, c := range counts {
			if seen += c; seen >= rank {
				return min(time.Duration(upper(i)), s.Max)
			}
		}
		return s.Max
	}
	s.P50, s.P90, s.P99, s.P999 = q(0.50), q(0.90), q(0.99), q(0.999)
	return s
}
