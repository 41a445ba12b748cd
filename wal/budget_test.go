package wal

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// committer runs a committer over b with slots uploads at once, each taking
// upload (on the bubble's clock), until b is closed, and returns the times
// Next handed objects to it and how long each request had waited for its
// object to close.
func committer(t *testing.T, b *Buffer, slots int, upload time.Duration) (wait func() (closes []time.Time, waits []time.Duration)) {
	var mu sync.Mutex
	var closes []time.Time
	var waits []time.Duration
	var wg sync.WaitGroup
	sem := make(chan struct{}, slots)
	wg.Go(func() {
		for {
			sem <- struct{}{} // a slot, then Next: as the broker does
			o, err := b.Next(context.Background())
			if errors.Is(err, ErrClosed) {
				return
			}
			require.NoError(t, err)
			now := time.Now()
			mu.Lock()
			closes = append(closes, now)
			for _, r := range o.Requests() {
				waits = append(waits, now.Sub(r.Added))
			}
			mu.Unlock()
			wg.Go(func() {
				coords, err := o.Encode(io.Discard, nil)
				require.NoError(t, err)
				time.Sleep(upload)
				<-sem
				require.NoError(t, o.Answer(make([]Result, len(coords))))
			})
		}
	})
	return func() ([]time.Time, []time.Duration) {
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return closes, waits
	}
}

// TestBudgetLoneRequest: on an idle broker whose budget allows, a request
// is handed to the waiting committer at once.
func TestBudgetLoneRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := NewBuffer(&Options{Linger: 250 * time.Millisecond})
		require.NoError(t, err)
		got := make(chan *Object)
		go func() {
			o, err := b.Next(context.Background())
			require.NoError(t, err)
			got <- o
		}()
		synctest.Wait() // the committer waits: a slot is free
		start := time.Now()
		require.NoError(t, b.Add(t.Context(), sizedRequest(t, 0, 1000, 1)))
		o := <-got
		require.Equal(t, start, time.Now(), "uploaded at once, not after Linger")
		require.Equal(t, []byte{1}, ids(o))
		o.Fail(errors.New("done"))
		require.NoError(t, b.Close())
	})
}

// TestBudgetBound: producers sending a small request every millisecond
// get objects closed as often as the budget allows and never more: at
// most ObjectsPerSecond in any second, each request waiting at most
// Linger.
func TestBudgetBound(t *testing.T) {
	for _, perSecond := range []float64{4, 20, 150} {
		t.Run("", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const linger = 250 * time.Millisecond
				b, err := NewBuffer(&Options{Linger: linger, ObjectsPerSecond: perSecond})
				require.NoError(t, err)
				wait := committer(t, b, 4, 10*time.Millisecond) // uploads could go 400 a second
				var producers sync.WaitGroup
				const run = 5 * time.Second
				for p := range 3 {
					producers.Go(func() {
						for start := time.Now(); time.Since(start) < run; {
							require.NoError(t, b.Add(context.Background(), sizedRequest(t, int32(p), 200, byte(p))))
							time.Sleep(time.Millisecond)
						}
					})
				}
				producers.Wait()
				end := time.Now()
				require.NoError(t, b.Close()) // closes the last object, budget or not
				closes, waits := wait()
				for len(closes) > 0 && !closes[len(closes)-1].Before(end) {
					closes = closes[:len(closes)-1]
				}
				n := int(perSecond)
				for i := 0; i+n < len(closes); i++ {
					require.GreaterOrEqual(t, closes[i+n].Sub(closes[i]), time.Second,
						"%d objects within a second: closes %d to %d", n+1, i, i+n)
				}
				require.GreaterOrEqual(t, float64(len(closes)), 0.9*perSecond*run.Seconds(), "the budget is used")
				for _, w := range waits {
					require.LessOrEqual(t, w, linger)
				}
			})
		})
	}
}

// TestBudgetUploadsBound: with one upload slot and uploads slower than
// the budget, objects close no faster than the uploads go: each one when
// the slot frees, holding what arrived meanwhile.
func TestBudgetUploadsBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const upload = 200 * time.Millisecond
		b, err := NewBuffer(&Options{Linger: 250 * time.Millisecond, ObjectsPerSecond: 100})
		require.NoError(t, err)
		wait := committer(t, b, 1, upload)
		for start := time.Now(); time.Since(start) < 3*time.Second; {
			require.NoError(t, b.Add(context.Background(), sizedRequest(t, 0, 200, 1)))
			time.Sleep(time.Millisecond)
		}
		require.NoError(t, b.Close())
		closes, _ := wait()
		require.Greater(t, len(closes), 10)
		for i := 1; i < len(closes)-1; i++ { // the last: Close
			require.GreaterOrEqual(t, closes[i].Sub(closes[i-1]), upload, "object %d", i)
		}
	})
}

