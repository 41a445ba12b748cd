package cache

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"gocloud.dev/gcerrors"
)

// small is a geometry for tests: 16-byte blocks, room for 64 of them in
// one shard.
var small = Options{BlockSize: 16, MemoryBytes: 1024, Shards: 1}

func TestNewOptions(t *testing.T) {
	b, _ := newMemBucket(t)
	for _, tc := range []struct {
		name string
		opts *Options
		err  string
	}{
		{"nil", nil, ""},
		{"zero", &Options{}, ""},
		{"small", &small, ""},
		{"block negative", &Options{BlockSize: -1}, "BlockSize"},
		{"block too large", &Options{BlockSize: MaxBlockSize + 1}, "BlockSize"},
		{"memory below a block", &Options{BlockSize: 1 << 20, MemoryBytes: 1 << 19}, "MemoryBytes"},
		{"shards negative", &Options{Shards: -1}, "Shards"},
		{"shards too many", &Options{BlockSize: 16, MemoryBytes: 64, Shards: 8}, "Shards"},
		{"disk bytes without dir", &Options{DiskBytes: 1 << 20}, "DiskBytes"},
		{"disk below a block", &Options{Dir: t.TempDir(), DiskBytes: 1}, "DiskBytes"},
		{"cold negative", &Options{ColdConcurrency: -1}, "ColdConcurrency"},
		{"hot keys negative", &Options{HotKeys: -1}, "HotKeys"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(b, tc.opts)
			if tc.err != "" {
				require.ErrorContains(t, err, "Options."+tc.err)
				return
			}
			require.NoError(t, err)
			require.NoError(t, c.Close())
		})
	}
	_, err := New(nil, nil)
	require.Error(t, err)

	c := newCache(t, b, nil)
	require.Equal(t, int64(DefaultBlockSize), c.BlockSize())
	require.Len(t, c.mem.shards, 16)
	require.Equal(t, DefaultColdConcurrency, cap(c.coldSlots))
	// Small memory: fewer shards, each holding at least four blocks.
	c = newCache(t, b, &Options{BlockSize: 1 << 20, MemoryBytes: 8 << 20})
	require.Len(t, c.mem.shards, 2)
}

// gate is a GET hook that holds GETs of the keys it is given until
// released (or their context ends), and records that they started.
type gate struct {
	keys    map[string]bool
	release chan struct{}
}

func newGate(keys ...string) *gate {
	g := &gate{keys: map[string]bool{}, release: make(chan struct{})}
	for _, k := range keys {
		g.keys[k] = true
	}
	return g
}

func (g *gate) hook(ctx context.Context, key string, off, length int64) error {
	if !g.keys[key] {
		return nil
	}
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

type result struct {
	data []byte
	err  error
}

// goRead reads in a goroutine and returns the channel of its result.
func goRead(ctx context.Context, c *Cache, key string, off, n int64, ro *ReadOptions) chan result {
	ch := make(chan result, 1)
	go func() {
		dst := make([]byte, n)
		err := c.ReadRangeInto(ctx, key, off, dst, ro)
		ch <- result{dst, err}
	}()
	return ch
}

func TestSingleFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, fb := newMemBucket(t)
		data := putObject(t, b, "k", 100)
		g := newGate("k")
		fb.setHook(g.hook)
		c := newCache(t, b, &small)

		// Eight readers of block 2 at once: one GET.
		var results []chan result
		for i := range 8 {
			results = append(results, goRead(t.Context(), c, "k", 32+int64(i), 8, nil))
		}
		synctest.Wait()
		st := c.Stats()
		require.Equal(t, int64(1), st.GETs)
		require.Equal(t, int64(1), st.FillsInFlight)
		require.Equal(t, int64(8), st.Misses)
		require.Equal(t, int64(7), st.Coalesced)

		// A reader of blocks 1 to 4 joins that fill for block 2 and fetches
		// 1 and 3-4 with two GETs of its own.
		wide := goRead(t.Context(), c, "k", 16, 64, nil)
		synctest.Wait()
		require.Equal(t, int64(3), c.Stats().GETs)

		close(g.release)
		for i, ch := range results {
			r := <-ch
			require.NoError(t, r.err)
			require.Equal(t, data[32+i:40+i], r.data)
		}
		r := <-wide
		require.NoError(t, r.err)
		require.Equal(t, data[16:80], r.data)
		require.Equal(t, int64(3), fb.gets.Load())
		require.ElementsMatch(t, []string{"GET k [32, 48)", "GET k [16, 32)", "GET k [48, 80)"}, fb.takeLog())
	})
}

