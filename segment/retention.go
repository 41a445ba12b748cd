package segment

// Retention: deleting whole old segments (docs/formats.md, "Retention"; Kafka's
// UnifiedLog.deleteOldSegments), and DeleteRecords.

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"slices"
	"time"

	"go.uber.org/zap"
)

// DeleteRecordsHighWatermark asks DeleteRecords to delete everything up to
// the log end offset (Kafka's DeleteRecordsRequest.HIGH_WATERMARK).
const DeleteRecordsHighWatermark = -1

// pendingDelete is a deleted segment's files, renamed to .deleted, waiting
// for FileDeleteDelay to pass.
type pendingDelete struct {
	paths []string
	due   time.Time
}

// DeleteOldSegments deletes whole segments, oldest first, as Kafka's
// retention does every log.retention.check.interval.ms: the segments
// wholly below the log start offset (whatever the cleanup policy), then,
// when the policy includes delete, the oldest segments while the log stays
// at least retention.bytes without them, then those whose greatest
// timestamp is older than retention.ms. Each rule stops at the first
// segment it keeps. The active segment is deleted only by rolling first
// (when every segment is to go); an empty active segment is never
// deleted. It returns how many segments it deleted.
//
// A deleted segment's files are renamed to .deleted, then removed after
// FileDeleteDelay; a crash in between leaves .deleted files that the next
// OpenLog removes. Reads that hold the segment go on reading it.
func (l *Log) DeleteOldSegments(ctx context.Context) (int, error) {
	unlock, err := l.lockForDeletion(ctx)
	if err != nil {
		return 0, err
	}
	defer unlock()
	defer l.purgeDeleted(false)
	n, err := l.deleteSegments(l.logStartBreached, "log start offset")
	if err != nil || !l.cfg.policy.Delete() {
		return n, err
	}
	k, err := l.deleteSegments(l.retentionSizeBreached(), "retention.bytes")
	n += k
	if err != nil {
		return n, err
	}
	k, err = l.deleteSegments(l.retentionTimeBreached(), "retention.ms")
	return n + k, err
}

// lockForDeletion takes the maintenance and write locks, once ctx is
// still live and the log is open (else the error, ErrClosed for a closed
// log); unlock releases them.
func (l *Log) lockForDeletion(ctx context.Context) (unlock func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.maint.Lock()
	l.w.Lock()
	if l.mu.closed {
		l.w.Unlock()
		l.maint.Unlock()
		return nil, ErrClosed
	}
	return func() {
		l.w.Unlock()
		l.maint.Unlock()
	}, nil
}

// DeleteRecords raises the log start offset to offset, as Kafka's
// DeleteRecords does, and deletes the segments wholly below it: reads
// below the new log start offset fail with OFFSET_OUT_OF_RANGE, though
// the rest of the segment holding it stays on disk. An offset below the
// current log start offset changes nothing; one above the log end offset
// is OFFSET_OUT_OF_RANGE; DeleteRecordsHighWatermark means the log end
// offset. It returns the log start offset.
func (l *Log) DeleteRecords(ctx context.Context, offset int64) (int64, error) {
	unlock, err := l.lockForDeletion(ctx)
	if err != nil {
		return 0, err
	}
	defer unlock()
	start, end := l.mu.logStart, l.mu.logEnd
	if offset == DeleteRecordsHighWatermark {
		offset = end
	}
	if offset < 0 || offset > end {
		return start, offsetOutOfRange(offset, start, end)
	}
	if offset > start {
		if err := writeCheckpoint(l.dir, logStartOffsetFile, offset); err != nil {
			return start, err
		}
		l.mu.Lock()
		l.mu.logStart = offset
		l.mu.Unlock()
		l.logger.Info("raised the log start offset", zap.Int64("log_start_offset", offset))
	}
	defer l.purgeDeleted(false)
	_, err = l.deleteSegments(l.logStartBreached, "log start offset")
	return l.mu.logStart, err
}

// logStartBreached: the next segment starts at or below the log start
// offset, so none of this one's records can be read.
func (l *Log) logStartBreached(_, next *logSegment) bool {
	return next != nil && next.base <= l.mu.logStart
}

