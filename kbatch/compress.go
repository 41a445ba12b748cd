package kbatch

// This file holds the compression of a batch's records section: for each
// codec, the wire format Kafka's Java client writes (appendCompressed) and
// everything Kafka's Java reader accepts (appendDecompressed), with a bound
// on the decompressed size that holds before the memory is allocated.
// docs/formats.md, "Compression", describes the formats.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Errors from appendDecompressed. Every error it (and appendCompressed)
// returns wraps exactly one of them.
var (
	// errPayloadTruncated: the compressed stream ends early.
	errPayloadTruncated = errors.New("kbatch: compressed payload is truncated")
	// errPayloadCorrupt: anything else the decoder rejects.
	errPayloadCorrupt = errors.New("kbatch: compressed payload is corrupt")
	// errPayloadTooLarge: the payload decompresses to more than the limit.
	errPayloadTooLarge = errors.New("kbatch: decompressed payload exceeds the limit")
)

// appendCompressed appends src, compressed with codec c in the wire format
// Kafka's own Java client writes, to dst and returns the extended slice.
// CodecNone appends src unchanged. An invalid codec returns dst and an
// error wrapping errPayloadCorrupt.
func appendCompressed(dst, src []byte, c Codec) ([]byte, error) {
	switch c {
	case CodecNone:
		return append(dst, src...), nil
	case CodecGzip:
		return appendGzip(dst, src)
	case CodecSnappy:
		return appendSnappy(dst, src), nil
	case CodecLZ4:
		return appendLZ4(dst, src), nil
	case CodecZstd:
		return appendZstd(dst, src)
	}
	return dst, unknownCodecError(c)
}

// appendDecompressed appends the decompressed form of src (a batch's records
// section compressed with c) to dst and returns the extended slice. It never
// produces more than limit bytes in all: past it, it stops and returns an
// error wrapping errPayloadTooLarge, without having allocated much more than
// limit (zstd also holds the frame's window: at most the larger of 8 MiB
// and limit plus 128 KiB, see zstdMaxWindow). On error it returns dst with
// its length unchanged, possibly in a grown backing array whose spare
// capacity holds partial output.
func appendDecompressed(dst, src []byte, c Codec, limit int) ([]byte, error) {
	// Bound limit so that len(dst)+limit+1 cannot overflow.
	limit = min(max(limit, 0), math.MaxInt-1-len(dst))
	switch c {
	case CodecNone:
		if len(src) > limit {
			return dst, payloadTooLarge(c, limit)
		}
		return append(dst, src...), nil
	case CodecGzip:
		return appendGunzip(dst, src, limit)
	case CodecSnappy:
		return appendUnsnappy(dst, src, limit)
	case CodecLZ4:
		return appendUnlz4(dst, src, limit)
	case CodecZstd:
		return appendUnzstd(dst, src, limit)
	}
	return dst, unknownCodecError(c)
}

// unknownCodecError is the error for a codec Kafka does not define.
func unknownCodecError(c Codec) error {
	return fmt.Errorf("kbatch: unknown compression codec %d (Kafka defines 0 to 4): %w", int8(c), errPayloadCorrupt)
}

// payloadTooLarge is the error for a payload that decompresses past limit.
func payloadTooLarge(c Codec, limit int) error {
	return fmt.Errorf("%s: payload decompresses to more than the limit of %d bytes: %w", c, limit, errPayloadTooLarge)
}

// payloadTruncated is the error for a compressed stream that ends early;
// what says what was cut short.
func payloadTruncated(c Codec, what string) error {
	return fmt.Errorf("%s: %s: %w", c, what, errPayloadTruncated)
}

// payloadCorrupt is the error for anything else the decoder of codec c
// rejects.
func payloadCorrupt(c Codec, format string, args ...any) error {
	return fmt.Errorf("%s: %s: %w", c, fmt.Sprintf(format, args...), errPayloadCorrupt)
}

