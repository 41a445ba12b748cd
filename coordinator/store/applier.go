package store

import (
	"context"
	"database/sql"
	"fmt"
	"sync"

	"github.com/diskless-go/diskless/coordinator/state"
)

// The applier: a goroutine that runs the writer's statements behind the
// loop, so that a leader's loop decides and answers the next entries on
// one core while SQLite writes the last ones on another.
//
// While it runs (StartApplier to StopApplier), the statements of the
// common entries (those whose records only insert or upsert rows, see
// deferrable: commits, confirms, offsets, transactions' states and
// markers), the producer states written behind, the partitions' and
// meta's rows at a commit, and the transaction's BEGIN and COMMIT are
// queued, in order, with their values computed when queued (from the
// view as it is then), and run in that order on the applier's goroutine.
// Everything else first waits until the queue is empty (sync) and then
// runs on the caller's goroutine as before: any statement that reads
// (the facts of a decision, the rows a trim releases, a void's bytes) or
// that writes what a read needs next, and every rare record. So the
// database, as the writer's connection sees it, is always the one the
// statements would have made run in order; only when they run changes.
//
// What the loop must not assume: that an entry's rows are in the database
// when Write returns. Nothing in the loop reads them before a sync except
// Gather's lookup of object keys (gatherBehind), which reads the committed
// database on a connection of its own (the writer's is busy with the
// applier's statements), adds the keys of the objects inserted in
// transactions not yet committed (queuedKeys), and syncs instead whenever
// a key it needs is found or so inserted, or a statement outside the
// queue may have changed an object's row in a transaction not yet
// committed (dirtyTxn). Reads of the read pool wait for a commit, and
// a queued COMMIT runs its then (the leader's setCommitted) only once it
// succeeded. A failed statement stops the queue: the rest is dropped, the
// error is kept (Sync and every later call return it), and onErr is told.
//
// The queue holds at most maxApplierJobs statements: the loop waits for
// room, so that a read, whose commit is queued behind them, waits at most
// that many statements (each at most maxBulkRows rows).
type applier struct {
	mu     sync.Mutex
	cond   *sync.Cond // jobs added or run, or stop
	jobs   []applierJob
	queued int64 // jobs ever queued
	done   int64 // jobs run (or dropped after a failure)
	err    error
	stop   bool
	exited chan struct{}
	onErr  func(error)
}

// applierJob is one statement: st with args, or q (BEGIN, COMMIT) on the
// connection; then runs after it succeeded.
type applierJob struct {
	st   *sql.Stmt
	q    string
	args []any
	then func()
}

// maxApplierJobs bounds the applier's queue.
const maxApplierJobs = 64

// StartApplier starts the applier (see applier): from now until
// StopApplier, the caller (the leader's loop, the only goroutine that uses
// the writer) has deferrable statements run behind it. onErr is told of
// the first statement that failed, on the applier's goroutine.
func (s *DB) StartApplier(onErr func(error)) {
	if s.ap != nil {
		return
	}
	s.ap = newApplier(onErr)
	go s.ap.run(s.W)
}

// newApplier returns an applier not yet running.
func newApplier(onErr func(error)) *applier {
	a := &applier{exited: make(chan struct{}), onErr: onErr}
	a.cond = sync.NewCond(&a.mu)
	return a
}

// StopApplier runs what is queued, stops the applier and returns its
// error, if a statement failed: the open transaction is then rolled back.
// Statements then run on the caller's goroutine again.
func (s *DB) StopApplier() error {
	a := s.ap
	if a == nil {
		return nil
	}
	a.mu.Lock()
	a.stop = true
	a.cond.Broadcast()
	a.mu.Unlock()
	<-a.exited
	s.ap = nil
	s.queuedKeys, s.queuedOrder = nil, nil
	if a.err != nil {
		// What ran of the open transaction is partial, and the rest was
		// dropped: none of it may commit (a later CommitTxn, MarkClean's,
		// would write meta as if all had run). The database stays as of
		// the last commit that ran, its meta with it; reopening replays
		// the log from there.
		s.InTxn = false
		clear(s.dirtyParts)
		s.metaDue = nil
		_, _ = s.W.ExecContext(context.Background(), "ROLLBACK")
	}
	return a.err
}

// Sync waits until every queued statement ran, and returns the applier's
// error if one failed. Without an applier it returns nil at once.
func (s *DB) Sync() error {
	a := s.ap
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for a.done < a.queued && a.err == nil {
		a.cond.Wait()
	}
	return a.err
}

