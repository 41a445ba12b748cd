package coordinator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"
	"gocloud.dev/blob/driver"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/memblob"
	"gocloud.dev/gcerrors"

	"github.com/diskless-go/diskless/internal/blobwrap"
	"github.com/diskless-go/diskless/internal/s3test"
)

// logFaultBucket is a blob driver over another *blob.Bucket that counts
// calls and injects failures and pauses: the bucket wrapper of these
// tests.
type logFaultBucket struct {
	inner *blob.Bucket

	mu     sync.Mutex
	counts map[string]int
	fault  func(op, key string) logFault // nil: no faults
}

// logFault is what logFaultBucket does to one call.
type logFault struct {
	// wait, if not nil, is received from before the call.
	wait <-chan struct{}
	// err fails the call: before it reaches the inner bucket, or, with
	// after (puts only), once it has.
	err   error
	after bool
}

// logFaultError is an injected error with its gcerrors code.
type logFaultError struct {
	code gcerrors.ErrorCode
	msg  string
}

func (e *logFaultError) Error() string { return "injected: " + e.msg }

// newLogFaultBucket returns the wrapper as a *blob.Bucket, and the wrapper.
func newLogFaultBucket(t testing.TB, inner *blob.Bucket) (*blob.Bucket, *logFaultBucket) {
	fb := &logFaultBucket{inner: inner, counts: map[string]int{}}
	b := blob.NewBucket(fb)
	t.Cleanup(func() { b.Close() })
	return b, fb
}

// setFault installs f (nil: none).
func (b *logFaultBucket) setFault(f func(op, key string) logFault) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fault = f
}

// count returns how many calls of op were made.
func (b *logFaultBucket) count(op string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.counts[op]
}

// before counts a call and applies its fault, if any.
func (b *logFaultBucket) before(ctx context.Context, op, key string) logFault {
	b.mu.Lock()
	b.counts[op]++
	f := b.fault
	b.mu.Unlock()
	if f == nil {
		return logFault{}
	}
	lf := f(op, key)
	if lf.wait != nil {
		select {
		case <-lf.wait:
		case <-ctx.Done():
			return logFault{err: ctx.Err()}
		}
	}
	return lf
}

func (b *logFaultBucket) ErrorCode(err error) gcerrors.ErrorCode {
	var fe *logFaultError
	if errors.As(err, &fe) {
		return fe.code
	}
	return gcerrors.Code(err)
}

// As lets a test reach the wrapper through its *blob.Bucket.
func (b *logFaultBucket) As(i any) bool {
	if p, ok := i.(**logFaultBucket); ok {
		*p = b
		return true
	}
	return false
}

func (b *logFaultBucket) ErrorAs(error, any) bool { return false }

func (b *logFaultBucket) Attributes(ctx context.Context, key string) (*driver.Attributes, error) {
	if f := b.before(ctx, "head", key); f.err != nil {
		return nil, f.err
	}
	a, err := b.inner.Attributes(ctx, key)
	if err != nil {
		return nil, err
	}
	return &driver.Attributes{ContentType: a.ContentType, ModTime: a.ModTime, Size: a.Size, MD5: a.MD5, ETag: a.ETag}, nil
}

func (b *logFaultBucket) ListPaged(ctx context.Context, opts *driver.ListOptions) (*driver.ListPage, error) {
	if f := b.before(ctx, "list", opts.Prefix); f.err != nil {
		return nil, f.err
	}
	return blobwrap.ListPage(ctx, b.inner, opts)
}

func (b *logFaultBucket) NewRangeReader(ctx context.Context, key string, offset, length int64, _ *driver.ReaderOptions) (driver.Reader, error) {
	if f := b.before(ctx, "get", key); f.err != nil {
		return nil, f.err
	}
	r, err := b.inner.NewRangeReader(ctx, key, offset, length, nil)
	if err != nil {
		return nil, err
	}
	return &logFaultReader{r: r}, nil
}

type logFaultReader struct{ r *blob.Reader }

func (r *logFaultReader) Read(p []byte) (int, error) { return r.r.Read(p) }
func (r *logFaultReader) Close() error               { return r.r.Close() }
func (r *logFaultReader) As(any) bool                { return false }
func (r *logFaultReader) Attributes() *driver.ReaderAttributes {
	return &driver.ReaderAttributes{ContentType: r.r.ContentType(), ModTime: r.r.ModTime(), Size: r.r.Size()}
}

func (b *logFaultBucket) NewTypedWriter(ctx context.Context, key, contentType string, opts *driver.WriterOptions) (driver.Writer, error) {
	return &logFaultWriter{ctx: ctx, b: b, key: key, contentType: contentType, ifNotExist: opts.IfNotExist}, nil
}

type logFaultWriter struct {
	ctx         context.Context
	b           *logFaultBucket
	key         string
	contentType string
	ifNotExist  bool
	buf         bytes.Buffer
}

