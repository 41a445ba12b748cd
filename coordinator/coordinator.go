package coordinator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
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

// Coordinator is several coordinators, each over its own log and database,
// serving one cluster's diskless partitions: KIP-1164's coordinator
// partitions. It routes each call to the shard of the partition; it splits
// a commit of an object that holds partitions of several shards into one
// commit per shard, sent concurrently, each carrying the object's owners
// list; it runs every shard's WAL object lifecycle (see ownership.go) and
// the orphan collector (see orphans.go).
//
// # Assignment
//
// A partition is assigned a shard when its topic is created, one partition
// at a time, each to the shard that serves the fewest partitions (ties to
// the lowest shard number), and it keeps it. So a topic's partitions are
// spread over the shards, and one busy topic does not load one
// coordinator. The assignment is recorded where it takes effect: each
// shard's create record lists the partitions it serves
// (CreatePartitionsRequest.Assigned), and opening rebuilds the map from
// the shards. Nothing else records it, so nothing else can disagree.
//
// Adding shards (opening with more logs) serves partitions created from
// then on: new shards serve none, so they take the next ones until they
// are even. Moving a partition to another coordinator would move its
// batches, producer state and offsets between two logs atomically, which
// KIP-1164 leaves out of scope: the initial shard count is a long-term
// decision. Removing shards is not supported (their partitions would be
// lost).
//
// Coordinator is one process leading every shard. It is safe for concurrent
// use; topics are created and deleted one at a time.
type Coordinator struct {
	opts   Options
	bucket *blob.Bucket
	clock  clock.Clock
	logger *zap.Logger
	tmpDir string
	speaks map[string]int // the highest version of each call spoken and served: PeerVersions(opts.PeerVersions)

	mu struct {
		sync.RWMutex
		coords []*leader // nil while a shard reopens
		closed bool
		parts  map[wal.TopicPartition]int
		topics map[uuid.UUID]*shardTopic
		names  map[string]uuid.UUID
		counts []int // partitions per shard
		// catalogAt is when the catalog was last read from every shard
		// (cluster mode: other brokers create and delete topics).
		catalogAt time.Time
		// catalogWhole says whether every shard answered the last
		// catalog refresh.
		catalogWhole bool
		// partialSince is, for each topic with partitions no shard
		// serves, since when every catalog refresh in which every shard
		// answered has found it so (topicrepair.go).
		partialSince map[uuid.UUID]time.Time
	}
	remotes   []*remoteShard  // cluster mode: each shard as led elsewhere
	followers []*followerSlot // cluster mode with FollowerLog: see followers.go
	// catalogSem holds one catalog refresh at a time. A channel rather
	// than a mutex: a refresh waits on other brokers while holding it,
	// and a goroutine waiting for a channel is durably blocked in a
	// testing/synctest bubble (virtual time goes on), one waiting for a
	// mutex is not (the bubble's time would stop).
	catalogSem chan struct{}
	// adminSem serialises the topic administration (creations,
	// deletions, additions, repairs): a channel, as catalogSem, since
	// it is held across calls to other brokers.
	adminSem chan struct{}
	orphanMu sync.Mutex // one orphan run at a time

	stats struct {
		objects, shardCommits                   atomic.Int64
		fanout                                  []atomic.Int64 // by commit calls
		orphanRuns, orphanLists, orphansDeleted atomic.Int64
		forwarded, forwardRetries, forwardNanos atomic.Int64
		followerReads                           atomic.Int64
	}
	lastOrphanRun atomic.Pointer[OrphanRun]
	// securityAcked is the highest log position of shard 0 that its
	// leader answered a security change of this broker with: security
	// reads from the follower wait for it (security.go).
	securityAcked atomic.Int64

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	orphanHook   func(stage string) // tests: called between the collector's steps
	listPageSize int                // tests: 0 means orphanChunk
}

// shardTopic is a topic and the shards that serve its partitions.
type shardTopic struct {
	info   TopicInfo
	shards []int
}

