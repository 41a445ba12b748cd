package cache

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
	"gocloud.dev/blob"
)

// Cache is a byte-range cache over the immutable objects of a bucket. It is
// safe for concurrent use.
type Cache struct {
	bucket    *blob.Bucket
	cfg       config
	log       *zap.Logger
	mem       *memory
	disk      *disk         // nil without Options.Dir
	coldSlots chan struct{} // a cold fill holds a slot while it fetches

	// ctx is the cache's lifetime: fills run under it, Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // fill goroutines
	closed atomic.Bool    // mirrors mu.closed for the lock-free hit path
	st     counters
	// spills takes dirty blocks the memory tier evicted to the spill
	// writer, which writes them to disk (nil without a disk tier).
	spills  chan spill
	spillWG sync.WaitGroup // the spill writer
	queued  sync.WaitGroup // spills sent to it and not yet written

	// Lock order: mu, then a memory shard's lock or the disk tier's lock.
	mu struct {
		sync.Mutex
		closed  bool
		flights map[string]map[int64]*fill // blocks being fetched
		hot     keyLRU[struct{}]           // keys read hot or Put
		sizes   keyLRU[int64]              // sizes of objects seen
	}
}

// sizeMemo is how many object sizes the cache remembers (about 100 bytes
// each). Objects never change, so a size once learned holds until Forget.
const sizeMemo = 1 << 14

// New returns a cache over bucket. With Options.Dir set it opens the disk
// tier, scanning the folder for the block files of a previous run (which
// is I/O proportional to the number of files). The caller keeps ownership
// of bucket and closes it after Close.
func New(bucket *blob.Bucket, opts *Options) (*Cache, error) {
	if bucket == nil {
		return nil, fmt.Errorf("cache: nil bucket")
	}
	cfg, err := opts.config()
	if err != nil {
		return nil, err
	}
	c := &Cache{
		bucket:    bucket,
		cfg:       cfg,
		log:       cfg.log,
		mem:       newMemory(cfg.memoryBytes, cfg.shards),
		coldSlots: make(chan struct{}, cfg.coldConcurrency),
	}
	if cfg.dir != "" {
		if c.disk, err = openDisk(cfg.dir, cfg.diskBytes, cfg.blockSize, cfg.log); err != nil {
			return nil, err
		}
		c.mem.begin = c.disk.begin
		c.spills = make(chan spill, spillQueue)
	}
	c.mu.flights = make(map[string]map[int64]*fill)
	c.mu.hot.init(cfg.hotKeys)
	c.mu.sizes.init(sizeMemo)
	// The cache outlives every call made to it, so its fills cannot run
	// under a caller's context: this is the one root context of the
	// package, and Close cancels it.
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if c.spills != nil {
		c.spillWG.Go(func() {
			for {
				select {
				case sp := <-c.spills:
					c.writeSpill(sp)
					c.queued.Done()
				case <-c.ctx.Done():
					return
				}
			}
		})
	}
	return c, nil
}

// spillQueue is how many evicted dirty blocks may wait for the spill
// writer (memory held beyond Options.MemoryBytes meanwhile); past it, the
// caller that evicted them writes them itself.
const spillQueue = 8

// spill has the dirty blocks ss, evicted from the memory tier, written to
// disk: by the spill writer, or here when its queue is full (or the cache
// is closing).
func (c *Cache) spill(ss []spill) {
	for _, sp := range ss {
		c.queued.Add(1)
		select {
		case c.spills <- sp:
		default:
			c.queued.Done()
			c.writeSpill(sp)
		}
	}
}

// writeSpill writes a spilled block to disk, unless Forget cancelled it.
func (c *Cache) writeSpill(sp spill) {
	defer c.disk.end(sp.w)
	c.disk.write(sp.w, sp.idx, sp.objSize, sp.data)
	c.st.spilled.Add(1)
}

// BlockSize returns the block size in use.
func (c *Cache) BlockSize() int64 { return c.cfg.blockSize }

// ReadRange returns the length bytes of the object key that start at
// offset: all of them, or an error. It allocates the result (length bytes,
// up front); ReadRangeInto reads into the caller's buffer. The read's class
// is ClassAuto.
func (c *Cache) ReadRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if length < 0 || length > math.MaxInt {
		return nil, fmt.Errorf("%w: length %d", ErrInvalidRange, length)
	}
	dst := make([]byte, length)
	if err := c.ReadRangeInto(ctx, key, offset, dst, nil); err != nil {
		return nil, err
	}
	return dst, nil
}