// enqueue queues a job, waiting while the queue is full; it returns the
// applier's error instead if a statement failed.
func (a *applier) enqueue(j applierJob) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for len(a.jobs) >= maxApplierJobs && a.err == nil {
		a.cond.Wait()
	}
	if a.err != nil {
		return a.err
	}
	a.jobs = append(a.jobs, j)
	a.queued++
	a.cond.Broadcast()
	return nil
}

func (a *applier) run(w *sql.Conn) {
	defer close(a.exited)
	ctx := context.Background()
	// carried are the thens of the commits merged into a later one, and
	// skipBegin says the next BEGIN goes with them.
	var carried []func()
	skipBegin := false
	for {
		a.mu.Lock()
		for len(a.jobs) == 0 && !a.stop {
			a.cond.Wait()
		}
		if len(a.jobs) == 0 {
			a.mu.Unlock()
			return
		}
		j := a.jobs[0]
		a.jobs[0] = applierJob{}
		a.jobs = a.jobs[1:]
		failed := a.err != nil
		merge := j.q == "COMMIT" && a.commitQueued()
		a.mu.Unlock()

		var err error
		switch {
		case failed:
		case merge:
			// Behind: another commit is queued already. This
			// transaction goes on into that one (what it wrote stays
			// written; the partitions' and meta's rows are upserts the
			// later commit writes again), and those waiting for this
			// commit wait for that one: under load, fewer and larger
			// commits, each hot page written once for more rows.
			carried = append(carried, j.then)
			skipBegin = true
		case skipBegin && j.q == "BEGIN IMMEDIATE":
			skipBegin = false
		default:
			if j.st != nil {
				_, err = j.st.ExecContext(ctx, j.args...)
			} else {
				_, err = w.ExecContext(ctx, j.q)
			}
			if err != nil {
				err = fmt.Errorf("coordinator: applying behind the loop: %w", err)
				break
			}
			if j.q == "COMMIT" {
				for _, f := range carried {
					f()
				}
				carried = carried[:0]
			}
			if j.then != nil {
				j.then()
			}
		}

		// Only this goroutine sets err: it reads it without the lock. The
		// owner hears of a failure before Sync returns it.
		first := err != nil && a.err == nil
		if first && a.onErr != nil {
			a.onErr(err)
		}
		a.mu.Lock()
		a.done++
		if first {
			a.err = err
		}
		a.cond.Broadcast()
		a.mu.Unlock()
	}
}

// commitQueued reports whether a COMMIT is queued. The caller holds a.mu.
func (a *applier) commitQueued() bool {
	for _, j := range a.jobs {
		if j.q == "COMMIT" {
			return true
		}
	}
	return false
}

// deferring reports whether the writer's statements are queued rather
// than run: an applier runs and the caller is in a deferrable section.
func (s *DB) deferring() bool { return s.ap != nil && s.deferNow }

// syncFirst, outside a deferrable section, waits until the applier ran
// everything queued, so that what the caller runs next on the writer
// sees (and follows) every statement before it.
func (s *DB) syncFirst() error {
	if s.ap == nil || s.deferNow {
		return nil
	}
	return s.Sync()
}

// deferrable reports whether a record's statements may run behind the
// loop: they only insert, upsert or delete rows by key, read nothing of
// the database, and take their values from the record and the view as it
// is when they are queued.
func deferrable(r state.Record) bool {
	switch r.(type) {
	case state.CommitFileRecord, state.ConfirmRecord, state.OffsetCommitRecord, state.OffsetDeleteRecord,
		state.GroupClaimRecord, state.GroupMetadataRecord, state.TxnStateRecord, state.TxnMarkerRecord, state.EpochRecord:
		return true
	}
	return false
}

// queueKey records that object key's row is inserted in the writer's
// transaction txn (queued): the read-only connection of gatherBehind
// does not see it before that transaction committed.
func (s *DB) queueKey(key string, txn int64) {
	if s.queuedKeys == nil {
		s.queuedKeys = map[string]int64{}
	}
	s.queuedKeys[key] = txn
	s.queuedOrder = append(s.queuedOrder, queuedKey{key, txn})
}

// queuedKey is an object key inserted in a transaction not known to be
// committed yet.
type queuedKey struct {
	key string
	txn int64
}

// pruneQueued forgets the keys whose transactions committed by done.
func (s *DB) pruneQueued(done int64) {
	i := 0
	for ; i < len(s.queuedOrder) && s.queuedOrder[i].txn <= done; i++ {
		k := s.queuedOrder[i]
		if s.queuedKeys[k.key] == k.txn {
			delete(s.queuedKeys, k.key)
		}
	}
	s.queuedOrder = s.queuedOrder[i:]
}
