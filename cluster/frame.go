package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Frame layout (see the package doc). Part of the format.
const (
	// lengthSize is the length prefix of every frame.
	lengthSize = 4
	// requestHeaderSize is a request's bytes after the length prefix and
	// before the method: id, shard, deadline, method length.
	requestHeaderSize = 8 + 4 + 8 + 2
	// responseHeaderSize is a response's bytes after the length prefix and
	// before the body: id.
	responseHeaderSize = 8
)

// DefaultMaxFrameBytes is the largest frame (its length field) a TCP
// transport sends or accepts unless TCPOptions.MaxFrameBytes says
// otherwise.
const DefaultMaxFrameBytes = 64 << 20

// request is a decoded request frame. body is a view into the frame.
type request struct {
	id       uint64
	shard    uint32
	deadline int64 // Unix nanoseconds; 0 for none
	method   string
	body     []byte
}

// appendRequestHeader appends the bytes of a request frame before its body:
// the length prefix, the fixed header and the method. The caller checks
// that len(method) fits in a u16 and that the length fits in a u32.
func appendRequestHeader(dst []byte, id uint64, shard uint32, deadline int64, method string, bodyLen int) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(requestHeaderSize+len(method)+bodyLen))
	dst = binary.BigEndian.AppendUint64(dst, id)
	dst = binary.BigEndian.AppendUint32(dst, shard)
	dst = binary.BigEndian.AppendUint64(dst, uint64(deadline))
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(method)))
	return append(dst, method...)
}

// appendRequest appends a whole request frame to dst.
func appendRequest(dst []byte, r request) []byte {
	dst = appendRequestHeader(dst, r.id, r.shard, r.deadline, r.method, len(r.body))
	return append(dst, r.body...)
}

// appendResponseHeader appends the bytes of a response frame before its
// body.
func appendResponseHeader(dst []byte, id uint64, bodyLen int) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(responseHeaderSize+bodyLen))
	return binary.BigEndian.AppendUint64(dst, id)
}

// requestSize is the length field of a request with this method and body.
func requestSize(method string, bodyLen int) int {
	return requestHeaderSize + len(method) + bodyLen
}

// checkFrameSize says whether a frame whose length field is size may be
// sent to a receiver accepting max.
func checkFrameSize(size, max int) error {
	if size > max || size > math.MaxUint32 {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrFrameTooLarge, size, max)
	}
	return nil
}

// readFrame reads one frame from r and returns its bytes after the length
// prefix, in a new slice the caller owns. minLen is the header the frame
// must hold at least; a frame longer than maxLen is refused before
// anything is allocated for it. It returns io.EOF, unwrapped, when r ends
// cleanly between frames, ErrTruncated when it ends inside one.
func readFrame(r io.Reader, minLen, maxLen int) ([]byte, error) {
	var prefix [lengthSize]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("%w: in the length prefix", ErrTruncated)
		}
		return nil, err
	}
	n := uint64(binary.BigEndian.Uint32(prefix[:]))
	switch {
	case n > uint64(maxLen):
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrFrameTooLarge, n, maxLen)
	case n < uint64(minLen):
		return nil, fmt.Errorf("%w: %d bytes, shorter than its %d-byte header", ErrBadFrame, n, minLen)
	}
	frame := make([]byte, n)
	if got, err := io.ReadFull(r, frame); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("%w: %d of %d bytes", ErrTruncated, got, n)
		}
		return nil, err
	}
	return frame, nil
}

// parseRequest decodes a request frame (its bytes after the length
// prefix, as readFrame returns them). The body is a view into frame.
func parseRequest(frame []byte) (request, error) {
	if len(frame) < requestHeaderSize {
		return request{}, fmt.Errorf("%w: request of %d bytes, shorter than its header", ErrBadFrame, len(frame))
	}
	r := request{
		id:       binary.BigEndian.Uint64(frame[0:]),
		shard:    binary.BigEndian.Uint32(frame[8:]),
		deadline: int64(binary.BigEndian.Uint64(frame[12:])),
	}
	mlen := int(binary.BigEndian.Uint16(frame[20:]))
	rest := frame[requestHeaderSize:]
	if mlen > len(rest) {
		return request{}, fmt.Errorf("%w: method of %d bytes in a request with %d after its header", ErrBadFrame, mlen, len(rest))
	}
	r.method = string(rest[:mlen])
	r.body = rest[mlen:]
	return r, nil
}

// parseResponse decodes a response frame (its bytes after the length
// prefix). The body is a view into frame.
func parseResponse(frame []byte) (id uint64, body []byte, err error) {
	if len(frame) < responseHeaderSize {
		return 0, nil, fmt.Errorf("%w: response of %d bytes, shorter than its header", ErrBadFrame, len(frame))
	}
	return binary.BigEndian.Uint64(frame), frame[responseHeaderSize:], nil
}
