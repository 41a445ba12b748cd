package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"

	"github.com/diskless-go/diskless/coordinator/state"
)

func AppendRowPrint(b []byte, last, n int64, key string, pos, size int64) []byte {
	b = binary.AppendVarint(b, last)
	b = binary.AppendVarint(b, n)
	b = state.AppendString(b, key)
	b = binary.AppendVarint(b, pos)
	return binary.AppendVarint(b, size)
}

const (
	sqlRangeRows = `SELECT b.last_offset, b.n, COALESCE(o.key, ''), b.pos, b.size FROM batches b LEFT JOIN objects o ON o.object_id = b.object_id
WHERE b.pid = ? AND b.last_offset BETWEEN ? AND ? ORDER BY b.last_offset`
	sqlBatchesIn       = "SELECT object_id, COUNT(*) FROM batches WHERE pid = ? AND last_offset BETWEEN ? AND ? GROUP BY object_id"
	sqlBytesIn         = "SELECT COALESCE(SUM(size), 0) FROM batches WHERE pid = ? AND last_offset BETWEEN ? AND ?"
	sqlDeleteBatchesIn = "DELETE FROM batches WHERE pid = ? AND last_offset BETWEEN ? AND ?"
	sqlDeleteMarkersIn = "DELETE FROM txn_markers WHERE pid = ? AND offset BETWEEN ? AND ?"
	// The objects a compaction wrote are marked (objects.compacted): a
	// LogAppendTime topic's batches in them are stamped already (reads
	// leave their times), and examples/dump shows them.
	sqlMarkCompacted = "UPDATE objects SET compacted = 1 WHERE object_id = ?"
)

// rangePrints reads the fingerprints of the ranges of compactions
// (gather).
func (s *DB) rangePrints(ctx context.Context, root *state.View, reqs []state.CompactRequest) (map[[3]int64]uint64, error) {
	out := map[[3]int64]uint64{}
	for _, r := range reqs {
		p := root.Partition(r.TopicPartition)
		if p == nil {
			continue
		}
		st, err := s.Stmt(ctx, sqlRangeRows)
		if err != nil {
			return nil, err
		}
		rows, err := st.QueryContext(ctx, p.PID, r.From, r.To)
		if err != nil {
			return nil, fmt.Errorf("coordinator: reading a range: %w", err)
		}
		h := fnv.New64a()
		var b []byte
		first := true
		ok := true
		for rows.Next() {
			var last, n, pos, size int64
			var key string
			if err := rows.Scan(&last, &n, &key, &pos, &size); err != nil {
				rows.Close()
				return nil, err
			}
			if first && last-n+1 < r.From {
				ok = false // a run straddles From
			}
			first = false
			b = AppendRowPrint(b[:0], last, n, key, pos, size)
			h.Write(b)
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
		if ok {
			out[[3]int64{p.PID, r.From, r.To}] = h.Sum64()
		}
	}
	return out, nil
}

// compactRows writes a compactRecord: the range's rows go (their objects
// lose them, and die at r.CommitTime when left with none; its markers'
// rows with them: the new object holds them as batches), the new
// object's row and its rows come.
func (s *DB) compactRows(ctx context.Context, r state.CompactRecord) error {
	var freed int64
	st, err := s.Stmt(ctx, sqlBytesIn)
	if err != nil {
		return err
	}
	if err := st.QueryRowContext(ctx, r.PID, r.From, r.To).Scan(&freed); err != nil {
		return fmt.Errorf("coordinator: compacting: %w", err)
	}
	if err := s.releaseRows(ctx, sqlBatchesIn, r.CommitTime, r.PID, r.From, r.To); err != nil {
		return err
	}
	for _, q := range []string{sqlDeleteBatchesIn, sqlDeleteMarkersIn} {
		if _, err := s.exec(ctx, q, r.PID, r.From, r.To); err != nil {
			return err
		}
	}
	if b := s.bytes[r.PID]; b != nil {
		b.batches -= freed
	}
	objects, rows := s.commitRows(state.CommitFileRecord{ObjectID: r.ObjectID, Key: r.Key, Size: r.Size, Uploader: r.Uploader, CommitTime: r.CommitTime, Rows: r.Rows}, nil, nil)
	if err := s.bulk(ctx, sqlInsertObjectsHead, 8, "", objects); err != nil {
		return err
	}
	if _, err := s.exec(ctx, sqlMarkCompacted, r.ObjectID); err != nil {
		return err
	}
	return s.bulk(ctx, sqlInsertBatchesHead, 7, "", rows)
}
