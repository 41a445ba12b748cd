package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/diskless-go/diskless/coordinator/state"
)

// Gather reads from the committed store what the ops of a group need
// (package state: Needs, Facts). root is the committed view, now the group's
// time. A failure is in facts.err, for the ops that need facts to fail
// with.
//
// With an applier running (applier.go), a group whose facts are only
// object keys that name no object (new objects to commit: nearly every
// group) is gathered beside it; any other first waits for its queue.
func (s *DB) Gather(ctx context.Context, root *state.View, n *state.Needs, now int64) *state.Facts {
	if s.ap != nil {
		if f := s.gatherBehind(ctx, n); f != nil {
			return f
		}
		if err := s.Sync(); err != nil {
			return &state.Facts{Err: err}
		}
	}
	f := &state.Facts{}
	if len(n.Keys) > 0 {
		f.Objects, f.Err = s.objectStates(ctx, n.Keys)
	}
	for _, k := range n.CommitKeys {
		if _, ok := f.Objects[k]; ok && f.Err == nil {
			// A commit retried (its answer lost), of an object this
			// shard's view has no recent record of (its database
			// applied the first commit before this leader began):
			// rare, and a scan of the batch rows.
			var rc *state.RecentCommit
			if rc, f.Err = s.committedRows(ctx, k); rc != nil {
				if f.Commits == nil {
					f.Commits = map[string]*state.RecentCommit{}
				}
				f.Commits[k] = rc
			}
		}
	}
	if n.Retention && f.Err == nil {
		f.Cuts, f.Err = s.retentionCuts(ctx, root, now)
	}
	if len(n.Ranges) > 0 && f.Err == nil {
		f.Prints, f.Err = s.rangePrints(ctx, root, n.Ranges)
	}
	return f
}

// gatherBehind gathers, while the applier runs, the facts of a group that
// needs only object keys, none of which names an object: the keys of new
// objects to commit, nearly every group's. It reads the committed
// database on the loop's read-only connection (look), beside the
// applier's statements: an object's row is there unless its insert's
// transaction has not committed yet, and then its key is in queuedKeys
// (the applier's queue only inserts object rows); a statement run
// outside the queue (a rare record's) may change any, so until its
// transaction committed (dirtyTxn) every group waits for the queue. It
// returns nil when the group needs more, or a key is found or queued:
// then the caller waits for the queue and gathers on the writer's
// connection, as without an applier.
func (s *DB) gatherBehind(ctx context.Context, n *state.Needs) *state.Facts {
	if n.Retention || len(n.Ranges) > 0 {
		return nil
	}
	f := &state.Facts{}
	if len(n.Keys) == 0 {
		return f
	}
	done := s.committedTxns.Load()
	if s.dirtyTxn > done {
		return nil
	}
	s.pruneQueued(done)
	for _, k := range n.Keys {
		if _, ok := s.queuedKeys[k]; ok {
			return nil
		}
	}
	objs, err := s.lookCommitted(ctx, n.Keys)
	if err != nil || len(objs) > 0 {
		return nil
	}
	f.Objects = objs
	return f
}

// objectStates returns the rows of those of keys that name objects, with
// one query per maxBulkRows keys.
func (s *DB) objectStates(ctx context.Context, keys []string) (map[string]state.ObjectState, error) {
	return s.lookObjects(ctx, keys, s.Stmt)
}

// lookCommitted is objectStates as the committed database has them, on
// the loop's read-only connection.
func (s *DB) lookCommitted(ctx context.Context, keys []string) (map[string]state.ObjectState, error) {
	return s.lookObjects(ctx, keys, func(ctx context.Context, q string) (*sql.Stmt, error) {
		if st, ok := s.lookStmts[q]; ok {
			return st, nil
		}
		st, err := s.look.PrepareContext(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("coordinator: preparing %q: %w", q, err)
		}
		if s.lookStmts == nil {
			s.lookStmts = map[string]*sql.Stmt{}
		}
		s.lookStmts[q] = st
		return st, nil
	})
}

// lookObjects is objectStates with the statements of prepare.
func (s *DB) lookObjects(ctx context.Context, keys []string, prepare func(context.Context, string) (*sql.Stmt, error)) (map[string]state.ObjectState, error) {
	keys = slices.Compact(slices.Sorted(slices.Values(keys)))
	out := make(map[string]state.ObjectState, len(keys))
	for len(keys) > 0 {
		n := min(len(keys), maxBulkRows)
		st, err := prepare(ctx, sqlObjectStatesHead+"("+strings.TrimSuffix(strings.Repeat("?,", n), ",")+")")
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
			var o state.ObjectState
			var owners []byte
			if err := rows.Scan(&key, &o.ID, &o.Live, &o.DeadAt, &owners, &o.Received); err != nil {
				rows.Close()
				return nil, err
			}
			if o.Owners, err = DecodeInt32s(owners); err != nil {
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
func (s *DB) retentionCuts(ctx context.Context, root *state.View, now int64) (map[int64]int64, error) {
	batches, err := s.Stmt(ctx, sqlRetentionBatches)
	if err != nil {
		return nil, err
	}
	remote, err := s.Stmt(ctx, sqlRetentionRemote)
	if err != nil {
		return nil, err
	}
	cuts := map[int64]int64{}
	for pid, p := range root.Parts {
		t := root.Topic(p.TopicID)
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
			cutoff = now - t.Config.RetentionMs()
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
func (s *DB) committedRows(ctx context.Context, key string) (*state.RecentCommit, error) {
	st, err := s.Stmt(ctx, sqlCommittedRows)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var rc *state.RecentCommit
	for rows.Next() {
		var at, n, ts int64
		var w state.CommitRow
		if err := rows.Scan(&at, &w.PID, &w.LastOffset, &n, &w.BytePos, &w.ByteSize, &ts); err != nil {
			return nil, err
		}
		if rc == nil {
			rc = &state.RecentCommit{Time: at}
		}
		w.BaseOffset, w.MaxTimestamp = w.LastOffset-n+1, ts+at
		rc.Rows = append(rc.Rows, w)
	}
	return rc, rows.Err()
}
