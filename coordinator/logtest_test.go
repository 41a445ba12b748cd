package coordinator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gocloud.dev/gcerrors"
)

// This file is the conformance suite of the Log interface: every
// implementation must pass TestLogConformance, and every implementation
// with more than one writer TestLogFencing.

// logImpl is one Log implementation under the suite.
type logImpl struct {
	name string
	// storage makes new, empty storage and returns a function that opens
	// a handle on it: a reopen after Close, or a second writer.
	storage func(t *testing.T) func(t *testing.T) Log
	// twoWriters: two handles may be open at once, fenced.
	twoWriters bool
	// concurrentSkip, if not "", is why two writers appending at the same
	// moment are not tested.
	concurrentSkip string
	// fail makes the next append of l fail. The caller has received every
	// result of l.
	fail func(t *testing.T, l Log)
	// failSticky: after a failure, the log must be reopened to append
	// again (else a Read clears the failure).
	failSticky bool
}

// errLogInjected is the failure that the suite injects.
var errLogInjected = errors.New("injected failure")

func logImpls() []logImpl {
	bucketImpl := func(kind string) logImpl {
		return logImpl{
			name: "bucket-" + kind,
			storage: func(t *testing.T) func(t *testing.T) Log {
				b, _ := newLogFaultBucket(t, newTestBucket(t, kind))
				return func(t *testing.T) Log { return openTestBucketLog(t, b, nil) }
			},
			twoWriters: true,
			fail: func(t *testing.T, l Log) {
				var fb *logFaultBucket
				require.True(t, l.(*BucketLog).bucket.As(&fb))
				var once sync.Once
				fb.setFault(func(op, key string) logFault {
					var f logFault
					if op == "put" {
						once.Do(func() { f.err = &logFaultError{gcerrors.PermissionDenied, errLogInjected.Error()} })
					}
					return f
				})
			},
		}
	}
	return []logImpl{
		{
			name: "mem",
			storage: func(t *testing.T) func(t *testing.T) Log {
				root := NewMemLog(nil)
				t.Cleanup(func() { root.Close() })
				return func(t *testing.T) Log {
					l := root.Writer()
					t.Cleanup(func() { l.Close() })
					return l
				}
			},
			twoWriters: true,
			fail:       func(t *testing.T, l Log) { l.(*MemLog).FailNext(errLogInjected) },
		},
		{
			name: "mem-latency",
			storage: func(t *testing.T) func(t *testing.T) Log {
				root := NewMemLog(&MemLogOptions{Latency: 50 * time.Microsecond, MaxInFlight: 8})
				t.Cleanup(func() { root.Close() })
				return func(t *testing.T) Log {
					l := root.Writer()
					t.Cleanup(func() { l.Close() })
					return l
				}
			},
			twoWriters: true,
			fail:       func(t *testing.T, l Log) { l.(*MemLog).FailNext(errLogInjected) },
		},
		{
			name: "file",
			storage: func(t *testing.T) func(t *testing.T) Log {
				dir := t.TempDir()
				return func(t *testing.T) Log {
					l, err := OpenFileLog(dir, &FileLogOptions{SegmentBytes: 4 << 10, MaxInFlight: 32})
					require.NoError(t, err)
					t.Cleanup(func() { l.Close() })
					return l
				}
			},
			fail: func(t *testing.T, l Log) {
				// The syncer is idle: make its next write fail.
				require.NoError(t, l.(*FileLog).cur.Close())
			},
			failSticky: true,
		},
		bucketImpl("mem"),
		bucketImpl("s3"),
		func() logImpl {
			impl := bucketImpl("file")
			impl.concurrentSkip = "fileblob's IfNotExist (gocloud v0.47) is a stat then a rename, not atomic: two puts of one key at the same moment may both succeed (see fileblob writer.Close)"
			return impl
		}(),
	}
}

// logTestEntry is the suite's entry number i: a few hundred bytes at most,
// some of them empty.
func logTestEntry(i int64) []byte {
	if i%97 == 5 {
		return []byte{}
	}
	n := int(i*7919) % 300
	return append([]byte(fmt.Sprintf("entry-%d-", i)), bytes.Repeat([]byte{byte(i)}, n)...)
}

// logRead is an entry read back.
type logRead struct {
	off   int64
	entry []byte
}

