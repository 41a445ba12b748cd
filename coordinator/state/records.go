package state

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"time"

	"github.com/diskless-go/diskless/kbatch"
	"github.com/google/uuid"
)

// The metadata log's entries and records. Part of the format: see the
// package doc for the diagram.
const (
	// entryVersion is the version appended: 1 adds the checksum of the
	// entry it follows to the header. Version 0 (no prev) still decodes.
	entryVersion      = 1
	entryHeaderSizeV0 = 9  // crc uint32, version uint8, leader epoch int32
	EntryHeaderSize   = 13 // and prev uint32
)

// recordType tells a record's payload. The values are part of the format.
type recordType uint8

const (
	recEpoch          recordType = 1
	recCreateTopic    recordType = 2
	recDeleteTopic    recordType = 3
	recCommitFile     recordType = 4
	recTrim           recordType = 5
	recInitProducerID recordType = 6
	recObjectsDeleted recordType = 7
	recOwnership      recordType = 8
	RecRemoteSegment  recordType = 9
	recOffsetCommit   recordType = 10
	recOffsetDelete   recordType = 11
	recGroupClaim     recordType = 12
	recGroupMetadata  recordType = 13
	recAddPartitions  recordType = 14
	recTxnState       recordType = 15
	recTxnBegin       recordType = 16
	recTxnMarker      recordType = 17
	recCompact        recordType = 18
	recAlterTopic     recordType = 19
	recScramUpsert    recordType = 20
	recScramDelete    recordType = 21
	recACLCreate      recordType = 22
	recACLDelete      recordType = 23
	recQuotaSet       recordType = 24
	recQuotaRemove    recordType = 25
	recCommitPending  recordType = 26
	recConfirm        recordType = 27
	recVoid           recordType = 28
)

var Castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record is one decision of the leader. Applying a record is a pure
// function of the state and the record: no check is re-run.
type Record interface {
	Kind() recordType
	AppendTo(dst []byte) []byte
}

// EpochRecord claims the log for a new leader.
type EpochRecord struct {
	Epoch  int32
	Leader string
}

// TopicConfig is a topic's configuration: the Kafka topic configs that
// diskless topics use. It is the one topic configuration of the module
// (the Broker facade's diskless.TopicConfig is this type). The zero value
// holds Kafka's defaults; a created topic's config has them filled in.
type TopicConfig struct {
	// Partitions is the number of partitions; 0 means 1. (The
	// coordinator takes it from CreatePartitionsRequest.Partitions, and
	// reports it in TopicInfo.)
	Partitions int32
	// Retention is retention.ms: batches whose max timestamp is older are
	// deleted. 0 means 7 days; negative keeps them forever (described as
	// -1). It counts in milliseconds.
	Retention time.Duration
	// RetentionBytes is retention.bytes per partition: the oldest batches
	// are deleted while the partition holds more. 0 or negative keeps them
	// (described as -1).
	RetentionBytes int64
	// Compact makes cleanup.policy compact (every record needs a key);
	// Delete adds delete to it. With neither, the policy is delete.
	Compact, Delete bool
	// LogAppendTime makes message.timestamp.type LogAppendTime: records
	// are stamped with their commit time.
	LogAppendTime bool
	// MaxMessageBytes is max.message.bytes; 0 means Kafka's 1048588.
	MaxMessageBytes int32
	// SegmentBytes is segment.bytes and SegmentTime segment.ms: the size
	// and age at which the tiered offloader (package replica) rolls the
	// segment it copies to remote storage. 0 means Kafka's 1 GiB and 7
	// days. SegmentTime counts in milliseconds (at least one).
	SegmentBytes int64
	SegmentTime  time.Duration
	// The compaction settings of compacted topics (compact.go), Kafka's
	// delete.retention.ms (how long a tombstone is kept after a clean;
	// 0 means a day, negative Kafka's 0: gone at the next clean),
	// min.compaction.lag.ms (0: none), max.compaction.lag.ms (0 means
	// forever) and min.cleanable.dirty.ratio (0 means 0.5, negative
	// Kafka's 0: clean whatever is dirty), as segment.LogOptions has
	// them. The durations count in milliseconds; a created topic keeps a
	// negative DeleteRetention as -1 ms and a negative ratio as -1.
	DeleteRetention        time.Duration
	MinCompactionLag       time.Duration
	MaxCompactionLag       time.Duration
	MinCleanableDirtyRatio float64
}

// compactionValid reports whether c's compaction settings are valid, as
// a created topic keeps them.
func (c TopicConfig) compactionValid() bool {
	return c.DeleteRetention >= -time.Millisecond && c.DeleteRetention%time.Millisecond == 0 &&
		c.MinCompactionLag >= 0 && c.MaxCompactionLag >= 0 &&
		(c.MinCleanableDirtyRatio == -1 || c.MinCleanableDirtyRatio >= 0 && c.MinCleanableDirtyRatio <= 1)
}

