package segment

// Compaction (docs/formats.md, "Compaction"; Kafka's LogCleaner, LogCleanerManager
// and MemoryRecords.filterTo).

import (
	"context"
	"fmt"
	"math"
	"os"
	"sort"
	"time"

	"go.uber.org/zap"

	"github.com/diskless-go/diskless/kbatch"
)

// mapEntryOverhead estimates the memory of one key in the cleaner's map
// beyond the key's bytes: the map slot, the string header, the offset.
const mapEntryOverhead = 64

// CompactResult reports what Compact did.
type CompactResult struct {
	// Cleaned is false when the log was not cleanable: too little dirty
	// (see DirtyRatio), nothing past its lags, no tombstone past its
	// horizon.
	Cleaned bool
	// DirtyRatio is the dirty share of the cleanable log that decided it.
	DirtyRatio float64
	// FirstDirtyOffset is where the map of keys started; EndOffset is
	// the offset after the last one mapped, which the next Compact starts
	// from. Every segment below EndOffset was cleaned.
	FirstDirtyOffset, EndOffset int64
	// SegmentsRead and SegmentsWritten count segments replaced and their
	// replacements.
	SegmentsRead, SegmentsWritten int
	// BytesRead and BytesWritten are the sizes of the segments replaced
	// and of their replacements.
	BytesRead, BytesWritten int64
	// RecordsRead and RecordsRemoved count the records of the cleaned
	// segments and those dropped.
	RecordsRead, RecordsRemoved int64
	// BatchesRewritten counts batches rebuilt with fewer records or a
	// delete horizon; BatchesRemoved, batches dropped whole.
	BatchesRewritten, BatchesRemoved int
}

