package cache

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

const goldenBlockFile = "testdata/block-v1.golden"

// goldenBlock is the block in the golden file: block 2 (bytes 32 to 39) of
// a 40-byte object, with 16-byte blocks.
func goldenBlock() (blockHeader, []byte) {
	data := []byte("golden!!")
	return blockHeader{blockSize: 16, idx: 2, objSize: 40, dataLen: int64(len(data)), key: "wal/0190a1b2-golden"}, data
}

func encodeBlockFile(h *blockHeader, data []byte) []byte {
	b := appendBlockHeader(nil, h)
	b = append(b, data...)
	return appendBlockTrailer(b, data)
}

// The block file format, version 1, read and written: the encoder gives
// the golden bytes, the decoder reads them back. Run with -rewrite only
// when the format version changes.
func TestBlockFileGolden(t *testing.T) {
	h, data := goldenBlock()
	got := encodeBlockFile(&h, data)
	if *rewrite {
		require.NoError(t, os.WriteFile(goldenBlockFile, got, 0o644))
	}
	want, err := os.ReadFile(goldenBlockFile)
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Equal(t, h.fileSize(), int64(len(want)))

	dh, ddata, err := decodeBlockFile(want)
	require.NoError(t, err)
	require.Equal(t, h, dh)
	require.Equal(t, data, ddata)
	// File names are part of the format too: a restart finds blocks by them.
	require.Equal(t, "b9559beeb00432d1865440f1bfb5491c-0000000000000002.blk", blockFileName(h.key, h.idx))
}

// Every single-byte change and every truncation of a block file is caught.
func TestBlockFileDamage(t *testing.T) {
	h, data := goldenBlock()
	good := encodeBlockFile(&h, data)
	for i := range good {
		for _, flip := range []byte{0x01, 0x80, 0xff} {
			bad := bytes.Clone(good)
			bad[i] ^= flip
			_, _, err := decodeBlockFile(bad)
			require.ErrorIs(t, err, errDamaged, "byte %d ^ %#x", i, flip)
		}
	}
	for n := range len(good) {
		_, _, err := decodeBlockFile(good[:n])
		require.ErrorIs(t, err, errDamaged, "truncated to %d", n)
	}
	_, _, err := decodeBlockFile(append(bytes.Clone(good), 0))
	require.ErrorIs(t, err, errDamaged)
}

// The decoder never panics, and what it accepts re-encodes to the same
// bytes.
func FuzzDecodeBlockFile(f *testing.F) {
	h, data := goldenBlock()
	good := encodeBlockFile(&h, data)
	f.Add(good)
	f.Add(good[:blockHeaderSize])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, data, err := decodeBlockFile(b)
		if err != nil {
			require.ErrorIs(t, err, errDamaged)
			return
		}
		require.Equal(t, b, encodeBlockFile(&h, data))
		_, err = decodeBlockHeader(b)
		require.NoError(t, err)
	})
}