// readLogAll reads l from from to its end.
func readLogAll(t *testing.T, l Log, from int64) []logRead {
	t.Helper()
	var got []logRead
	err := l.Read(t.Context(), from, func(off int64, e []byte) error {
		got = append(got, logRead{off, bytes.Clone(e)})
		return nil
	})
	require.NoError(t, err)
	return got
}

// requireLogEntries checks that got holds the suite's entries from..to.
func requireLogEntries(t *testing.T, got []logRead, from, to int64) {
	t.Helper()
	require.Len(t, got, int(to-from))
	for i, r := range got {
		require.Equal(t, from+int64(i), r.off)
		require.Equal(t, logTestEntry(r.off), r.entry, "offset %d", r.off)
	}
}

// appendLogEntries appends the suite's entries from..to without waiting,
// then checks that each gets its offset, in order.
func appendLogEntries(t *testing.T, l Log, from, to int64) {
	t.Helper()
	chs := make([]<-chan AppendResult, 0, to-from)
	for i := from; i < to; i++ {
		chs = append(chs, l.Append(logTestEntry(i)))
	}
	for i, ch := range chs {
		r := <-ch
		require.NoError(t, r.Err)
		require.Equal(t, from+int64(i), r.Offset)
	}
}

func TestLogConformance(t *testing.T) {
	for _, impl := range logImpls() {
		t.Run("log="+impl.name, func(t *testing.T) {
			t.Parallel()
			runLogConformance(t, impl)
		})
	}
}

