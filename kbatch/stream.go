package kbatch

import (
	"io"
	"sync"
)

// This file holds the streaming read of a compressed batch's records for
// Validate: the records come out of the decompressor a window at a time
// and are checked as they pass, none of them held (Kafka's LogValidator
// streams them too). The bound on the decompressed size
// (ValidateOptions.MaxUncompressedBytes) holds over the whole stream.

// streamReadBuffer is the window read at a time from a streaming decoder
// (gzip, zstd); snappy and lz4 give theirs a block at a time.
const streamReadBuffer = 32 << 10

// recordStream reads the records of a compressed batch as the codec's
// decoder produces them, a window (buf) at a time.
type recordStream struct {
	codec Codec
	limit int // the bound on the decompressed bytes
	total int // the decompressed bytes produced so far
	buf   []byte
	off   int // the next byte of buf to read
	// fill returns the next window, of at most left bytes (it may reuse
	// buf's array): io.EOF at the end, errPayloadTooLarge (wrapped) if
	// more than left would come, or the decoder's error.
	fill  func(left int) ([]byte, error)
	err0  error // the error fill returned, once it did
	close func()
	// scratch holds the bytes of a varint that straddles two windows.
	scratch [10]byte
}

// streamBuffers are the windows of recordStream: streamReadBuffer bytes
// at least (a block decoder grows one to its largest block; a streaming
// decoder reads streamReadBuffer at a time whatever its capacity).
var streamBuffers = sync.Pool{New: func() any { b := make([]byte, streamReadBuffer); return &b }}

// windowReader reads a streaming decoder a window at a time.
type windowReader struct {
	r   io.Reader
	err error // what ended the last window early, for the next one
}

// read fills dst from r: up to its capacity, or to left+1 bytes (more
// than left is errPayloadTooLarge). An error that ends a window early
// comes with the next one, so that the bytes before it are read first.
func (w *windowReader) read(dst []byte, left int) ([]byte, error) {
	if w.err != nil {
		return dst[:0], w.err
	}
	dst = dst[:min(cap(dst), left+1)]
	n := 0
	for n < len(dst) {
		m, err := w.r.Read(dst[n:])
		n += m
		if err != nil {
			w.err = err
			break
		}
		if m == 0 { // a reader that returns nothing and no error
			w.err = io.ErrNoProgress
			break
		}
	}
	if n > left {
		return dst[:0], errPayloadTooLarge
	}
	if n == 0 && w.err != nil {
		return dst[:0], w.err
	}
	return dst[:n], nil
}

// openRecordStream starts decompressing src, the records section of a
// batch compressed with c (a valid codec other than CodecNone), with at
// most limit bytes in all. Its errors are those of appendDecompressed.
// The caller closes the stream.
func openRecordStream(src []byte, c Codec, limit int) (*recordStream, error) {
	s := &recordStream{codec: c, limit: limit}
	// A streaming decoder is read into a pooled window.
	reader := func(r io.Reader) {
		win := streamBuffers.Get().(*[]byte)
		s.buf = (*win)[:0]
		done := s.close
		s.close = func() {
			streamBuffers.Put(win)
			if done != nil {
				done()
			}
		}
		wr := &windowReader{r: r}
		s.fill = func(left int) ([]byte, error) { return wr.read((*win)[:0:streamReadBuffer], left) }
	}
	// A block decoder decodes into a pooled buffer, grown to the largest
	// block (kept for reuse up to maxPooledBuffer).
	blocks := func(next func(dst []byte, start, limit int) ([]byte, error)) {
		win := streamBuffers.Get().(*[]byte)
		s.buf = (*win)[:0]
		s.close = func() { streamBuffers.Put(win) }
		s.fill = func(left int) ([]byte, error) {
			out, err := next((*win)[:0], 0, left)
			if cap(out) > cap(*win) && cap(out) <= maxPooledBuffer {
				*win = out[:0]
			}
			return out, err
		}
	}
	switch c {
	case CodecGzip:
		gr := gzipReaders.Get().(*gzipReader)
		s.close = func() {
			gr.in.Reset(nil)
			gzipReaders.Put(gr)
		}
		gr.in.Reset(src)
		if err := gr.zr.Reset(&gr.in); err != nil {
			s.close()
			return nil, decodeStreamError(CodecGzip, err)
		}
		gr.zr.Multistream(false)
		reader(&gunzipStream{gr})
	case CodecSnappy:
		chunks := newSnappyChunks(src)
		blocks(chunks.next)
	case CodecLZ4:
		chunks, err := newLZ4Chunks(src)
		if err != nil {
			return nil, err
		}
		blocks(chunks.next)
	case CodecZstd:
		zr, done, err := zstdReaderFor(src, limit)
		if err != nil {
			return nil, err
		}
		zr.in.Reset(src)
		if err := zr.d.Reset(&zr.in); err != nil {
			done()
			return nil, decodeStreamError(CodecZstd, err)
		}
		s.close = func() {
			_ = zr.d.Reset(nil) // cannot fail for a nil reader
			zr.in.Reset(nil)
			done()
		}
		reader(zr.d)
	default:
		return nil, unknownCodecError(c)
	}
	return s, nil
}

