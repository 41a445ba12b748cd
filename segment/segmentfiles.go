package segment

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"sort"

	"github.com/diskless-go/diskless/kbatch"
)

// Transaction index entries (docs/formats.md, "Transaction index"; Kafka's AbortedTxn).
// They are part of the format.
const (
	// txnIndexEntrySize is the size of a .txnindex entry: version int16,
	// producerId, firstOffset, lastOffset, lastStableOffset int64.
	txnIndexEntrySize = 34
	// txnIndexLastOffsetOffset is where an entry's lastOffset is.
	txnIndexLastOffsetOffset = 18
)

// SegmentFiles holds copies of the files of one closed segment of a Log:
// what a tiered-storage offloader uploads as a remote segment (Kafka's
// LogSegmentData, less the producer snapshot and the leader-epoch index,
// which ProducerSnapshotFromBatches and LeaderEpochsOfBatches build). The
// slices are the caller's.
type SegmentFiles struct {
	// BaseOffset names the segment.
	BaseOffset int64
	// EndOffset is the next segment's base offset minus 1: the last offset
	// the segment covers, as Kafka's RemoteLogSegmentMetadata.endOffset
	// (its last batch may end before it, after compaction).
	EndOffset int64
	// MaxTimestamp is the greatest batch max timestamp, or NoTimestamp
	// when no batch has one.
	MaxTimestamp int64
	// Log is the .log: whole batches, each checked (framing, CRC, offsets
	// within the segment).
	Log []byte
	// Index and TimeIndex are the .index and .timeindex, exactly their
	// entries (what Kafka trims them to when the segment stops being
	// active). When the Log did not write them itself (they were loaded
	// from disk), they are rebuilt from Log with the append rule, so they
	// always match it.
	Index     []byte
	TimeIndex []byte
	// TxnIndex is the .txnindex that Kafka wrote for the segment, its
	// whole entries up to the first past EndOffset; nil when there is
	// none (a Log writes none).
	TxnIndex []byte
}

// SegmentFiles returns the files of the closed (not active) segment whose
// base offset is base. It is safe while the log appends, rolls, compacts
// and deletes segments: it holds the segment, so a segment deleted or
// replaced by a cleaned one after the call started is read as it was. A
// base offset that names no segment is ErrNoSuchSegment (it may have been
// deleted or cleaned into another); the active segment is
// ErrActiveSegment (Roll first). A .log that does not check is
// ErrCorruptSegment.
func (l *Log) SegmentFiles(ctx context.Context, base int64) (SegmentFiles, error) {
	if err := ctx.Err(); err != nil {
		return SegmentFiles{}, err
	}
	l.mu.RLock()
	if l.mu.closed {
		l.mu.RUnlock()
		return SegmentFiles{}, ErrClosed
	}
	segs := l.mu.segs
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base >= base })
	switch {
	case i == len(segs) || segs[i].base != base:
		l.mu.RUnlock()
		return SegmentFiles{}, fmt.Errorf("%w: base offset %d", ErrNoSuchSegment, base)
	case i == len(segs)-1:
		l.mu.RUnlock()
		return SegmentFiles{}, fmt.Errorf("%w: base offset %d", ErrActiveSegment, base)
	}
	s := segs[i]
	v := s.view()
	out := SegmentFiles{BaseOffset: base, EndOffset: segs[i+1].base - 1}
	s.acquire()
	l.mu.RUnlock()
	defer s.release()

	var err error
	if out.Log, err = readWhole(s.file, v.size); err != nil {
		return SegmentFiles{}, err
	}
	rebuild := !v.trusted || s.suspect.Load()
	maxTs, off, tim, err := indexLog(out.Log, base, out.EndOffset+1, l.cfg.indexInterval, rebuild)
	if err != nil {
		return SegmentFiles{}, fmt.Errorf("%w: %s: %v", ErrCorruptSegment, s.file.Name(), err)
	}
	out.MaxTimestamp = maxTs
	if rebuild {
		out.Index, out.TimeIndex = off, tim
	} else {
		if out.Index, err = v.off.bytes(); err != nil {
			return SegmentFiles{}, err
		}
		if out.TimeIndex, err = v.tim.bytes(); err != nil {
			return SegmentFiles{}, err
		}
	}
	if s.txn != nil {
		fi, err := s.txn.Stat()
		if err != nil {
			return SegmentFiles{}, err
		}
		b, err := readWhole(s.txn, fi.Size())
		if err != nil {
			return SegmentFiles{}, err
		}
		out.TxnIndex = trimTxnIndex(b, out.EndOffset)
	}
	return out, nil
}

