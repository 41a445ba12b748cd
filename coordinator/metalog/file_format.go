package metalog

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
)

// The File format (see the package doc). The constants marked "part of
// the format" must not change without a new format version.
const (
	// fileLogHeaderLen is the bytes before a frame's payload: its length
	// and its CRC. Part of the format.
	fileLogHeaderLen = 8
	// fileLogMaxUnsynced bounds the bytes that the writer has written to a
	// segment and not yet fsynced: it writes at most this much between
	// fsyncs. Recovery relies on it to tell a torn tail from corruption.
	// Part of the format.
	fileLogMaxUnsynced = 1 << 20
	// fileLogSuffix ends every segment file name; the name before it is
	// the segment's base offset in 20 decimal digits. Part of the format.
	fileLogSuffix = ".log"

	// fileLogIndexEvery is the spacing in bytes of the in-memory sparse
	// index of each segment (offset to file position).
	fileLogIndexEvery = 64 << 10
	// fileLogReadBuffer is the buffer size of a segment reader.
	fileLogReadBuffer = 64 << 10
)

// fileLogCRC is the CRC32C (Castagnoli) table of frame checksums.
var fileLogCRC = crc32.MakeTable(crc32.Castagnoli)

// fileLogChecksum returns a frame's checksum: CRC32C over the 4 length
// bytes, then the payload. Part of the format.
func fileLogChecksum(lenBytes, payload []byte) uint32 {
	return crc32.Update(crc32.Update(0, fileLogCRC, lenBytes), fileLogCRC, payload)
}

// appendFileLogFrame appends entry's frame to dst.
func appendFileLogFrame(dst, entry []byte) []byte {
	var h [fileLogHeaderLen]byte
	binary.BigEndian.PutUint32(h[0:4], uint32(len(entry)))
	binary.BigEndian.PutUint32(h[4:8], fileLogChecksum(h[0:4], entry))
	return append(append(dst, h[:]...), entry...)
}

// fileLogSegmentName returns the file name of the segment whose first
// entry has offset base.
func fileLogSegmentName(base int64) string { return fmt.Sprintf("%020d%s", base, fileLogSuffix) }

// parseFileLogSegmentName returns the base offset in a segment file name.
func parseFileLogSegmentName(name string) (int64, bool) {
	if len(name) != 20+len(fileLogSuffix) || name[20:] != fileLogSuffix {
		return 0, false
	}
	for _, c := range name[:20] {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	base, err := strconv.ParseInt(name[:20], 10, 64)
	return base, err == nil
}

// fileLogFrameError is a frame that is not valid.
type fileLogFrameError struct {
	pos    int64 // where the frame starts in its file
	reason string
}

func (e *fileLogFrameError) Error() string {
	return fmt.Sprintf("bad frame at byte %d: %s", e.pos, e.reason)
}

// fileLogFrameReader reads the frames of a segment file in order.
type fileLogFrameReader struct {
	r    *bufio.Reader
	pos  int64 // the file position of the next frame
	size int64 // the file's size
	hdr  [fileLogHeaderLen]byte
	buf  []byte
}

func newFileLogFrameReader(f io.ReaderAt, pos, size int64) *fileLogFrameReader {
	bufSize := int(min(max(size-pos, 16), fileLogReadBuffer))
	return &fileLogFrameReader{r: bufio.NewReaderSize(io.NewSectionReader(f, pos, size-pos), bufSize), pos: pos, size: size}
}

// next returns the next frame's payload, valid until the next call. It
// returns io.EOF at the end of the file, a *fileLogFrameError for a frame
// that is not valid (cut short, running past the end of the file, or with
// a wrong checksum), and other errors for I/O errors.
func (fr *fileLogFrameReader) next() ([]byte, error) {
	left := fr.size - fr.pos
	if left == 0 {
		return nil, io.EOF
	}
	if left < fileLogHeaderLen {
		return nil, &fileLogFrameError{fr.pos, fmt.Sprintf("%d bytes left, too few for a frame header", left)}
	}
	if _, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
		return nil, fr.readErr(err)
	}
	n := int64(binary.BigEndian.Uint32(fr.hdr[0:4]))
	if n > left-fileLogHeaderLen {
		return nil, &fileLogFrameError{fr.pos, fmt.Sprintf("length %d runs past the end of the file (%d bytes left)", n, left-fileLogHeaderLen)}
	}
	if int64(cap(fr.buf)) < n {
		fr.buf = make([]byte, n)
	}
	payload := fr.buf[:n]
	if _, err := io.ReadFull(fr.r, payload); err != nil {
		return nil, fr.readErr(err)
	}
	if sum := fileLogChecksum(fr.hdr[0:4], payload); sum != binary.BigEndian.Uint32(fr.hdr[4:8]) {
		return nil, &fileLogFrameError{fr.pos, fmt.Sprintf("checksum %08x, the frame says %08x", sum, binary.BigEndian.Uint32(fr.hdr[4:8]))}
	}
	fr.pos += fileLogHeaderLen + n
	return payload, nil
}

// readErr turns a short read (the file shrank under the reader) into a bad
// frame.
func (fr *fileLogFrameReader) readErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &fileLogFrameError{fr.pos, "the file ends inside the frame"}
	}
	return err
}
