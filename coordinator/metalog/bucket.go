package metalog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/diskless-go/diskless/clock"
	"github.com/diskless-go/diskless/coordinator/metalog/internal/pipeline"
	"github.com/diskless-go/diskless/internal/backoff"
	"github.com/diskless-go/diskless/internal/hedge"
)

// Defaults of BucketOptions.
const (
	DefaultBucketMaxAttempts    = 8
	DefaultBucketRetryBackoff   = 50 * time.Millisecond
	DefaultBucketAttemptTimeout = 30 * time.Second
	DefaultBucketReadAhead      = 16
	DefaultBucketMaxQueued      = 64
	DefaultBucketMaxInFlight    = 1
	// MaxBucketMaxInFlight bounds BucketOptions.MaxInFlight.
	MaxBucketMaxInFlight       = 64
	DefaultBucketTrimGrace     = 5 * time.Minute
	DefaultBucketPollInterval  = 200 * time.Millisecond
	DefaultBucketHedgeMinDelay = 20 * time.Millisecond
	DefaultBucketHedgeMaxDelay = 2 * time.Second
)

// The hedge delay of a put is the bucketHedgeQuantile of the last
// bucketHedgeSamples puts' durations, used once bucketHedgeMinSamples are
// known.
const (
	bucketHedgeSamples    = 64
	bucketHedgeMinSamples = 8
	bucketHedgeQuantile   = 0.9
)

// bucketLogMaxBackoff caps the wait between two attempts.
const bucketLogMaxBackoff = 5 * time.Second

// bucketLogTrimWorkers is how many deletes a Trim runs at once.
const bucketLogTrimWorkers = 16

// BucketOptions configure a Bucket. The zero value holds the
// defaults; a nil *BucketOptions means the zero value.
type BucketOptions struct {
	// MaxAttempts bounds the attempts of one object-store call that fails
	// with a transient error. 0 means DefaultBucketMaxAttempts.
	MaxAttempts int
	// RetryBackoff is the wait before the second attempt; it doubles each
	// attempt (with jitter) up to 5 s. 0 means DefaultBucketRetryBackoff.
	RetryBackoff time.Duration
	// AttemptTimeout bounds one attempt. 0 means
	// DefaultBucketAttemptTimeout.
	AttemptTimeout time.Duration
	// ReadAhead is how many GETs a Read keeps in flight once it has found
	// entries (it starts with one, so that a Read at the end costs one
	// GET). 0 means DefaultBucketReadAhead.
	ReadAhead int
	// MaxQueued is how many appends may wait (the one being put and those
	// queued behind it); Append blocks beyond it. 0 means
	// DefaultBucketMaxQueued.
	MaxQueued int
	// MaxInFlight is how many puts may be in flight at once, each
	// conditional on its own offset's object not existing; they are
	// reported in order. 0 means DefaultBucketMaxInFlight, 1: each put
	// waits for the one before it; at most MaxBucketMaxInFlight.
	//
	// Above 1, the log's reader must be able to tell which entries to
	// ignore, because a conditional put says only that its own key was
	// free: when a put fails (another writer took its offset, or it
	// failed MaxAttempts times), the puts sent behind it are abandoned,
	// but some may already have landed, after the other writer's entry or
	// after a gap that a later writer fills. Such entries are reported as
	// failed; they stay in the log, and a reader must skip them. The
	// coordinator does: each of its entries names the checksum of the
	// entry it follows, and a new leader's first entry raises the epoch,
	// so an entry that follows anything else is not applied. Every
	// acknowledged append is at its offset, in order, and two writers
	// never both get an offset, as with 1.
	//
	// The log may then have gaps among its newest MaxInFlight offsets: a
	// writer that stopped with puts in flight may leave a later one in the
	// bucket and an earlier one not. Reads end at the first gap, so the
	// log ends there, and the next writer's put at that offset succeeds.
	// Open tolerates gaps among the MaxInFlight offsets below the highest
	// object (so open a log with the MaxInFlight its writers used), and
	// Trim keeps the newest MaxInFlight entries.
	MaxInFlight int
	// TrimGrace keeps, at Trim, the entries written less than TrimGrace
	// before the newest one (by the bucket's modification times), so that
	// a writer that fell behind less than TrimGrace ago still finds the
	// object that fences it (see the package doc). 0 means
	// DefaultBucketTrimGrace; a negative value means none.
	TrimGrace time.Duration
	// PollInterval is how often Wait asks the bucket whether the entry it
	// waits for exists (one HEAD request each time, billed as a GET), when
	// no append of this handle wakes it first. 0 means
	// DefaultBucketPollInterval.
	PollInterval time.Duration
	// HedgeMinDelay and HedgeMaxDelay bound the hedge delay of a put: a
	// put that has not answered after it (the p90 of the recent puts, at
	// least HedgeMinDelay) is sent again, the same bytes to the same key,
	// and the first answer wins; the other is cancelled. The conditional
	// put settles the duplicate: the one that finds the object existing
	// reads it back, and our own bytes there are success. No hedge is sent
	// while that p90 is above HedgeMaxDelay (a store that slow is slow for
	// every put). 0 means DefaultBucketHedgeMinDelay and
	// DefaultBucketHedgeMaxDelay; a negative HedgeMaxDelay means no
	// hedging.
	HedgeMinDelay, HedgeMaxDelay time.Duration
	// Logger logs retries, fencing and failures; nil means none.
	Logger *zap.Logger
}