// decodeStreamError classifies an error from a streaming decoder (gzip,
// zstd): an input that ends early is truncated, anything else corrupt.
// Errors that already wrap one of the payload sentinels pass through.
func decodeStreamError(c Codec, err error) error {
	switch {
	case errors.Is(err, errPayloadTooLarge), errors.Is(err, errPayloadTruncated), errors.Is(err, errPayloadCorrupt):
		return err
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return payloadTruncated(c, "compressed data ends early")
	}
	return payloadCorrupt(c, "invalid compressed data (%v)", err)
}

// growSpare returns dst with room for at least need more bytes. It grows the
// backing array geometrically but never past a capacity of ceiling, unless
// need itself goes past it.
func growSpare(dst []byte, need, ceiling int) []byte {
	if cap(dst)-len(dst) >= need {
		return dst
	}
	newCap := min(max(2*cap(dst), 512), ceiling)
	newCap = max(newCap, len(dst)+need)
	grown := make([]byte, len(dst), newCap)
	copy(grown, dst)
	return grown
}

// readAllLimited appends everything r produces until io.EOF to dst, reading
// into dst's spare capacity and growing it geometrically. Once more than
// limit bytes have been appended (it reads at most limit+1) it stops with
// an error wrapping errPayloadTooLarge, naming codec c. Other errors from r
// are returned as they are, for the caller to classify.
func readAllLimited(dst []byte, r io.Reader, limit int, c Codec) ([]byte, error) {
	start := len(dst)
	ceiling := start + limit + 1
	for stalls := 0; ; {
		dst = growSpare(dst, 1, ceiling)
		n, err := r.Read(dst[len(dst):min(cap(dst), ceiling)])
		dst = dst[:len(dst)+n]
		if len(dst)-start > limit {
			return dst[:start], payloadTooLarge(c, limit)
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst[:start], err
		}
		if n > 0 {
			stalls = 0
		} else if stalls++; stalls >= 100 {
			return dst[:start], io.ErrNoProgress
		}
	}
}

// sliceWriter is an io.Writer that appends to a byte slice.
type sliceWriter struct{ b []byte }

// Write appends p to w.b.
func (w *sliceWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// --- gzip -------------------------------------------------------------

// gzipWriter is a pooled gzip compressor with the sliceWriter it writes to.
type gzipWriter struct {
	zw  *gzip.Writer
	out sliceWriter
}

// gzipReader is a pooled gzip decompressor with the reader it reads from.
type gzipReader struct {
	zr gzip.Reader
	in bytes.Reader
}

var (
	gzipWriters = sync.Pool{New: func() any {
		w := new(gzipWriter)
		w.zw = gzip.NewWriter(&w.out) // DefaultCompression, as GZIPOutputStream
		return w
	}}
	gzipReaders = sync.Pool{New: func() any { return new(gzipReader) }}
)

// appendGzip appends src as one RFC 1952 gzip member at the default level.
func appendGzip(dst, src []byte) ([]byte, error) {
	w := gzipWriters.Get().(*gzipWriter)
	defer gzipWriters.Put(w)
	w.out.b = dst
	w.zw.Reset(&w.out)
	_, err := w.zw.Write(src)
	if err == nil {
		err = w.zw.Close()
	}
	out := w.out.b
	w.out.b = nil // do not keep the caller's buffer alive in the pool
	if err != nil {
		// sliceWriter never fails, so neither does the compressor.
		return dst, payloadCorrupt(CodecGzip, "compressing: %v", err)
	}
	return out, nil
}

// appendGunzip appends the decompressed gzip members in src. Like Java's
// GZIPInputStream it reads concatenated members, and it ignores bytes after
// a member that do not start with a valid gzip header.
func appendGunzip(dst, src []byte, limit int) ([]byte, error) {
	r := gzipReaders.Get().(*gzipReader)
	defer func() {
		r.in.Reset(nil)
		gzipReaders.Put(r)
	}()
	start := len(dst)
	r.in.Reset(src)
	if err := r.zr.Reset(&r.in); err != nil {
		return dst, decodeStreamError(CodecGzip, err)
	}
	for {
		// One member at a time, so that what follows it can be judged
		// as Java does. bytes.Reader is an io.ByteReader, so the
		// decompressor reads no further than the member's trailer.
		r.zr.Multistream(false)
		var err error
		dst, err = readAllLimited(dst, &r.zr, limit-(len(dst)-start), CodecGzip)
		if err != nil {
			return dst[:start], decodeStreamError(CodecGzip, err)
		}
		if r.in.Len() == 0 {
			return dst, nil
		}
		if err := r.zr.Reset(&r.in); err != nil {
			return dst, nil // trailing bytes that are not a member: Java ignores them
		}
	}
}

// --- snappy -----------------------------------------------------------

// The xerial framing SnappyOutputStream writes (part of the format).
const (
	xerialHeaderLen = 16       // magic, version, min compatible version
	xerialBlockSize = 32 << 10 // uncompressed bytes per block
	// xerialMagicHead is the magic's first 4 bytes as a big-endian
	// int32: a chunk length equal to it starts a concatenated stream.
	xerialMagicHead = 0x82534E41
)

// xerialHeader is the 16-byte header: the magic, then version 1 and
// minimum compatible version 1 as int32 BE.
var xerialHeader = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}

