// Package faultbucket makes a *blob.Bucket behave like a remote object
// store, for benchmarks and fault-injection tests: a local bucket answers
// in microseconds, S3 in 100 ms, and a test without injected latency
// proves nothing about latency (docs/architecture.md, "Local tests and
// injected latency").
//
// Wrap returns a bucket that forwards every call to an inner bucket
// (typically mem://) and, per kind of call (PUT, GET, LIST, DELETE, HEAD):
//
//   - delays it by a sample of the Profile's Latency for that kind (a GET
//     before its first byte, a PUT after its bytes are sent), plus a
//     sample of its PerMiB time for each MiB the call moves (so that an
//     8 MiB PUT is slower than a 100 KiB one), from a seeded random
//     source;
//   - caps the bytes per second of uploads and of downloads, shared by all
//     the calls in flight, as one link would;
//   - fails a share of calls (ErrorRate), without effect, with a retriable
//     code (gcerrors.Internal unless Options.Code says otherwise: what
//     S3's 500 InternalError and 503 SlowDown become);
//   - and on demand simulates outages: Outage fails every call for a
//     while, Stall holds every call until it ends.
//
// A Hook picks exact calls to fail, before or after their effect (the
// ambiguous failure of a PUT that reached the store), for tests that
// inject a failure at call 0, 1, 2 ... until a workload succeeds.
//
// Every wait honours the call's context, and goes through a Clock, so
// tests can record the delays instead of sleeping. Writes are buffered and
// reach the inner bucket whole at Close, or not at all.
package faultbucket

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/driver"
	"gocloud.dev/gcerrors"

	"github.com/diskless-go/diskless/clock"
	"github.com/diskless-go/diskless/internal/blobwrap"
)

// Options configure the wrapper. A nil *Options means the zero value: no
// faults, seed 0, the system clock.
type Options struct {
	// Profile is the faults to inject; SetProfile changes it later.
	Profile Profile
	// Seed seeds the random source of delays and failures: the same seed
	// and the same sequence of calls give the same delays and failures.
	Seed uint64
	// Clock is the time source of outage windows, bandwidth accounting
	// and every injected wait; nil means clock.System.
	Clock clock.Clock
	// Code is the gocloud code of injected failures and outages; 0 means
	// gcerrors.Internal, which callers treat as retriable.
	Code gcerrors.ErrorCode
	// Observe, if set, is called after each call with what happened to
	// it. It must be safe for concurrent use, and quick.
	Observe func(Call)
}

// Call describes one finished call, for Options.Observe.
type Call struct {
	Op Op
	// Key is the object's key (the destination of a Copy), or a LIST's
	// prefix.
	Key string
	// Bytes is what a PUT sent or a GET read.
	Bytes int64
	// Start is when the call began, by the Clock.
	Start time.Time
	// Delay is the latency injected: the Profile's Latency, plus its
	// PerMiB term for the bytes of a PUT or a GET. Throttle is the wait
	// for the link's bandwidth.
	Delay, Throttle time.Duration
	// Duration is the whole call by the Clock: for a GET, until its
	// reader was closed.
	Duration time.Duration
	// Err is the call's error, nil on success.
	Err error
}

// Hook decides, before each call, whether to fail it: a non-nil *Error
// fails the call (its Op and Key are filled in; a zero Code means the
// wrapper's code). With AfterEffect the call takes effect first. A Hook
// is called with no lock held and must be safe for concurrent use.
type Hook func(op Op, key string) *Error

// Stats counts calls by kind.
type Stats struct {
	// Calls counts every call made, failed or not.
	Calls [NumOps]int64
	// Failed counts the calls failed by injection (error rate, outage or
	// hook).
	Failed [NumOps]int64
	// Bytes counts what successful PUTs sent and GETs read.
	Bytes [NumOps]int64
}

// Faults controls a wrapped bucket: its profile, outages and hook, and
// its counts. It is safe for concurrent use.
type Faults struct {
	clock   clock.Clock
	code    gcerrors.ErrorCode
	observe func(Call)
	up      limiter
	down    limiter

	mu struct {
		sync.Mutex
		rng         *rand.Rand
		profile     Profile
		outageUntil time.Time // calls fail until then
		stallUntil  time.Time // calls wait until then
		hook        Hook
	}
	calls, failed, bytes [NumOps]atomic.Int64
}

