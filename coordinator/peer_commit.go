package coordinator

import (
	"encoding/binary"
	"math"

	"github.com/google/uuid"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/wal"
)

// Version 2 of the commit call's request (method "commit.v2"): a
// CommitFileRequest without reflection. Integers are varints (zig-zag,
// as encoding/binary's AppendVarint) unless the diagram says otherwise;
// a count or a string's length is a uvarint.
//
//	request     = key size uploader owners coordinates
//	key         = uvarint length, then the object key's bytes
//	size        = varint: the object's size
//	uploader    = varint: the uploading broker's ID
//	owners      = uvarint count, then a varint shard each (0: this shard alone)
//	coordinates = uvarint count, then each coordinate:
//
//	+-----------+-----------+--------+------+---------+-----------+-----------+---------+-------------+----------+----------+-------+
//	| topic ID  | partition | offset | size | records | base time | max time  | ts type | producer ID | epoch    | base seq | flags |
//	| 16 bytes  | varint    | varint | vint | varint  | varint    | varint    | 1 byte  | varint      | varint   | varint   | 1 byte|
//	+-----------+-----------+--------+------+---------+-----------+-----------+---------+-------------+----------+----------+-------+
//
// ts type is 0 (CreateTime) or 1 (LogAppendTime); flags has bit 0 for a
// transactional batch and bit 1 for a control batch, the others zero. A
// request with bytes left after its last coordinate, a value out of its
// type's range, or a count larger than the bytes left could hold, does
// not decode (INVALID_REQUEST), and nothing of it is served. The answer
// is version 1's.

// minCoordinateV2 is the fewest bytes a coordinate takes.
const minCoordinateV2 = 16 + 10*1 + 2

// appendCommitV2 appends req's version 2 encoding to b.
func appendCommitV2(b []byte, req *CommitFileRequest) []byte {
	b = binary.AppendUvarint(b, uint64(len(req.ObjectKey)))
	b = append(b, req.ObjectKey...)
	b = binary.AppendVarint(b, req.Size)
	b = binary.AppendVarint(b, int64(req.Uploader))
	b = binary.AppendUvarint(b, uint64(len(req.Owners)))
	for _, o := range req.Owners {
		b = binary.AppendVarint(b, int64(o))
	}
	b = binary.AppendUvarint(b, uint64(len(req.Coordinates)))
	for i := range req.Coordinates {
		c := &req.Coordinates[i]
		b = append(b, c.TopicID[:]...)
		b = binary.AppendVarint(b, int64(c.Partition))
		b = binary.AppendVarint(b, c.Offset)
		b = binary.AppendVarint(b, int64(c.Size))
		b = binary.AppendVarint(b, int64(c.NumRecords))
		b = binary.AppendVarint(b, c.BaseTimestamp)
		b = binary.AppendVarint(b, c.MaxTimestamp)
		b = append(b, byte(c.TimestampType))
		b = binary.AppendVarint(b, c.ProducerID)
		b = binary.AppendVarint(b, int64(c.ProducerEpoch))
		b = binary.AppendVarint(b, int64(c.BaseSequence))
		var flags byte
		if c.Transactional {
			flags |= 1
		}
		if c.Control {
			flags |= 2
		}
		b = append(b, flags)
	}
	return b
}

// peerReader reads a call's body or answer (what names it, for the
// error); the first fault sticks.
type peerReader struct {
	b    []byte
	what string
	err  error
}

func (r *peerReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = kafkaerr.New(kafkaerr.InvalidRequest, r.what+" does not decode: "+format, args...)
	}
}

// end fails if bytes are left.
func (r *peerReader) end() {
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d bytes after the last field", len(r.b))
	}
}

