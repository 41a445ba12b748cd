package coordinator

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"

	"github.com/diskless-go/diskless/kbatch"
)

// ErrCorruptEntry: a log entry does not decode.
var ErrCorruptEntry = errors.New("coordinator: corrupt log entry")

// decoder reads the fields of an entry with a sticky error, in the manner
// of Prometheus's Decbuf: each read after a failure returns zero, and the
// error is checked once at the end.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrCorruptEntry, fmt.Sprintf(format, args...))
	}
	d.b = nil
}

func (d *decoder) byte() byte {
	if d.err != nil || len(d.b) < 1 {
		d.fail("truncated")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 || (n > 1 && d.b[n-1] == 0) {
		d.fail("bad varint") // cut short, too long, or not minimal
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) int32() int32 {
	v := d.varint()
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.fail("%d does not fit an int32", v)
		return 0
	}
	return int32(v)
}

func (d *decoder) int16() int16 {
	v := d.varint()
	if v < math.MinInt16 || v > math.MaxInt16 {
		d.fail("%d does not fit an int16", v)
		return 0
	}
	return int16(v)
}

// float64 reads 8 bytes, big-endian, as a float64.
func (d *decoder) float64() float64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 8 {
		d.fail("a float64 past the end")
		return 0
	}
	v := math.Float64frombits(binary.BigEndian.Uint64(d.b))
	d.b = d.b[8:]
	return v
}

// count reads an element count, checking that the rest of the input could
// hold that many elements of at least min bytes, before any allocation.
func (d *decoder) count(min int) int {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 || (n > 1 && d.b[n-1] == 0) {
		d.fail("bad count")
		return 0
	}
	d.b = d.b[n:]
	if v > uint64(len(d.b)/min) {
		d.fail("count %d is more than the %d bytes left can hold", v, len(d.b))
		return 0
	}
	return int(v)
}

func (d *decoder) bytes() []byte {
	n := d.count(1)
	if d.err != nil {
		return nil
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) string() string { return string(d.bytes()) }

func (d *decoder) uuid() uuid.UUID {
	var id uuid.UUID
	if d.err != nil || len(d.b) < len(id) {
		d.fail("truncated UUID")
		return id
	}
	copy(id[:], d.b)
	d.b = d.b[len(id):]
	return id
}

// topicConfig reads what appendTopicConfig wrote.
func (d *decoder) topicConfig() TopicConfig {
	var c TopicConfig
	retention := d.varint()
	if retention < -1 && d.err == nil {
		d.fail("retention.ms %d", retention) // -1 is forever: one encoding each
	}
	c.Retention = msDuration(retention)
	c.RetentionBytes = d.varint()
	flags := d.byte()
	if flags&^31 != 0 {
		d.fail("unknown topic flags %#x", flags)
	}
	c.Compact, c.Delete, c.LogAppendTime = flags&1 != 0, flags&2 != 0, flags&4 != 0
	c.MaxMessageBytes = d.int32()
	c.SegmentBytes, c.SegmentTime = kbatch.DefaultSegmentBytes, msDuration(defaultSegmentMs)
	if flags&8 != 0 {
		c.SegmentBytes = d.varint()
		segMs := d.varint()
		if segMs < 0 && d.err == nil {
			d.fail("segment.ms %d", segMs)
		}
		c.SegmentTime = msDuration(segMs)
	}
	if flags&16 != 0 {
		c.DeleteRetention = time.Duration(d.varint()) * time.Millisecond
		c.MinCompactionLag = time.Duration(d.varint()) * time.Millisecond
		c.MaxCompactionLag = time.Duration(d.varint()) * time.Millisecond
		c.MinCleanableDirtyRatio = d.float64()
		if d.err == nil && (!c.compactionValid() || !c.withCompaction()) {
			d.fail("compaction settings %v %v %v %v", c.DeleteRetention, c.MinCompactionLag, c.MaxCompactionLag, c.MinCleanableDirtyRatio)
		}
	}
	return c
}

func (d *decoder) record(t recordType) record {
	switch t {
	case recEpoch:
		return epochRecord{Epoch: d.int32(), Leader: d.string()}
	case recCreateTopic:
		r := createTopicRecord{TopicID: d.uuid(), Name: d.string(), Partitions: d.int32(), FirstPID: d.varint()}
		r.Config = d.topicConfig()
		if d.err == nil && len(d.b) > 0 {
			r.Assigned = d.shards("assigned partitions")
			for i, p := range r.Assigned {
				if p >= r.Partitions || (i > 0 && p <= r.Assigned[i-1]) {
					d.fail("assigned partitions %v are not increasing below %d", r.Assigned, r.Partitions)
					break
				}
			}
		}
		return r
	case recDeleteTopic:
		return deleteTopicRecord{TopicID: d.uuid(), Time: d.varint()}
	case recCommitFile:
		r := commitFileRecord{ObjectID: d.varint(), Key: d.string(), Size: d.varint(), Uploader: d.int32(), CommitTime: d.varint()}
		n := d.count(6)
		if n > 0 {
			r.Rows = make([]commitRow, n)
		}
		for i := range r.Rows {
			w := &r.Rows[i]
			w.PID = d.varint()
			w.BaseOffset = d.varint()
			w.LastOffset = w.BaseOffset + d.varint()
			w.BytePos = d.varint()
			w.ByteSize = d.varint()
			w.MaxTimestamp = r.CommitTime + d.varint()
		}
		n = d.count(8)
		if n > 0 {
			r.Producers = make([]producerBatch, n)
		}
		for i := range r.Producers {
			p := &r.Producers[i]
			p.PID, p.ProducerID, p.Epoch = d.varint(), d.varint(), d.int16()
			p.FirstSeq, p.LastSeq, p.LastOffset = d.int32(), d.int32(), d.varint()
			p.Count, p.Timestamp = d.int32(), r.CommitTime+d.varint()
		}
		if d.err == nil && len(d.b) > 0 {
			r.Owners = d.shards("owners")
		}
		return r
	case recTrim:
		return trimRecord{PID: d.varint(), LogStart: d.varint(), Time: d.varint()}
	case recInitProducerID:
		return initProducerIDRecord{ProducerID: d.varint()}
	case recObjectsDeleted:
		n := d.count(1)
		r := objectsDeletedRecord{}
		for i := 0; i < n && d.err == nil; i++ {
			r.ObjectIDs = append(r.ObjectIDs, d.varint())
		}
		return r
	case recOwnership:
		r := ownershipRecord{ObjectID: d.varint(), Key: d.string()}
		r.Owners = d.shards("owners")
		r.Time = d.varint()
		return r
	case recRemoteSegment:
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
		return d.txnState()
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
	}
	d.fail("unknown record type %d", t)
	return nil
}

// shards reads a non-empty list of non-negative int32s: the owners of an
// object (shard numbers) or a topic's assigned partitions. An empty list
// is not written (nil is), so it does not decode: every record has one
// encoding.
func (d *decoder) shards(what string) []int32 {
	n := d.count(1)
	if d.err == nil && n == 0 {
		d.fail("an empty list of %s", what)
	}
	var out []int32
	for i := 0; i < n && d.err == nil; i++ {
		v := d.int32()
		if v < 0 {
			d.fail("negative value %d in %s", v, what)
		}
		out = append(out, v)
	}
	return out
}