// appendSnappy appends src in xerial framing, as Java's SnappyOutputStream
// writes it: the header, then for each 32 KiB of src an int32 BE length
// and a raw snappy block.
func appendSnappy(dst, src []byte) []byte {
	dst = append(dst, xerialHeader...)
	for len(src) > 0 {
		n := min(len(src), xerialBlockSize)
		bound := s2.MaxEncodedLen(n)
		dst = slices.Grow(dst, 4+bound)
		at := len(dst)
		// EncodeSnappy encodes in place when given the room.
		block := s2.EncodeSnappy(dst[at+4:at+4+bound], src[:n])
		dst = dst[:at+4+len(block)]
		binary.BigEndian.PutUint32(dst[at:], uint32(len(block)))
		src = src[n:]
	}
	return dst
}

// appendUnsnappy appends the decompressed form of src, which is either
// xerial framed or a single raw snappy block, as Java's SnappyInputStream
// decides: framed if src has the whole 16-byte header and starts with the
// magic. An empty src is an empty stream.
func appendUnsnappy(dst, src []byte, limit int) ([]byte, error) {
	chunks := newSnappyChunks(src)
	return appendChunks(dst, limit, chunks.next)
}

// appendChunks appends what a block decoder (snappyChunks, lz4Chunks)
// produces, block after block, to dst, which may grow by limit bytes at
// most. On error it returns dst with its length unchanged.
func appendChunks(dst []byte, limit int, next func(dst []byte, start, limit int) ([]byte, error)) ([]byte, error) {
	start := len(dst)
	for {
		out, err := next(dst, start, limit)
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst[:start], err
		}
		dst = out
	}
}

// snappyChunks decodes a snappy payload (appendUnsnappy) one block at a
// time, so that a reader of the records holds one block, not them all.
type snappyChunks struct {
	src  []byte
	p    int  // the next byte of src to read
	raw  bool // src is one raw block, not xerial framed
	done bool
}

func newSnappyChunks(src []byte) snappyChunks {
	return snappyChunks{src: src, raw: len(src) > 0 && (len(src) < xerialHeaderLen || !bytes.Equal(src[:8], xerialHeader[:8])), done: len(src) == 0}
}

// next appends the next block's bytes to dst, which may hold no more
// than start+limit bytes afterwards, and returns io.EOF past the last.
func (c *snappyChunks) next(dst []byte, start, limit int) ([]byte, error) {
	if c.done {
		return dst, io.EOF
	}
	if c.raw {
		c.done = true
		return appendSnappyBlock(dst, c.src, start, limit)
	}
	src := c.src
	for c.p < len(src) {
		p := c.p
		if len(src)-p < 4 {
			return dst, payloadTruncated(CodecSnappy, "xerial chunk length is cut short")
		}
		size := binary.BigEndian.Uint32(src[p:])
		if p == 0 || size == xerialMagicHead {
			// The stream's header, or that of a concatenated stream.
			if len(src)-p < xerialHeaderLen {
				return dst, payloadTruncated(CodecSnappy, "xerial header is cut short")
			}
			h := src[p : p+xerialHeaderLen]
			if !bytes.Equal(h[:8], xerialHeader[:8]) {
				return dst, payloadCorrupt(CodecSnappy, "bad xerial magic in a concatenated stream")
			}
			if v := int32(binary.BigEndian.Uint32(h[8:])); v < 1 {
				return dst, payloadCorrupt(CodecSnappy, "xerial version %d is not supported (need at least 1)", v)
			}
			c.p += xerialHeaderLen
			continue
		}
		p += 4
		if uint64(size) > uint64(len(src)-p) {
			return dst, payloadTruncated(CodecSnappy, fmt.Sprintf("xerial chunk of %d bytes runs past the end of the payload", size))
		}
		c.p = p + int(size)
		return appendSnappyBlock(dst, src[p:p+int(size)], start, limit)
	}
	c.done = true
	return dst, io.EOF
}

