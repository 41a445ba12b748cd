package metalog_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/internal/testbucket"
)

// testBucketLogOptions are fast options for tests: short backoff, no trim
// grace.
func testBucketLogOptions() *metalog.BucketOptions {
	return &metalog.BucketOptions{RetryBackoff: time.Millisecond, MaxAttempts: 3, TrimGrace: -1}
}

func openTestBucketLog(t testing.TB, b *blob.Bucket, opts *metalog.BucketOptions) *metalog.Bucket {
	if opts == nil {
		opts = testBucketLogOptions()
	}
	l, err := metalog.OpenBucket(context.Background(), b, "meta/0/", opts)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

// TestBucketIfNotExist checks what the conditional put of each test
// bucket does when the object exists: it must fail with
// FailedPrecondition, which is how metalog.Bucket knows it is fenced.
func TestBucketIfNotExist(t *testing.T) {
	for _, kind := range []string{"mem", "file"} {
		t.Run("bucket="+kind, func(t *testing.T) {
			b := testbucket.New(t, kind)
			opts := &blob.WriterOptions{IfNotExist: true}
			require.NoError(t, b.WriteAll(t.Context(), "k", []byte("a"), opts))
			err := b.WriteAll(t.Context(), "k", []byte("b"), opts)
			require.Error(t, err)
			require.Equal(t, gcerrors.FailedPrecondition, gcerrors.Code(err))
			got, err := b.ReadAll(t.Context(), "k")
			require.NoError(t, err)
			require.Equal(t, "a", string(got))
		})
	}
}

func TestBucketOptionsValidated(t *testing.T) {
	b := testbucket.New(t, "mem")
	for _, o := range []metalog.BucketOptions{{MaxAttempts: -1}, {RetryBackoff: -1}, {AttemptTimeout: -1}, {ReadAhead: -1}, {MaxQueued: -1}} {
		_, err := metalog.OpenBucket(t.Context(), b, "", &o)
		require.ErrorIs(t, err, metalog.ErrInvalidOptions)
	}
	_, err := metalog.OpenBucket(t.Context(), nil, "", nil)
	require.ErrorIs(t, err, metalog.ErrInvalidOptions)
}

// TestBucketKeys checks the key layout and that Open lists once and
// finds the start and end.
func TestBucketKeys(t *testing.T) {
	b, fb := testbucket.Wrap(t, testbucket.New(t, "mem"))
	l := openTestBucketLog(t, b, nil)
	require.Equal(t, 1, fb.Count("list"))
	for i := range 3 {
		r := <-l.Append([]byte{byte(i)})
		require.NoError(t, r.Err)
	}
	got, err := b.ReadAll(t.Context(), "meta/0/log/00000000000000000002")
	require.NoError(t, err)
	require.Equal(t, []byte{2}, got)
	require.NoError(t, l.Read(t.Context(), 0, func(int64, []byte) error { return nil }))
	require.Equal(t, 1, fb.Count("list"), "appends and reads do not list")

	// Objects that are not entries are ignored.
	require.NoError(t, b.WriteAll(t.Context(), "meta/0/log/junk", []byte("x"), nil))
	require.NoError(t, b.WriteAll(t.Context(), "meta/0/log/0000000000000000000x", []byte("x"), nil))
	l2 := openTestBucketLog(t, b, nil)
	require.Equal(t, 2, fb.Count("list"))
	require.Equal(t, int64(0), l2.Start())
	require.Equal(t, int64(3), l2.End())
}

// TestBucketOpenAfterPartialTrim: objects below a gap (left over by a
// Trim that stopped part way) are below the start.
func TestBucketOpenAfterPartialTrim(t *testing.T) {
	b := testbucket.New(t, "mem")
	for _, off := range []int64{0, 2, 5, 6, 7} {
		require.NoError(t, b.WriteAll(t.Context(), fmt.Sprintf("meta/0/log/%020d", off), []byte{byte(off)}, nil))
	}
	l := openTestBucketLog(t, b, nil)
	require.Equal(t, int64(5), l.Start())
	require.Equal(t, int64(8), l.End())
	require.ErrorIs(t, l.Read(t.Context(), 2, func(int64, []byte) error { return nil }), metalog.ErrTrimmed)
	require.NoError(t, l.Trim(t.Context(), 6))
	require.Equal(t, int64(6), l.Start())
	for _, off := range []int64{0, 2, 5} {
		ok, err := b.Exists(t.Context(), fmt.Sprintf("meta/0/log/%020d", off))
		require.NoError(t, err)
		require.False(t, ok, "offset %d", off)
	}
}

// TestBucketOpenWithGaps: a log that pipelined may have gaps among its
// newest MaxInFlight offsets (puts that did not land while later ones
// did); opened with that MaxInFlight, the log ends at the first gap.
// Opened without, the objects below the gap are left over from a Trim.
func TestBucketOpenWithGaps(t *testing.T) {
	b := testbucket.New(t, "mem")
	for _, off := range []int64{0, 1, 2, 4, 6} {
		require.NoError(t, b.WriteAll(t.Context(), fmt.Sprintf("meta/0/log/%020d", off), []byte{byte(off)}, nil))
	}
	opts := testBucketLogOptions()
	opts.MaxInFlight = 4
	l := openTestBucketLog(t, b, opts)
	require.Equal(t, 4, l.MaxInFlight())
	require.Equal(t, int64(0), l.Start())
	require.Equal(t, int64(3), l.End())
	var got []int64
	require.NoError(t, l.Read(t.Context(), 0, func(off int64, _ []byte) error { got = append(got, off); return nil }))
	require.Equal(t, []int64{0, 1, 2}, got, "reads end at the gap")
	r := <-l.Append([]byte("3"))
	require.NoError(t, r.Err)
	require.Equal(t, int64(3), r.Offset, "the next put fills the gap")

	l1 := openTestBucketLog(t, b, nil)
	require.Equal(t, int64(6), l1.Start())
	require.Equal(t, int64(7), l1.End())
}

// TestBucketPipelined: with MaxInFlight 3, three puts are in flight at
// once and reported in order; a put that fails fails the ones behind it,
// and those that landed stay in the bucket.
func TestBucketPipelined(t *testing.T) {
	b, fb := testbucket.Wrap(t, testbucket.New(t, "mem"))
	opts := testBucketLogOptions()
	opts.MaxInFlight = 3
	opts.HedgeMaxDelay = -1
	l := openTestBucketLog(t, b, opts)
	gate := make(chan struct{})
	var mu sync.Mutex
	waiting := 0
	fb.Set(func(op, key string) testbucket.Fault {
		if op != "put" {
			return testbucket.Fault{}
		}
		mu.Lock()
		defer mu.Unlock()
		waiting++
		if strings.HasSuffix(key, "04") {
			return testbucket.Fault{Err: &testbucket.Error{Code: gcerrors.PermissionDenied, Msg: "refused"}}
		}
		return testbucket.Fault{Wait: gate}
	})
	var chs []<-chan metalog.AppendResult
	for i := range 6 {
		chs = append(chs, l.Append([]byte{byte(i)}))
	}
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return waiting == 3 }, 10*time.Second, time.Millisecond, "three puts in flight")
	time.Sleep(20 * time.Millisecond) // (no fourth put is sent while three are in flight)
	mu.Lock()
	require.Equal(t, 3, waiting)
	mu.Unlock()
	close(gate)
	for i := range 4 {
		r := <-chs[i]
		require.NoError(t, r.Err)
		require.Equal(t, int64(i), r.Offset)
	}
	for _, ch := range chs[4:] {
		require.Error(t, (<-ch).Err)
	}
	ok, err := b.Exists(t.Context(), "meta/0/log/00000000000000000004")
	require.NoError(t, err)
	require.False(t, ok)
}