// BucketStats are counters of a Bucket since it was opened.
type BucketStats struct {
	// Puts counts the conditional puts sent (entries, their retries and
	// hedges, and Claim's probes): each is a PUT request.
	Puts int64
	// Hedges counts the puts sent again because the first had not
	// answered after the hedge delay; HedgeWins those the second won.
	Hedges, HedgeWins int64
}

// Bucket is a Log in a bucket: entry n is the object
// <prefix>log/<n in 20 digits>, written with a conditional put (IfNotExist)
// so that two writers never both write one offset: the second one's put
// fails and it is fenced. Brokers keep no state of it that matters. It is
// safe for concurrent use.
//
// By default one put is in flight at a time (each must see the one
// before it succeed), and appends may queue behind it, up to MaxQueued.
// BucketOptions.MaxInFlight lets puts pipeline, for a reader that can
// skip the entries a fenced writer leaves behind (the coordinator's
// entries are chained by checksum): a conditional put says only that its
// own key was free, so a put of offset n+1 sent beside the one of n lands
// even when another writer has taken n. (Etcd pipelines with no such
// help because its put of n is conditional on n-1 existing too; a
// low-latency store for the log, diskless.Config.MetadataBucket, is the
// other way to a faster commit.) A put that has not answered after the hedge
// delay is sent again (see BucketOptions.HedgeMinDelay). An append
// that fails (fenced, or a put that failed MaxAttempts times, or Close)
// fails every append queued after it, and every later one, until a Read
// reaches the end of the log from at most this writer's end: then the
// writer's end is the log's end and its next append follows what the Read
// found (so a coordinator can claim the log again).
//
// Fencing rests on the object at the contested offset existing. Trim
// deletes objects, so a writer that still takes an offset that Trim has
// deleted for its end can put it again unfenced. TrimGrace bounds this:
// an object is deleted only once it is TrimGrace older than the newest
// entry, so a writer that fell behind (another writer wrote its next
// offset) less than TrimGrace ago is always fenced. A writer idle or
// paused for longer must Read before it appends again, and even a Read
// cannot see entries that were written and trimmed while it was away.
//
// The bucket must stay open until Close: a closed *blob.Bucket fails puts
// with FailedPrecondition, which Bucket reports as ErrFenced.
type Bucket struct {
	clock          clock.Clock // times the wait for an offset; clock.System
	bucket         *blob.Bucket
	dir            string // <prefix>log/
	maxAttempts    int
	backoff        backoff.Policy
	attemptTimeout time.Duration
	readAhead      int
	maxQueued      int
	maxInFlight    int
	trimGrace      time.Duration
	pollInterval   time.Duration
	log            *zap.Logger

	retrier pipeline.Retrier

	stats struct {
		puts, hedges, hedgeWins atomic.Int64
	}
	hedge *hedge.Hedger

	// leftovers are the objects Open found below the run of entries that
	// ends at the highest (see ListedRun).
	leftovers struct {
		n           int
		first, last int64
	}
	wg     sync.WaitGroup // the putter, its puts and their hedges
	trimMu sync.Mutex     // serialises Trim, and Close with it

	// pipe queues the appends, puts them (put), answers them in order,
	// and holds the writer's start and end and its failure.
	pipe pipeline.Pipe[AppendResult]
}

var _ Log = (*Bucket)(nil)

