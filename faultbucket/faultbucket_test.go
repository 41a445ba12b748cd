package faultbucket

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"
	"gocloud.dev/gcerrors"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func wrap(t *testing.T, opts *Options) (*blob.Bucket, *Faults) {
	t.Helper()
	inner := memblob.OpenBucket(nil)
	t.Cleanup(func() { inner.Close() })
	b, f, err := Wrap(inner, opts)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	return b, f
}

// quantile returns the q-quantile of sorted samples.
func quantile(sorted []time.Duration, q float64) time.Duration {
	return sorted[int(q*float64(len(sorted)-1))]
}

func within(t *testing.T, got, want time.Duration, tol float64, what string) {
	t.Helper()
	ratio := float64(got) / float64(want)
	require.InDelta(t, 1, ratio, tol, "%s: got %v, want %v (±%.0f%%)", what, got, want, tol*100)
}

// TestDistributions samples each distribution directly: the sampled
// quantiles match the asked ones and Quantile.
func TestDistributions(t *testing.T) {
	emp, err := Empirical(Point{0, 20 * time.Millisecond}, Point{0.5, 100 * time.Millisecond}, Point{0.99, 400 * time.Millisecond}, Point{1, 2 * time.Second})
	require.NoError(t, err)
	cases := []struct {
		l        Latency
		p50, p99 time.Duration
	}{
		{LogNormal(100*time.Millisecond, 400*time.Millisecond), 100 * time.Millisecond, 400 * time.Millisecond},
		{LogNormal(50*time.Millisecond, 150*time.Millisecond), 50 * time.Millisecond, 150 * time.Millisecond},
		{LogNormal(10*time.Millisecond, 10*time.Millisecond), 10 * time.Millisecond, 10 * time.Millisecond},
		{Uniform(100*time.Millisecond, 50*time.Millisecond), 100 * time.Millisecond, 149 * time.Millisecond},
		{Constant(7 * time.Millisecond), 7 * time.Millisecond, 7 * time.Millisecond},
		{emp, 100 * time.Millisecond, 400 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.l.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			s := make([]time.Duration, 200_000)
			for i := range s {
				s[i] = c.l.Sample(rng)
			}
			slices.Sort(s)
			within(t, quantile(s, 0.50), c.p50, 0.02, "sampled p50")
			within(t, quantile(s, 0.99), c.p99, 0.04, "sampled p99")
			within(t, c.l.Quantile(0.50), c.p50, 0.01, "Quantile(0.5)")
			within(t, c.l.Quantile(0.99), c.p99, 0.01, "Quantile(0.99)")
		})
	}
	// Uniform is floored at zero: 100 ms ± 150 ms.
	u := Uniform(100*time.Millisecond, 150*time.Millisecond)
	rng := rand.New(rand.NewPCG(3, 4))
	zeros := 0
	for range 10_000 {
		d := u.Sample(rng)
		require.GreaterOrEqual(t, d, time.Duration(0))
		if d == 0 {
			zeros++
		}
	}
	require.InDelta(t, 1.0/6, float64(zeros)/10_000, 0.02, "a sixth of 100±150 ms is below zero")

	_, err = Empirical(Point{0.5, time.Second}, Point{0.4, 2 * time.Second})
	require.Error(t, err)
	_, err = Empirical()
	require.Error(t, err)
	require.Panics(t, func() { LogNormal(2*time.Second, time.Second) })
}

