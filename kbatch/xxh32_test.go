package kbatch

import (
	"bytes"
	"encoding/binary"
	"io"
	"testing"

	"github.com/pierrec/lz4/v4"
	"github.com/stretchr/testify/require"
)

func TestXXH32KnownVectors(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint32
	}{
		{"", 0x02CC5D05},
		{"a", 0x550D7456},
		{"abc", 0x32D153FF},
	} {
		require.Equal(t, tc.want, xxh32([]byte(tc.in)), "xxh32(%q)", tc.in)
	}

	// Bytes 0 to 99: the content checksum pierrec/lz4's writer puts on
	// them (TestXXH32AgainstLZ4Writer checks every length that way), and
	// what a separate transcription of the algorithm in Python gives.
	in := make([]byte, 100)
	for i := range in {
		in[i] = byte(i)
	}
	require.Equal(t, uint32(0x7F89BA44), xxh32(in))

	// The LZ4 frame header Kafka writes: HC is the second byte of this.
	require.Equal(t, uint32(0x301A8268), xxh32([]byte{0x60, 0x40}))
}

// TestXXH32AgainstLZ4Writer checks xxh32 against pierrec/lz4's own xxHash32,
// which is internal: its frame writer puts xxh32 of the whole content after
// the end mark (content checksum) and xxh32 of each stored block after the
// block (block checksum). Lengths 0 to 100 cover every path through the
// 16-byte stripes and the 4- and 1-byte tails.
func TestXXH32AgainstLZ4Writer(t *testing.T) {
	data := make([]byte, 1000)
	for i := range data {
		data[i] = byte(i*7 + i>>3) // not all equal: stripes differ
	}
	var buf bytes.Buffer
	w := lz4.NewWriter(&buf)
	require.NoError(t, w.Apply(lz4.ChecksumOption(true), lz4.BlockChecksumOption(true)))
	var lengths []int
	for n := 0; n <= 100; n++ {
		lengths = append(lengths, n)
	}
	for _, n := range append(lengths, 255, 256, 1000) {
		in := data[:n]
		buf.Reset()
		w.Reset(&buf)
		_, err := w.Write(in)
		require.NoError(t, err)
		require.NoError(t, w.Close())
		frame := buf.Bytes()

		if n > 0 { // an empty frame may omit the content checksum
			content := binary.LittleEndian.Uint32(frame[len(frame)-4:])
			require.Equal(t, content, xxh32(in), "content checksum, %d bytes", n)
		}

		// Header: magic, FLG, BD, HC = second byte of xxh32(FLG, BD).
		require.Equal(t, frame[6], byte(xxh32(frame[4:6])>>8), "header checksum byte")

		// Every block's checksum covers its stored bytes.
		for p := 7; ; {
			size := int(binary.LittleEndian.Uint32(frame[p:]) &^ lz4Uncompressed)
			p += 4
			if size == 0 {
				break
			}
			block := frame[p : p+size]
			p += size
			require.Equal(t, binary.LittleEndian.Uint32(frame[p:]), xxh32(block), "block checksum, %d bytes", n)
			p += 4
		}

		// And pierrec's reader, which verifies all of them, agrees.
		got, err := io.ReadAll(lz4.NewReader(bytes.NewReader(frame)))
		require.NoError(t, err)
		require.Equal(t, in, got)
	}
}
