package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/diskless-go/diskless/clock"
	"github.com/diskless-go/diskless/coordinator/state"
	"github.com/mattn/go-sqlite3"
)

// DriverName is the database/sql driver with this package's per-connection
// pragmas.
const DriverName = "sqlite3_diskless_coordinator"

var registerDriver sync.Once

// The pragmas every connection gets. The database is a cache that the log
// rebuilds, so the writer does not fsync each transaction (WAL with
// synchronous=NORMAL: a crash loses at most the last transactions, never
// consistency; the applied offset in meta says where to replay from).
func Register() {
	registerDriver.Do(func() {
		sql.Register(DriverName, &sqlite3.SQLiteDriver{ConnectHook: connectHook})
	})
}

func connectHook(c *sqlite3.SQLiteConn) error {
	for _, p := range []string{
		"PRAGMA temp_store = MEMORY",
		"PRAGMA cache_size = -65536", // 64 MiB per connection
		"PRAGMA busy_timeout = 10000",
	} {
		if _, err := c.Exec(p, nil); err != nil {
			return err
		}
	}
	return nil
}

// DB is the SQLite side of a coordinator's state: one writer connection
// that only the coordinator's loop uses, and a pool of read-only
// connections for the reads that may run beside it.
type DB struct {
	// dirtyProducers are the producer states changed since the producers
	// table was last written (meta.producers_at); flushedAt is that
	// offset, and sinceFlush counts the entries applied since.
	dirtyProducers map[state.ProducerKey]struct{}
	ProducersAt    int64
	// appliedCRC is the checksum of the last entry applied, as loaded (0:
	// a database written before it was kept).
	AppliedCRC uint32
	sinceFlush int
	// chain is the log's chain after the entry at applied, producersChain
	// after the one at producersAt (see chainState).
	Chain, ProducersChain state.ChainState

	// The writer keeps one transaction open across entries (see
	// applyEntry); inTxn says it is, txnSince since when.
	InTxn    bool
	TxnSince time.Time
	// clock stamps txnSince: clock.System, or the leader's clock.
	Clock clock.Clock
	// bytes are the byte counts of the partitions (of the committed
	// view's), which the view does not keep.
	bytes map[int64]*partBytes
	// The rows Write leaves to the transaction's commit (flushDeferred):
	// the partitions the entries applied in it touched, and meta as of
	// the last one (nil: no entry since the last commit), with the
	// committed view they were applied to. A partition's row is written
	// once a transaction instead of once an entry: at 10 ms a
	// transaction, a busy partition is in several entries of each.
	dirtyParts map[int64]struct{}
	metaDue    *deferredMeta
	// remoteSegments and remoteBytes count the live remote segments and
	// their .log bytes, for Stats.
	RemoteSegments, RemoteBytes atomic.Int64

	path   string
	wdb    *sql.DB
	W      *sql.Conn
	Rdb    *sql.DB
	Reader *reader
	bulks  map[bulkKey]*sql.Stmt
	single map[string]*sql.Stmt

	// The applier (applier.go), while a leader's loop runs: ap is nil
	// otherwise; deferNow is set in the sections whose statements it
	// runs; queuedKeys are the keys of the objects whose rows it was
	// given to insert in transactions not known to be committed yet
	// (with the transaction's number, see txnNo), queuedOrder the same
	// oldest first.
	ap          *applier
	deferNow    bool
	queuedKeys  map[string]int64
	queuedOrder []queuedKey
	// look is a read-only connection of the loop's own, for Gather's
	// lookups beside the applier (gatherBehind), and lookStmts its
	// statements by query. It sees the committed database:
	// txnNo counts the writer's transactions issued (committed or
	// queued to commit), committedTxns those committed, and dirtyTxn is
	// the last transaction in which a statement that may change an
	// object's row ran outside the applier's queue.
	look          *sql.DB
	lookStmts     map[string]*sql.Stmt
	txnNo         int64
	committedTxns atomic.Int64
	dirtyTxn      int64
}

// bootID returns a hash of the running kernel's boot ID, or 0 where the
// system does not tell it (then the database fsyncs as usual).
func bootID() int64 {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil || len(b) == 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write(bytes.TrimSpace(b))
	return int64(h.Sum64() >> 1)
}

// Keys of the meta table that guard a database written without fsync.
const (
	metaBoot  = "boot"
	metaClean = "clean"
)

