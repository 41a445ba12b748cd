package coordinator

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal"
)

// Tiered (remote) segments, KIP-1164's release of diskless metadata.
//
// The offloader (package replica) copies a partition's closed local
// segment to the bucket as a remote segment in the KIP-405 shape and
// registers it here. Registering moves the partition's diskless start
// offset past the segment and deletes the batch rows wholly below it, so
// the WAL objects that held them can go: below the diskless start, a
// partition's data is in remote segments; from it on, in WAL objects.
//
//	log start ........ diskless start ........ high watermark
//	|  remote segments  |  diskless batches      |
//
// A remote segment's files are KEY + each of RemoteSegmentExts. The
// coordinator also keeps an object row of KEY (no batches, one live
// reference: the segment's), owned by this shard alone: KnownKeys knows
// the key while the segment is known, and when trimming, retention or a
// topic's deletion drops the segment, the row becomes dead and the
// lifecycle deletes every file of the segment after the grace, exactly as
// it deletes a WAL object. The orphan collector deletes the files of
// segments that were uploaded and never registered (orphans.go).

// tieredDir is the folder of remote segments under the bucket prefix.
// Part of the format.
const tieredDir = "tiered/"

// RemoteSegmentExts are the extensions of a remote segment's files: its
// key plus each of them. .txnindex exists only when the local segment had
// one (deleting ignores a file that is not there). Part of the format.
var RemoteSegmentExts = []string{".log", ".index", ".timeindex", ".txnindex", ".snapshot", ".leader_epoch_checkpoint", ".metadata"}

// RemoteSegmentKey returns the key of a remote segment (its files are the
// key plus each of RemoteSegmentExts):
//
//	<prefix>tiered/<topic ID>-<partition>/<20-digit base offset>-<segment ID>
//
// id is a UUIDv7, new for each upload attempt; its time is when the
// segment was named, which the commit deadline and the orphan collector
// use, as for a WAL object key. Part of the format.
func RemoteSegmentKey(prefix string, tp wal.TopicPartition, base int64, id uuid.UUID) string {
	return prefix + tieredDir + tp.TopicID.String() + "-" + strconv.FormatInt(int64(tp.Partition), 10) + "/" + fmt.Sprintf("%020d", base) + "-" + id.String()
}

// ParseRemoteSegmentKey parses the key of a remote segment's file under
// prefix: KEY + one of RemoteSegmentExts, or KEY itself (as OnDelete
// gives it). It returns KEY, the segment ID and the time the ID carries.
// ok is false unless fileKey is exactly what RemoteSegmentKey writes (a
// canonical, lowercase UUIDv7, a non-negative partition and base offset)
// with one of those extensions or none.
func ParseRemoteSegmentKey(prefix, fileKey string) (segKey string, id uuid.UUID, t time.Time, ok bool) {
	rest, found := strings.CutPrefix(fileKey, prefix+tieredDir)
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
	if id, err = uuid.Parse(file[21:]); err != nil || !isUUIDv7(id) {
		return "", uuid.UUID{}, time.Time{}, false
	}
	if RemoteSegmentKey(prefix, wal.TopicPartition{TopicID: topic, Partition: int32(part)}, base, id) != segKey {
		return "", uuid.UUID{}, time.Time{}, false // not canonical
	}
	return segKey, id, uuidV7Time(id), true
}

// isUUIDv7 reports whether id is a version 7 UUID of the RFC 9562 variant.
func isUUIDv7(id uuid.UUID) bool { return id.Version() == 7 && id.Variant() == uuid.RFC4122 }

// uuidV7Time returns the time (millisecond precision) of a UUIDv7.
func uuidV7Time(id uuid.UUID) time.Time {
	return time.UnixMilli(int64(binary.BigEndian.Uint64(id[:8]) >> 16))
}