// TestProfileLatencies sends many calls through a bucket with each named
// profile, recording the waits instead of sleeping: the injected delays
// of PUTs and GETs have the profile's p50 and p99.
func TestProfileLatencies(t *testing.T) {
	for _, name := range []string{"s3-standard", "s3-express"} {
		// The system clock, virtual in a synctest bubble: the waits take
		// no real time.
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				prof, err := NamedProfile(name)
				require.NoError(t, err)
				var mu sync.Mutex
				delays := map[Op][]time.Duration{}
				b, _ := wrap(t, &Options{Profile: prof, Seed: 42, Observe: func(c Call) {
					mu.Lock()
					defer mu.Unlock()
					require.NoError(t, c.Err)
					delays[c.Op] = append(delays[c.Op], c.Delay)
				}})
				ctx := t.Context()
				const n = 20_000
				for i := range n {
					require.NoError(t, b.WriteAll(ctx, fmt.Sprintf("k%d", i%100), []byte("x"), nil))
					_, err := b.ReadAll(ctx, fmt.Sprintf("k%d", i%100))
					require.NoError(t, err)
				}
				for _, op := range []Op{Put, Get} {
					s := delays[op]
					require.Len(t, s, n)
					slices.Sort(s)
					l := prof.Ops[op].Latency
					within(t, quantile(s, 0.50), l.Quantile(0.50), 0.04, op.String()+" p50")
					within(t, quantile(s, 0.99), l.Quantile(0.99), 0.10, op.String()+" p99")
				}
				std, _ := NamedProfile("s3-standard")
				if name == "s3-standard" {
					within(t, std.Ops[Put].Latency.Quantile(0.5), 100*time.Millisecond, 0.001, "s3-standard PUT p50")
					within(t, std.Ops[Put].Latency.Quantile(0.99), 400*time.Millisecond, 0.001, "s3-standard PUT p99")
					within(t, std.Ops[Get].Latency.Quantile(0.5), 50*time.Millisecond, 0.001, "s3-standard GET p50")
					within(t, std.Ops[Get].Latency.Quantile(0.99), 150*time.Millisecond, 0.001, "s3-standard GET p99")
				}
			})
		})
	}
	_, err := NamedProfile("nope")
	require.Error(t, err)
	none, err := NamedProfile("none")
	require.NoError(t, err)
	for _, f := range none.Ops {
		require.Nil(t, f.Latency)
	}
}

// TestSeeded: the same seed and calls give the same delays.
func TestSeeded(t *testing.T) {
	run := func(seed uint64) []time.Duration {
		prof, _ := NamedProfile("s3-standard")
		var out []time.Duration
		synctest.Test(t, func(t *testing.T) { // the waits take no real time
			b, _ := wrap(t, &Options{Profile: prof, Seed: seed, Observe: func(c Call) { out = append(out, c.Delay) }})
			for i := range 50 {
				require.NoError(t, b.WriteAll(t.Context(), fmt.Sprint(i), nil, nil))
			}
		})
		return out
	}
	require.Equal(t, run(7), run(7))
	require.NotEqual(t, run(7), run(8))
}

// TestPassThrough: with no faults the wrapper is the inner bucket, error
// codes included, and counts every call.
func TestPassThrough(t *testing.T) {
	b, f := wrap(t, nil)
	ctx := t.Context()
	require.NoError(t, b.WriteAll(ctx, "a", []byte("hello"), nil))
	require.NoError(t, b.WriteAll(ctx, "b", []byte("xy"), &blob.WriterOptions{IfNotExist: true}))
	err := b.WriteAll(ctx, "b", []byte("z"), &blob.WriterOptions{IfNotExist: true})
	require.Equal(t, gcerrors.FailedPrecondition, gcerrors.Code(err))
	require.False(t, errors.Is(err, ErrInjected))
	r, err := b.NewRangeReader(ctx, "a", 1, 2, nil)
	require.NoError(t, err)
	part, err := io.ReadAll(r)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	require.Equal(t, "el", string(part))
	_, err = b.ReadAll(ctx, "missing")
	require.Equal(t, gcerrors.NotFound, gcerrors.Code(err))
	it := b.List(nil)
	n := 0
	for {
		if _, err := it.Next(ctx); err != nil {
			require.Equal(t, io.EOF, err)
			break
		}
		n++
	}
	require.Equal(t, 2, n)
	a, err := b.Attributes(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, int64(5), a.Size)
	require.NoError(t, b.Copy(ctx, "c", "a", nil))
	require.NoError(t, b.Delete(ctx, "a"))

	s := f.Stats()
	require.Equal(t, [NumOps]int64{Put: 4, Get: 2, List: 1, Delete: 1, Head: 1}, s.Calls)
	require.Equal(t, [NumOps]int64{}, s.Failed)
	require.Equal(t, int64(7), s.Bytes[Put], "the bytes of PUTs that succeed")
	require.Equal(t, int64(2), s.Bytes[Get])
	require.Equal(t, "DELETE", Delete.String())
}

