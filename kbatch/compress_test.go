package kbatch

import (
	"bytes"
	stdgzip "compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/snappy/xerial"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// compressTestInput is one input of the codec round trips.
type compressTestInput struct {
	name string
	data []byte
}

// compressTestInputs returns the inputs every codec must round-trip: empty,
// one byte, 1 KiB random, and 300 KiB compressible and incompressible, so
// that lz4 writes several 64 KiB blocks (stored raw when random) and
// snappy several 32 KiB chunks.
func compressTestInputs() []compressTestInput {
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	return []compressTestInput{
		{"empty", []byte{}},
		{"one byte", []byte{'x'}},
		{"1KiB random", random(1 << 10)},
		{"300KiB compressible", compressibleRecords(300 << 10)},
		{"300KiB random", random(300 << 10)},
	}
}

// compressibleRecords returns n bytes of text that compresses well but not
// trivially, like a batch of similar records.
func compressibleRecords(n int) []byte {
	b := make([]byte, 0, n+100)
	for i := 0; len(b) < n; i++ {
		b = append(b, "record "...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, " key=user-"...)
		b = strconv.AppendInt(b, int64(i%97), 10)
		b = append(b, ` value={"event":"click","page":`...)
		b = strconv.AppendInt(b, int64(i%13), 10)
		b = append(b, "}\n"...)
	}
	return b[:n]
}

// requireSameBytes checks that got holds the bytes of want, taking nil and
// empty as the same.
func requireSameBytes(t *testing.T, want, got []byte, msgAndArgs ...any) {
	t.Helper()
	if len(want) == 0 && len(got) == 0 {
		return
	}
	require.Equal(t, want, got, msgAndArgs...)
}

// payloadSentinels lists the errors every decompression error wraps one of.
var payloadSentinels = []error{errPayloadTruncated, errPayloadCorrupt, errPayloadTooLarge}

// requireSentinel checks that err wraps want and no other payload sentinel.
func requireSentinel(t *testing.T, err, want error) {
	t.Helper()
	require.Error(t, err)
	for _, s := range payloadSentinels {
		require.Equal(t, s == want, errors.Is(err, s), "error %q: wraps %q", err, s)
	}
}

func TestCompressRoundTrip(t *testing.T) {
	for _, c := range Codecs {
		for _, in := range compressTestInputs() {
			t.Run(c.String()+"/"+in.name, func(t *testing.T) {
				out, err := appendCompressed(nil, in.data, c)
				require.NoError(t, err)
				got, err := appendDecompressed(nil, out, c, len(in.data))
				require.NoError(t, err)
				requireSameBytes(t, in.data, got)
			})
		}
	}
}

// TestCompressBlockStructure checks the framing of large inputs: lz4 blocks
// of 64 KiB input, stored raw with the high bit when random; snappy chunks
// of 32 KiB input.
func TestCompressBlockStructure(t *testing.T) {
	for _, in := range compressTestInputs()[3:] {
		random := in.name == "300KiB random"

		out, err := appendCompressed(nil, in.data, CodecLZ4)
		require.NoError(t, err)
		var blocks, raw int
		p := 7
		for {
			word := binary.LittleEndian.Uint32(out[p:])
			p += 4
			if word == 0 {
				break
			}
			blocks++
			if word&lz4Uncompressed != 0 {
				raw++
			}
			p += int(word &^ lz4Uncompressed)
		}
		require.Equal(t, len(out), p, "%s: lz4 end mark ends the frame", in.name)
		require.Equal(t, 5, blocks, "%s: 300 KiB is 5 lz4 blocks of 64 KiB", in.name)
		if random {
			require.Equal(t, blocks, raw, "random blocks are stored raw")
		} else {
			require.Zero(t, raw)
		}

		out, err = appendCompressed(nil, in.data, CodecSnappy)
		require.NoError(t, err)
		var chunks int
		for p := 16; p < len(out); chunks++ {
			p += 4 + int(binary.BigEndian.Uint32(out[p:]))
		}
		require.Equal(t, 10, chunks, "%s: 300 KiB is 10 snappy chunks of 32 KiB", in.name)
	}
}

// TestCompressIndependentDecoders decodes everything appendCompressed writes
// with implementations other than ours.
func TestCompressIndependentDecoders(t *testing.T) {
	kdec := kgo.DefaultDecompressor()
	for _, c := range Codecs {
		for _, in := range compressTestInputs() {
			t.Run(c.String()+"/"+in.name, func(t *testing.T) {
				out, err := appendCompressed(nil, in.data, c)
				require.NoError(t, err)

				var got []byte
				switch c {
				case CodecNone:
					got = out
				case CodecGzip:
					zr, err := stdgzip.NewReader(bytes.NewReader(out))
					require.NoError(t, err)
					got, err = io.ReadAll(zr)
					require.NoError(t, err)
				case CodecSnappy:
					got, err = xerial.Decode(out)
					require.NoError(t, err)
				case CodecLZ4:
					got, err = io.ReadAll(lz4.NewReader(bytes.NewReader(out)))
					require.NoError(t, err)
				case CodecZstd:
					d, err := zstd.NewReader(nil)
					require.NoError(t, err)
					got, err = d.DecodeAll(out, nil)
					d.Close()
					require.NoError(t, err)
				}
				requireSameBytes(t, in.data, got)

				if c == CodecSnappy && len(in.data) == 0 {
					// franz-go reads xerial framing only past the
					// 16-byte header, and takes a bare header for a
					// raw block; Java reads it as empty.
					return
				}
				got, err = kdec.Decompress(out, kgo.CompressionCodecType(c))
				require.NoError(t, err)
				requireSameBytes(t, in.data, got)
			})
		}
	}
}

// TestDecompressIndependentEncoders decodes what other implementations write.
func TestDecompressIndependentEncoders(t *testing.T) {
	in := compressibleRecords(20 << 10)

	// franz-go's producer: gzip, raw snappy, pierrec lz4 frames, zstd.
	for _, tc := range []struct {
		codec Codec
		kc    kgo.CompressionCodec
	}{
		{CodecGzip, kgo.GzipCompression()},
		{CodecSnappy, kgo.SnappyCompression()},
		{CodecLZ4, kgo.Lz4Compression()},
		{CodecZstd, kgo.ZstdCompression()},
	} {
		t.Run("franz-go/"+tc.codec.String(), func(t *testing.T) {
			comp, err := kgo.DefaultCompressor(tc.kc)
			require.NoError(t, err)
			out, used := comp.Compress(&bytes.Buffer{}, in)
			require.Equal(t, kgo.CompressionCodecType(tc.codec), used)
			got, err := appendDecompressed(nil, out, tc.codec, len(in))
			require.NoError(t, err)
			require.Equal(t, in, got)
		})
	}

	lz4Frame := func(t *testing.T, data []byte, opts ...lz4.Option) []byte {
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		require.NoError(t, w.Apply(opts...))
		_, err := w.Write(data)
		require.NoError(t, err)
		require.NoError(t, w.Close())
		return buf.Bytes()
	}
	big := compressibleRecords(5 << 20) // more than one 4 MiB block
	for name, frame := range map[string][]byte{
		"lz4 defaults":           lz4Frame(t, in),
		"lz4 defaults, 2 blocks": lz4Frame(t, big),
		"lz4 block checksums":    lz4Frame(t, in, lz4.BlockChecksumOption(true)),
		"lz4 content size":       lz4Frame(t, in, lz4.SizeOption(uint64(len(in)))),
		"lz4 64KiB blocks":       lz4Frame(t, big, lz4.BlockSizeOption(lz4.Block64Kb), lz4.ChecksumOption(false)),
	} {
		t.Run(name, func(t *testing.T) {
			want := in
			if len(frame) > 100<<10 {
				want = big
			}
			got, err := appendDecompressed(nil, frame, CodecLZ4, len(want))
			require.NoError(t, err)
			require.Equal(t, want, got)
		})
	}

	t.Run("raw snappy block", func(t *testing.T) {
		for _, data := range [][]byte{{'x'}, in, big} {
			got, err := appendDecompressed(nil, s2.EncodeSnappy(nil, data), CodecSnappy, len(data))
			require.NoError(t, err)
			require.Equal(t, data, got)
		}
	})

	t.Run("concatenated xerial streams", func(t *testing.T) {
		a, err := appendCompressed(nil, in[:1000], CodecSnappy)
		require.NoError(t, err)
		b, err := appendCompressed(a, in[1000:], CodecSnappy)
		require.NoError(t, err)
		got, err := appendDecompressed(nil, b, CodecSnappy, len(in))
		require.NoError(t, err)
		require.Equal(t, in, got)
	})

	gzipMember := func(data []byte) []byte {
		var buf bytes.Buffer
		zw := stdgzip.NewWriter(&buf)
		_, _ = zw.Write(data)
		_ = zw.Close()
		return buf.Bytes()
	}
	t.Run("two gzip members", func(t *testing.T) {
		src := append(gzipMember(in[:1000]), gzipMember(in[1000:])...)
		got, err := appendDecompressed(nil, src, CodecGzip, len(in))
		require.NoError(t, err)
		require.Equal(t, in, got)
	})
	t.Run("gzip trailing garbage", func(t *testing.T) {
		// GZIPInputStream ignores bytes after a member that do not
		// parse as a gzip header.
		for _, tail := range [][]byte{{0}, {0x1f}, {0x1f, 0x8b}, []byte("not a gzip member at all, just bytes")} {
			src := append(gzipMember(in), tail...)
			got, err := appendDecompressed(nil, src, CodecGzip, len(in))
			require.NoError(t, err)
			require.Equal(t, in, got)
		}
	})

	t.Run("zstd two frames", func(t *testing.T) {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		require.NoError(t, err)
		src := e.EncodeAll(in[1000:], e.EncodeAll(in[:1000], nil))
		require.NoError(t, e.Close())
		got, err := appendDecompressed(nil, src, CodecZstd, len(in))
		require.NoError(t, err)
		require.Equal(t, in, got)
	})

	t.Run("zstd skippable frame", func(t *testing.T) {
		src := []byte{0x50, 0x2A, 0x4D, 0x18, 2, 0, 0, 0, 'h', 'i'}
		src, err := appendCompressed(src, in, CodecZstd)
		require.NoError(t, err)
		got, err := appendDecompressed(nil, src, CodecZstd, len(in))
		require.NoError(t, err)
		require.Equal(t, in, got)
	})

	t.Run("zstd 16MiB window", func(t *testing.T) {
		// Larger than the pooled decoders take: decoded by a one-off
		// decoder, if the limit allows the window. The frame: no
		// content size, window descriptor 0x70 (2^24 bytes), one last
		// raw block of 3 bytes.
		src := []byte{0x28, 0xB5, 0x2F, 0xFD, 0x00, 0x70, 0x19, 0x00, 0x00, 'a', 'b', 'c'}
		var h zstd.Header
		require.NoError(t, h.Decode(src))
		require.Equal(t, uint64(16<<20), h.WindowSize)
		got, err := appendDecompressed(nil, src, CodecZstd, 16<<20)
		require.NoError(t, err)
		require.Equal(t, []byte("abc"), got)

		// A limit of 1 MiB does not justify a 16 MiB window.
		got, err = appendDecompressed(nil, src, CodecZstd, 1<<20)
		requireSentinel(t, err, errPayloadTooLarge)
		require.Empty(t, got)
	})
}

func TestLZ4HeaderBytes(t *testing.T) {
	// The HC byte is the second byte of xxh32(FLG, BD).
	require.Equal(t, byte(0x82), byte(xxh32([]byte{0x60, 0x40})>>8&0xFF))
	header := []byte{0x04, 0x22, 0x4D, 0x18, 0x60, 0x40, 0x82}
	for _, in := range compressTestInputs() {
		out, err := appendCompressed(nil, in.data, CodecLZ4)
		require.NoError(t, err)
		require.Equal(t, header, out[:7], in.name)
		require.Equal(t, []byte{0, 0, 0, 0}, out[len(out)-4:], "%s: end mark", in.name)
		if len(in.data) == 0 {
			require.Len(t, out, 11, "empty input is the header and the end mark")
		}
	}
	// One byte does not compress: stored raw.
	out, err := appendCompressed(nil, []byte{'x'}, CodecLZ4)
	require.NoError(t, err)
	require.Equal(t, append(header, 1, 0, 0, 0x80, 'x', 0, 0, 0, 0), out)
}

func TestSnappyHeaderBytes(t *testing.T) {
	header := []byte{0x82, 0x53, 0x4E, 0x41, 0x50, 0x50, 0x59, 0x00, 0, 0, 0, 1, 0, 0, 0, 1}
	for _, in := range compressTestInputs() {
		out, err := appendCompressed(nil, in.data, CodecSnappy)
		require.NoError(t, err)
		require.Equal(t, header, out[:16], in.name)
	}
	out, err := appendCompressed(nil, nil, CodecSnappy)
	require.NoError(t, err)
	require.Equal(t, header, out, "empty input is the header alone")
}

// lz4TestFrame builds an LZ4 frame from FLG, BD, the optional content size
// and the rest, with a correct header checksum byte.
func lz4TestFrame(flg, bd byte, rest ...byte) []byte {
	f := []byte{0x04, 0x22, 0x4D, 0x18, flg, bd}
	if flg&lz4FlagContentSize != 0 {
		f = append(f, 0, 0, 0, 0, 0, 0, 0, 0)
	}
	f = append(f, byte(xxh32(f[4:])>>8))
	return append(f, rest...)
}

func TestDecompressRejects(t *testing.T) {
	in := compressibleRecords(100 << 10)
	compress := func(c Codec) []byte {
		out, err := appendCompressed(nil, in, c)
		require.NoError(t, err)
		return out
	}
	cut := func(b []byte, n int) []byte { return b[:len(b)-n] }
	edit := func(b []byte, i int, v byte) []byte {
		b = bytes.Clone(b)
		b[i] = v
		return b
	}

	lz4Out := compress(CodecLZ4)
	badHC := edit(lz4Out, 6, lz4Out[6]^1)
	raw3 := []byte{3, 0, 0, 0x80, 'a', 'b', 'c'} // a raw block of 3 bytes
	checksummed := lz4TestFrame(0x70, 0x40, append(raw3, 0, 0, 0, 0, 0, 0, 0, 0)...)
	okChecksum := binary.LittleEndian.AppendUint32(lz4TestFrame(0x70, 0x40, raw3...), xxh32([]byte("abc")))
	okChecksum = append(okChecksum, 0, 0, 0, 0)
	over := binary.LittleEndian.AppendUint32(nil, (64<<10+1)|lz4Uncompressed)

	xerialFramed := compress(CodecSnappy)
	s2Only := s2.Encode(nil, in) // uses s2's repeat offsets, which snappy lacks
	_, strictErr := snappy.DecodeStrict(nil, s2Only)
	require.Error(t, strictErr, "the s2-only input must use an s2 extension")

	gz := compress(CodecGzip)
	zs := compress(CodecZstd)

	for _, tc := range []struct {
		name  string
		codec Codec
		src   []byte
		want  error
	}{
		{"unknown codec 5", 5, []byte{1}, errPayloadCorrupt},
		{"unknown codec 7", 7, nil, errPayloadCorrupt},
		{"unknown codec -1", -1, nil, errPayloadCorrupt},

		{"lz4 shorter than 6 bytes", CodecLZ4, lz4Out[:5], errPayloadTruncated},
		{"lz4 empty", CodecLZ4, nil, errPayloadTruncated},
		{"lz4 bad magic", CodecLZ4, edit(lz4Out, 0, 0x05), errPayloadCorrupt},
		{"lz4 version 0", CodecLZ4, lz4TestFrame(0x20, 0x40, 0, 0, 0, 0), errPayloadCorrupt},
		{"lz4 version 2", CodecLZ4, lz4TestFrame(0xA0, 0x40, 0, 0, 0, 0), errPayloadCorrupt},
		{"lz4 reserved FLG bit 1", CodecLZ4, lz4TestFrame(0x62, 0x40, 0, 0, 0, 0), errPayloadCorrupt},
		{"lz4 dictionary id bit", CodecLZ4, lz4TestFrame(0x61, 0x40, 0, 0, 0, 0), errPayloadCorrupt},
		{"lz4 dependent blocks", CodecLZ4, lz4TestFrame(0x40, 0x40, 0, 0, 0, 0), errPayloadCorrupt},
		{"lz4 BD bit 7", CodecLZ4, lz4TestFrame(0x60, 0xC0, 0, 0, 0, 0), errPayloadCorrupt},
		{"lz4 BD low bits", CodecLZ4, lz4TestFrame(0x60, 0x41, 0, 0, 0, 0), errPayloadCorrupt},
		{"lz4 BD size id 3", CodecLZ4, lz4TestFrame(0x60, 0x30, 0, 0, 0, 0), errPayloadCorrupt},
		{"lz4 BD size id 0", CodecLZ4, lz4TestFrame(0x60, 0x00, 0, 0, 0, 0), errPayloadCorrupt},
		{"lz4 bad header checksum", CodecLZ4, badHC, errPayloadCorrupt},
		{"lz4 no header checksum byte", CodecLZ4, lz4Out[:6], errPayloadTruncated},
		{"lz4 content size cut short", CodecLZ4, lz4TestFrame(0x68, 0x40)[:10], errPayloadTruncated},
		{"lz4 block over max", CodecLZ4, lz4TestFrame(0x60, 0x40, append(over, make([]byte, 64<<10+1)...)...), errPayloadCorrupt},
		{"lz4 bad block checksum", CodecLZ4, checksummed, errPayloadCorrupt},
		{"lz4 block checksum cut short", CodecLZ4, cut(okChecksum, 6), errPayloadTruncated},
		{"lz4 no end mark", CodecLZ4, cut(lz4Out, 4), errPayloadTruncated},
		{"lz4 end mark cut short", CodecLZ4, cut(lz4Out, 1), errPayloadTruncated},
		{"lz4 block cut short", CodecLZ4, cut(lz4Out, 5), errPayloadTruncated},
		{"lz4 header only", CodecLZ4, lz4Out[:7], errPayloadTruncated},
		{"lz4 content checksum missing", CodecLZ4, lz4TestFrame(0x64, 0x40, 0, 0, 0, 0, 1, 2), errPayloadTruncated},
		{"lz4 garbage block", CodecLZ4, lz4TestFrame(0x60, 0x40, 4, 0, 0, 0, 0xF0, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0), errPayloadCorrupt},
		{"lz4 offset before block start", CodecLZ4, lz4TestFrame(0x60, 0x40, 5, 0, 0, 0, 0x10, 'a', 2, 0, 0, 0, 0, 0, 0), errPayloadCorrupt},

		{"snappy xerial chunk cut short", CodecSnappy, cut(xerialFramed, 1), errPayloadTruncated},
		{"snappy xerial chunk length cut short", CodecSnappy, append(bytes.Clone(xerialFramed), 0, 0, 1), errPayloadTruncated},
		{"snappy xerial 1 trailing byte", CodecSnappy, append(bytes.Clone(xerialFramed), 0), errPayloadTruncated},
		{"snappy xerial version 0", CodecSnappy, edit(xerialFramed, 11, 0), errPayloadCorrupt},
		{"snappy xerial bad chunk", CodecSnappy, append(bytes.Clone(xerialHeader), 0, 0, 0, 2, 0xFF, 0xFF), errPayloadCorrupt},
		{"snappy xerial empty chunk", CodecSnappy, append(bytes.Clone(xerialHeader), 0, 0, 0, 0), errPayloadCorrupt},
		{"snappy concatenated header cut short", CodecSnappy, append(bytes.Clone(xerialFramed), xerialHeader[:10]...), errPayloadTruncated},
		{"snappy concatenated bad magic", CodecSnappy, append(bytes.Clone(xerialFramed), 0x82, 'S', 'N', 'A', 'X', 'X', 'X', 0, 0, 0, 0, 1, 0, 0, 0, 1), errPayloadCorrupt},
		{"snappy raw garbage", CodecSnappy, []byte("garbage, not snappy"), errPayloadCorrupt},
		{"snappy raw cut short", CodecSnappy, cut(s2.EncodeSnappy(nil, in), 1), errPayloadCorrupt},
		{"snappy s2 extension", CodecSnappy, s2Only, errPayloadCorrupt},

		{"gzip empty", CodecGzip, nil, errPayloadTruncated},
		{"gzip cut short", CodecGzip, gz[:len(gz)/2], errPayloadTruncated},
		{"gzip trailer cut short", CodecGzip, cut(gz, 3), errPayloadTruncated},
		{"gzip bad header", CodecGzip, edit(gz, 0, 0x1e), errPayloadCorrupt},
		{"gzip bad method", CodecGzip, edit(gz, 2, 7), errPayloadCorrupt},
		{"gzip bad crc", CodecGzip, edit(gz, len(gz)-8, gz[len(gz)-8]^1), errPayloadCorrupt},
		{"gzip corrupt deflate", CodecGzip, append(bytes.Clone(gz[:10]), 0xFF, 0xFF, 0xFF, 0xFF, 0xFF), errPayloadCorrupt},

		{"zstd garbage", CodecZstd, []byte("this is not a zstd frame at all"), errPayloadCorrupt},
		{"zstd cut short", CodecZstd, zs[:len(zs)/2], errPayloadTruncated},
		{"zstd bad checksum", CodecZstd, edit(zs, len(zs)-1, zs[len(zs)-1]^1), errPayloadCorrupt},
		// Single segment, content size 100 MiB: its window is 100 MiB.
		{"zstd content size over limit", CodecZstd, []byte{0x28, 0xB5, 0x2F, 0xFD, 0xA0, 0, 0, 0x40, 0x06, 0x01, 0x00, 0x00}, errPayloadTooLarge},
		// A 128 MiB window: more than a limit of 64 MiB allows.
		{"zstd window over the limit", CodecZstd, []byte{0x28, 0xB5, 0x2F, 0xFD, 0x00, 0x88, 0x01, 0x00, 0x00}, errPayloadTooLarge},
		// A 1 KiB window, content size (4 bytes) 100 MiB.
		{"zstd content size over the limit", CodecZstd, []byte{0x28, 0xB5, 0x2F, 0xFD, 0x80, 0x00, 0, 0, 0x40, 0x06, 0x01, 0x00, 0x00}, errPayloadTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := appendDecompressed(nil, tc.src, tc.codec, 64<<20)
			requireSentinel(t, err, tc.want)
			require.Empty(t, out)
			name := tc.codec.String()
			if !tc.codec.Valid() {
				name = "codec"
			}
			require.Contains(t, err.Error(), name, "the message names the codec")
		})
	}

	t.Run("zstd window over 128MiB", func(t *testing.T) {
		// 256 MiB: more than Kafka's zstd reader takes, whatever the limit.
		src := []byte{0x28, 0xB5, 0x2F, 0xFD, 0x00, 0x90, 0x01, 0x00, 0x00}
		out, err := appendDecompressed(nil, src, CodecZstd, 1<<30)
		requireSentinel(t, err, errPayloadCorrupt)
		require.Empty(t, out)
	})

	t.Run("appendCompressed unknown codec", func(t *testing.T) {
		out, err := appendCompressed([]byte("keep"), in, 5)
		requireSentinel(t, err, errPayloadCorrupt)
		require.Equal(t, []byte("keep"), out)
	})

	t.Run("lz4 good block checksum", func(t *testing.T) {
		got, err := appendDecompressed(nil, okChecksum, CodecLZ4, 3)
		require.NoError(t, err)
		require.Equal(t, []byte("abc"), got)
	})
	t.Run("lz4 bytes after the frame are ignored", func(t *testing.T) {
		got, err := appendDecompressed(nil, append(bytes.Clone(lz4Out), "junk"...), CodecLZ4, len(in))
		require.NoError(t, err)
		require.Equal(t, in, got)
	})
	t.Run("snappy empty input is empty", func(t *testing.T) {
		got, err := appendDecompressed(nil, nil, CodecSnappy, 0)
		require.NoError(t, err)
		require.Empty(t, got)
	})
}