// appendSnappyBlock decodes one raw snappy block onto dst, which may hold
// no more than start+limit bytes afterwards. It checks the block's decoded
// length against that bound before decoding, and rejects the s2 extensions
// that Java's snappy rejects.
func appendSnappyBlock(dst, block []byte, start, limit int) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return dst, payloadCorrupt(CodecSnappy, "invalid block length header (%v)", err)
	}
	if n > start+limit-len(dst) {
		return dst, payloadTooLarge(CodecSnappy, limit)
	}
	dst = growSpare(dst, n, start+limit)
	at := len(dst)
	out, err := snappy.DecodeStrict(dst[at:at+n], block)
	if err != nil || len(out) != n {
		return dst, payloadCorrupt(CodecSnappy, "invalid block (%v)", err)
	}
	return dst[:at+n], nil
}

// --- lz4 --------------------------------------------------------------

// The LZ4 frame Kafka's Lz4BlockOutputStream writes (part of the format).
const (
	lz4Magic    = 0x184D2204 // little-endian on the wire: 04 22 4D 18
	lz4FLG      = 0x60       // version 01, independent blocks, no checksums, no content size
	lz4BD       = 0x40       // 64 KiB maximum block size
	lz4MaxBlock = 64 << 10
	// lz4Uncompressed marks a block stored raw, in its size word.
	lz4Uncompressed = 0x80000000
)

// FLG bits.
const (
	lz4FlagVersionMask     = 0xC0
	lz4FlagVersion1        = 0x40
	lz4FlagIndependent     = 0x20
	lz4FlagBlockChecksum   = 0x10
	lz4FlagContentSize     = 0x08
	lz4FlagContentChecksum = 0x04
	lz4FlagReserved        = 0x03 // bit 0 is the dictionary ID, unsupported by Kafka
	lz4BDReserved          = 0x8F
)

var (
	// lz4HC is the header checksum byte of the frames appendLZ4 writes.
	lz4HC = byte(xxh32([]byte{lz4FLG, lz4BD}) >> 8)

	lz4Compressors = sync.Pool{New: func() any { return new(lz4.Compressor) }}
)

// appendLZ4 appends src as an LZ4 frame exactly as Kafka writes it: the
// 7-byte header 04 22 4D 18 60 40 82, blocks of at most 64 KiB of input
// each (stored raw with the high bit of the size set when compressing does
// not make them smaller), then the end mark.
func appendLZ4(dst, src []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, lz4Magic)
	dst = append(dst, lz4FLG, lz4BD, lz4HC)
	c := lz4Compressors.Get().(*lz4.Compressor)
	defer lz4Compressors.Put(c)
	for len(src) > 0 {
		n := min(len(src), lz4MaxBlock)
		dst = slices.Grow(dst, 4+n)
		at := len(dst)
		// Room for one byte less than the input: the compressor gives
		// up when the block would not come out smaller.
		room := dst[at+4 : at+4+n-1 : at+4+n-1]
		if m, err := c.CompressBlock(src[:n], room); err == nil && m > 0 && m < n {
			dst = binary.LittleEndian.AppendUint32(dst, uint32(m))
			dst = dst[:at+4+m]
		} else {
			dst = binary.LittleEndian.AppendUint32(dst, uint32(n)|lz4Uncompressed)
			dst = append(dst, src[:n]...)
		}
		src = src[n:]
	}
	return binary.LittleEndian.AppendUint32(dst, 0) // end mark
}