// A reader whose context ends stops waiting at once; the fill goes on and
// serves the others, and its blocks are cached.
func TestCancelledReaderDoesNotBreakFill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, fb := newMemBucket(t)
		data := putObject(t, b, "k", 64)
		g := newGate("k")
		fb.setHook(g.hook)
		c := newCache(t, b, &small)

		ctx, cancel := context.WithCancel(t.Context())
		quitter := goRead(ctx, c, "k", 0, 64, nil)
		stayer := goRead(t.Context(), c, "k", 0, 64, nil)
		synctest.Wait()
		cancel()
		r := <-quitter
		require.ErrorIs(t, r.err, context.Canceled)
		synctest.Wait()
		require.Equal(t, int64(1), c.Stats().FillsInFlight, "the fill goes on")

		close(g.release)
		r = <-stayer
		require.NoError(t, r.err)
		require.Equal(t, data, r.data)
		got, err := c.ReadRange(t.Context(), "k", 0, 64)
		require.NoError(t, err)
		require.Equal(t, data, got)
		require.Equal(t, int64(1), fb.gets.Load())
	})
}

// A slow bucket (200 ms a GET, on synctest's fake clock): a reader with a
// 100 ms deadline gives up at 100 ms, one without gets its bytes at 200 ms,
// and the one GET serves both.
func TestSlowBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, fb := newMemBucket(t)
		data := putObject(t, b, "k", 64)
		fb.setHook(func(ctx context.Context, _ string, _, _ int64) error {
			select {
			case <-time.After(200 * time.Millisecond):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		c := newCache(t, b, &small)
		start := time.Now()

		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		hasty := goRead(ctx, c, "k", 0, 64, nil)
		patient := goRead(t.Context(), c, "k", 0, 64, nil)
		r := <-hasty
		require.ErrorIs(t, r.err, context.DeadlineExceeded)
		require.Equal(t, 100*time.Millisecond, time.Since(start))
		r = <-patient
		require.NoError(t, r.err)
		require.Equal(t, data, r.data)
		require.Equal(t, 200*time.Millisecond, time.Since(start))
		require.Equal(t, int64(1), fb.gets.Load())
	})
}

