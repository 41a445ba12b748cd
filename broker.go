package diskless

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob" // file://
	_ "gocloud.dev/blob/memblob"  // mem://
	"golang.org/x/sync/semaphore"

	"github.com/diskless-go/diskless/cache"
	"github.com/diskless-go/diskless/clock"
	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/internal/hedge"
	"github.com/diskless-go/diskless/internal/histogram"
	"github.com/diskless-go/diskless/internal/objstats"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/replica"
	"github.com/diskless-go/diskless/segment"
	"github.com/diskless-go/diskless/wal"
)

// ErrDataDirInUse is returned by Open when another Broker, in this
// process or another, has the data folder open: two brokers on one
// coordinator database would corrupt it.
var ErrDataDirInUse = errors.New("diskless: data folder in use by another process")

// ErrClosed is returned by every call on a closed Broker (match it with
// errors.Is), and by calls that Close ends.
var ErrClosed = errors.New("diskless: broker closed")

// ErrOutcomeUnknown marks an error of a call that a broker of a cluster
// forwarded to another and sent again after an attempt whose answer was
// lost (match it with errors.Is): that attempt may have been applied,
// although the error carries the refusal of the attempt that answered
// (CommitOffsets refused with NOT_COORDINATOR because the group was
// claimed since, say). It is coordinator.ErrOutcomeUnknown.
var ErrOutcomeUnknown = coordinator.ErrOutcomeUnknown

// closedErr returns ErrClosed for an error of a coordinator that Close
// closed under a call, else err.
func (b *Broker) closedErr(err error) error {
	if errors.Is(err, coordinator.ErrClosed) {
		return ErrClosed
	}
	return err
}

// Broker is the storage layer of diskless topics over one bucket: produce
// packs batches of every partition into shared WAL objects, a coordinator
// orders them, fetch reads them back as plain Kafka batches. A custom
// Kafka-compatible broker calls it from its request handlers; a test
// harness uses it as an in-process Kafka log. It is safe for concurrent
// use.
type Broker struct {
	cfg     Config
	clk     clock.Clock    // Config.Clock, or clock.System
	metrics *brokerMetrics // nil without Config.MeterProvider
	bucket  *blob.Bucket   // the counting wrapper
	own     *blob.Bucket   // the bucket Open opened, closed by Close
	objects *objstats.Counter
	// The metadata log's and snapshots' bucket: bucket itself, or
	// (Config.MetadataBucket) a counting wrapper of its own.
	metaBucket  *blob.Bucket
	metaOwn     *blob.Bucket      // the one Open opened, closed by Close
	metaObjects *objstats.Counter // nil unless a bucket of its own
	logs        []metalog.Log
	coord       *coordinator.Coordinator
	cache       *cache.Cache
	buffer      *wal.Buffer
	mat         *replica.Materializer // nil unless Config.Offload
	off         *replica.Offloader    // nil unless Config.Offload
	tmpDir      string
	dirLock     *os.File // holds the data folder's lock until Close
	started     time.Time
	cl          *clusterState // nil unless Config.Cluster

	// parallel says a WAL object's PUT and its (pending) commit go at
	// once (Config.Commit; docs/parallel-commit.md).
	parallel bool

	createMu sync.Mutex // CreateTopic's check and create, one at a time

	topicsMu sync.RWMutex
	topics   map[string]coordinator.TopicInfo // by name
	// partRefresh is when a partition beyond a topic's cached count last
	// refreshed the topics (UnixNano; mayRefresh).
	partRefresh atomic.Int64
	assigned    map[wal.TopicPartition]bool // offloaded partitions; under topicsMu

	heal chan struct{} // wakes healLoop; capacity 1

	commitMu  sync.Mutex
	committed chan struct{} // closed and replaced after every commit

	stats      brokerStats
	storageLog onceEvery           // fetch failures on an object, logged once a minute each
	validation *semaphore.Weighted // Config.ValidationMemoryBytes of produce validations together
	hedge      *hedge.Hedger
	attempts   sync.WaitGroup // PUTs under way, a hedged upload's loser included

	// bg is the background work's context, ended by Close.
	bg        context.Context
	stop      context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
	closed    atomic.Bool
}

