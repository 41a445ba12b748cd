package coordinator

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"

	"github.com/diskless-go/diskless/coordinator/store"

	"github.com/diskless-go/diskless/coordinator/state"

	"github.com/klauspost/compress/zstd"
	"go.uber.org/zap"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// snapshotPrefix is where a shard's snapshots live in the bucket. Part of
// the format: <prefix>meta/<shard>/snapshots/<20-digit offset>.db.zst, the
// offset being that of the last log entry the snapshot holds.
func (l *leader) snapshotPrefix() string {
	return fmt.Sprintf("%smeta/%d/snapshots/", l.opts.Prefix, l.opts.Shard)
}

// snapshotsToKeep is how many snapshots stay in the bucket: the newest and
// the one before, in case the newest is being written when a reader opens.
const snapshotsToKeep = 2

// maybeSnapshot starts a snapshot in the background when enough entries,
// or enough bytes of them, have been applied since the last one.
func (l *leader) maybeSnapshot() {
	if l.opts.Bucket == nil || l.opts.SnapshotEvery < 0 {
		return
	}
	byCount := l.applied.Load()-l.lastSnapshot.Load() >= l.opts.SnapshotEvery
	bySize := l.opts.SnapshotBytes > 0 && l.sinceSnapshot.Load() >= max(l.opts.SnapshotBytes, l.snapshotSize.Load())
	if !byCount && !bySize {
		return
	}
	if !l.snapMu.TryLock() {
		return // one is under way
	}
	l.wg.Add(1)
	go pprof.Do(context.Background(), pprof.Labels("diskless", "coordinator-snapshot"), func(context.Context) {
		defer l.wg.Done()
		defer l.snapMu.Unlock()
		if _, err := l.snapshot(context.Background()); err != nil {
			l.logger.Warn("coordinator: snapshot failed", zap.Error(err))
		}
	})
}

// Snapshot writes a consistent copy of the database, compressed with zstd,
// to the bucket, named after the last log entry it holds, then trims the
// log before it and deletes older snapshots. It returns that offset. It
// needs Options.Bucket.
func (l *leader) Snapshot(ctx context.Context) (int64, error) {
	if l.opts.Bucket == nil {
		return -1, fmt.Errorf("%w: Snapshot needs leaderOptions.Bucket", ErrInvalidOptions)
	}
	l.snapMu.Lock()
	defer l.snapMu.Unlock()
	return l.snapshot(ctx)
}

// syncOp has the loop write the producer states behind (see the schema)
// and commit, before a snapshot, so that the snapshot needs little of the
// log.
type syncOp struct{ state.BaseOp }

func (o *syncOp) Check(*state.Group) {}

func (o *syncOp) control(ctx context.Context, d *loopDriver) error {
	c := d.c
	if err := c.store.SyncProducers(ctx, d.root, c.applied.Load()); err != nil {
		return err
	}
	c.setCommitted(c.applied.Load())
	return nil
}

func (l *leader) snapshot(ctx context.Context) (int64, error) {
	since := l.sinceSnapshot.Load() // at most what the snapshot will hold
	if l.ops != nil {               // a leader: bring the producer states up to date first
		o := &syncOp{BaseOp: state.NewBaseOp(ctx)}
		if err := l.submit(ctx, o, o.Done); err != nil {
			return -1, err
		}
	}
	tmp, err := os.CreateTemp(l.opts.Dir, "snapshot-*.db")
	if err != nil {
		return -1, fmt.Errorf("coordinator: snapshot: %w", err)
	}
	path := tmp.Name()
	tmp.Close()
	os.Remove(path) // VACUUM INTO wants to create it
	defer os.Remove(path)
	if _, err := l.store.Rdb.ExecContext(ctx, "VACUUM INTO ?", path); err != nil {
		return -1, fmt.Errorf("coordinator: snapshot: %w", err)
	}
	offset, producersAt, err := appliedIn(ctx, path)
	if err != nil {
		return -1, err
	}
	size, err := l.upload(ctx, path, offset)
	if err != nil {
		return -1, err
	}
	l.lastSnapshot.Store(offset)
	l.sinceSnapshot.Add(-since)
	l.snapshotSize.Store(size)
	l.logger.Info("coordinator: snapshot", zap.Int("shard", l.opts.Shard), zap.Int64("offset", offset))
	// A restore replays the producer states from producersAt on: keep
	// those entries.
	if err := l.log.Trim(ctx, min(offset, producersAt)+1); err != nil {
		return offset, fmt.Errorf("coordinator: trimming the log after a snapshot: %w", err)
	}
	return offset, l.pruneSnapshots(ctx)
}

