package coordinator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"
	"gocloud.dev/blob"

	"github.com/diskless-go/diskless/clock"
	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/wal"
)

// leaderOptions configure a leader. The zero value holds the defaults; a nil
// *leaderOptions means the zero value.
type leaderOptions struct {
	// Dir is the folder of the SQLite database, shard-<Shard>.db. It is a
	// cache that may be deleted while the coordinator is closed. "" means a
	// temporary folder removed by Close.
	Dir string
	// Shard is this coordinator's shard number, in file and object names.
	Shard int
	// Name names this leader in the epoch record it logs when it claims the
	// log.
	Name string
	// Bucket, with Prefix, holds snapshots under <Prefix>meta/<Shard>/snapshots/.
	// Nil means no snapshots (and the log is never trimmed).
	Bucket *blob.Bucket
	Prefix string
	// SnapshotEvery takes a snapshot after this many entries have been
	// applied since the last one. 0 means 10,000; negative means never
	// automatically (Snapshot may still be called).
	SnapshotEvery int64
	// SnapshotBytes takes a snapshot once the entries applied since the
	// last one hold this many bytes, or as many as the last snapshot if
	// it is larger (so the log kept is never much larger than what
	// replaces it, and a snapshot's cost is at most that of the entries
	// it saves replaying). 0 means 4 MiB; negative means never by size.
	// A negative SnapshotEvery turns this off too.
	SnapshotBytes int64
	// MaxGroupCoordinates bounds the batch coordinates of one log entry.
	// 0 means 50,000.
	MaxGroupCoordinates int
	// ApplyInterval is how long applied entries may stay in the writer's
	// open database transaction before it commits: requests are answered
	// once their entry is durable and applied, and the read pool
	// (FindBatches' rows, DeadObjects) sees them at the next commit, at
	// most this much later. ListOffsets and offset checks are always
	// current. One transaction for many entries writes each hot page once
	// per commit rather than once per entry. 0 means 10 ms; negative means
	// commit each entry before answering its requests, so that the read
	// pool sees an answered request at once (read-your-writes, as tests
	// and harnesses want; slower).
	ApplyInterval time.Duration
	// Readers is the size of the read-only connection pool. 0 means 4.
	Readers int
	// Clock is the time source of commit times, LogAppendTime, retention,
	// the age of dead objects and the database's commit interval; nil
	// means clock.System.
	Clock clock.Clock
	// Logger logs leadership, snapshots and failures; nil means none.
	Logger *zap.Logger
	// CommitDeadline, when positive, refuses (REQUEST_TIMED_OUT, which a
	// producer retries) the commit of an object whose key, a WAL object
	// key under Prefix, was named longer ago than this: the orphan
	// collector deletes uncommitted objects older than its grace, and
	// this is what makes sure none of them is committed afterwards (see
	// Options.OrphanGrace). 0 means no deadline.
	CommitDeadline time.Duration
	// TxnIDExpiration removes, at ExpireTxns, the transactional IDs whose
	// transaction is over (Empty, CompleteCommit, CompleteAbort) and whose
	// state has not changed for this long. 0 or negative means never.
	TxnIDExpiration time.Duration
	// Lifecycle, when not nil, runs this shard's part of the WAL object
	// lifecycle in the background: hand objects on to their next owner,
	// delete those whose last owner this is. Nil means none (DeadObjects
	// and ObjectsDeleted let the caller do it).
	Lifecycle *LifecycleOptions
}

