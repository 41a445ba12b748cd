package segment

// Loading a partition directory and recovering it after a crash
// (docs/formats.md, "Opening and recovery"; Kafka's LogLoader and LogSegment.recover).

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/diskless-go/diskless/kbatch"
)

// indexError says an index does not match its log: the segment is
// recovered, which rebuilds it.
type indexError struct{ msg string }

func (e *indexError) Error() string { return e.msg }

func badIndex(format string, args ...any) error {
	return &indexError{msg: fmt.Sprintf(format, args...)}
}

// load opens the directory's segments, recovering what needs it, and sets
// the log's offsets. On error the caller releases l.mu.segs.
func (l *Log) load(ctx context.Context) error {
	clean, err := fileExists(filepath.Join(l.dir, cleanShutdownFile))
	if err != nil {
		return err
	}
	forced, err := l.removeLeftovers()
	if err != nil {
		return err
	}
	bases, err := l.listSegments()
	if err != nil {
		return err
	}
	rp, rpOK, err := readCheckpoint(l.dir, recoveryPointFile)
	if err != nil {
		return err
	}
	lso, lsoOK, err := readCheckpoint(l.dir, logStartOffsetFile)
	if err != nil {
		return err
	}
	co, coOK, err := readCheckpoint(l.dir, cleanerOffsetFile)
	if err != nil {
		return err
	}
	if coOK {
		l.maint.cleanerOffset = co
	}

	// After a crash, every segment from the one holding the recovery point
	// on is recovered; without a recovery point, all of them.
	recoverFrom := len(bases)
	if !clean {
		recoverFrom = 0
		if rpOK {
			i, _ := slices.BinarySearch(bases, rp+1)
			recoverFrom = max(i-1, 0)
		}
	}
	var recovered []*logSegment
	var truncatedBytes int64
	for i, base := range bases {
		if err := ctx.Err(); err != nil {
			return err
		}
		next, last := int64(math.MaxInt64), i == len(bases)-1
		if !last {
			next = bases[i+1]
		}
		s, missing, err := openSegment(l.dir, base, &l.cfg, &l.mu.RWMutex)
		if err != nil {
			return fmt.Errorf("segment: opening segment %d: %w", base, err)
		}
		l.mu.segs = append(l.mu.segs, s)
		reason := ""
		switch {
		case forced[base]:
			reason = "completed swap"
		case i >= recoverFrom:
			reason = "unclean shutdown"
		default:
			if err := s.loadIndexes(next, last, missing); err != nil {
				var ie *indexError
				if !errors.As(err, &ie) {
					return fmt.Errorf("segment: loading segment %d: %w", base, err)
				}
				reason = ie.msg
			}
		}
		if reason == "" {
			continue
		}
		truncated, err := s.recover(next)
		if err != nil {
			return fmt.Errorf("segment: recovering segment %d: %w", base, err)
		}
		recovered = append(recovered, s)
		truncatedBytes += truncated
		l.logger.Info("recovered segment", zap.Int64("base", base), zap.String("reason", reason), zap.Int64("truncated_bytes", truncated))
		if truncated > 0 && !last {
			// The log is its longest valid prefix: what follows a
			// corrupt batch goes with it (LogLoader.recoverLog).
			for _, b := range bases[i+1:] {
				for _, ext := range []string{logFileExt, indexFileExt, timeIndexFileExt, txnIndexFileExt} {
					if err := os.Remove(segmentPath(l.dir, b, ext, "")); err != nil && !errors.Is(err, fs.ErrNotExist) {
						return err
					}
				}
				l.logger.Warn("deleted segment after a corrupt one", zap.Int64("base", b))
			}
			break
		}
	}
	segs := l.mu.segs
	if len(segs) == 0 {
		start := int64(0)
		if lsoOK {
			start = lso
		}
		s, err := createSegment(l.dir, start, "", &l.cfg, &l.mu.RWMutex)
		if err != nil {
			return err
		}
		l.mu.segs = append(l.mu.segs, s)
		segs = l.mu.segs
		recovered = append(recovered, s)
	}
	for _, s := range segs[:len(segs)-1] {
		s.off.mem, s.tim.mem = nil, nil
	}
	activeSeg := segs[len(segs)-1]
	l.mu.logEnd = activeSeg.nextOffset
	l.mu.logStart = segs[0].base
	if lsoOK && lso > l.mu.logStart {
		l.mu.logStart = lso
	}
	l.mu.logStart = min(l.mu.logStart, l.mu.logEnd)

	for _, s := range recovered {
		if err := s.sync(); err != nil {
			return err
		}
	}
	if err := syncDir(l.dir); err != nil {
		return err
	}
	l.mu.recoveryPoint = l.mu.logEnd
	if err := writeCheckpoint(l.dir, recoveryPointFile, l.mu.logEnd); err != nil {
		return err
	}
	l.sync.persistedBase = activeSeg.base
	// The log is open for writing: a crash from now on is unclean.
	if err := os.Remove(filepath.Join(l.dir, cleanShutdownFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := syncDir(l.dir); err != nil {
		return err
	}
	l.logger.Info("loaded log", zap.Bool("clean_shutdown", clean), zap.Int("segments", len(segs)),
		zap.Int("recovered", len(recovered)), zap.Int64("truncated_bytes", truncatedBytes),
		zap.Int64("log_start_offset", l.mu.logStart), zap.Int64("log_end_offset", l.mu.logEnd))
	return nil
}

func fileExists(path string) (bool, error) {
	_, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// removeLeftovers deletes .deleted, .cleaned and temporary files and
// completes interrupted swaps (LogLoader.removeTempFilesAndCollectSwapFiles):
// a cleaned segment renamed to .swap is whole, so the segment files whose
// base offsets it covers are deleted and it takes their place. It returns
// the base offsets of the swapped-in segments, whose indexes are rebuilt.
func (l *Log) removeLeftovers() (map[int64]bool, error) {
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, err
	}
	var swaps []int64
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		name := e.Name()
		if strings.HasSuffix(name, tmpSuffix) {
			if err := os.Remove(filepath.Join(l.dir, name)); err != nil {
				return nil, err
			}
			continue
		}
		base, ext, suffix, ok := parseSegmentName(name)
		if !ok {
			continue
		}
		switch {
		case suffix == swapSuffix && ext == logFileExt:
			swaps = append(swaps, base)
		case suffix != "":
			// .deleted and .cleaned files, and swapped indexes (rebuilt
			// with their swapped-in log).
			if err := os.Remove(filepath.Join(l.dir, name)); err != nil {
				return nil, err
			}
		}
	}
	forced := make(map[int64]bool)
	slices.Sort(swaps)
	for _, base := range swaps {
		swapPath := segmentPath(l.dir, base, logFileExt, swapSuffix)
		next, err := nextOffsetOfFile(swapPath, base)
		if err != nil {
			return nil, err
		}
		ents, err := os.ReadDir(l.dir)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			b, _, suffix, ok := parseSegmentName(e.Name())
			if ok && suffix == "" && (b == base || (b > base && b < next)) {
				if err := os.Remove(filepath.Join(l.dir, e.Name())); err != nil {
					return nil, err
				}
			}
		}
		if err := os.Rename(swapPath, segmentPath(l.dir, base, logFileExt, "")); err != nil {
			return nil, err
		}
		forced[base] = true
		l.logger.Info("completed an interrupted segment swap", zap.Int64("base", base), zap.Int64("next_offset", next))
	}
	return forced, nil
}

