// Package objstats counts the calls a program makes to an object store, and
// the bytes they move, by wrapping a *blob.Bucket: every PUT, GET, LIST,
// DELETE and HEAD goes through the wrapper, so counting is in one place
// rather than at each call site.
package objstats

import (
	"context"
	"io"
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
	o := &blob.WriterOptions{
		BufferSize: opts.BufferSize, MaxConcurrency: opts.MaxConcurrency,
		CacheControl: opts.CacheControl, ContentDisposition: opts.ContentDisposition,
		ContentEncoding: opts.ContentEncoding, ContentLanguage: opts.ContentLanguage,
		ContentType: contentType, DisableContentTypeDetection: true, ContentMD5: opts.ContentMD5,
		Metadata: opts.Metadata, IfNotExist: opts.IfNotExist, BeforeWrite: opts.BeforeWrite,
	}
	if contentType == "" {
		o.ContentType = "application/octet-stream" // blob.Bucket.Upload requires one
	}
	return &writer{ctx: ctx, b: b, key: key, opts: o}, nil
}

// writer counts a PUT. It opens the inner writer at the first Write; an
// Upload (the caller's only write, driver.Uploader) goes to the inner
// bucket's Upload, so that its driver reads the caller's reader itself.
type writer struct {
	ctx      context.Context
	b        *bucket
	key      string
	opts     *blob.WriterOptions
	w        *blob.Writer // nil until the first Write
	uploaded bool
	err      error // of the Upload, or of opening w
	n        int64
}

var _ driver.Uploader = (*writer)(nil)

func (w *writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.w == nil {
		if w.w, w.err = w.b.inner.NewWriter(w.ctx, w.key, w.opts); w.err != nil {
			return 0, w.err
		}
	}
	n, err := w.w.Write(p)
	w.n += int64(n)
	return n, err
}

// Upload writes everything r holds, as the caller's only write.
func (w *writer) Upload(r io.Reader) error {
	w.uploaded = true
	cr := &countingReader{r: r}
	w.err = w.b.inner.Upload(w.ctx, w.key, cr, w.opts)
	w.n = cr.n
	return nil // Close reports it, as for a Write
}

func (w *writer) Close() error {
	w.b.c.calls[Put].Add(1)
	err := w.err
	switch {
	case w.uploaded, err != nil:
	case w.w == nil: // nothing written: an empty object
		err = w.b.inner.WriteAll(w.ctx, w.key, nil, w.opts)
	default:
		err = w.w.Close()
	}
	if err == nil {
		w.b.c.bytes[Put].Add(w.n)
	}
	return err
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// WriteTo lets a bytes.Reader hand its bytes over in one Write.
func (c *countingReader) WriteTo(w io.Writer) (int64, error) {
	n, err := io.Copy(w, c.r)
	c.n += n
	return n, err
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