// brokerStats are the counters and histograms behind Stats.
type brokerStats struct {
	bufferWait, upload, commit, total        histogram.Histogram
	objects, coords, uploadErrors            atomic.Int64
	commitErrors, shardReopens               atomic.Int64
	hedges, hedgeWins                        atomic.Int64
	readLocal, readDiskless, readTiered      atomic.Int64
	fetchStorageErrors, revalidations        atomic.Int64
	txnsExpired                              atomic.Int64
	compactions, compactRead, compactWritten atomic.Int64
	dirtyMu                                  sync.Mutex
	dirty                                    map[wal.TopicPartition]float64 // Stats.DirtyRatios
}

// Open opens a broker over its bucket: it locks the data folder (a folder
// another Broker holds is ErrDataDirInUse), opens (or creates) the
// metadata log and the coordinator state (rebuilding it from the bucket
// when the data folder is empty), the object cache and the produce
// buffer, and starts its background work.
func Open(ctx context.Context, cfg *Config) (*Broker, error) {
	c, err := cfg.resolved()
	if err != nil {
		return nil, err
	}
	b := &Broker{cfg: c, validation: semaphore.NewWeighted(max(c.ValidationMemoryBytes, 1)), topics: map[string]coordinator.TopicInfo{}, committed: make(chan struct{}), heal: make(chan struct{}, 1), clk: clock.Or(c.Clock), hedge: newHedger(&c)}
	b.started = b.clk.Now()
	b.bg, b.stop = context.WithCancel(context.Background())
	if err := b.open(ctx); err != nil {
		b.stop()
		b.release()
		return nil, err
	}
	if b.metrics, err = newMetrics(b, c.MeterProvider); err != nil {
		b.stop()
		b.release()
		return nil, fmt.Errorf("diskless: Config.MeterProvider: %w", err)
	}
	b.wg.Add(3)
	go pprof.Do(context.Background(), pprof.Labels("diskless", "healer"), func(context.Context) {
		defer b.wg.Done()
		b.healLoop()
	})
	go pprof.Do(context.Background(), pprof.Labels("diskless", "committer"), func(context.Context) {
		defer b.wg.Done()
		b.commitLoop()
	})
	go pprof.Do(context.Background(), pprof.Labels("diskless", "maintenance"), func(context.Context) {
		defer b.wg.Done()
		b.maintenanceLoop()
	})
	return b, nil
}

