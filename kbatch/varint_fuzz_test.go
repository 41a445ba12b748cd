package kbatch

// FuzzVarint checks the varints of the record format (the inlined fast
// paths beside a plain loop) against a reference decoder. Its seeds run
// under plain `go test`; `make fuzz` fuzzes it.

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// refUvarint reads LEB128 groups as Java's ByteUtils.readVarint and
// readVarlong do: at most max bytes, bits past the type's width dropped.
// n is 0 if b ends first, -1 if the last allowed byte continues.
func refUvarint(b []byte, maxBytes int) (x uint64, n int) {
	for i := 0; i < maxBytes; i++ {
		if i >= len(b) {
			return 0, 0
		}
		x |= uint64(b[i]&0x7f) << (7 * i)
		if b[i] < 0x80 {
			return x, i + 1
		}
	}
	return 0, -1
}

// FuzzVarint: readVarint and readVarlong (with their inlined one- and
// two-byte paths) agree with a plain loop over any bytes; what they read
// re-encodes, minimally, to bytes that read back the same, in the size
// sizeVarint and sizeVarlong give.
func FuzzVarint(f *testing.F) {
	for _, s := range [][]byte{
		{}, {0}, {1}, {0x7f}, {0x80}, {0x80, 0}, {0x81, 0x01}, {0xff, 0x7f},
		{0x80, 0x80, 0x80, 0x80, 0},          // five bytes, overlong zero
		{0xff, 0xff, 0xff, 0xff, 0x0f},       // int32 -2^31
		{0xff, 0xff, 0xff, 0xff, 0x7f},       // bits past 32
		{0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, // a sixth byte
		{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		appendVarlong(nil, math.MinInt64), appendVarint(nil, math.MaxInt32),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v32, n32 := readVarint(b)
		x, n := refUvarint(b, 5)
		require.Equal(t, n, n32, "readVarint(%x): bytes read", b)
		if n > 0 {
			require.Equal(t, unzigzag32(uint32(x)), v32, "readVarint(%x)", b)
			enc := appendVarint(nil, v32)
			require.Len(t, enc, sizeVarint(v32))
			back, m := readVarint(enc)
			require.Equal(t, v32, back)
			require.Equal(t, len(enc), m)
			require.LessOrEqual(t, len(enc), n, "the minimal encoding is no longer than what was read")
			if bytes.Equal(enc, b[:n]) {
				require.Equal(t, len(enc), n)
			}
		} else {
			require.Equal(t, int32(0), v32)
		}

		v64, n64 := readVarlong(b)
		x, n = refUvarint(b, 10)
		require.Equal(t, n, n64, "readVarlong(%x): bytes read", b)
		if n > 0 {
			require.Equal(t, unzigzag64(x), v64, "readVarlong(%x)", b)
			enc := appendVarlong(nil, v64)
			require.Len(t, enc, sizeVarlong(v64))
			back, m := readVarlong(enc)
			require.Equal(t, v64, back)
			require.Equal(t, len(enc), m)
			require.LessOrEqual(t, len(enc), n)
			// Go's varint is the same zig-zag LEB128 for int64.
			gv, gn := binary.Varint(enc)
			require.Equal(t, v64, gv)
			require.Equal(t, len(enc), gn)
		} else {
			require.Equal(t, int64(0), v64)
		}
	})
}