// SqliteURI returns the SQLite URI of the database file at path with the
// query q. The path is escaped: SQLite reads a '?' in it as the start of
// the query, a '#' as the start of a fragment, and a '%' as an escape.
func SqliteURI(path, q string) string {
	return "file:" + strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path) + "?" + q
}

// Open opens (creating it if needed) the database at path.
//
// The database is a cache the log can rebuild, so where the kernel tells
// its boot ID the writer does not fsync at all (synchronous=OFF): SQLite
// keeps it consistent through a crash of the process, and only a crash of
// the machine can damage it. A database last opened under another boot and
// not closed cleanly is therefore deleted and rebuilt; Close fsyncs
// everything before it marks the database clean.
func Open(ctx context.Context, path string, readers int) (*DB, error) {
	Register()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("coordinator: creating the database folder: %w", err)
	}
	boot := bootID()
	if boot != 0 {
		if err := dropIfCrashed(ctx, path, boot); err != nil {
			return nil, err
		}
	}
	syncMode := "OFF"
	if boot == 0 {
		syncMode = "NORMAL"
	}
	wdb, err := sql.Open(DriverName, SqliteURI(path, "_journal_mode=WAL&_synchronous="+syncMode+"&_txlock=immediate"))
	if err != nil {
		return nil, fmt.Errorf("coordinator: opening %s: %w", path, err)
	}
	wdb.SetMaxOpenConns(1)
	s := &DB{path: path, wdb: wdb, bulks: map[bulkKey]*sql.Stmt{}, single: map[string]*sql.Stmt{}, dirtyProducers: map[state.ProducerKey]struct{}{}, bytes: map[int64]*partBytes{}, dirtyParts: map[int64]struct{}{}, Clock: clock.System}
	if s.W, err = wdb.Conn(ctx); err != nil {
		wdb.Close()
		return nil, fmt.Errorf("coordinator: opening %s: %w", path, err)
	}
	// A larger WAL between checkpoints writes each hot page (partitions)
	// once per checkpoint rather than many times.
	if _, err := s.W.ExecContext(ctx, "PRAGMA wal_autocheckpoint = 8192"); err != nil {
		s.Close()
		return nil, fmt.Errorf("coordinator: %w", err)
	}
	if _, err := s.W.ExecContext(ctx, Schema); err != nil {
		s.Close()
		return nil, fmt.Errorf("coordinator: creating the schema in %s: %w", path, err)
	}
	if err := s.addColumns(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("coordinator: updating the schema in %s: %w", path, err)
	}
	if _, err := s.W.ExecContext(ctx, "INSERT INTO meta (k, v) VALUES (?, ?), (?, 0) ON CONFLICT (k) DO UPDATE SET v = excluded.v",
		metaBoot, boot, metaClean); err != nil {
		s.Close()
		return nil, fmt.Errorf("coordinator: %w", err)
	}
	rdb, err := sql.Open(DriverName, SqliteURI(path, "mode=ro&_journal_mode=WAL"))
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("coordinator: opening %s for reading: %w", path, err)
	}
	rdb.SetMaxOpenConns(readers)
	rdb.SetMaxIdleConns(readers)
	s.Rdb = rdb
	if s.look, err = sql.Open(DriverName, SqliteURI(path, "mode=ro&_journal_mode=WAL")); err != nil {
		s.Close()
		return nil, fmt.Errorf("coordinator: opening %s for reading: %w", path, err)
	}
	s.look.SetMaxOpenConns(1)
	s.look.SetMaxIdleConns(1)
	if s.Reader, err = newReader(ctx, rdb, path, readers); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// addColumns adds the columns of addedColumns that the database lacks.
