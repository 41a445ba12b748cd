package coordinator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/diskless-go/diskless/coordinator/lifecycle"

	"github.com/diskless-go/diskless/coordinator/store"

	"github.com/diskless-go/diskless/coordinator/state"

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
	// WALBucket holds the WAL objects: a new leader resolves the pending
	// commits its predecessor left there (pending.go).
	WALBucket *blob.Bucket
	// SnapshotEvery, SnapshotBytes, MaxGroupCoordinates, ApplyInterval,
	// Readers, Clock and Logger are this shard's part of the Options of
	// the same names (whose docs say what each does); the zero values
	// mean the same defaults.
	SnapshotEvery       int64
	SnapshotBytes       int64
	MaxGroupCoordinates int
	ApplyInterval       time.Duration
	Readers             int
	Clock               clock.Clock
	Logger              *zap.Logger
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
	store  *store.DB
	opts   leaderOptions
	clock  clock.Clock
	logger *zap.Logger
	tmpDir string

	ops     chan state.Op
	closing chan struct{}
	stopped chan struct{} // closed when the loop has returned
	wg      sync.WaitGroup
	once    sync.Once

	epoch   int32
	pub     *store.Published
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

	lc *lifecycle.Worker // nil without leaderOptions.Lifecycle
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
func (l *leader) Stats() ShardStats {
	s := ShardStats{
		Entries: l.stats.entries.Load(), Records: l.stats.records.Load(),
		Commits: l.stats.commits.Load(), Coordinates: l.stats.coords.Load(),
		Applied: l.applied.Load(), Skipped: l.stats.skipped.Load(),
		Received: l.stats.received.Load(), Forgotten: l.stats.forgotten.Load(),
		RemoteSegments: l.store.RemoteSegments.Load(), RemoteBytes: l.store.RemoteBytes.Load(),
	}
	if l.lc != nil {
		st := &l.lc.Stats
		s.HandedOff, s.Deleted, s.LifecycleErrors, s.LifecycleRuns = st.HandedOff.Load(), st.Deleted.Load(), st.Errors.Load(), st.Runs.Load()
	}
	return s
}

// RunLifecycle runs one pass of the lifecycle worker now (tests, or a
// caller that set LifecycleOptions.Interval negative): hand on the dead
// objects this shard owns, delete those it is the last owner of whose grace
// has passed. The error is the first failure, if any; the run counts them
// all. It needs Options.Lifecycle.
func (l *leader) RunLifecycle(ctx context.Context) (LifecycleRun, error) {
	if l.lc == nil {
		return LifecycleRun{}, fmt.Errorf("%w: RunLifecycle needs Options.Lifecycle", ErrInvalidOptions)
	}
	return l.lc.Pass(ctx)
}

// DeadRows implements lifecycle.Shard: it reads the read pool once it
// holds every entry applied.
func (l *leader) DeadRows(ctx context.Context, limit int) ([]store.ObjectRowState, error) {
	if err := l.readBarrier(ctx, l.applied.Load()); err != nil {
		return nil, err
	}
	return l.store.Reader.DeadObjectRows(ctx, limit)
}

// commit commits the open database transaction: the read pool then sees
// every entry applied.
func (l *leader) commit(ctx context.Context) error {
	if err := l.store.CommitTxn(ctx); err != nil {
		return err
	}
	l.setCommitted(l.applied.Load())
	return nil
}

// setCommitted records that the read pool sees every entry up to offset,
// and wakes the reads waiting for it.
func (l *leader) setCommitted(offset int64) {
	l.commitMu.Lock()
	defer l.commitMu.Unlock()
	if offset <= l.committed.Load() {
		return
	}
	l.committed.Store(offset)
	close(l.commitCh)
	l.commitCh = make(chan struct{})
}

// wakeCommitWaiters wakes the reads waiting for a commit without moving
// committed: after the coordinator broke, they find it so and fail.
func (l *leader) wakeCommitWaiters() {
	l.commitMu.Lock()
	defer l.commitMu.Unlock()
	close(l.commitCh)
	l.commitCh = make(chan struct{})
}

