package cache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/pprof"

	"go.uber.org/zap"
	"gocloud.dev/gcerrors"
)

// fill fetches a run of adjacent blocks of one object with one range GET.
// Every block of the run is registered in Cache.mu.flights while the fill
// runs, so a read that needs one of them waits for this fill instead of
// starting another. The fill runs in its own goroutine under the cache's
// lifetime context: a reader whose context ends stops waiting, the fill
// goes on for the others, and Close cancels it.
type fill struct {
	key     string
	first   int64 // index of the first block
	n       int64 // number of blocks asked for
	objSize int64 // the object's size when known at the start, else -1

	// promote is closed when a hot read joins this cold fill.
	promote chan struct{}
	// done is closed when the fill has finished; the fields below are set
	// before and never change after.
	done chan struct{}

	cold bool // set before the fill starts, never changed

	// Guarded by Cache.mu.
	promoted  bool
	forgotten bool // Forget was called: do not cache what it fetches

	// The result, valid once done is closed.
	blocks [][]byte // blocks[i] is block first+i; fewer than n at the object's end
	size   int64    // the object's size as the bucket reported it
	err    error
}

// block returns the fetched block idx, or nil if it lies past the object's
// end. Only valid once f.done is closed and f.err is nil.
func (f *fill) block(idx int64) []byte {
	if i := idx - f.first; i >= 0 && i < int64(len(f.blocks)) {
		return f.blocks[i]
	}
	return nil
}

// run is the fill's goroutine: wait for a cold slot if cold, fetch, publish,
// then write the blocks to disk.
func (c *Cache) run(f *fill) {
	defer c.wg.Done()
	class := "hot"
	if f.cold {
		class = "cold"
	}
	pprof.Do(c.ctx, pprof.Labels("diskless", "cache-fill", "class", class), func(ctx context.Context) {
		release := false
		if f.cold {
			c.st.coldWaiting.Add(1)
			select {
			case c.coldSlots <- struct{}{}:
				release = true
			case <-f.promote:
			case <-ctx.Done():
			}
			c.st.coldWaiting.Add(-1)
		}
		var blocks [][]byte
		var size int64
		err := ctx.Err()
		if err == nil {
			blocks, size, err = c.fetch(ctx, f)
		}
		if release {
			<-c.coldSlots
		}
		if err != nil {
			err = c.classify(f, err)
		}
		c.finish(f, blocks, size, err)
	})
}

// fetch GETs the fill's blocks in one range GET and cuts them into blocks.
func (c *Cache) fetch(ctx context.Context, f *fill) ([][]byte, int64, error) {
	bs := c.cfg.blockSize
	off := f.first * bs
	length := f.n * bs
	if f.objSize >= 0 {
		length = min(length, f.objSize-off)
	}
	c.st.gets.Add(1)
	var size int64
	r, err := c.bucket.NewRangeReader(ctx, f.key, off, length, nil)
	if err == nil {
		defer r.Close()
		size = r.Size()
	} else if size, err = c.pastEnd(ctx, f.key, off, err); err != nil {
		return nil, 0, err
	}
	if f.objSize >= 0 && size != f.objSize {
		return nil, size, fmt.Errorf("%w: the bucket says %q is %d bytes, not %d", ErrSizeMismatch, f.key, size, f.objSize)
	}
	want := min(f.n*bs, max(size-off, 0))
	blocks := make([][]byte, 0, (want+bs-1)/bs)
	for got := int64(0); got < want; {
		b := make([]byte, min(bs, want-got))
		n, err := io.ReadFull(r, b)
		c.st.bytesFetched.Add(int64(n))
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, size, fmt.Errorf("%w: %q at byte %d: got %d of %d bytes of an object of %d", ErrShortRead, f.key, off, got+int64(n), want, size)
		}
		if err != nil {
			return nil, size, err
		}
		blocks = append(blocks, b)
		got += int64(n)
	}
	return blocks, size, nil
}

// pastEnd looks into a failed range GET: memblob and fileblob answer a GET
// that starts at or past the end of the object with an empty reader that
// reports the object's size, but S3 refuses it (416 InvalidRange, which
// gcerrors.Code classifies as Unknown). So unless the object is missing,
// it asks the bucket for the object's size; if the range starts at or past
// it, it returns the size and no error, as if the GET had read nothing.
// Otherwise it returns getErr.
func (c *Cache) pastEnd(ctx context.Context, key string, off int64, getErr error) (int64, error) {
	if gcerrors.Code(getErr) == gcerrors.NotFound || ctx.Err() != nil {
		return 0, getErr
	}
	attrs, err := c.bucket.Attributes(ctx, key)
	if err != nil || off < attrs.Size {
		return 0, getErr
	}
	return attrs.Size, nil
}

// classify turns a failed fill's error into what its readers get: the
// bucket's error classified once, with gcerrors.Code.
func (c *Cache) classify(f *fill, err error) error {
	code := gcerrors.Code(err)
	switch {
	case c.ctx.Err() != nil:
		err = fmt.Errorf("%w: fill of %q cancelled: %w", ErrClosed, f.key, err)
	case code == gcerrors.NotFound:
		err = fmt.Errorf("%w: %q: %w", ErrNotFound, f.key, err)
	case errors.Is(err, ErrShortRead), errors.Is(err, ErrSizeMismatch):
	default:
		err = fmt.Errorf("cache: GET %q blocks %d to %d: %w", f.key, f.first, f.first+f.n-1, err)
	}
	c.st.getErrors.Add(1)
	c.log.Warn("cache: fill failed", zap.String("key", f.key), zap.Int64("first_block", f.first),
		zap.Int64("blocks", f.n), zap.Stringer("code", code), zap.Error(err))
	return err
}

// finish publishes a fill's result: caches the blocks (unless the key was
// forgotten meanwhile or the fill failed), unregisters the fill, wakes its
// readers, and then writes the blocks to disk.
func (c *Cache) finish(f *fill, blocks [][]byte, size int64, err error) {
	f.blocks, f.size, f.err = blocks, size, err
	var w *diskWrite
	var spills []spill
	c.mu.Lock()
	flights := c.mu.flights[f.key]
	for i := range f.n {
		if flights[f.first+i] == f {
			delete(flights, f.first+i)
		}
	}
	if len(flights) == 0 {
		delete(c.mu.flights, f.key)
	}
	if err == nil && !f.forgotten && !c.mu.closed {
		c.mu.sizes.set(f.key, size)
		for i, b := range blocks {
			spills = append(spills, c.mem.insert(f.key, f.first+int64(i), b, size, false)...)
		}
		if c.disk != nil && len(blocks) > 0 {
			w = c.disk.begin(f.key)
		}
	}
	c.mu.Unlock()
	c.st.fillsInFlight.Add(-1) // before the readers wake, so they see it
	close(f.done)
	c.spill(spills)
	if w == nil {
		return
	}
	defer c.disk.end(w)
	for i, b := range blocks {
		if c.ctx.Err() != nil {
			return
		}
		c.disk.write(w, f.first+int64(i), size, b)
	}
}
