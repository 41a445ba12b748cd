package coordinator

import (
	"context"
	"encoding/binary"
	"math"
	"time"

	"github.com/diskless-go/diskless/kafkaerr"
)

// Answers of their own encoding, and version 2 of the topics call.
//
// Version 1 of every call answers with a gob stream, and gob sends the
// types' descriptions in every stream, which the receiver compiles each
// time: for the topics call every broker makes to every shard's leader
// each second (the catalog's refresh), that compiling was most of the
// call's cost. A version may instead answer in an encoding of its own,
// which starts with a byte no gob stream starts with (gob's first byte is
// a length: below 0x80, or 0xf8 to 0xff for a longer one):
//
//	answer = 0x80 value                  the call's value, in its version's encoding
//	       | 0x81 code kind msg          an error
//	code   = varint: the Kafka error code (an int16)
//	kind   = 1 byte: which of our errors it was (wireErr.Kind, 0 to 4)
//	msg    = uvarint length, then the message's bytes
//
// A caller reads either form (decodeHead): a broker asked a version it
// does not speak, or a shard it does not lead, answers with a gob head,
// whatever the version asked.
//
// Version 2 of topics ("topics.v2") has an empty request, and answers a
// value of this form (integers are varints unless the diagram says
// otherwise, durations in nanoseconds):
//
//	topics   = uvarint count, then each topic:
//	topic    = ID (16 bytes) name partitions config assigned
//	name     = uvarint length, then the name's bytes
//	config   = partitions retention retention-bytes flags max-message-bytes
//	           segment-bytes segment-time delete-retention
//	           min-compaction-lag max-compaction-lag dirty-ratio
//	flags    = 1 byte: bit 0 compact, bit 1 delete, bit 2 log append time
//	dirty-ratio = 8 bytes: the IEEE 754 bits of min.cleanable.dirty.ratio, big-endian
//	assigned = uvarint: 0 for all the topic's partitions (nil), else n+1
//	           followed by n varints, the partitions this shard serves
//
// A body with bytes left after its last topic, a value out of its type's
// range, or a count larger than the bytes left could hold, does not
// decode (INVALID_REQUEST).

const (
	ownValue byte = 0x80 // an answer of its own encoding: the value follows
	ownError byte = 0x81 // an answer of its own encoding: an error follows
)

// ownAnswer is an answer already encoded in its version's own encoding:
// Serve sends its bytes as they are.
type ownAnswer []byte

// appendOwnError appends the error answer of w to b.
func appendOwnError(b []byte, w *wireErr) []byte {
	return appendErrFields(append(b, ownError), w)
}

// appendErrFields appends w's code, kind and message to b.
func appendErrFields(b []byte, w *wireErr) []byte {
	b = binary.AppendVarint(b, int64(w.Code))
	b = append(b, w.Kind)
	b = binary.AppendUvarint(b, uint64(len(w.Msg)))
	return append(b, w.Msg...)
}

// errFields reads an error's code, kind and message.
func (r *peerReader) errFields() *wireErr {
	w := &wireErr{Code: kafkaerr.Code(r.varint(math.MinInt16, math.MaxInt16))}
	if w.Kind = r.byte(); w.Kind > errKindVersion {
		r.fail("error kind %d", w.Kind)
	}
	w.Msg = r.string()
	return w
}

// decodeHead reads the head of any answer, gob or of its own encoding: its
// error, and for an answer of its own encoding that is a value, the
// value's bytes (own true).
func decodeHead(out []byte) (value []byte, own bool, werr *wireErr, err error) {
	if len(out) == 0 || out[0] != ownValue && out[0] != ownError {
		var head answerHead
		if err := decodeGob(out, &head); err != nil {
			return nil, false, nil, err
		}
		return nil, false, head.Err, nil
	}
	if out[0] == ownValue {
		return out[1:], true, nil, nil
	}
	r := &peerReader{b: out[1:], what: "an error answer"}
	w := r.errFields()
	r.end()
	if r.err != nil {
		return nil, false, nil, r.err
	}
	return nil, true, w, nil
}