func TestLZ4BlockLen(t *testing.T) {
	long := append([]byte{0xF0, 0x0A}, bytes.Repeat([]byte{'z'}, 25)...) // 15+10 literals
	for _, tc := range []struct {
		name  string
		block []byte
		n     int
		ok    bool
	}{
		{"empty", nil, 0, false},
		{"no literals", []byte{0x00}, 0, true},
		{"literals", []byte{0x30, 'a', 'b', 'c'}, 3, true},
		{"literal extension", long, 25, true},
		{"literal extension cut short", []byte{0xF0, 0xFF}, 0, false},
		{"literals past the end", []byte{0x40, 'a', 'b'}, 0, false},
		{"last token with a match length", []byte{0x11, 'a'}, 0, false},
		{"match", []byte{0x10, 'a', 1, 0, 0x10, 'b'}, 1 + 4 + 1, true},
		{"match extension", []byte{0x1F, 'a', 1, 0, 0x05, 0x10, 'b'}, 1 + 19 + 5 + 1, true},
		{"match extension cut short", []byte{0x1F, 'a', 1, 0, 0xFF}, 0, false},
		{"offset cut short", []byte{0x10, 'a', 1}, 0, false},
		{"offset 0", []byte{0x10, 'a', 0, 0, 0x10, 'b'}, 0, false},
		{"offset before the block", []byte{0x10, 'a', 2, 0, 0x10, 'b'}, 0, false},
		{"ends after a match", []byte{0x10, 'a', 1, 0}, 0, false},
	} {
		n, ok := lz4BlockLen(tc.block)
		require.Equal(t, tc.ok, ok, tc.name)
		require.Equal(t, tc.n, n, tc.name)
		if ok { // pierrec's decoder agrees
			out := make([]byte, n)
			m, err := lz4.UncompressBlock(tc.block, out)
			require.NoError(t, err, tc.name)
			require.Equal(t, n, m, tc.name)
		}
	}
}

