package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/diskless-go/diskless/coordinator/state"

	"github.com/diskless-go/diskless/wal"
	"github.com/google/uuid"
)

// remoteColumns are the columns scanRemote reads, in its order.
const remoteColumns = "base_offset, end_offset, segment_id, key, max_timestamp, size, index_size, time_index_size, txn_index_size, uploader, registered_at"

// The read pool's statements of remote segments.
const (
	remoteListQuery    = "SELECT " + remoteColumns + " FROM remote_segments WHERE pid = ? ORDER BY end_offset"
	remoteAtQuery      = "SELECT " + remoteColumns + " FROM remote_segments WHERE pid = ? AND end_offset >= ? ORDER BY end_offset LIMIT 1"
	remoteByTimeQuery  = "SELECT " + remoteColumns + " FROM remote_segments WHERE pid = ? AND end_offset >= ? AND max_timestamp >= ? ORDER BY end_offset LIMIT 1"
	remoteMaxTimeQuery = "SELECT " + remoteColumns + " FROM remote_segments WHERE pid = ? AND end_offset >= ? ORDER BY max_timestamp DESC, end_offset LIMIT 1"
)

func scanRemote(rows interface{ Scan(...any) error }, tp wal.TopicPartition) (state.RemoteSegment, error) {
	s := state.RemoteSegment{TopicPartition: tp}
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

// RemoteSegments returns the live remote segments of a partition.
func (r *reader) RemoteSegments(ctx context.Context, tp wal.TopicPartition, pid int64) ([]state.RemoteSegment, error) {
	rows, err := r.remoteList.QueryContext(ctx, pid)
	if err != nil {
		return nil, fmt.Errorf("coordinator: listing the remote segments of %s: %w", tp, err)
	}
	defer rows.Close()
	var out []state.RemoteSegment
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
func (r *reader) remoteOne(ctx context.Context, st *sql.Stmt, tp wal.TopicPartition, args ...any) (state.RemoteSegment, bool, error) {
	s, err := scanRemote(st.QueryRowContext(ctx, args...), tp)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return s, false, nil
	case err != nil:
		return s, false, fmt.Errorf("coordinator: reading the remote segments of %s: %w", tp, err)
	}
	return s, true, nil
}
