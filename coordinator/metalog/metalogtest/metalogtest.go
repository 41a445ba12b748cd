// Package metalogtest is the conformance suite of metalog.Log: every
// implementation, ours (File, Bucket, Mem, and etcdlog.Log) and a user's
// (a log over their own consensus system), runs it with one call before
// the coordinator trusts it, the way go-cloud's drivertest lets each blob
// driver prove itself:
//
//	func TestConformance(t *testing.T) {
//		metalogtest.Run(t, func(t *testing.T) metalogtest.Harness {
//			dir := t.TempDir()
//			return metalogtest.Harness{
//				Open: func(t *testing.T) metalog.Log { ... open the log in dir ... },
//				Fail: func(t *testing.T, l metalog.Log) { ... make its next append fail ... },
//			}
//		})
//	}
//
// Each promise of the Log doc is its own subtest (Offsets, Durable,
// FailedAppend, ReadDurableOnly, ReadTrimmed, Trim, Reopen, Fencing,
// Claim, Close, CloseWithPending, ReadWhileAppending, LargeEntries, Wait,
// ...), so a failure names the promise broken. Crash behaviour that needs a
// process to be killed is not checked here: each implementation tests it
// on its own.
package metalogtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/coordinator/metalog"
)

// LargeEntryBytes is the size of the large entries the suite appends when
// Harness.MaxEntryBytes is 0: the coordinator writes entries this large
// (a commit of thousands of partitions) and every log must take them.
const LargeEntryBytes = 4<<20 + 17

// Harness is one implementation under the suite, over new, empty storage.
// Run asks for a new Harness in every subtest.
type Harness struct {
	// Open opens a handle on the storage: the first finds it empty; one
	// opened after every other handle is closed is a reopen, and finds
	// what they left. Where Shared, a handle may be opened while others
	// are open, as another process would. The suite closes every handle it
	// opens (Close is called at least once; twice is allowed).
	Open func(t *testing.T) metalog.Log

	// Shared: several handles may be open on the storage at once, each a
	// writer appending at the end it knows, fenced by the others (Mem,
	// Bucket). False for a log that one process owns at a time (File):
	// the fencing subtests are skipped.
	Shared bool

	// NotAtomic, if not "", is why two handles appending at the same
	// moment may both succeed (fileblob's IfNotExist is a check then a
	// rename): the subtests of concurrent writers (FencingConcurrent,
	// Claim) are skipped with it.
	NotAtomic string

	// Fail makes the next append through l fail, as a failure of the
	// storage would; no append of l is pending. It is required: the
	// suite checks what a failure does.
	Fail func(t *testing.T, l metalog.Log)

	// FailNeedsReopen: after a failed append, the writer appends again
	// only once the log is reopened (File), rather than once it has read
	// to the end.
	FailNeedsReopen bool

	// MaxEntryBytes is the size of the large entries appended; 0 means
	// LargeEntryBytes.
	MaxEntryBytes int
}

// Run runs the suite: newHarness returns an implementation over new,
// empty storage, for each subtest.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Helper()
	s := func(t *testing.T) *suite {
		h := newHarness(t)
		require.NotNil(t, h.Open, "Harness.Open is required")
		require.NotNil(t, h.Fail, "Harness.Fail is required")
		return &suite{h: h}
	}
	for _, c := range []struct {
		name string
		fn   func(t *testing.T, s *suite)
	}{
		{"Empty", testEmpty},
		{"Offsets", testOffsets},
		{"ReadFrom", testReadFrom},
		{"ReadStops", testReadStops},
		{"ManyInFlight", testManyInFlight},
		{"Durable", testDurable},
		{"ReadDurableOnly", testReadDurableOnly},
		{"FailedAppend", testFailedAppend},
		{"ReadTrimmed", testReadTrimmed},
		{"Trim", testTrim},
		{"Reopen", testReopen},
		{"Close", testClose},
		{"CloseWithPending", testCloseWithPending},
		{"ReadWhileAppending", testReadWhileAppending},
		{"LargeEntries", testLargeEntries},
		{"Wait", testWait},
		{"Fencing", testFencing},
		{"FencingConcurrent", testFencingConcurrent},
		{"Claim", testClaim},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, s(t)) })
	}
}

// suite is one subtest's harness.
type suite struct {
	h Harness
}