// ReadRangeInto fills dst with the bytes of the object key that start at
// offset, or returns an error; on error the contents of dst are undefined.
// A read whose blocks are all in memory does not allocate. A read that
// misses waits for the fills of its blocks until they finish or ctx ends;
// a fill that fails is not cached, and the next read tries again.
//
// A range that ends past the object's end fails with ErrOutOfRange. A
// zero-length read returns nil at once, whatever the offset.
func (c *Cache) ReadRangeInto(ctx context.Context, key string, offset int64, dst []byte, opts *ReadOptions) error {
	if c.closed.Load() {
		return ErrClosed
	}
	n := int64(len(dst))
	if offset < 0 || offset > math.MaxInt64-n {
		return fmt.Errorf("%w: offset %d, length %d", ErrInvalidRange, offset, n)
	}
	if n == 0 {
		return nil
	}
	var ro ReadOptions
	if opts != nil {
		ro = *opts
	}
	end := offset + n
	if ro.ObjectSize > 0 && end > ro.ObjectSize {
		return outOfRange(key, offset, n, ro.ObjectSize)
	}
	// The hit path: copy blocks from memory while they are there.
	bs := c.cfg.blockSize
	pos := offset
	for idx := offset / bs; pos < end; idx++ {
		data, objSize, ok := c.mem.get(key, idx)
		if !ok {
			break
		}
		if end > objSize || ro.ObjectSize > 0 && ro.ObjectSize != objSize {
			return c.badSize(key, offset, n, objSize, ro)
		}
		m := copy(dst[pos-offset:], data[pos-idx*bs:])
		if m == 0 {
			return fmt.Errorf("%w: block %d of %q holds %d bytes", ErrOutOfRange, idx, key, len(data))
		}
		pos += int64(m)
	}
	if pos == end {
		return nil
	}
	return c.readSlow(ctx, key, offset, dst, pos, ro)
}

// The sources a read's block may come from.
const (
	srcNone = iota // not cached, not being fetched
	srcMem
	srcDisk
	srcFill
)

type source struct {
	kind    uint8
	data    []byte // srcMem
	objSize int64  // srcMem, srcDisk
	disk    *diskEntry
	fill    *fill
}

// readSlow reads the blocks of [pos, offset+len(dst)) that were not in
// memory: it plans under the lock where each block comes from, starting
// fills for runs of blocks that are nowhere, then reads the disk files and
// waits for the fills without the lock. A damaged or vanished disk file
// sends its block round again (it is then fetched).
func (c *Cache) readSlow(ctx context.Context, key string, offset int64, dst []byte, pos int64, ro ReadOptions) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("cache: read %q: %w", key, err)
	}
	bs := c.cfg.blockSize
	end := offset + int64(len(dst))
	first, last := pos/bs, (end-1)/bs
	srcs := make([]source, last-first+1)
	resolved := make([]bool, len(srcs))
	for {
		if err := c.plan(key, first, offset, end, srcs, resolved, ro); err != nil {
			return err
		}
		retry := false
		for i := range srcs {
			if resolved[i] {
				continue
			}
			idx := first + int64(i)
			s := &srcs[i]
			var data []byte
			var objSize int64
			switch s.kind {
			case srcMem:
				data, objSize = s.data, s.objSize
			case srcDisk:
				var err error
				data, err = c.disk.read(s.disk)
				if err != nil {
					c.disk.drop(s.disk, err)
					retry = true
					continue
				}
				c.st.diskHits.Add(1)
				objSize = s.disk.objSize
				c.spill(c.mem.insert(key, idx, data, objSize, false))
			case srcFill:
				select {
				case <-s.fill.done:
				case <-ctx.Done():
					return fmt.Errorf("cache: read %q: %w", key, ctx.Err())
				}
				if s.fill.err != nil {
					return s.fill.err
				}
				data, objSize = s.fill.block(idx), s.fill.size
			}
			if end > objSize || ro.ObjectSize > 0 && ro.ObjectSize != objSize {
				return c.badSize(key, offset, int64(len(dst)), objSize, ro)
			}
			start := max(offset, idx*bs)
			if int64(len(data)) < min(end, (idx+1)*bs)-idx*bs {
				return fmt.Errorf("%w: block %d of %q holds %d bytes", ErrOutOfRange, idx, key, len(data))
			}
			copy(dst[start-offset:], data[start-idx*bs:])
			resolved[i] = true
		}
		if !retry {
			return nil
		}
	}
}

