package faultbucket

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// Latency is a distribution of injected delays. Implementations are
// immutable and safe for concurrent use; the caller serializes the
// *rand.Rand.
type Latency interface {
	// Sample draws one delay.
	Sample(rng *rand.Rand) time.Duration
	// Quantile returns the delay below which a share q of samples fall
	// (q in [0, 1]), for reports and tests.
	Quantile(q float64) time.Duration
	// String describes the distribution.
	String() string
}

// z99 is the standard normal quantile of 0.99.
var z99 = math.Sqrt2 * math.Erfinv(2*0.99-1)

// Constant returns a distribution that always gives d.
func Constant(d time.Duration) Latency { return constant(d) }

type constant time.Duration

func (c constant) Sample(*rand.Rand) time.Duration { return time.Duration(c) }
func (c constant) Quantile(float64) time.Duration  { return time.Duration(c) }
func (c constant) String() string                  { return time.Duration(c).String() }

// Uniform returns base plus a jitter drawn uniformly from [-jitter,
// +jitter], floored at zero: the "100 ms ± 150 ms" of the KIP-1150 test
// setups.
func Uniform(base, jitter time.Duration) Latency {
	return uniform{base: base, jitter: max(jitter, 0)}
}

type uniform struct{ base, jitter time.Duration }

func (u uniform) Sample(rng *rand.Rand) time.Duration {
	if u.jitter == 0 {
		return max(u.base, 0)
	}
	return max(u.base-u.jitter+time.Duration(rng.Int64N(int64(2*u.jitter)+1)), 0)
}

func (u uniform) Quantile(q float64) time.Duration {
	return max(u.base-u.jitter+time.Duration(q*float64(2*u.jitter)), 0)
}

func (u uniform) String() string { return fmt.Sprintf("%v ± %v", u.base, u.jitter) }

// LogNormal returns the log-normal distribution whose median is p50 and
// whose 99th percentile is p99 (p99 >= p50 > 0): the long right tail of
// object-store latencies. p99 == p50 gives a constant.
func LogNormal(p50, p99 time.Duration) Latency {
	if p50 <= 0 || p99 < p50 {
		panic(fmt.Sprintf("faultbucket: LogNormal(%v, %v): need p99 >= p50 > 0", p50, p99))
	}
	return logNormal{mu: math.Log(float64(p50)), sigma: math.Log(float64(p99)/float64(p50)) / z99, p50: p50, p99: p99}
}

type logNormal struct {
	mu, sigma float64
	p50, p99  time.Duration
}

func (l logNormal) Sample(rng *rand.Rand) time.Duration {
	return time.Duration(math.Exp(l.mu + l.sigma*rng.NormFloat64()))
}

func (l logNormal) Quantile(q float64) time.Duration {
	switch {
	case q <= 0:
		return 0
	case q >= 1:
		return time.Duration(math.MaxInt64)
	}
	z := math.Sqrt2 * math.Erfinv(2*q-1)
	return time.Duration(math.Exp(l.mu + l.sigma*z))
}

func (l logNormal) String() string { return fmt.Sprintf("log-normal p50 %v p99 %v", l.p50, l.p99) }

// Point is one point of an empirical distribution: a share Q of delays
// are at most D.
type Point struct {
	Q float64
	D time.Duration
}

// Empirical returns the distribution through the given points, linear in
// between (an inverse CDF): for instance {0, 20ms}, {0.5, 100ms}, {0.99,
// 400ms}, {1, 2s}. Below the first point it gives the first delay, above
// the last the last. The points need increasing Q in [0, 1] and
// non-decreasing D.
func Empirical(points ...Point) (Latency, error) {
	if len(points) == 0 {
		return nil, fmt.Errorf("faultbucket: Empirical needs at least one point")
	}
	for i, p := range points {
		if p.Q < 0 || p.Q > 1 || p.D < 0 {
			return nil, fmt.Errorf("faultbucket: Empirical point %d (%v, %v) is out of range", i, p.Q, p.D)
		}
		if i > 0 && (p.Q <= points[i-1].Q || p.D < points[i-1].D) {
			return nil, fmt.Errorf("faultbucket: Empirical point %d (%v, %v) does not follow (%v, %v)", i, p.Q, p.D, points[i-1].Q, points[i-1].D)
		}
	}
	return empirical(slices.Clone(points)), nil
}

type empirical []Point

func (e empirical) Sample(rng *rand.Rand) time.Duration { return e.Quantile(rng.Float64()) }

func (e empirical) Quantile(q float64) time.Duration {
	i, _ := slices.BinarySearchFunc(e, q, func(p Point, q float64) int {
		switch {
		case p.Q < q:
			return -1
		case p.Q > q:
			return 1
		}
		return 0
	})
	switch {
	case i == 0:
		return e[0].D
	case i == len(e):
		return e[len(e)-1].D
	}
	a, b := e[i-1], e[i]
	return a.D + time.Duration((q-a.Q)/(b.Q-a.Q)*float64(b.D-a.D))
}

func (e empirical) String() string {
	s := "empirical"
	for _, p := range e {
		s += fmt.Sprintf(" p%g=%v", p.Q*100, p.D)
	}
	return s
}
