package state

import (
	"encoding/binary"

	"github.com/diskless-go/diskless/wal/walmeta"
)

// TxnStateRecord is a transactional ID's whole state after a transition.
type TxnStateRecord struct {
	Txn Transaction
}

// TxnBeginRecord opens a producer's transaction in a partition.
type TxnBeginRecord struct {
	PID        int64
	ProducerID int64
	Epoch      int16
}

// TxnMarkerRecord ends a producer's transaction in a partition with a
// marker at Offset (the partition's high watermark). First is the
// transaction's first offset there, -1 if it wrote nothing.
type TxnMarkerRecord struct {
	PID              int64
	ProducerID       int64
	Epoch            int16
	Commit           bool
	CoordinatorEpoch int32
	Offset           int64
	First            int64
	Time             int64
}

func (TxnStateRecord) Kind() recordType { return recTxnState }

func (TxnBeginRecord) Kind() recordType { return recTxnBegin }

func (TxnMarkerRecord) Kind() recordType { return recTxnMarker }

func (r TxnStateRecord) AppendTo(b []byte) []byte {
	t := &r.Txn
	b = AppendString(b, t.ID)
	b = binary.AppendVarint(b, t.ProducerID)
	b = binary.AppendVarint(b, int64(t.Epoch))
	b = append(b, byte(t.State))
	b = binary.AppendVarint(b, int64(t.TimeoutMs))
	b = binary.AppendVarint(b, t.StartTime)
	b = binary.AppendVarint(b, t.UpdateTime)
	b = binary.AppendUvarint(b, uint64(len(t.Partitions)))
	for _, p := range t.Partitions {
		b = append(b, p.TopicID[:]...)
		b = binary.AppendVarint(b, int64(p.Partition))
	}
	b = binary.AppendUvarint(b, uint64(len(t.Groups)))
	for _, g := range t.Groups {
		b = AppendString(b, g)
	}
	b = binary.AppendUvarint(b, uint64(len(t.Offsets)))
	for _, o := range t.Offsets {
		b = AppendString(b, o.Group)
		b = appendGroupOffset(b, o.GroupOffset)
	}
	if t.V2 {
		// Transactions v2's fields, written only once the cluster's
		// transaction.version allows (coordinator/features.go); a state
		// without them has none.
		b = append(b, 1)
		b = binary.AppendVarint(b, t.PrevProducerID)
		b = binary.AppendVarint(b, t.NextProducerID)
	}
	return b
}

func (d *Decoder) TxnState() TxnStateRecord {
	var t Transaction
	t.ID, t.ProducerID, t.Epoch = d.string(), d.Varint(), d.int16()
	st := d.byte()
	if st > byte(TxnDead) && d.Err == nil {
		d.Fail("unknown transaction state %d", st)
	}
	t.State = TxnState(st)
	t.TimeoutMs, t.StartTime, t.UpdateTime = d.Int32(), d.Varint(), d.Varint()
	if n := d.Count(17); n > 0 {
		t.Partitions = make([]walmeta.TopicPartition, n)
		for i := range t.Partitions {
			t.Partitions[i] = walmeta.TopicPartition{TopicID: d.uuid(), Partition: d.Int32()}
		}
	}
	if n := d.Count(1); n > 0 {
		t.Groups = make([]string, n)
		for i := range t.Groups {
			t.Groups[i] = d.string()
		}
	}
	if n := d.Count(22); n > 0 {
		t.Offsets = make([]TxnOffset, n)
		for i := range t.Offsets {
			t.Offsets[i].Group = d.string()
			t.Offsets[i].GroupOffset = d.groupOffset()
		}
	}
	if d.Err == nil && len(d.B) > 0 {
		if f := d.byte(); f != 1 && d.Err == nil {
			d.Fail("transactions v2 flag %d", f)
		}
		t.V2, t.PrevProducerID, t.NextProducerID = true, d.Varint(), d.Varint()
	}
	if t.ID == "" && d.Err == nil {
		d.Fail("a transaction with no ID")
	}
	return TxnStateRecord{Txn: t}
}

func (r TxnBeginRecord) AppendTo(b []byte) []byte {
	b = binary.AppendVarint(b, r.PID)
	b = binary.AppendVarint(b, r.ProducerID)
	return binary.AppendVarint(b, int64(r.Epoch))
}

func (d *Decoder) txnBegin() TxnBeginRecord {
	return TxnBeginRecord{PID: d.Varint(), ProducerID: d.Varint(), Epoch: d.int16()}
}

func (r TxnMarkerRecord) AppendTo(b []byte) []byte {
	b = binary.AppendVarint(b, r.PID)
	b = binary.AppendVarint(b, r.ProducerID)
	b = binary.AppendVarint(b, int64(r.Epoch))
	b = append(b, BoolByte(r.Commit))
	b = binary.AppendVarint(b, int64(r.CoordinatorEpoch))
	b = binary.AppendVarint(b, r.Offset)
	b = binary.AppendVarint(b, r.First)
	return binary.AppendVarint(b, r.Time)
}

func (d *Decoder) txnMarker() TxnMarkerRecord {
	r := TxnMarkerRecord{PID: d.Varint(), ProducerID: d.Varint(), Epoch: d.int16()}
	switch c := d.byte(); c {
	case 0, 1:
		r.Commit = c == 1
	default:
		d.Fail("a marker flag %d", c)
	}
	r.CoordinatorEpoch, r.Offset, r.First, r.Time = d.Int32(), d.Varint(), d.Varint(), d.Varint()
	if d.Err == nil && (r.Offset < 0 || r.First < -1 || r.First > r.Offset) {
		d.Fail("a marker at %d of a transaction from %d", r.Offset, r.First)
	}
	return r
}