// nextOffsetOfFile returns the offset after the last whole batch of a .log
// file, or base when it has none (LogSegment.readNextOffset).
func nextOffsetOfFile(path string, base int64) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	next := base
	sc := newBatchScanner(f, 0, fi.Size(), sequentialWindow)
	for sc.Next() {
		next = max(next, sc.Batch().lastOffset()+1)
	}
	if err := sc.Err(); err != nil && !isCorrupt(err) {
		return 0, err
	}
	return next, nil
}

// listSegments returns the base offsets of the directory's .log files,
// sorted, and deletes index files that have no .log.
func (l *Log) listSegments() ([]int64, error) {
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, err
	}
	logs := make(map[int64]bool)
	var indexes []string
	for _, e := range ents {
		base, ext, suffix, ok := parseSegmentName(e.Name())
		if !ok || suffix != "" || !e.Type().IsRegular() {
			continue
		}
		if ext == logFileExt {
			logs[base] = true
		} else {
			indexes = append(indexes, e.Name())
		}
	}
	for _, name := range indexes {
		if base, _, _, _ := parseSegmentName(name); !logs[base] {
			l.logger.Warn("deleting an orphaned index file", zap.String("file", name))
			if err := os.Remove(filepath.Join(l.dir, name)); err != nil {
				return nil, err
			}
		}
	}
	bases := make([]int64, 0, len(logs))
	for b := range logs {
		bases = append(bases, b)
	}
	slices.Sort(bases)
	return bases, nil
}