// normalizeCompaction returns c with its compaction settings as a created
// topic keeps them: whole milliseconds, and -1 ms and -1 for the negative
// DeleteRetention and ratio that mean Kafka's 0.
func (c TopicConfig) normalizeCompaction() TopicConfig {
	if c.DeleteRetention < 0 {
		c.DeleteRetention = -time.Millisecond
	}
	c.DeleteRetention = c.DeleteRetention.Truncate(time.Millisecond)
	c.MinCompactionLag = c.MinCompactionLag.Truncate(time.Millisecond)
	c.MaxCompactionLag = c.MaxCompactionLag.Truncate(time.Millisecond)
	if c.MinCleanableDirtyRatio < 0 {
		c.MinCleanableDirtyRatio = -1
	}
	return c
}

// Flags are the topics table's flags column: compact, delete,
// LogAppendTime.
func (c TopicConfig) Flags() int64 {
	return int64(BoolByte(c.Compact)) | int64(BoolByte(c.Delete))<<1 | int64(BoolByte(c.LogAppendTime))<<2
}

// withCompaction reports whether c has compaction settings other than the
// defaults (then records carry them).
func (c TopicConfig) withCompaction() bool {
	return c.DeleteRetention != 0 || c.MinCompactionLag != 0 || c.MaxCompactionLag != 0 || c.MinCleanableDirtyRatio != 0
}

// RetentionMs is retention.ms as the log and the database keep it: -1
// for forever.
func (c TopicConfig) RetentionMs() int64 {
	if c.Retention < 0 {
		return -1
	}
	return c.Retention.Milliseconds()
}

// SegmentMs is segment.ms as the log and the database keep it.
func (c TopicConfig) SegmentMs() int64 {
	if c.SegmentTime > 0 {
		return max(c.SegmentTime.Milliseconds(), 1)
	}
	return c.SegmentTime.Milliseconds()
}

// MsDuration is a number of milliseconds as a Duration, -1 (forever)
// kept as -1.
func MsDuration(ms int64) time.Duration {
	if ms < 0 {
		return -1
	}
	return time.Duration(ms) * time.Millisecond
}

// DefaultSegmentMs is Kafka's default of segment.ms
// (kbatch.DefaultSegmentTime) in milliseconds, as the records hold it;
// that of segment.bytes is kbatch.DefaultSegmentBytes.
const DefaultSegmentMs = int64(kbatch.DefaultSegmentTime / time.Millisecond)

type CreateTopicRecord struct {
	TopicID    uuid.UUID
	Name       string
	Partitions int32
	FirstPID   int64
	Config     TopicConfig
	// Assigned are the partitions of the topic this shard serves, in
	// increasing order; nil means all of them. Written after the other
	// fields only when not nil (records written before shards existed
	// have none).
	Assigned []int32
}

type DeleteTopicRecord struct {
	TopicID uuid.UUID
	Time    int64
}

// CommitRow is a run of batches of one partition, contiguous in one object
// and in offsets: a row of the batches table.
type CommitRow struct {
	PID          int64
	BaseOffset   int64
	LastOffset   int64
	BytePos      int64
	ByteSize     int64
	MaxTimestamp int64
}

// ProducerBatch is one accepted batch of an idempotent producer, for its
// producer state.
type ProducerBatch struct {
	PID        int64
	ProducerID int64
	Epoch      int16
	FirstSeq   int32
	LastSeq    int32
	LastOffset int64
	Count      int32
	Timestamp  int64
}

type CommitFileRecord struct {
	ObjectID   int64
	Key        string
	Size       int64
	Uploader   int32
	CommitTime int64
	Rows       []CommitRow
	Producers  []ProducerBatch
	// Owners are the shards the object was committed to, in the order
	// ownership passes (see ownership.go); nil means this shard alone.
	// Written after the other fields only when not nil.
	Owners []int32
	// Pending says the object was not known to exist when the record was
	// written (pending.go): the record's type is then 26, not 4, with the
	// same payload.
	Pending bool
}

// TrimRecord raises a partition's log start offset (DeleteRecords,
// retention).
type TrimRecord struct {
	PID      int64
	LogStart int64
	Time     int64
}

type InitProducerIDRecord struct {
	ProducerID int64
}

type ObjectsDeletedRecord struct {
	ObjectIDs []int64
}

// OwnershipRecord is this shard receiving the ownership of an object from
// the owner before it (see ownership.go). If the shard has no row of the
// object, one is made, with no batches, dead since Time, under ObjectID:
// then no commit of that key is accepted here any more.
type OwnershipRecord struct {
	ObjectID int64
	Key      string
	Owners   []int32
	Time     int64
}