// open opens a handle, closed at the end of the subtest.
func (s *suite) open(t *testing.T) metalog.Log {
	t.Helper()
	l := s.h.Open(t)
	require.NotNil(t, l, "Harness.Open returned nil")
	t.Cleanup(func() { l.Close() })
	return l
}

// Entry is the suite's entry number i: a few hundred bytes at most, some
// of them empty. Implementations' own tests may use it too.
func Entry(i int64) []byte {
	if i%97 == 5 {
		return []byte{}
	}
	n := int(i*7919) % 300
	return append([]byte(fmt.Sprintf("entry-%d-", i)), bytes.Repeat([]byte{byte(i)}, n)...)
}

// Read is an entry read back.
type Read struct {
	Offset int64
	Entry  []byte
}

// ReadAll reads l from from on, copying the entries.
func ReadAll(t testing.TB, l metalog.Log, from int64) []Read {
	t.Helper()
	var got []Read
	err := l.Read(context.Background(), from, func(off int64, e []byte) error {
		got = append(got, Read{off, bytes.Clone(e)})
		return nil
	})
	require.NoError(t, err)
	return got
}

// RequireEntries checks that got is Entry(from) to Entry(to-1) at their
// offsets.
func RequireEntries(t testing.TB, got []Read, from, to int64) {
	t.Helper()
	require.Len(t, got, int(to-from))
	for i, r := range got {
		require.Equal(t, from+int64(i), r.Offset)
		require.Equal(t, Entry(r.Offset), r.Entry, "offset %d", r.Offset)
	}
}

// AppendEntries appends Entry(from) to Entry(to-1) without waiting, then
// checks that each gets its offset, in order.
func AppendEntries(t testing.TB, l metalog.Log, from, to int64) {
	t.Helper()
	chs := make([]<-chan metalog.AppendResult, 0, to-from)
	for i := from; i < to; i++ {
		chs = append(chs, l.Append(Entry(i)))
	}
	for i, ch := range chs {
		r := <-ch
		require.NoError(t, r.Err, "append %d", from+int64(i))
		require.Equal(t, from+int64(i), r.Offset, "results in append order, offsets without gaps")
	}
}

// errStop stops a Read.
var errStop = errors.New("metalogtest: stop")

func testEmpty(t *testing.T, s *suite) {
	l := s.open(t)
	require.Equal(t, int64(0), l.Start())
	require.Equal(t, int64(0), l.End())
	require.GreaterOrEqual(t, l.MaxInFlight(), 1)
	require.Empty(t, ReadAll(t, l, 0))
	require.NoError(t, l.Trim(t.Context(), 10), "Trim of an empty log")
	require.Equal(t, int64(0), l.Start())
}

func testOffsets(t *testing.T, s *suite) {
	l := s.open(t)
	AppendEntries(t, l, 0, 100)
	require.Equal(t, int64(0), l.Start())
	require.Equal(t, int64(100), l.End())
	RequireEntries(t, ReadAll(t, l, 0), 0, 100)
	// One at a time, waiting for each.
	for i := int64(100); i < 110; i++ {
		r := <-l.Append(Entry(i))
		require.NoError(t, r.Err)
		require.Equal(t, i, r.Offset)
		require.Equal(t, i+1, l.End())
	}
	RequireEntries(t, ReadAll(t, l, 0), 0, 110)
}

func testReadFrom(t *testing.T, s *suite) {
	l := s.open(t)
	AppendEntries(t, l, 0, 100)
	for _, from := range []int64{0, 1, 37, 64, 99, 100} {
		RequireEntries(t, ReadAll(t, l, from), from, 100)
	}
	require.Empty(t, ReadAll(t, l, 105), "a Read past the end reads nothing")
}

func testReadStops(t *testing.T, s *suite) {
	l := s.open(t)
	AppendEntries(t, l, 0, 20)
	n := 0
	err := l.Read(t.Context(), 3, func(off int64, e []byte) error {
		n++
		if off == 5 {
			return errStop
		}
		return nil
	})
	require.ErrorIs(t, err, errStop, "Read returns fn's error")
	require.Equal(t, 3, n, "Read stops at fn's error")

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err = l.Read(ctx, 0, func(int64, []byte) error { return nil })
	require.ErrorIs(t, err, context.Canceled)
}

func testManyInFlight(t *testing.T, s *suite) {
	l := s.open(t)
	n := min(3*int64(max(l.MaxInFlight(), 8)), 600)
	AppendEntries(t, l, 0, n)
	require.Equal(t, n, l.End())
	RequireEntries(t, ReadAll(t, l, 0), 0, n)
}

