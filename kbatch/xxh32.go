package kbatch

import (
	"encoding/binary"
	"math/bits"
)

// xxHash32 primes (part of the algorithm).
const (
	xxhPrime1 uint32 = 2654435761
	xxhPrime2 uint32 = 2246822519
	xxhPrime3 uint32 = 3266489917
	xxhPrime4 uint32 = 668265263
	xxhPrime5 uint32 = 374761393
)

// xxh32 returns the 32-bit xxHash of b with seed 0, the checksum the LZ4
// frame format uses for its header byte, block and content checksums.
func xxh32(b []byte) uint32 {
	h := uint32(len(b)) // the length term is taken modulo 2^32
	if len(b) >= 16 {
		p1, p2 := xxhPrime1, xxhPrime2 // variables: the constant sum overflows
		v1, v2, v3, v4 := p1+p2, p2, uint32(0), -p1
		for ; len(b) >= 16; b = b[16:] {
			v1 = xxhRound(v1, binary.LittleEndian.Uint32(b[0:]))
			v2 = xxhRound(v2, binary.LittleEndian.Uint32(b[4:]))
			v3 = xxhRound(v3, binary.LittleEndian.Uint32(b[8:]))
			v4 = xxhRound(v4, binary.LittleEndian.Uint32(b[12:]))
		}
		h += bits.RotateLeft32(v1, 1) + bits.RotateLeft32(v2, 7) +
			bits.RotateLeft32(v3, 12) + bits.RotateLeft32(v4, 18)
	} else {
		h += xxhPrime5
	}
	for ; len(b) >= 4; b = b[4:] {
		h += binary.LittleEndian.Uint32(b) * xxhPrime3
		h = bits.RotateLeft32(h, 17) * xxhPrime4
	}
	for _, c := range b {
		h += uint32(c) * xxhPrime5
		h = bits.RotateLeft32(h, 11) * xxhPrime1
	}
	h ^= h >> 15
	h *= xxhPrime2
	h ^= h >> 13
	h *= xxhPrime3
	h ^= h >> 16
	return h
}

// xxhRound mixes one 4-byte lane of input into the accumulator v.
func xxhRound(v, lane uint32) uint32 {
	return bits.RotateLeft32(v+lane*xxhPrime2, 13) * xxhPrime1
}
