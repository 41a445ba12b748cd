package cache

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"
	"gocloud.dev/blob/driver"
	_ "gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/memblob"
	"gocloud.dev/gcerrors"

	"github.com/diskless-go/diskless/internal/s3test"
)

// faultBucket is a blob driver over another bucket that counts range GETs
// (and the bytes they return) and lets a test fail, hold or observe each
// one: the hook runs at the start of every GET, after it is counted. It
// is how the tests assert gets=N independently of the cache's own Stats.
type faultBucket struct {
	inner *blob.Bucket
	gets  atomic.Int64
	bytes atomic.Int64

	mu struct {
		sync.Mutex
		hook   func(ctx context.Context, key string, off, length int64) error
		failN  int            // fail this many next GETs
		failAt map[string]int // fail this many next GETs of "key@offset"
		getLog []string       // "key [from, to)" per GET, for scenarios
	}
}

var _ driver.Bucket = (*faultBucket)(nil)

// errInjected is the error of an injected GET failure.
var errInjected = errors.New("injected GET failure")

// newMemBucket returns a bucket over memblob and its fault wrapper.
func newMemBucket(t testing.TB) (*blob.Bucket, *faultBucket) {
	t.Helper()
	return wrapBucket(t, memblob.OpenBucket(nil))
}

// newFileBucket returns a bucket over a fileblob folder (opened by URL),
// and its fault wrapper.
func newFileBucket(t testing.TB) (*blob.Bucket, *faultBucket) {
	t.Helper()
	inner, err := blob.OpenBucket(t.Context(), "file://"+t.TempDir())
	require.NoError(t, err)
	return wrapBucket(t, inner)
}

// s3Buckets numbers the buckets newS3Bucket makes, so that tests sharing
// a server never share a bucket.
var s3Buckets atomic.Int64

// newS3Bucket returns a new bucket on a real S3 server over HTTP (see
// s3test), and its fault wrapper. With srv nil it starts a server for t
// alone; tests that open many buckets share one (see bucketKinds).
func newS3Bucket(t testing.TB, srv *s3test.Server) (*blob.Bucket, *faultBucket) {
	t.Helper()
	if srv == nil {
		srv = s3test.Start(t)
	}
	return wrapBucket(t, srv.Bucket(t, fmt.Sprintf("cache-%d", s3Buckets.Add(1))))
}

// openBucket opens a bucket, and its fault wrapper, that t closes when it
// ends.
type openBucket func(t testing.TB) (*blob.Bucket, *faultBucket)

// A bucketKind is one kind of bucket the read-path tests run over. start
// prepares what the kind's buckets share (the S3 server) for t and the
// subtests under it, and returns how to open one.
type bucketKind struct {
	name  string
	start func(t testing.TB) openBucket
}

// bucketKinds are the buckets the tests of real range reads run over:
// memory, a folder, and a real S3 server over HTTP, in that order (a
// scenario run with -rewrite writes its file in the first).
var bucketKinds = []bucketKind{
	{"mem", func(testing.TB) openBucket { return newMemBucket }},
	{"file", func(testing.TB) openBucket { return newFileBucket }},
	{"s3", func(t testing.TB) openBucket {
		srv := s3test.Start(t) // one server for every bucket under t
		return func(t testing.TB) (*blob.Bucket, *faultBucket) { return newS3Bucket(t, srv) }
	}},
}

func wrapBucket(t testing.TB, inner *blob.Bucket) (*blob.Bucket, *faultBucket) {
	fb := &faultBucket{inner: inner}
	b := blob.NewBucket(fb)
	t.Cleanup(func() {
		require.NoError(t, b.Close())
		require.NoError(t, inner.Close())
	})
	return b, fb
}

// setHook installs (or with nil removes) the per-GET hook.
func (fb *faultBucket) setHook(h func(ctx context.Context, key string, off, length int64) error) {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	fb.mu.hook = h
}

// failNext makes the next n GETs fail with errInjected.
func (fb *faultBucket) failNext(n int) {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	fb.mu.failN = n
}

// failNextAt makes the next GET of key that starts at off fail with
// errInjected.
func (fb *faultBucket) failNextAt(key string, off int64) {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if fb.mu.failAt == nil {
		fb.mu.failAt = map[string]int{}
	}
	fb.mu.failAt[fmt.Sprintf("%s@%d", key, off)]++
}

// takeLog returns the GETs logged since the last call.
func (fb *faultBucket) takeLog() []string {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	l := fb.mu.getLog
	fb.mu.getLog = nil
	return l
}

