// Package testbucket gives tests the buckets they run over (memory, a
// local folder, a real S3 server) and a wrapper around any bucket that
// counts calls and injects failures and pauses, call by call.
//
// faultbucket injects faults by profile and rate, for workloads
// and benchmarks; this wrapper is for tests that must fail one given call
// ("the second put of this key", "every delete") and assert on the counts.
package testbucket

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/blob/driver"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/memblob"
	"gocloud.dev/gcerrors"

	"github.com/diskless-go/diskless/internal/blobwrap"
	"github.com/diskless-go/diskless/internal/s3test"
)

// Kinds are the bucket kinds New opens: every bucket suite runs over each.
var Kinds = []string{"mem", "file", "s3"}

// New returns an empty bucket of kind "mem", "file" (a temporary folder)
// or "s3" (a bucket on a real S3 server that the test starts), closed by
// the test's cleanup.
func New(tb testing.TB, kind string) *blob.Bucket {
	tb.Helper()
	var b *blob.Bucket
	switch kind {
	case "mem":
		b = memblob.OpenBucket(nil)
	case "file":
		var err error
		b, err = fileblob.OpenBucket(tb.TempDir(), &fileblob.Options{NoTempDir: true})
		if err != nil {
			tb.Fatal(err)
		}
	case "s3":
		return s3test.Start(tb).Bucket(tb, "bucket")
	default:
		tb.Fatalf("testbucket: unknown bucket kind %q", kind)
	}
	tb.Cleanup(func() { b.Close() })
	return b
}

// Fault is what the wrapper does to one call.
type Fault struct {
	// Wait, if not nil, is received from before the call (or the call's
	// context ends).
	Wait <-chan struct{}
	// Err fails the call: before it reaches the inner bucket, or, with
	// After (puts only), once it has.
	Err   error
	After bool
}

// Error is an injected error with its gcerrors code.
type Error struct {
	Code gcerrors.ErrorCode
	Msg  string
}

func (e *Error) Error() string { return "injected: " + e.Msg }

// Faults is the wrapper: a blob driver over another *blob.Bucket. Its
// operations are "head", "list", "get", "put", "delete". It is safe for
// concurrent use.
type Faults struct {
	inner *blob.Bucket

	mu     sync.Mutex
	counts map[string]int
	fault  func(op, key string) Fault // nil: no faults
}

// Wrap returns the wrapper around inner as a *blob.Bucket (closed by the
// test's cleanup; inner stays open), and the wrapper.
func Wrap(tb testing.TB, inner *blob.Bucket) (*blob.Bucket, *Faults) {
	f := &Faults{inner: inner, counts: map[string]int{}}
	b := blob.NewBucket(f)
	tb.Cleanup(func() { b.Close() })
	return b, f
}

// Of returns the wrapper under b, which Wrap returned, and whether it is
// one.
func Of(b *blob.Bucket) (*Faults, bool) {
	var f *Faults
	return f, b.As(&f)
}

// Set installs f, called before every call with its operation and key
// (nil: no faults).
func (b *Faults) Set(f func(op, key string) Fault) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fault = f
}

// Count returns how many calls of op were made.
func (b *Faults) Count(op string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.counts[op]
}

// before counts a call and applies its fault, if any.
func (b *Faults) before(ctx context.Context, op, key string) Fault {
	b.mu.Lock()
	b.counts[op]++
	f := b.fault
	b.mu.Unlock()
	if f == nil {
		return Fault{}
	}
	lf := f(op, key)
	if lf.Wait != nil {
		select {
		case <-lf.Wait:
		case <-ctx.Done():
			return Fault{Err: ctx.Err()}
		}
	}
	return lf
}

// ErrorCode implements driver.Bucket.
func (b *Faults) ErrorCode(err error) gcerrors.ErrorCode {
	var fe *Error
	if errors.As(err, &fe) {
		return fe.Code
	}
	return gcerrors.Code(err)
}

