package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/diskless-go/diskless/internal/histogram"
	"github.com/diskless-go/diskless/kbatch"
)

// target is what producers send to: the diskless Broker or the classic
// leader. send returns when the acks of the run say (at once for acks 0,
// once committed or appended otherwise), with the request's error.
type target interface {
	send(ctx context.Context, partition int32, batch []byte) error
	// initProducer allocates an idempotent producer id (acks=all).
	initProducer(ctx context.Context) (int64, int16, error)
}

// workload is the closed-loop producers of a run: for each producer and
// partition, a pipeline of up to inflight requests, each sent again as
// soon as it is answered.
type workload struct {
	partitions, producers, inflight int
	messageSize, batchBytes         int
	codec                           kbatch.Codec
	acks                            acksLevel
	seed                            uint64
	// rate, if positive, makes the load open loop: requests per second
	// in all, each slot sending at a fixed interval from a random phase
	// (docs/architecture.md, "The latency probe"); a slot whose answer comes
	// late sends at once.
	rate float64
}

// slots returns the number of concurrent request slots.
func (w *workload) slots() int { return w.partitions * w.producers * w.inflight }

// recordsPerBatch is how many messages fill a batch of batchBytes, as a
// Kafka producer's accumulator fills batch.size (at least one).
func (w *workload) recordsPerBatch() int {
	b := kbatch.NewBuilder(kbatch.CodecNone)
	v := make([]byte, w.messageSize)
	n := 0
	for {
		b.Append(0, nil, v)
		if n > 0 && b.UncompressedSize() > w.batchBytes || n >= 1<<16 {
			return n
		}
		n++
	}
}

// tally counts what completes inside the measured window.
type tally struct {
	latency            histogram.Histogram
	exact              samples // the same latencies, each kept
	requests, messages atomic.Int64
	bytes              atomic.Int64
	errors             atomic.Int64
	completed          atomic.Int64 // every answered request, window or not (progress)
	inFlight           atomic.Int64
	mu                 sync.Mutex
	firstErrors        []string
}

func (t *tally) noteError(err error) {
	t.errors.Add(1)
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.firstErrors) < 5 {
		t.firstErrors = append(t.firstErrors, err.Error())
	}
}

// window is the measured span of a run.
type window struct{ start, end time.Time }

func (w window) contains(t time.Time) bool { return !t.Before(w.start) && !t.After(w.end) }

// run drives tgt until stop, then waits for the requests in flight (up to
// drain). Requests answered inside win are measured.
func (w *workload) run(ctx context.Context, tgt target, win window, stop time.Time, drain time.Duration, t *tally) error {
	perBatch := w.recordsPerBatch()
	type slot struct {
		partition int32
		id        int64
		epoch     int16
	}
	slots := make([]slot, 0, w.slots())
	for range w.producers {
		for p := range w.partitions {
			for range w.inflight {
				slots = append(slots, slot{partition: int32(p), id: -1, epoch: -1})
			}
		}
	}
	if w.acks == -1 {
		// Idempotent producers: each slot is its own producer session
		// (one batch in flight, sequences in order), since Produce only
		// returns at commit and a caller cannot order the Adds of
		// concurrent requests of one session.
		var wg sync.WaitGroup
		errs := make(chan error, len(slots))
		sem := make(chan struct{}, 64)
		for i := range slots {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				id, epoch, err := tgt.initProducer(ctx)
				if err != nil {
					errs <- err
					return
				}
				slots[i].id, slots[i].epoch = id, epoch
			}()
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return fmt.Errorf("InitProducerID: %w", err)
		}
	}

	sendCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i, s := range slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(w.seed, uint64(i)))
			value := make([]byte, w.messageSize)
			for j := range value {
				value[j] = byte('a' + rng.IntN(26))
			}
			b := kbatch.NewBuilder(w.codec)
			seq := int32(0)
			var interval time.Duration
			next := time.Now()
			if w.rate > 0 {
				interval = time.Duration(float64(len(slots)) / w.rate * float64(time.Second))
				next = next.Add(time.Duration(rng.Int64N(int64(interval) + 1)))
			}
			for time.Now().Before(stop) && sendCtx.Err() == nil {
				if interval > 0 {
					if !sleepUntil(sendCtx, next) {
						return
					}
					next = next.Add(interval)
					if now := time.Now(); next.Before(now) {
						next = now // late: do not burst to catch up
					}
				}
				b.Reset(w.codec)
				if s.id >= 0 {
					b.SetProducer(s.id, s.epoch, seq)
				}
				ts := time.Now().UnixMilli()
				for range perBatch {
					b.Append(ts, nil, value)
				}
				raw, err := b.Build(nil)
				if err != nil {
					t.noteError(err)
					return
				}
				t.inFlight.Add(1)
				sent := time.Now()
				err = tgt.send(sendCtx, s.partition, raw)
				done := time.Now()
				t.inFlight.Add(-1)
				t.completed.Add(1)
				if errors.Is(err, context.Canceled) && sendCtx.Err() != nil {
					return
				}
				if win.contains(done) {
					if err != nil {
						t.noteError(err)
					} else {
						t.latency.Record(done.Sub(sent))
						t.exact.add(done.Sub(sent))
						t.requests.Add(1)
						t.messages.Add(int64(perBatch))
						t.bytes.Add(int64(perBatch * w.messageSize))
					}
				}
				if err == nil {
					seq += int32(perBatch)
				} else if s.id >= 0 {
					// A failed idempotent batch may or may not be
					// committed: start a fresh session, as a producer
					// resets its sequences with a new id.
					id, epoch, ierr := tgt.initProducer(sendCtx)
					if ierr != nil {
						return
					}
					s.id, s.epoch, seq = id, epoch, 0
				}
			}
		}()
	}
	finished := make(chan struct{})
	go func() {
		wg.Wait()
		close(finished)
	}()
	select {
	case <-finished:
		return nil
	case <-ctx.Done():
	case <-time.After(time.Until(stop) + drain):
	}
	cancel()
	<-finished
	return ctx.Err()
}