// TestErrorRate: a share of calls fails with a retriable code and leaves
// nothing behind.
func TestErrorRate(t *testing.T) {
	prof := Profile{Name: "flaky"}
	prof.Ops[Put].ErrorRate = 0.3
	b, f := wrap(t, &Options{Profile: prof, Seed: 1})
	ctx := t.Context()
	const n = 5000
	failed := 0
	for i := range n {
		key := fmt.Sprint(i)
		err := b.WriteAll(ctx, key, []byte("x"), nil)
		exists, xerr := b.Exists(ctx, key)
		require.NoError(t, xerr)
		if err == nil {
			require.True(t, exists)
			continue
		}
		failed++
		require.False(t, exists, "a failed PUT has no effect")
		require.Equal(t, gcerrors.Internal, gcerrors.Code(err))
		require.ErrorIs(t, err, ErrInjected)
		var e *Error
		require.ErrorAs(t, err, &e)
		require.Equal(t, Put, e.Op)
		require.Equal(t, key, e.Key)
		require.False(t, e.Outage)
	}
	require.InDelta(t, 0.3, float64(failed)/n, 0.03)
	require.Equal(t, int64(failed), f.Stats().Failed[Put])
	require.Zero(t, f.Stats().Failed[Head], "HEADs have no error rate")

	require.NoError(t, f.SetErrorRate(Get, 1))
	_, err := b.ReadAll(ctx, "0")
	require.ErrorIs(t, err, ErrInjected)
	require.Error(t, f.SetErrorRate(Get, 1.5))
	require.NoError(t, f.SetErrorRate(Get, 0))

	// Another code.
	b2, _ := wrap(t, &Options{Profile: prof, Seed: 1, Code: gcerrors.ResourceExhausted})
	for i := 0; ; i++ {
		if err := b2.WriteAll(ctx, fmt.Sprint(i), nil, nil); err != nil {
			require.Equal(t, gcerrors.ResourceExhausted, gcerrors.Code(err))
			break
		}
	}
}

// TestOutage: during an outage every call fails at once; after it, calls
// succeed again. A stall holds calls until it ends.
func TestOutage(t *testing.T) {
	// The system clock, virtual in a synctest bubble: the test moves time
	// by sleeping, and measures the waits exactly.
	synctest.Test(t, testOutage)
}

func testOutage(t *testing.T) {
	b, f := wrap(t, &Options{})
	ctx := t.Context()
	require.NoError(t, b.WriteAll(ctx, "a", []byte("x"), nil))
	f.Outage(30 * time.Second)
	start := time.Now()
	for _, call := range []func() error{
		func() error { return b.WriteAll(ctx, "b", []byte("x"), nil) },
		func() error { _, err := b.ReadAll(ctx, "a"); return err },
		func() error { _, err := b.Attributes(ctx, "a"); return err },
		func() error { return b.Delete(ctx, "a") },
		func() error { _, _, err := b.ListPage(ctx, blob.FirstPageToken, 10, nil); return err },
	} {
		err := call()
		var e *Error
		require.ErrorAs(t, err, &e)
		require.True(t, e.Outage)
		require.Equal(t, gcerrors.Internal, gcerrors.Code(err))
	}
	require.Zero(t, time.Since(start), "an outage fails at once")
	ok, err := b.Exists(ctx, "a")
	require.Error(t, err)
	require.False(t, ok)
	time.Sleep(30 * time.Second)
	ok, err = b.Exists(ctx, "a")
	require.NoError(t, err)
	require.True(t, ok, "the delete during the outage had no effect")
	require.Equal(t, int64(6), sum(f.Stats().Failed))

	f.Outage(time.Minute)
	f.EndOutage()
	require.NoError(t, b.WriteAll(ctx, "b", nil, nil))

	// A stall waits for its end, then the call goes on.
	f.Stall(10 * time.Second)
	time.Sleep(4 * time.Second)
	start = time.Now()
	require.NoError(t, b.WriteAll(ctx, "c", nil, nil))
	require.Equal(t, 6*time.Second, time.Since(start), "the call waited for the stall's end")
	// A stalled call whose context ends returns its error, without effect.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	err = b.WriteAll(cctx, "d", nil, nil)
	require.ErrorIs(t, err, context.Canceled)
	time.Sleep(10 * time.Second)
	ok, err = b.Exists(ctx, "d")
	require.NoError(t, err)
	require.False(t, ok)
}

func sum(a [NumOps]int64) int64 {
	var s int64
	for _, v := range a {
		s += v
	}
	return s
}