// As lets a test reach the wrapper through its *blob.Bucket (see Of).
func (b *Faults) As(i any) bool {
	if p, ok := i.(**Faults); ok {
		*p = b
		return true
	}
	return false
}

// ErrorAs implements driver.Bucket.
func (b *Faults) ErrorAs(error, any) bool { return false }

// Attributes implements driver.Bucket.
func (b *Faults) Attributes(ctx context.Context, key string) (*driver.Attributes, error) {
	if f := b.before(ctx, "head", key); f.Err != nil {
		return nil, f.Err
	}
	a, err := b.inner.Attributes(ctx, key)
	if err != nil {
		return nil, err
	}
	return &driver.Attributes{ContentType: a.ContentType, ModTime: a.ModTime, Size: a.Size, MD5: a.MD5, ETag: a.ETag}, nil
}

// ListPaged implements driver.Bucket.
func (b *Faults) ListPaged(ctx context.Context, opts *driver.ListOptions) (*driver.ListPage, error) {
	if f := b.before(ctx, "list", opts.Prefix); f.Err != nil {
		return nil, f.Err
	}
	return blobwrap.ListPage(ctx, b.inner, opts)
}

// NewRangeReader implements driver.Bucket.
func (b *Faults) NewRangeReader(ctx context.Context, key string, offset, length int64, _ *driver.ReaderOptions) (driver.Reader, error) {
	if f := b.before(ctx, "get", key); f.Err != nil {
		return nil, f.Err
	}
	r, err := b.inner.NewRangeReader(ctx, key, offset, length, nil)
	if err != nil {
		return nil, err
	}
	return &reader{r: r}, nil
}

type reader struct{ r *blob.Reader }

func (r *reader) Read(p []byte) (int, error) { return r.r.Read(p) }
func (r *reader) Close() error               { return r.r.Close() }
func (r *reader) As(any) bool                { return false }
func (r *reader) Attributes() *driver.ReaderAttributes {
	return &driver.ReaderAttributes{ContentType: r.r.ContentType(), ModTime: r.r.ModTime(), Size: r.r.Size()}
}

// NewTypedWriter implements driver.Bucket. The put is made at Close.
func (b *Faults) NewTypedWriter(ctx context.Context, key, contentType string, opts *driver.WriterOptions) (driver.Writer, error) {
	return &writer{ctx: ctx, b: b, key: key, contentType: contentType, ifNotExist: opts.IfNotExist}, nil
}

type writer struct {
	ctx         context.Context
	b           *Faults
	key         string
	contentType string
	ifNotExist  bool
	buf         bytes.Buffer
}

func (w *writer) Write(p []byte) (int, error) { return w.buf.Write(p) }

func (w *writer) Close() error {
	f := w.b.before(w.ctx, "put", w.key)
	if f.Err != nil && !f.After {
		return f.Err
	}
	err := w.b.inner.WriteAll(w.ctx, w.key, w.buf.Bytes(), &blob.WriterOptions{
		ContentType: w.contentType, DisableContentTypeDetection: true, IfNotExist: w.ifNotExist,
	})
	if err != nil {
		return err
	}
	return f.Err
}

// Copy implements driver.Bucket: unimplemented.
func (b *Faults) Copy(context.Context, string, string, *driver.CopyOptions) error {
	return &Error{gcerrors.Unimplemented, "copy"}
}

// Delete implements driver.Bucket.
func (b *Faults) Delete(ctx context.Context, key string, _ *driver.DeleteOptions) error {
	if f := b.before(ctx, "delete", key); f.Err != nil {
		return f.Err
	}
	return b.inner.Delete(ctx, key)
}

// SignedURL implements driver.Bucket: unimplemented.
func (b *Faults) SignedURL(context.Context, string, *driver.SignedURLOptions) (string, error) {
	return "", &Error{gcerrors.Unimplemented, "signed URL"}
}

// Close implements driver.Bucket; the inner bucket stays open.
func (b *Faults) Close() error { return nil }
