package kbatch

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"slices"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
)

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
