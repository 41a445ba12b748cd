package segment

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/diskless-go/diskless/kbatch"
)

// File name extensions and suffixes of a partition directory
// (docs/formats.md, "Log directory"). They are part of the format.
const (
	logFileExt       = ".log"
	indexFileExt     = ".index"
	timeIndexFileExt = ".timeindex"
	txnIndexFileExt  = ".txnindex"
	cleanedSuffix    = ".cleaned"
	swapSuffix       = ".swap"
	deletedSuffix    = ".deleted"
	// baseOffsetDigits is the width of the zero-padded base offset that
	// names a segment's files.
	baseOffsetDigits = 20
)

// segmentFileExts are the files of a segment that a Log writes, .log last
// so that renaming them in this order leaves the .log as the mark that all
// are renamed.
var segmentFileExts = []string{indexFileExt, timeIndexFileExt, logFileExt}

// segmentPath returns the path of a segment file: the base offset in 20
// digits, the extension, then the suffix (".cleaned", ".swap",
// ".deleted" or none).
func segmentPath(dir string, base int64, ext, suffix string) string {
	return filepath.Join(dir, fmt.Sprintf("%0*d%s%s", baseOffsetDigits, base, ext, suffix))
}

// parseSegmentName splits a file name into its base offset, extension and
// suffix; ok is false for files that are not a segment's.
func parseSegmentName(name string) (base int64, ext, suffix string, ok bool) {
	for _, s := range []string{cleanedSuffix, swapSuffix, deletedSuffix} {
		if strings.HasSuffix(name, s) {
			name, suffix = strings.TrimSuffix(name, s), s
			break
		}
	}
	if len(name) <= baseOffsetDigits {
		return 0, "", "", false
	}
	digits, ext := name[:baseOffsetDigits], name[baseOffsetDigits:]
	switch ext {
	case logFileExt, indexFileExt, timeIndexFileExt, txnIndexFileExt:
	default:
		return 0, "", "", false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, "", "", false
		}
	}
	base, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return 0, "", "", false
	}
	return base, ext, suffix, true
}

// logSegment is one segment of a Log: its .log file and its two indexes.
//
// Readers hold a reference (acquire, release) while they read; the files
// are closed when the Log and the last reader have released it, so a
// reader is never disturbed when the segment is rolled, deleted or
// replaced by a cleaned one (an open file survives its rename and
// unlink).
//
// The fields marked "published" change under the Log's mu, which readers
// hold to take a view; the writer's own fields change only under the Log's
// wmu, or before the segment is shared.
type logSegment struct {
	dir  string
	base int64
	cfg  *logConfig
	mu   *sync.RWMutex // the Log's mu

	file *os.File
	off  indexFile
	tim  indexFile
	// txn is the .txnindex that Kafka wrote for the segment, opened with
	// it when it was loaded, or nil: a Log writes none, but keeps one it
	// finds for SegmentFiles to read.
	txn  *os.File
	refs atomic.Int64
	// suspect is set when an index lookup landed on something that is not
	// the batch it promised: the index files are removed on Close so that
	// the next open rebuilds them.
	suspect atomic.Bool

	// Published.
	size        int64
	maxTs       int64 // greatest batch max timestamp, kbatch.NoTimestamp if none
	maxTsOffset int64 // last offset of the first batch that carried it
	// trusted says this process wrote every index entry (appends,
	// recovery, cleaning); lookups in an index loaded from disk check
	// where they land.
	trusted bool

	// The writer's.
	suffix          string
	nextOffset      int64 // offset after the last batch, or base
	timLastTs       int64 // timestamp of the last time index entry, or kbatch.NoTimestamp
	bytesSinceIndex int64
	rollTs          int64 // max timestamp of the first batch, once loaded
	rollTsLoaded    bool
	createdMs       int64
	jitterMs        int64
}

func newLogSegment(dir string, base int64, cfg *logConfig, mu *sync.RWMutex) *logSegment {
	s := &logSegment{
		dir: dir, base: base, cfg: cfg, mu: mu,
		maxTs: kbatch.NoTimestamp, maxTsOffset: base,
		nextOffset: base, timLastTs: kbatch.NoTimestamp,
		createdMs: cfg.nowMs(),
	}
	s.off.entrySize = offsetIndexEntrySize
	s.tim.entrySize = timeIndexEntrySize
	if j := min(cfg.jitterMs, cfg.segmentMs); j > 0 {
		s.jitterMs = rand.Int64N(j) // LogConfig.randomSegmentJitter
	}
	s.refs.Store(1)
	return s
}

func (s *logSegment) path(ext string) string { return segmentPath(s.dir, s.base, ext, s.suffix) }

