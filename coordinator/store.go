package coordinator

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/mattn/go-sqlite3"
)

// driverName is the database/sql driver with this package's per-connection
// pragmas.
const driverName = "sqlite3_diskless_coordinator"

var registerDriver sync.Once

// The pragmas every connection gets. The database is a cache that the log
// rebuilds, so the writer does not fsync each transaction (WAL with
// synchronous=NORMAL: a crash loses at most the last transactions, never
// consistency; the applied offset in meta says where to replay from).
func register() {
	registerDriver.Do(func() {
		sql.Register(driverName, &sqlite3.SQLiteDriver{ConnectHook: connectHook})
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

// store is the SQLite side of a coordinator's state: one writer connection
// that only the coordinator's loop uses, and a pool of read-only
// connections for the reads that may run beside it.
type store struct {
	// dirtyProducers are the producer states changed since the producers
	// table was last written (meta.producers_at); flushedAt is that
	// offset, and sinceFlush counts the entries applied since.
	dirtyProducers map[producerKey]struct{}
	producersAt    int64
	sinceFlush     int

	// The writer keeps one transaction open across entries (see
	// applyEntry); inTxn says it is, txnSince since when.
	inTxn    bool
	txnSince time.Time
	// touched are the partitions the last applyEntry changed, and gone
	// the topics it deleted, for the coordinator to publish.
	touched     []int64
	gone        []*topicState
	newObjects  []objectRow
	deadObjects []int64
	// released counts the batch rows the last applyEntry took out of
	// objects (and the remote segments it dropped), and received the
	// ownerships it logged: the lifecycle worker has work when either is
	// not zero.
	released, received int
	// remoteSegments and remoteBytes count the live remote segments and
	// their .log bytes, for Stats.
	remoteSegments, remoteBytes atomic.Int64

	path   string
	wdb    *sql.DB
	w      *sql.Conn
	rdb    *sql.DB
	reader *reader
	bulks  map[string]*sql.Stmt
	single map[string]*sql.Stmt
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

// sqliteURI returns the SQLite URI of the database file at path with the
// query q. The path is escaped: SQLite reads a '?' in it as the start of
// the query, a '#' as the start of a fragment, and a '%' as an escape.
func sqliteURI(path, q string) string {
	return "file:" + strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path) + "?" + q
}

// openStore opens (creating it if needed) the database at path.
//
// The database is a cache the log can rebuild, so where the kernel tells
// its boot ID the writer does not fsync at all (synchronous=OFF): SQLite
// keeps it consistent through a crash of the process, and only a crash of
// the machine can damage it. A database last opened under another boot and
// not closed cleanly is therefore deleted and rebuilt; Close fsyncs
// everything before it marks the database clean.
func openStore(ctx context.Context, path string, readers int) (*store, error) {
	register()
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
	wdb, err := sql.Open(driverName, sqliteURI(path, "_journal_mode=WAL&_synchronous="+syncMode+"&_txlock=immediate"))
	if err != nil {
		return nil, fmt.Errorf("coordinator: opening %s: %w", path, err)
	}
	wdb.SetMaxOpenConns(1)
	s := &store{path: path, wdb: wdb, bulks: map[string]*sql.Stmt{}, single: map[string]*sql.Stmt{}, dirtyProducers: map[producerKey]struct{}{}}
	if s.w, err = wdb.Conn(ctx); err != nil {
		wdb.Close()
		return nil, fmt.Errorf("coordinator: opening %s: %w", path, err)
	}
	// A larger WAL between checkpoints writes each hot page (partitions)
	// once per checkpoint rather than many times.
	if _, err := s.w.ExecContext(ctx, "PRAGMA wal_autocheckpoint = 8192"); err != nil {
		s.close()
		return nil, fmt.Errorf("coordinator: %w", err)
	}
	if _, err := s.w.ExecContext(ctx, schema); err != nil {
		s.close()
		return nil, fmt.Errorf("coordinator: creating the schema in %s: %w", path, err)
	}
	if err := s.addColumns(ctx); err != nil {
		s.close()
		return nil, fmt.Errorf("coordinator: updating the schema in %s: %w", path, err)
	}
	if _, err := s.w.ExecContext(ctx, "INSERT INTO meta (k, v) VALUES (?, ?), (?, 0) ON CONFLICT (k) DO UPDATE SET v = excluded.v",
		metaBoot, boot, metaClean); err != nil {
		s.close()
		return nil, fmt.Errorf("coordinator: %w", err)
	}
	rdb, err := sql.Open(driverName, sqliteURI(path, "mode=ro&_journal_mode=WAL"))
	if err != nil {
		s.close()
		return nil, fmt.Errorf("coordinator: opening %s for reading: %w", path, err)
	}
	rdb.SetMaxOpenConns(readers)
	rdb.SetMaxIdleConns(readers)
	s.rdb = rdb
	if s.reader, err = newReader(ctx, rdb, path, readers); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// addColumns adds the columns of addedColumns that the database lacks.
func (s *store) addColumns(ctx context.Context) error {
	for _, c := range addedColumns {
		var n int
		if err := s.w.QueryRowContext(ctx, "SELECT COUNT(*) FROM pragma_table_info(?) WHERE name = ?", c.table, c.column).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			if _, err := s.w.ExecContext(ctx, "ALTER TABLE "+c.table+" ADD COLUMN "+c.column+" "+c.decl); err != nil {
				return err
			}
			if c.fill != "" {
				if _, err := s.w.ExecContext(ctx, c.fill); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// int32sBlob encodes a list of owners or partitions for a BLOB column:
// NULL (nil) for none.
func int32sBlob(vs []int32) any {
	if vs == nil {
		return nil
	}
	return appendInt32s(nil, vs)
}

// decodeInt32s decodes what int32sBlob encoded; nil for NULL.
func decodeInt32s(b []byte) ([]int32, error) {
	if b == nil {
		return nil, nil
	}
	d := decoder{b: b}
	vs := d.shards("values")
	if d.err == nil && len(d.b) != 0 {
		d.fail("bytes after a list")
	}
	return vs, d.err
}

// dropIfCrashed deletes the database at path if it was last opened under
// another boot and not closed cleanly: the machine crashed while it was
// written without fsync, so it may be damaged.
func dropIfCrashed(ctx context.Context, path string, boot int64) error {
	if _, err := os.Stat(path); err != nil {
		return nil // nothing to check
	}
	db, err := sql.Open(driverName, sqliteURI(path, "mode=ro"))
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

// markClean makes everything durable, then records a clean close.
func (s *store) markClean(ctx context.Context) error {
	if err := s.commitTxn(ctx); err != nil {
		return err
	}
	for _, q := range []string{
		"PRAGMA synchronous = FULL",
		"PRAGMA wal_checkpoint(TRUNCATE)",
		"UPDATE meta SET v = 1 WHERE k = '" + metaClean + "'",
		"PRAGMA wal_checkpoint(TRUNCATE)",
	} {
		if _, err := s.w.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("coordinator: closing the database: %w", err)
		}
	}
	return nil
}

func (s *store) close() error {
	var errs []error
	for _, st := range s.bulks {
		errs = append(errs, st.Close())
	}
	for _, st := range s.single {
		errs = append(errs, st.Close())
	}
	if s.reader != nil {
		errs = append(errs, s.reader.close())
	}
	if s.w != nil {
		errs = append(errs, s.w.Close())
	}
	if s.rdb != nil {
		errs = append(errs, s.rdb.Close())
	}
	errs = append(errs, s.wdb.Close())
	return errors.Join(errs...)
}

// stmt returns the writer's prepared statement for query.
func (s *store) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := s.single[query]; ok {
		return st, nil
	}
	st, err := s.w.PrepareContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("coordinator: preparing %q: %w", query, err)
	}
	s.single[query] = st
	return st, nil
}

// The writer runs its transactions with BEGIN and COMMIT statements on its
// one connection, and its statements prepared once on that connection:
// database/sql's Tx.Stmt would prepare a connection's statement again for
// every transaction.

// begin starts a write transaction on the writer connection.
func (s *store) begin(ctx context.Context) error {
	_, err := s.w.ExecContext(ctx, "BEGIN IMMEDIATE")
	return err
}

func (s *store) commit(ctx context.Context) error {
	_, err := s.w.ExecContext(ctx, "COMMIT")
	return err
}

func (s *store) rollback() {
	_, _ = s.w.ExecContext(context.Background(), "ROLLBACK")
}

func (s *store) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, err := s.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	res, err := st.ExecContext(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("coordinator: %q: %w", query, err)
	}
	return res, nil
}

// maxBulkRows is how many rows one multi-row statement takes.
const maxBulkRows = 128

// bulk executes head + "(?,...)" repeated for each row + tail, in chunks
// of maxBulkRows rows; args holds the rows' values one after another.
func (s *store) bulk(ctx context.Context, head string, arity int, tail string, args []any) error {
	for len(args) > 0 {
		rows := min(len(args)/arity, maxBulkRows)
		key := fmt.Sprintf("%s|%d|%s", head, rows, tail)
		st, ok := s.bulks[key]
		if !ok {
			tuple := "(" + strings.TrimSuffix(strings.Repeat("?,", arity), ",") + ")"
			q := head + " " + strings.TrimSuffix(strings.Repeat(tuple+",", rows), ",") + " " + tail
			var err error
			if st, err = s.w.PrepareContext(ctx, q); err != nil {
				return fmt.Errorf("coordinator: preparing %q: %w", head, err)
			}
			s.bulks[key] = st
		}
		if _, err := st.ExecContext(ctx, args[:rows*arity]...); err != nil {
			return fmt.Errorf("coordinator: %q: %w", head, err)
		}
		args = args[rows*arity:]
	}
	return nil
}

// objectRow is an object's ID, key and commit time.
type objectRow struct {
	id          int64
	key         string
	committedAt int64
}

// loadObjects reads every object, for the published map.
func (s *store) loadObjects(ctx context.Context) ([]objectRow, error) {
	rows, err := s.w.QueryContext(ctx, "SELECT object_id, key, committed_at FROM objects")
	if err != nil {
		return nil, fmt.Errorf("coordinator: reading objects: %w", err)
	}
	defer rows.Close()
	var out []objectRow
	for rows.Next() {
		var o objectRow
		if err := rows.Scan(&o.id, &o.key, &o.committedAt); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// knownKeys returns which of keys name committed objects, with one query
// per maxBulkRows keys.
func (s *store) knownKeys(ctx context.Context, keys []string) (map[string]bool, error) {
	known := map[string]bool{}
	for len(keys) > 0 {
		n := min(len(keys), maxBulkRows)
		key := fmt.Sprintf("known|%d", n)
		st, ok := s.bulks[key]
		if !ok {
			q := "SELECT key FROM objects WHERE key IN (" + strings.TrimSuffix(strings.Repeat("?,", n), ",") + ")"
			var err error
			if st, err = s.w.PrepareContext(ctx, q); err != nil {
				return nil, fmt.Errorf("coordinator: preparing %q: %w", q, err)
			}
			s.bulks[key] = st
		}
		args := make([]any, n)
		for i := range args {
			args[i] = keys[i]
		}
		rows, err := st.QueryContext(ctx, args...)
		if err != nil {
			return nil, fmt.Errorf("coordinator: looking up objects: %w", err)
		}
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				rows.Close()
				return nil, err
			}
			known[k] = true
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
		keys = keys[n:]
	}
	return known, nil
}

// loadView reads the committed view and the applied offset (-1 for an
// empty database). The producer states are as of s.producersAt, which may
// be behind: see replayProducers.
func (s *store) loadView(ctx context.Context) (*view, int64, error) {
	v := newView(nil)
	applied := int64(-1)
	s.producersAt = -2
	rows, err := s.w.QueryContext(ctx, "SELECT k, v FROM meta")
	if err != nil {
		return nil, 0, fmt.Errorf("coordinator: reading meta: %w", err)
	}
	for rows.Next() {
		var k string
		var x int64
		if err := rows.Scan(&k, &x); err != nil {
			rows.Close()
			return nil, 0, err
		}
		switch k {
		case metaApplied:
			applied = x
		case metaProducersAt:
			s.producersAt = x
		case metaEpoch:
			v.epoch = int32(x)
		case metaNextPID:
			v.nextPID = x
		case metaNextObjectID:
			v.nextObjectID = x
		case metaNextProducerID:
			v.nextProducerID = x
		}
	}
	if err := rows.Close(); err != nil {
		return nil, 0, err
	}

	rows, err = s.w.QueryContext(ctx, "SELECT topic_id, name, partitions, first_pid, retention_ms, retention_bytes, flags, max_message_bytes, assigned, segment_bytes, segment_ms FROM topics")
	if err != nil {
		return nil, 0, fmt.Errorf("coordinator: reading topics: %w", err)
	}
	for rows.Next() {
		var t topicState
		var id, assigned []byte
		var flags int64
		if err := rows.Scan(&id, &t.Name, &t.Partitions, &t.FirstPID, &t.Config.RetentionMs, &t.Config.RetentionBytes, &flags, &t.Config.MaxMessageBytes, &assigned, &t.Config.SegmentBytes, &t.Config.SegmentMs); err != nil {
			rows.Close()
			return nil, 0, err
		}
		if t.Assigned, err = decodeInt32s(assigned); err != nil {
			rows.Close()
			return nil, 0, fmt.Errorf("coordinator: topic %s: %w", t.Name, err)
		}
		t.ID = uuid.UUID(id)
		t.Config.Compact, t.Config.Delete, t.Config.LogAppendTime = flags&1 != 0, flags&2 != 0, flags&4 != 0
		v.topics[t.ID] = &t
		v.names[t.Name] = &t
	}
	if err := rows.Close(); err != nil {
		return nil, 0, err
	}

	rows, err = s.w.QueryContext(ctx, "SELECT pid, topic_id, partition, log_start, high_watermark, bytes, diskless_start, remote_bytes FROM partitions")
	if err != nil {
		return nil, 0, fmt.Errorf("coordinator: reading partitions: %w", err)
	}
	for rows.Next() {
		p := partState{RemoteEnd: -1}
		var id []byte
		if err := rows.Scan(&p.PID, &id, &p.Partition, &p.LogStart, &p.HW, &p.Bytes, &p.DisklessStart, &p.RemoteBytes); err != nil {
			rows.Close()
			return nil, 0, err
		}
		p.TopicID = uuid.UUID(id)
		v.parts[p.PID] = &p
	}
	if err := rows.Close(); err != nil {
		return nil, 0, err
	}
	rows, err = s.w.QueryContext(ctx, "SELECT pid, MAX(end_offset), COUNT(*), SUM(size) FROM remote_segments GROUP BY pid")
	if err != nil {
		return nil, 0, fmt.Errorf("coordinator: reading remote segments: %w", err)
	}
	var segs, segBytes int64
	for rows.Next() {
		var pid, end, n, size int64
		if err := rows.Scan(&pid, &end, &n, &size); err != nil {
			rows.Close()
			return nil, 0, err
		}
		if p := v.parts[pid]; p != nil {
			p.RemoteEnd = end
		}
		segs, segBytes = segs+n, segBytes+size
	}
	if err := rows.Close(); err != nil {
		return nil, 0, err
	}
	s.remoteSegments.Store(segs)
	s.remoteBytes.Store(segBytes)

	rows, err = s.w.QueryContext(ctx, "SELECT pid, producer_id, epoch, batches FROM producers")
	if err != nil {
		return nil, 0, fmt.Errorf("coordinator: reading producers: %w", err)
	}
	for rows.Next() {
		var k producerKey
		var epoch int16
		var blob []byte
		if err := rows.Scan(&k.PID, &k.ProducerID, &epoch, &blob); err != nil {
			rows.Close()
			return nil, 0, err
		}
		batches, err := decodeProducerBatches(blob)
		if err != nil {
			rows.Close()
			return nil, 0, err
		}
		v.producers[k] = &producerState{Epoch: epoch, Batches: batches}
	}
	if err := rows.Close(); err != nil {
		return nil, 0, err
	}
	if s.producersAt == -2 {
		s.producersAt = applied
	}
	clear(s.dirtyProducers)
	s.sinceFlush = 0
	return v, applied, nil
}

func appendProducerBatches(b []byte, batches []batchMeta) []byte {
	b = binary.AppendUvarint(b, uint64(len(batches)))
	for _, m := range batches {
		b = binary.AppendVarint(b, int64(m.FirstSeq))
		b = binary.AppendVarint(b, int64(m.LastSeq))
		b = binary.AppendVarint(b, m.LastOffset)
		b = binary.AppendVarint(b, int64(m.Count))
		b = binary.AppendVarint(b, m.Timestamp)
	}
	return b
}

func decodeProducerBatches(b []byte) ([]batchMeta, error) {
	d := decoder{b: b}
	n := d.count(5)
	out := make([]batchMeta, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, batchMeta{FirstSeq: d.int32(), LastSeq: d.int32(), LastOffset: d.varint(), Count: d.int32(), Timestamp: d.varint()})
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("bytes after the producer batches")
	}
	return out, d.err
}

// ensureTxn opens the writer's transaction if none is open.
func (s *store) ensureTxn(ctx context.Context) error {
	if s.inTxn {
		return nil
	}
	if err := s.begin(ctx); err != nil {
		return err
	}
	s.inTxn, s.txnSince = true, time.Now()
	return nil
}

// commitTxn commits the writer's transaction, if one is open: the entries
// applied in it become visible to the read pool (and to snapshots).
func (s *store) commitTxn(ctx context.Context) error {
	if !s.inTxn {
		return nil
	}
	s.inTxn = false
	if err := s.commit(ctx); err != nil {
		s.rollback()
		return fmt.Errorf("coordinator: committing: %w", err)
	}
	return nil
}

// rollbackTxn abandons the open transaction.
func (s *store) rollbackTxn() {
	if s.inTxn {
		s.inTxn = false
		s.rollback()
	}
}

// applyEntry applies a durable entry to the database and to the committed
// view root, and records offset as applied, in the writer's open
// transaction (it opens one if needed; commitTxn commits it: one
// transaction for many entries writes each hot page once, not once per
// entry). If it fails, the transaction is rolled back and root may be
// ahead of the database: the caller must stop using both (the coordinator
// stops; reopening replays the log from what was committed).
func (s *store) applyEntry(ctx context.Context, root *view, offset int64, e entry) error {
	if err := s.ensureTxn(ctx); err != nil {
		return fmt.Errorf("coordinator: applying entry %d: %w", offset, err)
	}
	if err := s.applyRecords(ctx, root, e.Records); err != nil {
		s.rollbackTxn()
		return fmt.Errorf("coordinator: applying entry %d: %w", offset, err)
	}
	s.sinceFlush++
	if s.sinceFlush >= producerFlushEntries || len(s.dirtyProducers) >= producerFlushStates {
		if err := s.flushProducers(ctx, root, offset); err != nil {
			s.rollbackTxn()
			return err
		}
	}
	meta := []any{
		metaApplied, offset,
		metaProducersAt, s.producersAt,
		metaEpoch, int64(root.epoch),
		metaNextPID, root.nextPID,
		metaNextObjectID, root.nextObjectID,
		metaNextProducerID, root.nextProducerID,
	}
	if err := s.bulk(ctx, "INSERT INTO meta (k, v) VALUES", 2, "ON CONFLICT (k) DO UPDATE SET v = excluded.v", meta); err != nil {
		s.rollbackTxn()
		return err
	}
	return nil
}

func (s *store) applyRecords(ctx context.Context, root *view, records []record) error {
	dirtyParts := map[int64]bool{}
	s.touched, s.gone = s.touched[:0], s.gone[:0]
	s.newObjects, s.deadObjects = s.newObjects[:0], s.deadObjects[:0]
	s.released, s.received = 0, 0
	var args, objects, rows []any
	// Commits' object and batch rows are inserted together, a multi-row
	// statement for many commits, before any record that reads them.
	flush := func() error {
		if err := s.bulk(ctx, "INSERT INTO objects (object_id, key, size, uploader, committed_at, live_rows, dead_at, owners) VALUES", 8, "", objects); err != nil {
			return err
		}
		if err := s.bulk(ctx, "INSERT INTO batches (pid, last_offset, n, object_id, pos, size, ts) VALUES", 7, "", rows); err != nil {
			return err
		}
		objects, rows = objects[:0], rows[:0]
		return nil
	}
	for _, r := range records {
		if _, ok := r.(commitFileRecord); !ok {
			if err := flush(); err != nil {
				return err
			}
		}
		switch r := r.(type) {
		case createTopicRecord:
			c := r.Config
			flags := int64(boolByte(c.Compact)) | int64(boolByte(c.Delete))<<1 | int64(boolByte(c.LogAppendTime))<<2
			if _, err := s.exec(ctx, "INSERT INTO topics (topic_id, name, partitions, first_pid, retention_ms, retention_bytes, flags, max_message_bytes, assigned, segment_bytes, segment_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
				r.TopicID[:], r.Name, r.Partitions, r.FirstPID, c.RetentionMs, c.RetentionBytes, flags, c.MaxMessageBytes, int32sBlob(r.Assigned), c.SegmentBytes, c.SegmentMs); err != nil {
				return err
			}
			root.apply(r)
			for i := int64(0); i < int64(r.Partitions); i++ {
				if root.part(r.FirstPID+i) != nil { // an assigned partition
					dirtyParts[r.FirstPID+i] = true
				}
			}
		case deleteTopicRecord:
			t := root.topic(r.TopicID)
			if t == nil {
				continue
			}
			lo, hi := t.FirstPID, t.FirstPID+int64(t.Partitions)-1
			if err := s.releaseRows(ctx, "pid BETWEEN ? AND ?", r.Time, lo, hi); err != nil {
				return err
			}
			if _, err := s.dropRemote(ctx, "pid BETWEEN ? AND ?", r.Time, lo, hi); err != nil {
				return err
			}
			for _, q := range []string{
				"DELETE FROM batches WHERE pid BETWEEN ? AND ?",
				"DELETE FROM partitions WHERE pid BETWEEN ? AND ?",
				"DELETE FROM producers WHERE pid BETWEEN ? AND ?",
			} {
				if _, err := s.exec(ctx, q, lo, hi); err != nil {
					return err
				}
			}
			if _, err := s.exec(ctx, "DELETE FROM topics WHERE topic_id = ?", r.TopicID[:]); err != nil {
				return err
			}
			root.apply(r)
			s.gone = append(s.gone, t)
			for pid := lo; pid <= hi; pid++ {
				delete(dirtyParts, pid)
			}
			for k := range s.dirtyProducers {
				if k.PID >= lo && k.PID <= hi {
					delete(s.dirtyProducers, k)
				}
			}
		case commitFileRecord:
			live := int64(len(r.Rows))
			var deadAt any
			if live == 0 {
				deadAt = r.CommitTime
				s.released++
			}
			objects = append(objects, r.ObjectID, r.Key, r.Size, r.Uploader, r.CommitTime, live, deadAt, int32sBlob(r.Owners))
			s.newObjects = append(s.newObjects, objectRow{id: r.ObjectID, key: r.Key, committedAt: r.CommitTime})
			for _, w := range r.Rows {
				rows = append(rows, w.PID, w.LastOffset, w.LastOffset-w.BaseOffset+1, r.ObjectID, w.BytePos, w.ByteSize, w.MaxTimestamp-r.CommitTime)
				dirtyParts[w.PID] = true
			}
			for _, p := range r.Producers {
				s.dirtyProducers[producerKey{p.PID, p.ProducerID}] = struct{}{}
			}
			root.apply(r)
		case trimRecord:
			p := root.part(r.PID)
			if p == nil || r.LogStart <= p.LogStart {
				continue
			}
			var freed int64
			st, err := s.stmt(ctx, "SELECT COALESCE(SUM(size), 0) FROM batches WHERE pid = ? AND last_offset < ?")
			if err != nil {
				return err
			}
			if err := st.QueryRowContext(ctx, r.PID, r.LogStart).Scan(&freed); err != nil {
				return fmt.Errorf("coordinator: trimming: %w", err)
			}
			if err := s.releaseRows(ctx, "pid = ? AND last_offset < ?", r.Time, r.PID, r.LogStart); err != nil {
				return err
			}
			if _, err := s.exec(ctx, "DELETE FROM batches WHERE pid = ? AND last_offset < ?", r.PID, r.LogStart); err != nil {
				return err
			}
			remoteFreed, err := s.dropRemote(ctx, "pid = ? AND end_offset < ?", r.Time, r.PID, r.LogStart)
			if err != nil {
				return err
			}
			root.apply(r)
			p = root.mutPart(r.PID)
			p.Bytes -= freed
			p.RemoteBytes -= remoteFreed
			dirtyParts[r.PID] = true
		case remoteSegmentRecord:
			if err := s.addRemote(ctx, root, r); err != nil {
				return err
			}
			dirtyParts[r.PID] = true
		case ownershipRecord:
			if err := s.receive(ctx, r); err != nil {
				return err
			}
			root.apply(r)
			s.received++
		case objectsDeletedRecord:
			for _, id := range r.ObjectIDs {
				res, err := s.exec(ctx, "DELETE FROM objects WHERE object_id = ? AND live_rows <= 0", id)
				if err != nil {
					return err
				}
				if n, _ := res.RowsAffected(); n > 0 {
					s.deadObjects = append(s.deadObjects, id)
				}
			}
		default:
			root.apply(r)
		}
	}
	if err := flush(); err != nil {
		return err
	}
	args = args[:0]
	for pid := range dirtyParts {
		p := root.part(pid)
		if p == nil {
			continue // no such partition (its topic is gone): nothing to write
		}
		s.touched = append(s.touched, pid)
		args = append(args, p.PID, p.TopicID[:], p.Partition, p.LogStart, p.HW, p.Bytes, p.DisklessStart, p.RemoteBytes)
	}
	if err := s.bulk(ctx, "INSERT INTO partitions (pid, topic_id, partition, log_start, high_watermark, bytes, diskless_start, remote_bytes) VALUES", 8,
		"ON CONFLICT (pid) DO UPDATE SET log_start = excluded.log_start, high_watermark = excluded.high_watermark, bytes = excluded.bytes, diskless_start = excluded.diskless_start, remote_bytes = excluded.remote_bytes", args); err != nil {
		return err
	}
	return nil
}

// receive applies an ownershipRecord: it marks the object's row received,
// or makes a row with no batches, dead since r.Time, if there is none.
func (s *store) receive(ctx context.Context, r ownershipRecord) error {
	res, err := s.exec(ctx, "UPDATE objects SET received = 1 WHERE key = ?", r.Key)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n > 0 {
		return nil
	}
	_, err = s.exec(ctx, "INSERT INTO objects (object_id, key, size, uploader, committed_at, live_rows, dead_at, owners, received) VALUES (?, ?, 0, -1, ?, 0, ?, ?, 1)",
		r.ObjectID, r.Key, r.Time, r.Time, int32sBlob(r.Owners))
	return err
}

// When the producers table is written (see schema): every
// producerFlushEntries entries, or once producerFlushStates states changed.
const (
	producerFlushEntries = 10000
	producerFlushStates  = 1_000_000
)

// flushProducers writes the changed producer states, inside the current
// transaction, and records them as of offset.
func (s *store) flushProducers(ctx context.Context, root *view, offset int64) error {
	var args []any
	for k := range s.dirtyProducers {
		p := root.producer(k)
		if p == nil {
			continue // its topic was deleted, rows and all
		}
		args = append(args, k.PID, k.ProducerID, p.Epoch, appendProducerBatches(nil, p.Batches))
	}
	if err := s.bulk(ctx, "INSERT INTO producers (pid, producer_id, epoch, batches) VALUES", 4,
		"ON CONFLICT (pid, producer_id) DO UPDATE SET epoch = excluded.epoch, batches = excluded.batches", args); err != nil {
		return err
	}
	clear(s.dirtyProducers)
	s.producersAt, s.sinceFlush = offset, 0
	return nil
}

// syncProducers writes the changed producer states now, as of the applied
// offset (before a snapshot or a close).
func (s *store) syncProducers(ctx context.Context, root *view, applied int64) error {
	if s.producersAt == applied {
		return s.commitTxn(ctx)
	}
	if err := s.ensureTxn(ctx); err != nil {
		return err
	}
	if err := s.flushProducers(ctx, root, applied); err != nil {
		s.rollbackTxn()
		return err
	}
	if _, err := s.exec(ctx, "INSERT INTO meta (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v", metaProducersAt, applied); err != nil {
		s.rollbackTxn()
		return err
	}
	return s.commitTxn(ctx)
}

// applyProducers applies what a record changes in producer states only:
// replaying entries that the producers table is behind on.
func (s *store) applyProducers(root *view, r record) {
	switch r := r.(type) {
	case commitFileRecord:
		var live []producerBatch
		for _, p := range r.Producers {
			if root.part(p.PID) != nil { // else its topic is gone by now
				live = append(live, p)
				s.dirtyProducers[producerKey{p.PID, p.ProducerID}] = struct{}{}
			}
		}
		if len(live) > 0 {
			root.apply(commitFileRecord{ObjectID: -1, Producers: live})
		}
	case deleteTopicRecord:
		// The table has no rows of the topic left; the view, none either
		// once the topic's own record is replayed in full.
	}
}

// releaseRows takes the batch rows matching where out of their objects'
// live counts, marking objects left with none dead as of now.
func (s *store) releaseRows(ctx context.Context, where string, now int64, args ...any) error {
	st, err := s.stmt(ctx, "SELECT object_id, COUNT(*) FROM batches WHERE "+where+" GROUP BY object_id")
	if err != nil {
		return err
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return fmt.Errorf("coordinator: releasing rows: %w", err)
	}
	type count struct{ id, n int64 }
	var counts []count
	for rows.Next() {
		var c count
		if err := rows.Scan(&c.id, &c.n); err != nil {
			rows.Close()
			return err
		}
		counts = append(counts, c)
	}
	if err := rows.Close(); err != nil {
		return err
	}
	s.released += len(counts)
	for _, c := range counts {
		if _, err := s.exec(ctx, "UPDATE objects SET live_rows = live_rows - ?1, dead_at = CASE WHEN live_rows - ?1 <= 0 THEN ?2 ELSE dead_at END WHERE object_id = ?3", c.n, now, c.id); err != nil {
			return err
		}
	}
	return nil
}

// addRemote applies a remoteSegmentRecord: the segment's row and its
// files' object row (one live reference, this shard alone), and the
// release of the batch rows wholly at or below its end.
func (s *store) addRemote(ctx context.Context, root *view, r remoteSegmentRecord) error {
	if root.part(r.PID) == nil {
		// Its topic is gone: the check refuses that, so no such record is
		// logged; if one were, it would change nothing but the counters.
		root.apply(r)
		return nil
	}
	size := r.Size + r.IndexSize + r.TimeIndexSize + r.TxnIndexSize
	if _, err := s.exec(ctx, "INSERT INTO objects (object_id, key, size, uploader, committed_at, live_rows, dead_at, owners) VALUES (?, ?, ?, ?, ?, 1, NULL, NULL)",
		r.ObjectID, r.Key, size, r.Uploader, r.Time); err != nil {
		return err
	}
	s.newObjects = append(s.newObjects, objectRow{id: r.ObjectID, key: r.Key, committedAt: r.Time})
	if _, err := s.exec(ctx, "INSERT INTO remote_segments (pid, end_offset, base_offset, segment_id, key, object_id, max_timestamp, size, index_size, time_index_size, txn_index_size, uploader, registered_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		r.PID, r.EndOffset, r.BaseOffset, r.ID[:], r.Key, r.ObjectID, r.MaxTimestamp, r.Size, r.IndexSize, r.TimeIndexSize, r.TxnIndexSize, r.Uploader, r.Time); err != nil {
		return err
	}
	var freed int64
	st, err := s.stmt(ctx, "SELECT COALESCE(SUM(size), 0) FROM batches WHERE pid = ? AND last_offset <= ?")
	if err != nil {
		return err
	}
	if err := st.QueryRowContext(ctx, r.PID, r.EndOffset).Scan(&freed); err != nil {
		return fmt.Errorf("coordinator: registering a remote segment: %w", err)
	}
	if err := s.releaseRows(ctx, "pid = ? AND last_offset <= ?", r.Time, r.PID, r.EndOffset); err != nil {
		return err
	}
	if _, err := s.exec(ctx, "DELETE FROM batches WHERE pid = ? AND last_offset <= ?", r.PID, r.EndOffset); err != nil {
		return err
	}
	root.apply(r)
	root.mutPart(r.PID).Bytes -= freed
	s.remoteSegments.Add(1)
	s.remoteBytes.Add(r.Size)
	return nil
}

// dropRemote drops the remote segments matching where: their object rows
// become dead as of now (the lifecycle deletes their files), their rows
// go. It returns their .log bytes.
func (s *store) dropRemote(ctx context.Context, where string, now int64, args ...any) (int64, error) {
	st, err := s.stmt(ctx, "SELECT object_id, size FROM remote_segments WHERE "+where)
	if err != nil {
		return 0, err
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return 0, fmt.Errorf("coordinator: dropping remote segments: %w", err)
	}
	var ids []int64
	var freed int64
	for rows.Next() {
		var id, size int64
		if err := rows.Scan(&id, &size); err != nil {
			rows.Close()
			return 0, err
		}
		ids = append(ids, id)
		freed += size
	}
	if err := rows.Close(); err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, nil
	}
	for _, id := range ids {
		if _, err := s.exec(ctx, "UPDATE objects SET live_rows = 0, dead_at = ? WHERE object_id = ?", now, id); err != nil {
			return 0, err
		}
	}
	if _, err := s.exec(ctx, "DELETE FROM remote_segments WHERE "+where, args...); err != nil {
		return 0, err
	}
	s.released += len(ids)
	s.remoteSegments.Add(-int64(len(ids)))
	s.remoteBytes.Add(-freed)
	return freed, nil
}
