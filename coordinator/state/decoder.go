package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/diskless-go/diskless/kbatch"
	"github.com/google/uuid"
)

// ErrCorruptEntry: a log entry does not decode.
var ErrCorruptEntry = errors.New("coordinator: corrupt log entry")

// Decoder reads the fields of an entry with a sticky error, in the manner
// of Prometheus's Decbuf: each read after a failure returns zero, and the
// error is checked once at the end.
type Decoder struct {
	B   []byte
	Err error
}

func (d *Decoder) Fail(format string, args ...any) {
	if d.Err == nil {
		d.Err = fmt.Errorf("%w: %s", ErrCorruptEntry, fmt.Sprintf(format, args...))
	}
	d.B = nil
}

func (d *Decoder) byte() byte {
	if d.Err != nil || len(d.B) < 1 {
		d.Fail("truncated")
		return 0
	}
	c := d.B[0]
	d.B = d.B[1:]
	return c
}

func (d *Decoder) Varint() int64 {
	if d.Err != nil {
		return 0
	}
	v, n := binary.Varint(d.B)
	if n <= 0 || (n > 1 && d.B[n-1] == 0) {
		d.Fail("bad varint") // cut short, too long, or not minimal
		return 0
	}
	d.B = d.B[n:]
	return v
}

func (d *Decoder) Int32() int32 {
	v := d.Varint()
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.Fail("%d does not fit an int32", v)
		return 0
	}
	return int32(v)
}

func (d *Decoder) int16() int16 {
	v := d.Varint()
	if v < math.MinInt16 || v > math.MaxInt16 {
		d.Fail("%d does not fit an int16", v)
		return 0
	}
	return int16(v)
}

// float64 reads 8 bytes, big-endian, as a float64.
func (d *Decoder) float64() float64 {
	if d.Err != nil {
		return 0
	}
	if len(d.B) < 8 {
		d.Fail("a float64 past the end")
		return 0
	}
	v := math.Float64frombits(binary.BigEndian.Uint64(d.B))
	d.B = d.B[8:]
	return v
}

// Count reads an element count, checking that the rest of the input could
// hold that many elements of at least min bytes, before any allocation.
func (d *Decoder) Count(min int) int {
	if d.Err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.B)
	if n <= 0 || (n > 1 && d.B[n-1] == 0) {
		d.Fail("bad count")
		return 0
	}
	d.B = d.B[n:]
	if v > uint64(len(d.B)/min) {
		d.Fail("count %d is more than the %d bytes left can hold", v, len(d.B))
		return 0
	}
	return int(v)
}

func (d *Decoder) bytes() []byte {
	n := d.Count(1)
	if d.Err != nil {
		return nil
	}
	p := d.B[:n]
	d.B = d.B[n:]
	return p
}

func (d *Decoder) string() string { return string(d.bytes()) }

func (d *Decoder) uuid() uuid.UUID {
	var id uuid.UUID
	if d.Err != nil || len(d.B) < len(id) {
		d.Fail("truncated UUID")
		return id
	}
	copy(id[:], d.B)
	d.B = d.B[len(id):]
	return id
}

// topicConfig reads what appendTopicConfig wrote.
func (d *Decoder) topicConfig() TopicConfig {
	var c TopicConfig
	retention := d.Varint()
	if retention < -1 && d.Err == nil {
		d.Fail("retention.ms %d", retention) // -1 is forever: one encoding each
	}
	c.Retention = MsDuration(retention)
	c.RetentionBytes = d.Varint()
	flags := d.byte()
	if flags&^31 != 0 {
		d.Fail("unknown topic flags %#x", flags)
	}
	c.Compact, c.Delete, c.LogAppendTime = flags&1 != 0, flags&2 != 0, flags&4 != 0
	c.MaxMessageBytes = d.Int32()
	c.SegmentBytes, c.SegmentTime = kbatch.DefaultSegmentBytes, MsDuration(DefaultSegmentMs)
	if flags&8 != 0 {
		c.SegmentBytes = d.Varint()
		segMs := d.Varint()
		if segMs < 0 && d.Err == nil {
			d.Fail("segment.ms %d", segMs)
		}
		c.SegmentTime = MsDuration(segMs)
	}
	if flags&16 != 0 {
		c.DeleteRetention = time.Duration(d.Varint()) * time.Millisecond
		c.MinCompactionLag = time.Duration(d.Varint()) * time.Millisecond
		c.MaxCompactionLag = time.Duration(d.Varint()) * time.Millisecond
		c.MinCleanableDirtyRatio = d.float64()
		if d.Err == nil && (!c.compactionValid() || !c.withCompaction()) {
			d.Fail("compaction settings %v %v %v %v", c.DeleteRetention, c.MinCompactionLag, c.MaxCompactionLag, c.MinCleanableDirtyRatio)
		}
	}
	return c
}

