package segment

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"

	"github.com/diskless-go/diskless/kbatch"
)

// Index entry sizes (docs/formats.md, "Offset index", "Time index"). They are part of the format.
const (
	// offsetIndexEntrySize is the size of a .index entry: relative offset
	// int32, position int32.
	offsetIndexEntrySize = 8
	// timeIndexEntrySize is the size of a .timeindex entry: timestamp
	// int64, relative offset int32.
	timeIndexEntrySize = 12
)

// indexFile is what the offset and time indexes share: the open file and
// its entries. The file holds exactly n entries (a Log never preallocates),
// so it is always what Kafka would trim it to on roll or close, or, for the
// active segment before its last time index entry, a prefix of that.
//
// n and mem are published under the Log's mu; the other fields belong to
// the writer.
type indexFile struct {
	f         *os.File
	entrySize int
	// n is the number of entries.
	n int
	// mem holds the file's bytes while the segment is active, so that
	// lookups in the segment that consumers tail cost no system call;
	// nil once the segment is inactive, when lookups read the file.
	mem []byte
}

// write appends an entry to the file (not yet published: see publish).
func (x *indexFile) write(entry []byte) error {
	_, err := x.f.WriteAt(entry, int64(x.n)*int64(x.entrySize))
	return err
}

// publish counts an entry written with write; the caller holds the Log's mu.
func (x *indexFile) publish(entry []byte, keepMem bool) {
	x.n++
	if keepMem {
		x.mem = append(x.mem, entry...)
	}
}

// replace writes all of b as the file's content and publishes it; the
// caller holds the Log's mu or owns the segment alone.
func (x *indexFile) replace(b []byte, keepMem bool) error {
	if _, err := x.f.WriteAt(b, 0); err != nil {
		return err
	}
	if err := x.f.Truncate(int64(len(b))); err != nil {
		return err
	}
	x.n = len(b) / x.entrySize
	x.mem = nil
	if keepMem {
		x.mem = b
	}
	return nil
}

func (x *indexFile) view() indexView {
	return indexView{f: x.f, mem: x.mem, n: x.n, entrySize: x.entrySize}
}

// indexView is a reader's snapshot of an index: entries [0, n) are on the
// file (and in mem, when it is not nil) and never change.
type indexView struct {
	f         *os.File
	mem       []byte
	n         int
	entrySize int
}

// entry returns entry i, read into buf when it is not in memory.
func (v *indexView) entry(i int, buf []byte) ([]byte, error) {
	if off := i * v.entrySize; len(v.mem) >= off+v.entrySize {
		return v.mem[off : off+v.entrySize], nil
	}
	b := buf[:v.entrySize]
	if _, err := v.f.ReadAt(b, int64(i)*int64(v.entrySize)); err != nil {
		return nil, fmt.Errorf("segment: reading index entry %d: %w", i, err)
	}
	return b, nil
}

// offsetPosition is an offset index entry: an absolute offset and the
// position in the .log where the append that ends with it starts.
type offsetPosition struct {
	offset   int64
	position int64
	// found is false for the lookup result "no entry": the segment's base
	// offset at position 0.
	found bool
}

func encodeOffsetEntry(dst []byte, rel int32, pos int32) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(rel))
	return binary.BigEndian.AppendUint32(dst, uint32(pos))
}

func decodeOffsetEntry(b []byte, base int64) offsetPosition {
	return offsetPosition{
		offset:   base + int64(int32(binary.BigEndian.Uint32(b))),
		position: int64(int32(binary.BigEndian.Uint32(b[4:]))),
		found:    true,
	}
}

// lookupOffset returns the entry with the largest offset <= target, or the
// base offset at position 0 when there is none (Kafka's OffsetIndex.lookup).
// A corrupt index gives some entry, never a panic: callers check where it
// lands.
func (v *indexView) lookupOffset(base, target int64) (offsetPosition, error) {
	return lookupLast(v, offsetPosition{offset: base},
		func(b []byte) offsetPosition { return decodeOffsetEntry(b, base) },
		func(e offsetPosition) bool { return e.offset <= target })
}

