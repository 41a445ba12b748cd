package diskless

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob" // file://
	_ "gocloud.dev/blob/memblob"  // mem://

	"github.com/diskless-go/diskless/cache"
	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/internal/histogram"
	"github.com/diskless-go/diskless/internal/objstats"
	"github.com/diskless-go/diskless/segment"
	"github.com/diskless-go/diskless/wal"
)

// ErrClosed is returned by calls on a closed Broker.
var ErrClosed = errors.New("diskless: broker closed")

// Broker is the storage layer of diskless topics over one bucket: produce
// packs batches of every partition into shared WAL objects, a coordinator
// orders them, fetch reads them back as plain Kafka batches. A custom
// Kafka-compatible broker calls it from its request handlers; a test
// harness uses it as an in-process Kafka log. It is safe for concurrent
// use.
type Broker struct {
	cfg     Config
	bucket  *blob.Bucket // the counting wrapper
	own     *blob.Bucket // the bucket Open opened, closed by Close
	objects *objstats.Counter
	log     coordinator.Log
	coord   *coordinator.Coordinator
	cache   *cache.Cache
	buffer  *wal.Buffer
	tmpDir  string
	started time.Time

	topicsMu sync.RWMutex
	topics   map[string]coordinator.TopicInfo // by name

	commitMu  sync.Mutex
	committed chan struct{} // closed and replaced after every commit

	stats brokerStats

	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
	closed    atomic.Bool
}

// brokerStats are the counters and histograms behind Stats.
type brokerStats struct {
	bufferWait, upload, commit, total histogram.Histogram
	objects, coords, uploadErrors     atomic.Int64
	commitErrors, deleted             atomic.Int64
}

// Open opens a broker over its bucket: it opens (or creates) the metadata
// log and the coordinator state (rebuilding it from the bucket when the
// data folder is empty), the object cache and the produce buffer, and
// starts its background work.
func Open(ctx context.Context, cfg *Config) (*Broker, error) {
	c, err := cfg.resolved()
	if err != nil {
		return nil, err
	}
	b := &Broker{cfg: c, topics: map[string]coordinator.TopicInfo{}, committed: make(chan struct{}), stop: make(chan struct{}), started: time.Now()}
	if err := b.open(ctx); err != nil {
		b.release()
		return nil, err
	}
	b.wg.Add(2)
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
		if inner, err = blob.OpenBucket(ctx, c.BucketURL); err != nil {
			return fmt.Errorf("diskless: opening bucket %s: %w", c.BucketURL, err)
		}
		b.own = inner
	}
	b.bucket, b.objects = objstats.Wrap(inner)

	dir := c.DataDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "diskless-")
		if err != nil {
			return fmt.Errorf("diskless: %w", err)
		}
		b.tmpDir, dir = tmp, tmp
	}
	var err error
	switch c.MetadataLog {
	case MetadataInBucket:
		b.log, err = coordinator.OpenBucketLog(ctx, b.bucket, c.Prefix+"meta/0/", &coordinator.BucketLogOptions{Logger: c.Logger})
	case MetadataInFile:
		b.log, err = coordinator.OpenFileLog(filepath.Join(dir, "meta", "0"), &coordinator.FileLogOptions{Logger: c.Logger})
	case MetadataInMemory:
		b.log = coordinator.NewMemLog(nil)
	}
	if err != nil {
		return fmt.Errorf("diskless: opening the metadata log: %w", err)
	}
	b.coord, err = coordinator.Open(ctx, b.log, &coordinator.Options{
		Dir:           filepath.Join(dir, "coordinator"),
		Name:          fmt.Sprintf("broker-%d", c.BrokerID),
		Bucket:        b.bucket,
		Prefix:        c.Prefix,
		ApplyInterval: c.ApplyInterval,
		Logger:        c.Logger,
	})
	if err != nil {
		return err
	}
	cacheOpts := &cache.Options{MemoryBytes: c.CacheMemoryBytes, Logger: c.Logger}
	if c.DataDir != "" {
		cacheOpts.Dir, cacheOpts.DiskBytes = filepath.Join(dir, "cache"), c.CacheDiskBytes
	}
	if b.cache, err = cache.New(b.bucket, cacheOpts); err != nil {
		return err
	}
	b.buffer, err = wal.NewBuffer(&wal.Options{
		MaxBytes: c.BufferMaxBytes, Linger: c.Linger, MaxBufferedBytes: c.MaxBufferedBytes,
		KeyPrefix: c.Prefix, Clock: c.Clock, Logger: c.Logger,
	})
	return err
}

// release closes what open opened, after the background work stopped.
func (b *Broker) release() error {
	var errs []error
	if b.buffer != nil {
		errs = append(errs, b.buffer.Close())
	}
	if b.cache != nil {
		errs = append(errs, b.cache.Close())
	}
	if b.coord != nil {
		errs = append(errs, b.coord.Close())
	}
	if b.log != nil {
		errs = append(errs, b.log.Close())
	}
	if b.bucket != nil {
		errs = append(errs, b.bucket.Close())
	}
	if b.own != nil {
		errs = append(errs, b.own.Close())
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
		err := b.buffer.Close() // the committer drains what is left
		close(b.stop)
		b.wg.Wait()
		b.closeErr = errors.Join(err, b.release())
	})
	return b.closeErr
}