// plan decides, under the lock, where each unresolved block of a read comes
// from, and starts one fill for each run of adjacent blocks that are in no
// tier and in no fill. It fails with ErrOutOfRange, before any GET, when
// the object's size is known and the read ends past it.
func (c *Cache) plan(key string, first, offset, end int64, srcs []source, resolved []bool, ro ReadOptions) error {
	objSize := int64(-1)
	if ro.ObjectSize > 0 {
		objSize = ro.ObjectSize
	}
	learn := func(size int64) error {
		if ro.ObjectSize > 0 && size != ro.ObjectSize {
			return fmt.Errorf("%w: %q is %d bytes, was told %d", ErrSizeMismatch, key, size, ro.ObjectSize)
		}
		objSize = size
		return nil
	}
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	_, isHot := c.mu.hot.get(key)
	hot := ro.Class == ClassHot || ro.Class == ClassAuto && isHot
	if ro.Class == ClassHot {
		c.mu.hot.set(key, struct{}{})
	}
	if size, ok := c.mu.sizes.get(key); ok {
		if err := learn(size); err != nil {
			c.mu.Unlock()
			return err
		}
	}
	flights := c.mu.flights[key]
	var err error
	for i := range srcs {
		if resolved[i] {
			continue
		}
		idx := first + int64(i)
		s := &srcs[i]
		*s = source{}
		if data, size, ok := c.mem.get(key, idx); ok {
			s.kind, s.data, s.objSize = srcMem, data, size
			err = learn(size)
		} else if f := flights[idx]; f != nil {
			s.kind, s.fill = srcFill, f
			if hot && f.cold && !f.promoted {
				f.promoted = true
				close(f.promote)
				c.st.promoted.Add(1)
			}
		} else if c.disk != nil {
			if e := c.disk.lookup(key, idx); e != nil {
				s.kind, s.disk, s.objSize = srcDisk, e, e.objSize
				err = learn(e.objSize)
			}
		}
		if err != nil {
			c.mu.Unlock()
			return err
		}
	}
	if objSize >= 0 && end > objSize {
		c.mu.Unlock()
		return outOfRange(key, offset, end-offset, objSize)
	}
	var started []*fill
	for i := 0; i < len(srcs); i++ {
		if resolved[i] {
			continue
		}
		switch srcs[i].kind {
		case srcNone:
		case srcFill:
			c.st.misses.Add(1)
			c.st.coalesced.Add(1)
			continue
		default:
			continue
		}
		j := i + 1
		for j < len(srcs) && !resolved[j] && srcs[j].kind == srcNone {
			j++
		}
		f := &fill{
			key:     key,
			first:   first + int64(i),
			n:       int64(j - i),
			objSize: objSize,
			promote: make(chan struct{}),
			done:    make(chan struct{}),
			cold:    !hot,
		}
		if flights == nil {
			flights = make(map[int64]*fill)
			c.mu.flights[key] = flights
		}
		for k := i; k < j; k++ {
			srcs[k].kind, srcs[k].fill = srcFill, f
			flights[f.first+int64(k-i)] = f
		}
		c.st.misses.Add(f.n)
		started = append(started, f)
		i = j - 1
	}
	c.wg.Add(len(started))
	c.mu.Unlock()
	for _, f := range started {
		c.st.fillsInFlight.Add(1)
		if f.cold {
			c.st.coldFills.Add(1)
		}
		go c.run(f)
	}
	return nil
}

// badSize explains why a read cannot be served from an object of size
// bytes: the caller gave another size, or the range ends past the end.
func (c *Cache) badSize(key string, offset, length, size int64, ro ReadOptions) error {
	if ro.ObjectSize > 0 && ro.ObjectSize != size {
		return fmt.Errorf("%w: %q is %d bytes, was told %d", ErrSizeMismatch, key, size, ro.ObjectSize)
	}
	return outOfRange(key, offset, length, size)
}