// Errors are not cached, whichever GET fails: inject a failure at GET 0,
// then 1, 2, ... of a workload until the workload runs without one. Every
// read returns the right bytes or the injected error (classified: its
// gcerrors code survives), and a second run without faults succeeds.
func TestFailEachGet(t *testing.T) {
	type read struct {
		key       string
		off, n    int64
		outOfRang bool
	}
	workload := []read{
		{"a", 0, 40, false}, {"b", 20, 50, false}, {"a", 30, 40, false},
		{"c", 0, 10, false}, {"b", 0, 100, true}, {"a", 60, 20, false},
		{"b", 64, 16, false}, {"c", 5, 6, true},
	}
	for k := 0; ; k++ {
		b, fb := newMemBucket(t)
		objects := map[string][]byte{"a": putObject(t, b, "a", 80), "b": putObject(t, b, "b", 80), "c": putObject(t, b, "c", 10)}
		c, err := New(b, &small)
		require.NoError(t, err)
		var n int
		var mu sync.Mutex
		fb.setHook(func(context.Context, string, int64, int64) error {
			mu.Lock()
			defer mu.Unlock()
			n++
			if n-1 == k {
				return errInjected
			}
			return nil
		})
		failed := 0
		for _, r := range workload {
			got, err := c.ReadRange(t.Context(), r.key, r.off, r.n)
			switch {
			case errors.Is(err, errInjected):
				require.Equal(t, gcerrors.Internal, gcerrors.Code(err))
				failed++
			case r.outOfRang:
				require.ErrorIs(t, err, ErrOutOfRange)
			default:
				require.NoError(t, err)
				require.Equal(t, objects[r.key][r.off:r.off+r.n], got)
			}
		}
		injected := n > k
		require.Equal(t, injected, failed == 1, "fault at GET %d", k)
		// Again, without faults: everything reads, nothing wrong was kept.
		fb.setHook(nil)
		for _, r := range workload {
			got, err := c.ReadRange(t.Context(), r.key, r.off, r.n)
			if r.outOfRang {
				require.ErrorIs(t, err, ErrOutOfRange)
				continue
			}
			require.NoError(t, err)
			require.Equal(t, objects[r.key][r.off:r.off+r.n], got)
		}
		require.Equal(t, fb.gets.Load(), c.Stats().GETs)
		require.NoError(t, c.Close())
		if !injected {
			require.Greater(t, k, 3, "the workload should take several GETs")
			return
		}
	}
}

// A saturated cold path does not hold a hot read: with one cold slot taken
// by a GET that hangs and another cold fill queued behind it, a hot read
// of another object, an auto read of an object just Put, and a hot read
// that joins the queued cold fill (promoting it) all complete.
func TestColdSaturationDoesNotBlockHot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, fb := newMemBucket(t)
		old1 := putObject(t, b, "old1", 64)
		old2 := putObject(t, b, "old2", 64)
		tail := putObject(t, b, "tail", 64)
		g := newGate("old1")
		fb.setHook(g.hook)
		c := newCache(t, b, &Options{BlockSize: 16, MemoryBytes: 1024, Shards: 1, ColdConcurrency: 1})

		lag1 := goRead(t.Context(), c, "old1", 0, 64, nil) // takes the slot, hangs
		synctest.Wait()
		lag2 := goRead(t.Context(), c, "old2", 0, 64, &ReadOptions{Class: ClassCold}) // waits for it
		synctest.Wait()
		st := c.Stats()
		require.Equal(t, int64(2), st.ColdFills)
		require.Equal(t, int64(1), st.ColdWaiting)
		require.Equal(t, int64(2), st.FillsInFlight)

		// A hot read of new data, on this goroutine: it must not wait.
		got := make([]byte, 64)
		require.NoError(t, c.ReadRangeInto(t.Context(), "tail", 0, got, &ReadOptions{Class: ClassHot}))
		require.Equal(t, tail, got)

		// Put marks a key hot: an auto read of a block of it that was
		// evicted or not Put is hot too.
		require.NoError(t, c.Put(t.Context(), "fresh", putObject(t, b, "fresh", 64)))
		c.mem.forget("fresh")
		_, err := c.ReadRange(t.Context(), "fresh", 0, 64)
		require.NoError(t, err)

		// A hot read joining the queued cold fill lets it go without a slot.
		require.NoError(t, c.ReadRangeInto(t.Context(), "old2", 16, got[:16], &ReadOptions{Class: ClassHot}))
		require.Equal(t, old2[16:32], got[:16])
		r := <-lag2
		require.NoError(t, r.err)
		require.Equal(t, old2, r.data)
		st = c.Stats()
		require.Equal(t, int64(1), st.Promoted)
		require.Equal(t, int64(2), st.ColdFills)
		require.Equal(t, int64(1), st.FillsInFlight, "only old1 still hangs")

		close(g.release)
		r = <-lag1
		require.NoError(t, r.err)
		require.Equal(t, old1, r.data)
	})
}

