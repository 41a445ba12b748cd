package histogram

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBuckets(t *testing.T) {
	for v := uint64(0); v < 1<<20; v += 1 + v/50 {
		i := index(v)
		require.LessOrEqual(t, v, uint64(upper(i)), "v=%d", v)
		if i > 0 {
			require.Greater(t, v, uint64(upper(i-1)), "v=%d", v)
		}
	}
	require.Less(t, index(^uint64(0)), buckets)
}

func TestQuantiles(t *testing.T) {
	var h Histogram
	rng := rand.New(rand.NewPCG(1, 2))
	var vals []time.Duration
	var wg sync.WaitGroup
	var mu sync.Mutex
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10000; i++ {
				mu.Lock()
				d := time.Duration(rng.ExpFloat64() * float64(time.Millisecond))
				vals = append(vals, d)
				mu.Unlock()
				h.Record(d)
			}
		}()
	}
	wg.Wait()
	slices.Sort(vals)
	s := h.Snapshot()
	require.Equal(t, int64(len(vals)), s.Count)
	require.Equal(t, vals[len(vals)-1], s.Max)
	for _, c := range []struct {
		got time.Duration
		p   float64
	}{{s.P50, 0.5}, {s.P90, 0.9}, {s.P99, 0.99}, {s.P999, 0.999}} {
		want := vals[int(c.p*float64(len(vals)-1))]
		require.InEpsilon(t, float64(want), float64(c.got), 0.008, "p%v", c.p)
		require.GreaterOrEqual(t, c.got, want)
	}
	var empty Histogram
	require.Zero(t, empty.Snapshot())
}