// leader is the batch coordinator of one shard: it decides the order
// of everything in its partitions. Mutating calls go through one loop that
// checks them against the speculative state, sends their records to the
// log, applies the records to SQLite once durable, and answers. Reads go
// to a pool of read-only connections. It is safe for concurrent use.
type leader struct {
	log    metalog.Log
	store  *store
	opts   leaderOptions
	clock  clock.Clock
	logger *zap.Logger
	tmpDir string

	ops     chan op
	closing chan struct{}
	stopped chan struct{} // closed when the loop has returned
	wg      sync.WaitGroup
	once    sync.Once

	epoch   int32
	pub     *published
	broken  atomic.Pointer[error] // set when the log fails or is fenced
	applied atomic.Int64          // offset of the last applied entry
	stats   counters

	// committed is the offset of the last entry whose database
	// transaction has committed: the read pool sees every entry up to it.
	// Reads wait for it to reach what they answer for (readBarrier),
	// nudging the loop to commit at once.
	committed atomic.Int64
	nudge     chan struct{}
	commitMu  sync.Mutex
	commitCh  chan struct{} // closed (and replaced) when committed moves

	snapMu       sync.Mutex // serialises snapshots
	lastSnapshot atomic.Int64
	// sinceSnapshot is the bytes of the entries applied since the last
	// snapshot, and snapshotSize the size of the last one uploaded
	// (leaderOptions.SnapshotBytes).
	sinceSnapshot, snapshotSize atomic.Int64

	lc *lifecycle // nil without leaderOptions.Lifecycle
}

// counters are the coordinator's statistics.
type counters struct {
	entries, records, coords, commits atomic.Int64
	skipped                           atomic.Int64
	// The lifecycle's (see Stats).
	received, forgotten atomic.Int64
}

// ShardStats is a snapshot of one shard's counters.
type ShardStats struct {
	// Entries and Records appended to the log and applied.
	Entries, Records int64
	// Commits is the CommitFile calls applied; Coordinates their batches.
	Commits, Coordinates int64
	// Applied is the offset of the last log entry applied.
	Applied int64
	// Skipped counts the log entries read and not applied: a fenced
	// leader's, or ones sent behind a put that failed (see "Log entries"
	// in the package doc).
	Skipped int64

	// The WAL object lifecycle (LifecycleOptions). HandedOff counts the
	// objects this shard handed to a next owner; Received the ownerships
	// it logged receiving; Deleted the objects it deleted from the bucket
	// as their last owner; Forgotten the object rows it removed
	// (ObjectsDeleted); LifecycleErrors the failed steps (each retried
	// after a backoff); LifecycleRuns the worker's passes.
	HandedOff, Received, Deleted, Forgotten, LifecycleErrors, LifecycleRuns int64

	// RemoteSegments counts the live remote segments (remote.go) and
	// RemoteBytes their .log bytes.
	RemoteSegments, RemoteBytes int64
}

// Stats returns the coordinator's counters.
func (c *leader) Stats() ShardStats {
	s := ShardStats{
		Entries: c.stats.entries.Load(), Records: c.stats.records.Load(),
		Commits: c.stats.commits.Load(), Coordinates: c.stats.coords.Load(),
		Applied: c.applied.Load(), Skipped: c.stats.skipped.Load(),
		Received: c.stats.received.Load(), Forgotten: c.stats.forgotten.Load(),
		RemoteSegments: c.store.remoteSegments.Load(), RemoteBytes: c.store.remoteBytes.Load(),
	}
	if c.lc != nil {
		st := &c.lc.stats
		s.HandedOff, s.Deleted, s.LifecycleErrors, s.LifecycleRuns = st.handedOff.Load(), st.deleted.Load(), st.errors.Load(), st.runs.Load()
	}
	return s
}

// RunLifecycle runs one pass of the lifecycle worker now (tests, or a
// caller that set LifecycleOptions.Interval negative): hand on the dead
// objects this shard owns, delete those it is the last owner of whose grace
// has passed. The error is the first failure, if any; the run counts them
// all. It needs Options.Lifecycle.
func (c *leader) RunLifecycle(ctx context.Context) (LifecycleRun, error) {
	if c.lc == nil {
		return LifecycleRun{}, fmt.Errorf("%w: RunLifecycle needs Options.Lifecycle", ErrInvalidOptions)
	}
	return c.lc.pass(ctx)
}