// Close cancels fills, hung GETs and cold fills waiting for a slot alike;
// their readers get ErrClosed; every call after returns ErrClosed; Close
// again is fine.
func TestClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, fb := newMemBucket(t)
		putObject(t, b, "a", 64)
		putObject(t, b, "b", 64)
		g := newGate("a")
		fb.setHook(g.hook)
		c, err := New(b, &Options{BlockSize: 16, MemoryBytes: 1024, Shards: 1, ColdConcurrency: 1, Dir: t.TempDir()})
		require.NoError(t, err)
		ra := goRead(t.Context(), c, "a", 0, 64, nil) // takes the cold slot, hangs
		synctest.Wait()
		rb := goRead(t.Context(), c, "b", 0, 64, nil) // waits for the slot
		synctest.Wait()
		require.Equal(t, int64(1), c.Stats().ColdWaiting)
		require.NoError(t, c.Close())
		require.ErrorIs(t, (<-ra).err, ErrClosed)
		require.ErrorIs(t, (<-rb).err, ErrClosed)
		require.Zero(t, c.Stats().FillsInFlight)

		_, err = c.ReadRange(t.Context(), "a", 0, 1)
		require.ErrorIs(t, err, ErrClosed)
		require.ErrorIs(t, c.ReadRangeInto(t.Context(), "a", 0, make([]byte, 1), nil), ErrClosed)
		require.ErrorIs(t, c.Put(t.Context(), "a", []byte("x")), ErrClosed)
		require.ErrorIs(t, c.Forget("a"), ErrClosed)
		require.NoError(t, c.Close())
	})
}

// Forget while a fill of the key is in flight: the reader still gets its
// bytes, but they are not cached, in memory or on disk.
func TestForgetDuringFill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, fb := newMemBucket(t)
		data := putObject(t, b, "k", 64)
		g := newGate("k")
		fb.setHook(g.hook)
		dir := t.TempDir()
		c := newCache(t, b, &Options{BlockSize: 16, MemoryBytes: 1024, Shards: 1, Dir: dir})
		r := goRead(t.Context(), c, "k", 0, 64, nil)
		synctest.Wait()
		require.NoError(t, c.Forget("k"))
		close(g.release)
		res := <-r
		require.NoError(t, res.err)
		require.Equal(t, data, res.data)
		c.settle()
		st := c.Stats()
		require.Zero(t, st.MemoryBlocks)
		require.Zero(t, st.DiskBlocks)
		files, err := filepath.Glob(filepath.Join(dir, "*"))
		require.NoError(t, err)
		require.Empty(t, files)
	})
}

// Forget between a fill's memory insert and its disk writes (the writes
// are registered under the same lock as the insert) leaves no file.
func TestForgetCancelsPendingDiskWrites(t *testing.T) {
	b, _ := newMemBucket(t)
	dir := t.TempDir()
	c := newCache(t, b, &Options{BlockSize: 16, MemoryBytes: 1024, Shards: 1, Dir: dir})
	w := c.disk.begin("k")
	require.NoError(t, c.Forget("k"))
	c.disk.write(w, 0, 16, make([]byte, 16))
	c.disk.end(w)
	files, err := filepath.Glob(filepath.Join(dir, "*"))
	require.NoError(t, err)
	require.Empty(t, files)
	require.Zero(t, c.Stats().DiskBlocks)
}

