package metalog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/diskless-go/diskless/coordinator/metalog/internal/pipeline"
)

// Defaults of FileOptions.
const (
	DefaultFileSegmentBytes = 64 << 20
	DefaultFileMaxInFlight  = 256
)

// FileOptions configure a File. The zero value holds the defaults; a
// nil *FileOptions means the zero value.
type FileOptions struct {
	// SegmentBytes rolls to a new segment file when the next frame would
	// take the current one past it (an entry larger than it gets a segment
	// of its own). 0 means DefaultFileSegmentBytes.
	SegmentBytes int64
	// MaxInFlight is how many appends may wait for their fsync at once;
	// Append blocks beyond it. 0 means DefaultFileMaxInFlight.
	MaxInFlight int
	// NoSync skips every fsync: an append is reported durable once it is
	// written to the operating system. UNSAFE: an operating system crash
	// or power loss loses acknowledged entries, and recovery may then find
	// the log corrupt. For benchmarks and tests only.
	NoSync bool
	// Logger logs recovery and failures; nil means none.
	Logger *zap.Logger
}

// File is a Log in a local folder: segment files of CRC-framed entries,
// fsynced by a background goroutine that completes every append its fsync
// covers (group commit). It is the fastest Log and the only one that
// lives on one machine. One File at a time may use a folder; the caller
// ensures it. It is safe for concurrent use.
//
// A write or fsync error makes the File fail every pending and later
// append (the failed entries are truncated away if that still works);
// Read still works; reopening recovers.
type File struct {
	dir          string
	segmentBytes int64
	maxInFlight  int
	noSync       bool
	log          *zap.Logger

	wake chan struct{} // appends are waiting for the syncer
	stop chan struct{} // closed by Close
	wg   sync.WaitGroup

	trimMu sync.Mutex // serialises Trim, and Close with it

	stats struct {
		appends, bytes, syncs, syncNanos atomic.Int64
	}

	// The syncer's own state, touched only by it (and by Open and Close
	// when it is not running).
	cur    *os.File        // the segment file being written
	curSeg *fileLogSegment //
	curPos int64           // bytes written to cur

	mu struct {
		sync.Mutex
		segs       []*fileLogSegment            // ascending; the last one takes appends
		activeSize int64                        // bytes of the last segment, written or not
		chunks     []fileLogChunk               // frames not yet taken by the syncer
		free       [][]byte                     // buffers to reuse for chunks
		q          pipeline.Queue[AppendResult] // appends without a result, in order; their failure
		next       int64                        // the offset of the next append
		durable    int64                        // entries before it are durable
		grew       chan struct{}                // closed (and replaced) when durable grows
		start      int64                        // the first offset held
	}
}

var _ Log = (*File)(nil)

// fileLogSegment is one segment file.
type fileLogSegment struct {
	base  int64
	path  string
	index []fileLogIndexPoint // guarded by File.mu
}

// fileLogIndexPoint says where in its segment file a frame starts.
type fileLogIndexPoint struct {
	offset, pos int64
}

// addIndex records the frame of offset at pos if it is far enough from
// the last point. The caller holds File.mu (or is Open).
func (s *fileLogSegment) addIndex(offset, pos int64) {
	if n := len(s.index); n == 0 || pos-s.index[n-1].pos >= fileLogIndexEvery {
		s.index = append(s.index, fileLogIndexPoint{offset, pos})
	}
}

// fileLogChunk is frames of one segment, in order, for the syncer.
type fileLogChunk struct {
	seg    *fileLogSegment
	create bool // the segment file does not exist yet
	data   []byte
	end    int64 // the offset after the chunk's last frame
}

