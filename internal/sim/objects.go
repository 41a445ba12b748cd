package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/driver"
	"gocloud.dev/gcerrors"

	"github.com/diskless-go/diskless/internal/blobwrap"
)

// The events of the WAL objects' lifecycle, besides the workload's calls.
const (
	// OpObjectMissing is a read (GET or HEAD) by a broker process of a
	// WAL object that was written to the store and is not there any
	// more. Broker is the process's broker, Note the key and when the
	// object was written and deleted.
	OpObjectMissing Op = "object-missing"
	// OpCollectOrphans is a run of the orphan collector at the end of a
	// run (Broker.CollectOrphans), Note what it did.
	OpCollectOrphans Op = "collect-orphans"
	// OpObjectLeft is a WAL object still in the store at the end of a
	// run, long after its grace, that the final read did not need. Note
	// is the key and when it was written.
	OpObjectLeft Op = "object-left"
)

// walPrefix is where the brokers of a run (Config.Prefix empty) write
// their WAL objects.
const walPrefix = "wal/"

// isWALObject reports whether key names a WAL object.
func isWALObject(key string) bool { return strings.HasPrefix(key, walPrefix) }

// objectLog is what the broker processes did to the WAL objects of the
// store, seen between each process's faultbucket and the store: so it
// is what reached the store, whatever the faults answered the process.
// It is safe for concurrent use.
type objectLog struct {
	start time.Time // virtual times are taken from it
	mu    struct {
		sync.Mutex
		written map[string]time.Duration // key -> its first PUT that succeeded
		deleted map[string]time.Duration // key -> its last DELETE that succeeded
		// missing, if set, records a read of an object that was written
		// and is gone (an OpObjectMissing event).
		missing func(broker int, key, note string)
		// since, once set, is when the final phase began: the objects
		// read or written from then on are in used.
		since time.Duration
		final bool
		used  map[string]bool
	}
}

func newObjectLog() *objectLog {
	l := &objectLog{start: time.Now()}
	l.mu.written = map[string]time.Duration{}
	l.mu.deleted = map[string]time.Duration{}
	l.mu.used = map[string]bool{}
	return l
}

// setMissing sets the recorder of missing objects.
func (l *objectLog) setMissing(f func(broker int, key, note string)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.missing = f
}

// beginFinal marks the start of the final phase: from now on every WAL
// object read or written is in use (the final read needs it).
func (l *objectLog) beginFinal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.final, l.mu.since = true, time.Since(l.start)
}

// wrote records a PUT of key that succeeded.
func (l *objectLog) wrote(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.mu.written[key]; !ok {
		l.mu.written[key] = time.Since(l.start)
	}
	if l.mu.final {
		l.mu.used[key] = true
	}
}

// deletedKey records a DELETE of key that succeeded.
func (l *objectLog) deletedKey(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.deleted[key] = time.Since(l.start)
}

// read records a read of key by broker's process: err is its answer.
func (l *objectLog) read(broker int, key string, err error) {
	l.mu.Lock()
	if err == nil {
		if l.mu.final {
			l.mu.used[key] = true
		}
		l.mu.Unlock()
		return
	}
	at, written := l.mu.written[key]
	del, deleted := l.mu.deleted[key]
	f := l.mu.missing
	l.mu.Unlock()
	if !written || gcerrors.Code(err) != gcerrors.NotFound || f == nil {
		return
	}
	note := fmt.Sprintf("%s written at %v, never deleted by a broker", key, at.Round(time.Millisecond))
	if deleted {
		note = fmt.Sprintf("%s written at %v, deleted at %v", key, at.Round(time.Millisecond), del.Round(time.Millisecond))
	}
	f(broker, key, note)
}

// leftover returns the WAL objects of keys (what the store holds) that
// were written before the final phase and neither read nor written in
// it, each with a note: when it was written, and deleted if a broker
// deleted it.
func (l *objectLog) leftover(keys []string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, k := range keys {
		at, ok := l.mu.written[k]
		if !isWALObject(k) || l.mu.used[k] || (ok && at >= l.mu.since) {
			continue
		}
		note := fmt.Sprintf("%s written at %v", k, at.Round(time.Millisecond))
		if del, ok := l.mu.deleted[k]; ok {
			note += fmt.Sprintf(", deleted at %v and still there", del.Round(time.Millisecond))
		}
		out = append(out, note)
	}
	sort.Strings(out)
	return out
}

// watchedStore is one broker process's view of the store, between its
// faultbucket and the store, that tells the objectLog what reaches the
// store.
type watchedStore struct {
	inner  *blob.Bucket
	log    *objectLog
	broker int
}

var _ driver.Bucket = (*watchedStore)(nil)

// watch returns inner seen by broker's process through log.
func watch(inner *blob.Bucket, log *objectLog, broker int) *blob.Bucket {
	return blob.NewBucket(&watchedStore{inner: inner, log: log, broker: broker})
}

func (s *watchedStore) ErrorCode(err error) gcerrors.ErrorCode { return gcerrors.Code(err) }
func (s *watchedStore) As(any) bool                            { return false }
func (s *watchedStore) ErrorAs(error, any) bool                { return false }
func (s *watchedStore) Close() error                           { return nil }

