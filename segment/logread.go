package segment

import (
	"context"
	"fmt"
	"math"
	"os"
	"sort"

	"go.uber.org/zap"

	"github.com/diskless-go/diskless/kbatch"
)

// Read returns whole batches from offset on, as a Kafka fetch does
// (LocalLog.read): from the segment that holds offset, an offset index
// lookup and a short scan find the first batch whose last offset is at or
// after offset; Read returns it and the batches after it in the same
// segment, up to maxBytes in all, but always that first batch whole even
// when it alone is larger (Kafka's minOneMessage). Unlike Kafka, which
// cuts the response at maxBytes, Read never returns a partial batch.
//
// An offset below the log start offset or above the log end offset is an
// OFFSET_OUT_OF_RANGE *Error (with an *OffsetRangeError); at the log end
// offset, or in a gap of offsets that no batch follows, Read returns no
// records.
func (l *Log) Read(ctx context.Context, offset int64, maxBytes int) (ReadResult, error) {
	if err := ctx.Err(); err != nil {
		return ReadResult{}, err
	}
	l.mu.RLock()
	if l.mu.closed {
		l.mu.RUnlock()
		return ReadResult{}, ErrClosed
	}
	res := ReadResult{LogStartOffset: l.mu.logStart, LogEndOffset: l.mu.logEnd}
	if offset < res.LogStartOffset || offset > res.LogEndOffset {
		l.mu.RUnlock()
		return res, offsetOutOfRange(offset, res.LogStartOffset, res.LogEndOffset)
	}
	if offset == res.LogEndOffset {
		l.mu.RUnlock()
		return res, nil
	}
	s := l.mu.segs[floorSegment(l.mu.segs, offset)]
	v := s.view()
	s.acquire()
	l.mu.RUnlock()
	for {
		recs, found, err := v.read(offset, maxBytes)
		v.seg.release()
		if err != nil || found {
			res.Records = recs
			return res, err
		}
		// Nothing at or after offset in this segment (compaction left a
		// gap at its end): the next segment has it.
		l.mu.RLock()
		i := sort.Search(len(l.mu.segs), func(i int) bool { return l.mu.segs[i].base > v.seg.base })
		if i == len(l.mu.segs) {
			l.mu.RUnlock()
			return res, nil
		}
		v = l.mu.segs[i].view()
		v.seg.acquire()
		l.mu.RUnlock()
	}
}

// seek returns a scanner whose current batch is the first of the view
// whose last offset is >= target (found false when there is none), from
// an offset index lookup. An untrusted index entry must land on a whole,
// valid batch at or before target, else the scan starts from the
// beginning of the segment.
func (v *segView) seek(target int64, window int) (*batchScanner, bool, error) {
	e, err := v.off.lookupOffset(v.seg.base, target)
	if err != nil {
		return nil, false, err
	}
	sc := newBatchScanner(v.seg.file, e.position, v.size, window)
	if e.found && (e.position >= v.size || (!v.trusted && !v.lands(sc, e))) {
		v.seg.markSuspect(v.seg.off.f, "offset index entry does not point at the batch it names", e.offset, e.position)
		sc.reset(0)
	}
	start := sc.next
	for sc.Next() {
		if sc.Batch().lastOffset() >= target {
			return sc, true, nil
		}
	}
	if err := sc.Err(); err != nil {
		if isCorrupt(err) {
			return nil, false, fmt.Errorf("%w: %s from position %d: %v", ErrCorruptSegment, v.seg.file.Name(), start, err)
		}
		return nil, false, err
	}
	if sc.Partial() {
		return nil, false, fmt.Errorf("%w: %s ends with a partial batch at %d", ErrCorruptSegment, v.seg.file.Name(), sc.End())
	}
	return sc, false, nil
}

// lands reports whether index entry e points at the start of a whole
// batch with a valid CRC whose offsets are within the segment and not
// after the entry's offset; it leaves sc where it was.
func (v *segView) lands(sc *batchScanner, e offsetPosition) bool {
	defer sc.reset(e.position)
	if !sc.Next() {
		return false
	}
	b := sc.Batch()
	if b.baseOffset() < v.seg.base || b.header().LastOffsetDelta() < 0 || b.lastOffset() > e.offset {
		return false
	}
	data, err := sc.Bytes()
	return err == nil && kbatch.Batch(data).CheckCRC() == nil
}

// markSuspect notes that an index entry of f is wrong: lookups in the
// segment scan instead, and the indexes are removed on Close so that the
// next open rebuilds them.
func (s *logSegment) markSuspect(f *os.File, what string, offset, at int64) {
	if !s.suspect.Swap(true) {
		s.cfg.logger.Warn(what+"; scanning the segment, and the indexes will be rebuilt",
			zap.String("file", f.Name()), zap.Int64("offset", offset), zap.Int64("at", at))
	}
}