// OpenFile opens the log in dir, creating dir and an empty log if
// needed, and recovers it (see the package doc): a torn tail of the last
// segment is truncated away; anything else that is not a valid frame is an
// error wrapping ErrCorrupt.
func OpenFile(dir string, opts *FileOptions) (*File, error) {
	var o FileOptions
	if opts != nil {
		o = *opts
	}
	switch {
	case o.SegmentBytes < 0:
		return nil, fmt.Errorf("%w: FileOptions.SegmentBytes %d is negative", ErrInvalidOptions, o.SegmentBytes)
	case o.MaxInFlight < 0:
		return nil, fmt.Errorf("%w: FileOptions.MaxInFlight %d is negative", ErrInvalidOptions, o.MaxInFlight)
	}
	if o.SegmentBytes == 0 {
		o.SegmentBytes = DefaultFileSegmentBytes
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = DefaultFileMaxInFlight
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	l := &File{
		dir:          dir,
		segmentBytes: o.SegmentBytes,
		maxInFlight:  o.MaxInFlight,
		noSync:       o.NoSync,
		log:          o.Logger,
		wake:         make(chan struct{}, 1),
		stop:         make(chan struct{}),
	}
	l.mu.q.Init(&l.mu.Mutex, o.MaxInFlight, "metalog: file", ErrClosed)
	l.mu.grew = make(chan struct{})
	if err := l.recover(); err != nil {
		if l.cur != nil {
			l.cur.Close()
		}
		return nil, err
	}
	l.wg.Add(1)
	go pprof.Do(context.Background(), pprof.Labels("diskless", "metalog-file"), func(context.Context) {
		defer l.wg.Done()
		l.run()
	})
	return l, nil
}

// run is the syncer: it writes and fsyncs what Append queued and sends
// the results, until Close, when it flushes everything left.
func (l *File) run() {
	for {
		select {
		case <-l.wake:
			l.flush()
		case <-l.stop:
			l.flush()
			return
		}
	}
}

// flush writes the queued chunks in order, fsyncing each, and completes
// the appends they hold, until none is left.
func (l *File) flush() {
	for {
		l.mu.Lock()
		chunks := l.mu.chunks
		l.mu.chunks = nil
		l.mu.Unlock()
		if len(chunks) == 0 {
			return
		}
		for i := range chunks {
			c := &chunks[i]
			err := l.writeChunk(c)
			l.mu.Lock()
			if err != nil {
				l.failLocked(err)
				l.mu.Unlock()
				return
			}
			l.mu.durable = c.end
			if l.mu.grew != nil { // made by a Wait only: no allocation per entry otherwise
				close(l.mu.grew)
				l.mu.grew = nil
			}
			l.mu.q.Answer(l.mu.durable)
			if len(l.mu.free) < 4 && cap(c.data) <= 4*fileLogMaxUnsynced {
				l.mu.free = append(l.mu.free, c.data[:0])
			}
			l.mu.Unlock()
		}
	}
}

// writeChunk writes c's frames at the end of its segment, at most
// fileLogMaxUnsynced bytes between fsyncs, creating the segment file (and
// fsyncing the folder) first if it is new. If it fails it truncates the
// segment back to where the chunk began.
func (l *File) writeChunk(c *fileLogChunk) error {
	if c.create {
		f, err := os.OpenFile(c.seg.path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return fmt.Errorf("metalog: file: creating a segment: %w", err)
		}
		if err := l.cur.Close(); err != nil {
			l.log.Warn("metalog: file: closing a full segment", zap.String("file", l.curSeg.path), zap.Error(err))
		}
		l.cur, l.curSeg, l.curPos = f, c.seg, 0
		if err := l.syncDir(); err != nil {
			return err
		}
	}
	if c.seg != l.curSeg {
		return fmt.Errorf("metalog: file: internal error: chunk for segment %d while writing %d", c.seg.base, l.curSeg.base)
	}
	begin := l.curPos
	for data := c.data; len(data) > 0; {
		n := min(len(data), fileLogMaxUnsynced)
		_, err := l.cur.WriteAt(data[:n], l.curPos)
		if err == nil && !l.noSync {
			t0 := time.Now() // real time: syncNanos is a latency metric
			err = l.cur.Sync()
			l.stats.syncs.Add(1)
			l.stats.syncNanos.Add(int64(time.Since(t0))) // real time: a latency metric
		}
		if err != nil {
			l.log.Error("metalog: file: write failed", zap.String("file", l.curSeg.path), zap.Error(err))
			if terr := l.cur.Truncate(begin); terr == nil {
				l.cur.Sync()
			}
			l.curPos = begin
			return fmt.Errorf("metalog: file: writing %s: %w", l.curSeg.path, err)
		}
		l.curPos += int64(n)
		l.stats.bytes.Add(int64(n))
		data = data[n:]
	}
	return nil
}

// syncDir fsyncs the folder, so that created, renamed and removed files
// are durable.
func (l *File) syncDir() error { return l.syncDirPath(l.dir) }

// syncDirPath fsyncs the folder dir.
func (l *File) syncDirPath(dir string) error {
	if l.noSync {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("metalog: file: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("metalog: file: syncing the folder: %w", err)
	}
	return nil
}

// failLocked makes the log fail: every append without a result, and every
// later one, fails with err.
func (l *File) failLocked(err error) {
	l.mu.q.Fail(err)
	l.mu.chunks = nil
	l.mu.next = l.mu.durable
}

// MaxInFlight implements Log.
func (l *File) MaxInFlight() int { return l.maxInFlight }

// Append implements Log. It queues the entry's frame for the syncer, which
// writes it and reports it once an fsync covers it.
func (l *File) Append(entry []byte) <-chan AppendResult {
	ch := make(chan AppendResult, 1)
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.mu.q.Admit(ch) {
		return ch
	}
	if len(entry) > math.MaxUint32 {
		err := fmt.Errorf("metalog: file: an entry of %d bytes is too large", len(entry))
		l.mu.q.SetFailed(err)
		l.mu.q.Refuse(ch, err)
		return ch
	}

	frame := int64(fileLogHeaderLen + len(entry))
	seg := l.mu.segs[len(l.mu.segs)-1]
	create := false
	if l.mu.activeSize > 0 && l.mu.activeSize+frame > l.segmentBytes {
		seg = &fileLogSegment{base: l.mu.next, path: filepath.Join(l.dir, fileLogSegmentName(l.mu.next))}
		l.mu.segs = append(l.mu.segs, seg)
		l.mu.activeSize = 0
		create = true
	}
	if n := len(l.mu.chunks); create || n == 0 || l.mu.chunks[n-1].seg != seg {
		var buf []byte
		if k := len(l.mu.free); k > 0 {
			buf, l.mu.free = l.mu.free[k-1], l.mu.free[:k-1]
		}
		l.mu.chunks = append(l.mu.chunks, fileLogChunk{seg: seg, create: create, data: buf})
	}
	c := &l.mu.chunks[len(l.mu.chunks)-1]
	seg.addIndex(l.mu.next, l.mu.activeSize)
	c.data = appendFileLogFrame(c.data, entry)
	l.mu.activeSize += frame
	off := l.mu.next
	l.mu.next++
	c.end = l.mu.next
	l.mu.q.Push(ch, off)
	l.stats.appends.Add(1)
	select {
	case l.wake <- struct{}{}:
	default:
	}
	return ch
}

// Read implements Log. It reads the durable entries, those whose results
// were sent or are about to be.
func (l *File) Read(ctx context.Context, from int64, fn func(offset int64, entry []byte) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	type part struct {
		seg      *fileLogSegment
		pos, off int64 // where to start reading
		end      int64 // the offset to stop before
	}
	l.mu.Lock()
	if l.mu.q.Closed() {
		l.mu.Unlock()
		return ErrClosed
	}
	if from < l.mu.start {
		start := l.mu.start
		l.mu.Unlock()
		return fmt.Errorf("%w: offset %d, the file log starts at %d", ErrTrimmed, from, start)
	}
	durable := l.mu.durable
	segs := l.mu.segs
	if from >= durable {
		l.mu.Unlock()
		return nil
	}
	var parts []part
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > from }) - 1
	for j := i; j < len(segs) && segs[j].base < durable; j++ {
		p := part{seg: segs[j], off: segs[j].base, end: durable}
		if j+1 < len(segs) {
			p.end = min(p.end, segs[j+1].base)
		}
		if j == i {
			idx := segs[j].index
			k := sort.Search(len(idx), func(k int) bool { return idx[k].offset > from }) - 1
			if k >= 0 {
				p.pos, p.off = idx[k].pos, idx[k].offset
			}
		}
		parts = append(parts, p)
	}
	l.mu.Unlock()

	var buf []byte
	for _, p := range parts {
		var err error
		if buf, err = l.readSegment(ctx, p.seg, p.pos, p.off, p.end, from, buf, fn); err != nil {
			return err
		}
	}
	return nil
}

