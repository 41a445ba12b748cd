package coordinator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"time"

	"github.com/diskless-go/diskless/coordinator/lifecycle"

	"github.com/diskless-go/diskless/coordinator/store"

	"github.com/diskless-go/diskless/coordinator/state"

	"go.uber.org/zap"

	"github.com/diskless-go/diskless/clock"
	"github.com/diskless-go/diskless/coordinator/metalog"
)

// Open opens the coordinator of a shard over its log: it loads the SQLite
// state (or the newest snapshot, when the database is missing or older than
// the log), replays the log after it, claims the log by appending an epoch
// record, and starts its loop.
func openLeader(ctx context.Context, log metalog.Log, opts *leaderOptions) (*leader, error) {
	var o leaderOptions
	if opts != nil {
		o = *opts
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	var lo LifecycleOptions
	if o.Lifecycle != nil {
		if lo, err = lifecycleDefaults(o.Lifecycle); err != nil {
			return nil, err
		}
	}
	c := &leader{
		log:      log,
		opts:     o,
		clock:    o.Clock,
		logger:   o.Logger,
		ops:      make(chan state.Op, 1024),
		closing:  make(chan struct{}),
		stopped:  make(chan struct{}),
		pub:      store.NewPublished(),
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
	if err := c.resolvePending(ctx, root); err != nil {
		c.cleanup()
		return nil, err
	}
	if o.Lifecycle != nil {
		c.lc = lifecycle.New(c, lifecycle.Env{Shard: o.Shard, Prefix: o.Prefix, CommitDeadline: o.CommitDeadline, Clock: c.clock, Logger: c.logger}, lo) // before the loop, which wakes it
	}
	c.wg.Add(1)
	go pprof.Do(context.Background(), pprof.Labels("diskless", "coordinator-loop", "shard", fmt.Sprint(o.Shard)), func(context.Context) {
		defer c.wg.Done()
		defer close(c.stopped)
		c.loop(root)
	})
	if c.lc != nil {
		c.lc.Start()
	}
	return c, nil
}

// withDefaults returns o with its defaults filled in, or
// ErrInvalidOptions.
func (o leaderOptions) withDefaults() (leaderOptions, error) {
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
		return o, fmt.Errorf("%w: Shard %d is negative", ErrInvalidOptions, o.Shard)
	case o.MaxGroupCoordinates < 0:
		return o, fmt.Errorf("%w: MaxGroupCoordinates %d is negative", ErrInvalidOptions, o.MaxGroupCoordinates)
	case o.Readers < 0:
		return o, fmt.Errorf("%w: Readers %d is negative", ErrInvalidOptions, o.Readers)
	case o.CommitDeadline < 0:
		return o, fmt.Errorf("%w: CommitDeadline %v is negative", ErrInvalidOptions, o.CommitDeadline)
	}
	return o, nil
}

// dbPath is the path of the shard's database.
func (l *leader) dbPath() string {
	return filepath.Join(l.opts.Dir, fmt.Sprintf("shard-%d.db", l.opts.Shard))
}

// load opens the store at the newest state it can reach: the database if
// the log still holds everything after it, else the newest snapshot; then
// it replays the log.
func (l *leader) load(ctx context.Context) (*state.View, error) {
	st, root, applied, err := l.openDB(ctx)
	if err != nil {
		return nil, err
	}
	if err := l.checkNotAhead(ctx, st, applied); err != nil {
		st.Close()
		return nil, err
	}
	if min(applied, st.ProducersAt)+1 < l.log.Start() {
		// The log no longer holds what comes after the database: start
		// from the newest snapshot instead.
		st.Close()
		if err := l.restoreSnapshot(ctx, l.log.Start()-1); err != nil {
			return nil, l.explainStart(err)
		}
		if st, root, applied, err = l.openDB(ctx); err != nil {
			return nil, err
		}
		if min(applied, st.ProducersAt)+1 < l.log.Start() {
			st.Close()
			return nil, l.explainStart(fmt.Errorf("coordinator: the snapshot covers entries up to %d but the log starts at %d", applied, l.log.Start()))
		}
	}
	l.store = st
	l.applied.Store(applied)
	l.committed.Store(applied)
	l.lastSnapshot.Store(applied)
	if st.ProducersAt < applied {
		// The producer states are behind: replay their part of the
		// entries they miss.
		chain := st.ProducersChain
		err := l.log.Read(ctx, st.ProducersAt+1, func(off int64, b []byte) error {
			if off > applied {
				return errStopReplay
			}
			e, err := state.DecodeEntry(b)
			if err != nil {
				return fmt.Errorf("coordinator: log entry %d: %w", off, err)
			}
			var apply bool
			if apply, chain = chain.Step(e, entryCRC(b)); !apply {
				return nil // skipped when it was applied, too
			}
			for _, r := range e.Records {
				st.ApplyProducers(root, r)
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStopReplay) {
			st.Close()
			l.store = nil
			return nil, fmt.Errorf("coordinator: replaying producer states: %w", err)
		}
	}
	if err := l.replay(ctx, root, applied); err != nil {
		st.Close()
		l.store = nil
		return nil, err
	}
	objects, err := st.LoadObjects(ctx)
	if err != nil {
		st.Close()
		l.store = nil
		return nil, err
	}
	l.pub.Load(root, objects)
	return root, nil
}

// openDB opens the database and loads its view. The database is a cache
// the log rebuilds: one that does not open or load (damaged: "database
// disk image is malformed", not a database, a row that does not decode) is
// deleted, with a warning, and made anew, empty.
func (l *leader) openDB(ctx context.Context) (*store.DB, *state.View, int64, error) {
	for attempt := 0; ; attempt++ {
		st, err := store.Open(ctx, l.dbPath(), l.opts.Readers)
		var root *state.View
		applied := int64(-1)
		if err == nil {
			st.Clock = clock.Or(l.clock)
			if root, applied, err = st.LoadView(ctx); err != nil {
				st.Close()
			}
		}
		if err == nil {
			return st, root, applied, nil
		}
		if attempt > 0 || ctx.Err() != nil {
			return nil, nil, -1, err
		}
		l.logger.Warn("coordinator: the database does not open; rebuilding it from the log", zap.Int("shard", l.opts.Shard), zap.String("path", l.dbPath()), zap.Error(err))
		if err := removeDB(l.dbPath()); err != nil {
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
func (l *leader) checkNotAhead(ctx context.Context, st *store.DB, applied int64) error {
	if applied < 0 {
		return nil
	}
	end := l.log.End()
	if err := l.log.Read(ctx, end, func(int64, []byte) error { return errStopReplay }); err != nil && !errors.Is(err, errStopReplay) && !errors.Is(err, metalog.ErrTrimmed) {
		return fmt.Errorf("coordinator: reading the log's end: %w", err)
	}
	end = max(end, l.log.End())
	what := ""
	switch {
	case applied >= end:
		what = fmt.Sprintf("the database %s has applied the metadata log up to entry %d, but the log ends at entry %d", l.dbPath(), applied, end-1)
	case applied >= l.log.Start() && st.AppliedCRC != 0:
		var crc uint32
		err := l.log.Read(ctx, applied, func(_ int64, b []byte) error {
			crc = entryCRC(b)
			return errStopReplay
		})
		if err != nil && !errors.Is(err, errStopReplay) {
			return fmt.Errorf("coordinator: reading log entry %d: %w", applied, err)
		}
		if crc != st.AppliedCRC {
			what = fmt.Sprintf("entry %d of the metadata log (checksum %08x) is not the entry %d the database %s applied (checksum %08x)", applied, crc, applied, l.dbPath(), st.AppliedCRC)
		}
	}
	if what == "" {
		return nil
	}
	return fmt.Errorf("%w: shard %d: %s: the log lost entries that were acknowledged. Nothing was changed. Restore the log's missing objects (under %smeta/%d/log/), or, to accept the log as it is and lose what only the database holds, delete the database",
		ErrDiverged, l.opts.Shard, what, l.opts.Prefix, l.opts.Shard)
}

// explainStart adds to err, the failure to find a snapshot for the log's
// start, what the log's layout says of it: a gap in its entries, or a stray
// object past them.
func (l *leader) explainStart(err error) error {
	lo, ok := l.log.(interface {
		Leftovers() (n int, first, last int64)
	})
	if !ok {
		return err
	}
	n, first, last := lo.Leftovers()
	start, end := l.log.Start(), l.log.End()
	if n == 0 {
		return fmt.Errorf("%w (the log holds entries %d to %d and nothing below them: entries 0 to %d are gone, and no snapshot replaces them)", err, start, end-1, start-1)
	}
	msg := fmt.Sprintf("the log's objects under %smeta/%d/log/ hold entries %d to %d (%d objects), then a gap, then %d to %d: entries %d to %d are missing",
		l.opts.Prefix, l.opts.Shard, first, last, n, start, end-1, last+1, start-1)
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
func (l *leader) replay(ctx context.Context, root *state.View, applied int64) error {
	n := 0
	err := l.log.Read(ctx, applied+1, func(off int64, b []byte) error {
		e, err := state.DecodeEntry(b)
		if err != nil {
			return fmt.Errorf("coordinator: log entry %d: %w", off, err)
		}
		crc := entryCRC(b)
		before := l.store.Chain // its epoch is root's
		apply, chain := before.Step(e, crc)
		if !apply {
			// Written by a leader that was already fenced, or sent behind a
			// put that failed (see "Log entries" in the package doc): it
			// is read and not applied.
			l.logger.Warn("coordinator: skipping an entry that does not follow the log's chain",
				zap.Int64("offset", off), zap.Int32("epoch", e.Epoch), zap.Int32("log_epoch", root.Epoch),
				zap.Stringer("prev", crcHex(e.Prev)), zap.Stringer("chain", crcHex(before.CRC)))
			l.stats.skipped.Add(1)
			e.Records = nil
		}
		if _, err := l.applyEntry(ctx, root, off, crc, chain, e.Records); err != nil {
			return err
		}
		if n++; n%1000 == 0 {
			return l.commit(ctx)
		}
		return nil
	})
	if err == nil {
		err = l.commit(ctx)
	}
	if err != nil {
		l.store.RollbackTxn()
		return fmt.Errorf("coordinator: replaying the log: %w", err)
	}
	return nil
}

// claim makes this coordinator the log's leader: it appends an epoch
// record one above the newest it has applied. If another writer got there
// first, it reads what that writer appended and tries again; a log that
// can Claim puts it at the first free offset instead, and the entries
// before it are then read and applied first.
func (l *leader) claim(ctx context.Context, root *state.View) error {
	if cl, ok := l.log.(metalog.Claimer); ok {
		epoch := root.Epoch + 1
		e := state.Entry{Epoch: epoch, Prev: l.store.Chain.CRC, Records: []state.Record{state.EpochRecord{Epoch: epoch, Leader: l.opts.Name}}}
		off, err := cl.Claim(ctx, state.AppendEntry(nil, e))
		if err != nil {
			return fmt.Errorf("coordinator: claiming the log: %w", err)
		}
		// Read everything up to and including the claim. Another claimant
		// may have written an epoch as high in between: ours, later, wins.
		if err := l.replay(ctx, root, l.applied.Load()); err != nil {
			return err
		}
		if l.applied.Load() < off {
			return fmt.Errorf("coordinator: claimed offset %d but the log reads only to %d", off, l.applied.Load())
		}
		l.epoch = root.Epoch
		l.logger.Info("coordinator: leader", zap.Int("shard", l.opts.Shard), zap.Int32("epoch", l.epoch), zap.Int64("offset", off))
		return nil
	}
	for attempt := 0; ; attempt++ {
		epoch := root.Epoch + 1
		off, _, err := l.appendApplied(ctx, root, epoch, l.store.Chain.CRC, []state.Record{state.EpochRecord{Epoch: epoch, Leader: l.opts.Name}})
		if err == nil {
			if err := l.commit(ctx); err != nil {
				return err
			}
			l.epoch = epoch
			l.logger.Info("coordinator: leader", zap.Int("shard", l.opts.Shard), zap.Int32("epoch", l.epoch), zap.Int64("offset", off))
			return nil
		}
		if !errors.Is(err, metalog.ErrFenced) || attempt >= 20 {
			return fmt.Errorf("coordinator: claiming the log: %w", err)
		}
		if err := l.replay(ctx, root, l.applied.Load()); err != nil {
			return err
		}
	}
}

// appendApplied appends one entry of records, of epoch, after the entry
// of checksum prev, waits until it is durable, and applies it to root, as
// the loop does its entries: for the entries written before the loop runs
// or after it stopped (a claim, a new leader's resolve, the last confirms
// at close). It returns the entry's offset and checksum.
func (l *leader) appendApplied(ctx context.Context, root *state.View, epoch int32, prev uint32, records []state.Record) (int64, uint32, error) {
	b := state.AppendEntry(nil, state.Entry{Epoch: epoch, Prev: prev, Records: records})
	res := <-l.log.Append(b)
	if res.Err != nil {
		return 0, 0, res.Err
	}
	crc := entryCRC(b)
	_, err := l.applyEntry(ctx, root, res.Offset, crc, state.ChainState{Epoch: epoch, CRC: crc, Known: true}, records)
	return res.Offset, crc, err
}

func (l *leader) cleanup() {
	if l.store != nil {
		l.store.Close()
	}
	if l.tmpDir != "" {
		os.RemoveAll(l.tmpDir)
	}
}
