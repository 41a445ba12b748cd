package store

import (
	"context"
	"fmt"

	"github.com/diskless-go/diskless/kbatch"
)

// AbortedTxn is an entry of the aborted-transactions index: a producer's
// aborted transaction in a partition, from its first batch to its ABORT
// marker.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
	// LastStable is the partition's last stable offset right after the
	// ABORT marker (a .txnindex entry's lastStableOffset).
	LastStable int64
}

// AbortedTxns reads the aborted index of a partition.
func (r *reader) AbortedTxns(ctx context.Context, pid, from, to int64) ([]AbortedTxn, error) {
	rows, err := r.db.QueryContext(ctx, sqlAbortedIn, pid, from, to)
	if err != nil {
		return nil, fmt.Errorf("coordinator: reading aborted transactions: %w", err)
	}
	defer rows.Close()
	var out []AbortedTxn
	for rows.Next() {
		var a AbortedTxn
		if err := rows.Scan(&a.ProducerID, &a.FirstOffset, &a.LastOffset, &a.LastStable); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// markerAt returns the location of the marker at offset of partition pid.
func (r *reader) markerAt(ctx context.Context, pid, offset int64) (Location, error) {
	m := kbatch.EndTxnMarker{}
	var commit int64
	if err := r.db.QueryRowContext(ctx, sqlMarkerAt, pid, offset).Scan(&m.ProducerID, &m.ProducerEpoch, &commit, &m.CoordinatorEpoch, &m.Timestamp); err != nil {
		return Location{}, err
	}
	m.Commit = commit != 0
	return Location{BytePos: 0, ByteSize: markerSize, BaseOffset: offset, LastOffset: offset,
		MaxTimestamp: m.Timestamp, LogAppendTime: -1, Marker: &m}, nil
}