// The disk tier keeps going when it cannot write: reads are served, the
// failures counted.
func TestDiskWriteErrors(t *testing.T) {
	b, _ := newMemBucket(t)
	data := putObject(t, b, "k", 64)
	dir := filepath.Join(t.TempDir(), "cache")
	c := newCache(t, b, &Options{BlockSize: 16, MemoryBytes: 1024, Shards: 1, Dir: dir})
	require.NoError(t, os.RemoveAll(dir))
	got, err := c.ReadRange(t.Context(), "k", 0, 64)
	require.NoError(t, err)
	require.Equal(t, data, got)
	require.NoError(t, c.Put(t.Context(), "p", data))
	c.settle()
	require.Equal(t, int64(4), c.Stats().DiskWriteErrors, "the fill's blocks; Put's stay in memory")
	require.NoError(t, c.Close()) // writes Put's blocks
	st := c.Stats()
	require.Equal(t, int64(8), st.DiskWriteErrors)
	require.Zero(t, st.DiskBlocks)
}

// Opening the disk tier cleans the folder: it deletes temporary files of
// interrupted writes and files written with another block size, and keeps
// files it does not own.
func TestDiskOpen(t *testing.T) {
	b, _ := newMemBucket(t)
	dir := t.TempDir()
	opts := Options{BlockSize: 16, MemoryBytes: 1024, Shards: 1, Dir: dir}
	c, err := New(b, &opts)
	require.NoError(t, err)
	require.NoError(t, c.Put(t.Context(), "k", content("k", 40)))
	require.NoError(t, c.Close())
	require.NoError(t, os.WriteFile(filepath.Join(dir, "block-123.tmp"), []byte("half"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))

	c, err = New(b, &opts)
	require.NoError(t, err)
	require.Equal(t, int64(3), c.Stats().DiskBlocks)
	got := make([]byte, 40)
	require.NoError(t, c.ReadRangeInto(t.Context(), "k", 0, got, nil))
	require.Equal(t, content("k", 40), got)
	require.Equal(t, int64(3), c.Stats().DiskHits)
	require.NoError(t, c.Close())
	_, err = os.Stat(filepath.Join(dir, "block-123.tmp"))
	require.ErrorIs(t, err, os.ErrNotExist)

	opts.BlockSize = 32
	c, err = New(b, &opts)
	require.NoError(t, err)
	require.Zero(t, c.Stats().DiskBlocks)
	require.NoError(t, c.Close())
	left, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	require.ElementsMatch(t, []string{"notes.txt", "sub"}, names)
}

func TestReadHitDoesNotAllocate(t *testing.T) {
	b, _ := newMemBucket(t)
	c := newCache(t, b, &Options{BlockSize: 4096, MemoryBytes: 1 << 20})
	require.NoError(t, c.Put(t.Context(), "k", content("k", 64<<10)))
	dst := make([]byte, 10000) // spans three or four blocks
	ro := &ReadOptions{Class: ClassHot, ObjectSize: 64 << 10}
	var err error
	allocs := testing.AllocsPerRun(100, func() {
		err = c.ReadRangeInto(t.Context(), "k", 3000, dst, ro)
	})
	require.NoError(t, err)
	require.Zero(t, allocs)
	allocs = testing.AllocsPerRun(100, func() {
		err = c.ReadRangeInto(t.Context(), "k", 3000, dst, nil)
	})
	require.NoError(t, err)
	require.Zero(t, allocs)
}

func TestReadRangeArguments(t *testing.T) {
	b, _ := newMemBucket(t)
	putObject(t, b, "k", 10)
	c := newCache(t, b, &small)
	_, err := c.ReadRange(t.Context(), "k", 0, -1)
	require.ErrorIs(t, err, ErrInvalidRange)
	require.ErrorIs(t, c.ReadRangeInto(t.Context(), "k", math.MaxInt64-10, make([]byte, 11), nil), ErrInvalidRange)
	got, err := c.ReadRange(t.Context(), "k", 5, 0)
	require.NoError(t, err)
	require.Empty(t, got)
	// A context already done does not start a fill.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = c.ReadRange(ctx, "k", 0, 1)
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, c.Stats().GETs)
	_, err = c.ReadRange(t.Context(), "missing", 0, 1)
	require.ErrorIs(t, err, ErrNotFound)
	require.Equal(t, gcerrors.NotFound, gcerrors.Code(err))
}