// Compact cleans the log as Kafka's log cleaner does when cleanup.policy
// includes compact (ErrNotCompacted otherwise), keeping the latest record
// of each key:
//
//   - It cleans when the dirty part (from the cleaner offset checkpoint to
//     the first uncleanable offset: the active segment, the first segment
//     younger than MinCompactionLag, or the last stable offset, whichever
//     comes first) is more than MinCleanableDirtyRatio of the cleanable
//     log, when its earliest batch is older than MaxCompactionLag, or (an
//     addition to Kafka) when a tombstone or marker it kept earlier has
//     passed its delete horizon.
//   - It maps each key of the dirty part to its latest offset, within
//     CleanerBufferBytes, then recopies every segment from the start of
//     the log to the end of the mapped part, in groups that fit
//     segment.bytes and segment.index.bytes, each into one segment that
//     keeps the group's first base offset. The active segment is never
//     cleaned, and batches past the mapped part are copied as they are.
//   - A record stays if it is past the mapped part, or it has a key, no
//     later offset in the map, and a value or a delete horizon that has not
//     passed. A tombstone's batch gets a delete horizon (attribute bit
//     0x40, base timestamp now + DeleteRetention) the first time it is
//     kept. An emptied batch stays as a bare header when it holds its
//     producer's last data offset (or is a marker of a producer whose
//     latest epoch has no data), or it is the last batch cleaned; else it
//     goes.
//   - Transactions (docs/formats.md, "Compaction", rule 5), found by scanning the
//     log, as a Log keeps no .txnindex: a transactional batch belongs to
//     its producer's open transaction until the producer's next COMMIT or
//     ABORT marker. The batches of aborted transactions are dropped
//     whatever their keys and never enter the map, so they supersede
//     nothing. A COMMIT or ABORT marker stays as it is while a data batch
//     of its transaction was read before it in the same clean; once none
//     is, it is stamped with a delete horizon, and it goes (or is emptied,
//     when its producer needs it) in the first clean after the horizon.
//     The last stable offset is the first offset of the earliest
//     transaction that no marker closes yet: nothing at or after it is
//     cleaned or mapped. Other control batches stay whole, and a control
//     batch that an earlier clean emptied goes unless its producer needs
//     it.
//   - Offsets never change. A batch that loses records or gains a horizon
//     is rebuilt with the same base offset, last offset delta, producer
//     fields, partition leader epoch and codec, and a new CRC; the others
//     are copied byte for byte.
//   - Each group is written to .cleaned files, synced, renamed to .swap,
//     the old segments renamed to .deleted, the .swap files renamed into
//     place: a crash at any step opens to the old segments or the new
//     one.
//
// Appends and reads go on while Compact runs; Close stops it. Reads are
// not filtered by transaction (READ_UNCOMMITTED): aborted records are
// readable until a clean drops them.
func (l *Log) Compact(ctx context.Context) (CompactResult, error) {
	if err := ctx.Err(); err != nil {
		return CompactResult{}, err
	}
	if !l.cfg.policy.Compact() {
		return CompactResult{}, ErrNotCompacted
	}
	l.maint.Lock()
	defer l.maint.Unlock()
	c, res, err := l.planClean(ctx)
	if err != nil || c == nil {
		return res, err
	}
	defer c.releaseViews()
	if err := c.buildOffsetMap(ctx); err != nil {
		return res, err
	}
	res.FirstDirtyOffset, res.EndOffset = c.firstDirty, c.endOffset
	var cleanable []segView
	for _, v := range c.views {
		if v.seg.base < c.endOffset && v.seg.base < c.firstUncleanable {
			cleanable = append(cleanable, v)
		}
	}
	if len(cleanable) == 0 {
		return res, nil
	}
	c.lastSeg = cleanable[len(cleanable)-1].seg
	res.Cleaned = true
	for _, group := range groupSegments(cleanable, l.cfg.segmentBytes, l.cfg.segmentIndexBytes, c.firstUncleanable) {
		if err := l.cleanGroup(ctx, c, group, &res); err != nil {
			return res, err
		}
	}
	checkpoint := max(c.endOffset, c.firstDirty)
	if err := writeCheckpoint(l.dir, cleanerOffsetFile, checkpoint); err != nil {
		return res, err
	}
	l.maint.cleanerOffset = checkpoint
	if c.endOffset >= c.firstDirty {
		l.maint.nextHorizon = c.minHorizon
	} else {
		l.maint.nextHorizon = min(l.maint.nextHorizon, c.minHorizon)
	}
	l.purgeDeleted(false)
	l.logger.Info("cleaned log", zap.Int64("first_dirty_offset", c.firstDirty), zap.Int64("end_offset", c.endOffset),
		zap.Float64("dirty_ratio", res.DirtyRatio), zap.Int("segments_read", res.SegmentsRead), zap.Int("segments_written", res.SegmentsWritten),
		zap.Int64("bytes_read", res.BytesRead), zap.Int64("bytes_written", res.BytesWritten),
		zap.Int64("records_read", res.RecordsRead), zap.Int64("records_removed", res.RecordsRemoved))
	return res, nil
}

// cleaner is one Compact's state.
type cleaner struct {
	l     *Log
	now   int64
	views []segView // every segment, with a reference, at planning time

	firstDirty       int64
	firstUncleanable int64
	endOffset        int64 // offset after the last one mapped
	latest           int64 // endOffset - 1: records past it are kept
	lastSeg          *logSegment

	keys    map[string]int32 // key -> index in offsets
	offsets []int64

	rr         kbatch.RecordReader
	bld        kbatch.Builder
	kept       []kbatch.Record
	buf        []byte
	minHorizon int64

	// txns is what a scan of the whole log found of its transactions and
	// producers.
	txns *txnIndex
	// txnSeen holds the producers with a data batch of their current
	// transaction read so far in this clean (canDiscardBatch).
	txnSeen map[int64]bool
}

func (c *cleaner) releaseViews() {
	for _, v := range c.views {
		v.seg.release()
	}
}

// segFacts is what planClean reads of a segment, under the writer's lock.
type segFacts struct {
	base, size int64
	largestTs  int64
	rollTs     int64 // max timestamp of the first batch, when rollOK
	rollOK     bool
}

// cleanPlan decides whether and how far the log is cleanable
// (LogCleanerManager.cleanableOffsets and grabFilthiestCompactedLog).
type cleanPlan struct {
	cfg        *logConfig
	now        int64
	segs       []segFacts // the last is the active segment
	firstDirty int64
	horizon    int64 // the maint's nextHorizon
}