func (fb *faultBucket) NewRangeReader(ctx context.Context, key string, off, length int64, _ *driver.ReaderOptions) (driver.Reader, error) {
	fb.gets.Add(1)
	fb.mu.Lock()
	hook := fb.mu.hook
	fail := fb.mu.failN > 0
	if fail {
		fb.mu.failN--
	}
	if at := fmt.Sprintf("%s@%d", key, off); fb.mu.failAt[at] > 0 {
		fb.mu.failAt[at]--
		fail = true
	}
	to := "end"
	if length >= 0 {
		to = fmt.Sprint(off + length)
	}
	fb.mu.getLog = append(fb.mu.getLog, fmt.Sprintf("GET %s [%d, %s)", key, off, to))
	fb.mu.Unlock()
	if fail {
		return nil, errInjected
	}
	if hook != nil {
		if err := hook(ctx, key, off, length); err != nil {
			return nil, err
		}
	}
	r, err := fb.inner.NewRangeReader(ctx, key, off, length, nil)
	if err != nil {
		return nil, err
	}
	return &faultReader{fb: fb, r: r, attrs: driver.ReaderAttributes{Size: r.Size(), ModTime: r.ModTime(), ContentType: r.ContentType()}}, nil
}

type faultReader struct {
	fb    *faultBucket
	r     *blob.Reader
	attrs driver.ReaderAttributes
}

func (r *faultReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.fb.bytes.Add(int64(n))
	return n, err
}
func (r *faultReader) Close() error                         { return r.r.Close() }
func (r *faultReader) Attributes() *driver.ReaderAttributes { return &r.attrs }
func (r *faultReader) As(any) bool                          { return false }

func (fb *faultBucket) ErrorCode(err error) gcerrors.ErrorCode {
	if errors.Is(err, errInjected) {
		return gcerrors.Internal
	}
	return gcerrors.Code(err)
}
func (fb *faultBucket) As(any) bool             { return false }
func (fb *faultBucket) ErrorAs(error, any) bool { return false }

func (fb *faultBucket) Attributes(ctx context.Context, key string) (*driver.Attributes, error) {
	a, err := fb.inner.Attributes(ctx, key)
	if err != nil {
		return nil, err
	}
	return &driver.Attributes{Size: a.Size, ModTime: a.ModTime, ContentType: a.ContentType, ETag: a.ETag, MD5: a.MD5}, nil
}

func (fb *faultBucket) ListPaged(context.Context, *driver.ListOptions) (*driver.ListPage, error) {
	return nil, errors.ErrUnsupported
}

func (fb *faultBucket) NewTypedWriter(ctx context.Context, key, contentType string, opts *driver.WriterOptions) (driver.Writer, error) {
	return fb.inner.NewWriter(ctx, key, &blob.WriterOptions{ContentType: contentType})
}

func (fb *faultBucket) Copy(ctx context.Context, dst, src string, _ *driver.CopyOptions) error {
	return fb.inner.Copy(ctx, dst, src, nil)
}

func (fb *faultBucket) Delete(ctx context.Context, key string, _ *driver.DeleteOptions) error {
	return fb.inner.Delete(ctx, key)
}

func (fb *faultBucket) SignedURL(context.Context, string, *driver.SignedURLOptions) (string, error) {
	return "", errors.ErrUnsupported
}

func (fb *faultBucket) Close() error { return nil }

// content returns the deterministic bytes of a test object: random, seeded
// by the key and size, so that a byte copied from the wrong place shows.
func content(key string, size int64) []byte {
	var seed [32]byte
	h := fnv.New128a()
	fmt.Fprintf(h, "%s/%d", key, size)
	h.Sum(seed[:0])
	b := make([]byte, size)
	_, _ = rand.NewChaCha8(seed).Read(b)
	return b
}

// putObject writes content(key, size) to the bucket and returns it.
func putObject(t testing.TB, b *blob.Bucket, key string, size int64) []byte {
	t.Helper()
	data := content(key, size)
	require.NoError(t, b.WriteAll(t.Context(), key, data, nil))
	return data
}

// newCache returns a cache that the test closes when it ends.
func newCache(t testing.TB, b *blob.Bucket, opts *Options) *Cache {
	t.Helper()
	c, err := New(b, opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c
}

// settle waits until every fill goroutine, including its disk writes, has
// ended, and the spill writer has written what it was given. Only for
// tests that start no reads or puts meanwhile (it waits on the WaitGroup
// that Close waits on).
func (c *Cache) settle() {
	c.wg.Wait()
	c.queued.Wait()
}