// lookupLast binary-searches v's entries, decoded by decode, for the last
// one that is atMost the target (the entries that are come first), and
// returns none when there is none. A corrupt index gives some entry,
// never a panic.
func lookupLast[E any](v *indexView, none E, decode func([]byte) E, atMost func(E) bool) (E, error) {
	var buf [timeIndexEntrySize]byte
	res := none
	lo, hi := 0, v.n-1
	for lo <= hi {
		mid := int(uint(lo+hi) >> 1)
		b, err := v.entry(mid, buf[:])
		if err != nil {
			return res, err
		}
		if e := decode(b); atMost(e) {
			res, lo = e, mid+1
		} else {
			hi = mid - 1
		}
	}
	return res, nil
}

// timestampOffset is a time index entry: the greatest timestamp of the
// segment up to and including an offset.
type timestampOffset struct {
	timestamp int64
	offset    int64
	// found is false for the lookup result "no entry": (NoTimestamp,
	// the segment's base offset).
	found bool
}

func encodeTimeEntry(dst []byte, ts int64, rel int32) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(ts))
	return binary.BigEndian.AppendUint32(dst, uint32(rel))
}

func decodeTimeEntry(b []byte, base int64) timestampOffset {
	return timestampOffset{
		timestamp: int64(binary.BigEndian.Uint64(b)),
		offset:    base + int64(int32(binary.BigEndian.Uint32(b[8:]))),
		found:     true,
	}
}

// lookupTime returns the entry with the largest timestamp <= target, or
// (NoTimestamp, base) when there is none (Kafka's TimeIndex.lookup).
func (v *indexView) lookupTime(base, target int64) (timestampOffset, error) {
	return lookupLast(v, timestampOffset{timestamp: kbatch.NoTimestamp, offset: base},
		func(b []byte) timestampOffset { return decodeTimeEntry(b, base) },
		func(e timestampOffset) bool { return e.timestamp <= target })
}

// checkOffsetIndex checks the entries of a whole .index file: a whole
// number of entries, offsets strictly increasing and not below base, and
// positions strictly increasing within the log's size. It returns the last
// entry (found false when there is none).
func checkOffsetIndex(b []byte, base, logSize int64) (offsetPosition, error) {
	last := offsetPosition{offset: base}
	if len(b)%offsetIndexEntrySize != 0 {
		return last, fmt.Errorf("offset index of %d bytes is not a whole number of %d-byte entries", len(b), offsetIndexEntrySize)
	}
	for i := 0; i < len(b); i += offsetIndexEntrySize {
		e := decodeOffsetEntry(b[i:], base)
		switch {
		case e.offset < base:
			return last, fmt.Errorf("offset index entry %d: offset %d is below the base offset %d", i/offsetIndexEntrySize, e.offset, base)
		case last.found && e.offset <= last.offset:
			return last, fmt.Errorf("offset index entry %d: offset %d does not follow %d", i/offsetIndexEntrySize, e.offset, last.offset)
		case e.position < 0 || e.position >= logSize:
			return last, fmt.Errorf("offset index entry %d: position %d is outside the log's %d bytes", i/offsetIndexEntrySize, e.position, logSize)
		case last.found && e.position <= last.position:
			return last, fmt.Errorf("offset index entry %d: position %d does not follow %d", i/offsetIndexEntrySize, e.position, last.position)
		}
		last = e
	}
	return last, nil
}

