package kafkaserver

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The frames of the Kafka protocol: a request's header and body as the
// server parses them (refusing what Kafka refuses), and a response's.

// parseRequest parses a request frame without its size.
func parseRequest(body []byte) (*request, error) {
	rd := kbin.Reader{Src: body}
	key, version, corr := rd.Int16(), rd.Int16(), rd.Int32()
	clientID := rd.NullableString()
	if !rd.Ok() {
		return nil, errors.New("a truncated request header")
	}
	r := &request{corr: corr, size: int64(len(body))}
	if clientID != nil {
		r.clientID = *clientID
	}
	if !serves(key, version) {
		if key == apiVersionsKey {
			r.kreq = &kmsg.ApiVersionsRequest{Version: version} // answered in version 0, unread
			return r, nil
		}
		return nil, fmt.Errorf("%s (key %d) version %d is not served", kmsg.NameForKey(key), key, version)
	}
	r.kreq = kmsg.RequestForKey(key)
	r.kreq.SetVersion(version)
	if r.kreq.IsFlexible() {
		kmsg.SkipTags(&rd)
	}
	if !rd.Ok() {
		return nil, errors.New("a truncated request header")
	}
	if err := r.kreq.ReadFrom(rd.Src); err != nil {
		return nil, fmt.Errorf("parsing %s v%d: %w", kmsg.NameForKey(key), version, err)
	}
	// kmsg reads a negative array length as an empty array, and a
	// negative string length as an empty string; Kafka refuses both
	// (where the field is not nullable: -1 there is null, which kmsg
	// keeps). What was read must encode back to what was sent: if it
	// does not, the request held such a length (or another encoding no
	// client writes), and the connection closes, as Kafka closes it on a
	// request it cannot parse. Bytes after the request are let be, as
	// Kafka lets them be.
	//
	// A Produce request, which carries the records (megabytes a request,
	// that encoding back would copy and compare), is checked by walking
	// its lengths instead (produceLengthsOK).
	var same bool
	if key == int16(kmsg.Produce) {
		same = produceLengthsOK(rd.Src, version)
	} else {
		encp := encodeBuffers.Get().(*[]byte)
		enc := r.kreq.AppendTo((*encp)[:0])
		same = bytes.HasPrefix(rd.Src, enc)
		if cap(enc) <= maxPooledEncodeBuffer {
			*encp = enc[:0]
		}
		encodeBuffers.Put(encp)
	}
	if !same {
		return nil, fmt.Errorf("%s v%d does not encode back to the bytes sent: a negative array or string length where the field is not nullable", kmsg.NameForKey(key), version)
	}
	return r, nil
}

// produceLengthsOK reports whether the body of a Produce request of
// version (after its header) has a length for every non-nullable string
// and array: its topics, their names and partitions. A negative one (a
// null in the compact encoding of flexible versions) is what Kafka
// refuses ("non-nullable field ... was serialized as null") and kmsg
// reads as empty. The transactional ID and the records are nullable: any
// negative length is null there, as in Kafka. It reads no further than
// the last partition's records and the tags that follow.
func produceLengthsOK(body []byte, version int16) bool {
	rd := kbin.Reader{Src: body}
	flexible := version >= 9
	// length reads a string's, an array's or bytes' length: -1 (or any
	// negative) for null.
	length := func(array, bytes32 bool) int {
		switch {
		case flexible:
			return int(rd.Uvarint()) - 1
		case array || bytes32:
			return int(rd.Int32())
		}
		return int(rd.Int16())
	}
	skipString := func(nullable bool) bool {
		n := length(false, false)
		if n < 0 {
			return nullable
		}
		rd.Span(n)
		return rd.Ok()
	}
	if version >= 3 && !skipString(true) { // transactional_id
		return false
	}
	rd.Int16() // acks
	rd.Int32() // timeout
	topics := length(true, false)
	if topics < 0 || !rd.Ok() {
		return false
	}
	for range topics {
		if !skipString(false) {
			return false
		}
		partitions := length(true, false)
		if partitions < 0 || !rd.Ok() {
			return false
		}
		for range partitions {
			rd.Int32() // index
			if n := length(false, true); n > 0 {
				rd.Span(n)
			}
			if flexible {
				kmsg.SkipTags(&rd)
			}
			if !rd.Ok() {
				return false
			}
		}
		if flexible {
			kmsg.SkipTags(&rd)
		}
	}
	if flexible {
		kmsg.SkipTags(&rd)
	}
	return rd.Ok()
}

// encodeBuffers are the buffers parseRequest encodes requests back into;
// maxPooledEncodeBuffer is the largest kept.
var encodeBuffers = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledEncodeBuffer = 1 << 20

// apiVersionsKey is ApiVersions' key.
const apiVersionsKey = 18

// appendResponse appends a response frame: its size, the response header
// (the correlation ID; header v1 adds empty tagged fields in flexible
// versions, except for ApiVersions, whose response header is always v0)
// and the body.
func appendResponse(dst []byte, corr int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	if resp.IsFlexible() && resp.Key() != apiVersionsKey {
		dst = append(dst, 0) // no tagged fields
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}