// RemoteSegment is a tiered segment of a partition: a closed local
// segment copied to the bucket in the KIP-405 shape, offsets BaseOffset to
// EndOffset.
type RemoteSegment struct {
	// ID is the segment's UUIDv7, new for each upload attempt.
	ID             uuid.UUID
	TopicPartition wal.TopicPartition
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

// remoteSegmentRecord registers a remote segment (RegisterRemoteSegment).
// Applying it records the segment and an object row of its key (ObjectID,
// one live reference), moves the partition's diskless start to EndOffset+1
// and deletes the batch rows wholly at or below EndOffset.
type remoteSegmentRecord struct {
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

func (remoteSegmentRecord) kind() recordType { return recRemoteSegment }

func (r remoteSegmentRecord) appendTo(b []byte) []byte {
	b = append(b, r.ID[:]...)
	b = binary.AppendVarint(b, r.PID)
	b = binary.AppendVarint(b, r.ObjectID)
	b = appendString(b, r.Key)
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

func (d *decoder) remoteSegment() remoteSegmentRecord {
	r := remoteSegmentRecord{ID: d.uuid(), PID: d.varint(), ObjectID: d.varint(), Key: d.string(), BaseOffset: d.varint()}
	r.EndOffset = r.BaseOffset + d.varint()
	r.MaxTimestamp = d.varint()
	r.Size, r.IndexSize, r.TimeIndexSize, r.TxnIndexSize = d.varint(), d.varint(), d.varint(), d.varint()
	r.Uploader = d.int32()
	r.Time = d.varint()
	return r
}

// segment returns the RemoteSegment the record registers.
func (r remoteSegmentRecord) segment(tp wal.TopicPartition) RemoteSegment {
	return RemoteSegment{ID: r.ID, TopicPartition: tp, Key: r.Key, BaseOffset: r.BaseOffset, EndOffset: r.EndOffset,
		MaxTimestamp: r.MaxTimestamp, Size: r.Size, IndexSize: r.IndexSize, TimeIndexSize: r.TimeIndexSize, TxnIndexSize: r.TxnIndexSize,
		Uploader: r.Uploader, RegisteredAt: r.Time}
}

// --- RegisterRemoteSegment -------------------------------------------------

type registerRemoteOp struct {
	baseOp
	seg RemoteSegment
}

func (o *registerRemoteOp) need(n *needs) {
	n.keys = append(n.keys, RemoteSegmentKey(n.prefix, o.seg.TopicPartition, o.seg.BaseOffset, o.seg.ID))
}

func (o *registerRemoteOp) check(g *group) {
	s := o.seg
	tp := s.TopicPartition
	p := g.spec.partition(tp)
	if p == nil {
		o.finish(kafkaerr.New(kafkaerr.UnknownTopicOrPartition, "this coordinator has no partition %s", tp))
		return
	}
	// The same segment (ID, partition and base offset: its key), live,
	// dropped and not yet forgotten, or on its way to the log: done.
	want := RemoteSegmentKey(g.prefix, tp, s.BaseOffset, s.ID)
	if known, _ := g.spec.pending(want); known {
		o.finish(nil)
		return
	}
	_, found, err := g.facts.object(want)
	if err != nil {
		o.finish(err)
		return
	}
	if found {
		o.finish(nil)
		return
	}
	switch {
	case !isUUIDv7(s.ID):
		o.finish(kafkaerr.New(kafkaerr.InvalidRequest, "remote segment ID %s is not a UUIDv7", s.ID))
		return
	case s.Key != want:
		o.finish(kafkaerr.New(kafkaerr.InvalidRequest, "remote segment key %q is not %q", s.Key, want))
		return
	case s.Size < 0 || s.IndexSize < 0 || s.TimeIndexSize < 0 || s.TxnIndexSize < 0:
		o.finish(kafkaerr.New(kafkaerr.InvalidRequest, "remote segment %s has a negative file size", s.Key))
		return
	}
	if err := g.checkNamed("remote segment", s.Key, uuidV7Time(s.ID)); err != nil {
		o.finish(err)
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
	case s.EndOffset >= p.HW:
		bound = fmt.Sprintf("end offset %d is not below the high watermark %d", s.EndOffset, p.HW)
	case p.RemoteEnd >= 0 && s.BaseOffset <= p.RemoteEnd:
		bound = fmt.Sprintf("base offset %d is not above the end offset %d of the last remote segment", s.BaseOffset, p.RemoteEnd)
	}
	if bound != "" {
		o.finish(kafkaerr.New(kafkaerr.OffsetOutOfRange, "remote segment %s of %s: %s", s.Key, tp, bound))
		return
	}
	g.add(remoteSegmentRecord{
		ID: s.ID, PID: p.PID, ObjectID: g.spec.nextObjectID, Key: s.Key,
		BaseOffset: s.BaseOffset, EndOffset: s.EndOffset, MaxTimestamp: s.MaxTimestamp,
		Size: s.Size, IndexSize: s.IndexSize, TimeIndexSize: s.TimeIndexSize, TxnIndexSize: s.TxnIndexSize,
		Uploader: s.Uploader, Time: g.now,
	})
}

// RegisterRemoteSegment registers a remote segment that the offloader
// uploaded: the partition's diskless start offset moves to EndOffset+1,
// and the batches wholly at or below EndOffset are released (a batch run
// that straddles EndOffset stays; readers skip what is below the offset
// they ask). The segment's files are deleted when trimming, retention or
// the topic's deletion drops it (see LifecycleOptions).
//
// Errors carry Kafka's codes: UNKNOWN_TOPIC_OR_PARTITION (not served
// here); INVALID_REQUEST (ID not a UUIDv7, Key not RemoteSegmentKey of
// the segment under Options.Prefix, a negative size); REQUEST_TIMED_OUT
// (the ID was named longer than Options.CommitDeadline ago: upload it
// again under a new ID); OFFSET_OUT_OF_RANGE unless BaseOffset <= the
// diskless start <= EndOffset < the high watermark and BaseOffset is above
// the EndOffset of every live remote segment of the partition (the message
// says which bound). Registering a segment already registered (the same
// ID, partition and base offset), live or dropped and not yet forgotten,
// succeeds and changes nothing. RegisteredAt is ignored.
func (c *leader) RegisterRemoteSegment(ctx context.Context, seg RemoteSegment) error {
	o := &registerRemoteOp{baseOp: newBaseOp(ctx), seg: seg}
	return c.submit(ctx, o, o.done)
}

// RemoteSegments returns the live remote segments of tp, by BaseOffset. On
// a leader it holds every registration answered so far.
func (c *leader) RemoteSegments(ctx context.Context, tp wal.TopicPartition) ([]RemoteSegment, error) {
	p, err := c.pub.lookup(tp)
	if err != nil {
		return nil, err
	}
	if err := c.readBarrier(ctx, p.appliedAt); err != nil {
		return nil, err
	}
	return c.store.reader.remoteSegments(ctx, tp, p.pid)
}

// RegisterRemoteSegment registers a remote segment that the offloader
// uploaded: the partition's diskless start offset moves to EndOffset+1,
// and the batches wholly at or below EndOffset are released (a batch run
// that straddles EndOffset stays; readers skip what is below the offset
// they ask). The segment's files are deleted when trimming, retention or
// the topic's deletion drops it (see LifecycleOptions).
//
// Errors carry Kafka's codes: UNKNOWN_TOPIC_OR_PARTITION (not served
// here); INVALID_REQUEST (ID not a UUIDv7, Key not RemoteSegmentKey of
// the segment under Options.Prefix, a negative size); REQUEST_TIMED_OUT
// (the ID was named longer than Options.CommitDeadline ago: upload it
// again under a new ID); OFFSET_OUT_OF_RANGE unless BaseOffset <= the
// diskless start <= EndOffset < the high watermark and BaseOffset is above
// the EndOffset of every live remote segment of the partition (the message
// says which bound). Registering a segment already registered (the same
// ID, partition and base offset), live or dropped and not yet forgotten,
// succeeds and changes nothing. RegisteredAt is ignored.
// It reads tp's shard.
func (s *Coordinator) RegisterRemoteSegment(ctx context.Context, seg RemoteSegment) error {
	c, err := s.shardFor(ctx, seg.TopicPartition)
	if err != nil {
		return err
	}
	return c.RegisterRemoteSegment(ctx, seg)
}

// RemoteSegments returns the live remote segments of tp, by BaseOffset. On
// a leader it holds every registration answered so far.
// It reads tp's shard.
func (s *Coordinator) RemoteSegments(ctx context.Context, tp wal.TopicPartition) ([]RemoteSegment, error) {
	c, err := s.shardFor(ctx, tp)
	if err != nil {
		return nil, err
	}
	return c.RemoteSegments(ctx, tp)
}

// RemoteSegments returns the live remote segments of tp, by BaseOffset. On
// a leader it holds every registration answered so far.
// It reads the follower's database, as far as it has applied.
func (f *Follower) RemoteSegments(ctx context.Context, tp wal.TopicPartition) ([]RemoteSegment, error) {
	return f.c.RemoteSegments(ctx, tp)
}

// --- reads ------------------------------------------------------------------

// remoteColumns are the columns scanRemote reads, in its order.
const remoteColumns = "base_offset, end_offset, segment_id, key, max_timestamp, size, index_size, time_index_size, txn_index_size, uploader, registered_at"

// The read pool's statements of remote segments.
const (
	remoteListQuery    = "SELECT " + remoteColumns + " FROM remote_segments WHERE pid = ? ORDER BY end_offset"
	remoteAtQuery      = "SELECT " + remoteColumns + " FROM remote_segments WHERE pid = ? AND end_offset >= ? ORDER BY end_offset LIMIT 1"
	remoteByTimeQuery  = "SELECT " + remoteColumns + " FROM remote_segments WHERE pid = ? AND end_offset >= ? AND max_timestamp >= ? ORDER BY end_offset LIMIT 1"
	remoteMaxTimeQuery = "SELECT " + remoteColumns + " FROM remote_segments WHERE pid = ? AND end_offset >= ? ORDER BY max_timestamp DESC, end_offset LIMIT 1"
)

func scanRemote(rows interface{ Scan(...any) error }, tp wal.TopicPartition) (RemoteSegment, error) {
	s := RemoteSegment{TopicPartition: tp}
	var id []byte
	if err := rows.Scan(&s.BaseOffset, &s.EndOffset, &id, &s.Key, &s.MaxTimestamp, &s.Size, &s.IndexSize, &s.TimeIndexSize, &s.TxnIndexSize, &s.Uploader, &s.RegisteredAt); err != nil {
		return s, err
	}
	if len(id) != len(s.ID) {
		return s, fmt.Errorf("coordinator: remote segment %s has an ID of %d bytes", s.Key, len(id))
	}
	s.ID = uuid.UUID(id)
	return s, nil
}

// remoteSegments returns the live remote segments of a partition.
func (r *reader) remoteSegments(ctx context.Context, tp wal.TopicPartition, pid int64) ([]RemoteSegment, error) {
	rows, err := r.remoteList.QueryContext(ctx, pid)
	if err != nil {
		return nil, fmt.Errorf("coordinator: listing the remote segments of %s: %w", tp, err)
	}
	defer rows.Close()
	var out []RemoteSegment
	for rows.Next() {
		s, err := scanRemote(rows, tp)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// remoteOne runs one of the single-row statements; ok is false for no row.
func (r *reader) remoteOne(ctx context.Context, st *sql.Stmt, tp wal.TopicPartition, args ...any) (RemoteSegment, bool, error) {
	s, err := scanRemote(st.QueryRowContext(ctx, args...), tp)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return s, false, nil
	case err != nil:
		return s, false, fmt.Errorf("coordinator: reading the remote segments of %s: %w", tp, err)
	}
	return s, true, nil
}
