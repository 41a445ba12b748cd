package main

import (
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
