package main

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// hist is a lock-free latency histogram with 128 log-linear buckets per
// power of two, so a quantile is within 0.8% of the true value (the
// Broker's Stats use 8 per power of two, within 12.5%: too coarse to
// tell 1.15 times a floor from 1.25). Its zero value is ready; it is safe
// for concurrent use.
type hist struct {
	counts [histBuckets]atomic.Int64
	n, sum atomic.Int64
	max    atomic.Int64
}

const (
	histSubBits = 7
	histSubs    = 1 << histSubBits
	histBuckets = (64 - histSubBits + 1) * histSubs
)

func histIndex(v uint64) int {
	if v < histSubs {
		return int(v)
	}
	e := bits.Len64(v) - 1
	return (e-histSubBits+1)*histSubs + int(v>>(e-histSubBits))&(histSubs-1)
}

// histMid returns the middle of bucket i.
func histMid(i int) float64 {
	if i < histSubs {
		return float64(i)
	}
	e := i/histSubs + histSubBits - 1
	sub := uint64(i % histSubs)
	lo := (uint64(histSubs) + sub) << (e - histSubBits)
	width := uint64(1) << (e - histSubBits)
	return float64(lo) + float64(width)/2
}

// record adds one duration.
func (h *hist) record(d time.Duration) {
	v := max(int64(d), 0)
	h.counts[histIndex(uint64(v))].Add(1)
	h.n.Add(1)
	h.sum.Add(v)
	for m := h.max.Load(); v > m && !h.max.CompareAndSwap(m, v); m = h.max.Load() {
	}
}

// summary is a snapshot of a hist, in milliseconds.
type summary struct {
	Count                          int64
	Mean, P50, P90, P99, P999, Max float64
}

// snapshot returns the quantiles so far (bucket middles, never above the
// max).
func (h *hist) snapshot() summary {
	var counts [histBuckets]int64
	var n int64
	for i := range counts {
		counts[i] = h.counts[i].Load()
		n += counts[i]
	}
	maxNs := float64(h.max.Load())
	s := summary{Count: n, Max: maxNs / 1e6}
	if n == 0 {
		return s
	}
	s.Mean = float64(h.sum.Load()) / float64(max(h.n.Load(), 1)) / 1e6
	q := func(p float64) float64 {
		rank := int64(p*float64(n-1)) + 1
		var seen int64
		for i, c := range counts {
			if seen += c; seen >= rank {
				return min(histMid(i), maxNs) / 1e6
			}
		}
		return maxNs / 1e6
	}
	s.P50, s.P90, s.P99, s.P999 = q(0.50), q(0.90), q(0.99), q(0.999)
	return s
}