// loadIndexes loads the indexes of a segment that a clean shutdown left,
// with Kafka's sanity checks and some more; an *indexError means they do
// not match the log and the segment must be recovered. Next is the next
// segment's base offset. The last (active) segment's indexes are read and
// checked whole, and the batches after its last offset index entry are
// scanned to find the log end offset; the others' first and last entries
// are checked, and the batch their last entry points at.
func (s *logSegment) loadIndexes(next int64, last, missing bool) error {
	if missing && s.size > 0 {
		return badIndex("an index file is missing")
	}
	offSize, err := fileSize(s.off.f)
	if err != nil {
		return err
	}
	timSize, err := fileSize(s.tim.f)
	if err != nil {
		return err
	}
	switch {
	case offSize%offsetIndexEntrySize != 0:
		return badIndex("the offset index's %d bytes are not whole entries", offSize)
	case timSize%timeIndexEntrySize != 0:
		return badIndex("the time index's %d bytes are not whole entries", timSize)
	case s.size == 0 && (offSize > 0 || timSize > 0):
		return badIndex("an empty log has index entries")
	}
	if last {
		return s.loadActiveIndexes(offSize, timSize)
	}
	s.off.n, s.tim.n = int(offSize/offsetIndexEntrySize), int(timSize/timeIndexEntrySize)
	s.trusted = s.off.n == 0 && s.tim.n == 0 // else lookups check where they land
	var buf [timeIndexEntrySize]byte
	ov := s.off.view()
	lastOff := offsetPosition{offset: s.base}
	if ov.n > 0 {
		fb, err := ov.entry(0, buf[:])
		if err != nil {
			return err
		}
		first := decodeOffsetEntry(fb, s.base)
		lb, err := ov.entry(ov.n-1, buf[:])
		if err != nil {
			return err
		}
		lastOff = decodeOffsetEntry(lb, s.base)
		if first.offset < s.base || lastOff.offset < first.offset || lastOff.offset >= next ||
			first.position < 0 || lastOff.position < first.position || lastOff.position >= s.size {
			return badIndex("offset index entries (%d, %d) ... (%d, %d) do not fit the segment", first.offset, first.position, lastOff.offset, lastOff.position)
		}
	}
	tv := s.tim.view()
	lastTim := timestampOffset{timestamp: kbatch.NoTimestamp, offset: s.base}
	if tv.n > 0 {
		fb, err := tv.entry(0, buf[:])
		if err != nil {
			return err
		}
		first := decodeTimeEntry(fb, s.base)
		lb, err := tv.entry(tv.n-1, buf[:])
		if err != nil {
			return err
		}
		lastTim = decodeTimeEntry(lb, s.base)
		if first.offset < s.base || lastTim.offset < first.offset || lastTim.offset >= next || lastTim.timestamp < first.timestamp {
			return badIndex("time index entries (%d, %d) ... (%d, %d) do not fit the segment", first.timestamp, first.offset, lastTim.timestamp, lastTim.offset)
		}
	}
	// The batch the last offset entry points at (or the first) must be
	// there, start the append the entry names, and carry no timestamp
	// beyond the time index's last, which holds the segment's greatest.
	if s.size > 0 {
		sc := newBatchScanner(s.file, lastOff.position, s.size, kbatch.HeaderSize)
		if !sc.Next() {
			if err := sc.Err(); err != nil && !isCorrupt(err) {
				return err
			}
			return badIndex("no batch at position %d", lastOff.position)
		}
		b := sc.Batch()
		if b.baseOffset() < s.base || b.header().LastOffsetDelta() < 0 || (lastOff.found && b.lastOffset() > lastOff.offset) || (!lastOff.found && b.lastOffset() >= next) {
			return badIndex("the batch at position %d (offsets %d to %d) does not match the index", lastOff.position, b.baseOffset(), b.lastOffset())
		}
		if ts := b.header().MaxTimestamp(); ts > lastTim.timestamp {
			return badIndex("the batch at position %d has timestamp %d, beyond the time index's last %d", lastOff.position, ts, lastTim.timestamp)
		}
	}
	s.maxTs, s.maxTsOffset = lastTim.timestamp, lastTim.offset
	s.timLastTs = lastTim.timestamp
	return nil
}