// appendUnlz4 appends the content of the LZ4 frame in src, with the rules
// of Kafka's Lz4BlockInputStream: version 1, independent blocks, no
// dictionary, a correct header checksum byte, block checksums verified when
// flagged, the content size and content checksum skipped, and bytes after
// the end mark ignored.
func appendUnlz4(dst, src []byte, limit int) ([]byte, error) {
	chunks, err := newLZ4Chunks(src)
	if err != nil {
		return dst, err
	}
	return appendChunks(dst, limit, chunks.next)
}

// lz4Chunks decodes an LZ4 frame (appendUnlz4) one block at a time: its
// blocks are independent (Kafka writes and reads no other kind), so a
// reader of the records holds one block of at most 4 MiB, not them all.
type lz4Chunks struct {
	src      []byte
	p        int // the next byte of src to read
	flg      byte
	maxBlock int
	done     bool
}

// newLZ4Chunks checks the frame's header.
func newLZ4Chunks(src []byte) (lz4Chunks, error) {
	const c = CodecLZ4
	if len(src) < 6 {
		return lz4Chunks{}, payloadTruncated(c, "frame header is cut short")
	}
	if m := binary.LittleEndian.Uint32(src); m != lz4Magic {
		return lz4Chunks{}, payloadCorrupt(c, "bad frame magic %#08x", m)
	}
	flg, bd := src[4], src[5]
	switch {
	case flg&lz4FlagVersionMask != lz4FlagVersion1:
		return lz4Chunks{}, payloadCorrupt(c, "frame version %d is not supported (need 1)", flg>>6)
	case flg&lz4FlagReserved != 0:
		return lz4Chunks{}, payloadCorrupt(c, "reserved FLG bits %#02x are set (dictionary IDs are not supported)", flg&lz4FlagReserved)
	case flg&lz4FlagIndependent == 0:
		return lz4Chunks{}, payloadCorrupt(c, "dependent blocks are not supported")
	case bd&lz4BDReserved != 0:
		return lz4Chunks{}, payloadCorrupt(c, "reserved BD bits %#02x are set", bd&lz4BDReserved)
	}
	id := bd >> 4 & 7
	if id < 4 {
		return lz4Chunks{}, payloadCorrupt(c, "block size id %d is not one of 4 to 7", id)
	}
	hcAt := 6
	if flg&lz4FlagContentSize != 0 {
		hcAt += 8 // skipped, like Kafka, but covered by the checksum
	}
	if len(src) <= hcAt {
		return lz4Chunks{}, payloadTruncated(c, "frame descriptor is cut short")
	}
	if want := byte(xxh32(src[4:hcAt]) >> 8); src[hcAt] != want {
		return lz4Chunks{}, payloadCorrupt(c, "frame descriptor checksum is %#02x, want %#02x", src[hcAt], want)
	}
	// 64 KiB, 256 KiB, 1 MiB, 4 MiB
	return lz4Chunks{src: src, p: hcAt + 1, flg: flg, maxBlock: 1 << (8 + 2*id)}, nil
}

