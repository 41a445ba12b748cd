package kbatch

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDecompressionBytes: an uncompressed batch costs nothing, a
// compressed one at least twice its limit, and Validate stays within it.
func TestDecompressionBytes(t *testing.T) {
	for _, c := range Codecs {
		b := NewBuilder(c)
		b.Append(time.Now().UnixMilli(), []byte("k"), make([]byte, 1<<20))
		raw, err := b.Build(nil)
		require.NoError(t, err)
		cost := DecompressionBytes(raw, 2<<20)
		if c == CodecNone {
			require.Zero(t, cost)
			continue
		}
		got := allocated(func() {
			_, err = Validate(raw, &ValidateOptions{MaxUncompressedBytes: 2 << 20, MaxMessageBytes: 8 << 20})
		})
		require.NoError(t, err, "%s", c)
		require.LessOrEqual(t, got, uint64(cost), "%s: a record of 1 MiB", c)
		if c == CodecGzip || c == CodecLZ4 {
			require.Less(t, got, uint64(1<<20), "%s: the record is not held", c)
		}
	}
	require.Zero(t, DecompressionBytes([]byte{1, 2, 3}, 0), "too short to say")
}
