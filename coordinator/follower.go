package coordinator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/diskless-go/diskless/coordinator/store"

	"github.com/diskless-go/diskless/coordinator/state"

	"go.uber.org/zap"

	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/internal/backoff"
	"github.com/diskless-go/diskless/wal"
)

// Follower is a read-only replica of a coordinator: it tails the log into
// its own SQLite database and answers FindBatches and ListOffsets, a little
// behind the leader, to spread the read load. It never appends. It is safe
// for concurrent use.
type Follower struct {
	c      *leader
	root   *state.View
	mu     sync.Mutex // serialises catching up
	tail   bool
	stop   chan struct{}
	wg     sync.WaitGroup
	closed sync.Once
	// lost is cancelled, with the cause, when the tailing follower can
	// no longer catch up: the log was trimmed past what it has applied.
	lost       context.Context
	cancelLost context.CancelCauseFunc
}

// FollowerOptions configure a Follower: the coordinator's Options (of
// which it uses Dir, which must not be the leader's, Bucket or
// SnapshotBucket for the snapshots, Prefix, Readers, Clock and Logger),
// the shard it follows, and whether it tails the log.
type FollowerOptions struct {
	Options
	// Shard is the shard whose log this is.
	Shard int
	// Tail applies new entries in the background as soon as the log's
	// Wait reports them. False means only when CatchUp is called.
	Tail bool
}

// OpenFollower opens a follower over log: it loads its database (or the
// newest snapshot) and replays the log to its current end.
func OpenFollower(ctx context.Context, log metalog.Log, opts *FollowerOptions) (*Follower, error) {
	var o FollowerOptions
	if opts != nil {
		o = *opts
	}
	if o.Readers == 0 {
		o.Readers = 4
	}
	c := &leader{log: log, opts: o.Options.leader(o.Shard), clock: o.Clock, logger: o.Logger, closing: make(chan struct{}), pub: store.NewPublished(), commitCh: make(chan struct{})}
	if c.logger == nil {
		c.logger = zap.NewNop()
	}
	if c.opts.Dir == "" {
		dir, err := os.MkdirTemp("", "diskless-follower-")
		if err != nil {
			return nil, fmt.Errorf("coordinator: %w", err)
		}
		c.tmpDir, c.opts.Dir = dir, dir
	}
	root, err := c.load(ctx)
	if err != nil {
		c.cleanup()
		return nil, err
	}
	f := &Follower{c: c, root: root, tail: o.Tail, stop: make(chan struct{})}
	f.lost, f.cancelLost = context.WithCancelCause(context.Background())
	if f.tail {
		f.wg.Add(1)
		go pprof.Do(context.Background(), pprof.Labels("diskless", "coordinator-follower"), func(ctx context.Context) {
			defer f.wg.Done()
			f.run(ctx)
		})
	}
	return f, nil
}

// run tails the log until Close: it waits for the entry after the last
// one applied, then applies what the log holds.
func (f *Follower) run(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-f.stop
		cancel()
	}()
	bo := backoff.Backoff{Policy: backoff.Policy{Initial: 10 * time.Millisecond, Max: 5 * time.Second}}
	for ctx.Err() == nil {
		_, err := f.c.log.Wait(ctx, f.c.applied.Load()+1)
		if err == nil {
			err = f.CatchUp(ctx)
		}
		if err == nil {
			bo.Reset()
			continue
		}
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, metalog.ErrTrimmed) {
			// Nothing after this succeeds: the entries it misses are
			// gone. Open the follower again, from the newest snapshot.
			f.c.logger.Warn("coordinator: follower fell behind the log's start; it must be opened again", zap.Int64("applied", f.Applied()), zap.Int64("log start", f.c.log.Start()), zap.Error(err))
			f.cancelLost(fmt.Errorf("coordinator: the follower is behind a trimmed log (open it again to load the newest snapshot): %w", err))
			return
		}
		f.c.logger.Warn("coordinator: follower could not catch up", zap.Error(err))
		_ = bo.Wait(ctx) // its end ends the loop
	}
}

// CatchUp applies the entries appended since the last call.
func (f *Follower) CatchUp(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.c.replay(ctx, f.root, f.c.applied.Load())
}

// Applied returns the offset of the last entry the follower applied.
func (f *Follower) Applied() int64 { return f.c.applied.Load() }

// WaitApplied returns once the follower has applied the log's entries up
// to offset, and its reads see them: a broker that learns a commit's log
// offset from the shard's leader reads it from its follower after this.
// Without Tail, it catches up by itself. It returns ctx's error if ctx
// ends first, and ErrClosed after Close. A follower that fell behind the
// log's start (the entries after what it applied were trimmed, as after a
// snapshot) cannot go on: WaitApplied then returns an error wrapping
// metalog.ErrTrimmed, at once, and the follower must be closed and opened
// again, which loads the newest snapshot.
func (f *Follower) WaitApplied(ctx context.Context, offset int64) error {
	if !f.tail {
		for f.Applied() < offset {
			if _, err := f.c.log.Wait(ctx, f.Applied()+1); err != nil {
				return err
			}
			if err := f.CatchUp(ctx); err != nil {
				return err
			}
		}
		return nil
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(f.lost, func() { cancel(context.Cause(f.lost)) })
	defer stop()
	err := f.c.waitCommitted(ctx, offset, false)
	if lost := context.Cause(f.lost); err != nil && lost != nil {
		return lost
	}
	return err
}

// FindBatches returns where the batches of tp from offset on are: at least
// the run holding offset, then whole runs while they fit in maxBytes. An
// offset outside [log start, high watermark] is OFFSET_OUT_OF_RANGE; at the
// high watermark, no batches. Below the diskless start offset, the answer
// is the remote segment that holds offset (FindResult.Remote) and no
// batches. It sees every commit answered before it was called (see
// Read your writes in the package doc).
// It reads the follower's database, as far as it has applied.
func (f *Follower) FindBatches(ctx context.Context, tp wal.TopicPartition, offset, maxBytes int64) (FindResult, error) {
	return f.c.FindBatches(ctx, tp, offset, maxBytes)
}

// ListOffsets answers Kafka's ListOffsets for one partition: timestamp
// EarliestTimestamp gives the log start offset, LatestTimestamp the high
// watermark, MaxTimestamp the run (or remote segment) with the greatest
// timestamp, the first in offset order of those that share it, and a
// timestamp >= 0 the first remote segment or run (in offset order) whose
// greatest timestamp is at or after it. It reads the committed state,
// which holds exactly what has been acknowledged.
// It reads the follower's database, as far as it has applied.
func (f *Follower) ListOffsets(ctx context.Context, tp wal.TopicPartition, timestamp int64) (ListOffsetsResult, error) {
	return f.c.ListOffsets(ctx, tp, timestamp)
}

// Close stops the follower and closes its database. It is safe to call
// twice.
func (f *Follower) Close() error {
	var err error
	f.closed.Do(func() {
		close(f.c.closing)
		close(f.stop)
		f.wg.Wait()
		f.cancelLost(ErrClosed)
		f.mu.Lock()
		defer f.mu.Unlock()
		err = errors.Join(f.c.store.MarkClean(context.Background()), f.c.store.Close())
		if f.c.tmpDir != "" {
			os.RemoveAll(f.c.tmpDir)
		}
	})
	return err
}