// Close releases the stream's decoder and buffers.
func (s *recordStream) Close() {
	if s.close != nil {
		s.close()
	}
}

// next makes buf the next window: false at the end of the records (or on
// an error, kept in err0).
func (s *recordStream) next() bool {
	for s.off == len(s.buf) {
		if s.err0 != nil {
			return false
		}
		buf, err := s.fill(s.limit - s.total)
		s.buf, s.off = buf, 0
		if err != nil {
			s.buf, s.err0 = s.buf[:0], err
			return false
		}
		s.total += len(s.buf)
	}
	return true
}

// failed returns the decoder's error that ended the records, or nil if
// they ended at the end of the payload.
func (s *recordStream) failed() error {
	if s.err0 == nil || s.err0 == io.EOF {
		return nil
	}
	return s.err(s.err0)
}

// readByte returns the next byte; ok false at the end of the records.
func (s *recordStream) readByte() (c byte, ok bool) {
	if s.off == len(s.buf) && !s.next() {
		return 0, false
	}
	c = s.buf[s.off]
	s.off++
	return c, true
}

// err classifies an error of the decoder (or of the bound) as
// appendDecompressed would, then as Kafka's code (decompressError).
func (s *recordStream) err(err error) error {
	if err == errPayloadTooLarge {
		err = payloadTooLarge(s.codec, s.limit)
	}
	return decompressError(s.codec, s.limit, decodeStreamError(s.codec, err))
}

// record reads the next record's fields that Validate checks into r
// (its attributes, deltas, timestamp, offset and sequence, and whether it
// has a key: r.Key is nil or empty, never the key's bytes), skipping its
// key, value and headers as they stream by, so that no record is held
// whole, however large. It refuses what decodeRecord refuses, with the
// same codes: a record is INVALID_RECORD when malformed, also when the
// records end inside it; an error of the decoder is classified as
// appendDecompressed's are.
func (s *recordStream) record(base *recordBase, r *Record) error {
	b, err := s.varint(5, nil)
	if err != nil {
		return err
	}
	bodyLen, n := readVarint(b)
	if n <= 0 {
		return invalidRecord("record length varint is truncated or too long")
	}
	if bodyLen < 0 {
		return invalidRecord("invalid record size: %d bytes declared", bodyLen)
	}
	if bodyLen == 0 {
		return invalidRecord("empty record body")
	}
	left := int(bodyLen)
	attrs, ok := s.readByte()
	if !ok {
		if err := s.failed(); err != nil {
			return err
		}
		return s.endsInside(bodyLen)
	}
	left--
	r.Attributes = int8(attrs)
	b, err = s.varint(10, &left)
	if err != nil {
		return err
	}
	tsd, m := readVarlong(b)
	if m <= 0 {
		return errRecordStructure
	}
	od, err := s.int32Field(&left)
	if err != nil {
		return err
	}
	base.place(r, tsd, od)
	kl, err := s.sized("record key", &left, bodyLen)
	if err != nil {
		return err
	}
	r.Key, r.Value = nil, nil
	if kl >= 0 {
		r.Key = skippedKey
	}
	if _, err := s.sized("record value", &left, bodyLen); err != nil {
		return err
	}
	hc, err := s.int32Field(&left)
	if err != nil {
		return err
	}
	if hc < 0 {
		return invalidRecord("invalid number of record headers %d", hc)
	}
	if int(hc) > left {
		return invalidRecord("invalid number of record headers: %d is more than the %d bytes left", hc, left)
	}
	for range hc {
		hkl, err := s.sized("header key", &left, bodyLen)
		if err != nil {
			return err
		}
		if hkl < 0 {
			return invalidRecord("invalid negative header key size %d", hkl)
		}
		if _, err := s.sized("header value", &left, bodyLen); err != nil {
			return err
		}
	}
	if left != 0 {
		return invalidRecord("invalid record size: expected to read %d bytes in record payload, but read %d", bodyLen, int(bodyLen)-left)
	}
	return nil
}

