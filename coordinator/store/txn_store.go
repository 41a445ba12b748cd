package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/diskless-go/diskless/coordinator/state"
)

// The statements of transactions.
const (
	sqlUpsertTxn       = "INSERT INTO txns (id, state) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET state = excluded.state"
	sqlLoadTxns        = "SELECT state FROM txns"
	sqlDeleteTxn       = "DELETE FROM txns WHERE id = ?"
	sqlLoadTxnOpen     = "SELECT pid, producer_id, epoch, first_offset FROM txn_open ORDER BY pid, producer_id"
	sqlDeleteTxnOpen   = "DELETE FROM txn_open WHERE pid = ?"
	sqlInsertTxnOpen   = "INSERT INTO txn_open (pid, producer_id, epoch, first_offset) VALUES (?, ?, ?, ?)"
	sqlInsertMarker    = "INSERT INTO txn_markers (pid, offset, producer_id, epoch, commit_marker, coordinator_epoch, ts) VALUES (?, ?, ?, ?, ?, ?, ?)"
	sqlInsertMarkerRow = "INSERT INTO batches (pid, last_offset, n, object_id, pos, size, ts) VALUES (?, ?, 1, -1, 0, ?, ?)"
	sqlInsertAborted   = "INSERT OR REPLACE INTO aborted_txns (pid, last_offset, producer_id, first_offset, last_stable) VALUES (?, ?, ?, ?, ?)"
	sqlMarkerAt        = "SELECT producer_id, epoch, commit_marker, coordinator_epoch, ts FROM txn_markers WHERE pid = ? AND offset = ?"
	sqlAbortedIn       = "SELECT producer_id, first_offset, last_offset, last_stable FROM aborted_txns WHERE pid = ? AND last_offset >= ? AND first_offset <= ? ORDER BY first_offset"

	sqlDeleteTxnOpenOfPIDs = "DELETE FROM txn_open WHERE pid BETWEEN ? AND ?"
	sqlDeleteMarkersOfPIDs = "DELETE FROM txn_markers WHERE pid BETWEEN ? AND ?"
	sqlDeleteAbortedOfPIDs = "DELETE FROM aborted_txns WHERE pid BETWEEN ? AND ?"
	sqlDeleteMarkersBelow  = "DELETE FROM txn_markers WHERE pid = ? AND offset < ?"
	sqlDeleteAbortedBelow  = "DELETE FROM aborted_txns WHERE pid = ? AND last_offset < ?"
)

// putTxn writes a transaction's state, or deletes an expired one's.
func (s *DB) putTxn(ctx context.Context, r state.TxnStateRecord) error {
	if r.Txn.State == state.TxnDead {
		_, err := s.exec(ctx, sqlDeleteTxn, r.Txn.ID)
		return err
	}
	_, err := s.exec(ctx, sqlUpsertTxn, r.Txn.ID, r.AppendTo(nil))
	return err
}

// addMarker writes a marker: its batch row, its row, and the aborted
// index's row of an abort of a transaction that wrote.
func (s *DB) addMarker(ctx context.Context, root *state.View, r state.TxnMarkerRecord) error {
	if _, err := s.exec(ctx, sqlInsertMarkerRow, r.PID, r.Offset, markerSize, r.Time); err != nil {
		return err
	}
	if _, err := s.exec(ctx, sqlInsertMarker, r.PID, r.Offset, r.ProducerID, r.Epoch, state.BoolByte(r.Commit), r.CoordinatorEpoch, r.Time); err != nil {
		return err
	}
	if !r.Commit && r.First >= 0 {
		lso := r.Offset + 1
		if p := root.Part(r.PID); p != nil {
			// What the partition's open transactions hold back after
			// the marker: those that began before it.
			for _, o := range p.Open {
				if o.First >= 0 && o.First < r.Offset {
					lso = min(lso, o.First)
				}
			}
		}
		if _, err := s.exec(ctx, sqlInsertAborted, r.PID, r.Offset, r.ProducerID, r.First, lso); err != nil {
			return err
		}
	}
	if b := s.bytes[r.PID]; b != nil {
		b.batches += markerSize
	}
	s.dirtyProducers[state.ProducerKey{PID: r.PID, ProducerID: r.ProducerID}] = struct{}{}
	return nil
}

// writeOpenTxns writes the open transactions of the partitions pids as
// root has them.
func (s *DB) writeOpenTxns(ctx context.Context, root *state.View, pids []int64) error {
	for _, pid := range pids {
		if _, err := s.exec(ctx, sqlDeleteTxnOpen, pid); err != nil {
			return err
		}
		p := root.Part(pid)
		if p == nil {
			continue
		}
		for _, o := range p.Open {
			if _, err := s.exec(ctx, sqlInsertTxnOpen, pid, o.ProducerID, o.Epoch, o.First); err != nil {
				return err
			}
		}
	}
	return nil
}

// trimTxns deletes the markers and the aborted index's rows wholly below
// a partition's new log start.
func (s *DB) trimTxns(ctx context.Context, r state.TrimRecord) error {
	for _, q := range []string{sqlDeleteMarkersBelow, sqlDeleteAbortedBelow} {
		if _, err := s.exec(ctx, q, r.PID, r.LogStart); err != nil {
			return err
		}
	}
	return nil
}

// loadTxns loads the transactions' tables into v (opening).
func (s *DB) loadTxns(ctx context.Context, v *state.View) error {
	if err := s.scanEach(ctx, sqlLoadTxns, func(rows *sql.Rows) error {
		var blob []byte
		if err := rows.Scan(&blob); err != nil {
			return err
		}
		d := state.Decoder{B: blob}
		r := d.TxnState()
		if d.Err == nil && len(d.B) > 0 {
			d.Fail("bytes after a transaction")
		}
		if d.Err != nil {
			return fmt.Errorf("coordinator: a transaction row: %w", d.Err)
		}
		v.Txns[r.Txn.ID] = &r.Txn
		return nil
	}); err != nil {
		return err
	}
	return s.scanEach(ctx, sqlLoadTxnOpen, func(rows *sql.Rows) error {
		var o state.OpenTxn
		var pid int64
		if err := rows.Scan(&pid, &o.ProducerID, &o.Epoch, &o.First); err != nil {
			return err
		}
		if p := v.Parts[pid]; p != nil {
			p.Open = append(p.Open, o)
		}
		return nil
	})
}
