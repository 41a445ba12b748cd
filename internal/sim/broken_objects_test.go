package sim

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/driver"
	"gocloud.dev/gcerrors"

	"github.com/diskless-go/diskless/internal/blobwrap"
)

var objectSeeds = flag.Int("sim.objects.seeds", 0, "TestEarlyDeleteCaught and TestLeakCaught run this many seeds (from 100) instead of their own")

// lifecycleStore is a deliberately broken object store for the WAL
// objects' lifecycle: with early set, it deletes one WAL object in every
// early.every, early.after after it was written, whatever its batches
// (a lifecycle that does not wait for them); with keep set, its deletes
// of WAL objects answer done and delete nothing (a leak). The checker
// must catch either.
type lifecycleStore struct {
	inner *blob.Bucket
	// every and after: the early delete, if every > 0.
	every uint64
	after time.Duration
	// keep makes the deletes of WAL objects do nothing.
	keep bool

	puts    atomic.Uint64
	broken  atomic.Int64 // objects deleted early, or deletes dropped
	pending atomic.Int64 // early deletes not yet made
}

var _ driver.Bucket = (*lifecycleStore)(nil)

func (s *lifecycleStore) ErrorCode(err error) gcerrors.ErrorCode { return gcerrors.Code(err) }
func (s *lifecycleStore) As(any) bool                            { return false }
func (s *lifecycleStore) ErrorAs(error, any) bool                { return false }
func (s *lifecycleStore) Close() error                           { return nil }

func (s *lifecycleStore) Attributes(ctx context.Context, key string) (*driver.Attributes, error) {
	return blobwrap.Attributes(ctx, s.inner, key)
}

func (s *lifecycleStore) ListPaged(ctx context.Context, opts *driver.ListOptions) (*driver.ListPage, error) {
	return blobwrap.ListPage(ctx, s.inner, opts)
}

func (s *lifecycleStore) NewRangeReader(ctx context.Context, key string, offset, length int64, _ *driver.ReaderOptions) (driver.Reader, error) {
	r, err := s.inner.NewRangeReader(ctx, key, offset, length, nil)
	if err != nil {
		return nil, err
	}
	return watchedReader{r}, nil
}

func (s *lifecycleStore) NewTypedWriter(ctx context.Context, key, contentType string, opts *driver.WriterOptions) (driver.Writer, error) {
	return &lifecycleWriter{ctx: ctx, s: s, key: key, contentType: contentType, ifNotExist: opts.IfNotExist, metadata: opts.Metadata}, nil
}

type lifecycleWriter struct {
	ctx         context.Context
	s           *lifecycleStore
	key         string
	contentType string
	ifNotExist  bool
	metadata    map[string]string
	buf         bytes.Buffer
}

func (w *lifecycleWriter) Write(p []byte) (int, error) { return w.buf.Write(p) }

func (w *lifecycleWriter) Close() error {
	s := w.s
	err := s.inner.WriteAll(w.ctx, w.key, w.buf.Bytes(), &blob.WriterOptions{
		ContentType: w.contentType, DisableContentTypeDetection: true, IfNotExist: w.ifNotExist, Metadata: w.metadata,
	})
	if err == nil && s.every > 0 && strings.HasPrefix(w.key, walPrefix) && s.puts.Add(1)%s.every == 0 {
		key := w.key
		s.pending.Add(1)
		time.AfterFunc(s.after, func() {
			defer s.pending.Add(-1)
			if s.inner.Delete(context.Background(), key) == nil {
				s.broken.Add(1)
			}
		})
	}
	return err
}

func (s *lifecycleStore) Copy(ctx context.Context, dst, src string, _ *driver.CopyOptions) error {
	return s.inner.Copy(ctx, dst, src, nil)
}

func (s *lifecycleStore) Delete(ctx context.Context, key string, _ *driver.DeleteOptions) error {
	if s.keep && strings.HasPrefix(key, walPrefix) {
		s.broken.Add(1)
		return nil // answered done, deleted nothing
	}
	return s.inner.Delete(ctx, key)
}

func (s *lifecycleStore) SignedURL(context.Context, string, *driver.SignedURLOptions) (string, error) {
	return "", errors.New("lifecycleStore: no signed URLs")
}

// runLifecycleStore runs seeds of three brokers under the cluster
// faults on a lifecycleStore made by mk, and returns on how many the
// checker reported want.
func runLifecycleStore(t *testing.T, seeds []uint64, want string, mk func(*blob.Bucket) *lifecycleStore) int {
	if *objectSeeds > 0 {
		seeds = nil
		for i := range *objectSeeds {
			seeds = append(seeds, uint64(100+i))
		}
	}
	caught := 0
	for _, seed := range seeds {
		var s *lifecycleStore
		res := runSeedLenient(t, seed, Options{Duration: clusterDuration, Faults: ClusterFaults, Brokers: 3, Skew: clusterSkew,
			WrapStore: func(b *blob.Bucket) *blob.Bucket {
				s = mk(b)
				return blob.NewBucket(s)
			}})
		if res == nil {
			continue
		}
		names := map[string]int{}
		var first *Violation
		for i, v := range res.Violations {
			names[v.Check]++
			if v.Check == want && first == nil {
				first = &res.Violations[i]
			}
		}
		t.Logf("seed %d: %d objects broken, %d faults; violations: %v", seed, s.broken.Load(), res.Faults, names)
		if first != nil {
			t.Logf("  %v", *first)
			caught++
		}
	}
	t.Logf("%s caught on %d of %d seeds", want, caught, len(seeds))
	return caught
}

// TestEarlyDeleteCaught: a store that deletes one WAL object in 20 half
// a minute after it was written, batches or not, is caught by
// object-deleted-after-batches on every seed tried (the final read, from
// emptied caches, reads every batch listed; the fetches under way find
// some gone too). Of the seeds 100 to 119, all 20 were caught.
func TestEarlyDeleteCaught(t *testing.T) {
	seeds := []uint64{1, 2, 3}
	if raceEnabled {
		seeds = seeds[:1]
	}
	caught := runLifecycleStore(t, seeds, "object-deleted-after-batches", func(b *blob.Bucket) *lifecycleStore {
		return &lifecycleStore{inner: b, every: 20, after: 30 * time.Second}
	})
	if caught < len(seeds) {
		t.Errorf("the checker caught the early deletes on %d of %d seeds", caught, len(seeds))
	}
}

// TestLeakCaught: a store whose deletes of WAL objects do nothing is
// caught by no-object-leak on every seed tried: every run deletes some
// objects (orphans of the crashes, objects whose batches compaction or
// DeleteRecords removed), and they stay. Of the seeds 100 to 119, all 20
// were caught.
func TestLeakCaught(t *testing.T) {
	seeds := []uint64{1, 2, 3}
	if raceEnabled {
		seeds = seeds[:1]
	}
	caught := runLifecycleStore(t, seeds, "no-object-leak", func(b *blob.Bucket) *lifecycleStore {
		return &lifecycleStore{inner: b, keep: true}
	})
	if caught < len(seeds) {
		t.Errorf("the checker caught the leak on %d of %d seeds", caught, len(seeds))
	}
}
