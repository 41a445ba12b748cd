package kbatch

import (
	"fmt"

	"github.com/diskless-go/diskless/kafkaerr"
)

// Record is a view of one record of a batch (docs/formats.md, "Records"). Key,
// Value and the headers alias the batch's bytes (or the RecordReader's
// decompression buffer): they are valid while those are, and must be copied
// to be kept longer.
//
// Layout (varints are zig-zag LEB128):
//
//	length          varint   bytes after this field
//	attributes      int8     unused, 0
//	timestampDelta  varlong  timestamp - batch baseTimestamp
//	offsetDelta     varint   offset - batch baseOffset
//	keyLength       varint   -1: null key
//	key             bytes
//	valueLength     varint   -1: null value (a tombstone)
//	value           bytes
//	headerCount     varint
//	headers         headerKeyLength varint, key, headerValueLength varint (-1: null), value
type Record struct {
	// Attributes is the record's attribute byte; Kafka defines no bits.
	Attributes int8
	// TimestampDelta is the timestamp minus the batch's base timestamp.
	TimestampDelta int64
	// OffsetDelta is the offset minus the batch's base offset.
	OffsetDelta int32
	// Timestamp is the record's timestamp: the batch's base timestamp plus
	// the delta, or the batch's max timestamp in a LogAppendTime batch.
	Timestamp int64
	// Offset is the batch's base offset plus the offset delta.
	Offset int64
	// Sequence is the record's producer sequence, or NoSequence.
	Sequence int32
	// Key is nil for a null key; a non-nil empty slice is an empty key.
	Key []byte
	// Value is nil for a null value (a tombstone on a compacted topic); a
	// non-nil empty slice is an empty value.
	Value []byte

	headers    []byte
	numHeaders int32
}

// Header is a record header. Kafka forbids null header keys; a nil Value is
// a null value.
type Header struct {
	Key   string
	Value []byte
}

// NumHeaders returns how many headers the record has.
func (r *Record) NumHeaders() int { return int(r.numHeaders) }

// Headers returns an iterator over the record's headers; it allocates
// nothing.
func (r *Record) Headers() HeaderIter { return HeaderIter{data: r.headers, left: r.numHeaders} }

// AppendHeaders appends the record's headers to dst, copying their keys
// into strings (values still alias the batch), and returns the result.
func (r *Record) AppendHeaders(dst []Header) []Header {
	it := r.Headers()
	for it.Next() {
		dst = append(dst, Header{Key: string(it.Key()), Value: it.Value()})
	}
	return dst
}

// HeaderIter iterates a record's headers, which decoding has already
// checked.
type HeaderIter struct {
	data       []byte
	left       int32
	key, value []byte
}

// Next advances to the next header and reports whether there is one.
func (it *HeaderIter) Next() bool {
	if it.left <= 0 {
		return false
	}
	it.left--
	kl, n := readVarint(it.data)
	it.key = it.data[n : n+int(kl) : n+int(kl)]
	p := n + int(kl)
	vl, n := readVarint(it.data[p:])
	p += n
	if vl < 0 {
		it.value = nil
	} else {
		it.value = it.data[p : p+int(vl) : p+int(vl)]
		p += int(vl)
	}
	it.data = it.data[p:]
	return true
}

// Key returns the current header's key (UTF-8 by Kafka's convention).
func (it *HeaderIter) Key() []byte { return it.key }

// Value returns the current header's value; nil is a null value.
func (it *HeaderIter) Value() []byte { return it.value }

// recordBase holds the batch fields that a record's values are relative to.
type recordBase struct {
	baseOffset    int64
	baseTimestamp int64
	baseSequence  int32
	logAppendTime bool
	maxTimestamp  int64
}

func newRecordBase(b Batch) recordBase {
	return recordBase{
		baseOffset:    b.BaseOffset(),
		baseTimestamp: b.BaseTimestamp(),
		baseSequence:  b.BaseSequence(),
		logAppendTime: b.Attributes()&AttrLogAppendTime != 0,
		maxTimestamp:  b.MaxTimestamp(),
	}
}

func invalidRecord(format string, args ...any) error {
	return &kafkaerr.Error{Code: kafkaerr.InvalidRecord, Message: fmt.Sprintf(format, args...)}
}