// TestBucketRetries: transient errors are retried, up to MaxAttempts.
func TestBucketRetries(t *testing.T) {
	b, fb := testbucket.Wrap(t, testbucket.New(t, "mem"))
	l := openTestBucketLog(t, b, nil) // MaxAttempts 3
	var mu sync.Mutex
	failures := 2
	fb.Set(func(op, key string) testbucket.Fault {
		mu.Lock()
		defer mu.Unlock()
		if op == "put" && failures > 0 {
			failures--
			return testbucket.Fault{Err: &testbucket.Error{Code: gcerrors.Internal, Msg: "503"}}
		}
		return testbucket.Fault{}
	})
	r := <-l.Append([]byte("a"))
	require.NoError(t, r.Err)
	require.Equal(t, 3, fb.Count("put"))

	mu.Lock()
	failures = 3
	mu.Unlock()
	r = <-l.Append([]byte("b"))
	require.Error(t, r.Err)
	require.NotErrorIs(t, r.Err, metalog.ErrFenced)
	require.Equal(t, 6, fb.Count("put"))

	// Errors that are not transient are not retried.
	fb.Set(func(op, key string) testbucket.Fault {
		if op == "put" {
			return testbucket.Fault{Err: &testbucket.Error{Code: gcerrors.PermissionDenied, Msg: "403"}}
		}
		return testbucket.Fault{}
	})
	require.NoError(t, l.Read(t.Context(), 0, func(int64, []byte) error { return nil })) // clears the failure
	r = <-l.Append([]byte("c"))
	require.Error(t, r.Err)
	require.Equal(t, 7, fb.Count("put"))
}

