package cache

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var seedFlag = flag.Uint64("seed", 0, "seed of TestRandomConcurrentReads (0: from the clock)")

// TestRandomConcurrentReads runs random reads, Puts and Forgets from
// several goroutines (under -race in CI) against a small cache with both
// tiers over each of bucketKinds, so that blocks are evicted, refetched,
// read from disk and joined in flight all the time, and checks every read
// against a direct read of the bucket. Afterwards the bounds hold, the
// bucket and Stats agree on GETs, and every block file is whole.
func TestRandomConcurrentReads(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed %[1]d)", seed)
	for _, kind := range bucketKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel() // the longest test of the package, three times
			testRandomConcurrentReads(t, kind.start(t), seed)
		})
	}
}

func testRandomConcurrentReads(t *testing.T, open openBucket, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0))
	b, fb := open(t)

	const blockSize = 64
	sizes := map[string]int64{}
	objects := map[string][]byte{}
	var keys []string
	for i := range 10 {
		key := fmt.Sprintf("wal/%04d", i)
		size := rng.Int64N(3000)
		switch i {
		case 0:
			size = 0
		case 1:
			size = 20 * blockSize
		}
		sizes[key] = size
		objects[key] = putObject(t, b, key, size)
		keys = append(keys, key)
	}
	dir := t.TempDir()
	opts := Options{BlockSize: blockSize, MemoryBytes: 2048, Shards: 4, Dir: dir, DiskBytes: 8192, ColdConcurrency: 2, HotKeys: 3}
	c := newCache(t, b, &opts)

	// direct reads the range from the bucket underneath the fault wrapper.
	// No bytes need no GET (S3 refuses one past the end, even of no bytes).
	direct := func(ctx context.Context, key string, off, n int64) ([]byte, error) {
		if n == 0 {
			return nil, nil
		}
		r, err := fb.inner.NewRangeReader(ctx, key, off, n, nil)
		if err != nil {
			return nil, err
		}
		defer r.Close()
		return io.ReadAll(r)
	}

	const workers, ops = 8, 300
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)+1))
			errs <- func() error {
				for i := range ops {
					key := keys[rng.IntN(len(keys))]
					size := sizes[key]
					switch op := rng.IntN(100); {
					case op < 80:
						off := rng.Int64N(size + 2*blockSize + 1)
						n := rng.Int64N(6 * blockSize)
						ro := &ReadOptions{Class: Class(rng.IntN(3))}
						if rng.IntN(3) == 0 && size > 0 {
							ro.ObjectSize = size
						}
						ctx := t.Context()
						cancelled := rng.IntN(20) == 0
						if cancelled {
							var cancel context.CancelFunc
							ctx, cancel = context.WithCancel(ctx)
							go cancel()
						}
						dst := make([]byte, n)
						err := c.ReadRangeInto(ctx, key, off, dst, ro)
						switch {
						case cancelled && errors.Is(err, context.Canceled):
						case n > 0 && off+n > size:
							if !errors.Is(err, ErrOutOfRange) {
								return fmt.Errorf("op %d: %s [%d, %d) of %d: got %v, want ErrOutOfRange", i, key, off, off+n, size, err)
							}
						case err != nil:
							return fmt.Errorf("op %d: %s [%d, %d) of %d: %w", i, key, off, off+n, size, err)
						default:
							want, err := direct(t.Context(), key, off, n)
							if err != nil {
								return err
							}
							if string(want) != string(dst) {
								return fmt.Errorf("op %d: %s [%d, %d): wrong bytes", i, key, off, off+n)
							}
						}
					case op < 90:
						if err := c.Put(t.Context(), key, objects[key]); err != nil {
							return err
						}
					default:
						if err := c.Forget(key); err != nil {
							return err
						}
					}
				}
				return nil
			}()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	c.settle()

	st := c.Stats()
	t.Logf("%+v", st)
	require.Equal(t, fb.gets.Load(), st.GETs)
	require.LessOrEqual(t, st.MemoryBytes, opts.MemoryBytes)
	for i := range c.mem.shards {
		require.LessOrEqual(t, c.mem.shards[i].bytes.Load(), c.mem.shards[i].capacity)
	}
	require.LessOrEqual(t, st.DiskBytes, opts.DiskBytes)
	require.Zero(t, st.FillsInFlight)
	require.Zero(t, st.DiskDamaged)
	require.Positive(t, st.Hits)
	require.Positive(t, st.DiskHits)
	require.Positive(t, st.Evictions)

	// Every file in the folder is indexed, whole, and holds the right bytes.
	files, err := filepath.Glob(filepath.Join(dir, "*"))
	require.NoError(t, err)
	require.Len(t, files, int(st.DiskBlocks))
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		h, data, err := decodeBlockFile(raw)
		require.NoError(t, err, f)
		require.Equal(t, blockFileName(h.key, h.idx), filepath.Base(f))
		require.Equal(t, objects[h.key][h.idx*blockSize:h.idx*blockSize+h.dataLen], data)
	}
}