func (b *Broker) open(ctx context.Context) error {
	c := &b.cfg
	inner := c.Bucket
	if inner == nil {
		var err error
		if inner, err = blob.OpenBucket(ctx, bucketURL(c.BucketURL)); err != nil {
			return fmt.Errorf("diskless: opening bucket %s: %w", c.BucketURL, err)
		}
		b.own = inner
	}
	b.bucket, b.objects = objstats.Wrap(inner)
	b.metaBucket = b.bucket
	if meta := c.MetadataBucket; meta != nil || c.MetadataBucketURL != "" {
		if meta == nil {
			var err error
			if meta, err = blob.OpenBucket(ctx, c.MetadataBucketURL); err != nil {
				return fmt.Errorf("diskless: opening metadata bucket %s: %w", c.MetadataBucketURL, err)
			}
			b.metaOwn = meta
		}
		b.metaBucket, b.metaObjects = objstats.Wrap(meta)
	}

	dir := c.DataDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "diskless-")
		if err != nil {
			return fmt.Errorf("diskless: %w", err)
		}
		b.tmpDir, dir = tmp, tmp
	}
	var err error
	if b.dirLock, err = lockDataDir(dir); err != nil {
		return err
	}
	cacheOpts := &cache.Options{MemoryBytes: c.CacheMemoryBytes, Logger: c.Logger}
	if c.DataDir != "" {
		cacheOpts.Dir, cacheOpts.DiskBytes = filepath.Join(dir, "cache"), c.CacheDiskBytes
	}
	if b.cache, err = cache.New(b.bucket, cacheOpts); err != nil {
		return err
	}
	var fwd coordinator.Forwarder
	if c.Cluster != nil {
		if err := b.openClusterClient(ctx); err != nil {
			return err
		}
		fwd = &b.cl.fwd
	}
	for i := range c.Shards {
		if c.Cluster != nil {
			b.logs = nil
			break // led through etcd: see leadShard
		}
		var log metalog.Log
		switch {
		case c.OpenMetadataLog != nil:
			log, err = c.OpenMetadataLog(ctx, i)
		case c.MetadataLog == MetadataInBucket:
			log, err = metalog.OpenBucket(ctx, b.metaBucket, fmt.Sprintf("%smeta/%d/", c.Prefix, i), &metalog.BucketOptions{MaxInFlight: c.MetadataPutsInFlight, Logger: c.Logger})
		case c.MetadataLog == MetadataInFile:
			log, err = metalog.OpenFile(filepath.Join(dir, "meta", strconv.Itoa(i)), &metalog.FileOptions{Logger: c.Logger})
		case c.MetadataLog == MetadataInMemory:
			log = metalog.NewMem(nil)
		}
		if err != nil {
			return fmt.Errorf("diskless: opening the metadata log of shard %d: %w", i, err)
		}
		b.logs = append(b.logs, log)
	}
	logs := b.logs
	if c.Cluster != nil {
		logs = make([]metalog.Log, c.Shards)
	}
	b.coord, err = coordinator.Open(ctx, logs, &coordinator.Options{
		Forwarder:             fwd,
		ForwardAttemptTimeout: b.forwardAttemptTimeout(),
		FollowerLog:           b.followerLog(),
		PeerVersions:          b.peerVersions(),
		Dir:                   filepath.Join(dir, "coordinator"),
		Name:                  fmt.Sprintf("broker-%d", c.BrokerID),
		Bucket:                b.bucket,
		SnapshotBucket:        b.metaBucket,
		Prefix:                c.Prefix,
		ApplyInterval:         c.ApplyInterval,
		Clock:                 c.Clock,
		Logger:                c.Logger,
		Lifecycle: coordinator.LifecycleOptions{
			Grace:    c.DeletionGrace,
			OnDelete: func(key string) { b.cache.Forget(key) },
		},
		OrphanInterval:  c.OrphanInterval,
		OrphanGrace:     c.OrphanGrace,
		CommitDeadline:  c.CommitDeadline,
		TxnIDExpiration: c.TransactionalIDExpiration,
	})
	if err != nil {
		return err
	}
	if c.Cluster != nil {
		if err := b.joinCluster(ctx); err != nil {
			return err
		}
	}
	if c.Offload {
		retention := c.LocalRetention
		if retention < 0 {
			retention = -1
		}
		b.mat, err = replica.NewMaterializer(b.coord, b.cache, filepath.Join(dir, "replica"), &replica.MaterializerOptions{
			Log:    segment.LogOptions{RetentionTime: retention, RetentionBytes: c.LocalRetentionBytes, Logger: c.Logger},
			Logger: c.Logger,
		})
		if err != nil {
			return err
		}
		b.off, err = replica.NewOffloader(b.coord, b.mat, b.bucket, &replica.OffloaderOptions{
			Prefix: c.Prefix, Uploader: c.BrokerID, Interval: c.OffloadInterval, Logger: c.Logger,
		})
		if err != nil {
			return err
		}
		b.assigned = map[wal.TopicPartition]bool{}
		b.refreshTopics(ctx)
	}
	b.parallel = c.Commit == CommitInParallel ||
		c.Commit == CommitAuto && c.MetadataLog == MetadataInBucket && c.Cluster == nil && c.OpenMetadataLog == nil
	b.buffer, err = wal.NewBuffer(&wal.Options{
		MaxBytes: c.BufferMaxBytes, FullBytes: c.BufferFullBytes, Linger: c.Linger, ObjectsPerSecond: c.ObjectsPerSecond, MaxBufferedBytes: c.MaxBufferedBytes,
		KeyPrefix: c.Prefix, Clock: c.Clock, Logger: c.Logger,
	})
	if err != nil {
		err = fmt.Errorf("diskless: Config: %w", err)
	}
	return err
}