// OpenBucket opens the log under prefix in bucket (the coordinator
// passes "<bucket prefix>meta/<shard>/"). It lists <prefix>log/ once to
// find the log's start and end; the bucket may hold no log yet. The
// caller keeps the bucket open until after Close.
func OpenBucket(ctx context.Context, bucket *blob.Bucket, prefix string, opts *BucketOptions) (*Bucket, error) {
	var o BucketOptions
	if opts != nil {
		o = *opts
	}
	switch {
	case bucket == nil:
		return nil, fmt.Errorf("%w: OpenBucket needs a bucket", ErrInvalidOptions)
	case o.MaxAttempts < 0:
		return nil, fmt.Errorf("%w: BucketOptions.MaxAttempts %d is negative", ErrInvalidOptions, o.MaxAttempts)
	case o.RetryBackoff < 0:
		return nil, fmt.Errorf("%w: BucketOptions.RetryBackoff %v is negative", ErrInvalidOptions, o.RetryBackoff)
	case o.AttemptTimeout < 0:
		return nil, fmt.Errorf("%w: BucketOptions.AttemptTimeout %v is negative", ErrInvalidOptions, o.AttemptTimeout)
	case o.ReadAhead < 0:
		return nil, fmt.Errorf("%w: BucketOptions.ReadAhead %d is negative", ErrInvalidOptions, o.ReadAhead)
	case o.MaxQueued < 0:
		return nil, fmt.Errorf("%w: BucketOptions.MaxQueued %d is negative", ErrInvalidOptions, o.MaxQueued)
	case o.MaxInFlight < 0 || o.MaxInFlight > MaxBucketMaxInFlight:
		return nil, fmt.Errorf("%w: BucketOptions.MaxInFlight %d is outside 0 to %d", ErrInvalidOptions, o.MaxInFlight, MaxBucketMaxInFlight)
	case o.PollInterval < 0:
		return nil, fmt.Errorf("%w: BucketOptions.PollInterval %v is negative", ErrInvalidOptions, o.PollInterval)
	case o.HedgeMinDelay < 0:
		return nil, fmt.Errorf("%w: BucketOptions.HedgeMinDelay %v is negative", ErrInvalidOptions, o.HedgeMinDelay)
	}
	l := &Bucket{
		clock:          clock.System,
		bucket:         bucket,
		dir:            prefix + "log/",
		maxAttempts:    cmp.Or(o.MaxAttempts, DefaultBucketMaxAttempts),
		backoff:        backoff.Policy{Initial: cmp.Or(o.RetryBackoff, DefaultBucketRetryBackoff), Max: bucketLogMaxBackoff, Jitter: true},
		attemptTimeout: cmp.Or(o.AttemptTimeout, DefaultBucketAttemptTimeout),
		readAhead:      cmp.Or(o.ReadAhead, DefaultBucketReadAhead),
		maxQueued:      cmp.Or(o.MaxQueued, DefaultBucketMaxQueued),
		maxInFlight:    cmp.Or(o.MaxInFlight, DefaultBucketMaxInFlight),
		trimGrace:      cmp.Or(o.TrimGrace, DefaultBucketTrimGrace),
		pollInterval:   cmp.Or(o.PollInterval, DefaultBucketPollInterval),
		hedge: hedge.New(hedge.Options{
			MinDelay: cmp.Or(o.HedgeMinDelay, DefaultBucketHedgeMinDelay),
			MaxDelay: cmp.Or(o.HedgeMaxDelay, DefaultBucketHedgeMaxDelay), // < 0: no hedging
			Quantile: bucketHedgeQuantile, Samples: bucketHedgeSamples, MinSamples: bucketHedgeMinSamples,
		}),
		log: o.Logger,
	}
	if l.log == nil {
		l.log = zap.NewNop()
	}
	l.retrier = pipeline.Retrier{
		Policy: l.backoff, MaxAttempts: l.maxAttempts, AttemptTimeout: l.attemptTimeout,
		Retryable: bucketLogRetryable, Log: l.log, Msg: "metalog: bucket: retrying",
	}

	objs, _, err := l.listBelow(ctx, math.MaxInt64)
	if err != nil {
		return nil, fmt.Errorf("metalog: bucket: opening: %w", err)
	}
	offs := make([]int64, len(objs))
	for i, o := range objs {
		offs[i] = o.off
	}
	start, end := ListedRun(offs, int64(l.maxInFlight))
	l.leftovers.n, l.leftovers.first, l.leftovers.last = pipeline.Leftovers(offs, start) // sorted
	l.pipe.Init(ctx, start, end, pipeline.PipeOptions{
		Name: "metalog: bucket", Closed: ErrClosed,
		MaxQueued: l.maxQueued, MaxInFlight: l.maxInFlight,
		Write: l.put, Label: "metalog-bucket", WaitGroup: &l.wg,
	})
	return l, nil
}