// Options configure a Coordinator. The zero value holds the defaults; a
// nil *Options means the zero value.
type Options struct {
	// Dir is the folder of the shards' SQLite databases, shard-<n>.db:
	// caches that may be deleted while the coordinator is closed. ""
	// means a temporary folder that Close removes.
	Dir string
	// Name names this process in the epoch records its shards log when
	// they claim their logs.
	Name string
	// Bucket holds the WAL objects, <Prefix>wal/<UUIDv7>: the lifecycle
	// deletes them there and the orphan collector lists it; and the
	// snapshots, <Prefix>meta/<n>/snapshots/, unless SnapshotBucket is
	// set. Nil means none of these: no snapshots (the logs are never
	// trimmed), no lifecycle and no orphan collector (DeadObjects then
	// lists the dead objects of each shard alone).
	Bucket *blob.Bucket
	// SnapshotBucket, when not nil, holds the snapshots instead of
	// Bucket: beside the metadata log, in a low-latency store.
	SnapshotBucket *blob.Bucket
	// Prefix is before every key.
	Prefix string
	// SnapshotEvery takes a shard's snapshot after this many entries have
	// been applied since the last one. 0 means 10,000; negative means
	// never automatically (Snapshot may still be called).
	SnapshotEvery int64
	// SnapshotBytes takes a shard's snapshot once the entries applied
	// since the last one hold this many bytes, or as many as the last
	// snapshot if it is larger. 0 means 4 MiB (Kafka's KRaft snapshots
	// its metadata log after 20 MiB); negative means never by size. A
	// negative SnapshotEvery turns this off too.
	SnapshotBytes int64
	// MaxGroupCoordinates bounds the batch coordinates of one log entry.
	// 0 means 50,000.
	MaxGroupCoordinates int
	// ApplyInterval is how long applied entries may stay in a shard's
	// open database transaction before it commits: one transaction for
	// many entries writes each hot page once per commit rather than once
	// per entry. A read waits for the commit of what it answers for (see
	// the package doc: reads see every acknowledged write), and has it
	// made at once. Above 0, a leader's database statements run behind
	// its loop, on a goroutine of their own (see the store package), and
	// under load commits merge. 0 means 10 ms; negative means commit
	// each entry, on the loop, before answering its requests.
	ApplyInterval time.Duration
	// Readers is the size of each shard's read-only connection pool. 0
	// means 4.
	Readers int
	// Clock is the time source of commit times, LogAppendTime, retention,
	// the age of dead objects and the databases' commit interval; nil
	// means clock.System.
	Clock clock.Clock
	// Logger logs leadership, snapshots and failures; nil means none.
	Logger *zap.Logger
	// Lifecycle holds the lifecycle's Grace (60 s), Interval (10 s;
	// negative: call RunLifecycle), Backoff, MaxBackoff and StallAfter.
	// Its Bucket and Peers are ignored: the Coordinator sets them.
	Lifecycle LifecycleOptions
	// OrphanInterval is how often the orphan collector runs in the
	// background. 0 means 1 hour (LIST is expensive: scan rarely);
	// negative means never (call CollectOrphans).
	OrphanInterval time.Duration
	// OrphanGrace is how long ago an object must have been named to be a
	// candidate orphan (deleted if no shard knows it). 0 means 10
	// minutes.
	OrphanGrace time.Duration
	// CommitDeadline refuses (REQUEST_TIMED_OUT, which a producer
	// retries) the commit of an object whose key, a WAL object key under
	// Prefix, was named longer ago than this: the orphan collector deletes
	// uncommitted objects older than OrphanGrace, and this makes sure none
	// of them is committed afterwards. It must be less than OrphanGrace,
	// by more than the clocks of brokers and shards may differ (see
	// orphans.go). 0 means OrphanGrace / 2; negative means no deadline,
	// which is safe only if no orphan collector runs.
	CommitDeadline time.Duration
	// TxnIDExpiration is Kafka's transactional.id.expiration.ms: a
	// transactional ID whose transaction is over and whose state has not
	// changed for this long is removed at ExpireTransactions (an
	// InitProducerId for it later starts afresh, with a new producer ID),
	// so that clients naming new IDs do not grow the state forever. 0
	// means 7 days, Kafka's default; negative means never.
	TxnIDExpiration time.Duration
	// Forwarder, when set, makes this Coordinator one broker of a
	// cluster (see forward.go): Open takes a nil log for each shard
	// another broker leads, Lead and Unlead move shards in and out, and
	// calls for shards led elsewhere go through the Forwarder. Nil: one
	// process leads every shard.
	Forwarder Forwarder
	// CatalogInterval is how often, with a Forwarder, the topics are read
	// again from every shard's leader (topics other brokers created or
	// deleted; a call for a partition not known yet reads them at once).
	// 0 means 1 s.
	CatalogInterval time.Duration
	// ForwardAttemptTimeout bounds each attempt of a forwarded call: one
	// that has no answer by then is sent again, to whoever leads the shard
	// then (a leader that froze keeps its connections open and silent).
	// Retries are safe: a commit is applied once (see forward.go). 0 means
	// 10 s.
	ForwardAttemptTimeout time.Duration
	// FollowerLog, with a Forwarder, opens a read-only view of shard n's
	// log for this broker's follower of it: FindBatches for shards led
	// elsewhere is then answered here (see followers.go). Close closes the
	// logs it opened. Nil: such reads go to the shard's leader.
	FollowerLog func(ctx context.Context, shard int) (metalog.Log, error)
	// PeerVersions, with a Forwarder, keeps this broker to older versions
	// of the calls between brokers: the highest version of each method it
	// names that the broker speaks and serves (see peer_versions.go), for
	// a staged upgrade or a test of one. It must name methods and
	// versions this release speaks (CheckPeerVersions). Nil: every
	// version this release speaks.
	PeerVersions map[string]int
}