func (s *DB) addColumns(ctx context.Context) error {
	for _, c := range AddedColumns {
		var n int
		if err := s.W.QueryRowContext(ctx, "SELECT COUNT(*) FROM pragma_table_info(?) WHERE name = ?", c.Table, c.Column).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			if _, err := s.W.ExecContext(ctx, "ALTER TABLE "+c.Table+" ADD COLUMN "+c.Column+" "+c.Decl); err != nil {
				return err
			}
			if c.Fill != "" {
				if _, err := s.W.ExecContext(ctx, c.Fill); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Int32sBlob encodes a list of owners or partitions for a BLOB column:
// NULL (nil) for none.
func Int32sBlob(vs []int32) any {
	if vs == nil {
		return nil
	}
	return state.AppendInt32s(nil, vs)
}

// DecodeInt32s decodes what int32sBlob encoded; nil for NULL.
func DecodeInt32s(b []byte) ([]int32, error) {
	if b == nil {
		return nil, nil
	}
	d := state.Decoder{B: b}
	vs := d.Shards("values")
	if d.Err == nil && len(d.B) != 0 {
		d.Fail("bytes after a list")
	}
	return vs, d.Err
}

// dropIfCrashed deletes the database at path if it was last opened under
// another boot and not closed cleanly: the machine crashed while it was
// written without fsync, so it may be damaged.
func dropIfCrashed(ctx context.Context, path string, boot int64) error {
	if _, err := os.Stat(path); err != nil {
		return nil // nothing to check
	}
	db, err := sql.Open(DriverName, SqliteURI(path, "mode=ro"))
	if err != nil {
		return err
	}
	var lastBoot, clean int64 = boot, 1
	err = db.QueryRowContext(ctx, "SELECT (SELECT v FROM meta WHERE k = ?), (SELECT v FROM meta WHERE k = ?)", metaBoot, metaClean).Scan(&lastBoot, &clean)
	db.Close()
	if err == nil && (lastBoot == boot || clean == 1) {
		return nil
	}
	// Unreadable, or written under another boot and not closed: drop it.
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("coordinator: dropping a database the machine may have damaged: %w", err)
		}
	}
	return nil
}

// MarkClean makes everything durable, then records a clean close.
func (s *DB) MarkClean(ctx context.Context) error {
	if err := s.CommitTxn(ctx); err != nil {
		return err
	}
	for _, q := range []string{
		"PRAGMA synchronous = FULL",
		"PRAGMA wal_checkpoint(TRUNCATE)",
		"UPDATE meta SET v = 1 WHERE k = '" + metaClean + "'",
		"PRAGMA wal_checkpoint(TRUNCATE)",
	} {
		if _, err := s.W.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("coordinator: closing the database: %w", err)
		}
	}
	return nil
}

func (s *DB) Close() error {
	var errs []error
	if err := s.StopApplier(); err != nil {
		errs = append(errs, err)
	}
	for _, st := range s.bulks {
		errs = append(errs, st.Close())
	}
	for _, st := range s.single {
		errs = append(errs, st.Close())
	}
	for _, st := range s.lookStmts {
		errs = append(errs, st.Close())
	}
	if s.look != nil {
		errs = append(errs, s.look.Close())
	}
	if s.Reader != nil {
		errs = append(errs, s.Reader.Close())
	}
	if s.W != nil {
		errs = append(errs, s.W.Close())
	}
	if s.Rdb != nil {
		errs = append(errs, s.Rdb.Close())
	}
	errs = append(errs, s.wdb.Close())
	return errors.Join(errs...)
}

// Stmt returns the writer's prepared statement for query, once the
// applier, if one runs, has run everything queued (outside a deferrable
// section): the statement then sees all the writes before it.
func (s *DB) Stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if err := s.syncFirst(); err != nil {
		return nil, err
	}
	return s.stmt(ctx, query)
}

// stmt returns the writer's prepared statement for query.
func (s *DB) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := s.single[query]; ok {
		return st, nil
	}
	st, err := s.W.PrepareContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("coordinator: preparing %q: %w", query, err)
	}
	s.single[query] = st
	return st, nil
}

// Begin starts a write transaction on the writer connection (queued, in
// a deferrable section).
func (s *DB) Begin(ctx context.Context) error {
	if s.deferring() {
		return s.ap.enqueue(applierJob{q: "BEGIN IMMEDIATE"})
	}
	if err := s.syncFirst(); err != nil {
		return err
	}
	_, err := s.W.ExecContext(ctx, "BEGIN IMMEDIATE")
	return err
}

// commit commits the writer's transaction; queued in a deferrable
// section, where then runs once the commit succeeded (else at once after
// it).
func (s *DB) commit(ctx context.Context, then func()) error {
	s.txnNo++
	n := s.txnNo
	done := func() {
		s.committedTxns.Store(n)
		if then != nil {
			then()
		}
	}
	if s.deferring() {
		return s.ap.enqueue(applierJob{q: "COMMIT", then: done})
	}
	if err := s.syncFirst(); err != nil {
		return err
	}
	if _, err := s.W.ExecContext(ctx, "COMMIT"); err != nil {
		return err
	}
	done()
	return nil
}