// commitLoop takes closed objects from the buffer in order, uploads several
// at once, and commits them in order: the coordinator assigns their
// offsets, and every request in them is answered.
func (b *Broker) commitLoop() {
	ctx := context.Background()
	type upload struct {
		obj    *wal.Object
		data   []byte
		coords []wal.Coordinate
		err    error
		done   chan struct{}
	}
	queue := make(chan *upload, b.cfg.UploadConcurrency)
	var committers sync.WaitGroup
	committers.Add(1)
	go func() { // commits in order
		defer committers.Done()
		for u := range queue {
			<-u.done
			b.commitObject(ctx, u.obj, u.data, u.coords, u.err)
		}
	}()
	for {
		obj, err := b.buffer.Next(ctx)
		if err != nil {
			break // closed and drained
		}
		closed := time.Now()
		for _, r := range obj.Requests() {
			b.stats.bufferWait.Record(closed.Sub(r.Added))
		}
		u := &upload{obj: obj, done: make(chan struct{})}
		queue <- u // blocks while UploadConcurrency objects are in flight
		go func() {
			defer close(u.done)
			start := time.Now()
			var buf bytes.Buffer
			buf.Grow(int(obj.Size()))
			if u.coords, u.err = obj.Encode(&buf, nil); u.err == nil {
				u.data = buf.Bytes()
				u.err = b.bucket.WriteAll(ctx, obj.Key(), u.data, &blob.WriterOptions{ContentType: "application/octet-stream", DisableContentTypeDetection: true})
			}
			b.stats.upload.Record(time.Since(start))
		}()
	}
	close(queue)
	committers.Wait()
}

// commitObject commits an uploaded object and answers its requests.
func (b *Broker) commitObject(ctx context.Context, obj *wal.Object, data []byte, coords []wal.Coordinate, uploadErr error) {
	if uploadErr != nil {
		b.stats.uploadErrors.Add(1)
		b.cfg.Logger.Warn("diskless: upload failed", zap.String("key", obj.Key()), zap.Error(uploadErr))
		obj.Fail(&segment.Error{Code: segment.KafkaStorageError, Message: "uploading the WAL object failed", Err: uploadErr})
		return
	}
	// Write-through: the tail is read from memory, never with a GET.
	if err := b.cache.Put(ctx, obj.Key(), data); err != nil {
		b.cfg.Logger.Warn("diskless: caching an uploaded object", zap.String("key", obj.Key()), zap.Error(err))
	}
	start := time.Now()
	results, err := b.coord.CommitFile(ctx, coordinator.CommitFileRequest{
		ObjectKey: obj.Key(), Size: obj.Size(), Uploader: b.cfg.BrokerID, Coordinates: coords,
	})
	b.stats.commit.Record(time.Since(start))
	if err != nil {
		// The object is now an orphan; the producer retries (idempotence
		// makes that safe).
		b.stats.commitErrors.Add(1)
		b.cfg.Logger.Warn("diskless: commit failed", zap.String("key", obj.Key()), zap.Error(err))
		code := segment.Code(err)
		if code == segment.UnknownServerError {
			code = segment.KafkaStorageError
		}
		obj.Fail(&segment.Error{Code: code, Message: "committing the WAL object failed", Err: err})
		return
	}
	b.stats.objects.Add(1)
	b.stats.coords.Add(int64(len(coords)))
	if err := obj.Answer(results); err != nil {
		b.cfg.Logger.Error("diskless: answering a commit", zap.Error(err))
	}
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

// maintenanceLoop enforces retention and deletes the objects that no
// batch needs once their grace period has passed.
func (b *Broker) maintenanceLoop() {
	retention := time.NewTicker(b.cfg.RetentionInterval)
	defer retention.Stop()
	sweep := time.NewTicker(min(b.cfg.DeletionGrace/2+time.Second, 30*time.Second))
	defer sweep.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-b.stop
		cancel()
	}()
	for {
		select {
		case <-b.stop:
			return
		case <-retention.C:
			if _, err := b.coord.EnforceRetention(ctx); err != nil && ctx.Err() == nil {
				b.cfg.Logger.Warn("diskless: retention", zap.Error(err))
			}
		case <-sweep.C:
			if err := b.deleteDeadObjects(ctx, time.Now()); err != nil && ctx.Err() == nil {
				b.cfg.Logger.Warn("diskless: deleting objects", zap.Error(err))
			}
		}
	}
}

// deleteDeadObjects deletes the objects that no batch has needed for the
// grace period, and tells the coordinator.
func (b *Broker) deleteDeadObjects(ctx context.Context, now time.Time) error {
	dead, err := b.coord.DeadObjects(ctx, 1000)
	if err != nil {
		return err
	}
	var gone []string
	for _, d := range dead {
		if now.Sub(d.DeadSince) < b.cfg.DeletionGrace {
			break // oldest first: the rest are younger
		}
		if err := b.bucket.Delete(ctx, d.Key); err != nil && !isNotFound(err) {
			return err
		}
		b.cache.Forget(d.Key)
		gone = append(gone, d.Key)
	}
	if len(gone) == 0 {
		return nil
	}
	b.stats.deleted.Add(int64(len(gone)))
	return b.coord.ObjectsDeleted(ctx, gone)
}