// next appends the next block's bytes to dst, which may hold no more
// than start+limit bytes afterwards, and returns io.EOF at the end mark.
func (l *lz4Chunks) next(dst []byte, start, limit int) ([]byte, error) {
	const c = CodecLZ4
	if l.done {
		return dst, io.EOF
	}
	src, p, flg, maxBlock := l.src, l.p, l.flg, l.maxBlock
	if len(src)-p < 4 {
		return dst, payloadTruncated(c, "frame ends before the end mark")
	}
	word := binary.LittleEndian.Uint32(src[p:])
	p += 4
	size := int(word &^ lz4Uncompressed)
	if size == 0 { // the end mark (Kafka also takes one with the high bit)
		if flg&lz4FlagContentChecksum != 0 && len(src)-p < 4 {
			return dst, payloadTruncated(c, "content checksum is cut short")
		}
		l.done = true
		return dst, io.EOF
	}
	if size > maxBlock {
		return dst, payloadCorrupt(c, "block of %d bytes exceeds the frame's maximum of %d", size, maxBlock)
	}
	if len(src)-p < size {
		return dst, payloadTruncated(c, "block is cut short")
	}
	block := src[p : p+size]
	p += size
	if flg&lz4FlagBlockChecksum != 0 {
		if len(src)-p < 4 {
			return dst, payloadTruncated(c, "block checksum is cut short")
		}
		if got, want := binary.LittleEndian.Uint32(src[p:]), xxh32(block); got != want {
			return dst, payloadCorrupt(c, "block checksum is %#08x, want %#08x", got, want)
		}
		p += 4
	}
	l.p = p
	n := size
	if word&lz4Uncompressed == 0 {
		var ok bool
		if n, ok = lz4BlockLen(block); !ok || n > maxBlock {
			return dst, payloadCorrupt(c, "invalid compressed block")
		}
	}
	if n > start+limit-len(dst) {
		return dst, payloadTooLarge(c, limit)
	}
	dst = growSpare(dst, n, start+limit)
	at := len(dst)
	if word&lz4Uncompressed != 0 {
		return append(dst, block...), nil
	}
	if m, err := lz4.UncompressBlock(block, dst[at:at+n]); err != nil || m != n {
		return dst, payloadCorrupt(c, "invalid compressed block (%v)", err)
	}
	return dst[:at+n], nil
}

// lz4BlockLen returns the size the LZ4 block b decodes to, walking its
// sequences without producing them. ok is false when b is malformed: a
// length or offset runs past the end, an offset is 0 or reaches before the
// start of the block, or the block does not end with a literals-only
// sequence.
func lz4BlockLen(b []byte) (n int, ok bool) {
	i := 0
	for i < len(b) {
		token := b[i]
		i++
		lits := int(token >> 4)
		if lits == 15 {
			ext, k, ok := lz4ExtLen(b[i:])
			if !ok {
				return 0, false
			}
			lits, i = lits+ext, i+k
		}
		if lits > len(b)-i {
			return 0, false
		}
		i += lits
		n += lits
		if i == len(b) { // the last sequence, which has no match
			if token&15 != 0 {
				return 0, false
			}
			return n, true
		}
		if len(b)-i < 2 {
			return 0, false
		}
		off := int(binary.LittleEndian.Uint16(b[i:]))
		i += 2
		if off == 0 || off > n {
			return 0, false
		}
		match := int(token&15) + 4 // minimum match length
		if match == 19 {
			ext, k, ok := lz4ExtLen(b[i:])
			if !ok {
				return 0, false
			}
			match, i = match+ext, i+k
		}
		n += match
	}
	return 0, false // empty, or ends after a match
}

// lz4ExtLen reads an LZ4 length extension from b: bytes added up until one
// is not 255. It returns the sum and the bytes read.
func lz4ExtLen(b []byte) (sum, k int, ok bool) {
	for k < len(b) {
		x := b[k]
		k++
		sum += int(x)
		if x != 255 {
			return sum, k, true
		}
	}
	return 0, 0, false
}

// --- zstd -------------------------------------------------------------

// zstd window bounds. A decoder allocates the window a frame declares (the
// content size for a single-segment frame) before it produces anything, so
// windows are bounded as well as output. Pooled decoders take windows up to
// zstdPooledWindow, which covers every zstd level up to 19 and franz-go's
// frames. A larger window, up to the 128 MiB that Kafka's zstd-jni reader
// takes (windowLog 27), goes to a one-off decoder, so that the pool keeps
// no big window buffer, and only if the limit justifies it: if it is at
// most limit plus one zstd block, as no back-reference into the first
// limit bytes of output reaches further.
const (
	zstdEncoderWindow = 2 << 20 // what zstd level 3 uses when streaming, as Kafka's producer does
	zstdPooledWindow  = 8 << 20
	zstdMaxWindow     = 1 << 27
	zstdMaxBlock      = 128 << 10
)

var (
	zstdEncoderOnce sync.Once
	zstdEncoder     *zstd.Encoder
	zstdEncoderErr  error
)

// zstdReader is a pooled zstd decoder with the reader it reads from.
type zstdReader struct {
	d   *zstd.Decoder
	err error // from creating d
	in  bytes.Reader
}

var zstdReaders = sync.Pool{New: func() any {
	r := new(zstdReader)
	r.d, r.err = newZstdDecoder(zstdPooledWindow)
	return r
}}