// ListedRun returns the start and end of the log that the listed offsets
// of its entries hold, by the rule of Bucket's Open (and etcdlog's, with
// a window of 1): the run of offsets that ends at the highest,
// consecutive but for gaps among its newest window offsets (a pipelining
// writer's puts that did not land: window is the writers' MaxInFlight; 1
// allows none), and ends at its first gap. Objects below the run are left
// over from a Trim that stopped part way; they count as trimmed. Objects
// above the end are read (and skipped) once a writer has filled the gap.
// It sorts offs in place.
func ListedRun(offs []int64, window int64) (start, end int64) {
	if len(offs) == 0 {
		return 0, 0
	}
	slices.Sort(offs)
	offs = slices.Compact(offs)
	top := offs[len(offs)-1]
	i := len(offs) - 1
	for i > 0 && (offs[i-1] == offs[i]-1 || offs[i-1] >= top-window) {
		i--
	}
	start, end = offs[i], offs[i]
	for _, off := range offs[i:] {
		if off != end {
			break
		}
		end++
	}
	return start, end
}

// Leftovers reports the entry objects that Open found below the log's
// start, past a gap: n of them, of offsets first to last. A Trim that
// stopped part way leaves some (the next Trim deletes them); a gap that no
// snapshot covers means entries are missing from the bucket, and a log of
// one entry far above them may be a stray object.
func (l *Bucket) Leftovers() (n int, first, last int64) {
	return l.leftovers.n, l.leftovers.first, l.leftovers.last
}

// key returns the object key of offset off.
func (l *Bucket) key(off int64) string { return pipeline.Key(l.dir, off) }

// parseKey returns the offset of a log object's key.
func (l *Bucket) parseKey(key string) (int64, bool) { return pipeline.ParseKey(l.dir, key) }

// Stats returns the log's counters.
func (l *Bucket) Stats() BucketStats {
	return BucketStats{Puts: l.stats.puts.Load(), Hedges: l.stats.hedges.Load(), HedgeWins: l.stats.hedgeWins.Load()}
}

// get reads an object, retrying transient errors; found is false if it
// does not exist.
func (l *Bucket) get(ctx context.Context, key string) (data []byte, found bool, err error) {
	err = l.retry(ctx, "get "+key, func(ctx context.Context) error {
		var err error
		data, err = l.bucket.ReadAll(ctx, key)
		if gcerrors.Code(err) == gcerrors.NotFound {
			return nil
		}
		found = err == nil
		return err
	})
	return data, found, err
}

// maxClaimProbes bounds how many offsets Claim tries.
const maxClaimProbes = 10_000

// Claim appends entry at the first offset, at or after this writer's end,
// that no other writer has taken: where a put finds the object there, it
// tries the next offset at once instead of reading it. A writer that reads
// to the end and then appends loses every race to a busy writer (whose
// next put is already on its way); Claim wins one in a few tries. It
// returns the entry's offset, and clears this writer's failure: the
// entries before that offset that it has not read are still to be read
// (Read from where the reader stopped reaches them, and then its own
// entry). Nothing may be queued. The coordinator claims the log this way.
func (l *Bucket) Claim(ctx context.Context, entry []byte) (int64, error) {
	off, err := l.pipe.ClaimFrom()
	if err != nil {
		return -1, err
	}
	for probe := 0; probe < maxClaimProbes; probe++ {
		if err := ctx.Err(); err != nil {
			return -1, err
		}
		err := l.put(l.pipe.Context(), &pipeline.Put{Entry: entry, Offset: off})
		if err == nil {
			l.pipe.Claimed(off)
			return off, nil
		}
		if !errors.Is(err, ErrFenced) {
			return -1, err
		}
		off++
	}
	return -1, fmt.Errorf("%w: no free offset in %d tries", ErrFenced, maxClaimProbes)
}

// MaxInFlight implements Log: BucketOptions.MaxInFlight.
func (l *Bucket) MaxInFlight() int { return l.maxInFlight }