func (d *Decoder) record(t recordType) Record {
	switch t {
	case recEpoch:
		return EpochRecord{Epoch: d.Int32(), Leader: d.string()}
	case recCreateTopic:
		r := CreateTopicRecord{TopicID: d.uuid(), Name: d.string(), Partitions: d.Int32(), FirstPID: d.Varint()}
		r.Config = d.topicConfig()
		if d.Err == nil && len(d.B) > 0 {
			r.Assigned = d.Shards("assigned partitions")
			for i, p := range r.Assigned {
				if p >= r.Partitions || (i > 0 && p <= r.Assigned[i-1]) {
					d.Fail("assigned partitions %v are not increasing below %d", r.Assigned, r.Partitions)
					break
				}
			}
		}
		return r
	case recDeleteTopic:
		return DeleteTopicRecord{TopicID: d.uuid(), Time: d.Varint()}
	case recCommitFile, recCommitPending:
		r := CommitFileRecord{ObjectID: d.Varint(), Key: d.string(), Size: d.Varint(), Uploader: d.Int32(), CommitTime: d.Varint(), Pending: t == recCommitPending}
		n := d.Count(6)
		if n > 0 {
			r.Rows = make([]CommitRow, n)
		}
		for i := range r.Rows {
			w := &r.Rows[i]
			w.PID = d.Varint()
			w.BaseOffset = d.Varint()
			w.LastOffset = w.BaseOffset + d.Varint()
			w.BytePos = d.Varint()
			w.ByteSize = d.Varint()
			w.MaxTimestamp = r.CommitTime + d.Varint()
		}
		n = d.Count(8)
		if n > 0 {
			r.Producers = make([]ProducerBatch, n)
		}
		for i := range r.Producers {
			p := &r.Producers[i]
			p.PID, p.ProducerID, p.Epoch = d.Varint(), d.Varint(), d.int16()
			p.FirstSeq, p.LastSeq, p.LastOffset = d.Int32(), d.Int32(), d.Varint()
			p.Count, p.Timestamp = d.Int32(), r.CommitTime+d.Varint()
		}
		if d.Err == nil && len(d.B) > 0 {
			r.Owners = d.Shards("owners")
		}
		return r
	case recTrim:
		return TrimRecord{PID: d.Varint(), LogStart: d.Varint(), Time: d.Varint()}
	case recInitProducerID:
		return InitProducerIDRecord{ProducerID: d.Varint()}
	case recObjectsDeleted:
		n := d.Count(1)
		r := ObjectsDeletedRecord{}
		for i := 0; i < n && d.Err == nil; i++ {
			r.ObjectIDs = append(r.ObjectIDs, d.Varint())
		}
		return r
	case recOwnership:
		r := OwnershipRecord{ObjectID: d.Varint(), Key: d.string()}
		r.Owners = d.Shards("owners")
		r.Time = d.Varint()
		return r
	case RecRemoteSegment:
		return d.remoteSegment()
	case recOffsetCommit:
		return d.offsetCommit()
	case recOffsetDelete:
		return d.offsetDelete()
	case recGroupClaim:
		return d.groupClaim()
	case recGroupMetadata:
		return d.groupMetadata()
	case recTxnState:
		return d.TxnState()
	case recCompact:
		return d.compact()
	case recTxnBegin:
		return d.txnBegin()
	case recTxnMarker:
		return d.txnMarker()
	case recAddPartitions:
		return d.addPartitions()
	case recAlterTopic:
		return d.alterTopic()
	case recScramUpsert:
		return d.scramUpsert()
	case recScramDelete:
		return d.scramDelete()
	case recACLCreate:
		return d.aclCreate()
	case recACLDelete:
		return d.aclDelete()
	case recQuotaSet:
		return d.quotaSet()
	case recQuotaRemove:
		return d.quotaRemove()
	case recConfirm:
		return ConfirmRecord{Through: d.Varint()}
	case recVoid:
		return VoidRecord{From: d.Varint(), Time: d.Varint()}
	}
	d.Fail("unknown record type %d", t)
	return nil
}

// Shards reads a non-empty list of non-negative int32s: the owners of an
// object (shard numbers) or a topic's assigned partitions. An empty list
// is not written (nil is), so it does not decode: every record has one
// encoding.
func (d *Decoder) Shards(what string) []int32 {
	n := d.Count(1)
	if d.Err == nil && n == 0 {
		d.Fail("an empty list of %s", what)
	}
	var out []int32
	for i := 0; i < n && d.Err == nil; i++ {
		v := d.Int32()
		if v < 0 {
			d.Fail("negative value %d in %s", v, what)
		}
		out = append(out, v)
	}
	return out
}
