package main

import (
	"slices"
	"sync"
	"time"

	"github.com/diskless-go/diskless/internal/histogram"
)

// summary is a histogram.Summary in milliseconds, as the report and the
// JSON lines give latencies.
type summary struct {
	Count                          int64
	Mean, P50, P90, P99, P999, Max float64
}

// summarize returns h's quantiles so far, in milliseconds.
func summarize(h *histogram.Histogram) summary {
	s := h.Snapshot()
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	return summary{Count: s.Count, Mean: ms(s.Mean), P50: ms(s.P50), P90: ms(s.P90), P99: ms(s.P99), P999: ms(s.P999), Max: ms(s.Max)}
}

// maxSamples bounds the latencies a samples keeps (32 MiB of them); a
// run that records more is summarized from its histogram.
const maxSamples = 4 << 20

// samples keeps every latency recorded, up to maxSamples, for quantiles
// without the histogram's buckets (each 0.8% wide, reported at its upper
// bound: 2.1 ms at 280 ms, too coarse to tell a p50 1% over a target from
// one under it).
type samples struct {
	mu   sync.Mutex
	ds   []time.Duration
	over bool
}

func (s *samples) add(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ds) >= maxSamples {
		s.over = true
		return
	}
	s.ds = append(s.ds, d)
}

// summary returns the exact quantiles of what was recorded (the ranks
// histogram.Snapshot uses), in milliseconds; false if none was recorded
// or more than maxSamples were.
func (s *samples) summary() (summary, bool) {
	s.mu.Lock()
	ds := slices.Clone(s.ds)
	over := s.over
	s.mu.Unlock()
	if over || len(ds) == 0 {
		return summary{}, false
	}
	slices.Sort(ds)
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	n := len(ds)
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	q := func(p float64) float64 { return ms(ds[int(p*float64(n-1))]) }
	return summary{Count: int64(n), Mean: ms(sum / time.Duration(n)), P50: q(0.50), P90: q(0.90), P99: q(0.99), P999: q(0.999), Max: ms(ds[n-1])}, true
}