func (w *logFaultWriter) Write(p []byte) (int, error) { return w.buf.Write(p) }

func (w *logFaultWriter) Close() error {
	f := w.b.before(w.ctx, "put", w.key)
	if f.err != nil && !f.after {
		return f.err
	}
	err := w.b.inner.WriteAll(w.ctx, w.key, w.buf.Bytes(), &blob.WriterOptions{
		ContentType: w.contentType, DisableContentTypeDetection: true, IfNotExist: w.ifNotExist,
	})
	if err != nil {
		return err
	}
	return f.err
}

func (b *logFaultBucket) Copy(context.Context, string, string, *driver.CopyOptions) error {
	return &logFaultError{gcerrors.Unimplemented, "copy"}
}

func (b *logFaultBucket) Delete(ctx context.Context, key string, _ *driver.DeleteOptions) error {
	if f := b.before(ctx, "delete", key); f.err != nil {
		return f.err
	}
	return b.inner.Delete(ctx, key)
}

func (b *logFaultBucket) SignedURL(context.Context, string, *driver.SignedURLOptions) (string, error) {
	return "", &logFaultError{gcerrors.Unimplemented, "signed URL"}
}

func (b *logFaultBucket) Close() error { return nil }

// testBucketLogOptions are fast options for tests: short backoff, no trim
// grace.
func testBucketLogOptions() *BucketLogOptions {
	return &BucketLogOptions{RetryBackoff: time.Millisecond, MaxAttempts: 3, TrimGrace: -1}
}