// stallReader returns no bytes and no error, forever.
type stallReader struct{}

func (stallReader) Read([]byte) (int, error) { return 0, nil }

func TestReadAllLimited(t *testing.T) {
	got, err := readAllLimited([]byte("p"), bytes.NewReader([]byte("abcdef")), 6, CodecGzip)
	require.NoError(t, err)
	require.Equal(t, []byte("pabcdef"), got)

	got, err = readAllLimited([]byte("p"), bytes.NewReader([]byte("abcdef")), 5, CodecGzip)
	requireSentinel(t, err, errPayloadTooLarge)
	require.Equal(t, []byte("p"), got)

	got, err = readAllLimited([]byte("p"), stallReader{}, 5, CodecGzip)
	require.ErrorIs(t, err, io.ErrNoProgress)
	require.Equal(t, []byte("p"), got)
}

// TestDecompressLimit checks that no codec produces more than limit bytes,
// nor allocates much more than limit on the way.
func TestDecompressLimit(t *testing.T) {
	const limit = 1 << 20
	zeros := make([]byte, 10<<20)
	for _, c := range Codecs {
		t.Run(c.String(), func(t *testing.T) {
			src, err := appendCompressed(nil, zeros, c)
			require.NoError(t, err)

			var out []byte
			allocated := bytesAllocated(func() {
				out, err = appendDecompressed(nil, src, c, limit)
			})
			requireSentinel(t, err, errPayloadTooLarge)
			require.Empty(t, out)
			require.Less(t, cap(out), 4<<20)
			// Growing to 1 MiB allocates about 2 MiB in all, plus the
			// decoder's state when the pool has none (it may drop
			// them). zstd's decoder also holds the frame's 2 MiB window.
			bound := uint64(4 << 20)
			if c == CodecZstd {
				bound = 8 << 20
			}
			t.Logf("cap %d, %d bytes allocated", cap(out), allocated)
			require.Less(t, allocated, bound, "bytes allocated")
		})
	}
}