// Append implements Log. The entry's offset is this writer's end plus the
// appends queued before it; its put is conditional on the object not
// existing.
func (l *Bucket) Append(entry []byte) <-chan AppendResult { return l.pipe.Append(entry) }

// Read implements Log. It GETs the objects from from on, in order (up to
// ReadAhead at once), until one does not exist. If that happens below
// this writer's end, the entry was trimmed (by another writer) and the
// error wraps ErrTrimmed. A Read that reaches the end from at most this
// writer's end, while no append is queued, moves the writer's end there
// and clears its failure, so that its next Append follows every entry
// read. Only the appending goroutine should Read an appending Bucket:
// a Read from elsewhere could clear a failure that the appender has not
// seen yet.
func (l *Bucket) Read(ctx context.Context, from int64, fn func(offset int64, entry []byte) error) error {
	start, end, err := l.pipe.Bounds()
	if err != nil {
		return err
	}
	if from < start {
		return fmt.Errorf("%w: offset %d, the bucket log starts at %d", ErrTrimmed, from, start)
	}
	ctx, cancel := l.pipe.Bind(ctx)
	defer cancel()

	type fetch struct {
		off   int64
		done  chan struct{}
		data  []byte
		found bool
		err   error
	}
	var (
		wg     sync.WaitGroup
		queue  []*fetch
		next   = from
		window = 1
	)
	defer func() { cancel(); wg.Wait() }()
	off := from
	for {
		for len(queue) < window {
			f := &fetch{off: next, done: make(chan struct{})}
			next++
			queue = append(queue, f)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer close(f.done)
				f.data, f.found, f.err = l.get(ctx, l.key(f.off))
			}()
		}
		f := queue[0]
		<-f.done
		queue = queue[1:]
		if err := ctx.Err(); err != nil && f.err == nil {
			f.err = err
		}
		if f.err != nil {
			if l.pipe.Context().Err() != nil {
				return ErrClosed
			}
			return fmt.Errorf("metalog: bucket: reading offset %d: %w", f.off, f.err)
		}
		if !f.found {
			break
		}
		if err := fn(f.off, f.data); err != nil {
			return err
		}
		off = f.off + 1
		window = min(window*2, l.readAhead)
	}
	if off < end {
		return fmt.Errorf("%w: offset %d is gone from the bucket log, which ended at %d or later", ErrTrimmed, off, end)
	}
	if end, failed := l.pipe.CatchUp(from, off); failed != nil {
		l.log.Info("metalog: bucket: caught up after a failure", zap.Int64("end", end))
	}
	return nil
}

// Wait implements Log. An entry this handle appends (or reads) wakes it
// at once; an entry of another writer is found by asking the bucket
// whether the object at offset exists, every PollInterval.
func (l *Bucket) Wait(ctx context.Context, offset int64) (int64, error) {
	key := l.key(offset)
	look := func(ctx context.Context) (bool, error) {
		actx, acancel := context.WithTimeout(ctx, l.attemptTimeout)
		found, err := l.bucket.Exists(actx, key)
		acancel()
		switch {
		case err != nil && !bucketLogRetryable(err):
			return false, fmt.Errorf("metalog: bucket: waiting for offset %d: %w", offset, err)
		case err != nil:
			l.log.Debug("metalog: bucket: wait: head failed", zap.String("key", key), zap.Error(err))
		}
		return err == nil && found, nil
	}
	sleep := func(ctx context.Context, grew <-chan struct{}) bool {
		tc, t := clock.After(l.clock, l.pollInterval)
		defer t.Stop()
		select {
		case <-tc:
		case <-grew:
		case <-ctx.Done():
		}
		return false
	}
	return l.pipe.Wait(ctx, offset, look, sleep)
}

// Start implements Log: the first offset as far as this writer knows.
func (l *Bucket) Start() int64 { return l.pipe.Start() }

// End implements Log: the offset after this writer's last known entry and
// its queued appends.
func (l *Bucket) End() int64 { return l.pipe.End() }

// Close implements Log: the put in flight is abandoned (its object may
// still appear in the bucket, where a reopen reads it) and it and every
// queued append fail with an error wrapping ErrClosed. A Read or Trim
// under way ends with ErrClosed. The bucket stays open.
func (l *Bucket) Close() error {
	l.pipe.Close(&l.trimMu) // waits for a Trim under way
	return nil
}
