package coordinator

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"

	"github.com/diskless-go/diskless/coordinator/state"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal"
)

// Compaction's replacement of a range (the coordinator's part of compacting
// diskless topics; the compactor is replica/compact.go).
//
// A compactor reads a partition's batches from From to To (FindBatches),
// keeps what Kafka's cleaner keeps, writes the result as a new WAL-format
// object and asks the partition's shard to replace the range with it:
// one record, compactRecord, that deletes every batch row of the range
// (their objects lose them, and die when they have none left: the
// existing deletion grace applies) and inserts the rows of the new
// object, at the offsets the batches had (a compacted log has holes, as
// in Kafka). A reader sees the old rows or the new ones, never a mix.
//
// The replacement is accepted only if the range is still what the
// compactor read: the request carries RangeFingerprint of the locations
// it read, and the shard's leader compares it with the committed rows
// (and refuses while a trim, an offload or another replacement of the
// partition is on its way to the log). A compactor that lost the race
// gets ErrRangeChanged and tries again later; its object is then an
// orphan the collector deletes, as is one whose commit never came (a
// crash between upload and commit).

// RangeFingerprint is the fingerprint of a range's batch rows, as the
// locations FindBatches returned for them: the FNV-1a hash of each one's
// last offset, offset count, object key, byte position and size.
func RangeFingerprint(locs []Location) uint64 {
	h := fnv.New64a()
	var b []byte
	for _, l := range locs {
		b = appendRowPrint(b[:0], l.LastOffset, l.LastOffset-l.BaseOffset+1, l.ObjectKey, l.BytePos, l.ByteSize)
		h.Write(b)
	}
	return h.Sum64()
}

func appendRowPrint(b []byte, last, n int64, key string, pos, size int64) []byte {
	b = binary.AppendVarint(b, last)
	b = binary.AppendVarint(b, n)
	b = state.AppendString(b, key)
	b = binary.AppendVarint(b, pos)
	return binary.AppendVarint(b, size)
}

// --- deciding -------------------------------------------------------------

// --- the store --------------------------------------------------------------

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
func (s *store) rangePrints(ctx context.Context, root *state.View, reqs []CompactRequest) (map[[3]int64]uint64, error) {
	out := map[[3]int64]uint64{}
	for _, r := range reqs {
		p := root.Partition(r.TopicPartition)
		if p == nil {
			continue
		}
		st, err := s.stmt(ctx, sqlRangeRows)
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
			b = appendRowPrint(b[:0], last, n, key, pos, size)
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
func (s *store) compactRows(ctx context.Context, r state.CompactRecord) error {
	var freed int64
	st, err := s.stmt(ctx, sqlBytesIn)
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

// --- the API ----------------------------------------------------------------

// Compact replaces a range of a partition of this shard (see
// CompactRequest); ErrRangeChanged when it is no longer what was read.
func (c *leader) Compact(ctx context.Context, req CompactRequest) error {
	o := &state.CompactOp{BaseOp: newBaseOp(ctx), Req: req}
	return c.submit(ctx, o, o.Done)
}

// LeadsPartition reports whether this process leads the shard that
// serves tp: there, and only there, Compact is served (exactly one
// compactor per partition at a time: the shard's leader's).
func (s *Coordinator) LeadsPartition(tp wal.TopicPartition) bool {
	i, err := s.ShardOf(tp)
	return err == nil && s.Leads(i)
}

// Compact replaces a range of a partition's batches with the compacted
// runs of a new object, at the same offsets, atomically: readers see
// the old batches or the new ones. It fails with ErrRangeChanged when the
// range is no longer what the compactor read (RangeFingerprint), and with
// Kafka's codes for a bad request (INVALID_REQUEST) or an unknown
// partition.
func (s *Coordinator) Compact(ctx context.Context, req CompactRequest) error {
	c, err := s.shardFor(ctx, req.TopicPartition)
	if err != nil {
		return err
	}
	l, ok := c.(*leader)
	if !ok {
		return kafkaerr.New(kafkaerr.NotLeaderOrFollower, "the shard of %s is led by another broker: compact there", req.TopicPartition)
	}
	return l.Compact(ctx, req)
}
