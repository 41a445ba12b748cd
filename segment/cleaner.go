package segment

// Compaction (kafka-format.md §13; Kafka's LogCleaner, LogCleanerManager
// and MemoryRecords.filterTo).

import (
	"context"
	"fmt"
	"math"
	"os"
	"time"

	"go.uber.org/zap"
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
//     the active segment, or to the first segment younger than
//     MinCompactionLag) is more than MinCleanableDirtyRatio of the
//     cleanable log, when its earliest batch is older than
//     MaxCompactionLag, or (an addition to Kafka) when a tombstone it kept
//     earlier has passed its delete horizon.
//   - It maps each key of the dirty part to its latest offset, within
//     CleanerBufferBytes, then recopies every segment from the start of
//     the log to the end of the mapped part, in groups that fit
//     segment.bytes and segment.index.bytes, each into one segment that
//     keeps the group's first base offset. The active segment is never
//     cleaned.
//   - A record stays if it is past the mapped part, or it has a key, no
//     later offset in the map, and a value or a delete horizon that has not
//     passed. A tombstone's batch gets a delete horizon (attribute bit
//     0x40, base timestamp now + DeleteRetention) the first time it is
//     kept. Control batches stay whole. An emptied batch stays as a bare
//     header when it holds its producer's last data offset, or it is the
//     last batch cleaned; else it goes.
//   - Offsets never change. A batch that loses records or gains a horizon
//     is rebuilt with the same base offset, last offset delta, producer
//     fields, partition leader epoch and codec, and a new CRC; the others
//     are copied byte for byte.
//   - Each group is written to .cleaned files, synced, renamed to .swap,
//     the old segments renamed to .deleted, the .swap files renamed into
//     place: a crash at any step opens to the old segments or the new
//     one.
//
// Appends and reads go on while Compact runs; Close stops it.
// Transactions are not tracked: aborted transactions' records are treated
// as committed ones.
func (l *Log) Compact(ctx context.Context) (CompactResult, error) {
	if err := ctx.Err(); err != nil {
		return CompactResult{}, err
	}
	if !l.cfg.policy.Compact() {
		return CompactResult{}, ErrNotCompacted
	}
	l.maint.Lock()
	defer l.maint.Unlock()
	c, res, err := l.planClean()
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

	rr         RecordReader
	bld        Builder
	kept       []Record
	buf        []byte
	minHorizon int64

	// lastData maps a producer id to the base offset of its last data
	// batch, from the first batch that asked on; built when first needed.
	lastData map[int64]int64
}

func (c *cleaner) releaseViews() {
	for _, v := range c.views {
		v.seg.release()
	}
}

// planClean decides whether the log is cleanable now
// (LogCleanerManager.cleanableOffsets and grabFilthiestCompactedLog) and
// snapshots its segments. It returns a nil cleaner when it is not.
func (l *Log) planClean() (*cleaner, CompactResult, error) {
	var res CompactResult
	l.w.Lock()
	defer l.w.Unlock()
	if l.mu.closed {
		return nil, res, ErrClosed
	}
	segs := l.mu.segs
	active := segs[len(segs)-1]
	now := l.cfg.nowMs()
	firstDirty := l.maint.cleanerOffset
	if firstDirty < l.mu.logStart || firstDirty > l.mu.logEnd {
		firstDirty = l.mu.logStart
	}
	firstUncleanable := active.base
	dirtyFrom := floorSegment(segs, firstDirty)
	if l.cfg.minCompactionLagMs > 0 {
		for _, s := range segs[dirtyFrom : len(segs)-1] {
			if s.largestTimestamp() > now-l.cfg.minCompactionLagMs {
				firstUncleanable = min(firstUncleanable, s.base)
				break
			}
		}
	}
	var cleanBytes, dirtyBytes int64
	dirtyTo := max(firstDirty, firstUncleanable)
	for i, s := range segs {
		if s.base < firstDirty {
			cleanBytes += s.size
		}
		if firstDirty < dirtyTo && i >= dirtyFrom && s.base < dirtyTo {
			dirtyBytes += s.size
		}
	}
	if total := cleanBytes + dirtyBytes; total > 0 {
		res.DirtyRatio = float64(dirtyBytes) / float64(total)
	}
	maxLagDue := false
	if l.cfg.maxCompactionLagMs != math.MaxInt64 && dirtyBytes > 0 {
		for _, s := range segs[dirtyFrom : len(segs)-1] {
			if err := s.loadRollTs(); err != nil {
				return nil, res, err
			}
			if s.rollTsLoaded && s.rollTs > 0 && s.rollTs < now-l.cfg.maxCompactionLagMs {
				maxLagDue = true
				break
			}
		}
	}
	horizonDue := l.maint.nextHorizon <= now && cleanBytes > 0
	if !(dirtyBytes > 0 && (res.DirtyRatio > l.cfg.minDirtyRatio || maxLagDue)) && !horizonDue {
		return nil, res, nil
	}
	c := &cleaner{l: l, now: now, firstDirty: firstDirty, firstUncleanable: firstUncleanable, minHorizon: math.MaxInt64}
	l.mu.RLock()
	for _, s := range segs {
		c.views = append(c.views, s.view())
		s.acquire()
	}
	l.mu.RUnlock()
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
// (LogCleaner.buildOffsetMap), until the map's memory bound, and sets the
// end of the mapped part. Control batches are not mapped.
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
			if !b.header().Control() {
				data, err := sc.Bytes()
				if err != nil {
					return err
				}
				if err := c.rr.Reset(Batch(data)); err != nil {
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
			kept, err := c.filter(Batch(data), v.seg, fb, last, res)
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

// filter returns what a batch becomes (MemoryRecords.filterTo): b itself
// when it keeps every record and needs no delete horizon, a rebuilt batch
// (in c.buf) with the records it keeps, a bare header for an emptied batch
// that must stay, or nil.
func (c *cleaner) filter(b Batch, seg *logSegment, fb *fileBatch, lastOfRound bool, res *CompactResult) ([]byte, error) {
	n := int64(max(b.NumRecords(), 0))
	res.RecordsRead += n
	if b.Control() {
		return b, nil
	}
	if err := c.rr.Reset(b); err != nil {
		return nil, err
	}
	c.kept = c.kept[:0]
	dropped, tombstone := false, false
	horizon, hasHorizon := b.DeleteHorizon()
	for c.rr.Next() {
		r := c.rr.Record()
		if !c.retain(r, horizon, hasHorizon) {
			dropped = true
			continue
		}
		c.kept = append(c.kept, *r)
		tombstone = tombstone || r.Value == nil
	}
	if err := c.rr.Err(); err != nil {
		return nil, err
	}
	res.RecordsRemoved += n - int64(len(c.kept))
	needHorizon := tombstone && !hasHorizon
	if needHorizon {
		horizon = c.now + c.l.cfg.deleteRetentionMs
	}
	if tombstone {
		c.minHorizon = min(c.minHorizon, horizon)
	}
	if len(c.kept) == 0 {
		// Emptied now or by an earlier clean: kept only as a bare header
		// that some rule needs (BatchRetention.RETAIN_EMPTY).
		retain := lastOfRound
		if !retain && b.HasProducerID() {
			last, err := c.isLastDataBatch(seg, fb)
			if err != nil {
				return nil, err
			}
			retain = last
		}
		switch {
		case !retain:
			res.BatchesRemoved++
			return nil, nil
		case n == 0:
			return b, nil
		}
		res.BatchesRewritten++
		return c.emptyBatch(b)
	}
	if !dropped && !needHorizon {
		return b, nil
	}
	res.BatchesRewritten++
	return c.rebuild(b, horizon, needHorizon || hasHorizon)
}

// retain says whether a record stays (LogCleaner.shouldRetainRecord).
func (c *cleaner) retain(r *Record, horizon int64, hasHorizon bool) bool {
	if r.Offset > c.latest {
		return true
	}
	if r.Key == nil {
		return false
	}
	if j, ok := c.keys[string(r.Key)]; ok && r.Offset < c.offsets[j] {
		return false
	}
	return r.Value != nil || !hasHorizon || c.now < horizon
}

// setHeader copies b's header fields that a rebuilt batch keeps into the
// Builder, reset for codec.
func (c *cleaner) setHeader(b Batch, codec Codec) {
	c.bld.Reset(codec)
	c.bld.SetBaseOffset(b.BaseOffset())
	c.bld.SetPartitionLeaderEpoch(b.PartitionLeaderEpoch())
	c.bld.SetProducer(b.ProducerID(), b.ProducerEpoch(), b.BaseSequence())
	c.bld.SetTransactional(b.Transactional())
	c.bld.SetLastOffsetDelta(b.LastOffsetDelta())
	if b.TimestampType() == LogAppendTime {
		c.bld.SetLogAppendTime(b.MaxTimestamp())
	}
}

// rebuild builds b with only the records kept: the same base offset, last
// offset delta, producer fields, partition leader epoch, transactional
// flag and codec; the base timestamp is the delete horizon when the batch
// has one, else the first kept record's timestamp, with each record's
// delta recomputed so that its timestamp stays.
func (c *cleaner) rebuild(b Batch, horizon int64, setHorizon bool) ([]byte, error) {
	c.setHeader(b, b.Codec())
	origBase := b.BaseTimestamp()
	newBase := origBase + c.kept[0].TimestampDelta
	if setHorizon {
		c.bld.SetDeleteHorizon(horizon)
		newBase = horizon
	} else {
		c.bld.SetBaseTimestamp(newBase)
	}
	for i := range c.kept {
		r := &c.kept[i]
		r.TimestampDelta = origBase + r.TimestampDelta - newBase
		c.bld.AppendRecord(r)
	}
	out, err := c.bld.Build(c.buf[:0])
	if err != nil {
		return nil, err
	}
	c.buf = out
	return out, nil
}

// emptyBatch builds the bare header Kafka keeps for an emptied batch
// (DefaultRecordBatch.writeEmptyHeader): the same offsets, producer fields,
// partition leader epoch, flags and max timestamp, no compression, base
// timestamp -1, no records.
func (c *cleaner) emptyBatch(b Batch) ([]byte, error) {
	c.setHeader(b, CodecNone)
	c.bld.SetBaseTimestamp(NoTimestamp)
	out, err := c.bld.Build(c.buf[:0])
	if err != nil {
		return nil, err
	}
	if b.TimestampType() == CreateTime {
		Batch(out).SetMaxTimestamp(CreateTime, b.MaxTimestamp())
	}
	c.buf = out
	return out, nil
}

// isLastDataBatch reports whether the batch at fb, in seg, holds its
// producer's last data offset in the log, so that an emptied batch keeps
// the producer's last sequence (LogCleaner's isBatchLastRecordOfProducer;
// a Log tracks no producer expiry, so every producer counts as active).
// The first call scans the batch headers from fb to the end of the log.
func (c *cleaner) isLastDataBatch(seg *logSegment, fb *fileBatch) (bool, error) {
	if c.lastData == nil {
		c.lastData = make(map[int64]int64)
		i := 0
		for i < len(c.views) && c.views[i].seg != seg {
			i++
		}
		start := fb.pos
		for ; i < len(c.views); i++ {
			v := c.views[i]
			sc := newBatchScanner(v.seg.file, start, v.size, lookupWindow)
			for sc.Next() {
				if h := sc.Batch().header(); h.HasProducerID() && !h.Control() {
					c.lastData[h.ProducerID()] = h.BaseOffset()
				}
			}
			if err := sc.Err(); err != nil {
				return false, err
			}
			start = 0
		}
	}
	h := fb.header()
	last, ok := c.lastData[h.ProducerID()]
	return ok && last == h.BaseOffset(), nil
}
