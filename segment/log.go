package segment

import (
	"context"
	"fmt"
	"math"
	"os"
	"sort"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

// Log is one partition's classic Kafka log: a directory of segments, each a
// .log file of RecordBatch v2 batches with a sparse .index and .timeindex,
// byte for byte as Apache Kafka writes them (the package documentation
// draws the files). It appends batches that already carry their offsets,
// reads by offset and by timestamp, recovers from a crash when it opens,
// deletes old segments by retention, and compacts.
//
// A Log has one writer and many readers: Append, Roll, Sync,
// DeleteRecords, DeleteOldSegments, Compact and Close may be called from
// any goroutine and are serialized as they need; Read, OffsetForTimestamp
// and the accessors run concurrently with all of them, and a read never
// fails because the segment it reads is rolled, deleted or compacted
// meanwhile: it reads the files as they were when it started. A Log is
// safe for concurrent use. One directory must have one Log at a time.
type Log struct {
	dir    string
	cfg    logConfig
	logger *zap.Logger

	// closing tells a Compact in progress to stop, so that Close need not
	// wait for it to finish.
	closing atomic.Bool
	// dirDirty says files were created or renamed since the directory was
	// last synced.
	dirDirty atomic.Bool

	// Lock order: maint, w, sync, mu.

	// maint serializes the calls that delete or replace inactive
	// segments: Compact, DeleteOldSegments, DeleteRecords, Close.
	maint struct {
		sync.Mutex
		pending       []pendingDelete
		cleanerOffset int64 // cleaner-offset-checkpoint; -1: none
		nextHorizon   int64 // earliest delete horizon of a kept tombstone; MaxInt64: none known
	}
	// w serializes the writer: appends, rolls, swapping segments in.
	w sync.Mutex
	// sync serializes Sync's flushes.
	sync struct {
		sync.Mutex
		persistedBase int64 // base of the segment holding the persisted recovery point
	}
	// mu guards what readers see, and the published fields of segments.
	mu struct {
		sync.RWMutex
		segs          []*logSegment // by base offset; the last is active
		logStart      int64
		logEnd        int64
		recoveryPoint int64 // everything below is flushed
		closed        bool
	}
}

// AppendInfo describes what Append wrote.
type AppendInfo struct {
	// FirstOffset and LastOffset are the base offset of the first batch
	// and the last offset of the last.
	FirstOffset, LastOffset int64
	// MaxTimestamp is the greatest batch max timestamp, or NoTimestamp.
	MaxTimestamp int64
	// Batches and Bytes count what was appended.
	Batches int
	Bytes   int
}

// ReadResult is what Read returns.
type ReadResult struct {
	// Records holds whole batches, as a Kafka fetch returns them: the
	// first is the first batch whose last offset is at or after the offset
	// asked for. It is the caller's to keep.
	Records []byte
	// LogStartOffset and LogEndOffset are the log's bounds when the read
	// started (the log end offset is the high watermark of a Log: a Log
	// has no replication).
	LogStartOffset, LogEndOffset int64
}

// TimestampOffset is what OffsetForTimestamp finds.
type TimestampOffset struct {
	// Timestamp is the record's timestamp, at or after the one asked for.
	Timestamp int64
	// Offset is the record's offset.
	Offset int64
	// LeaderEpoch is the partition leader epoch of the record's batch, or
	// NoPartitionLeaderEpoch.
	LeaderEpoch int32
}

// SegmentInfo describes one segment, as kafka-log-dirs and
// kafka-dump-log would.
type SegmentInfo struct {
	// BaseOffset names the segment's files.
	BaseOffset int64
	// Size is the .log file's size in bytes.
	Size int64
	// LargestTimestamp is the greatest record timestamp, or NoTimestamp.
	LargestTimestamp int64
	// Active is true for the last segment, the one appends go to.
	Active bool
}

// OpenLog opens the log in dir, creating the directory if it does not
// exist, and recovers it (docs/formats.md, "Opening and recovery"): leftover .cleaned and
// .deleted files are removed and .swap files completed; after a clean
// Close, the files are trusted and only indexes that are missing or
// inconsistent are rebuilt; after a crash, every segment from the last
// recovery point is checked batch by batch (framing, CRC, offsets), a torn
// or corrupt tail is truncated with every segment after it, and the
// indexes are rebuilt. No file content makes it panic.
//
// opts may be nil for Kafka's defaults.
func OpenLog(ctx context.Context, dir string, opts *LogOptions) (*Log, error) {
	cfg, err := resolveLogOptions(opts)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("segment: creating the log directory: %w", err)
	}
	l := &Log{dir: dir, cfg: cfg, logger: cfg.logger.With(zap.String("dir", dir))}
	l.maint.cleanerOffset = -1
	l.maint.nextHorizon = math.MaxInt64
	l.sync.persistedBase = -1
	if err := l.load(ctx); err != nil {
		for _, s := range l.mu.segs {
			s.release()
		}
		return nil, err
	}
	return l, nil
}