func runLogConformance(t *testing.T, impl logImpl) {
	t.Run("RoundTrip", func(t *testing.T) {
		l := impl.storage(t)(t)
		require.Equal(t, int64(0), l.Start())
		require.Equal(t, int64(0), l.End())
		require.GreaterOrEqual(t, l.MaxInFlight(), 1)
		require.Empty(t, readLogAll(t, l, 0))
		appendLogEntries(t, l, 0, 100)
		require.Equal(t, int64(0), l.Start())
		require.Equal(t, int64(100), l.End())
		requireLogEntries(t, readLogAll(t, l, 0), 0, 100)
	})

	t.Run("ReadFrom", func(t *testing.T) {
		l := impl.storage(t)(t)
		appendLogEntries(t, l, 0, 100)
		for _, from := range []int64{0, 1, 37, 64, 99, 100} {
			requireLogEntries(t, readLogAll(t, l, from), from, 100)
		}
		require.Empty(t, readLogAll(t, l, 105))
	})

	t.Run("ReadStops", func(t *testing.T) {
		l := impl.storage(t)(t)
		appendLogEntries(t, l, 0, 20)
		stop := errors.New("stop")
		n := 0
		err := l.Read(t.Context(), 3, func(off int64, e []byte) error {
			n++
			if off == 5 {
				return stop
			}
			return nil
		})
		require.ErrorIs(t, err, stop)
		require.Equal(t, 3, n)

		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		err = l.Read(ctx, 0, func(int64, []byte) error { return nil })
		require.ErrorIs(t, err, context.Canceled)
	})

	t.Run("ManyInFlight", func(t *testing.T) {
		l := impl.storage(t)(t)
		n := min(3*int64(max(l.MaxInFlight(), 8)), 600)
		appendLogEntries(t, l, 0, n)
		require.Equal(t, n, l.End())
		requireLogEntries(t, readLogAll(t, l, 0), 0, n)
	})

	t.Run("ReadWhileAppending", func(t *testing.T) {
		l := impl.storage(t)(t)
		const n = 300
		done := make(chan struct{})
		var wg sync.WaitGroup
		for r := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(r), 1))
				for {
					select {
					case <-done:
						return
					default:
					}
					from := rng.Int64N(l.End() + 1)
					next := from
					err := l.Read(t.Context(), from, func(off int64, e []byte) error {
						if off != next {
							return fmt.Errorf("read offset %d, want %d", off, next)
						}
						if !bytes.Equal(e, logTestEntry(off)) {
							return fmt.Errorf("offset %d: wrong entry", off)
						}
						next++
						return nil
					})
					if err != nil {
						t.Errorf("Read from %d: %v", from, err)
						return
					}
				}
			}()
		}
		appendLogEntries(t, l, 0, n)
		close(done)
		wg.Wait()
		requireLogEntries(t, readLogAll(t, l, 0), 0, n)
	})

	t.Run("Trim", func(t *testing.T) {
		open := impl.storage(t)
		l := open(t)
		appendLogEntries(t, l, 0, 200)
		require.NoError(t, l.Trim(t.Context(), 120))
		start := l.Start()
		require.Greater(t, start, int64(0), "Trim dropped nothing")
		require.LessOrEqual(t, start, int64(120))
		requireLogEntries(t, readLogAll(t, l, start), start, 200)
		err := l.Read(t.Context(), start-1, func(int64, []byte) error { return nil })
		require.ErrorIs(t, err, ErrTrimmed)
		require.NoError(t, l.Trim(t.Context(), 10))
		require.Equal(t, start, l.Start())

		appendLogEntries(t, l, 200, 201)
		// Trimming past the end never loses the end, even across a reopen.
		require.NoError(t, l.Trim(t.Context(), 1000))
		start = l.Start()
		require.LessOrEqual(t, start, int64(201))
		require.Equal(t, int64(201), l.End())
		require.NoError(t, l.Close())
		l = open(t)
		require.Equal(t, start, l.Start())
		require.Equal(t, int64(201), l.End())
		requireLogEntries(t, readLogAll(t, l, start), start, 201)
		appendLogEntries(t, l, 201, 202)
	})

	t.Run("Reopen", func(t *testing.T) {
		open := impl.storage(t)
		l := open(t)
		appendLogEntries(t, l, 0, 150)
		require.NoError(t, l.Close())
		l = open(t)
		require.Equal(t, int64(0), l.Start())
		require.Equal(t, int64(150), l.End())
		requireLogEntries(t, readLogAll(t, l, 0), 0, 150)
		appendLogEntries(t, l, 150, 160)
		require.NoError(t, l.Close())
		l = open(t)
		requireLogEntries(t, readLogAll(t, l, 0), 0, 160)
	})

	t.Run("Close", func(t *testing.T) {
		l := impl.storage(t)(t)
		appendLogEntries(t, l, 0, 3)
		require.NoError(t, l.Close())
		require.NoError(t, l.Close())
		require.ErrorIs(t, (<-l.Append([]byte("x"))).Err, ErrLogClosed)
		require.ErrorIs(t, l.Read(t.Context(), 0, func(int64, []byte) error { return nil }), ErrLogClosed)
		require.ErrorIs(t, l.Trim(t.Context(), 1), ErrLogClosed)
		l.Start()
		l.End()
	})

	t.Run("CloseWithPending", func(t *testing.T) {
		open := impl.storage(t)
		l := open(t)
		const n = 200
		chs := make([]<-chan AppendResult, n)
		closed := make(chan error)
		for i := range int64(n) {
			chs[i] = l.Append(logTestEntry(i))
			if i == n/2 {
				go func() { closed <- l.Close() }()
			}
		}
		require.NoError(t, <-closed)
		ok := int64(0)
		for i, ch := range chs {
			r := <-ch
			if r.Err == nil {
				require.Equal(t, ok, int64(i), "a success after a failure")
				require.Equal(t, int64(i), r.Offset)
				ok++
				continue
			}
			require.ErrorIs(t, r.Err, ErrLogClosed)
		}
		l = open(t)
		require.GreaterOrEqual(t, l.End(), ok)
		requireLogEntries(t, readLogAll(t, l, 0), 0, l.End())
	})

	t.Run("FailedAppend", func(t *testing.T) {
		open := impl.storage(t)
		l := open(t)
		appendLogEntries(t, l, 0, 5)
		impl.fail(t, l)
		var chs []<-chan AppendResult
		for i := int64(5); i < 15; i++ {
			chs = append(chs, l.Append(logTestEntry(i)))
		}
		for i, ch := range chs {
			r := <-ch
			require.Error(t, r.Err, "append %d after the failure", i)
			if impl.name != "file" {
				require.ErrorContains(t, r.Err, errLogInjected.Error())
			}
		}
		require.Equal(t, int64(5), l.End())
		require.Error(t, (<-l.Append(logTestEntry(5))).Err, "the failure is sticky")
		requireLogEntries(t, readLogAll(t, l, 0), 0, 5)
		if impl.failSticky {
			l.Close() // may report the failure
			l = open(t)
		} else {
			readLogAll(t, l, 0) // clears the failure
		}
		appendLogEntries(t, l, 5, 8)
		requireLogEntries(t, readLogAll(t, l, 0), 0, 8)
	})
}

