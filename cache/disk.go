package cache

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// disk is the disk tier: one block file per block in a folder, an LRU
// index of them in memory (rebuilt by scanning the folder on open), bounded
// in bytes of files. Files are written to a temporary name and renamed, so
// a file under a block name is whole unless the machine crashed or the disk
// damaged it; both CRCs catch that, and the file is deleted and its block
// fetched again. Nothing is fsynced: a cache loses nothing that matters.
type disk struct {
	dir       string
	capacity  int64
	blockSize int64
	log       *zap.Logger

	bytes       atomic.Int64 // written under mu, read by Stats
	blocks      atomic.Int64 // written under mu, read by Stats
	evictions   atomic.Int64
	damaged     atomic.Int64
	writeErrors atomic.Int64

	mu struct {
		sync.Mutex
		keys map[string]map[int64]*diskEntry
		lru  diskEntry // sentinel: lru.next is the most recently used
		// pending holds the writes begun for each key, so that forget can
		// cancel one whose file is not yet renamed into place.
		pending map[string]map[*diskWrite]struct{}
	}
}

// diskEntry is one block file. Its fields other than the links never
// change, so a reader may use them after releasing mu.
type diskEntry struct {
	key      string
	idx      int64
	name     string // file name in dir
	objSize  int64
	fileSize int64
	lruLinks[diskEntry]
}

// diskWrite is a registration for writing blocks of one key: forget
// cancels it, and a cancelled write leaves no file.
type diskWrite struct {
	key       string
	cancelled bool // guarded by disk.mu
}

// openDisk opens (creating it if needed) the folder and indexes the block
// files in it. Temporary files of an interrupted write, files whose header
// is damaged or was written with another block size are deleted. Files are
// ranked for eviction by modification time.
func openDisk(dir string, capacity, blockSize int64, log *zap.Logger) (*disk, error) {
	d := &disk{dir: dir, capacity: capacity, blockSize: blockSize, log: log}
	d.mu.keys = make(map[string]map[int64]*diskEntry)
	d.mu.pending = make(map[string]map[*diskWrite]struct{})
	lruInit(&d.mu.lru)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cache: disk tier: %w", err)
	}
	names, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("cache: disk tier: %w", err)
	}
	type found struct {
		e     *diskEntry
		mtime time.Time
	}
	var files []found
	var removed int
	for _, de := range names {
		name := de.Name()
		if de.IsDir() {
			continue
		}
		switch {
		case strings.HasSuffix(name, blockTmpExt):
			d.removeFile(name)
			removed++
		case strings.HasSuffix(name, blockFileExt):
			e, mtime, err := d.scanFile(name)
			if err != nil {
				if errors.Is(err, errDamaged) {
					d.damaged.Add(1)
				}
				d.log.Warn("cache: deleting a block file", zap.String("file", name), zap.Error(err))
				d.removeFile(name)
				removed++
				continue
			}
			files = append(files, found{e, mtime})
		}
	}
	// Oldest first, each pushed to the front: the newest ends most recent.
	slices.SortStableFunc(files, func(a, b found) int { return a.mtime.Compare(b.mtime) })
	d.mu.Lock()
	for _, f := range files {
		d.insertLocked(f.e)
	}
	d.evictLocked(nil)
	d.mu.Unlock()
	d.log.Info("cache: disk tier opened", zap.String("dir", dir), zap.Int64("blocks", d.blocks.Load()),
		zap.Int64("bytes", d.bytes.Load()), zap.Int("removed", removed), zap.Int64("evicted", d.evictions.Load()))
	return d, nil
}

// scanFile reads and checks the header of one block file (the data is
// checked when it is read).
func (d *disk) scanFile(name string) (*diskEntry, time.Time, error) {
	f, err := os.Open(filepath.Join(d.dir, name))
	if err != nil {
		return nil, time.Time{}, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, time.Time{}, err
	}
	buf := make([]byte, blockHeaderSize, blockHeaderSize+64)
	if _, err := io.ReadFull(f, buf); err != nil {
		return nil, time.Time{}, fmt.Errorf("%w: reading the header: %w", errDamaged, err)
	}
	_, kl, err := decodeFixedHeader(buf)
	if err != nil {
		return nil, time.Time{}, err
	}
	buf = slices.Grow(buf, kl)[:blockHeaderSize+kl]
	if _, err := io.ReadFull(f, buf[blockHeaderSize:]); err != nil {
		return nil, time.Time{}, fmt.Errorf("%w: reading the key: %w", errDamaged, err)
	}
	h, err := decodeBlockHeader(buf)
	if err != nil {
		return nil, time.Time{}, err
	}
	switch {
	case h.blockSize != d.blockSize:
		return nil, time.Time{}, fmt.Errorf("written with block size %d, not %d", h.blockSize, d.blockSize)
	case info.Size() != h.fileSize():
		return nil, time.Time{}, fmt.Errorf("%w: file of %d bytes, header says %d", errDamaged, info.Size(), h.fileSize())
	case name != blockFileName(h.key, h.idx):
		return nil, time.Time{}, fmt.Errorf("%w: named %s, header says block %d of %q", errDamaged, name, h.idx, h.key)
	}
	e := &diskEntry{key: h.key, idx: h.idx, name: name, objSize: h.objSize, fileSize: h.fileSize()}
	return e, info.ModTime(), nil
}

// lookup returns the file of block idx of key, or nil, and marks it most
// recently used.
func (d *disk) lookup(key string, idx int64) *diskEntry {
	d.mu.Lock()
	defer d.mu.Unlock()
	e := d.mu.keys[key][idx]
	if e != nil && d.mu.lru.next != e {
		lruUnlink(e)
		lruPushFront(&d.mu.lru, e)
	}
	return e
}