// deadObjects implements lifecycleShard: it reads the read pool once it
// holds every entry applied.
func (c *leader) deadObjects(ctx context.Context, limit int) ([]objectRowState, error) {
	if err := c.readBarrier(ctx, c.applied.Load()); err != nil {
		return nil, err
	}
	return c.store.reader.deadObjectRows(ctx, limit)
}

// Open opens the coordinator of a shard over its log: it loads the SQLite
// state (or the newest snapshot, when the database is missing or older than
// the log), replays the log after it, claims the log by appending an epoch
// record, and starts its loop.
func openLeader(ctx context.Context, log metalog.Log, opts *leaderOptions) (*leader, error) {
	var o leaderOptions
	if opts != nil {
		o = *opts
	}
	if o.SnapshotEvery == 0 {
		o.SnapshotEvery = 10_000
	}
	if o.SnapshotBytes == 0 {
		o.SnapshotBytes = 4 << 20
	}
	if o.MaxGroupCoordinates == 0 {
		o.MaxGroupCoordinates = 50_000
	}
	if o.Readers == 0 {
		o.Readers = 4
	}
	if o.ApplyInterval == 0 {
		o.ApplyInterval = 10 * time.Millisecond
	}
	switch {
	case o.Shard < 0:
		return nil, fmt.Errorf("%w: Shard %d is negative", ErrInvalidOptions, o.Shard)
	case o.MaxGroupCoordinates < 0:
		return nil, fmt.Errorf("%w: MaxGroupCoordinates %d is negative", ErrInvalidOptions, o.MaxGroupCoordinates)
	case o.Readers < 0:
		return nil, fmt.Errorf("%w: Readers %d is negative", ErrInvalidOptions, o.Readers)
	case o.CommitDeadline < 0:
		return nil, fmt.Errorf("%w: CommitDeadline %v is negative", ErrInvalidOptions, o.CommitDeadline)
	}
	var lo LifecycleOptions
	if o.Lifecycle != nil {
		var err error
		if lo, err = o.Lifecycle.withDefaults(); err != nil {
			return nil, err
		}
	}
	c := &leader{
		log:      log,
		opts:     o,
		clock:    o.Clock,
		logger:   o.Logger,
		ops:      make(chan op, 1024),
		closing:  make(chan struct{}),
		stopped:  make(chan struct{}),
		pub:      newPublished(),
		nudge:    make(chan struct{}, 1),
		commitCh: make(chan struct{}),
	}
	c.clock = clock.Or(c.clock)
	if c.logger == nil {
		c.logger = zap.NewNop()
	}
	if o.Dir == "" {
		dir, err := os.MkdirTemp("", "diskless-coordinator-")
		if err != nil {
			return nil, fmt.Errorf("coordinator: %w", err)
		}
		c.tmpDir, o.Dir = dir, dir
		c.opts.Dir = dir
	}
	root, err := c.load(ctx)
	if err != nil {
		c.cleanup()
		return nil, err
	}
	if err := c.claim(ctx, root); err != nil {
		c.cleanup()
		return nil, err
	}
	if o.Lifecycle != nil {
		c.lc = newLifecycle(c, lifecycleEnv{shard: o.Shard, prefix: o.Prefix, commitDeadline: o.CommitDeadline, clock: c.clock, logger: c.logger}, lo) // before the loop, which wakes it
	}
	c.wg.Add(1)
	go pprof.Do(context.Background(), pprof.Labels("diskless", "coordinator-loop", "shard", fmt.Sprint(o.Shard)), func(context.Context) {
		defer c.wg.Done()
		defer close(c.stopped)
		c.loop(root)
	})
	if c.lc != nil {
		c.lc.start()
	}
	return c, nil
}

func (c *leader) dbPath() string {
	return filepath.Join(c.opts.Dir, fmt.Sprintf("shard-%d.db", c.opts.Shard))
}