func (EpochRecord) Kind() recordType { return recEpoch }

func (CreateTopicRecord) Kind() recordType { return recCreateTopic }

func (DeleteTopicRecord) Kind() recordType { return recDeleteTopic }

func (r CommitFileRecord) Kind() recordType {
	if r.Pending {
		return recCommitPending
	}
	return recCommitFile
}

func (TrimRecord) Kind() recordType { return recTrim }

func (InitProducerIDRecord) Kind() recordType { return recInitProducerID }

func (ObjectsDeletedRecord) Kind() recordType { return recObjectsDeleted }

func (OwnershipRecord) Kind() recordType { return recOwnership }

func (r EpochRecord) AppendTo(b []byte) []byte {
	b = binary.AppendVarint(b, int64(r.Epoch))
	return AppendString(b, r.Leader)
}

func (r CreateTopicRecord) AppendTo(b []byte) []byte {
	b = append(b, r.TopicID[:]...)
	b = AppendString(b, r.Name)
	b = binary.AppendVarint(b, int64(r.Partitions))
	b = binary.AppendVarint(b, r.FirstPID)
	b = appendTopicConfig(b, r.Config)
	if r.Assigned != nil {
		b = AppendInt32s(b, r.Assigned)
	}
	return b
}

// appendTopicConfig appends a topic's config as the create-topic and
// alter-topic records hold it (its partitions aside).
func appendTopicConfig(b []byte, c TopicConfig) []byte {
	b = binary.AppendVarint(b, c.RetentionMs())
	b = binary.AppendVarint(b, c.RetentionBytes)
	// Flag bit 3: segment.bytes and segment.ms follow. They are written
	// only when not the defaults, so that records of default topics are
	// what they were before these fields; without them, they are the
	// defaults.
	segmentMs := c.SegmentMs()
	withSegment := (c.SegmentBytes != 0 && c.SegmentBytes != kbatch.DefaultSegmentBytes) || (segmentMs != 0 && segmentMs != DefaultSegmentMs)
	// Flag bit 4: the compaction settings follow (only when not all
	// defaults, likewise).
	b = append(b, BoolByte(c.Compact)|BoolByte(c.Delete)<<1|BoolByte(c.LogAppendTime)<<2|BoolByte(withSegment)<<3|BoolByte(c.withCompaction())<<4)
	b = binary.AppendVarint(b, int64(c.MaxMessageBytes))
	if withSegment {
		b = binary.AppendVarint(b, cmp.Or(c.SegmentBytes, kbatch.DefaultSegmentBytes))
		b = binary.AppendVarint(b, cmp.Or(segmentMs, DefaultSegmentMs))
	}
	if c.withCompaction() {
		b = binary.AppendVarint(b, c.DeleteRetention.Milliseconds())
		b = binary.AppendVarint(b, c.MinCompactionLag.Milliseconds())
		b = binary.AppendVarint(b, c.MaxCompactionLag.Milliseconds())
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(c.MinCleanableDirtyRatio))
	}
	return b
}

func (r DeleteTopicRecord) AppendTo(b []byte) []byte {
	b = append(b, r.TopicID[:]...)
	return binary.AppendVarint(b, r.Time)
}

func (r CommitFileRecord) AppendTo(b []byte) []byte {
	b = binary.AppendVarint(b, r.ObjectID)
	b = AppendString(b, r.Key)
	b = binary.AppendVarint(b, r.Size)
	b = binary.AppendVarint(b, int64(r.Uploader))
	b = binary.AppendVarint(b, r.CommitTime)
	b = binary.AppendUvarint(b, uint64(len(r.Rows)))
	for _, w := range r.Rows {
		b = binary.AppendVarint(b, w.PID)
		b = binary.AppendVarint(b, w.BaseOffset)
		b = binary.AppendVarint(b, w.LastOffset-w.BaseOffset)
		b = binary.AppendVarint(b, w.BytePos)
		b = binary.AppendVarint(b, w.ByteSize)
		b = binary.AppendVarint(b, w.MaxTimestamp-r.CommitTime)
	}
	b = binary.AppendUvarint(b, uint64(len(r.Producers)))
	for _, p := range r.Producers {
		b = binary.AppendVarint(b, p.PID)
		b = binary.AppendVarint(b, p.ProducerID)
		b = binary.AppendVarint(b, int64(p.Epoch))
		b = binary.AppendVarint(b, int64(p.FirstSeq))
		b = binary.AppendVarint(b, int64(p.LastSeq))
		b = binary.AppendVarint(b, p.LastOffset)
		b = binary.AppendVarint(b, int64(p.Count))
		b = binary.AppendVarint(b, p.Timestamp-r.CommitTime)
	}
	if r.Owners != nil {
		b = AppendInt32s(b, r.Owners)
	}
	return b
}

