package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/diskless-go/diskless/coordinator/state"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/wal"
	"github.com/google/uuid"
	"github.com/mattn/go-sqlite3"
)

// reader holds the read-only statements, prepared on a store's read pool.
// Reads see the state as of the last applied entry, never anything that
// is not durable.
type reader struct {
	db  *sql.DB
	raw chan *rawConn // FindBatches' own connections, the idle ones
	// rawMu orders the return of a raw connection with Close: one
	// returned after Close is closed, not kept; done is closed by Close.
	rawMu   sync.Mutex
	closed  bool
	done    chan struct{}
	object  *sql.Stmt
	byTime  *sql.Stmt
	maxTime *sql.Stmt
	// Remote segments (remote.go).
	remoteList, remoteAt, remoteByTime, remoteMaxTime *sql.Stmt
	// Committed offsets (groupoffsets.go).
	groupOffsetsStmt, offsetGroupsStmt *sql.Stmt
	GroupMetadataStmt                  *sql.Stmt
}

func newReader(ctx context.Context, db *sql.DB, path string, conns int) (*reader, error) {
	r := &reader{db: db, raw: make(chan *rawConn, conns), done: make(chan struct{})}
	for i := 0; i < conns; i++ {
		rc, err := openRawConn(path)
		if err != nil {
			r.Close()
			return nil, err
		}
		r.raw <- rc
	}
	for _, p := range []struct {
		st *(*sql.Stmt)
		q  string
	}{
		{&r.object, "SELECT key, committed_at, compacted FROM objects WHERE object_id = ?"},
		{&r.byTime, "SELECT b.last_offset, b.n, b.pos, b.size, b.ts + o.committed_at, o.key, o.committed_at, o.compacted FROM batches b JOIN objects o ON o.object_id = b.object_id WHERE b.pid = ? AND b.last_offset >= ? AND b.last_offset < ? AND b.ts + o.committed_at >= ? ORDER BY b.last_offset LIMIT 1"},
		{&r.maxTime, "SELECT b.last_offset, b.n, b.pos, b.size, b.ts + o.committed_at, o.key, o.committed_at, o.compacted FROM batches b JOIN objects o ON o.object_id = b.object_id WHERE b.pid = ? AND b.last_offset >= ? AND b.last_offset < ? ORDER BY b.ts + o.committed_at DESC, b.last_offset LIMIT 1"},
		{&r.remoteList, remoteListQuery},
		{&r.remoteAt, remoteAtQuery},
		{&r.remoteByTime, remoteByTimeQuery},
		{&r.remoteMaxTime, remoteMaxTimeQuery},
		{&r.groupOffsetsStmt, groupOffsetsQuery},
		{&r.offsetGroupsStmt, offsetGroupsQuery},
		{&r.GroupMetadataStmt, groupMetadataQuery},
	} {
		st, err := db.PrepareContext(ctx, p.q)
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("coordinator: preparing %q: %w", p.q, err)
		}
		*p.st = st
	}
	return r, nil
}

func (r *reader) Close() error {
	var errs []error
	r.rawMu.Lock()
	if !r.closed {
		r.closed = true
		close(r.done)
	}
	for n := cap(r.raw); n > 0; n-- {
		select {
		case rc := <-r.raw:
			errs = append(errs, rc.Close())
		default:
			n = 0 // the others are in use: putRaw closes them
		}
	}
	r.rawMu.Unlock()
	for _, st := range []*sql.Stmt{r.object, r.byTime, r.maxTime, r.remoteList, r.remoteAt, r.remoteByTime, r.remoteMaxTime, r.groupOffsetsStmt, r.offsetGroupsStmt, r.GroupMetadataStmt} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}

// Location is where a run of batches lives: a byte range of one object,
// holding the batches of offsets BaseOffset to LastOffset, contiguous
// (each batch's base offset follows from the one before: base offset plus
// its record count).
type Location struct {
	ObjectKey  string
	BytePos    int64
	ByteSize   int64
	BaseOffset int64
	LastOffset int64
	// MaxTimestamp is the greatest batch timestamp in the run.
	MaxTimestamp int64
	// LogAppendTime is the time the run was committed on LogAppendTime
	// topics (to be written into the batches on the way out), else -1.
	LogAppendTime int64
	// Marker is set when the run is one transaction marker, which no
	// object holds (ObjectKey is empty): its batch is
	// kbatch.AppendEndTxnMarker of it, ByteSize bytes.
	Marker *kbatch.EndTxnMarker
}