// TestBucketAmbiguousPut: a put that reached the bucket but reported an
// error is retried; the retry finds the object, reads it back, and it is
// ours: success, not fenced.
func TestBucketAmbiguousPut(t *testing.T) {
	b, fb := testbucket.Wrap(t, testbucket.New(t, "mem"))
	l := openTestBucketLog(t, b, nil)
	first := true
	fb.Set(func(op, key string) testbucket.Fault {
		if op == "put" && first {
			first = false
			return testbucket.Fault{Err: &testbucket.Error{Code: gcerrors.DeadlineExceeded, Msg: "timeout after the write"}, After: true}
		}
		return testbucket.Fault{}
	})
	r := <-l.Append([]byte("mine"))
	require.NoError(t, r.Err)
	require.Equal(t, int64(0), r.Offset)
	r = <-l.Append([]byte("next"))
	require.NoError(t, r.Err)
	require.Equal(t, int64(1), r.Offset)
}

// TestBucketAmbiguousPutFenced: as above, but the object found is
// another writer's: fenced.
func TestBucketAmbiguousPutFenced(t *testing.T) {
	inner := testbucket.New(t, "mem")
	b, fb := testbucket.Wrap(t, inner)
	l := openTestBucketLog(t, b, nil)
	first := true
	fb.Set(func(op, key string) testbucket.Fault {
		if op == "put" && first {
			first = false
			// Another writer's put lands while ours times out.
			if err := inner.WriteAll(context.Background(), key, []byte("theirs"), nil); err != nil {
				panic(err)
			}
			return testbucket.Fault{Err: &testbucket.Error{Code: gcerrors.DeadlineExceeded, Msg: "timeout"}}
		}
		return testbucket.Fault{}
	})
	r := <-l.Append([]byte("mine"))
	require.ErrorIs(t, r.Err, metalog.ErrFenced)
}

// TestBucketCloseDuringPut: Close abandons the put in flight and fails
// it and the queued appends with metalog.ErrClosed, without waiting for the
// bucket.
func TestBucketCloseDuringPut(t *testing.T) {
	b, fb := testbucket.Wrap(t, testbucket.New(t, "mem"))
	l := openTestBucketLog(t, b, nil)
	entered := make(chan struct{})
	never := make(chan struct{})
	fb.Set(func(op, key string) testbucket.Fault {
		if op == "put" {
			close(entered)
			return testbucket.Fault{Wait: never}
		}
		return testbucket.Fault{}
	})
	ch1 := l.Append([]byte("a"))
	ch2 := l.Append([]byte("b"))
	<-entered
	require.NoError(t, l.Close())
	require.ErrorIs(t, (<-ch1).Err, metalog.ErrClosed)
	require.ErrorIs(t, (<-ch2).Err, metalog.ErrClosed)
}

// TestBucketQueue: appends queue behind the put in flight, and Append
// blocks at MaxQueued.
func TestBucketQueue(t *testing.T) {
	b, fb := testbucket.Wrap(t, testbucket.New(t, "mem"))
	opts := testBucketLogOptions()
	opts.MaxQueued = 2
	l := openTestBucketLog(t, b, opts)
	require.Equal(t, 1, l.MaxInFlight())
	gate := make(chan struct{})
	fb.Set(func(op, key string) testbucket.Fault {
		if op == "put" {
			return testbucket.Fault{Wait: gate}
		}
		return testbucket.Fault{}
	})
	ch0 := l.Append([]byte("0"))
	ch1 := l.Append([]byte("1"))
	require.Equal(t, int64(2), l.End())
	third := make(chan (<-chan metalog.AppendResult))
	go func() { third <- l.Append([]byte("2")) }()
	select {
	case <-third:
		t.Fatal("Append did not block at MaxQueued")
	default:
	}
	close(gate)
	require.Equal(t, int64(0), (<-ch0).Offset)
	require.Equal(t, int64(1), (<-ch1).Offset)
	r := <-<-third
	require.NoError(t, r.Err)
	require.Equal(t, int64(2), r.Offset)
}

