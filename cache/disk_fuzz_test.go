package cache

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzDiskBlockFile: the disk tier's scan on open and its reads take any
// bytes in place of one of a key's block files (damage, a torn write, a
// file of another block renamed over it) and still serve exactly the
// object's bytes: the scan never fails nor panics, a damaged file is
// dropped and its block fetched again. Only a file that is itself a
// valid encoding of other data for that very block (a forgery, which no
// CRC can tell) is outside the property.
func FuzzDiskBlockFile(f *testing.F) {
	const size, blockSize = 40, 16
	h := blockHeader{blockSize: blockSize, idx: 1, objSize: size, dataLen: blockSize, key: "k"}
	good := encodeBlockFile(&h, content("k", size)[blockSize:2*blockSize])
	f.Add(uint8(1), good)
	f.Add(uint8(0), good) // block 1's file under block 0's name
	f.Add(uint8(2), good[:blockHeaderSize+1])
	f.Add(uint8(1), good[:len(good)-1])
	f.Add(uint8(1), append(slices.Clone(good), 0))
	f.Add(uint8(2), []byte{})
	for _, at := range []int{0, 8, 12, 16, 24, 32, 36, 40, len(good) - 1} {
		bad := slices.Clone(good)
		bad[at] ^= 0x04
		f.Add(uint8(1), bad)
	}
	f.Fuzz(func(t *testing.T, sel uint8, data []byte) {
		b, _ := newMemBucket(t)
		want := putObject(t, b, "k", size)
		dir := t.TempDir()
		opts := &Options{BlockSize: blockSize, MemoryBytes: 1024, Shards: 1, Dir: dir}
		c, err := New(b, opts)
		require.NoError(t, err)
		require.NoError(t, c.Put(t.Context(), "k", want))
		require.NoError(t, c.Close())

		idx := int64(sel % 3)
		if dh, dd, err := decodeBlockFile(data); err == nil && dh.key == "k" && dh.idx == idx && dh.blockSize == blockSize {
			end := min(size, (idx+1)*blockSize)
			if dh.objSize != size || !bytes.Equal(dd, want[idx*blockSize:end]) {
				return // a forgery: valid, for this block, and other data
			}
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, blockFileName("k", idx)), data, 0o644))

		c, err = New(b, opts)
		require.NoError(t, err, "opening the disk tier over a damaged file")
		defer func() { require.NoError(t, c.Close()) }()
		for _, r := range [][2]int64{{0, size}, {idx * blockSize, 1}, {idx*blockSize + 3, 10}} {
			n := min(r[1], size-r[0])
			got, err := c.ReadRange(t.Context(), "k", r[0], n)
			require.NoError(t, err)
			require.Equal(t, want[r[0]:r[0]+n], got, "bytes [%d, %d)", r[0], r[0]+n)
		}
		c.settle()
		st := c.Stats()
		require.LessOrEqual(t, st.DiskBlocks, int64(3))
	})
}