// load opens the store at the newest state it can reach: the database if
// the log still holds everything after it, else the newest snapshot; then
// it replays the log.
func (c *leader) load(ctx context.Context) (*view, error) {
	st, root, applied, err := c.openDB(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.checkNotAhead(ctx, st, applied); err != nil {
		st.close()
		return nil, err
	}
	if min(applied, st.producersAt)+1 < c.log.Start() {
		// The log no longer holds what comes after the database: start
		// from the newest snapshot instead.
		st.close()
		if err := c.restoreSnapshot(ctx, c.log.Start()-1); err != nil {
			return nil, c.explainStart(err)
		}
		if st, root, applied, err = c.openDB(ctx); err != nil {
			return nil, err
		}
		if min(applied, st.producersAt)+1 < c.log.Start() {
			st.close()
			return nil, c.explainStart(fmt.Errorf("coordinator: the snapshot covers entries up to %d but the log starts at %d", applied, c.log.Start()))
		}
	}
	c.store = st
	c.applied.Store(applied)
	c.committed.Store(applied)
	c.lastSnapshot.Store(applied)
	if st.producersAt < applied {
		// The producer states are behind: replay their part of the
		// entries they miss.
		chain := st.producersChain
		err := c.log.Read(ctx, st.producersAt+1, func(off int64, b []byte) error {
			if off > applied {
				return errStopReplay
			}
			e, err := decodeEntry(b)
			if err != nil {
				return fmt.Errorf("coordinator: log entry %d: %w", off, err)
			}
			var apply bool
			if apply, chain = chain.step(e, entryCRC(b)); !apply {
				return nil // skipped when it was applied, too
			}
			for _, r := range e.Records {
				st.applyProducers(root, r)
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStopReplay) {
			st.close()
			c.store = nil
			return nil, fmt.Errorf("coordinator: replaying producer states: %w", err)
		}
	}
	if err := c.replay(ctx, root, applied); err != nil {
		st.close()
		c.store = nil
		return nil, err
	}
	objects, err := st.loadObjects(ctx)
	if err != nil {
		st.close()
		c.store = nil
		return nil, err
	}
	c.pub.load(root, objects)
	return root, nil
}

// commit commits the open database transaction: the read pool then sees
// every entry applied.
func (c *leader) commit(ctx context.Context) error {
	if err := c.store.commitTxn(ctx); err != nil {
		return err
	}
	c.setCommitted(c.applied.Load())
	return nil
}

// setCommitted records that the read pool sees every entry up to offset,
// and wakes the reads waiting for it.
func (c *leader) setCommitted(offset int64) {
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	if offset <= c.committed.Load() {
		return
	}
	c.committed.Store(offset)
	close(c.commitCh)
	c.commitCh = make(chan struct{})
}

// readBarrier waits until the read pool sees every entry up to offset
// (entries applied are answered: a read that follows an answer sees it),
// having the loop commit its open transaction at once rather than at the
// end of ApplyInterval. A follower, whose replays commit as they go,
// never waits.
func (c *leader) readBarrier(ctx context.Context, offset int64) error {
	if c.nudge == nil {
		return nil
	}
	return c.waitCommitted(ctx, offset, true)
}

// waitCommitted waits until the read pool sees every entry up to offset,
// nudging the loop to commit if nudge is set.
func (c *leader) waitCommitted(ctx context.Context, offset int64, nudge bool) error {
	for {
		c.commitMu.Lock()
		done, ch := c.committed.Load() >= offset, c.commitCh
		c.commitMu.Unlock()
		if done {
			return nil
		}
		if errp := c.broken.Load(); errp != nil {
			return *errp
		}
		if nudge {
			select {
			case c.nudge <- struct{}{}:
			default:
			}
		}
		select {
		case <-ch:
		case <-c.stopped:
			return ErrClosed
		case <-c.closing:
			return ErrClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// openDB opens the database and loads its view. The database is a cache
// the log rebuilds: one that does not open or load (damaged: "database
// disk image is malformed", not a database, a row that does not decode) is
// deleted, with a warning, and made anew, empty.
func (c *leader) openDB(ctx context.Context) (*store, *view, int64, error) {
	for attempt := 0; ; attempt++ {
		st, err := openStore(ctx, c.dbPath(), c.opts.Readers)
		var root *view
		applied := int64(-1)
		if err == nil {
			st.clock = clock.Or(c.clock)
			if root, applied, err = st.loadView(ctx); err != nil {
				st.close()
			}
		}
		if err == nil {
			return st, root, applied, nil
		}
		if attempt > 0 || ctx.Err() != nil {
			return nil, nil, -1, err
		}
		c.logger.Warn("coordinator: the database does not open; rebuilding it from the log", zap.Int("shard", c.opts.Shard), zap.String("path", c.dbPath()), zap.Error(err))
		if err := removeDB(c.dbPath()); err != nil {
			return nil, nil, -1, err
		}
	}
}

// removeDB deletes the database at path and its WAL and shared-memory
// files.
func removeDB(path string) error {
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("coordinator: removing a damaged database: %w", err)
		}
	}
	return nil
}

// checkNotAhead refuses a database that has applied what the log does not
// hold: entries past the log's end, or another entry than the log's at the
// offset it applied last (the log lost its newest objects, and perhaps
// another leader wrote the offsets again). The log is the truth, and
// appending past the divergence would give acknowledged offsets to other
// records; the database holds the only copy of what the log lost, so it is
// kept, and the error says what the operator can do.
func (c *leader) checkNotAhead(ctx context.Context, st *store, applied int64) error {
	if applied < 0 {
		return nil
	}
	end := c.log.End()
	if err := c.log.Read(ctx, end, func(int64, []byte) error { return errStopReplay }); err != nil && !errors.Is(err, errStopReplay) && !errors.Is(err, metalog.ErrTrimmed) {
		return fmt.Errorf("coordinator: reading the log's end: %w", err)
	}
	end = max(end, c.log.End())
	what := ""
	switch {
	case applied >= end:
		what = fmt.Sprintf("the database %s has applied the metadata log up to entry %d, but the log ends at entry %d", c.dbPath(), applied, end-1)
	case applied >= c.log.Start() && st.appliedCRC != 0:
		var crc uint32
		err := c.log.Read(ctx, applied, func(_ int64, b []byte) error {
			crc = entryCRC(b)
			return errStopReplay
		})
		if err != nil && !errors.Is(err, errStopReplay) {
			return fmt.Errorf("coordinator: reading log entry %d: %w", applied, err)
		}
		if crc != st.appliedCRC {
			what = fmt.Sprintf("entry %d of the metadata log (checksum %08x) is not the entry %d the database %s applied (checksum %08x)", applied, crc, applied, c.dbPath(), st.appliedCRC)
		}
	}
	if what == "" {
		return nil
	}
	return fmt.Errorf("%w: shard %d: %s: the log lost entries that were acknowledged. Nothing was changed. Restore the log's missing objects (under %smeta/%d/log/), or, to accept the log as it is and lose what only the database holds, delete the database",
		ErrDiverged, c.opts.Shard, what, c.opts.Prefix, c.opts.Shard)
}

// explainStart adds to err, the failure to find a snapshot for the log's
// start, what the log's layout says of it: a gap in its entries, or a stray
// object past them.
func (c *leader) explainStart(err error) error {
	lo, ok := c.log.(interface {
		Leftovers() (n int, first, last int64)
	})
	if !ok {
		return err
	}
	n, first, last := lo.Leftovers()
	start, end := c.log.Start(), c.log.End()
	if n == 0 {
		return fmt.Errorf("%w (the log holds entries %d to %d and nothing below them: entries 0 to %d are gone, and no snapshot replaces them)", err, start, end-1, start-1)
	}
	msg := fmt.Sprintf("the log's objects under %smeta/%d/log/ hold entries %d to %d (%d objects), then a gap, then %d to %d: entries %d to %d are missing",
		c.opts.Prefix, c.opts.Shard, first, last, n, start, end-1, last+1, start-1)
	if end-start == 1 && start > last+1 {
		msg += fmt.Sprintf(", or the object at offset %d is a stray key that is not an entry of this log", start)
	}
	return fmt.Errorf("%w: %s. Restore the missing entries (or remove a stray key); the log's newest entries decide where it ends", err, msg)
}

// crcHex prints a checksum as the logs do.
type crcHex uint32

func (h crcHex) String() string { return fmt.Sprintf("%08x", uint32(h)) }

// errStopReplay ends a Read early.
var errStopReplay = errors.New("stop")

// replay applies the log's entries after applied.
func (c *leader) replay(ctx context.Context, root *view, applied int64) error {
	n := 0
	err := c.log.Read(ctx, applied+1, func(off int64, b []byte) error {
		e, err := decodeEntry(b)
		if err != nil {
			return fmt.Errorf("coordinator: log entry %d: %w", off, err)
		}
		crc := entryCRC(b)
		before := c.store.chain // its epoch is root's
		apply, chain := before.step(e, crc)
		if !apply {
			// Written by a leader that was already fenced, or sent behind a
			// put that failed (see "Log entries" in the package doc): it
			// is read and not applied.
			c.logger.Warn("coordinator: skipping an entry that does not follow the log's chain",
				zap.Int64("offset", off), zap.Int32("epoch", e.Epoch), zap.Int32("log_epoch", root.epoch),
				zap.Stringer("prev", crcHex(e.Prev)), zap.Stringer("chain", crcHex(before.crc)))
			c.stats.skipped.Add(1)
			e.Records = nil
		}
		if _, err := c.applyEntry(ctx, root, off, crc, chain, e.Records); err != nil {
			return err
		}
		if n++; n%1000 == 0 {
			return c.commit(ctx)
		}
		return nil
	})
	if err == nil {
		err = c.commit(ctx)
	}
	if err != nil {
		c.store.rollbackTxn()
		return fmt.Errorf("coordinator: replaying the log: %w", err)
	}
	return nil
}

// claim makes this coordinator the log's leader: it appends an epoch
// record one above the newest it has applied. If another writer got there
// first, it reads what that writer appended and tries again; a log that
// can Claim puts it at the first free offset instead, and the entries
// before it are then read and applied first.
func (c *leader) claim(ctx context.Context, root *view) error {
	if cl, ok := c.log.(metalog.Claimer); ok {
		epoch := root.epoch + 1
		e := entry{Epoch: epoch, Prev: c.store.chain.crc, Records: []record{epochRecord{Epoch: epoch, Leader: c.opts.Name}}}
		off, err := cl.Claim(ctx, appendEntry(nil, e))
		if err != nil {
			return fmt.Errorf("coordinator: claiming the log: %w", err)
		}
		// Read everything up to and including the claim. Another claimant
		// may have written an epoch as high in between: ours, later, wins.
		if err := c.replay(ctx, root, c.applied.Load()); err != nil {
			return err
		}
		if c.applied.Load() < off {
			return fmt.Errorf("coordinator: claimed offset %d but the log reads only to %d", off, c.applied.Load())
		}
		c.epoch = root.epoch
		c.logger.Info("coordinator: leader", zap.Int("shard", c.opts.Shard), zap.Int32("epoch", c.epoch), zap.Int64("offset", off))
		return nil
	}
	for attempt := 0; ; attempt++ {
		e := entry{Epoch: root.epoch + 1, Prev: c.store.chain.crc, Records: []record{epochRecord{Epoch: root.epoch + 1, Leader: c.opts.Name}}}
		b := appendEntry(nil, e)
		res := <-c.log.Append(b)
		if res.Err == nil {
			if _, err := c.applyEntry(ctx, root, res.Offset, entryCRC(b), chainState{epoch: e.Epoch, crc: entryCRC(b), known: true}, e.Records); err != nil {
				return err
			}
			if err := c.commit(ctx); err != nil {
				return err
			}
			c.epoch = e.Epoch
			c.logger.Info("coordinator: leader", zap.Int("shard", c.opts.Shard), zap.Int32("epoch", c.epoch), zap.Int64("offset", res.Offset))
			return nil
		}
		if !errors.Is(res.Err, metalog.ErrFenced) || attempt >= 20 {
			return fmt.Errorf("coordinator: claiming the log: %w", res.Err)
		}
		if err := c.replay(ctx, root, c.applied.Load()); err != nil {
			return err
		}
	}
}

func (c *leader) cleanup() {
	if c.store != nil {
		c.store.close()
	}
	if c.tmpDir != "" {
		os.RemoveAll(c.tmpDir)
	}
}

// Err returns the error that stopped c serving, or nil while it serves.
// A coordinator stops for good when its log fails (an append that failed
// every attempt, or was fenced: then errors.Is(err, ErrNotLeader), another
// writer holds the log) or its database does, and then answers every call
// with that error. A new coordinator opened over the same log
// (Coordinator.ReopenShard) replays it and serves again.
func (c *leader) Err() error {
	if errp := c.broken.Load(); errp != nil {
		return *errp
	}
	return nil
}

// Close stops the loop (requests still queued fail with ErrClosed; those
// already sent to the log are answered once it decides them), waits for
// snapshots under way, and closes the database. It does not close the log.
// It is safe to call twice.
func (c *leader) Close() error {
	var err error
	c.once.Do(func() {
		if c.lc != nil {
			c.lc.stop() // before the loop: it submits requests
		}
		close(c.closing)
		c.wg.Wait()
		err = errors.Join(c.store.markClean(context.Background()), c.store.close())
		if c.tmpDir != "" {
			os.RemoveAll(c.tmpDir)
		}
	})
	return err
}

// submit sends o to the loop and waits for its answer.
func (c *leader) submit(ctx context.Context, o op, done chan error) error {
	if errp := c.broken.Load(); errp != nil {
		return *errp
	}
	select {
	case c.ops <- o:
	case <-c.closing:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-done:
		return err
	case <-c.stopped:
		return unanswered(done)
	case <-ctx.Done():
		// The request may still be decided; its answer is dropped.
		return ctx.Err()
	}
}

// unanswered is the answer to a request once the loop has returned. The
// loop answers every request it takes, but a request sent while Close is
// under way can reach the queue after the loop's last look at it (a
// select picks at random between the queue and closing): it was never
// checked nor logged.
func unanswered(done chan error) error {
	select {
	case err := <-done:
		return err
	default:
		return ErrClosed
	}
}

// CreatePartitions creates a topic with its partitions and returns its ID.
// Errors carry Kafka's codes: TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS,
// INVALID_TOPIC_EXCEPTION.
func (c *leader) CreatePartitions(ctx context.Context, req CreatePartitionsRequest) (uuid.UUID, error) {
	o := &createOp{baseOp: newBaseOp(ctx), req: req}
	if err := c.submit(ctx, o, o.done); err != nil {
		return uuid.UUID{}, err
	}
	return o.id, nil
}

// DeleteTopic deletes a topic: its partitions, batches, remote segments
// and producer state. Objects left without batches, and the remote
// segments' files, become dead (DeadObjects).
func (c *leader) DeleteTopic(ctx context.Context, topicID uuid.UUID) error {
	o := &deleteTopicOp{baseOp: newBaseOp(ctx), id: topicID}
	return c.submit(ctx, o, o.done)
}

// CommitFile commits an uploaded object's batches: it answers one
// wal.Result per coordinate, in order: the base offset assigned (and the
// log append time on LogAppendTime topics), or a Kafka error
// (UNKNOWN_TOPIC_OR_PARTITION, INVALID_PRODUCER_EPOCH,
// OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_RECORD). A duplicate of one of the
// last five batches of its producer and partition answers success with the
// original offset and is not stored again. The error is for the whole
// call: the log failed (ErrNotLeader when another leader took it), the
// coordinator closed, or ctx ended (the commit may still happen).
func (c *leader) CommitFile(ctx context.Context, req CommitFileRequest) ([]wal.Result, error) {
	wait, err := c.CommitFileAsync(ctx, req)
	if err != nil {
		return nil, err
	}
	return wait()
}

// CommitFileAsync is CommitFile in two steps: it returns once the
// coordinator's loop has the commit queued, and wait returns its answer.
// Commits submitted one after another from one goroutine are checked,
// logged and answered in that order, and the loop puts all those queued
// into its next log entry: a caller that submits an object's commit while
// the one before it is still in the log (one PUT of a metalog.Bucket) no longer
// pays a log round trip per object.
func (c *leader) CommitFileAsync(ctx context.Context, req CommitFileRequest) (wait func() ([]wal.Result, error), err error) {
	o := &commitOp{baseOp: newBaseOp(ctx), req: req}
	if errp := c.broken.Load(); errp != nil {
		return nil, *errp
	}
	select {
	case c.ops <- o:
	case <-c.closing:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return func() ([]wal.Result, error) {
		var err error
		select {
		case err = <-o.done:
		case <-c.stopped:
			err = unanswered(o.done)
		case <-ctx.Done():
			// The commit may still be decided; its answer is dropped.
			return nil, ctx.Err()
		}
		if err != nil {
			return nil, err
		}
		return o.results, nil
	}, nil
}

// DeleteRecords raises a partition's log start offset to offset (-1: the
// high watermark) and returns the new low watermark. An offset above the
// high watermark is OFFSET_OUT_OF_RANGE. Batch runs and remote segments
// wholly below the new log start go (one that straddles it stays), and
// the diskless start offset rises to it if it was below.
func (c *leader) DeleteRecords(ctx context.Context, tp wal.TopicPartition, offset int64) (int64, error) {
	o := &deleteRecordsOp{baseOp: newBaseOp(ctx), tp: tp, offset: offset}
	if err := c.submit(ctx, o, o.done); err != nil {
		return -1, err
	}
	return o.lowWM, nil
}

// EnforceRetention applies retention.ms and retention.bytes to every
// partition whose topic deletes: the leader decides how far each log start
// moves and logs that decision. Whole remote segments go first, oldest
// first, then batch runs, stopping at the first that stays;
// retention.bytes counts both. It returns the partitions that changed.
func (c *leader) EnforceRetention(ctx context.Context) ([]RetentionChange, error) {
	o := &retentionOp{baseOp: newBaseOp(ctx)}
	if err := c.submit(ctx, o, o.done); err != nil {
		return nil, err
	}
	return o.changes, nil
}

// InitProducerID allocates a producer id (logged, so never given twice) and
// returns it with epoch 0.
func (c *leader) InitProducerID(ctx context.Context) (int64, int16, error) {
	o := &initProducerIDOp{baseOp: newBaseOp(ctx)}
	if err := c.submit(ctx, o, o.done); err != nil {
		return -1, -1, err
	}
	return o.id, 0, nil
}

// ObjectsDeleted records that these dead objects are gone from the bucket,
// so DeadObjects no longer lists them. Keys that are unknown or still hold
// live batches are ignored.
func (c *leader) ObjectsDeleted(ctx context.Context, keys []string) error {
	o := &objectsDeletedOp{baseOp: newBaseOp(ctx), keys: keys}
	return c.submit(ctx, o, o.done)
}