// read returns the batches of the view from the first whose last offset is
// >= target, up to maxBytes but at least that one whole.
func (v *segView) read(target int64, maxBytes int) ([]byte, bool, error) {
	sc, found, err := v.seek(target, lookupWindow)
	if err != nil || !found {
		return nil, false, err
	}
	first := sc.Batch()
	n := min(max(int64(maxBytes), first.size), v.size-first.pos)
	buf := make([]byte, n)
	if _, err := readFullAt(v.seg.file, buf, first.pos); err != nil {
		return nil, false, err
	}
	end := 0
	for end < len(buf) {
		size, err := kbatch.BatchSize(buf[end:])
		if err != nil || size == 0 {
			break
		}
		end += size
	}
	return buf[:end], true, nil
}

// OffsetForTimestamp returns the first record, at or after the log start
// offset, whose timestamp is at least ts, as Kafka answers ListOffsets with
// a timestamp (offsetsForTimes): the first segment whose largest timestamp
// reaches ts, a time index lookup for where to start, then a scan of the
// records. found is false when no record's timestamp reaches ts. ts must
// not be negative: the special ListOffsets timestamps have their own
// calls, EarliestOffset and LatestOffset.
func (l *Log) OffsetForTimestamp(ctx context.Context, ts int64) (to TimestampOffset, found bool, err error) {
	if err := ctx.Err(); err != nil {
		return to, false, err
	}
	if ts < 0 {
		return to, false, fmt.Errorf("segment: OffsetForTimestamp(%d): the timestamp must not be negative", ts)
	}
	var rr kbatch.RecordReader
	after := int64(math.MinInt64) // base offset of the segment searched last
	for {
		l.mu.RLock()
		if l.mu.closed {
			l.mu.RUnlock()
			return to, false, ErrClosed
		}
		logStart := l.mu.logStart
		var v segView
		for _, s := range l.mu.segs {
			if s.base > after && s.maxTs >= ts {
				v = s.view()
				s.acquire()
				break
			}
		}
		l.mu.RUnlock()
		if v.seg == nil {
			return to, false, nil
		}
		to, found, err = v.findTimestamp(ts, logStart, &rr)
		v.seg.release()
		if err != nil || found {
			return to, found, err
		}
		after = v.seg.base
	}
}

// findTimestamp searches the view for the first record at or after
// startOffset whose timestamp is >= ts (LogSegment.findOffsetByTimestamp).
func (v *segView) findTimestamp(ts, startOffset int64, rr *kbatch.RecordReader) (TimestampOffset, bool, error) {
	te, err := v.tim.lookupTime(v.seg.base, ts)
	if err != nil {
		return TimestampOffset{}, false, err
	}
	sc, found, err := v.seek(max(te.offset, startOffset), lookupWindow)
	if err != nil {
		return TimestampOffset{}, false, err
	}
	if te.found && te.offset >= startOffset && !v.trusted && !timeEntryLands(sc, found, te) {
		// The entry says no record up to its offset reaches its
		// timestamp; unless the batch holding that offset carries that
		// timestamp, it cannot be believed: search from startOffset.
		v.seg.markSuspect(v.seg.tim.f, "time index entry does not match the batch it names", te.offset, te.timestamp)
		if sc, found, err = v.seek(startOffset, lookupWindow); err != nil {
			return TimestampOffset{}, false, err
		}
	}
	if !found {
		return TimestampOffset{}, false, nil
	}
	for ok := true; ok; ok = sc.Next() {
		b := sc.Batch()
		if b.header().MaxTimestamp() < ts || b.lastOffset() < startOffset {
			continue
		}
		data, err := sc.Bytes()
		if err != nil {
			return TimestampOffset{}, false, err
		}
		if err := rr.Reset(kbatch.Batch(data)); err != nil {
			return TimestampOffset{}, false, err
		}
		for rr.Next() {
			if r := rr.Record(); r.Timestamp >= ts && r.Offset >= startOffset {
				return TimestampOffset{Timestamp: r.Timestamp, Offset: r.Offset, LeaderEpoch: kbatch.Batch(data).PartitionLeaderEpoch()}, true, nil
			}
		}
		if err := rr.Err(); err != nil {
			return TimestampOffset{}, false, err
		}
	}
	if err := sc.Err(); err != nil {
		return TimestampOffset{}, false, err
	}
	return TimestampOffset{}, false, nil
}

// timeEntryLands reports whether time index entry te is what the log
// says: the batch that seek found for te.offset holds that offset and has
// te.timestamp as its max timestamp (the entry's timestamp is the greatest
// of the segment up to the batch that first carried it).
func timeEntryLands(sc *batchScanner, found bool, te timestampOffset) bool {
	if !found {
		return false
	}
	b := sc.Batch()
	return b.baseOffset() <= te.offset && b.header().MaxTimestamp() == te.timestamp
}