// createSegment creates a new empty segment's files with the given suffix,
// replacing any files of that name (as Kafka does on roll).
func createSegment(dir string, base int64, suffix string, cfg *logConfig, mu *sync.RWMutex) (*logSegment, error) {
	s := newLogSegment(dir, base, cfg, mu)
	s.suffix = suffix
	s.trusted = true
	var err error
	flags := os.O_RDWR | os.O_CREATE | os.O_TRUNC
	if s.file, err = os.OpenFile(s.path(logFileExt), flags, 0o644); err != nil {
		return nil, err
	}
	if s.off.f, err = os.OpenFile(s.path(indexFileExt), flags, 0o644); err != nil {
		s.closeFiles()
		return nil, err
	}
	if s.tim.f, err = os.OpenFile(s.path(timeIndexFileExt), flags, 0o644); err != nil {
		s.closeFiles()
		return nil, err
	}
	return s, nil
}

// openSegment opens an existing segment's .log, and its indexes, creating
// empty ones where they are missing (missing reports it).
func openSegment(dir string, base int64, cfg *logConfig, mu *sync.RWMutex) (s *logSegment, missing bool, err error) {
	s = newLogSegment(dir, base, cfg, mu)
	if s.file, err = os.OpenFile(s.path(logFileExt), os.O_RDWR, 0); err != nil {
		return nil, false, err
	}
	fi, err := s.file.Stat()
	if err != nil {
		s.closeFiles()
		return nil, false, err
	}
	s.size = fi.Size()
	open := func(ext string) (*os.File, error) {
		f, err := os.OpenFile(s.path(ext), os.O_RDWR, 0)
		if errors.Is(err, fs.ErrNotExist) {
			missing = true
			f, err = os.OpenFile(s.path(ext), os.O_RDWR|os.O_CREATE, 0o644)
		}
		return f, err
	}
	if s.off.f, err = open(indexFileExt); err != nil {
		s.closeFiles()
		return nil, false, err
	}
	if s.tim.f, err = open(timeIndexFileExt); err != nil {
		s.closeFiles()
		return nil, false, err
	}
	if s.txn, err = os.Open(s.path(txnIndexFileExt)); err != nil {
		s.txn = nil
		if !errors.Is(err, fs.ErrNotExist) {
			s.closeFiles()
			return nil, false, err
		}
	}
	return s, missing, nil
}