// readBarrier, for a leader whose lease holds (checkLease), waits until
// the read pool sees every entry up to offset (entries applied are
// answered: a read that follows an answer sees it),
// having the loop commit its open transaction at once rather than at the
// end of ApplyInterval. A follower, whose replays commit as they go,
// never waits.
func (l *leader) readBarrier(ctx context.Context, offset int64) error {
	if l.nudge == nil {
		return nil
	}
	if err := l.checkLease(); err != nil {
		return err
	}
	return l.waitCommitted(ctx, offset, true)
}

// checkLease refuses, with ErrNotLeader, a read of a leader whose lease
// is not surely held (metalog.Leased: a cluster's logs): paused or cut
// off past its TTL, it may have been replaced, and the new leader may
// have answered what its state lacks (a high watermark, a log start, an
// abort), even before it learns it lost the shard. It asks no one.
func (l *leader) checkLease() error {
	if ld, ok := l.log.(metalog.Leased); ok && !ld.LeaseHeld() {
		return fmt.Errorf("%w: its lease is not surely held (not renewed for its TTL)", ErrNotLeader)
	}
	return nil
}

// confirmLeader, for a read whose answer must hold every answer given
// before it by any leader of the shard (a group's committed offsets and
// stored state), confirms through the metadata service that this
// leadership still holds, when the log can (metalog.Confirmer: a
// cluster's logs). A leader that lost its leadership without knowing it
// yet (paused past its lease, its watch late) is refused with
// ErrNotLeader, which a client retries elsewhere; its own state may lack
// a commit the new leader answered. A log that cannot confirm (one
// broker's own) has no other leader to fear.
func (l *leader) confirmLeader(ctx context.Context) error {
	c, ok := l.log.(metalog.Confirmer)
	if !ok {
		return nil
	}
	err := c.Confirm(ctx)
	if errors.Is(err, metalog.ErrFenced) {
		return fmt.Errorf("%w: %w", ErrNotLeader, err)
	}
	return err
}