// Wrap returns a bucket that forwards every call to inner with the faults
// of opts, and its controller. Closing the returned bucket does not close
// inner.
func Wrap(inner *blob.Bucket, opts *Options) (*blob.Bucket, *Faults, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if err := o.Profile.Validate(); err != nil {
		return nil, nil, err
	}
	f := &Faults{clock: o.Clock, code: o.Code, observe: o.Observe}
	if f.clock == nil {
		f.clock = clock.System
	}
	if f.code == gcerrors.OK {
		f.code = gcerrors.Internal
	}
	f.mu.rng = rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	f.mu.profile = o.Profile
	return blob.NewBucket(&bucket{inner: inner, f: f}), f, nil
}

// SetProfile replaces the profile; calls under way keep their faults.
func (f *Faults) SetProfile(p Profile) error {
	if err := p.Validate(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.profile = p
	return nil
}

// Profile returns the current profile.
func (f *Faults) Profile() Profile {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.profile
}

// SetErrorRate sets the share of op's calls that fail.
func (f *Faults) SetErrorRate(op Op, rate float64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.mu.profile
	p.Ops[op].ErrorRate = rate
	if err := p.Validate(); err != nil {
		return err
	}
	f.mu.profile = p
	return nil
}

// Outage makes every call that starts in the next d fail at once, without
// effect, with the wrapper's code and Error.Outage set.
func (f *Faults) Outage(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.outageUntil = f.clock.Now().Add(d)
}

// Stall makes every call that starts in the next d wait until the d is
// over (or its context ends), then go on with its usual faults: a store
// that hangs rather than refuses.
func (f *Faults) Stall(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.stallUntil = f.clock.Now().Add(d)
}

// EndOutage ends an Outage or a Stall now (calls already waiting in a
// Stall wait until its planned end).
func (f *Faults) EndOutage() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.outageUntil, f.mu.stallUntil = time.Time{}, time.Time{}
}

// SetHook installs h (nil removes it).
func (f *Faults) SetHook(h Hook) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.hook = h
}

// Stats returns the counts so far.
func (f *Faults) Stats() Stats {
	var s Stats
	for op := range NumOps {
		s.Calls[op] = f.calls[op].Load()
		s.Failed[op] = f.failed[op].Load()
		s.Bytes[op] = f.bytes[op].Load()
	}
	return s
}

// plan is what happens to one call: decided at its start.
type plan struct {
	op          Op
	key         string
	start       time.Time
	delay       time.Duration
	perMiB      time.Duration // the PerMiB sample (a GET's reads wait it per MiB)
	throttle    time.Duration
	fail        *Error // fails the call (before its effect unless AfterEffect)
	outage      bool   // fail at once
	stallUntil  time.Time
	observeDone bool
}

// begin decides a call's faults, waits as they say (stall, upload
// bandwidth, latency) and returns the error that fails the call before
// its effect, if any. The caller then calls end.
func (f *Faults) begin(ctx context.Context, op Op, key string, upload int64) (*plan, error) {
	f.calls[op].Add(1)
	p := &plan{op: op, key: key, start: f.clock.Now()}
	f.mu.Lock()
	prof := f.mu.profile
	hook := f.mu.hook
	if p.start.Before(f.mu.stallUntil) {
		p.stallUntil = f.mu.stallUntil
	}
	p.outage = p.start.Before(f.mu.outageUntil)
	if l := prof.Ops[op].Latency; l != nil {
		p.delay = max(l.Sample(f.mu.rng), 0)
	}
	if l := prof.Ops[op].PerMiB; l != nil {
		p.perMiB = max(l.Sample(f.mu.rng), 0)
		p.delay += perMiB(p.perMiB, upload)
	}
	if r := prof.Ops[op].ErrorRate; r > 0 && f.mu.rng.Float64() < r {
		p.fail = &Error{}
	}
	f.mu.Unlock()

	if !p.stallUntil.IsZero() {
		if err := sleep(ctx, f.clock, p.stallUntil.Sub(p.start)); err != nil {
			return p, err
		}
	}
	if p.outage {
		p.fail = &Error{Outage: true}
		p.delay = 0
		return p, f.failure(p)
	}
	if hook != nil {
		if e := hook(op, key); e != nil {
			p.fail = e
		}
	}
	if upload > 0 && prof.UploadBytesPerSec > 0 {
		w, err := f.up.wait(ctx, f.clock, prof.UploadBytesPerSec, upload)
		p.throttle += w
		if err != nil {
			return p, err
		}
	}
	if err := sleep(ctx, f.clock, p.delay); err != nil {
		return p, err
	}
	if err := ctx.Err(); err != nil {
		return p, err
	}
	if p.fail != nil && !p.fail.AfterEffect {
		return p, f.failure(p)
	}
	return p, nil
}