// newTestBucket returns a bucket of kind "mem" or "file", closed by the
// test's cleanup.
func newTestBucket(t testing.TB, kind string) *blob.Bucket {
	var b *blob.Bucket
	switch kind {
	case "mem":
		b = memblob.OpenBucket(nil)
	case "file":
		var err error
		b, err = fileblob.OpenBucket(t.TempDir(), &fileblob.Options{NoTempDir: true})
		require.NoError(t, err)
	case "s3":
		return s3test.Start(t).Bucket(t, "log") // a real S3 server over HTTP
	default:
		t.Fatalf("unknown bucket kind %q", kind)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func openTestBucketLog(t testing.TB, b *blob.Bucket, opts *BucketLogOptions) *BucketLog {
	if opts == nil {
		opts = testBucketLogOptions()
	}
	l, err := OpenBucketLog(context.Background(), b, "meta/0/", opts)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

// TestBucketLogIfNotExist checks what the conditional put of each test
// bucket does when the object exists: it must fail with
// FailedPrecondition, which is how BucketLog knows it is fenced.
func TestBucketLogIfNotExist(t *testing.T) {
	for _, kind := range []string{"mem", "file"} {
		t.Run("bucket="+kind, func(t *testing.T) {
			b := newTestBucket(t, kind)
			opts := &blob.WriterOptions{IfNotExist: true}
			require.NoError(t, b.WriteAll(t.Context(), "k", []byte("a"), opts))
			err := b.WriteAll(t.Context(), "k", []byte("b"), opts)
			require.Error(t, err)
			require.Equal(t, gcerrors.FailedPrecondition, gcerrors.Code(err))
			got, err := b.ReadAll(t.Context(), "k")
			require.NoError(t, err)
			require.Equal(t, "a", string(got))
		})
	}
}

func TestBucketLogOptionsValidated(t *testing.T) {
	b := newTestBucket(t, "mem")
	for _, o := range []BucketLogOptions{{MaxAttempts: -1}, {RetryBackoff: -1}, {AttemptTimeout: -1}, {ReadAhead: -1}, {MaxQueued: -1}} {
		_, err := OpenBucketLog(t.Context(), b, "", &o)
		require.ErrorIs(t, err, ErrInvalidOptions)
	}
	_, err := OpenBucketLog(t.Context(), nil, "", nil)
	require.ErrorIs(t, err, ErrInvalidOptions)
}

// TestBucketLogKeys checks the key layout and that Open lists once and
// finds the start and end.
func TestBucketLogKeys(t *testing.T) {
	b, fb := newLogFaultBucket(t, newTestBucket(t, "mem"))
	l := openTestBucketLog(t, b, nil)
	require.Equal(t, 1, fb.count("list"))
	for i := range 3 {
		r := <-l.Append([]byte{byte(i)})
		require.NoError(t, r.Err)
	}
	got, err := b.ReadAll(t.Context(), "meta/0/log/00000000000000000002")
	require.NoError(t, err)
	require.Equal(t, []byte{2}, got)
	require.NoError(t, l.Read(t.Context(), 0, func(int64, []byte) error { return nil }))
	require.Equal(t, 1, fb.count("list"), "appends and reads do not list")

	// Objects that are not entries are ignored.
	require.NoError(t, b.WriteAll(t.Context(), "meta/0/log/junk", []byte("x"), nil))
	require.NoError(t, b.WriteAll(t.Context(), "meta/0/log/0000000000000000000x", []byte("x"), nil))
	l2 := openTestBucketLog(t, b, nil)
	require.Equal(t, 2, fb.count("list"))
	require.Equal(t, int64(0), l2.Start())
	require.Equal(t, int64(3), l2.End())
}

// TestBucketLogOpenAfterPartialTrim: objects below a gap (left over by a
// Trim that stopped part way) are below the start.
func TestBucketLogOpenAfterPartialTrim(t *testing.T) {
	b := newTestBucket(t, "mem")
	for _, off := range []int64{0, 2, 5, 6, 7} {
		require.NoError(t, b.WriteAll(t.Context(), fmt.Sprintf("meta/0/log/%020d", off), []byte{byte(off)}, nil))
	}
	l := openTestBucketLog(t, b, nil)
	require.Equal(t, int64(5), l.Start())
	require.Equal(t, int64(8), l.End())
	require.ErrorIs(t, l.Read(t.Context(), 2, func(int64, []byte) error { return nil }), ErrTrimmed)
	require.NoError(t, l.Trim(t.Context(), 6))
	require.Equal(t, int64(6), l.Start())
	for _, off := range []int64{0, 2, 5} {
		ok, err := b.Exists(t.Context(), fmt.Sprintf("meta/0/log/%020d", off))
		require.NoError(t, err)
		require.False(t, ok, "offset %d", off)
	}
}

// TestBucketLogRetries: transient errors are retried, up to MaxAttempts.
func TestBucketLogRetries(t *testing.T) {
	b, fb := newLogFaultBucket(t, newTestBucket(t, "mem"))
	l := openTestBucketLog(t, b, nil) // MaxAttempts 3
	var mu sync.Mutex
	failures := 2
	fb.setFault(func(op, key string) logFault {
		mu.Lock()
		defer mu.Unlock()
		if op == "put" && failures > 0 {
			failures--
			return logFault{err: &logFaultError{gcerrors.Internal, "503"}}
		}
		return logFault{}
	})
	r := <-l.Append([]byte("a"))
	require.NoError(t, r.Err)
	require.Equal(t, 3, fb.count("put"))

	mu.Lock()
	failures = 3
	mu.Unlock()
	r = <-l.Append([]byte("b"))
	require.Error(t, r.Err)
	require.NotErrorIs(t, r.Err, ErrFenced)
	require.Equal(t, 6, fb.count("put"))

	// Errors that are not transient are not retried.
	fb.setFault(func(op, key string) logFault {
		if op == "put" {
			return logFault{err: &logFaultError{gcerrors.PermissionDenied, "403"}}
		}
		return logFault{}
	})
	require.NoError(t, l.Read(t.Context(), 0, func(int64, []byte) error { return nil })) // clears the failure
	r = <-l.Append([]byte("c"))
	require.Error(t, r.Err)
	require.Equal(t, 7, fb.count("put"))
}

// TestBucketLogAmbiguousPut: a put that reached the bucket but reported an
// error is retried; the retry finds the object, reads it back, and it is
// ours: success, not fenced.
func TestBucketLogAmbiguousPut(t *testing.T) {
	b, fb := newLogFaultBucket(t, newTestBucket(t, "mem"))
	l := openTestBucketLog(t, b, nil)
	first := true
	fb.setFault(func(op, key string) logFault {
		if op == "put" && first {
			first = false
			return logFault{err: &logFaultError{gcerrors.DeadlineExceeded, "timeout after the write"}, after: true}
		}
		return logFault{}
	})
	r := <-l.Append([]byte("mine"))
	require.NoError(t, r.Err)
	require.Equal(t, int64(0), r.Offset)
	r = <-l.Append([]byte("next"))
	require.NoError(t, r.Err)
	require.Equal(t, int64(1), r.Offset)
}

// TestBucketLogAmbiguousPutFenced: as above, but the object found is
// another writer's: fenced.
func TestBucketLogAmbiguousPutFenced(t *testing.T) {
	b, fb := newLogFaultBucket(t, newTestBucket(t, "mem"))
	l := openTestBucketLog(t, b, nil)
	first := true
	fb.setFault(func(op, key string) logFault {
		if op == "put" && first {
			first = false
			// Another writer's put lands while ours times out.
			if err := fb.inner.WriteAll(context.Background(), key, []byte("theirs"), nil); err != nil {
				panic(err)
			}
			return logFault{err: &logFaultError{gcerrors.DeadlineExceeded, "timeout"}}
		}
		return logFault{}
	})
	r := <-l.Append([]byte("mine"))
	require.ErrorIs(t, r.Err, ErrFenced)
}

// TestBucketLogCloseDuringPut: Close abandons the put in flight and fails
// it and the queued appends with ErrLogClosed, without waiting for the
// bucket.
func TestBucketLogCloseDuringPut(t *testing.T) {
	b, fb := newLogFaultBucket(t, newTestBucket(t, "mem"))
	l := openTestBucketLog(t, b, nil)
	entered := make(chan struct{})
	never := make(chan struct{})
	fb.setFault(func(op, key string) logFault {
		if op == "put" {
			close(entered)
			return logFault{wait: never}
		}
		return logFault{}
	})
	ch1 := l.Append([]byte("a"))
	ch2 := l.Append([]byte("b"))
	<-entered
	require.NoError(t, l.Close())
	require.ErrorIs(t, (<-ch1).Err, ErrLogClosed)
	require.ErrorIs(t, (<-ch2).Err, ErrLogClosed)
}

// TestBucketLogQueue: appends queue behind the put in flight, and Append
// blocks at MaxQueued.
func TestBucketLogQueue(t *testing.T) {
	b, fb := newLogFaultBucket(t, newTestBucket(t, "mem"))
	opts := testBucketLogOptions()
	opts.MaxQueued = 2
	l := openTestBucketLog(t, b, opts)
	require.Equal(t, 1, l.MaxInFlight())
	gate := make(chan struct{})
	fb.setFault(func(op, key string) logFault {
		if op == "put" {
			return logFault{wait: gate}
		}
		return logFault{}
	})
	ch0 := l.Append([]byte("0"))
	ch1 := l.Append([]byte("1"))
	require.Equal(t, int64(2), l.End())
	third := make(chan (<-chan AppendResult))
	go func() { third <- l.Append([]byte("2")) }()
	select {
	case <-third:
		t.Fatal("Append did not block at MaxQueued")
	default:
	}
	close(gate)
	require.Equal(t, int64(0), (<-ch0).Offset)
	require.Equal(t, int64(1), (<-ch1).Offset)
	r := <-<-third
	require.NoError(t, r.Err)
	require.Equal(t, int64(2), r.Offset)
}

// TestBucketLogTrimGrace: Trim keeps entries younger than TrimGrace
// (relative to the newest), and never the newest.
func TestBucketLogTrimGrace(t *testing.T) {
	b := newTestBucket(t, "mem")
	opts := testBucketLogOptions()
	opts.TrimGrace = time.Hour
	l := openTestBucketLog(t, b, opts)
	for i := range 5 {
		require.NoError(t, (<-l.Append([]byte{byte(i)})).Err)
	}
	require.NoError(t, l.Trim(t.Context(), 3))
	require.Equal(t, int64(0), l.Start(), "every entry is younger than the grace")

	opts.TrimGrace = -1
	l2 := openTestBucketLog(t, b, opts)
	require.NoError(t, l2.Trim(t.Context(), 100))
	require.Equal(t, int64(4), l2.Start(), "the newest entry stays")
	l3 := openTestBucketLog(t, b, opts)
	require.Equal(t, int64(4), l3.Start())
	require.Equal(t, int64(5), l3.End())
}

// TestBucketLogReadTrimmedByOther: a Read below this writer's end that
// finds an object gone reports ErrTrimmed rather than an early end.
func TestBucketLogReadTrimmedByOther(t *testing.T) {
	b := newTestBucket(t, "mem")
	a := openTestBucketLog(t, b, nil)
	for i := range 6 {
		require.NoError(t, (<-a.Append([]byte{byte(i)})).Err)
	}
	other := openTestBucketLog(t, b, nil)
	require.NoError(t, other.Trim(t.Context(), 4))
	err := a.Read(t.Context(), 1, func(int64, []byte) error { return nil })
	require.ErrorIs(t, err, ErrTrimmed)
}

// TestBucketLogReadAhead: a long Read issues GETs in parallel, and a Read
// at the end costs one GET.
func TestBucketLogReadAhead(t *testing.T) {
	b, fb := newLogFaultBucket(t, newTestBucket(t, "mem"))
	l := openTestBucketLog(t, b, nil)
	for i := range 40 {
		require.NoError(t, (<-l.Append([]byte{byte(i)})).Err)
	}
	before := fb.count("get")
	require.NoError(t, l.Read(t.Context(), 40, func(int64, []byte) error { return nil }))
	require.Equal(t, before+1, fb.count("get"))

	var got []int64
	require.NoError(t, l.Read(t.Context(), 0, func(off int64, e []byte) error {
		require.Equal(t, []byte{byte(off)}, e)
		got = append(got, off)
		return nil
	}))
	require.Len(t, got, 40)
	// At most ReadAhead GETs past the end were made, all cancelled or
	// not found.
	require.LessOrEqual(t, fb.count("get")-before-1, 40+DefaultBucketLogReadAhead)
}
