package state

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal/walmeta"
	"github.com/google/uuid"
)

// TieredDir is the folder of remote segments under the bucket prefix.
// Part of the format.
const TieredDir = "tiered/"

// RemoteSegmentKey returns the key of a remote segment (its files are the
// key plus each of RemoteSegmentExts):
//
//	<prefix>tiered/<topic ID>-<partition>/<20-digit base offset>-<segment ID>
//
// id is a UUIDv7, new for each upload attempt; its time is when the
// segment was named, which the commit deadline and the orphan collector
// use, as for a WAL object key. Part of the format.
func RemoteSegmentKey(prefix string, tp walmeta.TopicPartition, base int64, id uuid.UUID) string {
	return prefix + TieredDir + tp.TopicID.String() + "-" + strconv.FormatInt(int64(tp.Partition), 10) + "/" + fmt.Sprintf("%020d", base) + "-" + id.String()
}

// IsUUIDv7 reports whether id is a version 7 UUID of the RFC 9562 variant.
func IsUUIDv7(id uuid.UUID) bool { return id.Version() == 7 && id.Variant() == uuid.RFC4122 }

// uuidV7Time returns the time (millisecond precision) of a UUIDv7.
func UUIDV7Time(id uuid.UUID) time.Time {
	return time.UnixMilli(int64(binary.BigEndian.Uint64(id[:8]) >> 16))
}

// RemoteSegment is a tiered segment of a partition: a closed local
// segment copied to the bucket in the KIP-405 shape, offsets BaseOffset to
// EndOffset.
type RemoteSegment struct {
	// ID is the segment's UUIDv7, new for each upload attempt.
	ID             uuid.UUID
	TopicPartition walmeta.TopicPartition
	// Key is RemoteSegmentKey(prefix, TopicPartition, BaseOffset, ID): the
	// segment's files are Key plus each of RemoteSegmentExts.
	Key string
	// BaseOffset is the segment's first offset, EndOffset its last (both
	// inclusive).
	BaseOffset, EndOffset int64
	// MaxTimestamp is the greatest batch max timestamp in it, in ms.
	MaxTimestamp int64
	// Size is the bytes of the .log file; IndexSize, TimeIndexSize and
	// TxnIndexSize those of the .index, .timeindex and .txnindex files
	// (TxnIndexSize 0: there is none).
	Size                                   int64
	IndexSize, TimeIndexSize, TxnIndexSize int64
	// Uploader is the broker that uploaded it.
	Uploader int32
	// RegisteredAt is when the coordinator registered it, in ms; the
	// coordinator sets it.
	RegisteredAt int64
}

// RemoteSegmentRecord registers a remote segment (RegisterRemoteSegment).
// Applying it records the segment and an object row of its key (ObjectID,
// one live reference), moves the partition's diskless start to EndOffset+1
// and deletes the batch rows wholly at or below EndOffset.
type RemoteSegmentRecord struct {
	ID                                           uuid.UUID
	PID                                          int64
	ObjectID                                     int64
	Key                                          string
	BaseOffset, EndOffset                        int64
	MaxTimestamp                                 int64
	Size, IndexSize, TimeIndexSize, TxnIndexSize int64
	Uploader                                     int32
	Time                                         int64
}

func (RemoteSegmentRecord) Kind() recordType { return RecRemoteSegment }

func (r RemoteSegmentRecord) AppendTo(b []byte) []byte {
	b = append(b, r.ID[:]...)
	b = binary.AppendVarint(b, r.PID)
	b = binary.AppendVarint(b, r.ObjectID)
	b = AppendString(b, r.Key)
	b = binary.AppendVarint(b, r.BaseOffset)
	b = binary.AppendVarint(b, r.EndOffset-r.BaseOffset)
	b = binary.AppendVarint(b, r.MaxTimestamp)
	b = binary.AppendVarint(b, r.Size)
	b = binary.AppendVarint(b, r.IndexSize)
	b = binary.AppendVarint(b, r.TimeIndexSize)
	b = binary.AppendVarint(b, r.TxnIndexSize)
	b = binary.AppendVarint(b, int64(r.Uploader))
	return binary.AppendVarint(b, r.Time)
}

func (d *Decoder) remoteSegment() RemoteSegmentRecord {
	r := RemoteSegmentRecord{ID: d.uuid(), PID: d.Varint(), ObjectID: d.Varint(), Key: d.string(), BaseOffset: d.Varint()}
	r.EndOffset = r.BaseOffset + d.Varint()
	r.MaxTimestamp = d.Varint()
	r.Size, r.IndexSize, r.TimeIndexSize, r.TxnIndexSize = d.Varint(), d.Varint(), d.Varint(), d.Varint()
	r.Uploader = d.Int32()
	r.Time = d.Varint()
	return r
}

// segment returns the RemoteSegment the record registers.
func (r RemoteSegmentRecord) segment(tp walmeta.TopicPartition) RemoteSegment {
	return RemoteSegment{ID: r.ID, TopicPartition: tp, Key: r.Key, BaseOffset: r.BaseOffset, EndOffset: r.EndOffset,
		MaxTimestamp: r.MaxTimestamp, Size: r.Size, IndexSize: r.IndexSize, TimeIndexSize: r.TimeIndexSize, TxnIndexSize: r.TxnIndexSize,
		Uploader: r.Uploader, RegisteredAt: r.Time}
}

type RegisterRemoteOp struct {
	BaseOp
	Seg RemoteSegment
}

func (o *RegisterRemoteOp) Need(n *Needs) {
	n.Keys = append(n.Keys, RemoteSegmentKey(n.Prefix, o.Seg.TopicPartition, o.Seg.BaseOffset, o.Seg.ID))
}