// decodeRecord decodes the record at the start of data into r, with Kafka's
// checks (DefaultRecord.readFrom): the record must fit, every length must be
// within it, header keys may not be null, and the fields must take exactly
// the declared length. It returns the record's encoded size.
//
// It is the hot loop of Validate, so each varint takes its one-byte case
// inline and calls the slow path only for longer ones: the compiler will
// not inline readVarint.
func decodeRecord(data []byte, base *recordBase, r *Record) (int, error) {
	var bodyLen int32
	n := 1
	if c := at(data, 0); c < 0x80 {
		bodyLen = unzigzag32(uint32(c))
	} else {
		bodyLen, n = readVarintSlow(data)
	}
	if n <= 0 {
		return 0, invalidRecord("record length varint is truncated or too long")
	}
	if bodyLen < 0 || int(bodyLen) > len(data)-n {
		return 0, invalidRecord("invalid record size: %d bytes declared, %d remain in the batch", bodyLen, len(data)-n)
	}
	body := data[n : n+int(bodyLen)]
	if len(body) == 0 {
		return 0, invalidRecord("empty record body")
	}
	r.Attributes = int8(body[0])
	p := 1
	var tsd int64
	if c := at(body, p); c < 0x80 {
		tsd = unzigzag64(uint64(c))
		p++
	} else {
		var m int
		if tsd, m = readVarlongSlow(body[p:]); m <= 0 {
			return 0, errRecordStructure
		}
		p += m
	}
	var od int32
	if c := at(body, p); c < 0x80 {
		od = unzigzag32(uint32(c))
		p++
	} else {
		var m int
		if od, m = readVarintSlow(body[p:]); m <= 0 {
			return 0, errRecordStructure
		}
		p += m
	}
	base.place(r, tsd, od)

	var kl int32
	if c := at(body, p); c < 0x80 {
		kl = unzigzag32(uint32(c))
		p++
	} else {
		var m int
		if kl, m = readVarintSlow(body[p:]); m <= 0 {
			return 0, errRecordStructure
		}
		p += m
	}
	if kl >= 0 {
		if int(kl) > len(body)-p {
			return 0, invalidRecord("record key of %d bytes runs past the record", kl)
		}
		r.Key = body[p : p+int(kl) : p+int(kl)]
		p += int(kl)
	} else {
		r.Key = nil
	}

	var vl int32
	if c := at(body, p); c < 0x80 {
		vl = unzigzag32(uint32(c))
		p++
	} else {
		var m int
		if vl, m = readVarintSlow(body[p:]); m <= 0 {
			return 0, errRecordStructure
		}
		p += m
	}
	if vl >= 0 {
		if int(vl) > len(body)-p {
			return 0, invalidRecord("record value of %d bytes runs past the record", vl)
		}
		r.Value = body[p : p+int(vl) : p+int(vl)]
		p += int(vl)
	} else {
		r.Value = nil
	}

	var hc int32
	if c := at(body, p); c < 0x80 {
		hc = unzigzag32(uint32(c))
		p++
	} else {
		var m int
		if hc, m = readVarintSlow(body[p:]); m <= 0 {
			return 0, errRecordStructure
		}
		p += m
	}
	if hc < 0 {
		return 0, invalidRecord("invalid number of record headers %d", hc)
	}
	if int(hc) > len(body)-p {
		return 0, invalidRecord("invalid number of record headers: %d is more than the %d bytes left", hc, len(body)-p)
	}
	hstart := p
	for i := int32(0); i < hc; i++ {
		var hkl int32
		if c := at(body, p); c < 0x80 {
			hkl = unzigzag32(uint32(c))
			p++
		} else {
			var m int
			if hkl, m = readVarintSlow(body[p:]); m <= 0 {
				return 0, errRecordStructure
			}
			p += m
		}
		if hkl < 0 {
			return 0, invalidRecord("invalid negative header key size %d", hkl)
		}
		if int(hkl) > len(body)-p {
			return 0, invalidRecord("header key of %d bytes runs past the record", hkl)
		}
		p += int(hkl)
		var hvl int32
		if c := at(body, p); c < 0x80 {
			hvl = unzigzag32(uint32(c))
			p++
		} else {
			var m int
			if hvl, m = readVarintSlow(body[p:]); m <= 0 {
				return 0, errRecordStructure
			}
			p += m
		}
		if hvl >= 0 {
			if int(hvl) > len(body)-p {
				return 0, invalidRecord("header value of %d bytes runs past the record", hvl)
			}
			p += int(hvl)
		}
	}
	r.headers = body[hstart:p:p]
	r.numHeaders = hc
	if p != len(body) {
		return 0, invalidRecord("invalid record size: expected to read %d bytes in record payload, but read %d", len(body), p)
	}
	return n + len(body), nil
}

// place sets r's deltas, and the timestamp, offset and sequence they give
// in the batch of base.
func (base *recordBase) place(r *Record, tsd int64, od int32) {
	r.TimestampDelta = tsd
	r.OffsetDelta = od
	if base.logAppendTime {
		r.Timestamp = base.maxTimestamp
	} else {
		r.Timestamp = base.baseTimestamp + tsd
	}
	r.Offset = base.baseOffset + int64(od)
	if base.baseSequence >= 0 {
		r.Sequence = IncrementSequence(base.baseSequence, od)
	} else {
		r.Sequence = NoSequence
	}
}

// errRecordStructure is a varint cut short or longer than its type allows.
var errRecordStructure = &kafkaerr.Error{Code: kafkaerr.InvalidRecord, Message: "found invalid record structure: a varint is truncated or too long"}

// at returns b[i], or 0x80 (a continuation byte, which sends a varint to
// the slow path) when i is out of range.
func at(b []byte, i int) byte {
	if i < len(b) {
		return b[i]
	}
	return 0x80
}
