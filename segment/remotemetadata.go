package segment

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/google/uuid"

	"github.com/diskless-go/diskless/kafkaerr"
)

// The RemoteLogSegmentMetadata record of Kafka's default remote log
// metadata manager, as stored in the __remote_log_metadata topic
// (docs/formats.md, "RemoteLogSegmentMetadata"; Kafka's RemoteLogSegmentMetadataRecord.json,
// RemoteLogSegmentMetadataTransform and AbstractApiMessageSerde). The
// constants are part of the format.
const (
	// remoteLogMetadataFrameVersion is the serde's frame version.
	remoteLogMetadataFrameVersion = 1
	// remoteLogSegmentMetadataAPIKey is the record's apiKey.
	remoteLogSegmentMetadataAPIKey = 0
	// remoteLogSegmentMetadataVersion is the version Marshal writes.
	// Version 1 (Kafka 4.2) adds only the tagged field BrokerLeaderEpoch
	// (tag 1); Unmarshal reads both.
	remoteLogSegmentMetadataVersion    = 0
	remoteLogSegmentMetadataMaxVersion = 1
	// txnIndexEmptyTag is the tag of the TxnIndexEmpty tagged field.
	txnIndexEmptyTag = 0
	// maxMetadataStringLen is the longest string a Kafka message holds.
	maxMetadataStringLen = math.MaxInt16
)

// RemoteLogSegmentState is the state of a remote segment's copy or
// deletion (Kafka's RemoteLogSegmentState). The values are part of the
// format.
type RemoteLogSegmentState int8

// The remote segment states.
const (
	CopySegmentStarted    RemoteLogSegmentState = 0
	CopySegmentFinished   RemoteLogSegmentState = 1
	DeleteSegmentStarted  RemoteLogSegmentState = 2
	DeleteSegmentFinished RemoteLogSegmentState = 3
)

// String returns Kafka's name for s.
func (s RemoteLogSegmentState) String() string {
	switch s {
	case CopySegmentStarted:
		return "COPY_SEGMENT_STARTED"
	case CopySegmentFinished:
		return "COPY_SEGMENT_FINISHED"
	case DeleteSegmentStarted:
		return "DELETE_SEGMENT_STARTED"
	case DeleteSegmentFinished:
		return "DELETE_SEGMENT_FINISHED"
	}
	return fmt.Sprintf("RemoteLogSegmentState(%d)", int8(s))
}

// valid reports whether Kafka's RemoteLogSegmentState.forId knows s.
func (s RemoteLogSegmentState) valid() bool {
	return s >= CopySegmentStarted && s <= DeleteSegmentFinished
}

// RemoteLogSegmentMetadata is Kafka's RemoteLogSegmentMetadata (KIP-405):
// what a broker records about one copy of a segment to remote storage.
// Marshal and Unmarshal give it the bytes of a RemoteLogSegmentMetadata
// record in Kafka's __remote_log_metadata topic.
type RemoteLogSegmentMetadata struct {
	// TopicID, Topic and Partition are the segment's partition (Kafka's
	// TopicIdPartition).
	TopicID   uuid.UUID
	Topic     string
	Partition int32
	// SegmentID is unique per copy attempt (RemoteLogSegmentId.id).
	SegmentID uuid.UUID
	// StartOffset and EndOffset are the segment's first and last offsets,
	// both inclusive; EndOffset is the next segment's base offset minus 1.
	StartOffset int64
	EndOffset   int64
	// MaxTimestampMs is the segment's greatest record timestamp.
	MaxTimestampMs int64
	// BrokerID is the broker that generated the event.
	BrokerID int32
	// EventTimestampMs is when the event was generated.
	EventTimestampMs int64
	// SegmentLeaderEpochs maps the leader epochs of the segment's records
	// to their start offsets, by ascending epoch; it must not be empty.
	SegmentLeaderEpochs []EpochEntry
	// SegmentSizeInBytes is the size of the segment's .log.
	SegmentSizeInBytes int32
	// CustomMetadata is what the remote storage manager returned; nil for
	// none (a non-nil empty slice is an empty value).
	CustomMetadata []byte
	// State is the state of the copy or deletion.
	State RemoteLogSegmentState
	// TxnIndexEmpty says the segment's transaction index is empty (a
	// tagged field, written only when true).
	TxnIndexEmpty bool
}