// checkTimeIndex checks the entries of a whole .timeindex file: a whole
// number of entries, timestamps and offsets never decreasing, offsets
// within [base, maxOffset]. It returns the last entry, or (NoTimestamp,
// base) when there is none.
func checkTimeIndex(b []byte, base, maxOffset int64) (timestampOffset, error) {
	last := timestampOffset{timestamp: kbatch.NoTimestamp, offset: base}
	if len(b)%timeIndexEntrySize != 0 {
		return last, fmt.Errorf("time index of %d bytes is not a whole number of %d-byte entries", len(b), timeIndexEntrySize)
	}
	for i := 0; i < len(b); i += timeIndexEntrySize {
		e := decodeTimeEntry(b[i:], base)
		switch {
		case e.offset < base || e.offset > maxOffset:
			return last, fmt.Errorf("time index entry %d: offset %d is outside [%d, %d]", i/timeIndexEntrySize, e.offset, base, maxOffset)
		case i > 0 && (e.timestamp < last.timestamp || e.offset < last.offset):
			return last, fmt.Errorf("time index entry %d: (%d, %d) goes back from (%d, %d)", i/timeIndexEntrySize, e.timestamp, e.offset, last.timestamp, last.offset)
		}
		last = e
	}
	return last, nil
}

// relOffset returns offset - base as an index's int32 relative offset; the
// roll rules keep it in range.
func relOffset(offset, base int64) int32 {
	d := offset - base
	if d < 0 || d > math.MaxInt32 {
		panic(fmt.Sprintf("segment: relative offset %d out of range", d)) // the roll rules prevent it
	}
	return int32(d)
}

// LookupOffsetIndex looks target up in the bytes of an offset index (a
// .index file of the segment with base offset baseOffset, such as a remote
// segment's) as Kafka's OffsetIndex.lookup does: it returns the entry with
// the largest offset at or below target, or (baseOffset, 0) when there is
// none. The batch holding target is then the first batch, scanning the
// .log from position, whose last offset is at or after target.
//
// Bytes after the last whole 8-byte entry are ignored. The entries must
// ascend, as every index Kafka or a Log writes does; on other bytes the
// lookup returns some entry, or (baseOffset, 0), and never panics: the
// caller checks that position is within the .log.
func LookupOffsetIndex(index []byte, baseOffset, target int64) (offset int64, position int64) {
	res := offsetPosition{offset: baseOffset}
	lo, hi := 0, len(index)/offsetIndexEntrySize-1
	for lo <= hi {
		mid := int(uint(lo+hi) >> 1)
		if e := decodeOffsetEntry(index[mid*offsetIndexEntrySize:], baseOffset); e.offset <= target {
			res, lo = e, mid+1
		} else {
			hi = mid - 1
		}
	}
	return res.offset, res.position
}

// LookupTimeIndex looks ts up in the bytes of a time index (a .timeindex
// file of the segment with base offset baseOffset) as Kafka's
// TimeIndex.lookup does: it returns the entry with the largest timestamp
// at or below ts, or (NoTimestamp, baseOffset, false) when there is none.
// Every record up to offset has a timestamp at or below the entry's, so
// the first record whose timestamp is at least ts is at or after offset,
// if the segment has one (when timestamp == ts, it is in the batch that
// holds offset). LogSegment.findOffsetByTimestamp goes on as a
// reader of a remote segment should: LookupOffsetIndex of max(offset, the
// first offset wanted), then a scan of the .log from that position for
// the first record whose timestamp is at least ts and whose offset is at
// least the first wanted.
//
// Bytes after the last whole 12-byte entry are ignored; on entries that
// do not ascend the lookup returns some entry and never panics.
func LookupTimeIndex(timeindex []byte, baseOffset, ts int64) (timestamp, offset int64, found bool) {
	res := timestampOffset{timestamp: kbatch.NoTimestamp, offset: baseOffset}
	lo, hi := 0, len(timeindex)/timeIndexEntrySize-1
	for lo <= hi {
		mid := int(uint(lo+hi) >> 1)
		if e := decodeTimeEntry(timeindex[mid*timeIndexEntrySize:], baseOffset); e.timestamp <= ts {
			res, lo = e, mid+1
		} else {
			hi = mid - 1
		}
	}
	return res.timestamp, res.offset, res.found
}