// bytesAllocated returns how many bytes the heap grew by while f ran.
func bytesAllocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestDecompressLimitBoundary: exactly limit bytes is fine, one more is not.
func TestDecompressLimitBoundary(t *testing.T) {
	in := compressibleRecords(300 << 10)
	for _, c := range Codecs {
		t.Run(c.String(), func(t *testing.T) {
			src, err := appendCompressed(nil, in, c)
			require.NoError(t, err)
			got, err := appendDecompressed(nil, src, c, len(in))
			require.NoError(t, err)
			require.Equal(t, in, got)
			got, err = appendDecompressed(nil, src, c, len(in)-1)
			requireSentinel(t, err, errPayloadTooLarge)
			require.Empty(t, got)
			_, err = appendDecompressed(nil, src, c, -1)
			requireSentinel(t, err, errPayloadTooLarge)
		})
	}
}

// TestCompressAppendKeepsPrefix: both functions append after what dst holds,
// whether or not dst has room.
func TestCompressAppendKeepsPrefix(t *testing.T) {
	in := compressibleRecords(100 << 10)
	prefix := []byte("prefix:")
	for _, c := range Codecs {
		for _, room := range []int{0, 1 << 20} {
			t.Run(fmt.Sprintf("%s/room %d", c, room), func(t *testing.T) {
				dst := append(make([]byte, 0, len(prefix)+room), prefix...)
				out, err := appendCompressed(dst, in, c)
				require.NoError(t, err)
				require.Equal(t, prefix, out[:len(prefix)])
				alone, err := appendCompressed(nil, in, c)
				require.NoError(t, err)
				require.Equal(t, alone, out[len(prefix):])

				dst = append(make([]byte, 0, len(prefix)+room), prefix...)
				got, err := appendDecompressed(dst, alone, c, len(in))
				require.NoError(t, err)
				require.Equal(t, prefix, got[:len(prefix)])
				require.Equal(t, in, got[len(prefix):])

				// On error, dst's length is kept.
				got, err = appendDecompressed(dst, alone, c, len(in)-1)
				require.Error(t, err)
				require.Equal(t, prefix, got)
			})
		}
	}
}