// testDurable: an append is reported only once durable. Where another
// handle may be open, it must read each entry as soon as its result
// arrives; in any case a reopen finds every reported entry.
func testDurable(t *testing.T, s *suite) {
	l := s.open(t)
	var other metalog.Log
	if s.h.Shared {
		other = s.open(t)
	}
	const n = 60
	chs := make([]<-chan metalog.AppendResult, 0, n)
	for i := range int64(n) {
		chs = append(chs, l.Append(Entry(i)))
	}
	for i, ch := range chs {
		r := <-ch
		require.NoError(t, r.Err)
		require.Equal(t, int64(i), r.Offset)
		if other == nil {
			continue
		}
		var got []byte
		found := false
		err := other.Read(t.Context(), r.Offset, func(off int64, e []byte) error {
			if off == r.Offset {
				got, found = bytes.Clone(e), true
			}
			return errStop
		})
		if !found {
			require.NoError(t, err)
		}
		require.True(t, found, "offset %d was reported, but another handle cannot read it: reported before durable", r.Offset)
		require.Equal(t, Entry(r.Offset), got, "offset %d", r.Offset)
	}
	require.NoError(t, l.Close())
	if other != nil {
		require.NoError(t, other.Close())
	}
	RequireEntries(t, ReadAll(t, s.open(t), 0), 0, n)
}

// testReadDurableOnly: a Read returns every entry reported before it was
// called, and never one whose append failed.
func testReadDurableOnly(t *testing.T, s *suite) {
	l := s.open(t)
	AppendEntries(t, l, 0, 30)
	RequireEntries(t, ReadAll(t, l, 0), 0, 30)
	if s.h.Shared {
		RequireEntries(t, ReadAll(t, s.open(t), 0), 0, 30)
	}

	s.h.Fail(t, l)
	var chs []<-chan metalog.AppendResult
	for i := int64(30); i < 40; i++ {
		chs = append(chs, l.Append([]byte(fmt.Sprintf("failed-%d", i))))
	}
	for i, ch := range chs {
		require.Error(t, (<-ch).Err, "append %d after the injected failure", 30+i)
	}
	got := ReadAll(t, l, 0)
	RequireEntries(t, got, 0, 30)
	if s.h.FailNeedsReopen {
		l.Close()
		l = s.open(t)
	}
	RequireEntries(t, ReadAll(t, l, 0), 0, 30)
	if s.h.Shared {
		RequireEntries(t, ReadAll(t, s.open(t), 0), 0, 30)
	}
}

func testFailedAppend(t *testing.T, s *suite) {
	l := s.open(t)
	AppendEntries(t, l, 0, 5)
	s.h.Fail(t, l)
	var chs []<-chan metalog.AppendResult
	for i := int64(5); i < 15; i++ {
		chs = append(chs, l.Append(Entry(i)))
	}
	for i, ch := range chs {
		require.Error(t, (<-ch).Err, "append %d after the failure: an append that fails fails every later one", i)
	}
	require.Equal(t, int64(5), l.End(), "End after a failure")
	require.Error(t, (<-l.Append(Entry(5))).Err, "the failure is sticky until the writer reads to the end or reopens")
	RequireEntries(t, ReadAll(t, l, 0), 0, 5)
	if s.h.FailNeedsReopen {
		l.Close() // may report the failure
		l = s.open(t)
	} else {
		ReadAll(t, l, l.End()) // reading to the end clears the failure
	}
	AppendEntries(t, l, 5, 8)
	RequireEntries(t, ReadAll(t, l, 0), 0, 8)
}

func testReadTrimmed(t *testing.T, s *suite) {
	l := s.open(t)
	AppendEntries(t, l, 0, 50)
	require.NoError(t, l.Trim(t.Context(), 40))
	start := l.Start()
	if start == 0 {
		return // the log kept everything, which Trim allows
	}
	err := l.Read(t.Context(), start-1, func(int64, []byte) error { return nil })
	require.ErrorIs(t, err, metalog.ErrTrimmed, "Read below Start")
	err = l.Read(t.Context(), 0, func(int64, []byte) error { return nil })
	require.ErrorIs(t, err, metalog.ErrTrimmed, "Read below Start")
	RequireEntries(t, ReadAll(t, l, start), start, 50)
}

