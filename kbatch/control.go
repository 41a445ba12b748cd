package kbatch

import (
	"encoding/binary"
	"fmt"
)

// ControlType is the type of a control record, from its key
// (docs/formats.md, "Control batches and transaction markers"). The values are part of the format.
type ControlType int16

// The control record types. Types 2 to 6 are KRaft's; ControlUnknown stands
// for any type this package does not know, which readers ignore.
const (
	ControlUnknown        ControlType = -1
	ControlAbort          ControlType = 0
	ControlCommit         ControlType = 1
	ControlLeaderChange   ControlType = 2
	ControlSnapshotHeader ControlType = 3
	ControlSnapshotFooter ControlType = 4
	ControlKRaftVersion   ControlType = 5
	ControlKRaftVoters    ControlType = 6
)

// String returns Kafka's name for t.
func (t ControlType) String() string {
	switch t {
	case ControlAbort:
		return "ABORT"
	case ControlCommit:
		return "COMMIT"
	case ControlLeaderChange:
		return "LEADER_CHANGE"
	case ControlSnapshotHeader:
		return "SNAPSHOT_HEADER"
	case ControlSnapshotFooter:
		return "SNAPSHOT_FOOTER"
	case ControlKRaftVersion:
		return "KRAFT_VERSION"
	case ControlKRaftVoters:
		return "KRAFT_VOTERS"
	}
	return "UNKNOWN"
}

// EndTxnMarker is a transaction marker: the control batch a transaction
// coordinator has a partition append to commit or abort a producer's
// transaction.
type EndTxnMarker struct {
	// Commit is true for COMMIT, false for ABORT.
	Commit bool
	// ProducerID and ProducerEpoch are the transactional producer's.
	ProducerID    int64
	ProducerEpoch int16
	// CoordinatorEpoch is the transaction coordinator's epoch.
	CoordinatorEpoch int32
	// Timestamp is the broker's clock when the marker was written, in
	// milliseconds; it is both the base and the max timestamp.
	Timestamp int64
}

// Sizes of the control record key and the end-transaction marker value.
// They are part of the format.
const (
	controlKeySize  = 4 // version int16, type int16
	endTxnValueSize = 6 // version int16, coordinatorEpoch int32
)

// AppendEndTxnMarker appends m as a control batch (attributes 0x30, one
// record, no compression, base sequence -1) with base offset 0 and
// partition leader epoch -1, as Kafka builds it before the append assigns
// both; the batch is 78 bytes.
func AppendEndTxnMarker(dst []byte, m EndTxnMarker) []byte {
	typ := ControlAbort
	if m.Commit {
		typ = ControlCommit
	}
	var key [controlKeySize]byte
	binary.BigEndian.PutUint16(key[2:], uint16(typ))
	var value [endTxnValueSize]byte
	binary.BigEndian.PutUint32(value[2:], uint32(m.CoordinatorEpoch))

	var b Builder
	b.Reset(CodecNone)
	b.records = make([]byte, 0, 20)
	b.SetProducer(m.ProducerID, m.ProducerEpoch, NoSequence)
	b.setAttr(AttrTransactional|AttrControl, true)
	b.Append(m.Timestamp, key[:], value[:])
	dst, err := b.Build(dst)
	if err != nil {
		panic("kbatch: building a marker: " + err.Error()) // cannot happen: one record, no codec
	}
	return dst
}

// ControlRecord is what a control record's key (and, for transaction
// markers, value) say.
type ControlRecord struct {
	// Version is the key's version; Kafka reads versions above 0 as 0.
	Version int16
	// Type is the record's type, ControlUnknown for a type Kafka does not
	// define.
	Type ControlType
	// CoordinatorEpoch is the transaction coordinator's epoch, for ABORT
	// and COMMIT.
	CoordinatorEpoch int32
}

// ParseControlRecord reads a record of a control batch as Kafka's
// ControlRecordType.parse and EndTransactionMarker.deserialize do: the key
// must hold at least 4 bytes with a version >= 0; for ABORT and COMMIT, the
// value must hold at least 6 bytes with a version >= 0. Anything else is
// INVALID_RECORD.
func ParseControlRecord(r *Record) (ControlRecord, error) {
	if len(r.Key) < controlKeySize {
		return ControlRecord{}, invalidRecord("control record key must have at least %d bytes, found %d", controlKeySize, len(r.Key))
	}
	cr := ControlRecord{
		Version: int16(binary.BigEndian.Uint16(r.Key)),
		Type:    ControlType(binary.BigEndian.Uint16(r.Key[2:])),
	}
	if cr.Version < 0 {
		return ControlRecord{}, invalidRecord("invalid control record version %d", cr.Version)
	}
	if cr.Type < ControlAbort || cr.Type > ControlKRaftVoters {
		cr.Type = ControlUnknown
	}
	if cr.Type == ControlAbort || cr.Type == ControlCommit {
		if len(r.Value) < endTxnValueSize {
			return ControlRecord{}, invalidRecord("end transaction marker value must have at least %d bytes, found %d", endTxnValueSize, len(r.Value))
		}
		if v := int16(binary.BigEndian.Uint16(r.Value)); v < 0 {
			return ControlRecord{}, invalidRecord("invalid end transaction marker version %d", v)
		}
		cr.CoordinatorEpoch = int32(binary.BigEndian.Uint32(r.Value[2:]))
	}
	return cr, nil
}

// String describes the record, for logs.
func (c ControlRecord) String() string {
	if c.Type == ControlAbort || c.Type == ControlCommit {
		return fmt.Sprintf("%s(coordinatorEpoch=%d)", c.Type, c.CoordinatorEpoch)
	}
	return c.Type.String()
}
