// Package objstats counts the calls a program makes to an object store, and
// the bytes they move, by wrapping a *blob.Bucket: every PUT, GET, LIST,
// DELETE and HEAD goes through the wrapper, so counting is in one place
// rather than at each call site.
package objstats

import (
	"context"
	"sync/atomic"

	"gocloud.dev/blob"
	"gocloud.dev/blob/driver"
	"gocloud.dev/gcerrors"

	"github.com/diskless-go/diskless/internal/blobwrap"
)

// Kind is a kind of object-store call.
type Kind int

// The kinds, as object stores bill them.
const (
	Put Kind = iota
	Get
	List
	Delete
	Head
	numKinds
)

// String returns the call's name: PUT, GET, LIST, DELETE or HEAD.
func (k Kind) String() string {
	return [...]string{"PUT", "GET", "LIST", "DELETE", "HEAD"}[k]
}

// Counter holds the counts of a wrapped bucket. It is safe for concurrent
// use.
type Counter struct {
	calls [numKinds]atomic.Int64
	bytes [numKinds]atomic.Int64
}

// Stats is a snapshot of a Counter: calls and bytes by Kind.
type Stats struct {
	Calls [numKinds]int64
	Bytes [numKinds]int64
}

// Snapshot returns the counts so far.
func (c *Counter) Snapshot() Stats {
	var s Stats
	for k := range numKinds {
		s.Calls[k] = c.calls[k].Load()
		s.Bytes[k] = c.bytes[k].Load()
	}
	return s
}

// Wrap returns a bucket that forwards every call to inner and counts it.
// Closing the returned bucket does not close inner.
func Wrap(inner *blob.Bucket) (*blob.Bucket, *Counter) {
	c := &Counter{}
	return blob.NewBucket(&bucket{inner: inner, c: c}), c
}

type bucket struct {
	inner *blob.Bucket
	c     *Counter
}

var _ driver.Bucket = (*bucket)(nil)

func (b *bucket) ErrorCode(err error) gcerrors.ErrorCode { return gcerrors.Code(err) }
func (b *bucket) As(i any) bool                          { return b.inner.As(i) }
func (b *bucket) ErrorAs(err error, i any) bool          { return b.inner.ErrorAs(err, i) }

func (b *bucket) Attributes(ctx context.Context, key string) (*driver.Attributes, error) {
	b.c.calls[Head].Add(1)
	return blobwrap.Attributes(ctx, b.inner, key)
}

func (b *bucket) ListPaged(ctx context.Context, opts *driver.ListOptions) (*driver.ListPage, error) {
	b.c.calls[List].Add(1)
	return blobwrap.ListPage(ctx, b.inner, opts)
}

func (b *bucket) NewRangeReader(ctx context.Context, key string, offset, length int64, _ *driver.ReaderOptions) (driver.Reader, error) {
	b.c.calls[Get].Add(1)
	r, err := b.inner.NewRangeReader(ctx, key, offset, length, nil)
	if err != nil {
		return nil, err
	}
	return &reader{r: r, c: b.c}, nil
}

type reader struct {
	r *blob.Reader
	c *Counter
}

func (r *reader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.c.bytes[Get].Add(int64(n))
	return n, err
}
func (r *reader) Close() error  { return r.r.Close() }
func (r *reader) As(i any) bool { return r.r.As(i) }
func (r *reader) Attributes() *driver.ReaderAttributes {
	return &driver.ReaderAttributes{ContentType: r.r.ContentType(), ModTime: r.r.ModTime(), Size: r.r.Size()}
}

func (b *bucket) NewTypedWriter(ctx context.Context, key, contentType string, opts *driver.WriterOptions) (driver.Writer, error) {
	w, err := b.inner.NewWriter(ctx, key, &blob.WriterOptions{
		BufferSize: opts.BufferSize, MaxConcurrency: opts.MaxConcurrency,
		CacheControl: opts.CacheControl, ContentDisposition: opts.ContentDisposition,
		ContentEncoding: opts.ContentEncoding, ContentLanguage: opts.ContentLanguage,
		ContentType: contentType, DisableContentTypeDetection: true, ContentMD5: opts.ContentMD5,
		Metadata: opts.Metadata, IfNotExist: opts.IfNotExist,
	})
	if err != nil {
		return nil, err
	}
	return &writer{w: w, c: b.c}, nil
}

type writer struct {
	w *blob.Writer
	c *Counter
	n int64
}

func (w *writer) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	w.n += int64(n)
	return n, err
}

func (w *writer) Close() error {
	w.c.calls[Put].Add(1)
	err := w.w.Close()
	if err == nil {
		w.c.bytes[Put].Add(w.n)
	}
	return err
}

func (b *bucket) Copy(ctx context.Context, dst, src string, _ *driver.CopyOptions) error {
	b.c.calls[Put].Add(1) // object stores bill a copy as a PUT
	return b.inner.Copy(ctx, dst, src, nil)
}

func (b *bucket) Delete(ctx context.Context, key string, _ *driver.DeleteOptions) error {
	b.c.calls[Delete].Add(1)
	return b.inner.Delete(ctx, key)
}

func (b *bucket) SignedURL(ctx context.Context, key string, opts *driver.SignedURLOptions) (string, error) {
	return b.inner.SignedURL(ctx, key, &blob.SignedURLOptions{Expiry: opts.Expiry, Method: opts.Method, ContentType: opts.ContentType, EnforceAbsentContentType: opts.EnforceAbsentContentType})
}

func (b *bucket) Close() error { return nil }