// leader returns shard i's options without its lifecycle.
func (o *Options) leader(i int) leaderOptions {
	snap := o.SnapshotBucket
	if snap == nil {
		snap = o.Bucket
	}
	return leaderOptions{
		Dir: o.Dir, Shard: i, Name: o.Name, Bucket: snap, WALBucket: o.Bucket, Prefix: o.Prefix,
		SnapshotEvery: o.SnapshotEvery, SnapshotBytes: o.SnapshotBytes, MaxGroupCoordinates: o.MaxGroupCoordinates,
		ApplyInterval: o.ApplyInterval, Readers: o.Readers, Clock: o.Clock, Logger: o.Logger,
		CommitDeadline: max(o.CommitDeadline, 0), TxnIDExpiration: o.TxnIDExpiration,
	}
}

// Open opens one coordinator per log, logs[n] being shard n's, and
// starts the shards' lifecycle workers and the orphan collector. With
// Options.Forwarder, logs[n] is nil for each shard another broker leads.
func Open(ctx context.Context, logs []metalog.Log, opts *Options) (*Coordinator, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if len(logs) == 0 {
		return nil, fmt.Errorf("%w: no logs: Coordinator needs one per shard", ErrInvalidOptions)
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Coordinator{opts: o, bucket: o.Bucket, clock: o.Clock, logger: o.Logger, speaks: PeerVersions(o.PeerVersions), catalogSem: make(chan struct{}, 1), adminSem: make(chan struct{}, 1)}
	if c.clock == nil {
		c.clock = clock.System
	}
	if c.logger == nil {
		c.logger = zap.NewNop()
	}
	if c.opts.Dir == "" {
		dir, err := os.MkdirTemp("", "diskless-shards-")
		if err != nil {
			return nil, fmt.Errorf("coordinator: %w", err)
		}
		c.tmpDir, c.opts.Dir = dir, dir
	}
	c.stats.fanout = make([]atomic.Int64, len(logs)+1)
	c.mu.coords = make([]*leader, len(logs))
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if o.Forwarder != nil {
		for i := range logs {
			c.remotes = append(c.remotes, &remoteShard{s: c, shard: i})
		}
	}
	if err := c.openShards(ctx, logs); err != nil {
		c.Close()
		return nil, err
	}
	if o.Forwarder != nil && o.FollowerLog != nil {
		c.startFollowers()
	}
	if o.Forwarder != nil {
		c.every("coordinator-catalog", c.opts.CatalogInterval, c.refreshCatalog)
		c.every("coordinator-topic-repair", repairInterval, c.repairTopics)
	} else if err := c.loadCatalog(ctx); err != nil {
		c.Close()
		return nil, err
	}
	if c.bucket != nil && o.OrphanInterval > 0 {
		c.every("coordinator-orphans", o.OrphanInterval, func(ctx context.Context) {
			if _, err := c.localShard(0); err != nil && o.Forwarder != nil {
				return // the leader of shard 0 collects orphans
			}
			if _, err := c.CollectOrphans(ctx); err != nil && ctx.Err() == nil {
				c.logger.Warn("coordinator: orphan collection failed", zap.Error(err))
			}
		})
	}
	return c, nil
}

// withDefaults returns o with its defaults filled in, or
// ErrInvalidOptions.
func (o Options) withDefaults() (Options, error) {
	if err := CheckPeerVersions(o.PeerVersions); err != nil {
		return o, err
	}
	if o.OrphanInterval == 0 {
		o.OrphanInterval = time.Hour
	}
	if o.OrphanGrace == 0 {
		o.OrphanGrace = 10 * time.Minute
	}
	if o.CommitDeadline == 0 {
		o.CommitDeadline = o.OrphanGrace / 2
	}
	if o.TxnIDExpiration == 0 {
		o.TxnIDExpiration = 7 * 24 * time.Hour
	}
	if o.CatalogInterval <= 0 {
		o.CatalogInterval = time.Second
	}
	if o.ForwardAttemptTimeout <= 0 {
		o.ForwardAttemptTimeout = 10 * time.Second
	}
	switch {
	case o.OrphanGrace < 0:
		return o, fmt.Errorf("%w: OrphanGrace %v is negative", ErrInvalidOptions, o.OrphanGrace)
	case o.CommitDeadline >= o.OrphanGrace:
		return o, fmt.Errorf("%w: CommitDeadline %v is not less than OrphanGrace %v", ErrInvalidOptions, o.CommitDeadline, o.OrphanGrace)
	case o.CommitDeadline < 0 && o.OrphanInterval > 0 && o.Bucket != nil:
		return o, fmt.Errorf("%w: no CommitDeadline, and an orphan collector every %v: it could delete an object committed late", ErrInvalidOptions, o.OrphanInterval)
	}
	return o, nil
}

// openShards opens the leader of each shard that has a log here (with a
// Forwarder, a nil log is a shard another broker leads).
func (c *Coordinator) openShards(ctx context.Context, logs []metalog.Log) error {
	for i, log := range logs {
		if log == nil && c.opts.Forwarder != nil {
			continue
		}
		if log == nil {
			return fmt.Errorf("%w: no log for shard %d, and no Forwarder", ErrInvalidOptions, i)
		}
		l, err := openLeader(ctx, log, c.shardOptions(i))
		if err != nil {
			return fmt.Errorf("coordinator: opening shard %d: %w", i, err)
		}
		c.mu.Lock()
		c.mu.coords[i] = l
		c.mu.Unlock()
	}
	return nil
}

// every runs f every interval on a goroutine labelled label, until Close.
func (c *Coordinator) every(label string, interval time.Duration, f func(ctx context.Context)) {
	c.wg.Add(1)
	go pprof.Do(c.ctx, pprof.Labels("diskless", label), func(ctx context.Context) {
		defer c.wg.Done()
		t := clock.NewTicker(c.clock, interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			f(ctx)
		}
	})
}

// FindBatches returns where the batches of tp from offset on are: at least
// the run holding offset, then whole runs while they fit in maxBytes. An
// offset outside [log start, high watermark] is OFFSET_OUT_OF_RANGE; at the
// high watermark, no batches. Below the diskless start offset, the answer
// is the remote segment that holds offset (FindResult.Remote) and no
// batches. It sees every commit answered before it was called (see
// Read your writes in the package doc).
// It reads tp's shard.
func (c *Coordinator) FindBatches(ctx context.Context, tp wal.TopicPartition, offset, maxBytes int64) (FindResult, error) {
	sh, err := c.shardFor(ctx, tp)
	if err != nil {
		return FindResult{}, err
	}
	return sh.FindBatches(ctx, tp, offset, maxBytes)
}

// ListOffsets answers Kafka's ListOffsets for one partition: timestamp
// EarliestTimestamp gives the log start offset, LatestTimestamp the high
// watermark, MaxTimestamp the run (or remote segment) with the greatest
// timestamp, the first in offset order of those that share it, and a
// timestamp >= 0 the first remote segment or run (in offset order) whose
// greatest timestamp is at or after it. It reads the committed state,
// which holds exactly what has been acknowledged.
// It reads tp's shard.
func (c *Coordinator) ListOffsets(ctx context.Context, tp wal.TopicPartition, timestamp int64) (ListOffsetsResult, error) {
	sh, err := c.shardFor(ctx, tp)
	if err != nil {
		return ListOffsetsResult{Offset: -1, Timestamp: -1}, err
	}
	return sh.ListOffsets(ctx, tp, timestamp)
}

// InitProducerID allocates a producer ID: shard 0 allocates them all, so
// they are unique across shards.
func (c *Coordinator) InitProducerID(ctx context.Context) (int64, int16, error) {
	sh, err := c.shard(0)
	if err != nil {
		return -1, -1, err
	}
	return sh.InitProducerID(ctx)
}

// EnforceRetention applies retention.ms and retention.bytes to every
// partition whose topic deletes: the leader decides how far each log start
// moves and logs that decision. Whole remote segments go first, oldest
// first, then batch runs, stopping at the first that stays;
// retention.bytes counts both. Every shard does it, concurrently: it
// returns every change, and the shards' errors joined. In a cluster, each
// broker does it for the shards it leads.
func (c *Coordinator) EnforceRetention(ctx context.Context) ([]RetentionChange, error) {
	locals := c.locals()
	changes, errs := fanOut(len(locals), func(i int) bool { return locals[i] != nil || c.remotes == nil }, func(i int) ([]RetentionChange, error) {
		sh, err := c.local(i)
		if err != nil {
			return nil, err
		}
		return sh.EnforceRetention(ctx)
	})
	return slices.Concat(changes...), errors.Join(errs...)
}

// RunLifecycle runs every shard's lifecycle worker (leader.
// RunLifecycle) until a round hands nothing on: an object handed to a
// shard that holds no batch in it goes on in the same call. It returns the
// sum (Waiting and Deferred as the last round left them), and the first
// error.
func (c *Coordinator) RunLifecycle(ctx context.Context) (LifecycleRun, error) {
	var total LifecycleRun
	var firstErr error
	n := c.Shards().NumShards()
	for round := 0; round <= n; round++ {
		var this LifecycleRun
		for i, lc := range c.locals() {
			if lc == nil && c.remotes != nil {
				continue // its leader runs it
			}
			sh, err := c.local(i)
			var run LifecycleRun
			if err == nil {
				run, err = sh.RunLifecycle(ctx)
			}
			if err != nil && firstErr == nil {
				firstErr = err
			}
			this.HandedOff += run.HandedOff
			this.StallChecks += run.StallChecks
			this.Deleted += run.Deleted
			this.Failed += run.Failed
			this.Waiting += run.Waiting
			this.Deferred += run.Deferred
		}
		total.HandedOff += this.HandedOff
		total.StallChecks += this.StallChecks
		total.Deleted += this.Deleted
		total.Failed += this.Failed
		total.Waiting, total.Deferred = this.Waiting, this.Deferred // as the last round left them
		if this.HandedOff+this.StallChecks == 0 {
			break
		}
	}
	return total, firstErr
}

// ReopenShard closes shard i's coordinator and opens a new one over log
// (a change of leader: the new one claims the log). Calls for the shard
// fail with NOT_LEADER_OR_FOLLOWER meanwhile. The new coordinator's
// lifecycle resumes from its log.
func (h Shards) ReopenShard(ctx context.Context, i int, log metalog.Log) error {
	c := h.c
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	if i < 0 || i >= len(c.mu.coords) {
		c.mu.Unlock()
		return fmt.Errorf("coordinator: no shard %d of %d", i, len(c.mu.coords))
	}
	old := c.mu.coords[i]
	c.mu.coords[i] = nil
	c.mu.Unlock()
	var err error
	if old != nil {
		err = old.Close()
	}
	sh, openErr := openLeader(ctx, log, c.shardOptions(i))
	if openErr != nil {
		return errors.Join(err, fmt.Errorf("coordinator: reopening shard %d: %w", i, openErr))
	}
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return errors.Join(err, sh.Close(), ErrClosed)
	}
	c.mu.coords[i] = sh
	c.mu.Unlock()
	return err
}