func (s *watchedStore) Attributes(ctx context.Context, key string) (*driver.Attributes, error) {
	a, err := blobwrap.Attributes(ctx, s.inner, key)
	if isWALObject(key) {
		s.log.read(s.broker, key, err)
	}
	return a, err
}

func (s *watchedStore) ListPaged(ctx context.Context, opts *driver.ListOptions) (*driver.ListPage, error) {
	return blobwrap.ListPage(ctx, s.inner, opts)
}

func (s *watchedStore) NewRangeReader(ctx context.Context, key string, offset, length int64, _ *driver.ReaderOptions) (driver.Reader, error) {
	r, err := s.inner.NewRangeReader(ctx, key, offset, length, nil)
	if isWALObject(key) {
		s.log.read(s.broker, key, err)
	}
	if err != nil {
		return nil, err
	}
	return watchedReader{r}, nil
}

type watchedReader struct{ r *blob.Reader }

func (r watchedReader) Read(p []byte) (int, error) { return r.r.Read(p) }
func (r watchedReader) Close() error               { return r.r.Close() }
func (r watchedReader) As(any) bool                { return false }
func (r watchedReader) Attributes() *driver.ReaderAttributes {
	return &driver.ReaderAttributes{ContentType: r.r.ContentType(), ModTime: r.r.ModTime(), Size: r.r.Size()}
}

func (s *watchedStore) NewTypedWriter(ctx context.Context, key, contentType string, opts *driver.WriterOptions) (driver.Writer, error) {
	return &watchedWriter{ctx: ctx, s: s, key: key, contentType: contentType, opts: opts}, nil
}

type watchedWriter struct {
	ctx         context.Context
	s           *watchedStore
	key         string
	contentType string
	opts        *driver.WriterOptions
	buf         bytes.Buffer
}

func (w *watchedWriter) Write(p []byte) (int, error) { return w.buf.Write(p) }

func (w *watchedWriter) Close() error {
	err := w.s.inner.WriteAll(w.ctx, w.key, w.buf.Bytes(), &blob.WriterOptions{
		ContentType: w.contentType, DisableContentTypeDetection: true, IfNotExist: w.opts.IfNotExist,
		Metadata: w.opts.Metadata, CacheControl: w.opts.CacheControl, ContentEncoding: w.opts.ContentEncoding,
	})
	if err == nil && isWALObject(w.key) {
		w.s.log.wrote(w.key)
	}
	return err
}

func (s *watchedStore) Copy(ctx context.Context, dst, src string, _ *driver.CopyOptions) error {
	err := s.inner.Copy(ctx, dst, src, nil)
	if err == nil && isWALObject(dst) {
		s.log.wrote(dst)
	}
	return err
}

func (s *watchedStore) Delete(ctx context.Context, key string, _ *driver.DeleteOptions) error {
	err := s.inner.Delete(ctx, key)
	if err == nil && isWALObject(key) {
		s.log.deletedKey(key)
	}
	return err
}

func (s *watchedStore) SignedURL(context.Context, string, *driver.SignedURLOptions) (string, error) {
	return "", errors.New("sim: no signed URLs")
}

// objectsTail is the end of a run for the objects' checks, after the
// final read: virtual time for the lifecycle and the orphan collector to
// remove every object the final read did not need, then an inventory of
// the store. The brokers' lifecycle deletes an object DeletionGrace (1
// minute) after its last batch went, or, when its first owner never had
// its commit, StallAfter (10 times the grace) after that; retention
// removes the batches below a log start within RetentionInterval (5
// minutes); the orphan collector removes an object no shard knows
// OrphanGrace (10 minutes) after it was named, and runs once an hour:
// it is run here once, when every object written before the final phase
// is past that grace (the brokers' clocks are skewed by seconds).
const (
	orphansAfter = 11 * time.Minute
	auditAfter   = 9 * time.Minute
)

// objectsTail runs the tail and records its events: the orphan
// collection, then an OpObjectLeft for each WAL object still in the
// store that the final read did not need.
func objectsTail(w *world) {
	c := w.c
	time.Sleep(orphansAfter)
	for try := 0; try < 5; try++ {
		b := c.Broker(try % c.Brokers())
		if b == nil {
			continue
		}
		ev := w.h.Begin("final", OpCollectOrphans)
		ev.Broker = try % c.Brokers()
		run, err := b.CollectOrphans(context.Background())
		ev.Note = fmt.Sprintf("listed %d, candidates %d, deleted %d", run.Listed, run.Candidates, run.Deleted)
		if w.h.End(ev, err); err == nil {
			break
		}
		time.Sleep(10 * time.Second)
	}
	time.Sleep(auditAfter)
	var keys []string
	iter := c.mem.List(&blob.ListOptions{Prefix: walPrefix})
	for {
		o, err := iter.Next(context.Background())
		if err != nil {
			break
		}
		keys = append(keys, o.Key)
	}
	for _, note := range c.objects.leftover(keys) {
		ev := w.h.Begin("final", OpObjectLeft)
		ev.Note = note
		w.h.End(ev, nil)
	}
}