func (o *RegisterRemoteOp) Check(g *Group) {
	s := o.Seg
	tp := s.TopicPartition
	p := g.Spec.Partition(tp)
	if p == nil {
		o.Finish(kafkaerr.New(kafkaerr.UnknownTopicOrPartition, "this coordinator has no partition %s", tp))
		return
	}
	// The same segment (ID, partition and base offset: its key), live,
	// dropped and not yet forgotten, or on its way to the log: done.
	want := RemoteSegmentKey(g.Prefix, tp, s.BaseOffset, s.ID)
	if known, _ := g.Spec.pending(want); known {
		o.Finish(nil)
		return
	}
	_, found, err := g.Facts.object(want)
	if err != nil {
		o.Finish(err)
		return
	}
	if found {
		o.Finish(nil)
		return
	}
	switch {
	case !IsUUIDv7(s.ID):
		o.Finish(kafkaerr.New(kafkaerr.InvalidRequest, "remote segment ID %s is not a UUIDv7", s.ID))
		return
	case s.Key != want:
		o.Finish(kafkaerr.New(kafkaerr.InvalidRequest, "remote segment key %q is not %q", s.Key, want))
		return
	case s.Size < 0 || s.IndexSize < 0 || s.TimeIndexSize < 0 || s.TxnIndexSize < 0:
		o.Finish(kafkaerr.New(kafkaerr.InvalidRequest, "remote segment %s has a negative file size", s.Key))
		return
	}
	if err := g.checkNamed("remote segment", s.Key, UUIDV7Time(s.ID)); err != nil {
		o.Finish(err)
		return
	}
	ds := p.DisklessStart
	var bound string
	switch {
	case s.BaseOffset < 0:
		bound = fmt.Sprintf("base offset %d is negative", s.BaseOffset)
	case s.BaseOffset > ds:
		bound = fmt.Sprintf("base offset %d is above the diskless start offset %d", s.BaseOffset, ds)
	case s.EndOffset < ds:
		bound = fmt.Sprintf("end offset %d is below the diskless start offset %d", s.EndOffset, ds)
	case s.EndOffset >= p.Visible():
		bound = fmt.Sprintf("end offset %d is not below the high watermark %d", s.EndOffset, p.Visible())
	case p.RemoteEnd >= 0 && s.BaseOffset <= p.RemoteEnd:
		bound = fmt.Sprintf("base offset %d is not above the end offset %d of the last remote segment", s.BaseOffset, p.RemoteEnd)
	}
	if bound != "" {
		o.Finish(kafkaerr.New(kafkaerr.OffsetOutOfRange, "remote segment %s of %s: %s", s.Key, tp, bound))
		return
	}
	g.add(RemoteSegmentRecord{
		ID: s.ID, PID: p.PID, ObjectID: g.Spec.NextObjectID, Key: s.Key,
		BaseOffset: s.BaseOffset, EndOffset: s.EndOffset, MaxTimestamp: s.MaxTimestamp,
		Size: s.Size, IndexSize: s.IndexSize, TimeIndexSize: s.TimeIndexSize, TxnIndexSize: s.TxnIndexSize,
		Uploader: s.Uploader, Time: g.Now,
	})
}

// RemoteSegmentExts are the extensions of a remote segment's files: its
// key plus each of them. .txnindex exists only when the local segment had
// one (deleting ignores a file that is not there). Part of the format.
var RemoteSegmentExts = []string{".log", ".index", ".timeindex", ".txnindex", ".snapshot", ".leader_epoch_checkpoint", ".metadata"}

// ParseRemoteSegmentKey parses the key of a remote segment's file under
// prefix: KEY + one of RemoteSegmentExts, or KEY itself (as OnDelete
// gives it). It returns KEY, the segment ID and the time the ID carries.
// ok is false unless fileKey is exactly what RemoteSegmentKey writes (a
// canonical, lowercase UUIDv7, a non-negative partition and base offset)
// with one of those extensions or none.
func ParseRemoteSegmentKey(prefix, fileKey string) (segKey string, id uuid.UUID, t time.Time, ok bool) {
	rest, found := strings.CutPrefix(fileKey, prefix+TieredDir)
	if !found {
		return "", uuid.UUID{}, time.Time{}, false
	}
	segKey = fileKey
	for _, ext := range RemoteSegmentExts {
		if strings.HasSuffix(rest, ext) {
			rest = rest[:len(rest)-len(ext)]
			segKey = fileKey[:len(fileKey)-len(ext)]
			break
		}
	}
	dir, file, found := strings.Cut(rest, "/")
	const idLen = 36
	if !found || len(dir) < idLen+2 || dir[idLen] != '-' || len(file) != 20+1+idLen || file[20] != '-' {
		return "", uuid.UUID{}, time.Time{}, false
	}
	topic, err := uuid.Parse(dir[:idLen])
	if err != nil {
		return "", uuid.UUID{}, time.Time{}, false
	}
	part, err := strconv.ParseInt(dir[idLen+1:], 10, 32)
	if err != nil || part < 0 {
		return "", uuid.UUID{}, time.Time{}, false
	}
	base, err := strconv.ParseInt(file[:20], 10, 64)
	if err != nil || base < 0 {
		return "", uuid.UUID{}, time.Time{}, false
	}
	if id, err = uuid.Parse(file[21:]); err != nil || !IsUUIDv7(id) {
		return "", uuid.UUID{}, time.Time{}, false
	}
	if RemoteSegmentKey(prefix, walmeta.TopicPartition{TopicID: topic, Partition: int32(part)}, base, id) != segKey {
		return "", uuid.UUID{}, time.Time{}, false // not canonical
	}
	return segKey, id, UUIDV7Time(id), true
}