// TestBucketTrimGrace: Trim keeps entries younger than TrimGrace
// (relative to the newest), and never the newest.
func TestBucketTrimGrace(t *testing.T) {
	b := testbucket.New(t, "mem")
	opts := testBucketLogOptions()
	opts.TrimGrace = time.Hour
	l := openTestBucketLog(t, b, opts)
	for i := range 5 {
		require.NoError(t, (<-l.Append([]byte{byte(i)})).Err)
	}
	require.NoError(t, l.Trim(t.Context(), 3))
	require.Equal(t, int64(0), l.Start(), "every entry is younger than the grace")

	opts.TrimGrace = -1
	l2 := openTestBucketLog(t, b, opts)
	require.NoError(t, l2.Trim(t.Context(), 100))
	require.Equal(t, int64(4), l2.Start(), "the newest entry stays")
	l3 := openTestBucketLog(t, b, opts)
	require.Equal(t, int64(4), l3.Start())
	require.Equal(t, int64(5), l3.End())
}

// TestBucketReadTrimmedByOther: a Read below this writer's end that
// finds an object gone reports metalog.ErrTrimmed rather than an early end.
func TestBucketReadTrimmedByOther(t *testing.T) {
	b := testbucket.New(t, "mem")
	a := openTestBucketLog(t, b, nil)
	for i := range 6 {
		require.NoError(t, (<-a.Append([]byte{byte(i)})).Err)
	}
	other := openTestBucketLog(t, b, nil)
	require.NoError(t, other.Trim(t.Context(), 4))
	err := a.Read(t.Context(), 1, func(int64, []byte) error { return nil })
	require.ErrorIs(t, err, metalog.ErrTrimmed)
}

// TestBucketReadAhead: a long Read issues GETs in parallel, and a Read
// at the end costs one GET.
func TestBucketReadAhead(t *testing.T) {
	b, fb := testbucket.Wrap(t, testbucket.New(t, "mem"))
	l := openTestBucketLog(t, b, nil)
	for i := range 40 {
		require.NoError(t, (<-l.Append([]byte{byte(i)})).Err)
	}
	before := fb.Count("get")
	require.NoError(t, l.Read(t.Context(), 40, func(int64, []byte) error { return nil }))
	require.Equal(t, before+1, fb.Count("get"))

	var got []int64
	require.NoError(t, l.Read(t.Context(), 0, func(off int64, e []byte) error {
		require.Equal(t, []byte{byte(off)}, e)
		got = append(got, off)
		return nil
	}))
	require.Len(t, got, 40)
	// At most ReadAhead GETs past the end were made, all cancelled or
	// not found.
	require.LessOrEqual(t, fb.Count("get")-before-1, 40+metalog.DefaultBucketReadAhead)
}

// TestBucketHedge: a put that has not answered after the hedge delay is
// sent again; the first answer wins, the other put is cancelled (Close,
// which waits for it, returns although its pause never ends), and the
// log holds the entry once, with no gap. Where the hedge lands but fails
// and the first put then finds the object, our own bytes there are
// success.
func TestBucketHedge(t *testing.T) {
	const warm = 8 // puts before the hedge delay is known
	setup := func(t *testing.T) (*blob.Bucket, *testbucket.Faults, *metalog.Bucket) {
		inner := testbucket.New(t, "mem")
		b, faults := testbucket.Wrap(t, inner)
		opts := testBucketLogOptions()
		opts.HedgeMinDelay = time.Millisecond
		l := openTestBucketLog(t, b, opts)
		for i := range warm {
			r := <-l.Append([]byte{byte(i)})
			require.NoError(t, r.Err)
		}
		return inner, faults, l
	}
	key := fmt.Sprintf("meta/0/log/%020d", warm)
	check := func(t *testing.T, inner *blob.Bucket, l *metalog.Bucket) {
		r := <-l.Append([]byte("next"))
		require.NoError(t, r.Err)
		require.Equal(t, int64(warm+1), r.Offset)
		l2 := openTestBucketLog(t, inner, nil)
		var offs []int64
		require.NoError(t, l2.Read(t.Context(), 0, func(off int64, e []byte) error {
			offs = append(offs, off)
			return nil
		}))
		require.Len(t, offs, warm+2)
		for i, off := range offs {
			require.Equal(t, int64(i), off, "a gap or an entry twice")
		}
	}

	t.Run("loser cancelled", func(t *testing.T) {
		inner, faults, l := setup(t)
		never := make(chan struct{})
		var mu sync.Mutex
		n := 0
		faults.Set(func(op, k string) testbucket.Fault {
			mu.Lock()
			defer mu.Unlock()
			if op == "put" && k == key {
				if n++; n == 1 {
					return testbucket.Fault{Wait: never}
				}
			}
			return testbucket.Fault{}
		})
		r := <-l.Append([]byte("hedged"))
		require.NoError(t, r.Err)
		require.Equal(t, int64(warm), r.Offset)
		st := l.Stats()
		require.Equal(t, int64(1), st.Hedges)
		require.Equal(t, int64(1), st.HedgeWins)
		got, err := inner.ReadAll(t.Context(), key)
		require.NoError(t, err)
		require.Equal(t, "hedged", string(got))
		faults.Set(nil)
		check(t, inner, l)
		require.NoError(t, l.Close(), "Close waits for the cancelled put")
	})

	t.Run("own bytes", func(t *testing.T) {
		inner, faults, l := setup(t)
		release := make(chan struct{})
		var mu sync.Mutex
		n := 0
		faults.Set(func(op, k string) testbucket.Fault {
			mu.Lock()
			defer mu.Unlock()
			if op != "put" || k != key {
				return testbucket.Fault{}
			}
			switch n++; n {
			case 1: // slow: sent on once the hedge has landed
				return testbucket.Fault{Wait: release}
			case 2: // the hedge lands, but its answer is lost
				return testbucket.Fault{Err: &testbucket.Error{Code: gcerrors.Internal, Msg: "answer lost"}, After: true}
			}
			return testbucket.Fault{}
		})
		ch := l.Append([]byte("hedged"))
		require.Eventually(t, func() bool {
			ok, err := inner.Exists(t.Context(), key)
			return err == nil && ok
		}, 10*time.Second, time.Millisecond)
		close(release)
		r := <-ch
		require.NoError(t, r.Err, "a 412 on our own bytes is success")
		require.Equal(t, int64(warm), r.Offset)
		require.GreaterOrEqual(t, l.Stats().Hedges, int64(1))
		faults.Set(nil)
		check(t, inner, l)
	})
}