// decide returns the first uncleanable offset, which is at most lso (the
// last stable offset), and whether the log is to be cleaned; it sets
// res's dirty ratio.
func (p *cleanPlan) decide(lso int64, res *CompactResult) (int64, bool) {
	segs := p.segs
	// Nothing at or after the last stable offset, nor in the active
	// segment, is cleaned.
	firstUncleanable := min(segs[len(segs)-1].base, lso)
	dirtyFrom := max(sort.Search(len(segs), func(i int) bool { return segs[i].base > p.firstDirty })-1, 0)
	if p.cfg.minCompactionLagMs > 0 {
		for _, s := range segs[dirtyFrom : len(segs)-1] {
			if s.largestTs > p.now-p.cfg.minCompactionLagMs {
				firstUncleanable = min(firstUncleanable, s.base)
				break
			}
		}
	}
	var cleanBytes, dirtyBytes int64
	dirtyTo := max(p.firstDirty, firstUncleanable)
	for i, s := range segs {
		if s.base < p.firstDirty {
			cleanBytes += s.size
		}
		if p.firstDirty < dirtyTo && i >= dirtyFrom && s.base < dirtyTo {
			dirtyBytes += s.size
		}
	}
	res.DirtyRatio = 0
	if total := cleanBytes + dirtyBytes; total > 0 {
		res.DirtyRatio = float64(dirtyBytes) / float64(total)
	}
	maxLagDue := false
	if p.cfg.maxCompactionLagMs != math.MaxInt64 && dirtyBytes > 0 {
		for _, s := range segs[dirtyFrom : len(segs)-1] {
			if s.rollOK && s.rollTs > 0 && s.rollTs < p.now-p.cfg.maxCompactionLagMs {
				maxLagDue = true
				break
			}
		}
	}
	horizonDue := p.horizon <= p.now && cleanBytes > 0
	return firstUncleanable, (dirtyBytes > 0 && (res.DirtyRatio > p.cfg.minDirtyRatio || maxLagDue)) || horizonDue
}

// planClean decides whether the log is cleanable now and snapshots its
// segments. It returns a nil cleaner when it is not. The last stable
// offset can only make less of the log cleanable, so the log is scanned
// for transactions only when it is cleanable without them.
func (l *Log) planClean(ctx context.Context) (*cleaner, CompactResult, error) {
	var res CompactResult
	l.w.Lock()
	if l.mu.closed {
		l.w.Unlock()
		return nil, res, ErrClosed
	}
	p := cleanPlan{cfg: &l.cfg, now: l.cfg.nowMs(), firstDirty: l.maint.cleanerOffset, horizon: l.maint.nextHorizon}
	if p.firstDirty < l.mu.logStart || p.firstDirty > l.mu.logEnd {
		p.firstDirty = l.mu.logStart
	}
	dirtyFrom := floorSegment(l.mu.segs, p.firstDirty)
	for i, s := range l.mu.segs {
		f := segFacts{base: s.base, size: s.size}
		if i >= dirtyFrom && l.cfg.minCompactionLagMs > 0 {
			f.largestTs = s.largestTimestamp()
		}
		if i >= dirtyFrom && i < len(l.mu.segs)-1 && l.cfg.maxCompactionLagMs != math.MaxInt64 {
			if err := s.loadRollTs(); err != nil {
				l.w.Unlock()
				return nil, res, err
			}
			f.rollTs, f.rollOK = s.rollTs, s.rollTsLoaded
		}
		p.segs = append(p.segs, f)
	}
	firstUncleanable, ok := p.decide(math.MaxInt64, &res)
	if !ok {
		l.w.Unlock()
		return nil, res, nil
	}
	c := &cleaner{l: l, now: p.now, firstDirty: p.firstDirty, firstUncleanable: firstUncleanable, minHorizon: math.MaxInt64, txnSeen: make(map[int64]bool)}
	l.mu.RLock()
	for _, s := range l.mu.segs {
		c.views = append(c.views, s.view())
		s.acquire()
	}
	l.mu.RUnlock()
	l.w.Unlock()

	txns, err := scanTransactions(c.views, func() error { return c.checkDone(ctx) })
	if err != nil {
		c.releaseViews()
		return nil, res, err
	}
	c.txns = txns
	if txns.lso < firstUncleanable {
		if c.firstUncleanable, ok = p.decide(txns.lso, &res); !ok {
			c.releaseViews()
			return nil, res, nil
		}
	}
	return c, res, nil
}