// appliedIn reads the applied offset, and that of the producer states, of
// the database at path.
func appliedIn(ctx context.Context, path string) (applied, producersAt int64, err error) {
	store.Register()
	db, err := sql.Open(store.DriverName, store.SqliteURI(path, "mode=ro"))
	if err != nil {
		return -1, -1, err
	}
	defer db.Close()
	if err := db.QueryRowContext(ctx, "SELECT v FROM meta WHERE k = ?", store.MetaApplied).Scan(&applied); err != nil {
		return -1, -1, fmt.Errorf("coordinator: snapshot without an applied offset: %w", err)
	}
	if err := db.QueryRowContext(ctx, "SELECT v FROM meta WHERE k = ?", store.MetaProducersAt).Scan(&producersAt); err != nil {
		return -1, -1, fmt.Errorf("coordinator: snapshot without a producer state offset: %w", err)
	}
	return applied, producersAt, nil
}

// upload writes the database at path as the snapshot of offset, and
// returns its size in the bucket.
func (l *leader) upload(ctx context.Context, path string, offset int64) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	key := fmt.Sprintf("%s%020d.db.zst", l.snapshotPrefix(), offset)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := l.opts.Bucket.NewWriter(wctx, key, &blob.WriterOptions{ContentType: "application/zstd"})
	if err != nil {
		return 0, fmt.Errorf("coordinator: uploading snapshot %s: %w", key, err)
	}
	cw := &countWriter{w: w}
	zw, err := zstd.NewWriter(cw, zstd.WithEncoderConcurrency(1))
	if err != nil {
		w.Close()
		return 0, err
	}
	_, err = io.Copy(zw, f)
	err = errors.Join(err, zw.Close())
	if err != nil {
		cancel() // abandons the upload: Close then writes nothing
		w.Close()
		return 0, fmt.Errorf("coordinator: uploading snapshot %s: %w", key, err)
	}
	if err := w.Close(); err != nil {
		return 0, fmt.Errorf("coordinator: uploading snapshot %s: %w", key, err)
	}
	return cw.n, nil
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// snapshots lists the shard's snapshots, oldest first, by offset.
func (l *leader) snapshots(ctx context.Context) ([]int64, error) {
	var offs []int64
	it := l.opts.Bucket.List(&blob.ListOptions{Prefix: l.snapshotPrefix()})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("coordinator: listing snapshots: %w", err)
		}
		name := strings.TrimSuffix(strings.TrimPrefix(obj.Key, l.snapshotPrefix()), ".db.zst")
		if off, err := strconv.ParseInt(name, 10, 64); err == nil && len(name) == 20 {
			offs = append(offs, off)
		}
	}
	return offs, nil // List is in key order, and keys sort as offsets
}

func (l *leader) pruneSnapshots(ctx context.Context) error {
	offs, err := l.snapshots(ctx)
	if err != nil {
		return err
	}
	for len(offs) > snapshotsToKeep {
		key := fmt.Sprintf("%s%020d.db.zst", l.snapshotPrefix(), offs[0])
		if err := l.opts.Bucket.Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return fmt.Errorf("coordinator: deleting old snapshot %s: %w", key, err)
		}
		offs = offs[1:]
	}
	return nil
}

// restoreSnapshot replaces the database with the newest snapshot, which
// must hold entries up to need at least.
func (l *leader) restoreSnapshot(ctx context.Context, need int64) error {
	if l.opts.Bucket == nil {
		return fmt.Errorf("coordinator: the log starts after entry %d, and there is no bucket to hold a snapshot", need)
	}
	offs, err := l.snapshots(ctx)
	if err != nil {
		return err
	}
	if len(offs) == 0 || offs[len(offs)-1] < need {
		return fmt.Errorf("coordinator: no snapshot holds entry %d, where the log starts", need)
	}
	key := fmt.Sprintf("%s%020d.db.zst", l.snapshotPrefix(), offs[len(offs)-1])
	r, err := l.opts.Bucket.NewReader(ctx, key, nil)
	if err != nil {
		return fmt.Errorf("coordinator: reading snapshot %s: %w", key, err)
	}
	defer r.Close()
	zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return err
	}
	defer zr.Close()
	path := l.dbPath()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "restore-*.db")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, zr); err != nil {
		tmp.Close()
		return fmt.Errorf("coordinator: restoring snapshot %s: %w", key, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	l.logger.Info("coordinator: restored a snapshot", zap.String("key", key))
	return nil
}