// bucketURL returns the URL to open: a file:// URL gets create_dir, so
// that a folder that does not exist yet is created (as Kafka creates its
// log directories) instead of failing with "no such file or directory",
// unless the URL says otherwise. Other URLs are returned as they are.
func bucketURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "file" {
		return raw // blob.OpenBucket reports a bad URL
	}
	q := u.Query()
	if q.Has("create_dir") {
		return raw
	}
	q.Set("create_dir", "1")
	u.RawQuery = q.Encode()
	return u.String()
}

// release closes what open opened, after the background work stopped.
func (b *Broker) release() error {
	var errs []error
	if b.buffer != nil {
		errs = append(errs, b.buffer.Close())
	}
	if b.off != nil {
		errs = append(errs, b.off.Close())
	}
	if b.mat != nil {
		errs = append(errs, b.mat.Close())
	}
	errs = append(errs, b.closeCluster())
	if b.coord != nil {
		errs = append(errs, b.coord.Close())
	}
	errs = append(errs, b.releaseCluster())
	for _, log := range b.logs {
		errs = append(errs, log.Close())
	}
	if b.cache != nil {
		errs = append(errs, b.cache.Close())
	}
	if b.metaObjects != nil {
		errs = append(errs, b.metaBucket.Close())
	}
	if b.metaOwn != nil {
		errs = append(errs, b.metaOwn.Close())
	}
	if b.bucket != nil {
		errs = append(errs, b.bucket.Close())
	}
	if b.own != nil {
		errs = append(errs, b.own.Close())
	}
	if b.dirLock != nil {
		errs = append(errs, b.dirLock.Close()) // releases the lock
	}
	if b.tmpDir != "" {
		errs = append(errs, os.RemoveAll(b.tmpDir))
	}
	return errors.Join(errs...)
}

// Close flushes the produce buffer (every request it holds is committed or
// answered with an error), waits for the background work, and closes
// everything it opened. It returns the first error; calling it twice is
// safe.
func (b *Broker) Close() error {
	b.closeOnce.Do(func() {
		b.closed.Store(true)
		err := errors.Join(b.metrics.unregister(), b.buffer.Close()) // the committer drains what is left
		b.stop()
		b.wg.Wait()
		b.attempts.Wait() // the PUTs that lost to their hedge
		b.closeErr = errors.Join(err, b.release())
	})
	return b.closeErr
}