// TestBandwidth: uploads and downloads take their bytes over the rate,
// and concurrent calls share the link.
func TestBandwidth(t *testing.T) {
	prof := Profile{Name: "slow", UploadBytesPerSec: 1 << 20, DownloadBytesPerSec: 2 << 20}
	var mu sync.Mutex
	var calls []Call
	observe := func(c Call) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, c)
	}
	data := make([]byte, 1<<20)
	// The system clock, virtual in a synctest bubble, here and below.
	synctest.Test(t, func(t *testing.T) {
		b, _ := wrap(t, &Options{Profile: prof, Observe: observe})
		ctx := t.Context()
		require.NoError(t, b.WriteAll(ctx, "a", data, nil))
		require.Equal(t, time.Second, calls[0].Throttle.Round(time.Millisecond), "1 MiB at 1 MiB/s")
		require.Equal(t, time.Second, calls[0].Duration.Round(time.Millisecond))
		got, err := b.ReadAll(ctx, "a")
		require.NoError(t, err)
		require.Len(t, got, 1<<20)
		require.Equal(t, Get, calls[1].Op)
		require.Equal(t, int64(1<<20), calls[1].Bytes)
		require.Equal(t, 500*time.Millisecond, calls[1].Throttle.Round(time.Millisecond), "1 MiB at 2 MiB/s")
	})

	// Two concurrent
	// 256 KiB uploads at 1 MiB/s share the link, so each takes half a
	// second (one alone takes a quarter).
	synctest.Test(t, func(t *testing.T) {
		calls = nil
		b2, _ := wrap(t, &Options{Profile: prof, Observe: observe})
		start := time.Now()
		var wg sync.WaitGroup
		for i := range 2 {
			wg.Go(func() { require.NoError(t, b2.WriteAll(t.Context(), fmt.Sprint(i), data[:256<<10], nil)) })
		}
		wg.Wait()
		require.Len(t, calls, 2)
		for _, c := range calls {
			require.GreaterOrEqual(t, c.Duration, 400*time.Millisecond, "both calls share the link to the end")
		}
		require.Equal(t, 500*time.Millisecond, time.Since(start), "512 KiB in all at 1 MiB/s")
	})
}

// TestSizeLatency: a PUT waits its latency plus PerMiB for each MiB it
// sends, and a GET's reads wait PerMiB for each MiB they return; in the
// named S3 profiles an 8 MiB PUT is slower than a 100 KiB one by about
// 8 x 17 ms.
func TestSizeLatency(t *testing.T) {
	// The system clock, virtual in a synctest bubble: the waits are
	// measured exactly and take no real time.
	synctest.Test(t, testSizeLatency)
}

func testSizeLatency(t *testing.T) {
	prof := Profile{Name: "sized", Ops: [NumOps]OpFaults{
		Put: {Latency: Constant(10 * time.Millisecond), PerMiB: Constant(20 * time.Millisecond)},
		Get: {Latency: Constant(5 * time.Millisecond), PerMiB: Constant(8 * time.Millisecond)},
	}}
	var mu sync.Mutex
	var calls []Call
	b, _ := wrap(t, &Options{Profile: prof, Observe: func(c Call) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, c)
	}})
	ctx := t.Context()
	require.NoError(t, b.WriteAll(ctx, "big", make([]byte, 8<<20), nil))
	require.NoError(t, b.WriteAll(ctx, "small", make([]byte, 100<<10), nil))
	require.Equal(t, 170*time.Millisecond, calls[0].Delay, "10 ms + 8 MiB x 20 ms")
	require.Equal(t, 170*time.Millisecond, calls[0].Duration)
	require.Equal(t, 10*time.Millisecond+1953125*time.Nanosecond, calls[1].Delay, "10 ms + 100 KiB x 20 ms")

	start := time.Now()
	got, err := b.ReadAll(ctx, "big")
	require.NoError(t, err)
	require.Len(t, got, 8<<20)
	require.Equal(t, 69*time.Millisecond, calls[2].Delay.Round(time.Millisecond), "5 ms + 8 MiB x 8 ms")
	require.Equal(t, 69*time.Millisecond, time.Since(start).Round(time.Millisecond), "the reads waited it")
	r, err := b.NewRangeReader(ctx, "big", 0, 1<<20, nil)
	require.NoError(t, err)
	_, err = io.Copy(io.Discard, r)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	require.Equal(t, 13*time.Millisecond, calls[3].Delay.Round(time.Millisecond), "a 1 MiB range: 5 ms + 8 ms")

	// The named S3 profiles: 17 ms a MiB at the median.
	for _, name := range []string{"s3-standard", "s3-express"} {
		p, err := NamedProfile(name)
		require.NoError(t, err)
		for _, op := range []Op{Put, Get} {
			within(t, p.Ops[op].PerMiB.Quantile(0.5), 17*time.Millisecond, 0.001, name+" "+op.String()+" per MiB p50")
			within(t, p.Ops[op].PerMiB.Quantile(0.99), 40*time.Millisecond, 0.001, name+" "+op.String()+" per MiB p99")
		}
		calls = nil
		var big, small []time.Duration
		sb, _ := wrap(t, &Options{Profile: p, Seed: 3, Observe: func(c Call) {
			if c.Bytes > 1<<20 {
				big = append(big, c.Delay)
			} else {
				small = append(small, c.Delay)
			}
		}})
		data := make([]byte, 8<<20)
		put := func(key string, p []byte) { // no MD5, unlike WriteAll
			require.NoError(t, sb.Upload(ctx, key, bytes.NewReader(p), &blob.WriterOptions{ContentType: "application/octet-stream"}))
		}
		for i := range 40 {
			put("b", data)
			put(fmt.Sprint("s", i), data[:100<<10])
		}
		slices.Sort(big)
		slices.Sort(small)
		gap := quantile(big, 0.5) - quantile(small, 0.5)
		require.InDelta(t, float64(8*17*time.Millisecond), float64(gap), float64(40*time.Millisecond), "%s: 8 MiB against 100 KiB at the median", name)
	}
}