// string reads a uvarint length and that many bytes.
func (r *peerReader) string() string {
	n := r.count(1)
	if r.err != nil {
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *peerReader) uuid() (id uuid.UUID) {
	if len(r.b) < len(id) {
		r.fail("an ID cut short")
		r.b = nil
		return id
	}
	copy(id[:], r.b)
	r.b = r.b[len(id):]
	return id
}

// uint64 reads 8 bytes, big-endian.
func (r *peerReader) uint64() uint64 {
	if len(r.b) < 8 {
		r.fail("cut short")
		r.b = nil
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *peerReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("a uvarint cut short or too long")
		r.b = nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

// varint reads a varint in [lo, hi].
func (r *peerReader) varint(lo, hi int64) int64 {
	v, n := binary.Varint(r.b)
	switch {
	case n <= 0:
		r.fail("a varint cut short or too long")
		r.b = nil
		return 0
	case v < lo || v > hi:
		r.fail("%d is out of its range [%d, %d]", v, lo, hi)
	}
	r.b = r.b[n:]
	return v
}

// count reads a count of items of at least each bytes.
func (r *peerReader) count(each int) int {
	n := r.uvarint()
	if n > uint64(len(r.b)/each) {
		r.fail("a count of %d with %d bytes left", n, len(r.b))
		return 0
	}
	return int(n)
}

func (r *peerReader) byte() byte {
	if len(r.b) == 0 {
		r.fail("cut short")
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// readCommitV2 decodes a version 2 commit request.
func readCommitV2(body []byte) (CommitFileRequest, error) {
	r := &peerReader{b: body, what: "a forwarded commit (version 2)"}
	var req CommitFileRequest
	req.ObjectKey = r.string()
	req.Size = r.varint(0, 1<<62)
	req.Uploader = int32(r.varint(-1<<31, 1<<31-1))
	if n := r.count(1); n > 0 {
		req.Owners = make([]int, n)
		for i := range req.Owners {
			req.Owners[i] = int(r.varint(0, 1<<31-1))
		}
	}
	if n := r.count(minCoordinateV2); n > 0 {
		req.Coordinates = make([]wal.Coordinate, n)
		for i := range req.Coordinates {
			c := &req.Coordinates[i]
			if c.TopicID = r.uuid(); r.err != nil {
				break
			}
			c.Partition = int32(r.varint(0, 1<<31-1))
			c.Offset = r.varint(0, 1<<62)
			c.Size = int32(r.varint(0, 1<<31-1))
			c.NumRecords = int32(r.varint(0, 1<<31-1))
			c.BaseTimestamp = r.varint(-1<<63, 1<<63-1)
			c.MaxTimestamp = r.varint(-1<<63, 1<<63-1)
			switch t := r.byte(); t {
			case byte(kbatch.CreateTime), byte(kbatch.LogAppendTime):
				c.TimestampType = kbatch.TimestampType(t)
			default:
				r.fail("timestamp type %d", t)
			}
			c.ProducerID = r.varint(-1, 1<<63-1)
			c.ProducerEpoch = int16(r.varint(-1, 1<<15-1))
			c.BaseSequence = int32(r.varint(-1, 1<<31-1))
			flags := r.byte()
			if flags&^3 != 0 {
				r.fail("flags %#x", flags)
			}
			c.Transactional, c.Control = flags&1 != 0, flags&2 != 0
		}
	}
	r.end()
	if r.err != nil {
		return CommitFileRequest{}, r.err
	}
	return req, nil
}

// Version 3 of commit ("commit.v3") sends version 2's request, and
// answers in an encoding of its own (0x80 and the value, or 0x81 and an
// error, as peer_topics.go draws them): version 2's answer is gob, whose
// types the caller compiled with every answer, and which it decoded twice
// (the head, then the value). Integers are varints:
//
//	value   = applied results
//	applied = varint: the leader's applied log position once it had the
//	          results (at or after the commit's entry)
//	results = uvarint count, then each batch's result, in the request's
//	          order of coordinates:
//	result  = base-offset log-append-time log-start-offset error
//	error   = 1 byte: 0 for none; 1, then code kind msg, as an error
//	          answer's (a batch refused alone)
//
// An answer with bytes left after its last result, an error byte other
// than 0 or 1, or a count larger than the bytes left could hold, does not
// decode (INVALID_REQUEST).

// minResultV3 is the fewest bytes a result takes in version 3.
const minResultV3 = 4

// appendCommitAnswerV3 appends a's version 3 encoding (the value) to b.
func appendCommitAnswerV3(b []byte, a *commitAnswer) []byte {
	b = binary.AppendVarint(b, a.Applied)
	b = binary.AppendUvarint(b, uint64(len(a.Results)))
	for i := range a.Results {
		w := &a.Results[i]
		b = binary.AppendVarint(b, w.BaseOffset)
		b = binary.AppendVarint(b, w.LogAppendTime)
		b = binary.AppendVarint(b, w.LogStartOffset)
		if w.Err == nil {
			b = append(b, 0)
			continue
		}
		b = appendErrFields(append(b, 1), w.Err)
	}
	return b
}

// readCommitAnswerV3 decodes a version 3 commit answer's value.
func readCommitAnswerV3(b []byte) (commitAnswer, error) {
	r := &peerReader{b: b, what: "a commit answer (version 3)"}
	var a commitAnswer
	a.Applied = r.varint(-1, math.MaxInt64)
	if n := r.count(minResultV3); n > 0 {
		a.Results = make([]wireResult, n)
		for i := 0; i < n && r.err == nil; i++ {
			w := &a.Results[i]
			w.BaseOffset = r.varint(math.MinInt64, math.MaxInt64)
			w.LogAppendTime = r.varint(math.MinInt64, math.MaxInt64)
			w.LogStartOffset = r.varint(math.MinInt64, math.MaxInt64)
			switch e := r.byte(); e {
			case 0:
			case 1:
				w.Err = r.errFields()
			default:
				r.fail("error byte %d", e)
			}
		}
	}
	r.end()
	if r.err != nil {
		return commitAnswer{}, r.err
	}
	return a, nil
}