// newZstdDecoder returns a zstd decoder that decodes streams synchronously
// (concurrency 1 starts no goroutines) and rejects windows over maxWindow.
func newZstdDecoder(maxWindow uint64) (*zstd.Decoder, error) {
	return zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(maxWindow))
}

// appendZstd appends src as one zstd frame at the default level (zstd
// level 3, Kafka's default). Empty input still makes a frame, as zstd-jni
// writes one.
func appendZstd(dst, src []byte) ([]byte, error) {
	zstdEncoderOnce.Do(func() {
		zstdEncoder, zstdEncoderErr = zstd.NewWriter(nil,
			// EncodeAll starts no goroutines; concurrency only bounds
			// how many encodes run at once.
			zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithEncoderLevel(zstd.SpeedDefault),
			zstd.WithWindowSize(zstdEncoderWindow),
			zstd.WithZeroFrames(true))
	})
	if zstdEncoderErr != nil {
		return dst, payloadCorrupt(CodecZstd, "creating the encoder: %v", zstdEncoderErr)
	}
	return zstdEncoder.EncodeAll(src, dst), nil
}

// appendUnzstd appends the content of the zstd frames in src. The decoder
// streams into dst, so the output is bounded by limit; the first frame's
// header bounds its window (see zstdMaxWindow) and, when it declares its
// content size, its output. A later frame with a window over the
// decoder's maximum is reported as corrupt.
func appendUnzstd(dst, src []byte, limit int) ([]byte, error) {
	r, done, err := zstdReaderFor(src, limit)
	if err != nil {
		return dst, err
	}
	defer done()
	out, err := r.decode(dst, src, limit)
	if err != nil {
		return out[:len(dst)], decodeStreamError(CodecZstd, err)
	}
	return out, nil
}

// zstdReaderFor returns a decoder for the frames of src, if the window
// its first frame declares is one that limit allows (a frame that
// declares more content than limit is refused at once), and done, to
// give the decoder back.
func zstdReaderFor(src []byte, limit int) (*zstdReader, func(), error) {
	var h zstd.Header
	var window uint64
	if h.Decode(src) == nil && !h.Skippable {
		if h.HasFCS && h.FrameContentSize > uint64(limit) {
			return nil, nil, payloadTooLarge(CodecZstd, limit)
		}
		window = h.WindowSize
		if h.SingleSegment {
			window = h.FrameContentSize
		}
	}
	allowed := min(zstdMaxWindow, max(zstdPooledWindow, uint64(limit)+zstdMaxBlock))
	switch {
	case window > zstdMaxWindow:
		return nil, nil, payloadCorrupt(CodecZstd, "frame window of %d bytes is over %d MiB, which Kafka's zstd reader rejects too", window, zstdMaxWindow>>20)
	case window > allowed:
		return nil, nil, fmt.Errorf("zstd: frame window of %d bytes is more than the limit of %d bytes allows: %w", window, limit, errPayloadTooLarge)
	case window > zstdPooledWindow:
		d, err := newZstdDecoder(allowed)
		if err != nil {
			return nil, nil, payloadCorrupt(CodecZstd, "creating the decoder: %v", err)
		}
		return &zstdReader{d: d}, d.Close, nil
	}
	r := zstdReaders.Get().(*zstdReader)
	if r.err != nil {
		zstdReaders.Put(r)
		return nil, nil, payloadCorrupt(CodecZstd, "creating the decoder: %v", r.err)
	}
	return r, func() { zstdReaders.Put(r) }, nil
}

// decode streams the frames in src onto dst through r's decoder, then
// drops its references to src. Errors are the decoder's own, unclassified,
// or wrap errPayloadTooLarge.
func (r *zstdReader) decode(dst, src []byte, limit int) ([]byte, error) {
	r.in.Reset(src)
	defer func() {
		_ = r.d.Reset(nil) // cannot fail for a nil reader
		r.in.Reset(nil)
	}()
	if err := r.d.Reset(&r.in); err != nil {
		return dst, err
	}
	return readAllLimited(dst, r.d, limit, CodecZstd)
}