// FindResult is the answer to FindBatches.
type FindResult struct {
	// Batches are the runs from the one holding the offset asked for, in
	// offset order. The first may start below that offset (a run is
	// contiguous batches; a run that straddles the diskless start offset
	// starts below it): skip the batches below the offset asked.
	Batches []Location
	// LogStart and HighWatermark are the partition's.
	LogStart, HighWatermark int64
	// LastStable is the partition's last stable offset: the first offset
	// of its oldest open transaction that wrote, else HighWatermark. A
	// read_committed consumer reads below it.
	LastStable int64
	// CleanedTo is the offset after the last range compacted (0 if
	// none): where a compactor's dirty part starts.
	CleanedTo int64
	// DisklessStart is the first offset still held as diskless batches
	// (LogStart <= DisklessStart <= HighWatermark); below it, the data is
	// in remote segments.
	DisklessStart int64
	// Remote is set when LogStart <= offset < DisklessStart: the live
	// remote segment that holds the offset (or, in a gap, the first after
	// it). Batches is then empty.
	Remote *state.RemoteSegment
}

type PartRow struct {
	PID, LogStart, disklessStart, HW int64
	LSO                              int64 // last stable offset
	cleanedTo                        int64
	lat                              bool
	// appliedAt is the log offset of the entry that set the row's values.
	AppliedAt int64
}

func scanLocation(rows interface{ Scan(...any) error }, lat bool) (Location, error) {
	var l Location
	var n, committed int64
	var compacted bool
	if err := rows.Scan(&l.LastOffset, &n, &l.BytePos, &l.ByteSize, &l.MaxTimestamp, &l.ObjectKey, &committed, &compacted); err != nil {
		return l, err
	}
	l.BaseOffset = l.LastOffset - n + 1
	l.LogAppendTime = -1
	if lat && !compacted { // a compacted object's batches are stamped already
		l.LogAppendTime = committed
	}
	return l, nil
}

// FindBatches returns the runs of batches of tp from offset on, at least
// one and then as many as fit in maxBytes. Rows name their object by ID;
// pub resolves it (or the database, for an object pub has already
// forgotten).
func (r *reader) FindBatches(ctx context.Context, tp wal.TopicPartition, p PartRow, offset int64, maxBytes int64, pub *Published) (FindResult, error) {
	res := FindResult{LogStart: p.LogStart, HighWatermark: p.HW, LastStable: p.LSO, CleanedTo: p.cleanedTo, DisklessStart: p.disklessStart}
	if offset < p.LogStart || offset > p.HW {
		return res, kafkaerr.New(kafkaerr.OffsetOutOfRange, "offset %d is outside [%d, %d] in %s", offset, p.LogStart, p.HW, tp)
	}
	if offset < p.disklessStart {
		seg, ok, err := r.remoteOne(ctx, r.remoteAt, tp, p.PID, offset)
		if err != nil {
			return res, err
		}
		if ok {
			res.Remote = &seg
			return res, nil
		}
		// The read pool is behind the published state (at most
		// ApplyInterval): it has not seen the segment yet, and still has
		// the batches it released.
	}
	var rowsBuf [64]batchRow
	var used int64
	limit := 64
	rc, err := r.takeRaw(ctx)
	if err != nil {
		return res, err
	}
	defer r.putRaw(rc)
	for offset < p.HW {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		got, full, err := rc.batchRows(rowsBuf[:0], p.PID, offset, p.HW, limit, len(res.Batches) > 0, &used, maxBytes)
		if err != nil {
			return res, fmt.Errorf("coordinator: finding batches of %s: %w", tp, err)
		}
		if res.Batches, offset, err = r.locate(ctx, tp, p, offset, got, pub, res.Batches); err != nil {
			return res, err
		}
		if full || len(got) < limit {
			break
		}
		limit = min(limit*4, 1024) // more pages: got grows past rowsBuf
	}
	return res, nil
}

// errReaderClosed: the store's reads are closed (its shard's leader is
// closing).
var errReaderClosed = kafkaerr.New(kafkaerr.NotLeaderOrFollower, "coordinator: the shard's store is closed")

