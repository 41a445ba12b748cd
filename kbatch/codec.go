package kbatch

import "fmt"

// Codec is a batch's compression codec: the low three bits of its
// attributes (docs/formats.md, "Attributes"). The values are part of the format.
type Codec int8

// The codecs Kafka defines.
const (
	CodecNone   Codec = 0
	CodecGzip   Codec = 1
	CodecSnappy Codec = 2
	CodecLZ4    Codec = 3
	CodecZstd   Codec = 4
)

// Codecs lists every codec Kafka defines, CodecNone first.
var Codecs = []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd}

// Valid reports whether c is a codec Kafka defines (0 to 4).
func (c Codec) Valid() bool { return c >= CodecNone && c <= CodecZstd }

// String returns the name Kafka's compression.type setting uses for c.
func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecGzip:
		return "gzip"
	case CodecSnappy:
		return "snappy"
	case CodecLZ4:
		return "lz4"
	case CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", int8(c))
}