// check applies the rules of Kafka's RemoteLogSegmentMetadata constructor
// and of its record's writer.
func (m *RemoteLogSegmentMetadata) check() error {
	switch {
	case m.StartOffset < 0:
		return fmt.Errorf("start offset %d is negative", m.StartOffset)
	case m.EndOffset < m.StartOffset:
		return fmt.Errorf("end offset %d is below the start offset %d", m.EndOffset, m.StartOffset)
	case len(m.SegmentLeaderEpochs) == 0:
		return fmt.Errorf("no segment leader epochs")
	case !m.State.valid():
		return fmt.Errorf("unknown state %d", int8(m.State))
	case len(m.Topic) > maxMetadataStringLen:
		return fmt.Errorf("topic name of %d bytes is longer than %d", len(m.Topic), maxMetadataStringLen)
	case int64(len(m.CustomMetadata)) > math.MaxInt32-1:
		return fmt.Errorf("custom metadata of %d bytes is too long", len(m.CustomMetadata))
	}
	return nil
}

// Marshal returns the metadata as a record value of Kafka's
// __remote_log_metadata topic, as its RemoteLogMetadataSerde writes it:
//
//	frameVersion uvarint (1) | apiKey uvarint (0) | version uvarint (0) |
//	RemoteLogSegmentMetadataRecord, a flexible message
//
// It refuses, as INVALID_REQUEST, what Kafka's RemoteLogSegmentMetadata
// refuses to hold (a negative start offset, an end offset below it, no
// leader epochs, an unknown state), a topic name longer than 32767 bytes,
// and leader epochs that do not strictly ascend (Kafka's map cannot hold
// an epoch twice, and it writes them in ascending order).
func (m *RemoteLogSegmentMetadata) Marshal() ([]byte, error) {
	if err := m.check(); err != nil {
		return nil, kafkaerr.New(kafkaerr.InvalidRequest, "remote log segment metadata: %v", err)
	}
	for i := 1; i < len(m.SegmentLeaderEpochs); i++ {
		if m.SegmentLeaderEpochs[i].Epoch <= m.SegmentLeaderEpochs[i-1].Epoch {
			return nil, kafkaerr.New(kafkaerr.InvalidRequest, "remote log segment metadata: leader epoch %d follows %d",
				m.SegmentLeaderEpochs[i].Epoch, m.SegmentLeaderEpochs[i-1].Epoch)
		}
	}
	dst := make([]byte, 0, 128+len(m.Topic)+len(m.CustomMetadata)+len(m.SegmentLeaderEpochs)*13)
	dst = binary.AppendUvarint(dst, remoteLogMetadataFrameVersion)
	dst = binary.AppendUvarint(dst, remoteLogSegmentMetadataAPIKey)
	dst = binary.AppendUvarint(dst, remoteLogSegmentMetadataVersion)
	// RemoteLogSegmentId: TopicIdPartition{Name, Id, Partition}, Id.
	dst = binary.AppendUvarint(dst, uint64(len(m.Topic))+1)
	dst = append(dst, m.Topic...)
	dst = append(dst, m.TopicID[:]...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(m.Partition))
	dst = append(dst, 0) // TopicIdPartition's tagged fields
	dst = append(dst, m.SegmentID[:]...)
	dst = append(dst, 0) // RemoteLogSegmentId's tagged fields
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.StartOffset))
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.EndOffset))
	dst = binary.BigEndian.AppendUint32(dst, uint32(m.BrokerID))
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.MaxTimestampMs))
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.EventTimestampMs))
	dst = binary.AppendUvarint(dst, uint64(len(m.SegmentLeaderEpochs))+1)
	for _, e := range m.SegmentLeaderEpochs {
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.Epoch))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.StartOffset))
		dst = append(dst, 0) // SegmentLeaderEpochEntry's tagged fields
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(m.SegmentSizeInBytes))
	if m.CustomMetadata == nil {
		dst = append(dst, 0)
	} else {
		dst = binary.AppendUvarint(dst, uint64(len(m.CustomMetadata))+1)
		dst = append(dst, m.CustomMetadata...)
	}
	dst = append(dst, byte(m.State))
	if m.TxnIndexEmpty {
		dst = append(dst, 1, txnIndexEmptyTag, 1, 1) // one tagged field: tag 0, 1 byte, true
	} else {
		dst = append(dst, 0)
	}
	return dst, nil
}

