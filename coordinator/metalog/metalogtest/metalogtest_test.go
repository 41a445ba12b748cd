package metalogtest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/coordinator/metalog/metalogtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// bugEnv names the bug that TestToyLog's toy log has, in the child
// processes of TestSuiteCatchesBugs.
const bugEnv = "METALOGTEST_BUG"

// The bugs of the toy log, each with the subtest that must catch it.
var bugs = []struct{ bug, catcher string }{
	{"ack-early", "Durable"},           // reports an append before its entry is stored
	{"reuse-offset", "Fencing"},        // a writer appends at its end without checking that it is still free
	{"trim-newest", "Trim"},            // Trim drops the newest entry
	{"gap", "Offsets"},                 // skips an offset after ten entries
	{"forget-failure", "FailedAppend"}, // appends succeed again right after a failure
	{"open-after-close", "Close"},      // appends still work after Close
	{"no-wake", "Wait"},                // Wait never sees an entry it did not find at once
	{"read-failed", "ReadDurableOnly"}, // a failed append's entry is stored anyway
}

// TestToyLog runs the suite against the toy log: with no bug it passes,
// which shows that each bug below is what makes its child fail.
func TestToyLog(t *testing.T) {
	bug := os.Getenv(bugEnv)
	metalogtest.Run(t, func(t *testing.T) metalogtest.Harness {
		st := &toyStore{bug: bug}
		return metalogtest.Harness{
			Open:   func(t *testing.T) metalog.Log { return st.open() },
			Shared: true,
			Fail:   func(t *testing.T, l metalog.Log) { l.(*toyLog).failNext() },
		}
	})
}

// TestSuiteCatchesBugs runs TestToyLog in a child process once per bug:
// the child must fail, in the subtest that checks the promise the bug
// breaks.
func TestSuiteCatchesBugs(t *testing.T) {
	if os.Getenv(bugEnv) != "" {
		t.Skip("in a child process")
	}
	for _, b := range bugs {
		t.Run(b.bug, func(t *testing.T) {
			t.Parallel()
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestToyLog$/^"+b.catcher+"$", "-test.timeout=2m")
			cmd.Env = append(os.Environ(), bugEnv+"="+b.bug)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a log with bug %q:\n%s", b.bug, out)
			}
			if want := "--- FAIL: TestToyLog/" + b.catcher + " "; !strings.Contains(string(out), want) {
				t.Fatalf("bug %q: subtest %s did not fail:\n%s", b.bug, b.catcher, out)
			}
		})
	}
}

// toyStore is the entries that every handle of a toy log shares.
type toyStore struct {
	bug string

	mu      sync.Mutex
	start   int64
	entries map[int64][]byte
	end     int64
	grew    chan struct{}
}

// toyLog is a small, synchronous Log: each append is stored (or fails)
// inside Append. With no bug it keeps every promise of metalog.Log.
type toyLog struct {
	s *toyStore

	mu       sync.Mutex
	end      int64 // this writer's end
	failed   error // appends fail with it until a Read reaches the end
	failNxt  bool
	closed   bool
	done     chan struct{}
	appended int
}

var _ metalog.Log = (*toyLog)(nil)

func (s *toyStore) open() *toyLog {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.entries == nil {
		s.entries = map[int64][]byte{}
		s.grew = make(chan struct{})
	}
	return &toyLog{s: s, end: s.end, done: make(chan struct{})}
}

func (l *toyLog) failNext() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failNxt = true
}

func (l *toyLog) Append(entry []byte) <-chan metalog.AppendResult {
	ch := make(chan metalog.AppendResult, 1)
	bug := l.s.bug
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed && bug != "open-after-close":
		ch <- metalog.AppendResult{Err: metalog.ErrClosed}
		return ch
	case l.failNxt:
		l.failNxt, l.failed = false, errors.New("toy: injected failure")
		if bug == "read-failed" {
			l.s.mu.Lock()
			l.s.store(l.end, entry)
			l.s.mu.Unlock()
		}
		ch <- metalog.AppendResult{Err: l.failed}
		return ch
	case l.failed != nil && bug != "forget-failure":
		ch <- metalog.AppendResult{Err: fmt.Errorf("toy: an earlier append failed: %w", l.failed)}
		return ch
	}
	l.failed = nil
	s := l.s
	s.mu.Lock()
	defer s.mu.Unlock()
	off := l.end
	if bug == "gap" && l.appended == 10 {
		off++
	}
	if s.end != l.end && bug != "reuse-offset" && bug != "gap" {
		l.failed = fmt.Errorf("%w: toy offset %d taken", metalog.ErrFenced, off)
		ch <- metalog.AppendResult{Err: l.failed}
		return ch
	}
	l.appended++
	l.end = off + 1
	if bug == "ack-early" {
		go func() {
			time.Sleep(50 * time.Millisecond)
			s.mu.Lock()
			defer s.mu.Unlock()
			s.store(off, entry)
		}()
	} else {
		s.store(off, entry)
	}
	ch <- metalog.AppendResult{Offset: off}
	return ch
}

// store puts entry at off. The caller holds s.mu.
func (s *toyStore) store(off int64, entry []byte) {
	s.entries[off] = entry
	s.end = max(s.end, off+1)
	close(s.grew)
	s.grew = make(chan struct{})
}

func (l *toyLog) MaxInFlight() int { return 1 }

func (l *toyLog) Read(ctx context.Context, from int64, fn func(int64, []byte) error) error {
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return metalog.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s := l.s
	s.mu.Lock()
	start, end := s.start, s.end
	var es [][]byte
	for off := max(from, start); off < end; off++ {
		es = append(es, s.entries[off])
	}
	s.mu.Unlock()
	if from < start {
		return fmt.Errorf("%w: toy offset %d", metalog.ErrTrimmed, from)
	}
	for i, e := range es {
		if e == nil {
			break // stored late (ack-early)
		}
		if err := fn(from+int64(i), e); err != nil {
			return err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if from <= l.end {
		l.end, l.failed = max(l.end, end), nil
	}
	return nil
}

func (l *toyLog) Wait(ctx context.Context, offset int64) (int64, error) {
	for {
		l.mu.Lock()
		closed := l.closed
		l.mu.Unlock()
		if closed {
			return 0, metalog.ErrClosed
		}
		l.s.mu.Lock()
		end, grew := l.s.end, l.s.grew
		l.s.mu.Unlock()
		if end > offset {
			return end, nil
		}
		if l.s.bug == "no-wake" {
			grew = nil
		}
		select {
		case <-grew:
		case <-l.done:
			return 0, metalog.ErrClosed
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

func (l *toyLog) Start() int64 {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	return l.s.start
}

func (l *toyLog) End() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.end
}

func (l *toyLog) Trim(ctx context.Context, before int64) error {
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return metalog.ErrClosed
	}
	s := l.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bug != "trim-newest" {
		before = min(before, s.end-1)
	}
	for off := s.start; off < before; off++ {
		delete(s.entries, off)
	}
	s.start = max(s.start, before)
	return nil
}

func (l *toyLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.done)
	}
	return nil
}