// retentionSizeBreached returns the retention.bytes rule: delete the oldest
// segments while what remains is at least retention.bytes.
func (l *Log) retentionSizeBreached() func(s, next *logSegment) bool {
	if l.cfg.retentionBytes <= 0 {
		return nil
	}
	var total int64
	for _, s := range l.mu.segs {
		total += s.size
	}
	diff := total - l.cfg.retentionBytes
	return func(s, _ *logSegment) bool {
		if diff-s.size < 0 {
			return false
		}
		diff -= s.size
		return true
	}
}

// retentionTimeBreached returns the retention.ms rule: the segment's
// greatest timestamp is older than retention.ms.
func (l *Log) retentionTimeBreached() func(s, next *logSegment) bool {
	if l.cfg.retentionMs < 0 {
		return nil
	}
	now := l.cfg.nowMs()
	return func(s, _ *logSegment) bool { return now-s.largestTimestamp() > l.cfg.retentionMs }
}

// deleteSegments deletes the oldest segments while pred holds
// (UnifiedLog.deletableSegments and deleteSegments). The caller holds
// maint and w.
func (l *Log) deleteSegments(pred func(s, next *logSegment) bool, reason string) (int, error) {
	if pred == nil {
		return 0, nil
	}
	segs := l.mu.segs
	var deletable []*logSegment
	for i, s := range segs {
		var next *logSegment
		if i+1 < len(segs) {
			next = segs[i+1]
		}
		if (next == nil && s.size == 0) || !pred(s, next) {
			break
		}
		deletable = append(deletable, s)
	}
	if len(deletable) == 0 {
		return 0, nil
	}
	if len(deletable) == len(segs) {
		// A log always has a segment: roll a new one to delete them all.
		if err := l.roll(l.mu.logEnd, reason); err != nil {
			return 0, err
		}
	}
	l.mu.Lock()
	l.mu.segs = slices.Clone(l.mu.segs[len(deletable):])
	l.mu.logStart = max(l.mu.logStart, l.mu.segs[0].base)
	l.mu.Unlock()
	var first error
	for _, s := range deletable {
		l.logger.Info("deleting segment", zap.String("reason", reason), zap.Int64("base", s.base),
			zap.Int64("size", s.size), zap.Int64("largest_timestamp", s.maxTs))
		if err := l.deleteSegment(s); err != nil && first == nil {
			first = err
		}
	}
	if err := syncDir(l.dir); err != nil && first == nil {
		first = err
	}
	return len(deletable), first
}

// deleteSegment renames the files of a segment that is out of the log to
// .deleted, schedules their removal and drops the Log's reference.
func (l *Log) deleteSegment(s *logSegment) error {
	defer s.release()
	err := s.rename(deletedSuffix)
	if err != nil {
		// Remove what is there by any name: a .log left behind would come
		// back as a segment when the log is opened.
		_ = s.removeFiles()
		s.suffix = ""
		_ = s.removeFiles()
		return err
	}
	l.scheduleRemoval(s)
	return nil
}

// scheduleRemoval queues the removal of a segment's files, renamed to
// .deleted, after FileDeleteDelay. The caller holds maint.
func (l *Log) scheduleRemoval(s *logSegment) {
	paths := make([]string, 0, len(segmentFileExts)+1)
	for _, ext := range append([]string{txnIndexFileExt}, segmentFileExts...) {
		paths = append(paths, s.path(ext))
	}
	l.maint.pending = append(l.maint.pending, pendingDelete{paths: paths, due: l.cfg.clock().Add(l.cfg.fileDeleteDelay)})
}

// purgeDeleted removes the .deleted files whose delay has passed, or all
// of them. The caller holds maint.
func (l *Log) purgeDeleted(all bool) {
	now := l.cfg.clock()
	kept := l.maint.pending[:0]
	for _, p := range l.maint.pending {
		if !all && now.Before(p.due) {
			kept = append(kept, p)
			continue
		}
		for _, path := range p.paths {
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				l.logger.Warn("removing a deleted segment file", zap.String("file", path), zap.Error(err))
			}
		}
	}
	clear(l.maint.pending[len(kept):])
	l.maint.pending = kept
}
