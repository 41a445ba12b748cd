package sim

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/cryptotest"
	"testing/synctest"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/driver"
	"gocloud.dev/gcerrors"

	"github.com/diskless-go/diskless/internal/blobwrap"
)

// lossyStore is a deliberately broken object store: it drops every
// n-th PUT of a WAL object and answers it as written, as a store that
// acknowledged a write it lost would. The checker must catch it.
type lossyStore struct {
	inner *blob.Bucket
	every uint64
	puts  atomic.Uint64
	lost  atomic.Int64
}

var _ driver.Bucket = (*lossyStore)(nil)

func (s *lossyStore) ErrorCode(err error) gcerrors.ErrorCode { return gcerrors.Code(err) }
func (s *lossyStore) As(any) bool                            { return false }
func (s *lossyStore) ErrorAs(error, any) bool                { return false }
func (s *lossyStore) Close() error                           { return nil }

func (s *lossyStore) Attributes(ctx context.Context, key string) (*driver.Attributes, error) {
	return blobwrap.Attributes(ctx, s.inner, key)
}

func (s *lossyStore) ListPaged(ctx context.Context, opts *driver.ListOptions) (*driver.ListPage, error) {
	return blobwrap.ListPage(ctx, s.inner, opts)
}

func (s *lossyStore) NewRangeReader(ctx context.Context, key string, offset, length int64, _ *driver.ReaderOptions) (driver.Reader, error) {
	r, err := s.inner.NewRangeReader(ctx, key, offset, length, nil)
	if err != nil {
		return nil, err
	}
	return lossyReader{r}, nil
}

type lossyReader struct{ r *blob.Reader }

func (r lossyReader) Read(p []byte) (int, error) { return r.r.Read(p) }
func (r lossyReader) Close() error               { return r.r.Close() }
func (r lossyReader) As(any) bool                { return false }
func (r lossyReader) Attributes() *driver.ReaderAttributes {
	return &driver.ReaderAttributes{ContentType: r.r.ContentType(), ModTime: r.r.ModTime(), Size: r.r.Size()}
}

func (s *lossyStore) NewTypedWriter(ctx context.Context, key, contentType string, opts *driver.WriterOptions) (driver.Writer, error) {
	return &lossyWriter{ctx: ctx, s: s, key: key, contentType: contentType, ifNotExist: opts.IfNotExist}, nil
}

type lossyWriter struct {
	ctx         context.Context
	s           *lossyStore
	key         string
	contentType string
	ifNotExist  bool
	buf         bytes.Buffer
}

func (w *lossyWriter) Write(p []byte) (int, error) { return w.buf.Write(p) }

func (w *lossyWriter) Close() error {
	if strings.Contains(w.key, "wal/") && w.s.puts.Add(1)%w.s.every == 0 {
		w.s.lost.Add(1)
		return nil // acknowledged, never written
	}
	return w.s.inner.WriteAll(w.ctx, w.key, w.buf.Bytes(), &blob.WriterOptions{
		ContentType: w.contentType, DisableContentTypeDetection: true, IfNotExist: w.ifNotExist,
	})
}

func (s *lossyStore) Copy(ctx context.Context, dst, src string, _ *driver.CopyOptions) error {
	return s.inner.Copy(ctx, dst, src, nil)
}

func (s *lossyStore) Delete(ctx context.Context, key string, _ *driver.DeleteOptions) error {
	return s.inner.Delete(ctx, key)
}

func (s *lossyStore) SignedURL(context.Context, string, *driver.SignedURLOptions) (string, error) {
	return "", fmt.Errorf("lossyStore: no signed URLs")
}

// TestBrokenStoreCaught: a store that drops one WAL object PUT in 200
// and acknowledges it is caught by the checker on every seed tried (the
// broker serves a lost object from its cache until a crash empties the
// cache; the final read, and the reads after a crash, find it gone).
func TestBrokenStoreCaught(t *testing.T) {
	caught := 0
	seeds := []uint64{1, 2, 3}
	for _, seed := range seeds {
		var lossy *lossyStore
		res := runSeedLenient(t, seed, Options{Duration: 30 * time.Minute, Faults: DefaultFaults, WrapStore: func(b *blob.Bucket) *blob.Bucket {
			lossy = &lossyStore{inner: b, every: 200}
			return blob.NewBucket(lossy)
		}})
		if res == nil {
			continue
		}
		var names []string
		for _, v := range res.Violations {
			names = append(names, v.Check)
		}
		t.Logf("seed %d: %d WAL PUTs dropped, %d faults; violations: %v", seed, lossy.lost.Load(), res.Faults, names)
		if len(res.Violations) > 0 {
			caught++
		}
	}
	if caught < len(seeds) {
		t.Errorf("the checker caught the lossy store on %d of %d seeds", caught, len(seeds))
	}
}

// runSeedLenient is runSeed for a broken store: a run error (a final
// read the broken store fails) is part of what the checker reports.
func runSeedLenient(t *testing.T, seed uint64, opts Options) *Result {
	t.Helper()
	var res *Result
	BeforeBubble()
	synctest.Test(t, func(t *testing.T) {
		cryptotest.SetGlobalRandom(t, seed)
		opts.Dir = t.TempDir()
		var err error
		res, err = Run(seed, opts)
		if err != nil {
			t.Logf("seed %d: %v", seed, err)
		}
	})
	return res
}