// read reads and checks the block file of e. It returns errGone when the
// file no longer exists (forgotten or evicted since lookup) and an error
// wrapping errDamaged when it fails a check.
func (d *disk) read(e *diskEntry) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(d.dir, e.name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errGone
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errDamaged, err)
	}
	h, data, err := decodeBlockFile(b)
	if err != nil {
		return nil, err
	}
	if h.key != e.key || h.idx != e.idx || h.objSize != e.objSize || h.blockSize != d.blockSize {
		return nil, fmt.Errorf("%w: holds block %d of %q (object of %d bytes, block size %d)", errDamaged, h.idx, h.key, h.objSize, h.blockSize)
	}
	return data, nil
}

// drop removes e after read failed with err: a damaged file is deleted.
func (d *disk) drop(e *diskEntry, err error) {
	damaged := errors.Is(err, errDamaged)
	if damaged {
		d.damaged.Add(1)
		d.log.Warn("cache: deleting a damaged block file", zap.String("file", e.name),
			zap.String("key", e.key), zap.Int64("block", e.idx), zap.Error(err))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.keys[e.key][e.idx] != e {
		return // replaced or removed meanwhile
	}
	d.removeLocked(e)
	if damaged {
		d.removeFile(e.name)
	}
}

// begin registers a write of blocks of key. The caller calls end when done.
func (d *disk) begin(key string) *diskWrite {
	w := &diskWrite{key: key}
	d.mu.Lock()
	defer d.mu.Unlock()
	ws := d.mu.pending[key]
	if ws == nil {
		ws = make(map[*diskWrite]struct{})
		d.mu.pending[key] = ws
	}
	ws[w] = struct{}{}
	return w
}

// end unregisters w.
func (d *disk) end(w *diskWrite) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ws := d.mu.pending[w.key]
	delete(ws, w)
	if len(ws) == 0 {
		delete(d.mu.pending, w.key)
	}
}

// write stores block idx of w's key: to a temporary file, then renamed into
// place unless w was cancelled meanwhile. It evicts least recently used
// files to stay within capacity; a file larger than the whole capacity is
// not written. A failure is counted and logged; the cache goes on without
// the file.
func (d *disk) write(w *diskWrite, idx, objSize int64, data []byte) {
	h := blockHeader{blockSize: d.blockSize, idx: idx, objSize: objSize, dataLen: int64(len(data)), key: w.key}
	if h.fileSize() > d.capacity {
		return
	}
	name := blockFileName(w.key, idx)
	tmp, err := d.writeTmp(&h, data)
	if err != nil {
		d.writeErrors.Add(1)
		d.log.Warn("cache: writing a block file", zap.String("key", w.key), zap.Int64("block", idx), zap.Error(err))
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if w.cancelled {
		d.removeFile(filepath.Base(tmp))
		return
	}
	if err := os.Rename(tmp, filepath.Join(d.dir, name)); err != nil {
		d.writeErrors.Add(1)
		d.log.Warn("cache: renaming a block file", zap.String("key", w.key), zap.Int64("block", idx), zap.Error(err))
		d.removeFile(filepath.Base(tmp))
		return
	}
	if old := d.mu.keys[w.key][idx]; old != nil {
		d.removeLocked(old) // its file was just replaced
	}
	e := &diskEntry{key: w.key, idx: idx, name: name, objSize: objSize, fileSize: h.fileSize()}
	d.insertLocked(e)
	d.evictLocked(e)
}

func (d *disk) writeTmp(h *blockHeader, data []byte) (string, error) {
	f, err := os.CreateTemp(d.dir, "block-*"+blockTmpExt)
	if err != nil {
		return "", err
	}
	buf := appendBlockHeader(make([]byte, 0, blockHeaderSize+len(h.key)), h)
	var trailer [blockTrailer]byte
	_, err = f.Write(buf)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		_, err = f.Write(appendBlockTrailer(trailer[:0], data))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// forget deletes every block file of key and cancels writes of key in
// progress.
func (d *disk) forget(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for w := range d.mu.pending[key] {
		w.cancelled = true
	}
	for _, e := range d.mu.keys[key] {
		d.removeLocked(e)
		d.removeFile(e.name)
	}
}

func (d *disk) insertLocked(e *diskEntry) {
	blocks := d.mu.keys[e.key]
	if blocks == nil {
		blocks = make(map[int64]*diskEntry)
		d.mu.keys[e.key] = blocks
	}
	blocks[e.idx] = e
	lruPushFront(&d.mu.lru, e)
	d.bytes.Add(e.fileSize)
	d.blocks.Add(1)
}

// evictLocked deletes least recently used files, never keep, until the
// files fit in capacity.
func (d *disk) evictLocked(keep *diskEntry) {
	for d.bytes.Load() > d.capacity {
		victim := d.mu.lru.prev
		if victim == &d.mu.lru || victim == keep {
			return
		}
		d.removeLocked(victim)
		d.removeFile(victim.name)
		d.evictions.Add(1)
	}
}

func (d *disk) removeLocked(e *diskEntry) {
	lruUnlink(e)
	deleteBlock(d.mu.keys, e.key, e.idx)
	d.bytes.Add(-e.fileSize)
	d.blocks.Add(-1)
}

func (d *disk) removeFile(name string) {
	if err := os.Remove(filepath.Join(d.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		d.log.Warn("cache: deleting a block file", zap.String("file", name), zap.Error(err))
	}
}