func TestLogFencing(t *testing.T) {
	for _, impl := range logImpls() {
		if !impl.twoWriters {
			continue
		}
		t.Run("log="+impl.name, func(t *testing.T) {
			t.Parallel()
			t.Run("Sequence", func(t *testing.T) { testLogFencingSequence(t, impl) })
			// Where the bucket's conditional put is not atomic
			// (concurrentSkip says why), only writers taking turns are
			// fenced; the concurrent case does not apply.
			if impl.concurrentSkip == "" {
				t.Run("Concurrent", func(t *testing.T) { testLogFencingConcurrent(t, impl) })
			}
		})
	}
}

// testLogFencingSequence: writer A appends; writer B, opened later, reads
// to the end and appends; A's appends fail with ErrFenced and leave
// nothing; A reads and appends after B; then B is fenced.
func testLogFencingSequence(t *testing.T, impl logImpl) {
	open := impl.storage(t)
	a := open(t)
	r := <-a.Append([]byte("a0"))
	require.NoError(t, r.Err)
	require.Equal(t, int64(0), r.Offset)

	b := open(t)
	require.Equal(t, int64(1), b.End())
	require.Len(t, readLogAll(t, b, 0), 1)
	r = <-b.Append([]byte("b1"))
	require.NoError(t, r.Err)
	require.Equal(t, int64(1), r.Offset)

	a1, a2 := a.Append([]byte("a1")), a.Append([]byte("a2"))
	require.ErrorIs(t, (<-a1).Err, ErrFenced)
	require.ErrorIs(t, (<-a2).Err, ErrFenced)
	require.ErrorIs(t, (<-a.Append([]byte("a3"))).Err, ErrFenced, "fenced until a Read")

	want := []logRead{{0, []byte("a0")}, {1, []byte("b1")}}
	require.Equal(t, want, readLogAll(t, b, 0))

	// A reads what B wrote and claims the log again.
	require.Equal(t, want, readLogAll(t, a, 0))
	require.Equal(t, int64(2), a.End())
	r = <-a.Append([]byte("a4"))
	require.NoError(t, r.Err)
	require.Equal(t, int64(2), r.Offset)

	require.ErrorIs(t, (<-b.Append([]byte("b2"))).Err, ErrFenced)
	want = append(want, logRead{2, []byte("a4")})
	require.Equal(t, want, readLogAll(t, a, 0))
	require.Equal(t, want, readLogAll(t, b, 0))
	r = <-b.Append([]byte("b3"))
	require.NoError(t, r.Err)
	require.Equal(t, int64(3), r.Offset)
}

// testLogFencingConcurrent: two writers append at the same time, each
// reading to the end again whenever it is fenced. No offset is answered
// twice, and every answer is what the log holds.
func testLogFencingConcurrent(t *testing.T, impl logImpl) {
	open := impl.storage(t)
	var (
		mu       sync.Mutex
		answered = map[int64][]byte{}
		fenced   int
		wg       sync.WaitGroup
	)
	const rounds = 60
	for w := range 2 {
		l := open(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			seq := 0
			for round := 0; round < rounds; round++ {
				if err := l.Read(t.Context(), l.End(), func(int64, []byte) error { return nil }); err != nil {
					t.Errorf("writer %d: Read: %v", w, err)
					return
				}
				runtime.Gosched() // let the other writer in between

				var chs []<-chan AppendResult
				var entries [][]byte
				for range 4 {
					e := []byte(fmt.Sprintf("w%d-%d", w, seq))
					seq++
					entries = append(entries, e)
					chs = append(chs, l.Append(e))
				}
				for i, ch := range chs {
					r := <-ch
					if r.Err != nil {
						if !errors.Is(r.Err, ErrFenced) {
							t.Errorf("writer %d: %v", w, r.Err)
						}
						mu.Lock()
						fenced++
						mu.Unlock()
						continue
					}
					mu.Lock()
					if prev, ok := answered[r.Offset]; ok {
						t.Errorf("offset %d answered twice: %q and %q", r.Offset, prev, entries[i])
					}
					answered[r.Offset] = entries[i]
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	l := open(t)
	got := readLogAll(t, l, 0)
	require.NotEmpty(t, got)
	for i, r := range got {
		require.Equal(t, int64(i), r.off)
		if want, ok := answered[r.off]; ok {
			require.Equal(t, want, r.entry, "offset %d", r.off)
		}
	}
	require.Len(t, answered, len(got), "an answered append is missing, or an unanswered one is in the log")
	t.Logf("%d entries, %d appends fenced", len(got), fenced)
}