func (r TrimRecord) AppendTo(b []byte) []byte {
	b = binary.AppendVarint(b, r.PID)
	b = binary.AppendVarint(b, r.LogStart)
	return binary.AppendVarint(b, r.Time)
}

func (r InitProducerIDRecord) AppendTo(b []byte) []byte {
	return binary.AppendVarint(b, r.ProducerID)
}

func (r ObjectsDeletedRecord) AppendTo(b []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(r.ObjectIDs)))
	for _, id := range r.ObjectIDs {
		b = binary.AppendVarint(b, id)
	}
	return b
}

func (r OwnershipRecord) AppendTo(b []byte) []byte {
	b = binary.AppendVarint(b, r.ObjectID)
	b = AppendString(b, r.Key)
	b = AppendInt32s(b, r.Owners)
	return binary.AppendVarint(b, r.Time)
}

// AppendInt32s appends a count and the values.
func AppendInt32s(b []byte, vs []int32) []byte {
	b = binary.AppendUvarint(b, uint64(len(vs)))
	for _, v := range vs {
		b = binary.AppendVarint(b, int64(v))
	}
	return b
}

func BoolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

func AppendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// Entry is what one log append carries: the leader's epoch and its
// records.
type Entry struct {
	Epoch int32
	// Prev is the checksum of the entry this one follows, as its leader
	// sent them (Chained: a version 0 entry has none).
	Prev    uint32
	Chained bool
	Records []Record
}

// AppendEntry encodes e: the CRC32C of everything after it, the version,
// the epoch, the checksum of the entry before, the record count, then each
// record as its type, its payload's length and its payload. It always
// writes the current version (e.Chained is for decoding).
func AppendEntry(dst []byte, e Entry) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, entryVersion)
	dst = binary.BigEndian.AppendUint32(dst, uint32(e.Epoch))
	dst = binary.BigEndian.AppendUint32(dst, e.Prev)
	dst = binary.AppendUvarint(dst, uint64(len(e.Records)))
	var scratch []byte
	for _, r := range e.Records {
		scratch = r.AppendTo(scratch[:0])
		dst = append(dst, byte(r.Kind()))
		dst = binary.AppendUvarint(dst, uint64(len(scratch)))
		dst = append(dst, scratch...)
	}
	binary.BigEndian.PutUint32(dst[start:], crc32.Checksum(dst[start+4:], Castagnoli))
	return dst
}

// DecodeEntry decodes an entry, checking its CRC and version, and every
// record's framing and fields. It never panics and allocates in proportion
// to the input only.
func DecodeEntry(b []byte) (Entry, error) {
	if len(b) < entryHeaderSizeV0 {
		return Entry{}, fmt.Errorf("%w: %d bytes are too few for an entry", ErrCorruptEntry, len(b))
	}
	if got, want := binary.BigEndian.Uint32(b), crc32.Checksum(b[4:], Castagnoli); got != want {
		return Entry{}, fmt.Errorf("%w: CRC %08x, computed %08x", ErrCorruptEntry, got, want)
	}
	e := Entry{Epoch: int32(binary.BigEndian.Uint32(b[5:]))}
	header := entryHeaderSizeV0
	switch v := b[4]; {
	case v == 0:
	case v == entryVersion && len(b) >= EntryHeaderSize:
		e.Prev, e.Chained = binary.BigEndian.Uint32(b[9:]), true
		header = EntryHeaderSize
	case v == entryVersion:
		return Entry{}, fmt.Errorf("%w: %d bytes are too few for an entry of version %d", ErrCorruptEntry, len(b), v)
	default:
		return Entry{}, fmt.Errorf("%w: version %d, this package reads 0 to %d", ErrCorruptEntry, v, entryVersion)
	}
	d := Decoder{B: b[header:]}
	n := d.Count(2) // a record takes at least a type and a length byte
	for i := 0; i < n && d.Err == nil; i++ {
		typ := recordType(d.byte())
		payload := Decoder{B: d.bytes()}
		r := payload.record(typ)
		if payload.Err == nil && len(payload.B) != 0 {
			payload.Fail("%d bytes after a record of type %d", len(payload.B), typ)
		}
		if payload.Err != nil {
			d.Err = payload.Err
			break
		}
		e.Records = append(e.Records, r)
	}
	if d.Err == nil && len(d.B) != 0 {
		d.Fail("%d bytes after the last record", len(d.B))
	}
	if d.Err != nil {
		return Entry{}, d.Err
	}
	return e, nil
}