// readSegment reads the frames of seg from file position pos (the frame
// of offset off) up to offset end, calling fn from offset from on.
func (l *File) readSegment(ctx context.Context, seg *fileLogSegment, pos, off, end, from int64, buf []byte, fn func(int64, []byte) error) ([]byte, error) {
	f, err := os.Open(seg.path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && seg.base < l.Start() {
			return buf, fmt.Errorf("%w: offset %d was trimmed during the read", ErrTrimmed, max(off, from))
		}
		return buf, fmt.Errorf("metalog: file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return buf, fmt.Errorf("metalog: file: %w", err)
	}
	fr := newFileLogFrameReader(f, pos, fi.Size())
	fr.buf = buf
	for ; off < end; off++ {
		if off%256 == 0 {
			if err := ctx.Err(); err != nil {
				return fr.buf, err
			}
		}
		payload, err := fr.next()
		if err != nil {
			var bad *fileLogFrameError
			switch {
			case err == io.EOF:
				return fr.buf, fmt.Errorf("%w: %s ends at offset %d, before %d", ErrCorrupt, seg.path, off, end)
			case errors.As(err, &bad):
				return fr.buf, fmt.Errorf("%w: %s at byte %d (offset %d): %s", ErrCorrupt, seg.path, bad.pos, off, bad.reason)
			}
			return fr.buf, fmt.Errorf("metalog: file: reading %s: %w", seg.path, err)
		}
		if off >= from {
			if err := fn(off, payload); err != nil {
				return fr.buf, err
			}
		}
	}
	return fr.buf, nil
}

// Wait implements Log: the syncer wakes it once an fsync covers an entry
// at offset or after it. (One File at a time uses a folder, so every
// entry comes through this handle.)
func (l *File) Wait(ctx context.Context, offset int64) (int64, error) {
	for {
		l.mu.Lock()
		if l.mu.grew == nil {
			l.mu.grew = make(chan struct{})
		}
		closed, durable, grew := l.mu.q.Closed(), l.mu.durable, l.mu.grew
		l.mu.Unlock()
		switch {
		case closed:
			return 0, ErrClosed
		case durable > offset:
			return durable, nil
		}
		select {
		case <-grew:
		case <-l.stop:
			return 0, ErrClosed
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// Start implements Log.
func (l *File) Start() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.start
}

// End implements Log: the offset after the last entry appended, durable
// or pending (after a failure, after the last durable one).
func (l *File) End() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.next
}

// Trim implements Log. It deletes the segment files whose entries are all
// before before, except that it keeps the newest segment that holds a
// durable entry and every one after it, so that the folder always tells
// where the log ends.
func (l *File) Trim(ctx context.Context, before int64) error {
	l.trimMu.Lock()
	defer l.trimMu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	if l.mu.q.Closed() {
		l.mu.Unlock()
		return ErrClosed
	}
	// Segment 0 may go if segment 1 starts at or before before and holds a
	// durable entry (its file exists and the folder says so).
	limit := min(before, l.mu.durable-1)
	var drop []*fileLogSegment
	for len(l.mu.segs) > 1 && l.mu.segs[1].base <= limit {
		drop = append(drop, l.mu.segs[0])
		l.mu.segs = l.mu.segs[1:]
	}
	l.mu.start = l.mu.segs[0].base
	l.mu.Unlock()
	if len(drop) == 0 {
		return nil
	}
	var err error
	for _, seg := range drop {
		if rerr := os.Remove(seg.path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
			err = fmt.Errorf("metalog: file: trimming: %w", rerr)
		}
	}
	if serr := l.syncDir(); err == nil {
		err = serr
	}
	return err
}

// Close implements Log: it waits for the syncer to write and fsync every
// pending append and sends their results.
func (l *File) Close() error {
	l.mu.Lock()
	if l.mu.q.Closed() {
		l.mu.Unlock()
		return nil
	}
	l.mu.q.SetClosed()
	l.mu.Unlock()
	close(l.stop)
	l.wg.Wait()
	l.trimMu.Lock() // wait for a Trim under way
	defer l.trimMu.Unlock()
	l.mu.Lock()
	l.mu.q.Close() // nothing, unless the syncer failed to say
	l.mu.Unlock()
	if err := l.cur.Close(); err != nil {
		return fmt.Errorf("metalog: file: %w", err)
	}
	return nil
}

// FileStats are counters of a File since it was opened.
type FileStats struct {
	// Appends is how many appends were queued to be written.
	Appends int64
	// Bytes is how many bytes (frames) were written to segment files.
	Bytes int64
	// Syncs is how many fsyncs of segment files were made (each covers
	// every append written before it: Appends/Syncs is the mean group).
	Syncs int64
	// SyncTime is the time spent in those fsyncs.
	SyncTime time.Duration
}

// Stats returns the log's counters.
func (l *File) Stats() FileStats {
	return FileStats{
		Appends:  l.stats.appends.Load(),
		Bytes:    l.stats.bytes.Load(),
		Syncs:    l.stats.syncs.Load(),
		SyncTime: time.Duration(l.stats.syncNanos.Load()),
	}
}