// commitLoop takes closed objects from the buffer in order, uploads several
// at once, and commits them in order: the coordinator assigns their
// offsets, and every request in them is answered. It asks the buffer for
// the next object only when an upload slot is free, which is what lets the
// buffer close an object early under its PUT budget (wal.Buffer.Next): no
// object closes early for an upload that could not start. An object's commit is
// submitted as soon as it is uploaded and the commit of the object before
// it is submitted, without waiting for that one's answer, so that the
// coordinator puts the commits that queue behind a log append into its
// next one: with the metadata log in the bucket, a log PUT no longer
// bounds the objects committed per second, and an object no longer waits
// for the previous one's commit round trip before its own starts.
//
// With the parallel commit (Broker.parallel), an object's commit is
// submitted as soon as it is encoded, pending, while its PUT goes on; it
// is settled, and its requests answered, once both are answered.
func (b *Broker) commitLoop() {
	ctx := context.Background()
	slots := make(chan struct{}, b.cfg.UploadConcurrency)
	queue := make(chan *uploading, maxPendingCommits)
	submitted := make(chan *pendingCommit, maxPendingCommits)
	var committers sync.WaitGroup
	committers.Add(2)
	go func() { // submits commits in order
		defer committers.Done()
		defer close(submitted)
		for u := range queue {
			if b.parallel {
				<-u.encoded
			} else {
				<-u.done
			}
			submitted <- b.submitCommit(ctx, u)
		}
	}()
	go func() { // answers them in order
		defer committers.Done()
		for p := range submitted {
			b.finishCommit(p)
		}
	}()
	for {
		slots <- struct{}{} // an upload slot, before asking for an object
		obj, err := b.buffer.Next(ctx)
		if err != nil {
			break // closed and drained
		}
		closed := b.clk.Now() // the Buffer's clock stamped r.Added
		for _, r := range obj.Requests() {
			b.stats.bufferWait.Record(closed.Sub(r.Added))
			if m := b.metrics; m != nil {
				m.bufferWait.Record(ctx, closed.Sub(r.Added).Seconds())
			}
		}
		u := &uploading{obj: obj, encoded: make(chan struct{}), done: make(chan struct{})}
		queue <- u // blocks while maxPendingCommits objects wait for their commit to be submitted
		go func() {
			defer close(u.done)
			start := time.Now() // real time: the upload latency metric times real I/O
			u.data, u.coords = b.encodeObject(obj)
			close(u.encoded)
			u.err = b.uploadObject(ctx, obj, u.data)
			took := time.Since(start) // real time: a latency metric
			b.stats.upload.Record(took)
			if m := b.metrics; m != nil {
				m.upload.Record(ctx, took.Seconds())
			}
			<-slots
		}()
	}
	close(queue)
	committers.Wait()
}

// maxPendingCommits bounds the commits submitted and not yet answered
// (MaxBufferedBytes bounds their bytes).
const maxPendingCommits = 64

// uploading is an object being encoded and uploaded.
type uploading struct {
	obj     *wal.Object
	data    []byte
	coords  []wal.Coordinate
	encoded chan struct{} // closed once data and coords are set
	err     error         // the upload's
	done    chan struct{} // closed once the upload ended
}

// pendingCommit is an object whose commit was submitted: uploaded, or,
// with the parallel commit, its upload under way (u.done).
type pendingCommit struct {
	u     *uploading
	start time.Time
	wait  func() ([]wal.Result, error)
}

// submitCommit caches an uploaded (or, with the parallel commit, encoded)
// object and submits its commit.
func (b *Broker) submitCommit(ctx context.Context, u *uploading) *pendingCommit {
	p := &pendingCommit{u: u}
	obj, data, coords := u.obj, u.data, u.coords
	if !b.parallel && u.err != nil {
		return p
	}
	// Write-through: the tail is read from memory, never with a GET. The
	// object's bytes are the cache's from here (nothing changes them: a
	// hedged PUT that lost only reads them), so it keeps them uncopied.
	if err := b.cache.PutOwned(ctx, obj.Key(), data); err != nil {
		b.cfg.Logger.Warn("diskless: caching an uploaded object", zap.String("key", obj.Key()), zap.Error(err))
	}
	p.start = time.Now() // real time: the commit latency metric times real I/O
	req := coordinator.CommitFileRequest{ObjectKey: obj.Key(), Size: obj.Size(), Uploader: b.cfg.BrokerID, Coordinates: coords}
	if b.parallel {
		p.wait = b.coord.CommitPendingAsync(ctx, req)
	} else {
		p.wait = b.coord.CommitFileAsync(ctx, req)
	}
	return p
}