// readWhole reads the first size bytes of f.
func readWhole(f *os.File, size int64) ([]byte, error) {
	if size > math.MaxInt32 {
		return nil, fmt.Errorf("%w: %s: %d bytes exceed a segment's int32 positions", ErrCorruptSegment, f.Name(), size)
	}
	b := make([]byte, size)
	if size > 0 {
		if _, err := readFullAt(f, b, 0); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// bytes returns a copy of the view's entries.
func (v *indexView) bytes() ([]byte, error) {
	size := v.n * v.entrySize
	if len(v.mem) >= size {
		return append([]byte(nil), v.mem[:size]...), nil
	}
	b := make([]byte, size)
	if size > 0 {
		if _, err := readFullAt(v.f, b, 0); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// indexLog checks the batches of a closed segment's .log (whole batches
// with valid CRCs, offsets ascending within [base, next), positions and
// relative offsets within int32) and returns its greatest batch max
// timestamp; with rebuild, also the offset and time indexes that Kafka's
// rule gives it (LogSegment.recover: an entry for a batch when more than
// interval bytes precede it since the last entry, and a last time index
// entry with the greatest timestamp).
func indexLog(data []byte, base, next, interval int64, rebuild bool) (maxTs int64, off, tim []byte, err error) {
	maxTs, maxTsOffset, timLastTs := int64(kbatch.NoTimestamp), base, int64(kbatch.NoTimestamp)
	var lastIndexPos int64
	prevNext := base
	it := kbatch.NewBatchIter(data)
	for it.Next() {
		b := it.Batch()
		pos := int64(it.Pos())
		if err := b.CheckCRC(); err != nil {
			return 0, nil, nil, fmt.Errorf("batch at position %d: %w", pos, err)
		}
		first, delta := b.BaseOffset(), b.LastOffsetDelta()
		if delta < 0 || first < prevNext || first > math.MaxInt64-1-int64(delta) {
			return 0, nil, nil, fmt.Errorf("batch at position %d has offsets %d + %d after %d", pos, first, delta, prevNext)
		}
		last := first + int64(delta)
		if last >= next || last-base > math.MaxInt32 || pos+int64(len(b)) > math.MaxInt32 {
			return 0, nil, nil, fmt.Errorf("batch at position %d (offsets %d to %d) is out of the segment [%d, %d)", pos, first, last, base, next)
		}
		if ts := b.MaxTimestamp(); ts > maxTs {
			maxTs, maxTsOffset = ts, last
		}
		if rebuild && pos-lastIndexPos > interval {
			off = encodeOffsetEntry(off, relOffset(last, base), int32(pos))
			if maxTs > timLastTs {
				tim = encodeTimeEntry(tim, maxTs, relOffset(maxTsOffset, base))
				timLastTs = maxTs
			}
			lastIndexPos = pos
		}
		prevNext = last + 1
	}
	if err := it.Err(); err != nil {
		return 0, nil, nil, err
	}
	if it.Partial() {
		return 0, nil, nil, fmt.Errorf("partial batch at position %d", it.Pos())
	}
	if rebuild && maxTs > timLastTs {
		tim = encodeTimeEntry(tim, maxTs, relOffset(maxTsOffset, base))
	}
	if off == nil {
		off = []byte{}
	}
	if tim == nil {
		tim = []byte{}
	}
	return maxTs, off, tim, nil
}

// trimTxnIndex returns the whole entries of a .txnindex up to the first
// that is not version 0 (Kafka refuses those) or whose lastOffset is past
// endOffset (recovery truncated the .log under it; Kafka truncates the
// .txnindex too).
func trimTxnIndex(b []byte, endOffset int64) []byte {
	n := 0
	for n+txnIndexEntrySize <= len(b) {
		e := b[n:]
		if e[0] != 0 || int64(binary.BigEndian.Uint64(e[txnIndexLastOffsetOffset:])) > endOffset {
			break
		}
		n += txnIndexEntrySize
	}
	return b[:n]
}
