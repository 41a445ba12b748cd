package pipeline

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

type result struct {
	Offset int64
	Err    error
}

var errClosed = errors.New("closed")

// TestQueue: results in order, a failure fails every pending append and
// later ones until Recover, refused appends wait their turn, and Close
// fails what is left.
func TestQueue(t *testing.T) {
	var mu sync.Mutex
	var q Queue[result]
	q.Init(&mu, 4, "test", errClosed)
	mu.Lock()
	defer mu.Unlock()
	chs := make([]chan result, 5)
	for i := range chs {
		chs[i] = make(chan result, 1)
	}
	for i := range 3 {
		if !q.Admit(chs[i]) {
			t.Fatal("refused")
		}
		q.Push(chs[i], int64(i))
	}
	q.Answer(1)
	if r := <-chs[0]; r.Offset != 0 || r.Err != nil {
		t.Fatalf("first result %+v", r)
	}
	boom := errors.New("boom")
	q.Fail(boom)
	if r := <-chs[1]; !errors.Is(r.Err, boom) {
		t.Fatalf("failed head %+v", r)
	}
	if r := <-chs[2]; !errors.Is(r.Err, boom) || r.Err == boom {
		t.Fatalf("behind the failed head %+v", r)
	}
	if q.Admit(chs[3]) {
		t.Fatal("admitted after a failure")
	}
	if r := <-chs[3]; !errors.Is(r.Err, boom) {
		t.Fatalf("after a failure %+v", r)
	}
	q.Recover()
	q.Push(chs[4], 3)
	q.SetClosed()
	late := make(chan result, 1)
	if q.Admit(late) {
		t.Fatal("admitted after close")
	}
	q.Close()
	if r := <-chs[4]; r.Err != errClosed {
		t.Fatalf("pending at Close %+v", r)
	}
	if r := <-late; r.Err != errClosed {
		t.Fatalf("refused at Close %+v", r)
	}
}

// TestPipe: writes pipeline up to MaxInFlight, results come in order
// whatever order the writes end in, and a failed write fails the ones
// behind it until CatchUp.
func TestPipe(t *testing.T) {
	var wg sync.WaitGroup
	var p Pipe[result]
	var inFlight, most int
	var mu sync.Mutex
	fail := map[int64]bool{7: true}
	p.Init(t.Context(), 0, 0, PipeOptions{
		Name: "test", Closed: errClosed, MaxQueued: 16, MaxInFlight: 4, WaitGroup: &wg, Label: "test",
		Write: func(ctx context.Context, w *Put) error {
			mu.Lock()
			inFlight++
			most = max(most, inFlight)
			mu.Unlock()
			time.Sleep(time.Duration(10-w.Offset%4) * time.Millisecond) // later ones end first
			mu.Lock()
			defer mu.Unlock()
			inFlight--
			if fail[w.Offset] {
				delete(fail, w.Offset)
				return errors.New("write failed")
			}
			return nil
		},
	})
	defer p.Close(&sync.Mutex{})
	var chs []<-chan result
	for range 10 {
		chs = append(chs, p.Append(nil))
	}
	for i, ch := range chs {
		r := <-ch
		if i < 7 && (r.Err != nil || r.Offset != int64(i)) {
			t.Fatalf("append %d: %+v", i, r)
		}
		if i >= 7 && r.Err == nil {
			t.Fatalf("append %d after the failure: %+v", i, r)
		}
	}
	mu.Lock()
	if most > 4 || most < 2 {
		t.Fatalf("%d writes in flight at most, want 2 to 4", most)
	}
	mu.Unlock()
	if r := <-p.Append(nil); r.Err == nil {
		t.Fatal("append after a failure succeeded")
	}
	if end, err := p.CatchUp(7, 7); end != 7 || err == nil {
		t.Fatalf("CatchUp: %d, %v", end, err)
	}
	if r := <-p.Append(nil); r.Err != nil || r.Offset != 7 {
		t.Fatalf("append after CatchUp: %+v", r)
	}
	if p.End() != 8 {
		t.Fatalf("End %d", p.End())
	}
}