// skippedKey is Record.Key of a record read by recordStream.record that
// has a key: not nil, and not the key.
var skippedKey = []byte{}

// varint reads a varint of at most max bytes, of which at most *left
// remain in the record (left nil: the record's length, bounded by
// nothing else), and returns its bytes, as many as it has, for
// readVarint and readVarlong (which refuse one cut short).
func (s *recordStream) varint(max int, left *int) ([]byte, error) {
	if left != nil {
		max = min(max, *left)
	}
	// Within the window, the common case: its bytes there.
	if w := s.buf[s.off:]; len(w) >= max {
		n := 0
		for n < max {
			c := w[n]
			n++
			if c < 0x80 {
				break
			}
		}
		s.off += n
		if left != nil {
			*left -= n
		}
		return w[:n], nil
	}
	n := 0
	for n < max {
		c, ok := s.readByte()
		if !ok {
			if err := s.failed(); err != nil {
				return nil, err
			}
			break
		}
		s.scratch[n] = c
		n++
		if left != nil {
			*left--
		}
		if c < 0x80 {
			break
		}
	}
	return s.scratch[:n], nil
}

// int32Field reads a varint field of the record.
func (s *recordStream) int32Field(left *int) (int32, error) {
	b, err := s.varint(5, left)
	if err != nil {
		return 0, err
	}
	v, m := readVarint(b)
	if m <= 0 {
		return 0, errRecordStructure
	}
	return v, nil
}

// sized reads the length of a record's field (what: "record key", say)
// and passes over the field's bytes; a negative length (null) has none.
func (s *recordStream) sized(what string, left *int, bodyLen int32) (int32, error) {
	n, err := s.int32Field(left)
	if err != nil || n < 0 {
		return n, err
	}
	if int(n) > *left {
		return n, invalidRecord("%s of %d bytes runs past the record", what, n)
	}
	return n, s.skip(int(n), left, bodyLen)
}

// skip passes over n bytes of a record of bodyLen bytes, *left of them
// still to read.
func (s *recordStream) skip(n int, left *int, bodyLen int32) error {
	*left -= n
	for n > 0 {
		if s.off == len(s.buf) && !s.next() {
			if err := s.failed(); err != nil {
				return err
			}
			return s.endsInside(bodyLen)
		}
		k := min(n, len(s.buf)-s.off)
		s.off += k
		n -= k
	}
	return nil
}

// endsInside is the error of a record the records end inside.
func (s *recordStream) endsInside(bodyLen int32) error {
	return invalidRecord("invalid record size: %d bytes declared, the records end inside it", bodyLen)
}

// rest reads what follows the declared records and returns how many
// bytes it is.
func (s *recordStream) rest() (int, error) {
	n := 0
	for s.next() {
		n += len(s.buf) - s.off
		s.off = len(s.buf)
	}
	return n, s.failed()
}

// gunzipStream reads a gzip payload member after member as appendGunzip
// does: bytes after the last member that are not a member end it, as Java
// ignores them.
type gunzipStream struct{ r *gzipReader }

func (g *gunzipStream) Read(p []byte) (int, error) {
	for {
		n, err := g.r.zr.Read(p)
		if err != io.EOF {
			return n, err
		}
		if g.r.in.Len() == 0 || g.r.zr.Reset(&g.r.in) != nil {
			return n, io.EOF
		}
		g.r.zr.Multistream(false)
		if n > 0 {
			return n, nil
		}
	}
}
