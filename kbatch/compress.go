package kbatch

// The compression of a batch's records section: for each codec, the
// wire format Kafka's Java client writes (appendCompressed) and everything
// Kafka's Java reader accepts (appendDecompressed), with a bound on the
// decompressed size that holds before the memory is allocated. This file
// holds the dispatch, the errors and gzip; snappy.go, lz4.go and zstd.go
// the other codecs. docs/formats.md, "Compression", describes the formats.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/klauspost/compress/gzip"
)

// Errors from appendDecompressed. Every error it (and appendCompressed)
// returns wraps exactly one of them.
var (
	// errPayloadTruncated: the compressed stream ends early.
	errPayloadTruncated = errors.New("kbatch: compressed payload is truncated")
	// errPayloadCorrupt: anything else the decoder rejects.
	errPayloadCorrupt = errors.New("kbatch: compressed payload is corrupt")
	// errPayloadTooLarge: the payload decompresses to more than the limit.
	errPayloadTooLarge = errors.New("kbatch: decompressed payload exceeds the limit")
)

// appendCompressed appends src, compressed with codec c in the wire format
// Kafka's own Java client writes, to dst and returns the extended slice.
// CodecNone appends src unchanged. An invalid codec returns dst and an
// error wrapping errPayloadCorrupt.
func appendCompressed(dst, src []byte, c Codec) ([]byte, error) {
	switch c {
	case CodecNone:
		return append(dst, src...), nil
	case CodecGzip:
		return appendGzip(dst, src)
	case CodecSnappy:
		return appendSnappy(dst, src), nil
	case CodecLZ4:
		return appendLZ4(dst, src), nil
	case CodecZstd:
		return appendZstd(dst, src)
	}
	return dst, unknownCodecError(c)
}

// appendDecompressed appends the decompressed form of src (a batch's records
// section compressed with c) to dst and returns the extended slice. It never
// produces more than limit bytes in all: past it, it stops and returns an
// error wrapping errPayloadTooLarge, without having allocated much more than
// limit (zstd also holds the frame's window: at most the larger of 8 MiB
// and limit plus 128 KiB, see zstdMaxWindow). On error it returns dst with
// its length unchanged, possibly in a grown backing array whose spare
// capacity holds partial output.
func appendDecompressed(dst, src []byte, c Codec, limit int) ([]byte, error) {
	// Bound limit so that len(dst)+limit+1 cannot overflow.
	limit = min(max(limit, 0), math.MaxInt-1-len(dst))
	switch c {
	case CodecNone:
		if len(src) > limit {
			return dst, payloadTooLarge(c, limit)
		}
		return append(dst, src...), nil
	case CodecGzip:
		return appendGunzip(dst, src, limit)
	case CodecSnappy:
		return appendUnsnappy(dst, src, limit)
	case CodecLZ4:
		return appendUnlz4(dst, src, limit)
	case CodecZstd:
		return appendUnzstd(dst, src, limit)
	}
	return dst, unknownCodecError(c)
}

// unknownCodecError is the error for a codec Kafka does not define.
func unknownCodecError(c Codec) error {
	return fmt.Errorf("kbatch: unknown compression codec %d (Kafka defines 0 to 4): %w", int8(c), errPayloadCorrupt)
}

// payloadTooLarge is the error for a payload that decompresses past limit.
func payloadTooLarge(c Codec, limit int) error {
	return fmt.Errorf("%s: payload decompresses to more than the limit of %d bytes: %w", c, limit, errPayloadTooLarge)
}

// payloadTruncated is the error for a compressed stream that ends early;
// what says what was cut short.
func payloadTruncated(c Codec, what string) error {
	return fmt.Errorf("%s: %s: %w", c, what, errPayloadTruncated)
}

// payloadCorrupt is the error for anything else the decoder of codec c
// rejects.
func payloadCorrupt(c Codec, format string, args ...any) error {
	return fmt.Errorf("%s: %s: %w", c, fmt.Sprintf(format, args...), errPayloadCorrupt)
}

// decodeStreamError classifies an error from a streaming decoder (gzip,
// zstd): an input that ends early is truncated, anything else corrupt.
// Errors that already wrap one of the payload sentinels pass through.
func decodeStreamError(c Codec, err error) error {
	switch {
	case errors.Is(err, errPayloadTooLarge), errors.Is(err, errPayloadTruncated), errors.Is(err, errPayloadCorrupt):
		return err
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return payloadTruncated(c, "compressed data ends early")
	}
	return payloadCorrupt(c, "invalid compressed data (%v)", err)
}

