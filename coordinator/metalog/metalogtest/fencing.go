package metalogtest

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/coordinator/metalog"
)

// testFencing: writer A appends; writer B, opened later, reads to the end
// and appends; A's appends fail with ErrFenced and leave nothing; A reads
// and appends after B; then B is fenced.
func testFencing(t *testing.T, s *suite) {
	if !s.h.Shared {
		t.Skip("one handle at a time (Harness.Shared is false): no second writer to fence")
	}
	a := s.open(t)
	r := <-a.Append([]byte("a0"))
	require.NoError(t, r.Err)
	require.Equal(t, int64(0), r.Offset)

	b := s.open(t)
	require.Len(t, ReadAll(t, b, 0), 1)
	require.Equal(t, int64(1), b.End())
	r = <-b.Append([]byte("b1"))
	require.NoError(t, r.Err)
	require.Equal(t, int64(1), r.Offset)

	a1, a2 := a.Append([]byte("a1")), a.Append([]byte("a2"))
	require.ErrorIs(t, (<-a1).Err, metalog.ErrFenced, "a stale writer's append")
	require.ErrorIs(t, (<-a2).Err, metalog.ErrFenced, "an append queued behind a fenced one")
	require.ErrorIs(t, (<-a.Append([]byte("a3"))).Err, metalog.ErrFenced, "fenced until a Read")

	want := []Read{{0, []byte("a0")}, {1, []byte("b1")}}
	require.Equal(t, want, ReadAll(t, b, 0), "a fenced append left something")

	// A reads what B wrote and takes the log back.
	require.Equal(t, want, ReadAll(t, a, 0))
	require.Equal(t, int64(2), a.End())
	r = <-a.Append([]byte("a4"))
	require.NoError(t, r.Err)
	require.Equal(t, int64(2), r.Offset)

	require.ErrorIs(t, (<-b.Append([]byte("b2"))).Err, metalog.ErrFenced)
	want = append(want, Read{2, []byte("a4")})
	require.Equal(t, want, ReadAll(t, a, 0))
	require.Equal(t, want, ReadAll(t, b, 0))
	r = <-b.Append([]byte("b3"))
	require.NoError(t, r.Err)
	require.Equal(t, int64(3), r.Offset)
}

// testFencingConcurrent: two writers append at the same time, each reading
// to the end again whenever it is fenced. No offset is answered twice, and
// every answer is what the log holds.
func testFencingConcurrent(t *testing.T, s *suite) {
	switch {
	case !s.h.Shared:
		t.Skip("one handle at a time (Harness.Shared is false): no second writer to fence")
	case s.h.NotAtomic != "":
		t.Skip(s.h.NotAtomic)
	}
	var (
		mu       sync.Mutex
		answered = map[int64][]byte{}
		fenced   int
		wg       sync.WaitGroup
	)
	const rounds = 60
	for w := range 2 {
		l := s.open(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			seq := 0
			for range rounds {
				if err := l.Read(t.Context(), l.End(), func(int64, []byte) error { return nil }); err != nil {
					t.Errorf("writer %d: Read: %v", w, err)
					return
				}
				runtime.Gosched() // let the other writer in between
				var chs []<-chan metalog.AppendResult
				var entries [][]byte
				for range 4 {
					e := []byte(fmt.Sprintf("w%d-%d", w, seq))
					seq++
					entries = append(entries, e)
					chs = append(chs, l.Append(e))
				}
				for i, ch := range chs {
					r := <-ch
					mu.Lock()
					switch {
					case r.Err != nil:
						if !errors.Is(r.Err, metalog.ErrFenced) {
							t.Errorf("writer %d: %v", w, r.Err)
						}
						fenced++
					case answered[r.Offset] != nil:
						t.Errorf("offset %d answered twice: %q and %q", r.Offset, answered[r.Offset], entries[i])
					default:
						answered[r.Offset] = entries[i]
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	got := ReadAll(t, s.open(t), 0)
	require.NotEmpty(t, got)
	for i, r := range got {
		require.Equal(t, int64(i), r.Offset)
		if want, ok := answered[r.Offset]; ok {
			require.Equal(t, want, r.Entry, "offset %d holds another entry than the one answered", r.Offset)
		}
	}
	require.Len(t, answered, len(got), "an answered append is missing, or an unanswered one is in the log")
	t.Logf("%d entries, %d appends fenced", len(got), fenced)
}

// testClaim: where the log is a metalog.Claimer, a new writer claims it
// from a busy one: the claim lands at an offset nobody else got, the busy
// writer is fenced from then on, and the claimant appends after it.
func testClaim(t *testing.T, s *suite) {
	switch {
	case !s.h.Shared:
		t.Skip("one handle at a time (Harness.Shared is false): nothing to claim from")
	case s.h.NotAtomic != "":
		t.Skip(s.h.NotAtomic)
	}
	b, ok := s.open(t).(metalog.Claimer)
	if !ok {
		t.Skip("the log is not a metalog.Claimer")
	}
	a := s.open(t)
	AppendEntries(t, a, 0, 5)

	// A keeps appending until it is fenced, as a busy leader does: an
	// append, then the next after a moment (a claim needs that moment: a
	// writer appending back to back at the claimant's own speed could keep
	// one offset ahead of it for ever).
	type answer struct {
		off   int64
		entry []byte
	}
	var answers []answer
	aDone := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			e := []byte(fmt.Sprintf("a-%d", i))
			r := <-a.Append(e)
			if r.Err != nil {
				aDone <- r.Err
				return
			}
			answers = append(answers, answer{r.Offset, e})
			time.Sleep(time.Millisecond) // real time: spaces A's appends among B's, on a real log
		}
	}()
	ReadAll(t, b, b.End())
	claim := []byte("claim")
	off, err := b.Claim(t.Context(), claim)
	require.NoError(t, err)
	require.ErrorIs(t, <-aDone, metalog.ErrFenced, "the claimed-from writer's appends")

	got := map[int64][]byte{}
	for _, r := range ReadAll(t, b, 0) {
		got[r.Offset] = r.Entry
	}
	require.Equal(t, claim, got[off], "the claimed offset holds another entry")
	for _, ans := range answers {
		require.NotEqual(t, off, ans.off, "the claimed offset was also answered to the other writer")
		require.Equal(t, ans.entry, got[ans.off], "offset %d", ans.off)
	}
	require.Equal(t, off+1, b.End())
	r := <-b.Append([]byte("after"))
	require.NoError(t, r.Err)
	require.Equal(t, off+1, r.Offset)
}