// TestBucketFencedUnderAmbiguousPuts: every first put of writer A lands
// but reports an error (an answer lost), so each of A's appends is
// retried and settled by reading its object back. A's entries land once
// each; once B has appended, A's queued appends (several behind one
// another) all fail with ErrFenced and none of them lands; after a Read A
// appends again, once. Over memory and a real S3 server.
func TestBucketFencedUnderAmbiguousPuts(t *testing.T) {
	for _, kind := range []string{"mem", "s3"} {
		t.Run("bucket="+kind, func(t *testing.T) {
			inner := testbucket.New(t, kind)
			ab, faults := testbucket.Wrap(t, inner)
			var mu sync.Mutex
			seen := map[string]bool{}
			faults.Set(func(op, key string) testbucket.Fault {
				mu.Lock()
				defer mu.Unlock()
				if op != "put" || seen[key] {
					return testbucket.Fault{}
				}
				seen[key] = true
				return testbucket.Fault{Err: &testbucket.Error{Code: gcerrors.Internal, Msg: "answer lost"}, After: true}
			})
			opts := testBucketLogOptions()
			opts.MaxAttempts = 4
			a := openTestBucketLog(t, ab, opts)
			for i := range 3 {
				r := <-a.Append([]byte(fmt.Sprintf("a%d", i)))
				require.NoError(t, r.Err, "a put that landed and lost its answer is ours")
				require.Equal(t, int64(i), r.Offset)
			}

			b := openTestBucketLog(t, inner, nil)
			require.NoError(t, b.Read(t.Context(), 0, func(int64, []byte) error { return nil }))
			r := <-b.Append([]byte("b3"))
			require.NoError(t, r.Err)
			require.Equal(t, int64(3), r.Offset)

			var chs []<-chan metalog.AppendResult
			for i := range 4 {
				chs = append(chs, a.Append([]byte(fmt.Sprintf("stale%d", i))))
			}
			for i, ch := range chs {
				require.ErrorIs(t, (<-ch).Err, metalog.ErrFenced, "stale append %d", i)
			}

			readAll := func() []string {
				var got []string
				l := openTestBucketLog(t, inner, nil)
				require.NoError(t, l.Read(t.Context(), 0, func(off int64, e []byte) error {
					require.Equal(t, int64(len(got)), off, "a gap")
					got = append(got, string(e))
					return nil
				}))
				return got
			}
			require.Equal(t, []string{"a0", "a1", "a2", "b3"}, readAll(), "a stale entry landed, or an entry twice")

			require.NoError(t, a.Read(t.Context(), 0, func(int64, []byte) error { return nil }))
			r = <-a.Append([]byte("a4"))
			require.NoError(t, r.Err)
			require.Equal(t, int64(4), r.Offset)
			require.Equal(t, []string{"a0", "a1", "a2", "b3", "a4"}, readAll())
		})
	}
}