// loadActiveIndexes reads and checks the last segment's indexes whole and
// scans the batches after the last offset index entry, to learn the log
// end offset and check they are whole and follow each other.
func (s *logSegment) loadActiveIndexes(offSize, timSize int64) error {
	offB := make([]byte, offSize)
	if _, err := readFullAt(s.off.f, offB, 0); err != nil {
		return err
	}
	timB := make([]byte, timSize)
	if _, err := readFullAt(s.tim.f, timB, 0); err != nil {
		return err
	}
	lastOff, err := checkOffsetIndex(offB, s.base, s.size)
	if err != nil {
		return badIndex("%v", err)
	}
	sc := newBatchScanner(s.file, lastOff.position, s.size, sequentialWindow)
	next, maxTs := s.base, int64(kbatch.NoTimestamp)
	first := true
	for sc.Next() {
		b := sc.Batch()
		base, delta := b.baseOffset(), b.header().LastOffsetDelta()
		if delta < 0 || base < max(next, s.base) || base > math.MaxInt64-1-int64(delta) || base+int64(delta)-s.base > math.MaxInt32 {
			return badIndex("the batch at position %d has offsets %d + %d after %d", b.pos, base, delta, next)
		}
		if first && lastOff.found && base+int64(delta) > lastOff.offset {
			return badIndex("the batch at position %d ends at offset %d, after its index entry's %d", b.pos, base+int64(delta), lastOff.offset)
		}
		first = false
		next = base + int64(delta) + 1
		maxTs = max(maxTs, b.header().MaxTimestamp())
	}
	if err := sc.Err(); err != nil {
		if !isCorrupt(err) {
			return err
		}
		return badIndex("the log's tail is corrupt: %v", err)
	}
	if sc.Partial() {
		return badIndex("the log ends with a partial batch at position %d", sc.End())
	}
	if lastOff.found && next <= lastOff.offset {
		return badIndex("the log ends at offset %d, before its last index entry's %d", next, lastOff.offset)
	}
	lastTim, err := checkTimeIndex(timB, s.base, next-1)
	if err != nil {
		return badIndex("%v", err)
	}
	if maxTs > lastTim.timestamp {
		return badIndex("a batch has timestamp %d, beyond the time index's last %d", maxTs, lastTim.timestamp)
	}
	s.off.n, s.off.mem = len(offB)/offsetIndexEntrySize, offB
	s.tim.n, s.tim.mem = len(timB)/timeIndexEntrySize, timB
	// The entries are in order and within the log, but only the last was
	// checked against it: lookups check where they land.
	s.trusted = s.off.n == 0 && s.tim.n == 0
	s.nextOffset = next
	s.maxTs, s.maxTsOffset = lastTim.timestamp, lastTim.offset
	s.timLastTs = lastTim.timestamp
	return nil
}