// failure fills in p's injected error and counts it.
func (f *Faults) failure(p *plan) error {
	e := *p.fail
	e.Op, e.Key = p.op, p.key
	if e.Code == gcerrors.OK {
		e.Code = f.code
	}
	f.failed[p.op].Add(1)
	return &e
}

// end finishes a call whose effect happened with error err (nil on
// success): it applies an after-effect failure, counts bytes, observes,
// and returns the call's error.
func (f *Faults) end(p *plan, n int64, err error) error {
	if err == nil && p.fail != nil && p.fail.AfterEffect {
		err = f.failure(p)
	}
	if err == nil {
		f.bytes[p.op].Add(n)
	}
	f.observeCall(p, n, err)
	return err
}

func (f *Faults) observeCall(p *plan, n int64, err error) {
	if f.observe == nil || p.observeDone {
		return
	}
	p.observeDone = true
	f.observe(Call{Op: p.op, Key: p.key, Bytes: n, Start: p.start, Delay: p.delay, Throttle: p.throttle, Duration: f.clock.Now().Sub(p.start), Err: err})
}

// limiter shares a bandwidth among concurrent calls: each reserves the
// link for its bytes, in chunks so that concurrent calls interleave.
type limiter struct {
	mu   sync.Mutex
	next time.Time // when the link is free
}

// limiterChunk is the bytes reserved at a time.
const limiterChunk = 64 << 10

// wait holds the caller until n bytes have gone through the link at rate
// bytes per second, and returns how long it waited.
func (l *limiter) wait(ctx context.Context, clk clock.Clock, rate, n int64) (time.Duration, error) {
	var waited time.Duration
	for n > 0 {
		c := min(n, limiterChunk)
		n -= c
		l.mu.Lock()
		now := clk.Now()
		start := l.next
		if start.Before(now) {
			start = now
		}
		l.next = start.Add(time.Duration(float64(c) / float64(rate) * float64(time.Second)))
		d := l.next.Sub(now)
		l.mu.Unlock()
		waited += d
		if err := sleep(ctx, clk, d); err != nil {
			return waited, err
		}
	}
	return waited, nil
}

// bucket is the driver.
type bucket struct {
	inner *blob.Bucket
	f     *Faults
}

var _ driver.Bucket = (*bucket)(nil)

func (b *bucket) ErrorCode(err error) gcerrors.ErrorCode {
	if e := (*Error)(nil); errors.As(err, &e) {
		return e.Code
	}
	return gcerrors.Code(err)
}

func (b *bucket) As(i any) bool                 { return b.inner.As(i) }
func (b *bucket) ErrorAs(err error, i any) bool { return b.inner.ErrorAs(err, i) }

func (b *bucket) Attributes(ctx context.Context, key string) (*driver.Attributes, error) {
	p, err := b.f.begin(ctx, Head, key, 0)
	if err != nil {
		return nil, b.f.end(p, 0, err)
	}
	a, err := blobwrap.Attributes(ctx, b.inner, key)
	if err = b.f.end(p, 0, err); err != nil {
		return nil, err
	}
	return a, nil
}

func (b *bucket) ListPaged(ctx context.Context, opts *driver.ListOptions) (*driver.ListPage, error) {
	p, err := b.f.begin(ctx, List, opts.Prefix, 0)
	if err != nil {
		return nil, b.f.end(p, 0, err)
	}
	page, err := blobwrap.ListPage(ctx, b.inner, opts)
	if err = b.f.end(p, 0, err); err != nil {
		return nil, err
	}
	return page, nil
}

func (b *bucket) NewRangeReader(ctx context.Context, key string, offset, length int64, _ *driver.ReaderOptions) (driver.Reader, error) {
	p, err := b.f.begin(ctx, Get, key, 0)
	if err != nil {
		return nil, b.f.end(p, 0, err)
	}
	if p.fail != nil && p.fail.AfterEffect {
		// A read has no effect to keep: fail it whole.
		return nil, b.f.end(p, 0, nil)
	}
	r, err := b.inner.NewRangeReader(ctx, key, offset, length, nil)
	if err != nil {
		return nil, b.f.end(p, 0, err)
	}
	return &reader{ctx: ctx, r: r, b: b, p: p}, nil
}

// reader throttles a GET's bytes and reports the GET when closed.
type reader struct {
	ctx  context.Context
	r    *blob.Reader
	b    *bucket
	p    *plan
	n    int64
	owed time.Duration // the PerMiB time of bytes read, not yet waited
	err  error         // the first error other than io.EOF
}

