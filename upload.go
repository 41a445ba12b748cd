package diskless

import (
	"context"
	"slices"
	"sync"
	"time"

	"gocloud.dev/blob"

	"github.com/diskless-go/diskless/internal/upload"
	"github.com/diskless-go/diskless/wal"
)

// uploadObject encodes obj and uploads it under its key, within
// Config.UploadTimeout: its integrity checked by the store with the
// object's CRC32C (package internal/upload), and hedged (see put). It
// returns the object's bytes and its batches' coordinates.
//
// The object is encoded with AppendEncode, which copies each batch once
// in the order the batches came (the order they lie in memory) to its
// place in the object: cheaper than Encode's copies in object order into
// a buffer, which jump about the heap when the object has many
// partitions. The CRC32C is one pass over the result (hardware speed).
func (b *Broker) uploadObject(ctx context.Context, obj *wal.Object) ([]byte, []wal.Coordinate, error) {
	data, coords := obj.AppendEncode(make([]byte, 0, obj.Size()), nil)
	opts := upload.OptionsCRC32C(b.bucket, upload.CRC32C(data), len(data))
	ctx, cancel := context.WithTimeout(ctx, b.cfg.UploadTimeout)
	defer cancel()
	if err := b.put(ctx, obj.Key(), data, opts); err != nil {
		return nil, nil, err
	}
	return data, coords, nil
}

// put writes an immutable object. When the PUT has not finished after the
// hedge delay it sends a second PUT of the same key and bytes, takes the
// first to succeed and cancels the other (which, if it lands anyway,
// writes the same bytes: one object either way). A first PUT that fails
// before the delay fails the upload, as without hedging; once hedged, the
// upload fails only if both do. The PUT that lost goes on in the
// background until its cancellation ends it; Close waits for it.
func (b *Broker) put(ctx context.Context, key string, data []byte, opts *blob.WriterOptions) error {
	delay, ok := b.hedge.delay()
	if !ok {
		start := time.Now()
		err := upload.Put(ctx, b.bucket, key, data, opts)
		if err == nil {
			b.hedge.record(time.Since(start)) // to learn the delay from
		}
		return err
	}
	type result struct {
		attempt int
		err     error
		took    time.Duration
	}
	results := make(chan result, 2)
	var cancels [2]context.CancelFunc
	defer func() {
		for _, c := range cancels {
			if c != nil {
				c()
			}
		}
	}()
	start := time.Now()
	send := func(attempt int) {
		actx, cancel := context.WithCancel(ctx)
		cancels[attempt] = cancel
		b.attempts.Go(func() {
			t := time.Now()
			err := upload.Put(actx, b.bucket, key, data, opts)
			results <- result{attempt, err, time.Since(t)}
		})
	}
	send(0)
	timer := time.NewTimer(delay)
	defer timer.Stop()
	hedgeAt := timer.C
	running := 1
	var firstErr error
	for {
		select {
		case <-hedgeAt:
			hedgeAt = nil
			b.stats.hedges.Add(1)
			send(1)
			running++
		case r := <-results:
			running--
			if r.err == nil {
				if r.attempt == 0 {
					b.hedge.record(r.took)
				} else {
					b.stats.hedgeWins.Add(1)
					// The first PUT took longer than this, at least:
					// what the hedge delay must learn from it.
					b.hedge.record(time.Since(start))
				}
				return nil
			}
			if firstErr == nil {
				firstErr = r.err
			}
			if running == 0 || hedgeAt != nil {
				return firstErr // both failed, or the first failed before the delay
			}
		}
	}
}

// hedgeSamples is how many recent PUT durations the hedge delay is the
// quantile of, and hedgeMinSamples how many it needs before it is used
// (until then no PUT is hedged).
const (
	hedgeSamples    = 128
	hedgeMinSamples = 16
)

// hedger learns the hedge delay of WAL uploads from their PUTs'
// durations. It is safe for concurrent use.
type hedger struct {
	min, max time.Duration // max < 0: no hedging
	quantile float64

	mu     sync.Mutex
	recent [hedgeSamples]time.Duration // a ring
	n      int                         // durations recorded, in all
}

func newHedger(c *Config) *hedger {
	return &hedger{min: c.HedgeMinDelay, max: c.HedgeMaxDelay, quantile: c.HedgeQuantile}
}

// record adds the duration of a PUT (or, for one that lost to its hedge,
// how long it had taken when the hedge won).
func (h *hedger) record(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recent[h.n%hedgeSamples] = d
	h.n++
}

// delay returns the hedge delay: the quantile of the recent durations,
// at least min; false when hedging is off, before enough durations are
// known, or when that quantile is above max: a store that slow is slow for
// every PUT (a saturated link, an overloaded store), and a second PUT
// would only compete with the first.
func (h *hedger) delay() (time.Duration, bool) {
	if h.max < 0 {
		return 0, false
	}
	h.mu.Lock()
	n := min(h.n, hedgeSamples)
	if n < hedgeMinSamples {
		h.mu.Unlock()
		return 0, false // not learned yet
	}
	s := make([]time.Duration, n)
	copy(s, h.recent[:n])
	h.mu.Unlock()
	slices.Sort(s)
	d := s[min(int(h.quantile*float64(n)), n-1)]
	if d > h.max {
		return 0, false
	}
	return max(d, h.min), true
}