// Dir returns the log's directory.
func (l *Log) Dir() string { return l.dir }

// active returns the active segment; the caller holds w or mu.
func (l *Log) active() *logSegment { return l.mu.segs[len(l.mu.segs)-1] }

// Append appends batches: the bytes of one or more RecordBatch v2 batches
// that already carry their offsets, as a follower or a materialiser
// appends them. Every batch must be whole and pass its CRC; offsets must
// not go back, within the append or against the log end offset
// (ErrOffsetsOutOfOrder), but may skip ahead. An append larger than
// segment.bytes is RECORD_LIST_TOO_LARGE. The segment rolls first when
// Kafka's rules say so (docs/formats.md, "Rolling segments"): it would outgrow
// segment.bytes, the append's max timestamp is segment.ms past the
// segment's first, an index is full, or the append's last offset does not
// fit the segment's relative offsets.
//
// An append whose offsets span more than a segment's int32 relative
// offsets (gaps are allowed, as after compaction) is split before the
// first batch that would not fit, and each part is appended, rolling as
// above, to its own segment: where Kafka's append fails with
// LogSegmentOffsetOverflowException, a Log keeps every batch. Should a
// later part fail to be written, the earlier parts stay appended:
// LatestOffset tells how far the append went.
//
// Append writes the bytes as they are and does not keep them. The data is
// in the operating system's cache when Append returns; Sync makes it
// durable.
func (l *Log) Append(ctx context.Context, batches []byte) (AppendInfo, error) {
	if err := ctx.Err(); err != nil {
		return AppendInfo{}, err
	}
	var one [1]appendInfo // the usual number of chunks, without an allocation
	a, chunks, err := analyzeChunks(batches, one[:0])
	if err != nil || a.batches == 0 {
		return AppendInfo{}, err
	}
	if a.size > l.cfg.segmentBytes {
		return AppendInfo{}, kafkaerr.New(kafkaerr.RecordListTooLarge, "the append of %d bytes exceeds segment.bytes %d", a.size, l.cfg.segmentBytes)
	}
	l.w.Lock()
	defer l.w.Unlock()
	if l.mu.closed {
		return AppendInfo{}, ErrClosed
	}
	if leo := l.mu.logEnd; a.firstOffset < leo {
		return AppendInfo{}, fmt.Errorf("%w: base offset %d is below the log end offset %d", ErrOffsetsOutOfOrder, a.firstOffset, leo)
	}
	for i := range chunks {
		ch := &chunks[i]
		if err := l.maybeRoll(ch); err != nil {
			return AppendInfo{}, err
		}
		err = l.active().append(batches[ch.start:ch.start+ch.size], ch, true, func() { l.mu.logEnd = ch.lastOffset + 1 })
		if err != nil {
			return AppendInfo{}, err
		}
	}
	return AppendInfo{FirstOffset: a.firstOffset, LastOffset: a.lastOffset, MaxTimestamp: a.maxTimestamp, Batches: a.batches, Bytes: int(a.size)}, nil
}

// analyzeAppend checks the batches of an append (framing, CRC, offsets
// that do not go back) and describes them (UnifiedLog.analyzeAndValidateRecords).
func analyzeAppend(batches []byte) (appendInfo, error) {
	a, _, err := analyzeChunks(batches, nil)
	return a, err
}

// analyzeChunks is analyzeAppend that also describes, appended to chunks
// unless it is nil, the consecutive chunks of the append that each fit one
// segment's relative offsets: a chunk ends before the first batch whose
// last offset is more than MaxInt32 past the chunk's first base offset.
func analyzeChunks(batches []byte, chunks []appendInfo) (appendInfo, []appendInfo, error) {
	a := appendInfo{maxTimestamp: kbatch.NoTimestamp}
	split := chunks != nil
	it := kbatch.NewBatchIter(batches)
	var next int64
	for it.Next() {
		pos, b := int64(it.Pos()), it.Batch()
		if err := b.CheckCRC(); err != nil {
			return a, nil, fmt.Errorf("batch %d of the append: %w", a.batches, err)
		}
		base, delta := b.BaseOffset(), b.LastOffsetDelta()
		if base < 0 || delta < 0 || base > math.MaxInt64-1-int64(delta) {
			return a, nil, kafkaerr.New(kafkaerr.InvalidRecord, "batch %d of the append has an invalid offset range: base %d, last offset delta %d", a.batches, base, delta)
		}
		last := base + int64(delta)
		if a.batches > 0 && base < next {
			return a, nil, fmt.Errorf("%w: batch %d of the append starts at %d, before %d", ErrOffsetsOutOfOrder, a.batches, base, next)
		}
		a.add(b, base, last)
		if split {
			if len(chunks) == 0 || last-chunks[len(chunks)-1].firstOffset > math.MaxInt32 {
				chunks = append(chunks, appendInfo{start: pos})
			}
			chunks[len(chunks)-1].add(b, base, last)
		}
		next = last + 1
	}
	if err := it.Err(); err != nil {
		return a, nil, err
	}
	if it.Partial() {
		return a, nil, kafkaerr.New(kafkaerr.CorruptMessage, "the append ends with a partial batch (%d bytes after %d whole ones)", len(batches)-it.Pos(), a.batches)
	}
	return a, chunks, nil
}

