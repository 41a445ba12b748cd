package sim

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync"
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

var (
	lossyEvery = flag.Uint64("sim.lossy.every", 200, "TestBrokenStoreCaught's store drops one WAL object PUT in this many")
	lossySeeds = flag.Int("sim.lossy.seeds", 0, "TestBrokenStoreCaught runs this many seeds instead of its three")
)

// lossyStore is a deliberately broken object store: it drops every
// n-th PUT of a WAL object and answers it as written, as a store that
// acknowledged a write it lost would. The checker must catch it.
//
// With staleFor set, it breaks the metadata log instead: a GET, HEAD or
// LIST does not see the log entries written in the last staleFor (no
// read-after-write consistency), and a conditional PUT of a log entry
// overwrites what is there (a conditional write lost). A broker that
// restarts then takes the last entry it can read for the log's end and
// writes over entries whose commits it acknowledged.
type lossyStore struct {
	inner    *blob.Bucket
	every    uint64
	staleFor time.Duration
	puts     atomic.Uint64
	lost     atomic.Int64
	mu       sync.Mutex
	written  map[string]time.Time // metadata log entries, when written
	start    time.Time            // entries of the first 5 minutes are never stale
}

// isLogEntry reports whether key is a metadata log entry.
func isLogEntry(key string) bool {
	return strings.Contains(key, "meta/") && strings.Contains(key, "/log/")
}

var _ driver.Bucket = (*lossyStore)(nil)

func (s *lossyStore) ErrorCode(err error) gcerrors.ErrorCode {
	if errors.Is(err, errStale) {
		return gcerrors.NotFound
	}
	return gcerrors.Code(err)
}

// errStale is the not-found answer of a read that does not see a recent
// write.
var errStale = errors.New("lossyStore: not found (a recent write not seen yet)")

// stale reports whether key is a log entry written too recently to be
// seen.
func (s *lossyStore) stale(key string) bool {
	if s.staleFor == 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.written[key]
	if ok && time.Since(at) < s.staleFor && at.Sub(s.start) > 5*time.Minute {
		s.lost.Add(1)
		return true
	}
	return false
}
func (s *lossyStore) As(any) bool             { return false }
func (s *lossyStore) ErrorAs(error, any) bool { return false }
func (s *lossyStore) Close() error            { return nil }

func (s *lossyStore) Attributes(ctx context.Context, key string) (*driver.Attributes, error) {
	if s.stale(key) {
		return nil, errStale
	}
	return blobwrap.Attributes(ctx, s.inner, key)
}

func (s *lossyStore) ListPaged(ctx context.Context, opts *driver.ListOptions) (*driver.ListPage, error) {
	page, err := blobwrap.ListPage(ctx, s.inner, opts)
	if err != nil || s.staleFor == 0 {
		return page, err
	}
	kept := page.Objects[:0]
	for _, o := range page.Objects {
		if !s.stale(o.Key) {
			kept = append(kept, o)
		}
	}
	page.Objects = kept
	return page, nil
}

func (s *lossyStore) NewRangeReader(ctx context.Context, key string, offset, length int64, _ *driver.ReaderOptions) (driver.Reader, error) {
	if s.stale(key) {
		return nil, errStale
	}
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
	if w.s.staleFor > 0 && isLogEntry(w.key) {
		w.s.mu.Lock()
		if w.s.written == nil {
			w.s.written = map[string]time.Time{}
		}
		w.s.written[w.key] = time.Now()
		w.s.mu.Unlock()
		w.ifNotExist = false // the condition is lost
	}
	if w.s.every > 0 && strings.Contains(w.key, "wal/") && w.s.puts.Add(1)%w.s.every == 0 {
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
	if raceEnabled {
		seeds = seeds[:1]
	}
	if *lossySeeds > 0 {
		seeds = nil
		for i := range *lossySeeds {
			seeds = append(seeds, uint64(100+i))
		}
	}
	for _, seed := range seeds {
		var lossy *lossyStore
		res := runSeedLenient(t, seed, Options{Duration: 30 * time.Minute, Faults: DefaultFaults, WrapStore: func(b *blob.Bucket) *blob.Bucket {
			lossy = &lossyStore{inner: b, every: *lossyEvery}
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
			t.Logf("  first: %v", res.Violations[0])
		}
		if len(res.Violations) > 0 {
			caught++
		}
	}
	if caught < len(seeds) {
		t.Errorf("the checker caught the lossy store on %d of %d seeds", caught, len(seeds))
	}
}

// TestStaleReadCaught: a store that does not let the newest metadata log
// entries be read and whose conditional writes overwrite is caught by
// the checker on every seed tried: after a crash the broker writes over
// acknowledged commits.
func TestStaleReadCaught(t *testing.T) {
	caught := 0
	seeds := []uint64{1, 2, 3}
	if raceEnabled {
		seeds = seeds[:1]
	}
	for _, seed := range seeds {
		var lossy *lossyStore
		res := runSeedLenient(t, seed, Options{Duration: 30 * time.Minute, Faults: DefaultFaults, WrapStore: func(b *blob.Bucket) *blob.Bucket {
			lossy = &lossyStore{inner: b, staleFor: 20 * time.Second, start: time.Now()}
			return blob.NewBucket(lossy)
		}})
		if res == nil {
			continue
		}
		names := map[string]int{}
		for _, v := range res.Violations {
			names[v.Check]++
		}
		t.Logf("seed %d: %d reads missed a log entry, %d faults; violations: %v", seed, lossy.lost.Load(), res.Faults, names)
		if len(res.Violations) > 0 {
			t.Logf("  first: %v", res.Violations[0])
		}
		if len(res.Violations) > 0 {
			caught++
		}
	}
	if caught < len(seeds) {
		t.Errorf("the checker caught the stale reads on %d of %d seeds", caught, len(seeds))
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
		opts.Dir = simDir(t)
		var err error
		res, err = Run(seed, opts)
		if err != nil {
			t.Logf("seed %d: %v", seed, err)
		}
	})
	return res
}