// takeRaw takes an idle raw connection, waiting for one.
func (r *reader) takeRaw(ctx context.Context) (*rawConn, error) {
	select {
	case rc := <-r.raw:
		return rc, nil
	case <-r.done:
		return nil, errReaderClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// putRaw gives back a raw connection takeRaw took: to the idle ones, or,
// once the reader is closed, closed (Close closed only the idle ones).
func (r *reader) putRaw(rc *rawConn) {
	r.rawMu.Lock()
	defer r.rawMu.Unlock()
	if r.closed {
		rc.Close()
		return
	}
	r.raw <- rc
}

// batchRow is a row of the batches table, as FindBatches reads it.
type batchRow struct {
	last, n, object, pos, size, ts int64
}

// batchRows appends to got the rows of pid from offset on, below the high
// watermark hw (rows past it are a pending commit's, not yet readable),
// at most limit, while they fit in maxBytes (counting used; the first
// always fits unless some are found already). full says maxBytes or hw
// stopped it.
func (rc *rawConn) batchRows(got []batchRow, pid, offset, hw int64, limit int, found bool, used *int64, maxBytes int64) ([]batchRow, bool, error) {
	rows, err := rc.batches.Query([]driver.Value{pid, offset, int64(limit)})
	if err != nil {
		return got, false, err
	}
	var vals [6]driver.Value
	for {
		err := rows.Next(vals[:])
		if err == io.EOF {
			break
		}
		if err != nil {
			rows.Close()
			return got, false, err
		}
		w := batchRow{vals[0].(int64), vals[1].(int64), vals[2].(int64), vals[3].(int64), vals[4].(int64), vals[5].(int64)}
		if w.last-w.n+1 >= hw || (found || len(got) > 0) && *used+w.size > maxBytes {
			return got, true, rows.Close()
		}
		got = append(got, w)
		*used += w.size
	}
	return got, false, rows.Close()
}

// locate appends the locations of rows got to locs (objects from the
// published cache, else the read pool; markers from the read pool), and
// returns them and the offset after the last (offset when there are
// none).
func (r *reader) locate(ctx context.Context, tp wal.TopicPartition, p PartRow, offset int64, got []batchRow, pub *Published, locs []Location) ([]Location, int64, error) {
	pub.mu.RLock()
	defer pub.mu.RUnlock()
	for _, w := range got {
		offset = w.last + 1
		if w.object == markerObject {
			pub.mu.RUnlock()
			l, err := r.markerAt(ctx, p.PID, w.last)
			pub.mu.RLock()
			if err != nil {
				return locs, offset, fmt.Errorf("coordinator: the marker at %d of %s: %w", w.last, tp, err)
			}
			locs = append(locs, l)
			continue
		}
		o, ok := pub.objects[w.object]
		if !ok {
			pub.mu.RUnlock()
			err := r.object.QueryRowContext(ctx, w.object).Scan(&o.key, &o.committedAt, &o.compacted)
			pub.mu.RLock()
			if err != nil {
				return locs, offset, fmt.Errorf("coordinator: object %d of %s: %w", w.object, tp, err)
			}
		}
		l := Location{ObjectKey: o.key, BytePos: w.pos, ByteSize: w.size, BaseOffset: w.last - w.n + 1, LastOffset: w.last,
			MaxTimestamp: w.ts + o.committedAt, LogAppendTime: -1}
		if p.lat && !o.compacted { // a compacted object's batches are stamped already
			l.LogAppendTime = o.committedAt
		}
		locs = append(locs, l)
	}
	return locs, offset, nil
}

// Special timestamps of ListOffsets, as in Kafka's ListOffsets request.
const (
	LatestTimestamp   = -1
	EarliestTimestamp = -2
	MaxTimestamp      = -3
)

// ListOffsetsResult is the answer to ListOffsets.
type ListOffsetsResult struct {
	// Offset is the offset found, or -1 when no batch has a timestamp at or
	// after the one asked.
	Offset int64
	// Timestamp is the batch's greatest timestamp for lookups by time,
	// else -1.
	Timestamp int64
	// Batch is the run of batches that holds Offset, for lookups by time:
	// the coordinator knows batches, not records, so the exact record (the
	// first with a timestamp at or after the one asked, or the one with the
	// greatest timestamp) is found by reading it.
	Batch *Location
	// Remote is set instead of Batch when a remote segment answers a
	// lookup by time (or MaxTimestamp): Offset is then its BaseOffset (or
	// the log start offset, if greater) and Timestamp its MaxTimestamp;
	// the exact record is found with the segment's .timeindex.
	Remote *state.RemoteSegment
	// LastStable is the last stable offset, for LatestTimestamp (what a
	// read_committed ListOffsets answers), else 0.
	LastStable int64
}

func (r *reader) ListOffsets(ctx context.Context, tp wal.TopicPartition, p PartRow, timestamp int64) (ListOffsetsResult, error) {
	res := ListOffsetsResult{Offset: -1, Timestamp: -1}
	var row *sql.Row
	var seg state.RemoteSegment
	var segOK bool
	var err error
	switch {
	case timestamp == MaxTimestamp:
		if seg, segOK, err = r.remoteOne(ctx, r.remoteMaxTime, tp, p.PID, p.LogStart); err != nil {
			return res, err
		}
		row = r.maxTime.QueryRowContext(ctx, p.PID, p.LogStart, p.HW) // below it: no pending commit's batch
	case timestamp >= 0:
		// Remote segments come before the batches in offset order.
		if seg, segOK, err = r.remoteOne(ctx, r.remoteByTime, tp, p.PID, p.LogStart, timestamp); err != nil {
			return res, err
		}
		if !segOK {
			row = r.byTime.QueryRowContext(ctx, p.PID, p.LogStart, p.HW, timestamp)
		}
	default:
		return res, kafkaerr.New(kafkaerr.InvalidRequest, "ListOffsets timestamp %d is not supported", timestamp)
	}
	var l Location
	batchOK := false
	if row != nil {
		l, err = scanLocation(row, p.lat)
		switch {
		case err == nil:
			batchOK = true
		case !errors.Is(err, sql.ErrNoRows):
			return res, fmt.Errorf("coordinator: listing offsets of %s: %w", tp, err)
		}
	}
	// For MaxTimestamp, a remote segment wins a tie: it comes first.
	if segOK && (!batchOK || seg.MaxTimestamp >= l.MaxTimestamp) {
		res.Offset, res.Timestamp, res.Remote = max(seg.BaseOffset, p.LogStart), seg.MaxTimestamp, &seg
		return res, nil
	}
	if batchOK {
		res.Offset, res.Timestamp, res.Batch = max(l.BaseOffset, p.LogStart), l.MaxTimestamp, &l
	}
	return res, nil
}

// TopicInfo describes a topic.
type TopicInfo struct {
	ID         uuid.UUID
	Name       string
	Partitions int32
	Config     state.TopicConfig
	// Assigned are the partitions of the topic this shard serves, in
	// increasing order; nil means all of them (see
	// CreatePartitionsRequest.Assigned).
	Assigned []int32
}

// rawConn is a read-only SQLite connection used without database/sql:
// FindBatches returns tens of rows per call, and database/sql's Scan costs
// more per row than SQLite does.
type rawConn struct {
	conn    *sqlite3.SQLiteConn
	batches driver.Stmt
}

const findBatchesQuery = "SELECT last_offset, n, object_id, pos, size, ts FROM batches WHERE pid = ? AND last_offset >= ? ORDER BY last_offset LIMIT ?"

func openRawConn(path string) (*rawConn, error) {
	c, err := (&sqlite3.SQLiteDriver{ConnectHook: connectHook}).Open(SqliteURI(path, "mode=ro&_journal_mode=WAL"))
	if err != nil {
		return nil, fmt.Errorf("coordinator: opening %s for reading: %w", path, err)
	}
	rc := &rawConn{conn: c.(*sqlite3.SQLiteConn)}
	if rc.batches, err = rc.conn.Prepare(findBatchesQuery); err != nil {
		rc.conn.Close()
		return nil, fmt.Errorf("coordinator: preparing %q: %w", findBatchesQuery, err)
	}
	return rc, nil
}

func (rc *rawConn) Close() error {
	return errors.Join(rc.batches.Close(), rc.conn.Close())
}

// DeadObjectRows returns at most limit dead objects' rows, the longest
// dead first.
func (r *reader) DeadObjectRows(ctx context.Context, limit int) ([]ObjectRowState, error) {
	rows, err := r.db.QueryContext(ctx, sqlDeadObjectRows, limit)
	if err != nil {
		return nil, fmt.Errorf("coordinator: listing dead objects: %w", err)
	}
	defer rows.Close()
	var out []ObjectRowState
	for rows.Next() {
		var o ObjectRowState
		var owners []byte
		if err := rows.Scan(&o.Key, &owners, &o.Received, &o.DeadAt); err != nil {
			return nil, err
		}
		if o.Owners, err = DecodeInt32s(owners); err != nil {
			return nil, fmt.Errorf("coordinator: object %s: %w", o.Key, err)
		}
		out = append(out, o)
	}
	return out, rows.Err()
}