// Stats is a snapshot of the counters of Coordinator.
type Stats struct {
	// Shards are each shard's counters.
	Shards []ShardStats
	// Objects counts the objects CommitFile sent to at least one shard,
	// and ShardCommits the commit calls it made for them (one per shard
	// the object held partitions of, failed or not). CommitCalls[n] counts
	// the objects that took n commit calls: produce gateways (Gateways)
	// exist to keep them at 1.
	Objects, ShardCommits int64
	CommitCalls           []int64
	// OrphanRuns counts the orphan collector's runs; OrphanLists their
	// LIST calls, OrphansDeleted the orphans they deleted; LastOrphanRun
	// is the last run.
	OrphanRuns, OrphanLists, OrphansDeleted int64
	LastOrphanRun                           OrphanRun
	// Leading[n] says whether shard n is led here (always, without a
	// Forwarder, for every open shard); Shards[n] is zero for a shard led
	// elsewhere.
	Leading []bool
	// Forwarded counts the calls sent to another broker's leader (see
	// Options.Forwarder), ForwardRetries those sent again (no leader,
	// connection lost, not the leader there), and ForwardTime the time
	// they took in all, from sending to answer.
	Forwarded, ForwardRetries int64
	ForwardTime               time.Duration
	// FollowerReads counts the FindBatches of shards led elsewhere that
	// this broker's followers answered (Options.FollowerLog).
	FollowerReads int64
}

