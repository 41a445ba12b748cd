package coordinator

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/diskless-go/diskless/segment"
	"github.com/diskless-go/diskless/wal"
	"github.com/google/uuid"
)

// reader holds the read-only statements, prepared on a store's read pool.
// Reads see the state as of the last applied entry, never anything that
// is not durable.
type reader struct {
	db        *sql.DB
	partition *sql.Stmt
	batches   *sql.Stmt
	byTime    *sql.Stmt
	maxTime   *sql.Stmt
}

func newReader(ctx context.Context, db *sql.DB) (*reader, error) {
	r := &reader{db: db}
	for _, p := range []struct {
		st *(*sql.Stmt)
		q  string
	}{
		{&r.partition, "SELECT p.pid, p.log_start, p.high_watermark, t.flags FROM partitions p JOIN topics t ON t.topic_id = p.topic_id WHERE p.topic_id = ? AND p.partition = ?"},
		{&r.batches, "SELECT b.last_offset, b.n, b.pos, b.size, b.ts + o.committed_at, o.key, o.committed_at FROM batches b JOIN objects o ON o.object_id = b.object_id WHERE b.pid = ? AND b.last_offset >= ? ORDER BY b.last_offset LIMIT ?"},
		{&r.byTime, "SELECT b.last_offset, b.n, b.pos, b.size, b.ts + o.committed_at, o.key, o.committed_at FROM batches b JOIN objects o ON o.object_id = b.object_id WHERE b.pid = ? AND b.last_offset >= ? AND b.ts + o.committed_at >= ? ORDER BY b.last_offset LIMIT 1"},
		{&r.maxTime, "SELECT b.last_offset, b.n, b.pos, b.size, b.ts + o.committed_at, o.key, o.committed_at FROM batches b JOIN objects o ON o.object_id = b.object_id WHERE b.pid = ? AND b.last_offset >= ? ORDER BY b.ts + o.committed_at DESC, b.last_offset LIMIT 1"},
	} {
		st, err := db.PrepareContext(ctx, p.q)
		if err != nil {
			r.close()
			return nil, fmt.Errorf("coordinator: preparing %q: %w", p.q, err)
		}
		*p.st = st
	}
	return r, nil
}

func (r *reader) close() error {
	var errs []error
	for _, st := range []*sql.Stmt{r.partition, r.batches, r.byTime, r.maxTime} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}

// Location is where a run of batches lives: a byte range of one object,
// holding the batches of offsets BaseOffset to LastOffset, contiguous
// (each batch's base offset follows from the one before: base offset plus
// its record count).
type Location struct {
	ObjectKey  string
	BytePos    int64
	ByteSize   int64
	BaseOffset int64
	LastOffset int64
	// MaxTimestamp is the greatest batch timestamp in the run.
	MaxTimestamp int64
	// LogAppendTime is the time the run was committed on LogAppendTime
	// topics (to be written into the batches on the way out), else -1.
	LogAppendTime int64
}

// FindResult is the answer to FindBatches.
type FindResult struct {
	// Batches are the runs from the one holding the offset asked for, in
	// offset order.
	Batches []Location
	// LogStart and HighWatermark are the partition's.
	LogStart, HighWatermark int64
}

type partRow struct {
	pid, logStart, hw int64
	lat               bool
}

func (r *reader) lookup(ctx context.Context, tp wal.TopicPartition) (partRow, error) {
	var p partRow
	var flags int64
	err := r.partition.QueryRowContext(ctx, tp.TopicID[:], tp.Partition).Scan(&p.pid, &p.logStart, &p.hw, &flags)
	if errors.Is(err, sql.ErrNoRows) {
		return p, kafkaErr(segment.UnknownTopicOrPartition, "this coordinator has no partition %s", tp)
	}
	if err != nil {
		return p, fmt.Errorf("coordinator: reading partition %s: %w", tp, err)
	}
	p.lat = flags&4 != 0
	return p, nil
}

func scanLocation(rows interface{ Scan(...any) error }, lat bool) (Location, error) {
	var l Location
	var n, committed int64
	if err := rows.Scan(&l.LastOffset, &n, &l.BytePos, &l.ByteSize, &l.MaxTimestamp, &l.ObjectKey, &committed); err != nil {
		return l, err
	}
	l.BaseOffset = l.LastOffset - n + 1
	l.LogAppendTime = -1
	if lat {
		l.LogAppendTime = committed
	}
	return l, nil
}

// findBatches returns the runs of batches of tp from offset on, at least
// one and then as many as fit in maxBytes.
func (r *reader) findBatches(ctx context.Context, tp wal.TopicPartition, offset int64, maxBytes int64) (FindResult, error) {
	p, err := r.lookup(ctx, tp)
	if err != nil {
		return FindResult{}, err
	}
	res := FindResult{LogStart: p.logStart, HighWatermark: p.hw}
	if offset < p.logStart || offset > p.hw {
		return res, kafkaErr(segment.OffsetOutOfRange, "offset %d is outside [%d, %d] in %s", offset, p.logStart, p.hw, tp)
	}
	var used int64
	limit := 16
	for offset < p.hw {
		rows, err := r.batches.QueryContext(ctx, p.pid, offset, limit)
		if err != nil {
			return res, fmt.Errorf("coordinator: finding batches of %s: %w", tp, err)
		}
		got := 0
		full := false
		for rows.Next() {
			l, err := scanLocation(rows, p.lat)
			if err != nil {
				rows.Close()
				return res, err
			}
			got++
			if len(res.Batches) > 0 && used+l.ByteSize > maxBytes {
				full = true
				break
			}
			res.Batches = append(res.Batches, l)
			used += l.ByteSize
			offset = l.LastOffset + 1
		}
		if err := rows.Close(); err != nil {
			return res, err
		}
		if full || got < limit {
			break
		}
		limit = min(limit*4, 1024)
	}
	return res, nil
}

