package metalog

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"go.uber.org/zap"
)

// recover reads the folder: it checks every segment, truncates a torn
// tail, and opens the last segment for appends.
func (l *File) recover() error {
	// The folders MkdirAll creates must be durable too: fsync the parent
	// of each.
	var created []string
	for d := filepath.Clean(l.dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || !errors.Is(err, os.ErrNotExist) || filepath.Dir(d) == d {
			break
		}
		created = append(created, d)
	}
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		return fmt.Errorf("metalog: file: %w", err)
	}
	for _, d := range created {
		if err := l.syncDirPath(filepath.Dir(d)); err != nil {
			return err
		}
	}
	des, err := os.ReadDir(l.dir)
	if err != nil {
		return fmt.Errorf("metalog: file: %w", err)
	}
	var segs []*fileLogSegment
	for _, de := range des {
		if base, ok := parseFileLogSegmentName(de.Name()); ok && de.Type().IsRegular() {
			segs = append(segs, &fileLogSegment{base: base, path: filepath.Join(l.dir, de.Name())})
		}
	}
	slices.SortFunc(segs, func(a, b *fileLogSegment) int { return cmp.Compare(a.base, b.base) })
	if len(segs) == 0 {
		seg := &fileLogSegment{base: 0, path: filepath.Join(l.dir, fileLogSegmentName(0))}
		f, err := os.OpenFile(seg.path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return fmt.Errorf("metalog: file: %w", err)
		}
		l.cur, l.curSeg = f, seg
		if err := l.syncDir(); err != nil {
			return err
		}
		segs = append(segs, seg)
	}

	next := segs[0].base
	for i, seg := range segs {
		if seg.base != next {
			return fmt.Errorf("%w: segment %s starts at offset %d but the segment before it ends at %d", ErrCorrupt, seg.path, seg.base, next)
		}
		last := i == len(segs)-1
		var f *os.File
		if last {
			if l.cur != nil {
				f = l.cur
			} else if f, err = os.OpenFile(seg.path, os.O_RDWR, 0); err != nil {
				return fmt.Errorf("metalog: file: %w", err)
			}
			l.cur, l.curSeg = f, seg
		} else if f, err = os.Open(seg.path); err != nil {
			return fmt.Errorf("metalog: file: %w", err)
		}
		n, size, err := l.recoverSegment(f, seg, last)
		if !last {
			f.Close()
		}
		if err != nil {
			return err
		}
		next += n
		if last {
			l.curPos = size
			l.mu.activeSize = size
		}
	}
	l.mu.segs = segs
	l.mu.start = segs[0].base
	l.mu.next = next
	l.mu.durable = next
	return nil
}

// recoverSegment scans one segment file, indexes it and returns how many
// entries it holds and its size after recovery. In the last segment a bad
// frame that starts in the last fileLogMaxUnsynced bytes is a torn tail,
// truncated away; any other bad frame is corruption.
func (l *File) recoverSegment(f *os.File, seg *fileLogSegment, last bool) (n int64, size int64, err error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, 0, fmt.Errorf("metalog: file: %w", err)
	}
	size = fi.Size()
	fr := newFileLogFrameReader(f, 0, size)
	for {
		pos := fr.pos
		_, err := fr.next()
		if err == nil {
			seg.addIndex(seg.base+n, pos)
			n++
			continue
		}
		if err == io.EOF {
			return n, size, nil
		}
		var bad *fileLogFrameError
		if !errors.As(err, &bad) {
			return 0, 0, fmt.Errorf("metalog: file: reading %s: %w", seg.path, err)
		}
		if !last || size-bad.pos > fileLogMaxUnsynced {
			return 0, 0, fmt.Errorf("%w: %s at byte %d of %d: %s", ErrCorrupt, seg.path, bad.pos, size, bad.reason)
		}
		l.log.Warn("metalog: file: truncating a torn tail",
			zap.String("file", seg.path), zap.Int64("pos", bad.pos), zap.Int64("size", size), zap.String("why", bad.reason))
		if err := f.Truncate(bad.pos); err != nil {
			return 0, 0, fmt.Errorf("metalog: file: truncating a torn tail: %w", err)
		}
		if !l.noSync {
			if err := f.Sync(); err != nil {
				return 0, 0, fmt.Errorf("metalog: file: truncating a torn tail: %w", err)
			}
		}
		return n, bad.pos, nil
	}
}