// TestContextCancellation: an injected wait ends with the call's context,
// and the call has no effect.
func TestContextCancellation(t *testing.T) {
	prof := Profile{Name: "hour"}
	for op := range NumOps {
		prof.Ops[op].Latency = Constant(time.Hour)
	}
	// The system clock, virtual in a synctest bubble: the waits end with
	// their contexts, at exactly their deadlines, not after the hour.
	synctest.Test(t, func(t *testing.T) {
		b, _ := wrap(t, &Options{Profile: prof})

		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := b.WriteAll(ctx, "a", []byte("x"), nil)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, 50*time.Millisecond, time.Since(start), "the wait ends at the deadline")

		ctx2, cancel2 := context.WithCancel(t.Context())
		go func() {
			time.Sleep(20 * time.Millisecond)
			cancel2()
		}()
		start = time.Now()
		_, err = b.ReadAll(ctx2, "a")
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, 20*time.Millisecond, time.Since(start), "the wait ends with the cancel")
	})

	b3, f3 := wrap(t, &Options{Profile: prof})
	require.NoError(t, f3.SetProfile(Profile{Name: "none"}))
	require.NoError(t, b3.WriteAll(t.Context(), "a", nil, nil), "a new profile applies to the next call")
	ok, err := b3.Exists(t.Context(), "a")
	require.NoError(t, err)
	require.True(t, ok)
}

// TestHook fails the i-th call for each i in turn (the fault-injection
// loop of pebble's errorfs tests), before and after the call's effect.
func TestHook(t *testing.T) {
	ctx := t.Context()
	workload := func(b *blob.Bucket) error {
		if err := b.WriteAll(ctx, "x", []byte("1"), nil); err != nil {
			return err
		}
		if _, err := b.ReadAll(ctx, "x"); err != nil {
			return err
		}
		return b.Delete(ctx, "x")
	}
	for after := range 2 {
		for i := 0; ; i++ {
			b, f := wrap(t, nil)
			var mu sync.Mutex
			n := 0
			f.SetHook(func(op Op, key string) *Error {
				mu.Lock()
				defer mu.Unlock()
				n++
				if n-1 == i {
					return &Error{AfterEffect: after == 1, Code: gcerrors.Unknown}
				}
				return nil
			})
			err := workload(b)
			if i == 3 {
				require.NoError(t, err, "three calls: the fourth injection point is past the end")
				break
			}
			require.ErrorIs(t, err, ErrInjected)
			require.Equal(t, gcerrors.Unknown, gcerrors.Code(err))
			if i == 0 {
				exists, xerr := b.Exists(ctx, "x")
				require.NoError(t, xerr)
				require.Equal(t, after == 1, exists, "a PUT failed after its effect is in the store")
			}
		}
	}
}