func FuzzDecompress(f *testing.F) {
	for _, c := range Codecs {
		for _, in := range [][]byte{nil, []byte("a"), compressibleRecords(3000)} {
			out, err := appendCompressed(nil, in, c)
			require.NoError(f, err)
			f.Add(append([]byte{byte(c)}, out...))
		}
	}
	f.Add(append([]byte{byte(CodecSnappy)}, s2.EncodeSnappy(nil, compressibleRecords(3000))...))
	// Every optional LZ4 field: content size, block and content checksums.
	full := lz4TestFrame(0x7C, 0x70, 3, 0, 0, 0x80, 'a', 'b', 'c')
	full = binary.LittleEndian.AppendUint32(full, xxh32([]byte("abc")))
	full = binary.LittleEndian.AppendUint32(full, 0)
	full = binary.LittleEndian.AppendUint32(full, xxh32([]byte("abc")))
	f.Add(append([]byte{byte(CodecLZ4)}, full...))
	// Concatenations Java reads: xerial streams, gzip members with
	// trailing bytes, a skippable zstd frame before a frame.
	x, _ := appendCompressed([]byte{byte(CodecSnappy)}, []byte("first"), CodecSnappy)
	x, _ = appendCompressed(x, []byte("second"), CodecSnappy)
	f.Add(x)
	g, _ := appendCompressed([]byte{byte(CodecGzip)}, []byte("first"), CodecGzip)
	g, _ = appendCompressed(g, []byte("second"), CodecGzip)
	f.Add(append(g, "trailing"...))
	z := []byte{byte(CodecZstd), 0x50, 0x2A, 0x4D, 0x18, 2, 0, 0, 0, 'h', 'i'}
	z, _ = appendCompressed(z, []byte("after a skippable frame"), CodecZstd)
	f.Add(z)
	f.Add([]byte{5, 1, 2, 3})

	const limit = 1 << 20
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		c := Codec(data[0] & 7)
		out, err := appendDecompressed(nil, data[1:], c, limit)
		if err != nil {
			n := 0
			for _, s := range payloadSentinels {
				if errors.Is(err, s) {
					n++
				}
			}
			require.Equal(t, 1, n, "error %q wraps one sentinel", err)
			require.Empty(t, out)
			return
		}
		require.True(t, c.Valid())
		require.LessOrEqual(t, len(out), limit)
		again, err := appendCompressed(nil, out, c)
		require.NoError(t, err)
		back, err := appendDecompressed(nil, again, c, limit)
		require.NoError(t, err)
		require.Equal(t, out, back)
	})
}