// checkDone stops a Compact when its context ends or the log closes.
func (c *cleaner) checkDone(ctx context.Context) error {
	if c.l.closing.Load() {
		return ErrClosed
	}
	return ctx.Err()
}

// buildOffsetMap maps each key of the dirty part to its latest offset
// (LogCleaner.buildOffsetMap), until the map's memory bound or the first
// uncleanable offset, and sets the end of the mapped part. Control batches
// and the batches of aborted transactions are not mapped.
func (c *cleaner) buildOffsetMap(ctx context.Context) error {
	c.keys = make(map[string]int32)
	c.latest = c.firstDirty - 1
	var used int64
	full := false
	for i, v := range c.views {
		if full || v.seg.base >= c.firstUncleanable {
			break
		}
		next := c.firstUncleanable
		if i+1 < len(c.views) {
			next = min(next, c.views[i+1].seg.base)
		}
		if next <= c.firstDirty {
			continue
		}
		sc, found, err := v.seek(c.firstDirty, sequentialWindow)
		if err != nil {
			return err
		}
		for ok := found; ok; ok = sc.Next() {
			if err := c.checkDone(ctx); err != nil {
				return err
			}
			b := sc.Batch()
			if b.baseOffset() >= next {
				break // the first uncleanable offset is within this segment
			}
			if h := b.header(); !h.Control() && !(h.Transactional() && c.txns.isAborted(h.ProducerID(), h.BaseOffset())) {
				data, err := sc.Bytes()
				if err != nil {
					return err
				}
				if err := c.rr.Reset(kbatch.Batch(data)); err != nil {
					return fmt.Errorf("segment: mapping the batch at offset %d: %w", b.baseOffset(), err)
				}
				for c.rr.Next() {
					r := c.rr.Record()
					if r.Key == nil || r.Offset < c.firstDirty {
						continue
					}
					if j, ok := c.keys[string(r.Key)]; ok {
						c.offsets[j] = r.Offset
						continue
					}
					c.keys[string(r.Key)] = int32(len(c.offsets))
					c.offsets = append(c.offsets, r.Offset)
					used += int64(len(r.Key)) + mapEntryOverhead
				}
				if err := c.rr.Err(); err != nil {
					return fmt.Errorf("segment: mapping the batch at offset %d: %w", b.baseOffset(), err)
				}
			}
			c.latest = max(c.latest, b.lastOffset())
			if used >= c.l.cfg.cleanerBufferBytes || len(c.offsets) >= math.MaxInt32 {
				full = true
				break
			}
		}
		if err := sc.Err(); err != nil {
			return err
		}
		if !full {
			c.latest = max(c.latest, next-1)
		}
	}
	c.endOffset = c.latest + 1
	if c.endOffset < c.firstDirty {
		c.endOffset, c.latest = c.firstDirty, c.firstDirty-1
	}
	c.endOffset = min(c.endOffset, c.firstUncleanable)
	c.latest = c.endOffset - 1
	return nil
}

// groupSegments groups consecutive segments so that each group's logs fit
// segment.bytes, its indexes segment.index.bytes, and its offsets a
// segment's relative offsets (LogCleaner.groupSegmentsBySize).
func groupSegments(views []segView, maxSize, maxIndexSize, firstUncleanable int64) [][]segView {
	var groups [][]segView
	for len(views) > 0 {
		group := views[:1]
		logSize := views[0].size
		offSize := int64(views[0].off.n) * offsetIndexEntrySize
		timSize := int64(views[0].tim.n) * timeIndexEntrySize
		views = views[1:]
		for len(views) > 0 {
			v := views[0]
			lastOffset := firstUncleanable - 1
			if len(views) > 1 {
				lastOffset = views[1].seg.base - 1
			}
			if logSize+v.size > maxSize ||
				offSize+int64(v.off.n)*offsetIndexEntrySize > maxIndexSize ||
				timSize+int64(v.tim.n)*timeIndexEntrySize > maxIndexSize ||
				(v.size > 0 && lastOffset-group[0].seg.base > math.MaxInt32) {
				break
			}
			group = group[:len(group)+1]
			logSize += v.size
			offSize += int64(v.off.n) * offsetIndexEntrySize
			timSize += int64(v.tim.n) * timeIndexEntrySize
			views = views[1:]
		}
		groups = append(groups, group)
	}
	return groups
}