// TestBudgetGather: an object opened while the broker is busy (an object
// in flight) waits, once the budget allows, for a pause in arriving
// requests, then closes with them; requests that never pause hold it at
// most 1/8 of the budget's period.
func TestBudgetGather(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 4 a second: pauses of 3.9 ms, at most 31 ms (a Linger longer
		// than the period, so that it does not close the object first).
		b, err := NewBuffer(&Options{Linger: 500 * time.Millisecond, ObjectsPerSecond: 4})
		require.NoError(t, err)
		next := func() <-chan *Object {
			c := make(chan *Object, 1)
			go func() {
				o, err := b.Next(context.Background())
				require.NoError(t, err)
				c <- o
			}()
			synctest.Wait()
			return c
		}
		first := next()
		require.NoError(t, b.Add(t.Context(), sizedRequest(t, 0, 500, 1)))
		inFlight := <-first     // taken, not answered: the broker is busy
		time.Sleep(time.Second) // the budget has long allowed another

		second := next()
		start := time.Now()
		require.NoError(t, b.Add(t.Context(), sizedRequest(t, 0, 500, 2)))
		time.Sleep(2 * time.Millisecond)
		require.NoError(t, b.Add(t.Context(), sizedRequest(t, 1, 500, 3)))
		o := <-second
		require.Equal(t, 2*time.Millisecond+b.period/quietShare, time.Since(start), "closed at the first pause")
		require.Equal(t, []byte{2, 3}, ids(o), "gathered together")
		o.Fail(errors.New("done"))

		// A request every millisecond, never pausing, from just after that
		// close: they have waited long when the budget allows, 250 ms
		// after the last close, and close then.
		stream := func(after time.Duration) (*Object, time.Duration) {
			c := next()
			lastClose := time.Now()
			time.Sleep(after)
			stop := make(chan struct{})
			var sent sync.WaitGroup
			sent.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					require.NoError(t, b.Add(t.Context(), sizedRequest(t, 0, 100, 4)))
					time.Sleep(time.Millisecond)
				}
			})
			o := <-c
			took := time.Since(lastClose)
			close(stop)
			sent.Wait()
			return o, took
		}
		o, took := stream(0)
		require.Equal(t, b.period, took)
		o.Fail(errors.New("done"))
		// A close now, for the next stream to count from.
		require.NoError(t, b.Add(t.Context(), sizedRequest(t, 0, 100, 5)))
		b.Flush()
		for _, o := range ready(t, b) {
			o.Fail(errors.New("done"))
		}
		// The same from 10 ms before the budget allows: still arriving
		// then, held at most 31 ms past it.
		o, took = stream(b.period - 10*time.Millisecond)
		require.Equal(t, b.period+b.period/gatherShare, took)
		o.Fail(errors.New("done"))
		inFlight.Fail(errors.New("done"))
		require.NoError(t, b.Close())
		for {
			o, err := b.Next(t.Context())
			if err != nil {
				break
			}
			o.Fail(errors.New("done"))
		}
	})
}

// TestBudgetFullObjects: objects that fill up close at once, as often as
// the volume requires, whatever the budget.
func TestBudgetFullObjects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := NewBuffer(&Options{MaxBytes: 4000, Linger: 250 * time.Millisecond})
		require.NoError(t, err)
		wait := committer(t, b, 4, time.Millisecond)
		for range 100 {
			require.NoError(t, b.Add(context.Background(), sizedRequest(t, 0, 1000, 1)))
			time.Sleep(time.Millisecond)
		}
		require.NoError(t, b.Close())
		closes, _ := wait()
		require.GreaterOrEqual(t, len(closes), 25, "a full object every 4 requests: 25 in 100 ms, 4 a second allowed")
	})
}

// TestBudgetFullBytes: a producer with one request in flight whose
// requests reach FullBytes gets each closed at once, not once a budget's
// period after the last; and a full close leaves the budget's token to the
// small object after it.
func TestBudgetFullBytes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const upload = 10 * time.Millisecond
		b, err := NewBuffer(&Options{MaxBytes: 8000, FullBytes: 4000, Linger: 250 * time.Millisecond})
		require.NoError(t, err)
		wait := committer(t, b, 1, upload)
		start := time.Now()
		for i := range 20 {
			r := sizedRequest(t, 0, 5000, byte(i))
			done := make(chan struct{})
			r.Done = func([]Result, error) { close(done) }
			require.NoError(t, b.Add(context.Background(), r))
			<-done
		}
		require.Equal(t, 20*upload, time.Since(start), "each full request closed at once, uploaded in 10 ms")

		// A small request once the broker is idle (past the pause that
		// gathers producers answered together): the full objects took no
		// token, so it goes at once too.
		time.Sleep(upload)
		r := sizedRequest(t, 0, 100, 99)
		done := make(chan struct{})
		r.Done = func([]Result, error) { close(done) }
		at := time.Now()
		require.NoError(t, b.Add(context.Background(), r))
		<-done
		require.Equal(t, upload, time.Since(at), "the small object was not held for the budget")

		require.NoError(t, b.Close())
		closes, waits := wait()
		require.Len(t, closes, 21)
		for _, w := range waits {
			require.Zero(t, w, "no request waited for its object to close")
		}
	})
}