// Unmarshal reads a record value of the __remote_log_metadata topic that
// holds a RemoteLogSegmentMetadataRecord (version 0 or 1), as Kafka's
// RemoteLogMetadataSerde and the generated message reader do: unsigned
// varints of at most 5 bytes (Java's ByteUtils), unknown tagged fields
// skipped (and version 1's BrokerLeaderEpoch with them), no bytes after
// the message. It then applies the checks of Kafka's
// RemoteLogSegmentMetadata constructor. Anything else is CORRUPT_MESSAGE.
//
// The leader epochs come out as Kafka's map holds them: by ascending
// epoch, the last entry winning for an epoch given twice. CustomMetadata
// and Topic are copied out of b.
func (m *RemoteLogSegmentMetadata) Unmarshal(b []byte) error {
	r := metaReader{b: b}
	frame, api, version := r.short("frame version"), r.short("apiKey"), r.short("version")
	if r.err == nil {
		switch {
		case frame != remoteLogMetadataFrameVersion:
			r.fail("unknown frame version %d", frame)
		case api != remoteLogSegmentMetadataAPIKey:
			r.fail("apiKey %d is not a RemoteLogSegmentMetadataRecord (%d)", api, remoteLogSegmentMetadataAPIKey)
		case version < 0 || version > remoteLogSegmentMetadataMaxVersion:
			r.fail("unsupported RemoteLogSegmentMetadataRecord version %d", version)
		}
	}
	var out RemoteLogSegmentMetadata
	out.Topic = r.compactString("name")
	out.TopicID = r.uuid()
	out.Partition = r.int32()
	r.tags(nil)
	out.SegmentID = r.uuid()
	r.tags(nil)
	out.StartOffset = r.int64()
	out.EndOffset = r.int64()
	out.BrokerID = r.int32()
	out.MaxTimestampMs = r.int64()
	out.EventTimestampMs = r.int64()
	n := r.arrayLen("segmentLeaderEpochs", 4+8+1)
	epochs := make([]EpochEntry, 0, n)
	for range n {
		e := EpochEntry{Epoch: r.int32(), StartOffset: r.int64()}
		r.tags(nil)
		epochs = putEpoch(epochs, e)
	}
	out.SegmentLeaderEpochs = epochs
	out.SegmentSizeInBytes = r.int32()
	out.CustomMetadata = r.compactNullableBytes("customMetadata")
	out.State = RemoteLogSegmentState(r.int8())
	r.tags(func(tag uint32, data []byte) {
		if tag == txnIndexEmptyTag {
			if len(data) != 1 {
				r.fail("tagged field txnIndexEmpty has %d bytes", len(data))
				return
			}
			out.TxnIndexEmpty = data[0] != 0
		}
	})
	if r.err == nil && len(r.b) > 0 {
		r.fail("%d bytes after the message", len(r.b))
	}
	if r.err != nil {
		return r.err
	}
	if err := out.check(); err != nil {
		return kafkaerr.New(kafkaerr.CorruptMessage, "remote log segment metadata record: %v", err)
	}
	*m = out
	return nil
}

// putEpoch puts e into epochs, kept by ascending epoch, replacing an
// entry of the same epoch: a Java map's put, read back as a TreeMap.
func putEpoch(epochs []EpochEntry, e EpochEntry) []EpochEntry {
	i := len(epochs)
	for i > 0 && epochs[i-1].Epoch >= e.Epoch {
		i--
	}
	if i < len(epochs) && epochs[i].Epoch == e.Epoch {
		epochs[i] = e
		return epochs
	}
	epochs = append(epochs, EpochEntry{})
	copy(epochs[i+1:], epochs[i:])
	epochs[i] = e
	return epochs
}

// metaReader reads a Kafka flexible message with a sticky error: after the
// first failure every read returns zero values, and err says what failed
// (prometheus' Decbuf pattern).
type metaReader struct {
	b   []byte
	err error
}