func fileSize(f *os.File) (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// recover rebuilds the segment from its .log (LogSegment.recover): it reads
// every batch, checks its framing, CRC and offsets (after the previous
// batch, before next, the segment's next base offset, within the relative
// offsets of the index), truncates the file at the first batch that fails,
// and rebuilds both indexes with the rule appends use, per batch, with the
// final time index entry. It returns how many bytes it truncated. The
// segment is not shared yet.
func (s *logSegment) recover(next int64) (int64, error) {
	fsz, err := fileSize(s.file)
	if err != nil {
		return 0, err
	}
	sc := newBatchScanner(s.file, 0, fsz, sequentialWindow)
	var offB, timB []byte
	var valid, lastIndexPos int64
	maxTs, maxTsOffset := int64(kbatch.NoTimestamp), s.base
	timLastTs, prevNext := int64(kbatch.NoTimestamp), s.base
	firstMaxTs, seen := int64(kbatch.NoTimestamp), false
	reason := ""
	for sc.Next() {
		b := sc.Batch()
		base, delta := b.baseOffset(), b.header().LastOffsetDelta()
		if delta < 0 || base < prevNext || base > math.MaxInt64-1-int64(delta) {
			reason = fmt.Sprintf("batch at %d has offsets %d + %d after %d", b.pos, base, delta, prevNext)
			break
		}
		lastOffset := base + int64(delta)
		if lastOffset-s.base > math.MaxInt32 || lastOffset >= next || b.pos+b.size > math.MaxInt32 {
			reason = fmt.Sprintf("batch at %d (offsets %d to %d) is out of the segment's range", b.pos, base, lastOffset)
			break
		}
		data, err := sc.Bytes()
		if err != nil {
			return 0, err
		}
		if err := kbatch.Batch(data).CheckCRC(); err != nil {
			reason = fmt.Sprintf("batch at %d: %v", b.pos, err)
			break
		}
		if ts := b.header().MaxTimestamp(); ts > maxTs {
			maxTs, maxTsOffset = ts, lastOffset
		}
		if valid-lastIndexPos > s.cfg.indexInterval {
			offB = encodeOffsetEntry(offB, relOffset(lastOffset, s.base), int32(valid))
			if maxTs > timLastTs {
				timB = encodeTimeEntry(timB, maxTs, relOffset(maxTsOffset, s.base))
				timLastTs = maxTs
			}
			lastIndexPos = valid
		}
		if !seen {
			firstMaxTs, seen = b.header().MaxTimestamp(), true
		}
		valid += b.size
		prevNext = lastOffset + 1
	}
	if err := sc.Err(); err != nil {
		if !isCorrupt(err) {
			return 0, err
		}
		reason = err.Error()
	} else if sc.Partial() {
		reason = fmt.Sprintf("partial batch at %d", sc.End())
	}
	truncated := fsz - valid
	if truncated > 0 {
		s.cfg.logger.Warn("truncating a segment at its first invalid batch", zap.String("file", s.file.Name()),
			zap.Int64("valid_bytes", valid), zap.Int64("truncated_bytes", truncated), zap.String("reason", reason))
		if err := s.file.Truncate(valid); err != nil {
			return 0, err
		}
	}
	if maxTs > timLastTs {
		timB = encodeTimeEntry(timB, maxTs, relOffset(maxTsOffset, s.base))
		timLastTs = maxTs
	}
	if err := s.off.replace(offB, true); err != nil {
		return 0, err
	}
	if err := s.tim.replace(timB, true); err != nil {
		return 0, err
	}
	s.size, s.nextOffset, s.trusted = valid, prevNext, true
	s.maxTs, s.maxTsOffset = maxTs, maxTsOffset
	s.timLastTs = timLastTs
	s.bytesSinceIndex = 0
	s.rollTs, s.rollTsLoaded = firstMaxTs, seen
	return truncated, nil
}