// Stats returns the counters.
func (c *Coordinator) Stats() Stats {
	st := Stats{
		Objects: c.stats.objects.Load(), ShardCommits: c.stats.shardCommits.Load(),
		OrphanRuns: c.stats.orphanRuns.Load(), OrphanLists: c.stats.orphanLists.Load(), OrphansDeleted: c.stats.orphansDeleted.Load(),
	}
	for i := range c.stats.fanout {
		st.CommitCalls = append(st.CommitCalls, c.stats.fanout[i].Load())
	}
	if r := c.lastOrphanRun.Load(); r != nil {
		st.LastOrphanRun = *r
	}
	c.mu.RLock()
	coords := slices.Clone(c.mu.coords)
	c.mu.RUnlock()
	for _, sh := range coords {
		var cs ShardStats
		if sh != nil {
			cs = sh.Stats()
		}
		st.Shards = append(st.Shards, cs)
		st.Leading = append(st.Leading, sh != nil)
	}
	st.Forwarded, st.ForwardRetries = c.stats.forwarded.Load(), c.stats.forwardRetries.Load()
	st.ForwardTime = time.Duration(c.stats.forwardNanos.Load())
	st.FollowerReads = c.stats.followerReads.Load()
	return st
}

// Close stops the orphan collector and closes every shard's coordinator
// (not the logs). It returns the first error and is safe to call twice.
func (c *Coordinator) Close() error {
	var err error
	c.once.Do(func() {
		c.cancel()
		c.wg.Wait()
		c.mu.Lock()
		c.mu.closed = true
		coords := c.mu.coords
		c.mu.Unlock()
		var errs []error
		for _, sh := range coords {
			if sh != nil {
				errs = append(errs, sh.Close())
			}
		}
		errs = append(errs, c.closeFollowers())
		if c.tmpDir != "" {
			errs = append(errs, os.RemoveAll(c.tmpDir))
		}
		err = errors.Join(errs...)
	})
	return err
}