// FindBatches returns where the batches of tp from offset on are: at least
// the run holding offset, then whole runs while they fit in maxBytes. An
// offset outside [log start, high watermark] is OFFSET_OUT_OF_RANGE; at the
// high watermark, no batches. It reads the committed state (as a follower
// may, a little behind the leader).
func (c *Coordinator) FindBatches(ctx context.Context, tp wal.TopicPartition, offset, maxBytes int64) (FindResult, error) {
	return c.store.reader.findBatches(ctx, tp, offset, maxBytes)
}

// Special timestamps of ListOffsets, as in Kafka's ListOffsets request.
const (
	LatestTimestamp   = -1
	EarliestTimestamp = -2
	MaxTimestamp      = -3
)

// ListOffsetsResult is the answer to ListOffsets.
type ListOffsetsResult struct {
	// Offset is the offset found, or -1 when no batch has a timestamp at or
	// after the one asked.
	Offset int64
	// Timestamp is the batch's greatest timestamp for lookups by time,
	// else -1.
	Timestamp int64
	// Batch is the run of batches that holds Offset, for lookups by time:
	// the coordinator knows batches, not records, so the exact record (the
	// first with a timestamp at or after the one asked, or the one with the
	// greatest timestamp) is found by reading it.
	Batch *Location
}

// ListOffsets answers Kafka's ListOffsets for one partition: timestamp
// EarliestTimestamp gives the log start offset, LatestTimestamp the high
// watermark, MaxTimestamp the run with the greatest timestamp, and a
// timestamp >= 0 the first run (in offset order) whose greatest timestamp
// is at or after it. It reads the committed state, which holds exactly
// what has been acknowledged.
func (c *Coordinator) ListOffsets(ctx context.Context, tp wal.TopicPartition, timestamp int64) (ListOffsetsResult, error) {
	return c.store.reader.listOffsets(ctx, tp, timestamp)
}

func (r *reader) listOffsets(ctx context.Context, tp wal.TopicPartition, timestamp int64) (ListOffsetsResult, error) {
	res := ListOffsetsResult{Offset: -1, Timestamp: -1}
	p, err := r.lookup(ctx, tp)
	if err != nil {
		return res, err
	}
	var row *sql.Row
	switch {
	case timestamp == EarliestTimestamp:
		res.Offset = p.logStart
		return res, nil
	case timestamp == LatestTimestamp:
		res.Offset = p.hw
		return res, nil
	case timestamp == MaxTimestamp:
		row = r.maxTime.QueryRowContext(ctx, p.pid, p.logStart)
	case timestamp >= 0:
		row = r.byTime.QueryRowContext(ctx, p.pid, p.logStart, timestamp)
	default:
		return res, kafkaErr(segment.InvalidRequest, "ListOffsets timestamp %d is not supported", timestamp)
	}
	l, err := scanLocation(row, p.lat)
	if errors.Is(err, sql.ErrNoRows) {
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("coordinator: listing offsets of %s: %w", tp, err)
	}
	res.Offset, res.Timestamp, res.Batch = max(l.BaseOffset, p.logStart), l.MaxTimestamp, &l
	return res, nil
}

// DeadObject is an object that no batch needs any more.
type DeadObject struct {
	Key string
	// DeadSince is when its last batch went.
	DeadSince time.Time
}

// DeadObjects returns up to limit objects that no batch needs any more,
// those dead longest first. They may be deleted from the bucket once no
// read can still want them; then ObjectsDeleted records it.
func (c *Coordinator) DeadObjects(ctx context.Context, limit int) ([]DeadObject, error) {
	rows, err := c.store.rdb.QueryContext(ctx, "SELECT key, dead_at FROM objects WHERE dead_at IS NOT NULL ORDER BY dead_at LIMIT ?", limit)
	if err != nil {
		return nil, fmt.Errorf("coordinator: listing dead objects: %w", err)
	}
	defer rows.Close()
	var out []DeadObject
	for rows.Next() {
		var d DeadObject
		var at int64
		if err := rows.Scan(&d.Key, &at); err != nil {
			return nil, err
		}
		d.DeadSince = time.UnixMilli(at)
		out = append(out, d)
	}
	return out, rows.Err()
}

// TopicInfo describes a topic.
type TopicInfo struct {
	ID         uuid.UUID
	Name       string
	Partitions int32
	Config     TopicConfig
}

// Topics returns every topic of the shard, by name.
func (c *Coordinator) Topics(ctx context.Context) ([]TopicInfo, error) {
	rows, err := c.store.rdb.QueryContext(ctx, "SELECT topic_id, name, partitions, retention_ms, retention_bytes, flags, max_message_bytes FROM topics ORDER BY name")
	if err != nil {
		return nil, fmt.Errorf("coordinator: listing topics: %w", err)
	}
	defer rows.Close()
	var out []TopicInfo
	for rows.Next() {
		var t TopicInfo
		var id []byte
		var flags int64
		if err := rows.Scan(&id, &t.Name, &t.Partitions, &t.Config.RetentionMs, &t.Config.RetentionBytes, &flags, &t.Config.MaxMessageBytes); err != nil {
			return nil, err
		}
		t.ID = uuid.UUID(id)
		t.Config.Compact, t.Config.Delete, t.Config.LogAppendTime = flags&1 != 0, flags&2 != 0, flags&4 != 0
		out = append(out, t)
	}
	return out, rows.Err()
}