func testTrim(t *testing.T, s *suite) {
	l := s.open(t)
	AppendEntries(t, l, 0, 200)
	require.NoError(t, l.Trim(t.Context(), 120))
	start := l.Start()
	require.LessOrEqual(t, start, int64(120), "Trim dropped an entry at or after its argument")
	RequireEntries(t, ReadAll(t, l, start), start, 200)
	require.NoError(t, l.Trim(t.Context(), 10), "Trim below Start")
	require.Equal(t, start, l.Start(), "Trim below Start moved it")

	AppendEntries(t, l, 200, 201)
	// Trimming past the end never loses the newest entry, even across a
	// reopen.
	require.NoError(t, l.Trim(t.Context(), 1000))
	start = l.Start()
	require.LessOrEqual(t, start, int64(200), "Trim dropped the newest entry")
	require.Equal(t, int64(201), l.End())
	RequireEntries(t, ReadAll(t, l, start), start, 201)
	require.NoError(t, l.Close())
	l = s.open(t)
	require.Equal(t, start, l.Start(), "Start after a reopen")
	require.Equal(t, int64(201), l.End(), "a reopened log knows its end after Trim")
	RequireEntries(t, ReadAll(t, l, start), start, 201)
	AppendEntries(t, l, 201, 202)
}

// testReopen: a reopen finds exactly the acknowledged entries.
func testReopen(t *testing.T, s *suite) {
	l := s.open(t)
	AppendEntries(t, l, 0, 150)
	require.NoError(t, l.Close())
	l = s.open(t)
	require.Equal(t, int64(0), l.Start())
	require.Equal(t, int64(150), l.End())
	RequireEntries(t, ReadAll(t, l, 0), 0, 150)
	AppendEntries(t, l, 150, 160)
	require.NoError(t, l.Close())
	l = s.open(t)
	require.Equal(t, int64(160), l.End())
	RequireEntries(t, ReadAll(t, l, 0), 0, 160)
}

func testClose(t *testing.T, s *suite) {
	l := s.open(t)
	AppendEntries(t, l, 0, 3)
	require.NoError(t, l.Close())
	require.NoError(t, l.Close(), "a second Close")
	require.ErrorIs(t, (<-l.Append([]byte("x"))).Err, metalog.ErrClosed, "Append after Close")
	require.ErrorIs(t, l.Read(t.Context(), 0, func(int64, []byte) error { return nil }), metalog.ErrClosed, "Read after Close")
	require.ErrorIs(t, l.Trim(t.Context(), 1), metalog.ErrClosed, "Trim after Close")
	_, err := l.Wait(t.Context(), 0)
	require.ErrorIs(t, err, metalog.ErrClosed, "Wait after Close")
	l.Start()
	l.End()
	RequireEntries(t, ReadAll(t, s.open(t), 0), 0, 3)
}

// testCloseWithPending: Close fails or finishes every pending append; the
// log then holds every reported entry and, after them, at most some of
// the failed ones, in order, and nothing else.
func testCloseWithPending(t *testing.T, s *suite) {
	l := s.open(t)
	const n = 200
	chs := make([]<-chan metalog.AppendResult, n)
	closed := make(chan error, 1)
	for i := range int64(n) {
		chs[i] = l.Append(Entry(i))
		if i == n/2 {
			go func() { closed <- l.Close() }()
		}
	}
	ok := int64(0)
	for i, ch := range chs {
		r := <-ch
		if r.Err == nil {
			require.Equal(t, ok, int64(i), "append %d succeeded after one failed", i)
			require.Equal(t, int64(i), r.Offset)
			ok++
			continue
		}
		require.ErrorIs(t, r.Err, metalog.ErrClosed, "append %d", i)
	}
	require.NoError(t, <-closed)
	l = s.open(t)
	require.GreaterOrEqual(t, l.End(), ok, "a reopen lost reported entries")
	RequireEntries(t, ReadAll(t, l, 0), 0, l.End())
}