// waitCommitted waits until the read pool sees every entry up to offset,
// nudging the loop to commit if nudge is set.
func (l *leader) waitCommitted(ctx context.Context, offset int64, nudge bool) error {
	for {
		l.commitMu.Lock()
		done, ch := l.committed.Load() >= offset, l.commitCh
		l.commitMu.Unlock()
		if done {
			return nil
		}
		if errp := l.broken.Load(); errp != nil {
			return *errp
		}
		if nudge {
			select {
			case l.nudge <- struct{}{}:
			default:
			}
		}
		select {
		case <-ch:
		case <-l.stopped:
			return ErrClosed
		case <-l.closing:
			return ErrClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Err returns the error that stopped c serving, or nil while it serves.
// A coordinator stops for good when its log fails (an append that failed
// every attempt, or was fenced: then errors.Is(err, ErrNotLeader), another
// writer holds the log) or its database does, and then answers every call
// with that error. A new coordinator opened over the same log
// (Shards.ReopenShard) replays it and serves again.
func (l *leader) Err() error {
	if errp := l.broken.Load(); errp != nil {
		return *errp
	}
	return nil
}

// Close stops the loop (requests still queued fail with ErrClosed; those
// already sent to the log are answered once it decides them), waits for
// snapshots under way, and closes the database. It does not close the log.
// It is safe to call twice.
func (l *leader) Close() error {
	var err error
	l.once.Do(func() {
		if l.lc != nil {
			l.lc.Stop() // before the loop: it submits requests
		}
		close(l.closing)
		l.wg.Wait()
		err = errors.Join(l.store.MarkClean(context.Background()), l.store.Close())
		if l.tmpDir != "" {
			os.RemoveAll(l.tmpDir)
		}
	})
	return err
}

// submit sends o to the loop and waits for its answer.
func (l *leader) submit(ctx context.Context, o state.Op, done chan error) error {
	if errp := l.broken.Load(); errp != nil {
		return *errp
	}
	select {
	case l.ops <- o:
	case <-l.closing:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-done:
		return err
	case <-l.stopped:
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
func (l *leader) CreatePartitions(ctx context.Context, req CreatePartitionsRequest) (uuid.UUID, error) {
	o := &state.CreateOp{BaseOp: state.NewBaseOp(ctx), Req: req}
	if err := l.submit(ctx, o, o.Done); err != nil {
		return uuid.UUID{}, err
	}
	return o.ID, nil
}

// DeleteTopic deletes a topic: its partitions, batches, remote segments
// and producer state. Objects left without batches, and the remote
// segments' files, become dead (DeadObjects).
func (l *leader) DeleteTopic(ctx context.Context, topicID uuid.UUID) error {
	o := &state.DeleteTopicOp{BaseOp: state.NewBaseOp(ctx), ID: topicID}
	return l.submit(ctx, o, o.Done)
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
func (l *leader) CommitFile(ctx context.Context, req CommitFileRequest) ([]wal.Result, error) {
	wait, err := l.CommitFileAsync(ctx, req, false)
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
//
// pending makes the commit pending (docs/parallel-commit.md): its object's
// PUT is still on its way, and the caller settles it (Settle).
func (l *leader) CommitFileAsync(ctx context.Context, req CommitFileRequest, pending bool) (wait func() ([]wal.Result, error), err error) {
	o := &state.CommitOp{BaseOp: state.NewBaseOp(ctx), Req: req, Pending: pending}
	if errp := l.broken.Load(); errp != nil {
		return nil, *errp
	}
	select {
	case l.ops <- o:
	case <-l.closing:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return func() ([]wal.Result, error) {
		var err error
		select {
		case err = <-o.Done:
		case <-l.stopped:
			err = unanswered(o.Done)
		case <-ctx.Done():
			// The commit may still be decided; its answer is dropped.
			return nil, ctx.Err()
		}
		if err != nil {
			return nil, err
		}
		return o.Results, nil
	}, nil
}

// DeleteRecords raises a partition's log start offset to offset (-1: the
// high watermark) and returns the new low watermark. An offset above the
// high watermark is OFFSET_OUT_OF_RANGE. Batch runs and remote segments
// wholly below the new log start go (one that straddles it stays), and
// the diskless start offset rises to it if it was below.
func (l *leader) DeleteRecords(ctx context.Context, tp wal.TopicPartition, offset int64) (int64, error) {
	o := &state.DeleteRecordsOp{BaseOp: state.NewBaseOp(ctx), TP: tp, Offset: offset}
	if err := l.submit(ctx, o, o.Done); err != nil {
		return -1, err
	}
	return o.LowWM, nil
}

// EnforceRetention applies retention.ms and retention.bytes to every
// partition whose topic deletes: the leader decides how far each log start
// moves and logs that decision. Whole remote segments go first, oldest
// first, then batch runs, stopping at the first that stays;
// retention.bytes counts both. It returns the partitions that changed.
func (l *leader) EnforceRetention(ctx context.Context) ([]RetentionChange, error) {
	o := &state.RetentionOp{BaseOp: state.NewBaseOp(ctx)}
	if err := l.submit(ctx, o, o.Done); err != nil {
		return nil, err
	}
	return o.Changes, nil
}

// InitProducerID allocates a producer id (logged, so never given twice) and
// returns it with epoch 0.
func (l *leader) InitProducerID(ctx context.Context) (int64, int16, error) {
	o := &state.InitProducerIDOp{BaseOp: state.NewBaseOp(ctx)}
	if err := l.submit(ctx, o, o.Done); err != nil {
		return -1, -1, err
	}
	return o.ID, 0, nil
}

// ObjectsDeleted records that these dead objects are gone from the bucket,
// so DeadObjects no longer lists them. Keys that are unknown or still hold
// live batches are ignored.
func (l *leader) ObjectsDeleted(ctx context.Context, keys []string) error {
	o := &state.ObjectsDeletedOp{BaseOp: state.NewBaseOp(ctx), Keys: keys}
	return l.submit(ctx, o, o.Done)
}