func outOfRange(key string, offset, length, size int64) error {
	return fmt.Errorf("%w: %q [%d, %d) of an object of %d bytes", ErrOutOfRange, key, offset, offset+length, size)
}

// Put caches the whole object key, whose bytes are data: the broker calls
// it with an object it has just uploaded, so that reads of the tail never
// GET. It copies data (the caller may reuse it) and fills the memory tier
// at once. The disk tier, if any, gets the blocks when the memory tier
// evicts them (or at Close), not now: an object forgotten while still in
// memory (deleted, merged, offloaded) is never written to disk, and the
// produce path writes nothing there. A block the memory tier cannot hold
// goes to disk at once. A crash loses the blocks only in memory; they are
// fetched again when read. ctx bounds the disk writes Put makes itself
// (of blocks it evicts while the spill writer is behind). A block file
// that cannot be written is counted and logged, not returned. The key is
// marked hot.
func (c *Cache) Put(ctx context.Context, key string, data []byte) error {
	return c.put(ctx, key, data, true)
}

// PutOwned is Put without the copy: the cache keeps data's blocks as
// slices of data, which the caller must not change afterwards (reading it
// is fine). The broker hands over each object it has uploaded this way.
// An object's blocks share its one allocation, which stays in memory
// until the last of them leaves the memory tier: with objects put whole
// and evicted least recently used first, their blocks mostly leave
// together.
func (c *Cache) PutOwned(ctx context.Context, key string, data []byte) error {
	return c.put(ctx, key, data, false)
}

func (c *Cache) put(ctx context.Context, key string, data []byte, copyData bool) error {
	if c.closed.Load() {
		return ErrClosed
	}
	bs := c.cfg.blockSize
	size := int64(len(data))
	blocks := make([][]byte, 0, (size+bs-1)/bs)
	for off := int64(0); off < size; off += bs {
		end := min(off+bs, size)
		if copyData {
			blocks = append(blocks, append([]byte(nil), data[off:end]...))
		} else {
			blocks = append(blocks, data[off:end:end])
		}
	}
	var spills []spill
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	for i, b := range blocks {
		spills = append(spills, c.mem.insert(key, int64(i), b, size, true)...)
	}
	c.mu.hot.set(key, struct{}{})
	c.mu.sizes.set(key, size)
	c.mu.Unlock()
	c.st.puts.Add(1)
	c.st.bytesPut.Add(size)
	for i := range spills {
		if err := ctx.Err(); err != nil {
			for _, sp := range spills[i:] {
				c.disk.end(sp.w)
			}
			return fmt.Errorf("cache: put %q: disk tier: %w", key, err)
		}
		c.spill(spills[i : i+1])
	}
	return nil
}

// Forget drops every cached block of key, from both tiers, and makes fills
// of key in flight drop what they fetch: the broker calls it when it
// deletes the object. A read that runs at the same time as Forget may
// cache blocks of key again. It deletes block files, without a context:
// removals are quick and cannot be interrupted.
func (c *Cache) Forget(key string) error {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	for _, f := range c.mu.flights[key] {
		f.forgotten = true
	}
	c.mu.hot.remove(key)
	c.mu.sizes.remove(key)
	c.mu.Unlock()
	c.mem.forget(key)
	if c.disk != nil {
		c.disk.forget(key)
	}
	c.st.forgets.Add(1)
	return nil
}

// Close cancels the fills in flight, waits for their goroutines (and the
// disk writes they make) to end, writes to the disk tier the blocks Put
// gave that are still only in memory (up to Options.MemoryBytes of
// writes: a graceful shutdown keeps the tail warm for the next New), and
// drops the memory tier; block files stay for the next New. Reads
// waiting for a cancelled fill get ErrClosed.
// Calls after Close return ErrClosed; Close itself may be called again and
// returns nil.
func (c *Cache) Close() error {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return nil
	}
	c.mu.closed = true
	c.closed.Store(true)
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	c.spillWG.Wait()
	// The blocks the spill writer had not written yet, and the dirty
	// ones still in memory: on disk for the next New.
	for {
		select {
		case sp := <-c.spills:
			c.writeSpill(sp)
			c.queued.Done()
			continue
		default:
		}
		break
	}
	for _, sp := range c.mem.clear() {
		c.writeSpill(sp)
	}
	return nil
}