func testReadWhileAppending(t *testing.T, s *suite) {
	l := s.open(t)
	const n = 300
	done := make(chan struct{})
	var wg sync.WaitGroup
	readers := []metalog.Log{l, l}
	if s.h.Shared {
		readers = append(readers, s.open(t))
	}
	for r, rl := range readers {
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
				err := rl.Read(t.Context(), from, func(off int64, e []byte) error {
					if off != next {
						return fmt.Errorf("read offset %d, want %d", off, next)
					}
					if !bytes.Equal(e, Entry(off)) {
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
	stop := sync.OnceFunc(func() { close(done); wg.Wait() })
	defer stop() // also when AppendEntries fails the test
	AppendEntries(t, l, 0, n)
	stop()
	RequireEntries(t, ReadAll(t, l, 0), 0, n)
}

func testLargeEntries(t *testing.T, s *suite) {
	size := s.h.MaxEntryBytes
	if size == 0 {
		size = LargeEntryBytes
	}
	large := func(i int) []byte {
		b := make([]byte, size-i)
		rng := rand.New(rand.NewPCG(uint64(i), 7))
		for j := 0; j+8 <= len(b); j += 8 {
			v := rng.Uint64()
			for k := range 8 {
				b[j+k] = byte(v >> (8 * k))
			}
		}
		return b
	}
	want := [][]byte{{}, large(0), {}, []byte("small"), large(1), {}}
	l := s.open(t)
	var chs []<-chan metalog.AppendResult
	for _, e := range want {
		chs = append(chs, l.Append(e))
	}
	for i, ch := range chs {
		r := <-ch
		require.NoError(t, r.Err, "entry %d (%d bytes)", i, len(want[i]))
		require.Equal(t, int64(i), r.Offset)
	}
	check := func(l metalog.Log) {
		got := ReadAll(t, l, 0)
		require.Len(t, got, len(want))
		for i, r := range got {
			require.Equal(t, int64(i), r.Offset)
			require.True(t, bytes.Equal(want[i], r.Entry), "entry %d: %d bytes read, %d appended", i, len(r.Entry), len(want[i]))
		}
	}
	check(l)
	require.NoError(t, l.Close())
	check(s.open(t))
}

// testWait: Wait returns at once for an entry the log holds, wakes for an
// entry appended later (by this handle, or by another where Shared), and
// ends with its context or with Close.
func testWait(t *testing.T, s *suite) {
	l := s.open(t)
	// Every wake-up must come within 5 s (a log that polls must poll at
	// least that often).
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	AppendEntries(t, l, 0, 3)
	end, err := l.Wait(ctx, 0)
	require.NoError(t, err)
	require.Greater(t, end, int64(0))
	end, err = l.Wait(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, int64(3), end)

	short, scancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, err = l.Wait(short, 3)
	scancel()
	require.ErrorIs(t, err, context.DeadlineExceeded, "Wait for an entry nobody appends")

	// An append through the same handle wakes it. (Wait must still be
	// waiting a moment later: nothing was appended. Appending after that
	// moment makes it most likely that Wait is asleep when the entry
	// comes, which is what this checks.)
	woke := make(chan error, 1)
	go func() {
		end, err := l.Wait(ctx, 3)
		if err == nil && end <= 3 {
			err = fmt.Errorf("Wait(3) returned end %d", end)
		}
		woke <- err
	}()
	requireWaiting(t, woke)
	AppendEntries(t, l, 3, 4)
	require.NoError(t, <-woke)
	RequireEntries(t, ReadAll(t, l, 3), 3, 4)

	// Another writer's append wakes a follower.
	if s.h.Shared {
		f := s.open(t)
		RequireEntries(t, ReadAll(t, f, 0), 0, 4)
		go func() {
			end, err := f.Wait(ctx, 4)
			if err == nil && end <= 4 {
				err = fmt.Errorf("Wait(4) returned end %d", end)
			}
			woke <- err
		}()
		requireWaiting(t, woke)
		AppendEntries(t, l, 4, 6)
		require.NoError(t, <-woke, "another handle's append did not wake Wait")
		RequireEntries(t, ReadAll(t, f, 4), 4, 6)
	}

	// Close ends a Wait.
	at := l.End()
	go func() {
		_, err := l.Wait(ctx, at+10)
		woke <- err
	}()
	requireWaiting(t, woke)
	require.NoError(t, l.Close())
	require.ErrorIs(t, <-woke, metalog.ErrClosed, "Wait across Close")
}

// requireWaiting checks that a Wait that nothing can end yet has not
// returned 20 ms after it was started.
func requireWaiting(t *testing.T, woke <-chan error) {
	t.Helper()
	select {
	case err := <-woke:
		t.Fatalf("Wait returned before anything was appended: %v", err)
	case <-time.After(20 * time.Millisecond): // real time: the suite drives real logs (etcd, buckets), which have no clock to fake
	}
}