// Rollback rolls the writer's transaction back, after whatever the
// applier had queued (which a failure stopped, or which ran).
func (s *DB) Rollback() {
	if s.ap != nil {
		_ = s.Sync()
	}
	_, _ = s.W.ExecContext(context.Background(), "ROLLBACK")
}

// exec runs a statement, or queues it in a deferrable section (its
// result is then nil: no caller there reads one).
func (s *DB) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, err := s.Stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	if s.deferring() {
		return nil, s.ap.enqueue(applierJob{st: st, args: args})
	}
	res, err := st.ExecContext(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("coordinator: %q: %w", query, err)
	}
	return res, nil
}

// bulkKey names a prepared multi-row statement: its head, rows and tail.
type bulkKey struct {
	head string
	rows int
	tail string
}

// maxBulkRows is how many rows one multi-row statement takes.
const maxBulkRows = 128

// bulk executes head + "(?,...)" repeated for each row + tail, in chunks
// of maxBulkRows rows; args holds the rows' values one after another.
//
// In a deferrable section the statements are queued (each with its own
// copy of its rows' values: the caller may reuse args).
func (s *DB) bulk(ctx context.Context, head string, arity int, tail string, args []any) error {
	if err := s.syncFirst(); err != nil {
		return err
	}
	for len(args) > 0 {
		rows := min(len(args)/arity, maxBulkRows)
		key := bulkKey{head, rows, tail}
		st, ok := s.bulks[key]
		if !ok {
			tuple := "(" + strings.TrimSuffix(strings.Repeat("?,", arity), ",") + ")"
			q := head + " " + strings.TrimSuffix(strings.Repeat(tuple+",", rows), ",") + " " + tail
			var err error
			if st, err = s.W.PrepareContext(ctx, q); err != nil {
				return fmt.Errorf("coordinator: preparing %q: %w", head, err)
			}
			s.bulks[key] = st
		}
		if s.deferring() {
			if err := s.ap.enqueue(applierJob{st: st, args: append([]any(nil), args[:rows*arity]...)}); err != nil {
				return err
			}
		} else if _, err := st.ExecContext(ctx, args[:rows*arity]...); err != nil {
			return fmt.Errorf("coordinator: %q: %w", head, err)
		}
		args = args[rows*arity:]
	}
	return nil
}

// ensureTxn opens the writer's transaction if none is open.
func (s *DB) ensureTxn(ctx context.Context) error {
	if s.InTxn {
		return nil
	}
	if err := s.Begin(ctx); err != nil {
		return err
	}
	s.InTxn, s.TxnSince = true, s.Clock.Now()
	return nil
}

// CommitTxn commits the writer's transaction, if one is open: the entries
// applied in it become visible to the read pool (and to snapshots).
func (s *DB) CommitTxn(ctx context.Context) error {
	if !s.InTxn {
		return nil
	}
	if err := s.flushDeferred(ctx); err != nil {
		s.RollbackTxn()
		return fmt.Errorf("coordinator: committing: %w", err)
	}
	s.InTxn = false
	if err := s.commit(ctx, nil); err != nil {
		s.Rollback()
		return fmt.Errorf("coordinator: committing: %w", err)
	}
	return nil
}

// CommitTxnThen is CommitTxn for the loop, with an applier running: the
// partitions' and meta's rows and the COMMIT are queued (see applier),
// and then runs once the commit succeeded (then, for the leader, records
// what the read pool sees). Without an applier it is CommitTxn, then
// then. With no transaction open it does nothing: the last commit queued
// runs its own then.
func (s *DB) CommitTxnThen(ctx context.Context, then func()) error {
	if s.ap == nil {
		if err := s.CommitTxn(ctx); err != nil {
			return err
		}
		then()
		return nil
	}
	if !s.InTxn {
		return nil
	}
	s.deferNow = true
	err := s.flushDeferred(ctx)
	if err == nil {
		s.InTxn = false
		err = s.commit(ctx, then)
	}
	s.deferNow = false
	if err != nil {
		s.RollbackTxn()
		return fmt.Errorf("coordinator: committing: %w", err)
	}
	return nil
}

// RollbackTxn abandons the open transaction.
func (s *DB) RollbackTxn() {
	clear(s.dirtyParts)
	s.metaDue = nil
	if s.InTxn {
		s.InTxn = false
		s.Rollback()
	}
}