// add counts batch b, with offsets base to last, in a.
func (a *appendInfo) add(b kbatch.Batch, base, last int64) {
	ts := b.MaxTimestamp()
	if a.batches == 0 {
		a.firstOffset, a.firstMaxTimestamp, a.maxTimestamp, a.offsetOfMaxTimestamp = base, ts, ts, last
	}
	if ts > a.maxTimestamp {
		a.maxTimestamp, a.offsetOfMaxTimestamp = ts, last
	}
	a.lastOffset = last
	a.size += int64(len(b))
	a.batches++
}

// maybeRoll rolls the active segment before append a if Kafka would
// (LogSegment.shouldRoll). The caller holds w.
func (l *Log) maybeRoll(a *appendInfo) error {
	s := l.active()
	var reason string
	switch {
	case s.size > l.cfg.segmentBytes-a.size:
		reason = "segment.bytes"
	case s.off.n >= l.cfg.offsetMaxEntries:
		reason = "offset index full"
	case s.tim.n >= l.cfg.timeMaxEntries-1:
		reason = "time index full"
	case a.lastOffset-s.base > math.MaxInt32:
		reason = "relative offset overflow"
	case s.size > 0:
		waited, err := s.timeWaitedForRoll(l.cfg.nowMs(), a.maxTimestamp)
		if err != nil {
			return err
		}
		if waited > l.cfg.segmentMs-s.jitterMs {
			reason = "segment.ms"
		}
	}
	if reason == "" {
		return nil
	}
	return l.roll(a.firstOffset, reason)
}

// roll starts a new active segment at newBase. An empty active segment is
// replaced rather than left behind. The caller holds w.
func (l *Log) roll(newBase int64, reason string) error {
	old := l.active()
	if old.size == 0 && old.base == newBase {
		return nil
	}
	if old.size > 0 {
		if err := old.finish(false); err != nil {
			return err
		}
	}
	seg, err := createSegment(l.dir, newBase, "", &l.cfg, &l.mu.RWMutex)
	if err != nil {
		return fmt.Errorf("segment: rolling to %d: %w", newBase, err)
	}
	l.dirDirty.Store(true)
	l.mu.Lock()
	if old.size == 0 {
		l.mu.segs[len(l.mu.segs)-1] = seg
	} else {
		l.mu.segs = append(l.mu.segs, seg)
	}
	l.mu.Unlock()
	if old.size == 0 {
		if err := old.removeFiles(); err != nil {
			l.logger.Warn("removing an empty segment", zap.Int64("base", old.base), zap.Error(err))
		}
		old.release()
	}
	l.logger.Info("rolled segment", zap.String("reason", reason), zap.Int64("old_base", old.base), zap.Int64("new_base", newBase), zap.Int64("old_size", old.size))
	return nil
}

// Roll makes the active segment inactive and starts a new one at the log
// end offset, as Kafka does before it deletes or cleans an active segment.
// An empty active segment stays.
func (l *Log) Roll(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.w.Lock()
	defer l.w.Unlock()
	if l.mu.closed {
		return ErrClosed
	}
	if l.active().size == 0 {
		return nil
	}
	return l.roll(l.mu.logEnd, "forced")
}

// floor returns the index of the segment that holds offset: the last
// whose base offset is <= offset, or 0. The caller holds mu.
func floorSegment(segs []*logSegment, offset int64) int {
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > offset })
	return max(i-1, 0)
}

// EarliestOffset returns the log start offset: the first offset a read may
// ask for (ListOffsets with timestamp -2). It rises with DeleteRecords and
// retention.
func (l *Log) EarliestOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.logStart
}

// LatestOffset returns the log end offset: the offset after the last
// batch, where the next append may start (ListOffsets with timestamp -1).
func (l *Log) LatestOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.logEnd
}

// Size returns the size of the log in bytes: the sum of its .log files, as
// kafka-log-dirs reports a partition's size.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.mu.segs {
		n += s.size
	}
	return n
}