// serveTopicsV2 serves version 2 of topics.
func serveTopicsV2(ctx context.Context, _ *Coordinator, c *leader, body []byte) func() any {
	if len(body) != 0 {
		err := kafkaerr.New(kafkaerr.InvalidRequest, "a topics call (version 2) has an empty body, not %d bytes", len(body))
		return func() any { return ownAnswer(appendOwnError(nil, toWire(err))) }
	}
	return func() any {
		ts, err := c.Topics(ctx)
		if err != nil {
			return ownAnswer(appendOwnError(nil, toWire(err)))
		}
		return ownAnswer(appendTopicsV2([]byte{ownValue}, ts))
	}
}

// appendTopicsV2 appends ts in version 2's encoding to b.
func appendTopicsV2(b []byte, ts []TopicInfo) []byte {
	b = binary.AppendUvarint(b, uint64(len(ts)))
	for i := range ts {
		t := &ts[i]
		b = append(b, t.ID[:]...)
		b = binary.AppendUvarint(b, uint64(len(t.Name)))
		b = append(b, t.Name...)
		b = binary.AppendVarint(b, int64(t.Partitions))
		c := &t.Config
		b = binary.AppendVarint(b, int64(c.Partitions))
		b = binary.AppendVarint(b, int64(c.Retention))
		b = binary.AppendVarint(b, c.RetentionBytes)
		b = append(b, boolBit(c.Compact, 0)|boolBit(c.Delete, 1)|boolBit(c.LogAppendTime, 2))
		b = binary.AppendVarint(b, int64(c.MaxMessageBytes))
		b = binary.AppendVarint(b, c.SegmentBytes)
		for _, d := range []time.Duration{c.SegmentTime, c.DeleteRetention, c.MinCompactionLag, c.MaxCompactionLag} {
			b = binary.AppendVarint(b, int64(d))
		}
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(c.MinCleanableDirtyRatio))
		if t.Assigned == nil {
			b = append(b, 0)
			continue
		}
		b = binary.AppendUvarint(b, uint64(len(t.Assigned))+1)
		for _, p := range t.Assigned {
			b = binary.AppendVarint(b, int64(p))
		}
	}
	return b
}

func boolBit(v bool, bit uint) byte {
	if v {
		return 1 << bit
	}
	return 0
}

// minTopicV2 is the fewest bytes a topic takes in version 2.
const minTopicV2 = 16 + 1 + 1 + 11*1 + 8 + 1

// readTopicsV2 decodes a version 2 topics answer's value.
func readTopicsV2(b []byte) ([]TopicInfo, error) {
	r := &peerReader{b: b, what: "a topics answer (version 2)"}
	n := r.count(minTopicV2)
	ts := make([]TopicInfo, n)
	for i := 0; i < n && r.err == nil; i++ {
		t := &ts[i]
		t.ID = r.uuid()
		t.Name = r.string()
		t.Partitions = int32(r.varint(0, math.MaxInt32))
		c := &t.Config
		c.Partitions = int32(r.varint(math.MinInt32, math.MaxInt32))
		c.Retention = time.Duration(r.varint(math.MinInt64, math.MaxInt64))
		c.RetentionBytes = r.varint(math.MinInt64, math.MaxInt64)
		flags := r.byte()
		if flags&^7 != 0 {
			r.fail("topic flags %#x", flags)
		}
		c.Compact, c.Delete, c.LogAppendTime = flags&1 != 0, flags&2 != 0, flags&4 != 0
		c.MaxMessageBytes = int32(r.varint(math.MinInt32, math.MaxInt32))
		c.SegmentBytes = r.varint(math.MinInt64, math.MaxInt64)
		for _, d := range []*time.Duration{&c.SegmentTime, &c.DeleteRetention, &c.MinCompactionLag, &c.MaxCompactionLag} {
			*d = time.Duration(r.varint(math.MinInt64, math.MaxInt64))
		}
		c.MinCleanableDirtyRatio = math.Float64frombits(r.uint64())
		if a := r.uvarint(); a > uint64(len(r.b))+1 {
			r.fail("%d partitions assigned with %d bytes left", a-1, len(r.b))
		} else if a > 0 {
			t.Assigned = make([]int32, a-1)
			for j := range t.Assigned {
				t.Assigned[j] = int32(r.varint(0, math.MaxInt32))
			}
		}
	}
	r.end()
	if r.err != nil {
		return nil, r.err
	}
	return ts, nil
}