// minSizeWait is the least PerMiB wait a GET's Read makes at a time: the
// rest is owed to the next Read, so that small reads do not each sleep.
const minSizeWait = time.Millisecond

func (r *reader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.n += int64(n)
	if r.p.perMiB > 0 && n > 0 {
		d := perMiB(r.p.perMiB, int64(n))
		r.owed += d
		r.p.delay += d
	}
	if r.owed > 0 && (r.owed >= minSizeWait || err != nil) {
		owed := r.owed
		r.owed = 0
		if werr := sleep(r.ctx, r.b.f.clock, owed); werr != nil {
			r.err = werr
			return n, werr
		}
	}
	if rate := r.b.f.Profile().DownloadBytesPerSec; n > 0 && rate > 0 {
		w, werr := r.b.f.down.wait(r.ctx, r.b.f.clock, rate, int64(n))
		r.p.throttle += w
		if werr != nil {
			r.err = werr
			return n, werr
		}
	}
	if err != nil && r.err == nil && !isEOF(err) {
		r.err = err
	}
	return n, err
}

func (r *reader) Close() error {
	err := r.r.Close()
	r.b.f.end(r.p, r.n, errors.Join(r.err, err))
	return err
}

func (r *reader) As(i any) bool { return r.r.As(i) }

func (r *reader) Attributes() *driver.ReaderAttributes {
	return &driver.ReaderAttributes{ContentType: r.r.ContentType(), ModTime: r.r.ModTime(), Size: r.r.Size()}
}

func (b *bucket) NewTypedWriter(ctx context.Context, key, contentType string, opts *driver.WriterOptions) (driver.Writer, error) {
	return &writer{ctx: ctx, b: b, key: key, contentType: contentType, opts: opts}, nil
}

// writer buffers a PUT and sends it whole at Close.
type writer struct {
	ctx         context.Context
	b           *bucket
	key         string
	contentType string
	opts        *driver.WriterOptions
	buf         []byte
}

func (w *writer) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	return len(p), nil
}

func (w *writer) Close() error {
	f := w.b.f
	p, err := f.begin(w.ctx, Put, w.key, int64(len(w.buf)))
	if err != nil {
		return f.end(p, 0, err)
	}
	o := w.opts
	ct := w.contentType
	if ct == "" {
		ct = "application/octet-stream" // Upload requires one
	}
	// Upload, not WriteAll: WriteAll would hash the bytes with MD5 twice.
	err = w.b.inner.Upload(w.ctx, w.key, bytes.NewReader(w.buf), &blob.WriterOptions{
		BufferSize: o.BufferSize, MaxConcurrency: o.MaxConcurrency,
		CacheControl: o.CacheControl, ContentDisposition: o.ContentDisposition,
		ContentEncoding: o.ContentEncoding, ContentLanguage: o.ContentLanguage,
		ContentType: ct, DisableContentTypeDetection: true, ContentMD5: o.ContentMD5,
		Metadata: o.Metadata, IfNotExist: o.IfNotExist, BeforeWrite: o.BeforeWrite,
	})
	return f.end(p, int64(len(w.buf)), err)
}

func (b *bucket) Copy(ctx context.Context, dst, src string, _ *driver.CopyOptions) error {
	p, err := b.f.begin(ctx, Put, dst, 0) // object stores bill a copy as a PUT
	if err != nil {
		return b.f.end(p, 0, err)
	}
	return b.f.end(p, 0, b.inner.Copy(ctx, dst, src, nil))
}

func (b *bucket) Delete(ctx context.Context, key string, _ *driver.DeleteOptions) error {
	p, err := b.f.begin(ctx, Delete, key, 0)
	if err != nil {
		return b.f.end(p, 0, err)
	}
	return b.f.end(p, 0, b.inner.Delete(ctx, key))
}

func (b *bucket) SignedURL(ctx context.Context, key string, opts *driver.SignedURLOptions) (string, error) {
	return b.inner.SignedURL(ctx, key, &blob.SignedURLOptions{Expiry: opts.Expiry, Method: opts.Method, ContentType: opts.ContentType, EnforceAbsentContentType: opts.EnforceAbsentContentType})
}

func (b *bucket) Close() error { return nil }

func isEOF(err error) bool { return err == io.EOF }

// perMiB is the time n bytes take at d per MiB.
func perMiB(d time.Duration, n int64) time.Duration {
	return time.Duration(float64(d) * float64(n) / (1 << 20))
}

// sleep waits d on clk, or until ctx ends, when it returns ctx's error;
// a ctx already ended returns its error whatever d.
func sleep(ctx context.Context, clk clock.Clock, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return clock.Sleep(ctx, clk, d)
}