// cleanGroup writes the records a group of segments keeps into one new
// segment and swaps it in for them.
func (l *Log) cleanGroup(ctx context.Context, c *cleaner, group []segView, res *CompactResult) (err error) {
	out, err := createSegment(l.dir, group[0].seg.base, cleanedSuffix, &l.cfg, &l.mu.RWMutex)
	if err != nil {
		return err
	}
	swapped := false
	defer func() {
		if err != nil && !swapped {
			_ = out.removeFiles()
			out.release()
		}
	}()
	for _, v := range group {
		res.SegmentsRead++
		res.BytesRead += v.size
		sc := newBatchScanner(v.seg.file, 0, v.size, sequentialWindow)
		for sc.Next() {
			if err := c.checkDone(ctx); err != nil {
				return err
			}
			fb := sc.Batch()
			data, err := sc.Bytes()
			if err != nil {
				return err
			}
			last := v.seg == c.lastSeg && fb.pos+fb.size == v.size
			kept, err := c.filter(kbatch.Batch(data), last, res)
			if err != nil {
				return fmt.Errorf("segment: cleaning the batch at offset %d: %w", fb.baseOffset(), err)
			}
			if kept == nil {
				continue
			}
			a, err := analyzeAppend(kept)
			if err != nil {
				return err
			}
			if err := out.append(kept, &a, false, nil); err != nil {
				return err
			}
		}
		if err := sc.Err(); err != nil {
			return err
		}
		if sc.Partial() {
			return fmt.Errorf("%w: %s ends with a partial batch", ErrCorruptSegment, v.seg.file.Name())
		}
	}
	if err := out.finish(false); err != nil {
		return err
	}
	if err := out.sync(); err != nil {
		return err
	}
	if fi, err := group[len(group)-1].seg.file.Stat(); err == nil {
		_ = os.Chtimes(out.path(logFileExt), time.Time{}, fi.ModTime()) // Kafka keeps the last segment's mtime
	}
	if err := out.rename(swapSuffix); err != nil {
		return err
	}
	if err := syncDir(l.dir); err != nil {
		return err
	}
	if h := l.cfg.hooks.afterSwapRename; h != nil {
		h()
	}
	// From here the swap is whole: a crash completes it on open, so a
	// failure no longer removes the new files.
	swapped = true
	swapErr := l.swapIn(out, group)
	l.purgeDeleted(false)
	res.SegmentsWritten++
	res.BytesWritten += out.size
	return swapErr
}

// swapIn replaces a group of segments with their cleaned replacement,
// already renamed to .swap: the old files are renamed to .deleted, the
// new ones into place, and the log's list changes under the writer's lock.
func (l *Log) swapIn(out *logSegment, group []segView) error {
	var first error
	for _, v := range group {
		if err := v.seg.rename(deletedSuffix); err != nil && first == nil {
			first = err
		}
	}
	if h := l.cfg.hooks.afterOldDeleted; h != nil {
		h()
	}
	if err := out.rename(""); err != nil && first == nil {
		first = err
	}
	if err := syncDir(l.dir); err != nil && first == nil {
		first = err
	}
	l.w.Lock()
	l.mu.Lock()
	segs := l.mu.segs
	i := 0
	for i < len(segs) && segs[i] != group[0].seg {
		i++
	}
	j := i + len(group)
	if j > len(segs) || segs[j-1] != group[len(group)-1].seg {
		l.mu.Unlock()
		l.w.Unlock()
		panic("segment: cleaned segments are no longer in the log") // maint serializes whatever removes them
	}
	newSegs := make([]*logSegment, 0, len(segs)-len(group)+1)
	newSegs = append(newSegs, segs[:i]...)
	newSegs = append(newSegs, out)
	newSegs = append(newSegs, segs[j:]...)
	l.mu.segs = newSegs
	l.mu.Unlock()
	l.w.Unlock()
	for _, v := range group {
		l.scheduleRemoval(v.seg)
		v.seg.release() // the Log's reference; the cleaner's goes at the end
	}
	return first
}
