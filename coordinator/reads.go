package coordinator

import (
	"context"
	"fmt"
	"time"

	"github.com/diskless-go/diskless/wal"
)

// FindBatches returns where the batches of tp from offset on are: at least
// the run holding offset, then whole runs while they fit in maxBytes. An
// offset outside [log start, high watermark] is OFFSET_OUT_OF_RANGE; at the
// high watermark, no batches. Below the diskless start offset, the answer
// is the remote segment that holds offset (FindResult.Remote) and no
// batches. It sees every commit answered before it was called (see
// Read your writes in the package doc).
func (l *leader) FindBatches(ctx context.Context, tp wal.TopicPartition, offset, maxBytes int64) (FindResult, error) {
	p, err := l.pub.Lookup(tp)
	if err != nil {
		return FindResult{}, err
	}
	if err := l.readBarrier(ctx, p.AppliedAt); err != nil {
		return FindResult{}, err
	}
	return l.store.Reader.FindBatches(ctx, tp, p, offset, maxBytes, l.pub)
}

// ListOffsets answers Kafka's ListOffsets for one partition: timestamp
// EarliestTimestamp gives the log start offset, LatestTimestamp the high
// watermark, MaxTimestamp the run (or remote segment) with the greatest
// timestamp, the first in offset order of those that share it, and a
// timestamp >= 0 the first remote segment or run (in offset order) whose
// greatest timestamp is at or after it. It reads the committed state,
// which holds exactly what has been acknowledged.
func (l *leader) ListOffsets(ctx context.Context, tp wal.TopicPartition, timestamp int64) (ListOffsetsResult, error) {
	res := ListOffsetsResult{Offset: -1, Timestamp: -1}
	p, err := l.pub.Lookup(tp)
	if err != nil {
		return res, err
	}
	if err := l.checkLease(); err != nil {
		return res, err
	}
	switch timestamp {
	case EarliestTimestamp:
		res.Offset = p.LogStart
		return res, nil
	case LatestTimestamp:
		res.Offset, res.LastStable = p.HW, p.LSO
		return res, nil
	}
	// Lookups by time read batch rows: wait until the read pool holds
	// what the published offsets say, so the answer holds every
	// acknowledged batch.
	if err := l.readBarrier(ctx, p.AppliedAt); err != nil {
		return res, err
	}
	return l.store.Reader.ListOffsets(ctx, tp, p, timestamp)
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
//
// Only objects committed to this shard alone are listed: whether an
// object that other shards share is still needed is for its owners to
// decide (see LifecycleOptions), and this shard cannot tell alone. A key
// under <prefix>tiered/ is a dropped remote segment: its files are the key
// plus each of RemoteSegmentExts.
func (l *leader) DeadObjects(ctx context.Context, limit int) ([]DeadObject, error) {
	if err := l.readBarrier(ctx, l.applied.Load()); err != nil {
		return nil, err
	}
	rows, err := l.store.Rdb.QueryContext(ctx, "SELECT key, dead_at FROM objects WHERE dead_at IS NOT NULL AND owners IS NULL ORDER BY dead_at LIMIT ?", limit)
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

// Topics returns every topic of the shard, by name.
func (l *leader) Topics(ctx context.Context) ([]TopicInfo, error) {
	return l.pub.TopicList(), nil
}
