package kbatch

import (
	"encoding/binary"
	"io"
	"slices"
	"sync"

	"github.com/pierrec/lz4/v4"
)

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