// finishCommit waits for a submitted commit (and, with the parallel
// commit, for its object's upload, and settles it) and answers the
// object's requests.
func (b *Broker) finishCommit(p *pendingCommit) {
	obj := p.u.obj
	if !b.parallel && p.u.err != nil {
		b.uploadFailed(p)
		return
	}
	results, err := p.wait()
	if b.parallel {
		// Both answered: the commit comes off the pending queue if the
		// object landed (or is voided all the same, with an earlier
		// object that did not), else a commit some shard logged is
		// voided, and nothing of it is appended.
		<-p.u.done
		landed := err == nil && p.u.err == nil
		serr := b.coord.Settle(context.Background(), obj.Key(), landed)
		switch {
		case landed:
			err = serr
		case serr != nil:
			b.cfg.Logger.Warn("diskless: voiding the commit of an object not uploaded", zap.String("key", obj.Key()), zap.Error(serr))
		}
		if err == nil && p.u.err != nil {
			b.uploadFailed(p)
			return
		}
	}
	took := time.Since(p.start) // real time: a latency metric
	b.stats.commit.Record(took)
	if m := b.metrics; m != nil {
		m.commit.Record(context.Background(), took.Seconds())
	}
	if err != nil {
		// The object is now an orphan; the producer retries (idempotence
		// makes that safe).
		b.stats.commitErrors.Add(1)
		b.cfg.Logger.Warn("diskless: commit failed", zap.String("key", obj.Key()), zap.Error(err))
		code := kafkaerr.CodeOf(err)
		if code == kafkaerr.UnknownServerError {
			code = kafkaerr.KafkaStorageError
		}
		obj.Fail(&kafkaerr.Error{Code: code, Message: "committing the WAL object failed", Err: err})
		b.cache.Forget(obj.Key())
		b.wakeHealer()
		return
	}
	b.stats.objects.Add(1)
	b.stats.coords.Add(int64(len(p.u.coords)))
	if err := obj.Answer(results); err != nil {
		b.cfg.Logger.Error("diskless: answering a commit", zap.Error(err))
	}
	b.signalCommit()
}

// uploadFailed fails the requests of an object whose upload failed.
func (b *Broker) uploadFailed(p *pendingCommit) {
	obj := p.u.obj
	b.stats.uploadErrors.Add(1)
	b.cfg.Logger.Warn("diskless: upload failed", zap.String("key", obj.Key()), zap.Error(p.u.err))
	obj.Fail(&kafkaerr.Error{Code: kafkaerr.KafkaStorageError, Message: "uploading the WAL object failed", Err: p.u.err})
	b.cache.Forget(obj.Key())
}

// signalCommit wakes the long polls waiting for a commit.
func (b *Broker) signalCommit() {
	b.commitMu.Lock()
	close(b.committed)
	b.committed = make(chan struct{})
	b.commitMu.Unlock()
}

// commits returns a channel closed at the next commit.
func (b *Broker) commits() <-chan struct{} {
	b.commitMu.Lock()
	defer b.commitMu.Unlock()
	return b.committed
}

// maintenanceLoop enforces retention. (The coordinator's lifecycle
// deletes the objects no batch needs, and its orphan collector those never
// committed.)
func (b *Broker) maintenanceLoop() {
	ctx := b.bg
	retention := clock.NewTicker(b.clk, b.cfg.RetentionInterval)
	defer retention.Stop()
	txns := clock.NewTicker(b.clk, b.cfg.TxnCheckInterval)
	defer txns.Stop()
	var compact <-chan time.Time
	if b.cfg.CompactInterval > 0 {
		t := clock.NewTicker(b.clk, b.cfg.CompactInterval)
		defer t.Stop()
		compact = t.C
	}
	// Ends left half done when the broker stopped are finished first:
	// consumers wait for their offsets (UNSTABLE_OFFSET_COMMIT) till then.
	b.expireTransactions(ctx, 0)
	// Offloading: topics other brokers created; in a cluster, configs
	// they altered (Produce checks against the cached topics).
	var topics <-chan time.Time
	if b.off != nil || b.cl != nil {
		t := clock.NewTicker(b.clk, 10*time.Second)
		defer t.Stop()
		topics = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-retention.C:
			if _, err := b.coord.EnforceRetention(ctx); err != nil && ctx.Err() == nil {
				b.cfg.Logger.Warn("diskless: retention", zap.Error(err))
			}
		case <-topics:
			b.refreshTopics(ctx)
		case <-txns.C:
			b.expireTransactions(ctx, txnStale)
		case <-compact:
			b.compactTopics(ctx)
		}
	}
}

