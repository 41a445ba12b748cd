package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

// The header fields a batchScanner reads from a .log file (the same
// offsets as package record's; part of Kafka's format), and the smallest
// length field a batch of any magic may have.
const (
	baseOffsetOffset = 0
	lengthOffset     = 8
	magicOffset      = 16
	minBatchLength   = 14
)

// Window sizes of a batchScanner: how much it reads at once.
const (
	// lookupWindow serves the short scan after an index lookup: the
	// batches within index.interval.bytes of the entry.
	lookupWindow = 8 << 10
	// sequentialWindow serves scans that read every batch whole:
	// recovery and cleaning.
	sequentialWindow = 1 << 20
)

// fileBatch is what a scan knows of a batch in a .log file: where it is
// and its header.
type fileBatch struct {
	pos  int64
	size int64
	hdr  [kbatch.HeaderSize]byte
}

// header returns a Batch view of the header alone: its accessors of header
// fields work; RecordsData and Size do not.
func (b *fileBatch) header() kbatch.Batch { return kbatch.Batch(b.hdr[:]) }

func (b *fileBatch) baseOffset() int64 {
	return int64(binary.BigEndian.Uint64(b.hdr[baseOffsetOffset:]))
}

// lastOffset returns the batch's last offset; a negative lastOffsetDelta
// (which checkedNext rejects) reads as the base offset.
func (b *fileBatch) lastOffset() int64 {
	return b.baseOffset() + int64(max(b.header().LastOffsetDelta(), 0))
}

// batchScanner walks the batches of a .log file between two positions with
// Kafka's framing rules (FileLogInputStream), reading the file through a
// window so that consecutive small batches cost one system call. Only
// RecordBatch v2 is accepted: a batch of another magic, or shorter than
// the v2 header, is corrupt. A batch cut short by the end of the range is
// not an error: Partial reports it, as after a crash mid-append.
//
// Errors are a CORRUPT_MESSAGE *Error for framing, or the file's read
// error. A batchScanner is not safe for concurrent use.
type batchScanner struct {
	f      *os.File
	end    int64
	next   int64
	win    []byte
	winPos int64
	winCap int
	big    []byte

	cur     fileBatch
	err     error
	partial bool
}

func newBatchScanner(f *os.File, start, end int64, window int) *batchScanner {
	return &batchScanner{f: f, next: start, end: end, winCap: window}
}

// reset restarts the scanner at start, keeping its buffers.
func (sc *batchScanner) reset(start int64) {
	sc.next, sc.err, sc.partial, sc.cur = start, nil, false, fileBatch{}
}

// window returns n bytes of the file at pos, from the window when it
// holds them, else after reading a new window there.
func (sc *batchScanner) window(pos int64, n int) ([]byte, error) {
	if pos >= sc.winPos && pos+int64(n) <= sc.winPos+int64(len(sc.win)) {
		off := pos - sc.winPos
		return sc.win[off : off+int64(n)], nil
	}
	size := int(min(int64(sc.winCap), sc.end-pos))
	size = max(size, n)
	if cap(sc.win) < size {
		sc.win = make([]byte, size)
	}
	sc.win = sc.win[:size]
	if _, err := readFullAt(sc.f, sc.win, pos); err != nil {
		sc.win, sc.winPos = sc.win[:0], 0
		return nil, err
	}
	sc.winPos = pos
	return sc.win[:n], nil
}

// Next advances to the next whole batch and reports whether there is one.
func (sc *batchScanner) Next() bool {
	if sc.err != nil || sc.partial {
		return false
	}
	pos := sc.next
	rem := sc.end - pos
	if rem <= 0 {
		return false
	}
	if rem < kbatch.LogOverhead {
		sc.partial = true
		return false
	}
	h, err := sc.window(pos, int(min(rem, kbatch.HeaderSize)))
	if err != nil {
		sc.err = err
		return false
	}
	length := int32(binary.BigEndian.Uint32(h[lengthOffset:]))
	if length < minBatchLength {
		sc.err = kafkaerr.New(kafkaerr.CorruptMessage, "batch at position %d: length %d is less than the minimum %d", pos, length, minBatchLength)
		return false
	}
	size := int64(length) + kbatch.LogOverhead
	if size > rem {
		sc.partial = true
		return false
	}
	if magic := int8(h[magicOffset]); magic != kbatch.Magic {
		sc.err = kafkaerr.New(kafkaerr.CorruptMessage, "batch at position %d: magic %d; a log holds only magic 2", pos, magic)
		return false
	}
	if size < kbatch.HeaderSize {
		sc.err = kafkaerr.New(kafkaerr.CorruptMessage, "batch at position %d: %d bytes are shorter than the %d-byte header", pos, size, kbatch.HeaderSize)
		return false
	}
	copy(sc.cur.hdr[:], h[:kbatch.HeaderSize])
	sc.cur.pos, sc.cur.size = pos, size
	sc.next = pos + size
	return true
}

// Batch returns the current batch's position and header.
func (sc *batchScanner) Batch() *fileBatch { return &sc.cur }

// Bytes returns the current batch whole. The slice is the scanner's and
// valid until the next call.
func (sc *batchScanner) Bytes() ([]byte, error) {
	b := &sc.cur
	if b.size <= int64(sc.winCap) {
		return sc.window(b.pos, int(b.size))
	}
	if int64(cap(sc.big)) < b.size {
		sc.big = make([]byte, b.size)
	}
	sc.big = sc.big[:b.size]
	if _, err := readFullAt(sc.f, sc.big, b.pos); err != nil {
		return nil, err
	}
	return sc.big, nil
}

// Err returns what ended the scan: nil at the end of the range or before a
// partial batch.
func (sc *batchScanner) Err() error { return sc.err }

// Partial reports whether the scan ended at a batch cut short by the end
// of the range.
func (sc *batchScanner) Partial() bool { return sc.partial }

// End returns the position after the last whole batch the scan returned,
// or where it started: the end of the valid prefix when Next returns false.
func (sc *batchScanner) End() int64 { return sc.next }

// isCorrupt reports whether err is a framing error (the file's content)
// rather than an I/O error.
func isCorrupt(err error) bool {
	var e *kafkaerr.Error
	return errors.As(err, &e)
}

// readFullAt reads len(b) bytes at off; a file shorter than that is an
// error (io.ErrUnexpectedEOF).
func readFullAt(f *os.File, b []byte, off int64) (int, error) {
	n, err := f.ReadAt(b, off)
	if n == len(b) {
		return n, nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return n, fmt.Errorf("segment: reading %d bytes at %d of %s: %w", len(b), off, f.Name(), err)
}