// growSpare returns dst with room for at least need more bytes. It grows the
// backing array geometrically but never past a capacity of ceiling, unless
// need itself goes past it.
func growSpare(dst []byte, need, ceiling int) []byte {
	if cap(dst)-len(dst) >= need {
		return dst
	}
	newCap := min(max(2*cap(dst), 512), ceiling)
	newCap = max(newCap, len(dst)+need)
	grown := make([]byte, len(dst), newCap)
	copy(grown, dst)
	return grown
}

// readAllLimited appends everything r produces until io.EOF to dst, reading
// into dst's spare capacity and growing it geometrically. Once more than
// limit bytes have been appended (it reads at most limit+1) it stops with
// an error wrapping errPayloadTooLarge, naming codec c. Other errors from r
// are returned as they are, for the caller to classify.
func readAllLimited(dst []byte, r io.Reader, limit int, c Codec) ([]byte, error) {
	start := len(dst)
	ceiling := start + limit + 1
	for stalls := 0; ; {
		dst = growSpare(dst, 1, ceiling)
		n, err := r.Read(dst[len(dst):min(cap(dst), ceiling)])
		dst = dst[:len(dst)+n]
		if len(dst)-start > limit {
			return dst[:start], payloadTooLarge(c, limit)
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst[:start], err
		}
		if n > 0 {
			stalls = 0
		} else if stalls++; stalls >= 100 {
			return dst[:start], io.ErrNoProgress
		}
	}
}

// sliceWriter is an io.Writer that appends to a byte slice.
type sliceWriter struct{ b []byte }

// Write appends p to w.b.
func (w *sliceWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// --- gzip -------------------------------------------------------------

// gzipWriter is a pooled gzip compressor with the sliceWriter it writes to.
type gzipWriter struct {
	zw  *gzip.Writer
	out sliceWriter
}

// gzipReader is a pooled gzip decompressor with the reader it reads from.
type gzipReader struct {
	zr gzip.Reader
	in bytes.Reader
}

var (
	gzipWriters = sync.Pool{New: func() any {
		w := new(gzipWriter)
		w.zw = gzip.NewWriter(&w.out) // DefaultCompression, as GZIPOutputStream
		return w
	}}
	gzipReaders = sync.Pool{New: func() any { return new(gzipReader) }}
)

// appendGzip appends src as one RFC 1952 gzip member at the default level.
func appendGzip(dst, src []byte) ([]byte, error) {
	w := gzipWriters.Get().(*gzipWriter)
	defer gzipWriters.Put(w)
	w.out.b = dst
	w.zw.Reset(&w.out)
	_, err := w.zw.Write(src)
	if err == nil {
		err = w.zw.Close()
	}
	out := w.out.b
	w.out.b = nil // do not keep the caller's buffer alive in the pool
	if err != nil {
		// sliceWriter never fails, so neither does the compressor.
		return dst, payloadCorrupt(CodecGzip, "compressing: %v", err)
	}
	return out, nil
}

// appendGunzip appends the decompressed gzip members in src. Like Java's
// GZIPInputStream it reads concatenated members, and it ignores bytes after
// a member that do not start with a valid gzip header.
func appendGunzip(dst, src []byte, limit int) ([]byte, error) {
	r := gzipReaders.Get().(*gzipReader)
	defer func() {
		r.in.Reset(nil)
		gzipReaders.Put(r)
	}()
	start := len(dst)
	r.in.Reset(src)
	if err := r.zr.Reset(&r.in); err != nil {
		return dst, decodeStreamError(CodecGzip, err)
	}
	for {
		// One member at a time, so that what follows it can be judged
		// as Java does. bytes.Reader is an io.ByteReader, so the
		// decompressor reads no further than the member's trailer.
		r.zr.Multistream(false)
		var err error
		dst, err = readAllLimited(dst, &r.zr, limit-(len(dst)-start), CodecGzip)
		if err != nil {
			return dst[:start], decodeStreamError(CodecGzip, err)
		}
		if r.in.Len() == 0 {
			return dst, nil
		}
		if err := r.zr.Reset(&r.in); err != nil {
			return dst, nil // trailing bytes that are not a member: Java ignores them
		}
	}
}
