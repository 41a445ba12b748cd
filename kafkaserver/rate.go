package kafkaserver

import (
	"math"
	"time"
)

// The windows of the rates that client quotas are measured by, Kafka's
// defaults: quota.window.num samples of quota.window.size.seconds.
const (
	quotaSamples = 11
	quotaWindow  = time.Second
)

// windowedRate is a rate measured over samples of a fixed window, as
// Kafka's Rate over a SampledStat measures it (its metrics library,
// which quotas use):
//
//   - a value is added to the current sample; a sample is complete once
//     a window has passed since it started, and the next value starts a
//     new one, reusing the oldest of samples+1 slots;
//   - a sample with no value for samples*window is obsolete: it is
//     reset, at the time of the measurement;
//   - the rate is the sum of the samples over the time since the oldest
//     one started, counted as at least samples-1 whole windows (so that
//     the first values after a quiet spell are not measured over a few
//     milliseconds), and at least 1 ms.
//
// Times are in milliseconds, as Kafka's. It is not safe for concurrent
// use.
type windowedRate struct {
	samples []rateSample // up to quotaSamples+1
	current int
	last    int64 // the last value's time: an idle rate can be dropped
}

type rateSample struct {
	value     float64
	start     int64 // ms
	lastEvent int64 // ms
	events    int64
}

func (s *rateSample) reset(now int64) { *s = rateSample{start: now, lastEvent: now} }

// record adds value at now (ms).
func (r *windowedRate) record(value float64, now int64) {
	s := r.currentSample(now)
	if now-s.start >= quotaWindow.Milliseconds() {
		r.current = (r.current + 1) % (quotaSamples + 1)
		if r.current >= len(r.samples) {
			r.samples = append(r.samples, rateSample{start: now, lastEvent: now})
		} else {
			r.samples[r.current].reset(now)
		}
		s = &r.samples[r.current]
	}
	s.value += value
	s.events++
	s.lastEvent = now
	r.last = now
}

func (r *windowedRate) currentSample(now int64) *rateSample {
	if len(r.samples) == 0 {
		r.samples = append(r.samples, rateSample{start: now, lastEvent: now})
	}
	return &r.samples[r.current]
}

// purge resets the obsolete samples.
func (r *windowedRate) purge(now int64) {
	expire := quotaSamples * quotaWindow.Milliseconds()
	for i := range r.samples {
		if now-r.samples[i].lastEvent >= expire {
			r.samples[i].reset(now)
		}
	}
}

// windowSize is the time, in ms, the rate at now is measured over.
func (r *windowedRate) windowSize(now int64) int64 {
	r.purge(now)
	r.currentSample(now)
	oldest := r.samples[0].start
	for _, s := range r.samples[1:] {
		oldest = min(oldest, s.start)
	}
	elapsed := now - oldest
	window := quotaWindow.Milliseconds()
	if full := elapsed / window; full < quotaSamples-1 {
		elapsed += (quotaSamples - 1 - full) * window
	}
	return max(elapsed, 1)
}

// measure is the rate at now, a second.
func (r *windowedRate) measure(now int64) float64 {
	r.purge(now)
	var sum float64
	for _, s := range r.samples {
		sum += s.value
	}
	return sum / (float64(r.windowSize(now)) / 1000)
}

// throttle is how long a client over bound must wait for the rate it
// measured (rate, at now) to fall back to bound with no more values, as
// Kafka's quota throttle time: with O the rate, T the bound and W the
// window it is measured over, O*W/(W+X) = T gives X = (O-T)/T*W,
// rounded to the millisecond. 0 within the bound.
func (r *windowedRate) throttle(rate, bound float64, now int64) time.Duration {
	if rate <= bound {
		return 0
	}
	ms := math.Round((rate - bound) / bound * float64(r.windowSize(now)))
	return time.Duration(min(ms, float64(math.MaxInt32))) * time.Millisecond
}