func TestKeyLRU(t *testing.T) {
	var l keyLRU[int]
	l.init(2)
	l.set("a", 1)
	l.set("b", 2)
	l.set("a", 3) // a is now the most recent
	l.set("c", 4) // drops b
	_, ok := l.get("b")
	require.False(t, ok)
	v, ok := l.get("a")
	require.True(t, ok)
	require.Equal(t, 3, v)
	l.remove("a")
	l.remove("nothing")
	_, ok = l.get("a")
	require.False(t, ok)
	require.Len(t, l.keys, 1)
}

func TestClassString(t *testing.T) {
	require.Equal(t, "auto hot cold Class(9)", fmt.Sprint(ClassAuto, ClassHot, ClassCold, Class(9)))
}

// PutOwned keeps the caller's bytes as the object's blocks, with no copy,
// and serves them as Put does.
func TestPutOwned(t *testing.T) {
	b, _ := newMemBucket(t)
	c := newCache(t, b, &Options{BlockSize: 16, MemoryBytes: 1024, Shards: 1})
	data := content("owned", 40)
	require.NoError(t, c.PutOwned(t.Context(), "owned", data))
	got, err := c.ReadRange(t.Context(), "owned", 0, 40)
	require.NoError(t, err)
	require.Equal(t, data, got)
	s := c.mem.shardOf("owned", 1)
	s.mu.Lock()
	e := s.mu.keys["owned"][1]
	s.mu.Unlock()
	require.NotNil(t, e)
	require.Same(t, &data[16], &e.data[0], "the block is a slice of the caller's bytes")
	require.Equal(t, 16, cap(e.data), "capped, so that nothing appends into the next block")
	require.Equal(t, int64(1), c.Stats().Puts)
}

// Put's blocks reach the disk tier when the memory tier evicts them, or
// at Close: a block forgotten while in memory is never written, an
// evicted one is read back from disk without a GET, and the ones in
// memory at Close are on disk for the next New.
func TestPutSpills(t *testing.T) {
	b, _ := newMemBucket(t)
	dir := t.TempDir()
	opts := Options{BlockSize: 16, MemoryBytes: 64, Shards: 1, Dir: dir}
	c, err := New(b, &opts)
	require.NoError(t, err)
	files := func() int {
		t.Helper()
		fs, err := filepath.Glob(filepath.Join(dir, "*.blk"))
		require.NoError(t, err)
		return len(fs)
	}

	gone := content("gone", 32)
	require.NoError(t, c.Put(t.Context(), "gone", gone))
	require.NoError(t, c.Forget("gone"))
	c.settle()
	require.Zero(t, files(), "a block forgotten in memory is never written")

	first, second := content("first", 64), content("second", 32)
	putObject(t, b, "first", 64)
	require.NoError(t, c.Put(t.Context(), "first", first))
	c.settle()
	require.Zero(t, files(), "nothing written while the memory tier holds it")
	require.NoError(t, c.Put(t.Context(), "second", second)) // evicts two blocks of first
	c.settle()
	require.Equal(t, 2, files(), "the evicted blocks spilled")
	require.Equal(t, int64(2), c.Stats().Spilled)
	got, err := c.ReadRange(t.Context(), "first", 0, 32)
	require.NoError(t, err)
	require.Equal(t, first[:32], got)
	st := c.Stats()
	require.Equal(t, int64(2), st.DiskHits)
	require.Zero(t, st.GETs, "read back from disk")

	require.NoError(t, c.Close())
	require.Equal(t, 6, files(), "the dirty blocks in memory written at Close")
	c, err = New(b, &opts)
	require.NoError(t, err)
	defer c.Close()
	got, err = c.ReadRange(t.Context(), "second", 0, 32)
	require.NoError(t, err)
	require.Equal(t, second, got)
	require.Zero(t, c.Stats().GETs, "served by the disk tier after a restart")
}