func (r *metaReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = kafkaerr.New(kafkaerr.CorruptMessage, "remote log segment metadata record: "+format, args...)
	}
}

// take returns the next n bytes, or nil after a failure.
func (r *metaReader) take(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.fail("%s needs %d bytes, %d remain", what, n, len(r.b))
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

// uvarint reads an unsigned varint as Java's ByteUtils.readUnsignedVarint:
// at most 5 bytes, the bits past 32 dropped.
func (r *metaReader) uvarint(what string) uint32 {
	if r.err != nil {
		return 0
	}
	var x uint32
	for i := 0; i < 5; i++ {
		if i >= len(r.b) {
			r.fail("%s: the varint is cut short", what)
			return 0
		}
		c := r.b[i]
		x |= uint32(c&0x7f) << (7 * i)
		if c < 0x80 {
			r.b = r.b[i+1:]
			return x
		}
	}
	r.fail("%s: the varint is longer than 5 bytes", what)
	return 0
}

// short reads a uvarint as AbstractApiMessageSerde.unsignedIntToShort
// does: a value above 32767 (as Java's int) fails, anything else is cut
// to an int16.
func (r *metaReader) short(what string) int16 {
	v := int32(r.uvarint(what))
	if r.err == nil && v > math.MaxInt16 {
		r.fail("the value %d of %s is too large", v, what)
	}
	return int16(v)
}

func (r *metaReader) int8() int8 {
	if b := r.take(1, "an int8"); b != nil {
		return int8(b[0])
	}
	return 0
}

func (r *metaReader) int32() int32 {
	if b := r.take(4, "an int32"); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (r *metaReader) int64() int64 {
	if b := r.take(8, "an int64"); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

func (r *metaReader) uuid() uuid.UUID {
	var u uuid.UUID
	copy(u[:], r.take(16, "a uuid"))
	return u
}

// compactString reads a non-nullable compact string: its length plus one
// as an unsigned varint (read as Java's int), then its bytes.
func (r *metaReader) compactString(field string) string {
	n := int32(r.uvarint(field)) - 1
	if r.err != nil {
		return ""
	}
	switch {
	case n < 0:
		r.fail("non-nullable field %s was serialized as null", field)
	case n > maxMetadataStringLen:
		r.fail("string field %s had invalid length %d", field, n)
	}
	return string(r.take(int(n), field))
}

// compactNullableBytes reads nullable compact bytes: the length plus one
// (0, or anything Java reads as a negative int, is null), then the bytes.
func (r *metaReader) compactNullableBytes(field string) []byte {
	n := int32(r.uvarint(field)) - 1
	if r.err != nil || n < 0 {
		return nil
	}
	b := r.take(int(n), field)
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}

// arrayLen reads the length of a non-nullable compact array whose entries
// take at least minSize bytes each, checked against what remains before
// anything is allocated.
func (r *metaReader) arrayLen(field string, minSize int) int {
	n := int32(r.uvarint(field)) - 1
	if r.err != nil {
		return 0
	}
	if n < 0 {
		r.fail("non-nullable field %s was serialized as null", field)
		return 0
	}
	if int64(n)*int64(minSize) > int64(len(r.b)) {
		r.fail("field %s has %d entries, but only %d bytes remain", field, n, len(r.b))
		return 0
	}
	return int(n)
}

// tags reads a tagged-field section: a count, then for each field its tag,
// its size and its bytes. fn, if not nil, sees each field; the others are
// skipped, as Kafka keeps them aside as unknown tagged fields.
func (r *metaReader) tags(fn func(tag uint32, data []byte)) {
	n := r.uvarint("tagged field count")
	for i := uint32(0); i < n && r.err == nil; i++ {
		tag := r.uvarint("tag")
		size := r.uvarint("tagged field size")
		if r.err == nil && uint64(size) > uint64(len(r.b)) {
			r.fail("tagged field %d of %d bytes, but only %d bytes remain", tag, size, len(r.b))
		}
		data := r.take(int(size), "a tagged field")
		if r.err == nil && fn != nil {
			fn(tag, data)
		}
	}
}