// Segments describes the log's segments, oldest first.
func (l *Log) Segments() []SegmentInfo {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]SegmentInfo, len(l.mu.segs))
	for i, s := range l.mu.segs {
		out[i] = SegmentInfo{BaseOffset: s.base, Size: s.size, LargestTimestamp: s.maxTs, Active: i == len(l.mu.segs)-1}
	}
	return out
}

// Sync flushes everything appended so far to stable storage, with the
// directory entries of new segments, and moves the recovery point to the
// log end offset: a crash after Sync loses none of it, and recovery on the
// next open starts from the segment that holds the recovery point. Appends
// may go on while Sync flushes.
func (l *Log) Sync(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.w.Lock()
	l.mu.RLock()
	if l.mu.closed {
		l.mu.RUnlock()
		l.w.Unlock()
		return ErrClosed
	}
	leo := l.mu.logEnd
	segs := append([]*logSegment(nil), l.mu.segs[floorSegment(l.mu.segs, l.mu.recoveryPoint):]...)
	for _, s := range segs {
		s.acquire()
	}
	l.mu.RUnlock()
	l.w.Unlock()
	defer func() {
		for _, s := range segs {
			s.release()
		}
	}()

	l.sync.Lock()
	defer l.sync.Unlock()
	for _, s := range segs {
		if err := s.sync(); err != nil {
			return err
		}
	}
	if l.dirDirty.Swap(false) {
		if err := syncDir(l.dir); err != nil {
			l.dirDirty.Store(true)
			return err
		}
	}
	l.mu.Lock()
	l.mu.recoveryPoint = max(l.mu.recoveryPoint, leo)
	rp := l.mu.recoveryPoint
	base := l.mu.segs[floorSegment(l.mu.segs, rp)].base
	l.mu.Unlock()
	// Recovery starts from the segment that holds the recovery point, so
	// the checkpoint needs writing only when that segment changes.
	if base != l.sync.persistedBase {
		if err := writeCheckpoint(l.dir, recoveryPointFile, rp); err != nil {
			return err
		}
		l.sync.persistedBase = base
	}
	return nil
}

// Close flushes the log, writes its checkpoints (recovery point, log start
// offset, cleaner offset) and the clean shutdown marker, and closes the
// files once the reads in progress are done. It stops a Compact in
// progress. Close may be called more than once; other calls after it
// return ErrClosed.
func (l *Log) Close() error {
	l.closing.Store(true)
	l.maint.Lock()
	defer l.maint.Unlock()
	l.w.Lock()
	defer l.w.Unlock()
	l.sync.Lock()
	defer l.sync.Unlock()
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return nil
	}
	l.mu.closed = true
	segs := l.mu.segs
	rp, leo, lso := l.mu.recoveryPoint, l.mu.logEnd, l.mu.logStart
	l.mu.Unlock()

	err := l.closeFiles(segs, rp, leo, lso)
	l.mu.Lock()
	l.mu.segs = nil
	l.mu.Unlock()
	for _, s := range segs {
		s.release()
	}
	if err != nil {
		l.logger.Error("closing the log uncleanly; the next open recovers it", zap.Error(err))
		return err
	}
	return nil
}

// closeFiles does Close's writes; the clean shutdown marker only when all
// else succeeded.
func (l *Log) closeFiles(segs []*logSegment, rp, leo, lso int64) error {
	if err := segs[len(segs)-1].finish(true); err != nil {
		return err
	}
	for _, s := range segs[floorSegment(segs, rp):] {
		if err := s.sync(); err != nil {
			return err
		}
	}
	for _, s := range segs {
		if s.suspect.Load() {
			// Missing index files are rebuilt on the next open.
			for _, ext := range []string{indexFileExt, timeIndexFileExt} {
				if err := os.Remove(s.path(ext)); err != nil {
					return err
				}
			}
		}
	}
	l.purgeDeleted(true)
	if err := syncDir(l.dir); err != nil {
		return err
	}
	if err := writeCheckpoint(l.dir, recoveryPointFile, leo); err != nil {
		return err
	}
	if err := writeCheckpoint(l.dir, logStartOffsetFile, lso); err != nil {
		return err
	}
	return writeCleanShutdown(l.dir)
}

// CreateLog creates a new, empty log in dir whose first offset is start
// (Kafka's truncateFullyAndStartAt on a new directory): a replica that
// does not hold a partition's history starts its log where it joins. dir
// must not exist or be empty.
func CreateLog(ctx context.Context, dir string, start int64, opts *LogOptions) (*Log, error) {
	if start < 0 {
		return nil, fmt.Errorf("segment: CreateLog at negative offset %d", start)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("segment: creating the log directory: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("segment: %w", err)
	}
	if len(entries) > 0 {
		return nil, fmt.Errorf("segment: CreateLog: %s is not empty", dir)
	}
	if err := writeCheckpoint(dir, logStartOffsetFile, start); err != nil {
		return nil, err
	}
	return OpenLog(ctx, dir, opts)
}
