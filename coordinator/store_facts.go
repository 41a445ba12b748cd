package coordinator

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
)

// gather reads from the committed store what the ops of a group need
// (core.go: needs, facts). root is the committed view, now the group's
// time. A failure is in facts.err, for the ops that need facts to fail
// with.
func (s *store) gather(ctx context.Context, root *view, n *needs, now int64) *facts {
	f := &facts{}
	if len(n.keys) > 0 {
		f.objects, f.err = s.objectStates(ctx, n.keys)
	}
	for _, k := range n.commitKeys {
		if _, ok := f.objects[k]; ok && f.err == nil {
			// A commit retried (its answer lost), of an object this
			// shard's view has no recent record of (its database
			// applied the first commit before this leader began):
			// rare, and a scan of the batch rows.
			var rc *recentCommit
			if rc, f.err = s.committedRows(ctx, k); rc != nil {
				if f.commits == nil {
					f.commits = map[string]*recentCommit{}
				}
				f.commits[k] = rc
			}
		}
	}
	if n.retention && f.err == nil {
		f.cuts, f.err = s.retentionCuts(ctx, root, now)
	}
	if len(n.ranges) > 0 && f.err == nil {
		f.prints, f.err = s.rangePrints(ctx, root, n.ranges)
	}
	return f
}

// objectState is what decisions and the lifecycle need of an object's row.
type objectState struct {
	id, live int64
	deadAt   int64 // when live went to 0
	owners   []int32
	received bool
}

// owns reports whether shard owns the object: it is the first owner, or
// it has received it.
func (s objectState) owns(shard int) bool {
	return s.received || len(s.owners) == 0 || int(s.owners[0]) == shard
}

// objectStates returns the rows of those of keys that name objects, with
// one query per maxBulkRows keys.
func (s *store) objectStates(ctx context.Context, keys []string) (map[string]objectState, error) {
	keys = slices.Compact(slices.Sorted(slices.Values(keys)))
	out := make(map[string]objectState, len(keys))
	for len(keys) > 0 {
		n := min(len(keys), maxBulkRows)
		st, err := s.stmt(ctx, sqlObjectStatesHead+"("+strings.TrimSuffix(strings.Repeat("?,", n), ",")+")")
		if err != nil {
			return nil, err
		}
		args := make([]any, n)
		for i := range args {
			args[i] = keys[i]
		}
		rows, err := st.QueryContext(ctx, args...)
		if err != nil {
			return nil, fmt.Errorf("coordinator: looking up objects: %w", err)
		}
		for rows.Next() {
			var key string
			var o objectState
			var owners []byte
			if err := rows.Scan(&key, &o.id, &o.live, &o.deadAt, &owners, &o.received); err != nil {
				rows.Close()
				return nil, err
			}
			if o.owners, err = decodeInt32s(owners); err != nil {
				rows.Close()
				return nil, fmt.Errorf("coordinator: object %s: %w", key, err)
			}
			out[key] = o
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
		keys = keys[n:]
	}
	return out, nil
}

// retentionCuts decides, for every partition of a topic whose
// cleanup.policy includes delete, how far retention.ms and retention.bytes
// move its committed log start: over its committed remote segments and
// then batches, oldest first, stopping at the first that stays (Kafka's
// deleteOldSegments, with batches for segments after the remote ones).
// retention.bytes counts the remote segments' bytes and the batches'. It
// returns the partitions whose log start moves.
func (s *store) retentionCuts(ctx context.Context, root *view, now int64) (map[int64]int64, error) {
	batches, err := s.stmt(ctx, sqlRetentionBatches)
	if err != nil {
		return nil, err
	}
	remote, err := s.stmt(ctx, sqlRetentionRemote)
	if err != nil {
		return nil, err
	}
	cuts := map[int64]int64{}
	for pid, p := range root.parts {
		t := root.topic(p.TopicID)
		b := s.bytes[pid]
		if t == nil || b == nil || !t.Config.Delete || (t.Config.Retention < 0 && t.Config.RetentionBytes < 0) {
			continue
		}
		excess := int64(-1)
		if t.Config.RetentionBytes >= 0 {
			excess = b.batches + b.remote - t.Config.RetentionBytes
		}
		cutoff := int64(-1 << 63)
		if t.Config.Retention >= 0 {
			cutoff = now - t.Config.retentionMs()
		}
		start := p.LogStart
		// Remote segments first: they hold the oldest offsets. Then the
		// batches, if every remote segment went.
		for _, q := range []*sql.Stmt{remote, batches} {
			var stayed bool
			if start, excess, stayed, err = retentionScan(ctx, q, pid, start, excess, cutoff); err != nil {
				return nil, err
			}
			if stayed {
				break
			}
		}
		if start > p.LogStart {
			cuts[pid] = start
		}
	}
	return cuts, nil
}

// retentionScan walks q's rows (end offset, size, max timestamp) of pid
// from start, dropping each while it is older than cutoff or the
// partition holds excess bytes beyond retention.bytes (excess < 0: no
// bound). It returns where the log start moves, the excess left, and
// whether a row stayed.
func retentionScan(ctx context.Context, q *sql.Stmt, pid, start, excess, cutoff int64) (int64, int64, bool, error) {
	rows, err := q.QueryContext(ctx, pid, start)
	if err != nil {
		return start, excess, false, fmt.Errorf("coordinator: retention of partition %d: %w", pid, err)
	}
	defer rows.Close()
	for rows.Next() {
		var last, size, ts int64
		if err := rows.Scan(&last, &size, &ts); err != nil {
			return start, excess, false, err
		}
		byTime := ts < cutoff
		bySize := excess >= 0 && excess-size >= 0
		if !byTime && !bySize {
			return start, excess, true, nil
		}
		excess -= size
		start = last + 1
	}
	return start, excess, false, rows.Err()
}

// committedRows returns the batch rows of object key as its commit made
// them (those still in the database), and the commit's time.
func (s *store) committedRows(ctx context.Context, key string) (*recentCommit, error) {
	st, err := s.stmt(ctx, sqlCommittedRows)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var rc *recentCommit
	for rows.Next() {
		var at, n, ts int64
		var w commitRow
		if err := rows.Scan(&at, &w.PID, &w.LastOffset, &n, &w.BytePos, &w.ByteSize, &ts); err != nil {
			return nil, err
		}
		if rc == nil {
			rc = &recentCommit{time: at}
		}
		w.BaseOffset, w.MaxTimestamp = w.LastOffset-n+1, ts+at
		rc.rows = append(rc.rows, w)
	}
	return rc, rows.Err()
}
