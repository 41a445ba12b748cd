package kbatch

import (
	"bytes"
	"fmt"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// --- zstd -------------------------------------------------------------

// zstd window bounds. A decoder allocates the window a frame declares (the
// content size for a single-segment frame) before it produces anything, so
// windows are bounded as well as output. Pooled decoders take windows up to
// zstdPooledWindow, which covers every zstd level up to 19 and franz-go's
// frames. A larger window, up to the 128 MiB that Kafka's zstd-jni reader
// takes (windowLog 27), goes to a one-off decoder, so that the pool keeps
// no big window buffer, and only if the limit justifies it: if it is at
// most limit plus one zstd block, as no back-reference into the first
// limit bytes of output reaches further.
const (
	zstdEncoderWindow = 2 << 20 // what zstd level 3 uses when streaming, as Kafka's producer does
	zstdPooledWindow  = 8 << 20
	zstdMaxWindow     = 1 << 27
	zstdMaxBlock      = 128 << 10
)

var (
	zstdEncoderOnce sync.Once
	zstdEncoder     *zstd.Encoder
	zstdEncoderErr  error
)

// zstdReader is a pooled zstd decoder with the reader it reads from.
type zstdReader struct {
	d   *zstd.Decoder
	err error // from creating d
	in  bytes.Reader
}

var zstdReaders = sync.Pool{New: func() any {
	r := new(zstdReader)
	r.d, r.err = newZstdDecoder(zstdPooledWindow)
	return r
}}

// newZstdDecoder returns a zstd decoder that decodes streams synchronously
// (concurrency 1 starts no goroutines) and rejects windows over maxWindow.
func newZstdDecoder(maxWindow uint64) (*zstd.Decoder, error) {
	return zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(maxWindow))
}

// appendZstd appends src as one zstd frame at the default level (zstd
// level 3, Kafka's default). Empty input still makes a frame, as zstd-jni
// writes one.
func appendZstd(dst, src []byte) ([]byte, error) {
	zstdEncoderOnce.Do(func() {
		zstdEncoder, zstdEncoderErr = zstd.NewWriter(nil,
			// EncodeAll starts no goroutines; concurrency only bounds
			// how many encodes run at once.
			zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithEncoderLevel(zstd.SpeedDefault),
			zstd.WithWindowSize(zstdEncoderWindow),
			zstd.WithZeroFrames(true))
	})
	if zstdEncoderErr != nil {
		return dst, payloadCorrupt(CodecZstd, "creating the encoder: %v", zstdEncoderErr)
	}
	return zstdEncoder.EncodeAll(src, dst), nil
}

// appendUnzstd appends the content of the zstd frames in src. The decoder
// streams into dst, so the output is bounded by limit; the first frame's
// header bounds its window (see zstdMaxWindow) and, when it declares its
// content size, its output. A later frame with a window over the
// decoder's maximum is reported as corrupt.
func appendUnzstd(dst, src []byte, limit int) ([]byte, error) {
	r, done, err := zstdReaderFor(src, limit)
	if err != nil {
		return dst, err
	}
	defer done()
	out, err := r.decode(dst, src, limit)
	if err != nil {
		return out[:len(dst)], decodeStreamError(CodecZstd, err)
	}
	return out, nil
}

// zstdReaderFor returns a decoder for the frames of src, if the window
// its first frame declares is one that limit allows (a frame that
// declares more content than limit is refused at once), and done, to
// give the decoder back.
func zstdReaderFor(src []byte, limit int) (*zstdReader, func(), error) {
	var h zstd.Header
	var window uint64
	if h.Decode(src) == nil && !h.Skippable {
		if h.HasFCS && h.FrameContentSize > uint64(limit) {
			return nil, nil, payloadTooLarge(CodecZstd, limit)
		}
		window = h.WindowSize
		if h.SingleSegment {
			window = h.FrameContentSize
		}
	}
	allowed := min(zstdMaxWindow, max(zstdPooledWindow, uint64(limit)+zstdMaxBlock))
	switch {
	case window > zstdMaxWindow:
		return nil, nil, payloadCorrupt(CodecZstd, "frame window of %d bytes is over %d MiB, which Kafka's zstd reader rejects too", window, zstdMaxWindow>>20)
	case window > allowed:
		return nil, nil, fmt.Errorf("zstd: frame window of %d bytes is more than the limit of %d bytes allows: %w", window, limit, errPayloadTooLarge)
	case window > zstdPooledWindow:
		d, err := newZstdDecoder(allowed)
		if err != nil {
			return nil, nil, payloadCorrupt(CodecZstd, "creating the decoder: %v", err)
		}
		return &zstdReader{d: d}, d.Close, nil
	}
	r := zstdReaders.Get().(*zstdReader)
	if r.err != nil {
		zstdReaders.Put(r)
		return nil, nil, payloadCorrupt(CodecZstd, "creating the decoder: %v", r.err)
	}
	return r, func() { zstdReaders.Put(r) }, nil
}

// decode streams the frames in src onto dst through r's decoder, then
// drops its references to src. Errors are the decoder's own, unclassified,
// or wrap errPayloadTooLarge.
func (r *zstdReader) decode(dst, src []byte, limit int) ([]byte, error) {
	r.in.Reset(src)
	defer func() {
		_ = r.d.Reset(nil) // cannot fail for a nil reader
		r.in.Reset(nil)
	}()
	if err := r.d.Reset(&r.in); err != nil {
		return dst, err
	}
	return readAllLimited(dst, r.d, limit, CodecZstd)
}