// healCheck is how often healLoop looks for a stopped shard when no
// failed commit woke it, and healMaxBackoff bounds the wait between two
// attempts to reopen one.
const (
	healCheck      = time.Second
	healMinBackoff = 50 * time.Millisecond
	healMaxBackoff = 5 * time.Second
)

// wakeHealer makes healLoop look at the shards now.
func (b *Broker) wakeHealer() {
	select {
	case b.heal <- struct{}{}:
	default:
	}
}

// healLoop reopens a shard whose coordinator stopped because its metadata
// log or database failed (the object store was down longer than the log's
// retries, say): the new coordinator replays the log, and the shard serves
// again once the store answers. Until then the shard's calls fail with
// retriable errors (KAFKA_STORAGE_ERROR, NOT_LEADER_OR_FOLLOWER). A shard
// fenced by another writer of its log stays stopped: another broker leads
// it now, and taking it back would make the two take turns.
func (b *Broker) healLoop() {
	ctx := b.bg
	tick := clock.NewTicker(b.clk, healCheck)
	defer tick.Stop()
	backoff := make([]time.Duration, len(b.logs))
	next := make([]time.Time, len(b.logs))
	for {
		var retry <-chan time.Time
		var soonest time.Time
		for i := range b.logs {
			if !next[i].IsZero() && (soonest.IsZero() || next[i].Before(soonest)) {
				soonest = next[i]
			}
		}
		var timer clock.Timer
		if !soonest.IsZero() {
			retry, timer = clock.After(b.clk, clock.Until(b.clk, soonest))
		}
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return
		case <-b.heal:
		case <-tick.C:
		case <-retry:
		}
		if timer != nil {
			timer.Stop()
		}
		now := b.clk.Now()
		for i, log := range b.logs {
			if now.Before(next[i]) {
				continue
			}
			why := b.coord.Shards().ShardErr(i) // down (an earlier reopen failed), or stopped
			switch {
			case errors.Is(why, coordinator.ErrClosed):
				return
			case why == nil || (errors.Is(why, coordinator.ErrNotLeader) && !errors.Is(why, coordinator.ErrShardDown)):
				backoff[i], next[i] = 0, time.Time{}
				continue
			}
			err := b.coord.Shards().ReopenShard(ctx, i, log)
			if err == nil {
				b.stats.shardReopens.Add(1)
				b.cfg.Logger.Info("diskless: reopened a stopped shard", zap.Int("shard", i), zap.NamedError("cause", why))
				backoff[i], next[i] = 0, time.Time{}
				continue
			}
			if ctx.Err() != nil {
				return
			}
			backoff[i] = min(max(2*backoff[i], healMinBackoff), healMaxBackoff)
			next[i] = b.clk.Now().Add(backoff[i])
			b.cfg.Logger.Warn("diskless: reopening a stopped shard failed", zap.Int("shard", i), zap.Duration("retry_in", backoff[i]), zap.Error(err))
		}
	}
}

// Clock returns the broker's time source: Config.Clock, or clock.System.
// A server in front of the broker stamps and waits on it too.
func (b *Broker) Clock() clock.Clock { return b.clk }

// OrphanRun is what one run of the orphan collector did.
type OrphanRun = coordinator.OrphanRun

// CollectOrphans lists the bucket's WAL objects and deletes those that no
// shard ever committed and are older than Config.OrphanGrace allows. It
// runs in the background every Config.OrphanInterval; call it to run it
// now.
func (b *Broker) CollectOrphans(ctx context.Context) (OrphanRun, error) {
	if b.closed.Load() {
		return OrphanRun{}, ErrClosed
	}
	run, err := b.coord.CollectOrphans(ctx)
	return run, b.closedErr(err)
}
