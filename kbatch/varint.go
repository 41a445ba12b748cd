package kbatch

// Kafka's variable-length integers (docs/formats.md, "Integers and varints"): zig-zag, then
// LEB128, low group first. They decode exactly as Java's ByteUtils does,
// bits that overflow the type included, so that what Kafka accepts we
// accept.

// readVarint decodes a varint (int32, at most 5 bytes) from the start of b.
// It returns the value and the bytes read, 0 if b ends first, or -1 if the
// fifth byte has its continuation bit set. A one-byte varint, the common
// case, takes an inlined path.
func readVarint(b []byte) (int32, int) {
	if len(b) > 0 && b[0] < 0x80 {
		return unzigzag32(uint32(b[0])), 1
	}
	return readVarintSlow(b)
}

func readVarintSlow(b []byte) (int32, int) {
	if len(b) > 1 && b[1] < 0x80 {
		return unzigzag32(uint32(b[0]&0x7f) | uint32(b[1])<<7), 2
	}
	var x uint32
	for i := 0; i < 5; i++ {
		if i >= len(b) {
			return 0, 0
		}
		c := b[i]
		x |= uint32(c&0x7f) << (7 * i)
		if c < 0x80 {
			return unzigzag32(x), i + 1
		}
	}
	return 0, -1
}

// readVarlong decodes a varlong (int64, at most 10 bytes) from the start of
// b, with readVarint's results.
func readVarlong(b []byte) (int64, int) {
	if len(b) > 0 && b[0] < 0x80 {
		return unzigzag64(uint64(b[0])), 1
	}
	return readVarlongSlow(b)
}

func readVarlongSlow(b []byte) (int64, int) {
	if len(b) > 1 && b[1] < 0x80 {
		return unzigzag64(uint64(b[0]&0x7f) | uint64(b[1])<<7), 2
	}
	var x uint64
	for i := 0; i < 10; i++ {
		if i >= len(b) {
			return 0, 0
		}
		c := b[i]
		x |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return unzigzag64(x), i + 1
		}
	}
	return 0, -1
}

func unzigzag32(x uint32) int32 { return int32(x>>1) ^ -int32(x&1) }

func unzigzag64(x uint64) int64 { return int64(x>>1) ^ -int64(x&1) }

// appendVarint appends v as a varint.
func appendVarint(dst []byte, v int32) []byte {
	return appendUvarint(dst, uint64(uint32(v<<1)^uint32(v>>31)))
}

// appendVarlong appends v as a varlong.
func appendVarlong(dst []byte, v int64) []byte {
	return appendUvarint(dst, uint64(v<<1)^uint64(v>>63))
}

func appendUvarint(dst []byte, x uint64) []byte {
	for x >= 0x80 {
		dst = append(dst, byte(x)|0x80)
		x >>= 7
	}
	return append(dst, byte(x))
}

// sizeVarint returns the encoded size of v as a varint.
func sizeVarint(v int32) int { return sizeUvarint(uint64(uint32(v<<1) ^ uint32(v>>31))) }

// sizeVarlong returns the encoded size of v as a varlong.
func sizeVarlong(v int64) int { return sizeUvarint(uint64(v<<1) ^ uint64(v>>63)) }

func sizeUvarint(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}
