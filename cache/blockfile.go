package cache

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// The block file format, version 1. Part of the format: changing any of
// these needs a new version. See the package documentation for the
// diagram.
const (
	blockMagic      = "DLCB"
	blockVersion    = 1
	blockHeaderSize = 40 // fixed header, before the key
	blockTrailer    = 4  // the data CRC32C
	blockFileExt    = ".blk"
	blockTmpExt     = ".tmp"
	// maxKeyLen bounds the key stored in a block file (object stores
	// allow 1024 bytes; the bound keeps a damaged length from allocating
	// much).
	maxKeyLen = 4096
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// blockHeader is the decoded fixed header of a block file and its key.
type blockHeader struct {
	blockSize int64  // the cache's block size when the file was written
	idx       int64  // block index in the object
	objSize   int64  // the object's size
	dataLen   int64  // bytes of block data in the file
	key       string // the object's key
}

// fileSize is the size of a well-formed file with this header.
func (h *blockHeader) fileSize() int64 {
	return blockHeaderSize + int64(len(h.key)) + h.dataLen + blockTrailer
}

// blockFileName is the name of the file that holds block idx of key: a hash
// of the key (keys may hold any character) and the index. The file's header
// holds the key itself, so a collision is detected, not served.
func blockFileName(key string, idx int64) string {
	sum := sha256.Sum256([]byte(key))
	return fmt.Sprintf("%x-%016x%s", sum[:16], uint64(idx), blockFileExt)
}

// appendBlockHeader appends the fixed header and the key of a block file.
// The data and its CRC (appendBlockTrailer) follow.
func appendBlockHeader(dst []byte, h *blockHeader) []byte {
	start := len(dst)
	dst = append(dst, blockMagic...)
	dst = append(dst, blockVersion, 0, 0, 0)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(h.blockSize))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(h.key)))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(h.idx))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(h.objSize))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(h.dataLen))
	crc := crc32.Update(0, castagnoli, dst[start:start+36])
	crc = crc32.Update(crc, castagnoli, []byte(h.key))
	dst = binary.LittleEndian.AppendUint32(dst, crc)
	return append(dst, h.key...)
}

// appendBlockTrailer appends the CRC32C of data.
func appendBlockTrailer(dst []byte, data []byte) []byte {
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(data, castagnoli))
}

// decodeFixedHeader decodes the fixed header at the start of b and returns
// it without the key, and the key's length. b must hold blockHeaderSize
// bytes.
func decodeFixedHeader(b []byte) (h blockHeader, keyLen int, err error) {
	if len(b) < blockHeaderSize {
		return h, 0, fmt.Errorf("%w: %d bytes, header needs %d", errDamaged, len(b), blockHeaderSize)
	}
	if string(b[0:4]) != blockMagic {
		return h, 0, fmt.Errorf("%w: bad magic %q", errDamaged, b[0:4])
	}
	if b[4] != blockVersion || b[5] != 0 || b[6] != 0 || b[7] != 0 {
		return h, 0, fmt.Errorf("%w: unknown version %d", errDamaged, b[4])
	}
	h.blockSize = int64(binary.LittleEndian.Uint32(b[8:]))
	kl := binary.LittleEndian.Uint32(b[12:])
	idx := binary.LittleEndian.Uint64(b[16:])
	objSize := binary.LittleEndian.Uint64(b[24:])
	h.dataLen = int64(binary.LittleEndian.Uint32(b[32:]))
	switch {
	case kl > maxKeyLen:
		return h, 0, fmt.Errorf("%w: key length %d", errDamaged, kl)
	case h.blockSize < 1 || h.blockSize > MaxBlockSize:
		return h, 0, fmt.Errorf("%w: block size %d", errDamaged, h.blockSize)
	case idx > 1<<62 || objSize > 1<<62:
		return h, 0, fmt.Errorf("%w: block %d of an object of %d bytes", errDamaged, idx, objSize)
	}
	h.idx, h.objSize = int64(idx), int64(objSize)
	// The block holds what is left of the object from its start, up to a
	// block.
	if want := min(h.blockSize, h.objSize-h.idx*h.blockSize); want < 1 || h.dataLen != want {
		return h, 0, fmt.Errorf("%w: block %d of %d bytes in an object of %d bytes", errDamaged, h.idx, h.dataLen, h.objSize)
	}
	return h, int(kl), nil
}

// decodeBlockHeader decodes the fixed header and the key at the start of b
// and checks the header CRC.
func decodeBlockHeader(b []byte) (blockHeader, error) {
	h, kl, err := decodeFixedHeader(b)
	if err != nil {
		return h, err
	}
	if len(b) < blockHeaderSize+kl {
		return h, fmt.Errorf("%w: %d bytes, header and key need %d", errDamaged, len(b), blockHeaderSize+kl)
	}
	crc := crc32.Update(0, castagnoli, b[:36])
	crc = crc32.Update(crc, castagnoli, b[blockHeaderSize:blockHeaderSize+kl])
	if got := binary.LittleEndian.Uint32(b[36:]); got != crc {
		return h, fmt.Errorf("%w: header CRC %08x, want %08x", errDamaged, got, crc)
	}
	h.key = string(b[blockHeaderSize : blockHeaderSize+kl])
	return h, nil
}

// decodeBlockFile decodes a whole block file and checks both CRCs. The
// returned data aliases b.
func decodeBlockFile(b []byte) (blockHeader, []byte, error) {
	h, err := decodeBlockHeader(b)
	if err != nil {
		return h, nil, err
	}
	if int64(len(b)) != h.fileSize() {
		return h, nil, fmt.Errorf("%w: file of %d bytes, header says %d", errDamaged, len(b), h.fileSize())
	}
	start := blockHeaderSize + int64(len(h.key))
	data := b[start : start+h.dataLen : start+h.dataLen]
	want := binary.LittleEndian.Uint32(b[start+h.dataLen:])
	if got := crc32.Checksum(data, castagnoli); got != want {
		return h, nil, fmt.Errorf("%w: data CRC %08x, want %08x", errDamaged, got, want)
	}
	return h, data, nil
}
