package kbatch

import (
	"encoding/binary"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kafkaerr"
)

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestValidateStreams: Validate reads a compressed batch's records as
// they come out of the decompressor, so that validating 32 MiB of small
// records allocates a small part of that (decoder state, a read buffer,
// the largest record), where decompressing them whole allocated all of
// it; and it gives the whole read's answers.
func TestValidateStreams(t *testing.T) {
	value := make([]byte, 1000)
	for _, c := range []Codec{CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		t.Run(c.String(), func(t *testing.T) {
			b := NewBuilder(c)
			for i := range 32 << 10 { // 32 MiB of records
				value[0] = byte(i)
				b.Append(0, []byte("key"), value)
			}
			raw, err := b.Build(nil)
			require.NoError(t, err)
			var res, whole ValidateResult
			opts := &ValidateOptions{MaxMessageBytes: 8 << 20}
			streamed := allocated(func() { res, err = Validate(raw, opts) })
			require.NoError(t, err, "%v", err)
			wholeBytes := allocated(func() { whole, err = ValidateWhole(raw, opts) })
			require.NoError(t, err)
			require.Equal(t, whole, res)
			require.Greater(t, res.UncompressedBytes, 30<<20)
			t.Logf("%s: %d bytes compressed; allocated %d streaming, %d whole", c, len(raw), streamed, wholeBytes)
			require.Less(t, streamed, uint64(8<<20), "streaming holds no more than a decoder and a record")
			require.Greater(t, wholeBytes, uint64(30<<20))

			// The bound holds over the whole stream.
			_, err = Validate(raw, &ValidateOptions{MaxMessageBytes: 8 << 20, MaxUncompressedBytes: 16 << 20})
			require.Equal(t, kafkaerr.MessageTooLarge, kafkaerr.CodeOf(err), "%v", err)
		})
	}
}

// TestValidateStreamEdges: what follows the declared records, a record
// cut short, a stream cut short and a record over the bound are refused
// as the whole read refuses them.
func TestValidateStreamEdges(t *testing.T) {
	for _, c := range []Codec{CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		t.Run(c.String(), func(t *testing.T) {
			build := func(records []byte, count int32) []byte {
				b := NewBuilder(CodecNone)
				for range count {
					b.Append(0, nil, []byte("v"))
				}
				raw, err := b.Build(nil)
				require.NoError(t, err)
				comp, err := appendCompressed(nil, records, c)
				require.NoError(t, err)
				out := append(raw[:HeaderSize:HeaderSize], comp...)
				return fixBatch(out, c)
			}
			one := func() []byte {
				b := NewBuilder(CodecNone)
				b.Append(0, nil, []byte("v"))
				raw, _ := b.Build(nil)
				return raw[HeaderSize:]
			}()
			big := NewBuilder(CodecNone)
			big.Append(0, nil, make([]byte, 2<<20))
			bigRaw, _ := big.Build(nil)
			for _, tc := range []struct {
				name    string
				records []byte
				count   int32
				opts    *ValidateOptions
				code    kafkaerr.Code
			}{
				{"whole", one, 1, nil, kafkaerr.NoError},
				{"bytes after the records", append(append([]byte(nil), one...), 1, 2, 3), 1, nil, kafkaerr.InvalidRecord},
				{"a record missing", one, 2, nil, kafkaerr.InvalidRecord},
				{"a record cut short", one[:len(one)-1], 1, nil, kafkaerr.InvalidRecord},
				{"a record over the bound", bigRaw[HeaderSize:], 1, &ValidateOptions{MaxUncompressedBytes: 1 << 20}, kafkaerr.MessageTooLarge},
			} {
				raw := build(tc.records, tc.count)
				_, err := Validate(raw, tc.opts)
				require.Equal(t, tc.code, kafkaerr.CodeOf(err), "%s: %v", tc.name, err)
				_, werr := ValidateWhole(raw, tc.opts)
				require.Equal(t, kafkaerr.CodeOf(werr), kafkaerr.CodeOf(err), "%s: whole: %v", tc.name, werr)
			}
			// The compressed stream cut short, within the records.
			raw := build(append(append([]byte(nil), one...), one...), 2)
			cut := fixBatch(raw[:len(raw)-3:len(raw)-3], c)
			_, err := Validate(cut, nil)
			require.Error(t, err)
			_, werr := ValidateWhole(cut, nil)
			require.Error(t, werr)
		})
	}
}

// fixBatch marks the batch at the start of raw compressed with c and
// rewrites its length and CRC.
func fixBatch(raw []byte, c Codec) []byte {
	raw = append([]byte(nil), raw...)
	attrs := binary.BigEndian.Uint16(raw[attributesOffset:])
	binary.BigEndian.PutUint16(raw[attributesOffset:], attrs&^7|uint16(c))
	return fixCRC(raw)
}

// BenchmarkValidateCompressed compares Validate, which streams a
// compressed batch's records, with the whole read it replaced
// (ValidateWhole), on 1 MiB of 1 KiB text records; bytes are the
// uncompressed records.
//
//	go test -run '^$' -bench ValidateCompressed -count 5 ./kbatch
func BenchmarkValidateCompressed(b *testing.B) {
	value := []byte(strings.Repeat("the quick brown fox jumps over the lazy dog ", 23))
	for _, c := range []Codec{CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		bl := NewBuilder(c)
		for i := range 1 << 10 {
			value[0] = byte('a' + i%26)
			bl.Append(0, []byte("key"), value)
		}
		raw, err := bl.Build(nil)
		if err != nil {
			b.Fatal(err)
		}
		opts := &ValidateOptions{MaxMessageBytes: 8 << 20}
		for _, v := range []struct {
			name string
			f    func([]byte, *ValidateOptions) (ValidateResult, error)
		}{{"streamed", Validate}, {"whole", ValidateWhole}} {
			b.Run(c.String()+"/"+v.name, func(b *testing.B) {
				b.SetBytes(1 << 20)
				b.ReportAllocs()
				for b.Loop() {
					if _, err := v.f(raw, opts); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