func (s *logSegment) closeFiles() error {
	var first error
	for _, f := range []*os.File{s.file, s.off.f, s.tim.f, s.txn} {
		if f != nil {
			if err := f.Close(); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

// acquire takes a reference for a reader; the caller holds the Log's mu
// (read or write), under which the Log's own reference is still held.
func (s *logSegment) acquire() { s.refs.Add(1) }

// release drops a reference; the last one closes the files.
func (s *logSegment) release() {
	if s.refs.Add(-1) == 0 {
		_ = s.closeFiles() // read-only by now: a close error loses nothing
	}
}

// segView is a reader's snapshot of a segment, taken under the Log's mu.
type segView struct {
	seg     *logSegment
	size    int64
	off     indexView
	tim     indexView
	trusted bool
}

func (s *logSegment) view() segView {
	return segView{seg: s, size: s.size, off: s.off.view(), tim: s.tim.view(), trusted: s.trusted}
}

// appendInfo describes the batches of one append.
type appendInfo struct {
	firstOffset          int64
	lastOffset           int64
	firstMaxTimestamp    int64 // of the first batch
	maxTimestamp         int64
	offsetOfMaxTimestamp int64
	size                 int64
	batches              int
	// start is the position of the first batch in the bytes of the
	// append that this chunk is part of (analyzeChunks).
	start int64
}

// append writes data (whole, checked batches described by a) at the end of
// the segment and indexes it by Kafka's rule (LogSegment.append): when more
// than index.interval.bytes were appended since the last entry, before
// this append, the append's last offset is mapped to its start position,
// and the time index gets (max timestamp so far, its offset) if that
// timestamp is new. The first append of a segment gets no entry. keepMem
// keeps the index entries in memory (the active segment); onPublish, if
// not nil, runs under the Log's mu as the append becomes visible.
func (s *logSegment) append(data []byte, a *appendInfo, keepMem bool, onPublish func()) error {
	if a.firstOffset < s.base || a.lastOffset-s.base > math.MaxInt32 {
		// The roll rules and Append's split keep this from happening; an
		// index entry must never get a relative offset out of range.
		return fmt.Errorf("segment: offsets %d to %d do not fit the int32 relative offsets of segment %d", a.firstOffset, a.lastOffset, s.base)
	}
	pos := s.size
	if pos+int64(len(data)) > math.MaxInt32 {
		return fmt.Errorf("segment: %d bytes at position %d overflow the segment's int32 positions", len(data), pos)
	}
	if _, err := s.file.WriteAt(data, pos); err != nil {
		_ = s.file.Truncate(pos) // best effort: recovery trims a torn tail anyway
		return fmt.Errorf("segment: appending to %s: %w", s.file.Name(), err)
	}
	maxTs, maxTsOffset := s.maxTs, s.maxTsOffset
	if a.maxTimestamp > maxTs {
		maxTs, maxTsOffset = a.maxTimestamp, a.offsetOfMaxTimestamp
	}
	var offEntry, timEntry []byte
	if s.bytesSinceIndex > s.cfg.indexInterval {
		offEntry = encodeOffsetEntry(nil, relOffset(a.lastOffset, s.base), int32(pos))
		if err := s.off.write(offEntry); err != nil {
			return fmt.Errorf("segment: writing the offset index: %w", err)
		}
		if maxTs > s.timLastTs {
			timEntry = encodeTimeEntry(nil, maxTs, relOffset(maxTsOffset, s.base))
			if err := s.tim.write(timEntry); err != nil {
				return fmt.Errorf("segment: writing the time index: %w", err)
			}
		}
		s.bytesSinceIndex = 0
	}
	s.bytesSinceIndex += int64(len(data))
	if pos == 0 {
		s.rollTs, s.rollTsLoaded = a.firstMaxTimestamp, true
	}
	if timEntry != nil {
		s.timLastTs = maxTs
	}
	s.nextOffset = a.lastOffset + 1

	s.mu.Lock()
	s.size = pos + int64(len(data))
	s.maxTs, s.maxTsOffset = maxTs, maxTsOffset
	if offEntry != nil {
		s.off.publish(offEntry, keepMem)
	}
	if timEntry != nil {
		s.tim.publish(timEntry, keepMem)
	}
	if onPublish != nil {
		onPublish()
	}
	s.mu.Unlock()
	return nil
}

// finish makes the segment inactive, as Kafka does on roll and close
// (onBecomeInactiveSegment): the time index gets a last entry with the
// segment's max timestamp if it lacks it, even when full. keepMem says
// whether the segment stays the active one (on Close).
func (s *logSegment) finish(keepMem bool) error {
	var timEntry []byte
	if s.maxTs > s.timLastTs {
		timEntry = encodeTimeEntry(nil, s.maxTs, relOffset(s.maxTsOffset, s.base))
		if err := s.tim.write(timEntry); err != nil {
			return fmt.Errorf("segment: writing the time index: %w", err)
		}
		s.timLastTs = s.maxTs
	}
	s.mu.Lock()
	if timEntry != nil {
		s.tim.publish(timEntry, keepMem)
	}
	if !keepMem {
		s.off.mem, s.tim.mem = nil, nil
	}
	s.mu.Unlock()
	return nil
}

// sync flushes the segment's three files.
func (s *logSegment) sync() error {
	for _, f := range []*os.File{s.file, s.off.f, s.tim.f} {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("segment: syncing %s: %w", f.Name(), err)
		}
	}
	return nil
}

// rename changes the suffix of the segment's files, the .log last. A
// .txnindex (which Kafka writes and a Log does not) goes along if there is
// one.
func (s *logSegment) rename(suffix string) error {
	err := os.Rename(s.path(txnIndexFileExt), segmentPath(s.dir, s.base, txnIndexFileExt, suffix))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, ext := range segmentFileExts {
		if err := os.Rename(s.path(ext), segmentPath(s.dir, s.base, ext, suffix)); err != nil {
			return err
		}
	}
	s.suffix = suffix
	return nil
}

// removeFiles deletes the segment's files by name (the open files live on
// until released).
func (s *logSegment) removeFiles() error {
	var first error
	for _, ext := range append([]string{txnIndexFileExt}, segmentFileExts...) {
		if err := os.Remove(s.path(ext)); err != nil && !errors.Is(err, fs.ErrNotExist) && first == nil {
			first = err
		}
	}
	return first
}

// timeWaitedForRoll is how long the segment has waited to roll, for an
// append whose max timestamp is ts (LogSegment.timeWaitedForRoll): record
// time since the first batch's max timestamp, or wall time since the
// segment was created or loaded when the first batch has none.
func (s *logSegment) timeWaitedForRoll(nowMs, ts int64) (int64, error) {
	if err := s.loadRollTs(); err != nil {
		return 0, err
	}
	if s.rollTsLoaded && s.rollTs >= 0 {
		return ts - s.rollTs, nil
	}
	return nowMs - s.createdMs, nil
}

// loadRollTs reads the max timestamp of the segment's first batch, once
// (LogSegment.loadFirstBatchTimestamp). The caller holds the Log's w.
func (s *logSegment) loadRollTs() error {
	if s.rollTsLoaded || s.size == 0 {
		return nil
	}
	sc := newBatchScanner(s.file, 0, s.size, kbatch.HeaderSize)
	if !sc.Next() {
		if err := sc.Err(); err != nil {
			return err
		}
		return fmt.Errorf("%w: %s has no whole first batch", ErrCorruptSegment, s.file.Name())
	}
	s.rollTs, s.rollTsLoaded = sc.Batch().header().MaxTimestamp(), true
	return nil
}

// largestTimestamp is the segment's greatest record timestamp, or its
// file's modification time when no batch has one (LogSegment.largestTimestamp).
// The caller holds the Log's mu or wmu.
func (s *logSegment) largestTimestamp() int64 {
	if s.maxTs >= 0 {
		return s.maxTs
	}
	fi, err := s.file.Stat()
	if err != nil {
		return s.cfg.nowMs() // unknown: never old enough to delete
	}
	return fi.ModTime().UnixMilli()
}
