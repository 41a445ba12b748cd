package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"
	_ "github.com/mattn/go-sqlite3" // the sqlite3 driver

	"github.com/diskless-go/diskless/kbatch"
)

// A coordinator database is SQLite in the schema of package coordinator
// (coordinator/schema.go); its rows are read here with plain queries,
// read-only. The coordinator exports no reader of a database it does not
// own.

// openDB opens a coordinator database read-only. A database in WAL mode
// whose -shm file cannot be made (a read-only folder) is opened as
// immutable: what its -wal file holds is then not seen.
func openDB(ctx context.Context, path string) (*sql.DB, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	u := (&url.URL{Path: path}).EscapedPath()
	var errs []error
	for _, params := range []string{"?mode=ro", "?mode=ro&immutable=1"} {
		db, err := sql.Open("sqlite3", "file:"+u+params)
		if err == nil {
			var n int
			if err = db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE name IN ('topics', 'partitions', 'objects', 'batches')").Scan(&n); err == nil {
				if n != 4 {
					db.Close()
					return nil, errors.New("not a coordinator database: it lacks the tables topics, partitions, objects, batches")
				}
				return db, nil
			}
			db.Close()
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("opening the database: %w", errors.Join(errs...))
}

// region is one batch row of the coordinator: a run of batches of one
// partition, contiguous in a WAL object and in offsets.
type region struct {
	topic      string
	topicID    uuid.UUID
	partition  int32
	pos, size  int64
	lastOffset int64
	n          int64 // offsets in the run
}

func (r *region) end() int64        { return r.pos + r.size }
func (r *region) baseOffset() int64 { return r.lastOffset - r.n + 1 }

// regionsOf returns the batch rows of the object key (without the bucket
// prefix) in the database, in object order.
func regionsOf(ctx context.Context, path, key string) ([]region, error) {
	db, err := openDB(ctx, path)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `
		SELECT t.name, t.topic_id, p.partition, b.pos, b.size, b.last_offset, b.n
		FROM batches b
		JOIN objects o ON o.object_id = b.object_id
		JOIN partitions p ON p.pid = b.pid
		JOIN topics t ON t.topic_id = p.topic_id
		WHERE o.key = ? OR o.key LIKE ?
		ORDER BY b.pos`, key, "%/"+key)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	regions := []region{}
	for rows.Next() {
		var r region
		var id []byte
		if err := rows.Scan(&r.topic, &id, &r.partition, &r.pos, &r.size, &r.lastOffset, &r.n); err != nil {
			return nil, err
		}
		r.topicID, _ = uuid.FromBytes(id)
		regions = append(regions, r)
	}
	return regions, rows.Err()
}

// compactedColumn is what a query of objects reads for objects.compacted
// (1: the object was written by a compaction, its batches replacing a
// partition's range at their offsets): the column, or 0 in a database
// from before it.
func compactedColumn(ctx context.Context, db *sql.DB) string {
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM pragma_table_info('objects') WHERE name = 'compacted'").Scan(&n); err != nil || n == 0 {
		return "0"
	}
	return "compacted"
}

// objectCompacted reports whether the database names the object key as
// written by a compaction.
func objectCompacted(ctx context.Context, path, key string) (bool, error) {
	db, err := openDB(ctx, path)
	if err != nil {
		return false, err
	}
	defer db.Close()
	var c int
	err = db.QueryRowContext(ctx, "SELECT "+compactedColumn(ctx, db)+" FROM objects WHERE key = ? OR key LIKE ?", key, "%/"+key).Scan(&c)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return c == 1, err
}

// dumpDB prints a summary of a coordinator database.
func (d *dumper) dumpDB(ctx context.Context, path string) error {
	db, err := openDB(ctx, path)
	if err != nil {
		return err
	}
	defer db.Close()
	fmt.Fprintf(d.out, "coordinator database %s\n", path)
	q := &querier{ctx: ctx, db: db}

	var meta []string
	q.each("SELECT k, v FROM meta ORDER BY k", func(s scanner) error {
		var k string
		var v int64
		err := s.Scan(&k, &v)
		meta = append(meta, fmt.Sprintf("%s=%d", k, v))
		return err
	})
	fmt.Fprintf(d.out, "meta: %s\n", strings.Join(meta, " "))

	fmt.Fprintf(d.out, "topics: %d\n", q.count("SELECT count(*) FROM topics"))
	q.each(`SELECT name, topic_id, partitions, retention_ms, retention_bytes, flags, max_message_bytes, segment_bytes, segment_ms,
			(SELECT count(*) FROM partitions p WHERE p.topic_id = t.topic_id)
		FROM topics t ORDER BY name`, func(s scanner) error {
		var name string
		var id []byte
		var parts, here, flags int32
		var retMs, retBytes, maxMsg, segBytes, segMs int64
		if err := s.Scan(&name, &id, &parts, &retMs, &retBytes, &flags, &maxMsg, &segBytes, &segMs, &here); err != nil {
			return err
		}
		tid, _ := uuid.FromBytes(id)
		policy := []string{}
		if flags&1 != 0 {
			policy = append(policy, "compact")
		}
		if flags&2 != 0 {
			policy = append(policy, "delete")
		}
		tt := kbatch.CreateTime
		if flags&4 != 0 {
			tt = kbatch.LogAppendTime
		}
		fmt.Fprintf(d.out, "  %s: id %s, %d partitions (%d in this shard), cleanup.policy %s, retention.ms %d, retention.bytes %d, message.timestamp.type %s, max.message.bytes %d, segment.bytes %d, segment.ms %d\n",
			name, tid, parts, here, strings.Join(policy, ","), retMs, retBytes, tt, maxMsg, segBytes, segMs)
		return nil
	})

	fmt.Fprintf(d.out, "partitions: %d\n", q.count("SELECT count(*) FROM partitions"))
	q.each(`SELECT COALESCE(t.name, hex(p.topic_id)), p.partition, p.log_start, p.high_watermark, p.bytes, p.diskless_start, p.remote_bytes,
			(SELECT count(*) FROM batches b WHERE b.pid = p.pid),
			(SELECT count(*) FROM remote_segments r WHERE r.pid = p.pid)
		FROM partitions p LEFT JOIN topics t ON t.topic_id = p.topic_id ORDER BY 1, 2`, func(s scanner) error {
		var name string
		var part int32
		var start, hw, bytes, disklessStart, remoteBytes, rows, remote int64
		if err := s.Scan(&name, &part, &start, &hw, &bytes, &disklessStart, &remoteBytes, &rows, &remote); err != nil {
			return err
		}
		fmt.Fprintf(d.out, "  %s-%d: log start offset %d, high watermark %d, %d records, %d bytes in %d batch rows, diskless start offset %d, %d remote segments (%d bytes)\n",
			name, part, start, hw, hw-start, bytes, rows, disklessStart, remote, remoteBytes)
		return nil
	})

	live := q.count("SELECT count(*) FROM objects WHERE dead_at IS NULL")
	dead := q.count("SELECT count(*) FROM objects WHERE dead_at IS NOT NULL")
	compacted := compactedColumn(ctx, db)
	fmt.Fprintf(d.out, "objects: %d (%d live, %d dead, waiting for deletion; %d written by compaction), %d bytes\n", live+dead, live, dead,
		q.count("SELECT count(*) FROM objects WHERE "+compacted+" = 1"), q.count("SELECT COALESCE(sum(size), 0) FROM objects"))
	q.each("SELECT key, size, uploader, committed_at, live_rows, dead_at, hex(owners), "+compacted+" FROM objects ORDER BY object_id", func(s scanner) error {
		var key, owners sql.NullString
		var size, uploader, committed, rows, comp int64
		var deadAt sql.NullInt64
		if err := s.Scan(&key, &size, &uploader, &committed, &rows, &deadAt, &owners, &comp); err != nil {
			return err
		}
		line := fmt.Sprintf("  %s: %d bytes, uploader %d, committed %s, %d batch rows", key.String, size, uploader, ms(committed), rows)
		if comp == 1 {
			line += ", compacted"
		}
		if deadAt.Valid {
			line += ", dead since " + ms(deadAt.Int64)
		}
		if owners.Valid && owners.String != "" {
			line += ", owners (encoded) " + owners.String
		}
		fmt.Fprintln(d.out, line)
		return nil
	})

	fmt.Fprintf(d.out, "producers: %d\n", q.count("SELECT count(*) FROM producers"))
	q.each(`SELECT COALESCE(t.name, '?'), p.partition, pr.producer_id, pr.epoch
		FROM producers pr JOIN partitions p ON p.pid = pr.pid LEFT JOIN topics t ON t.topic_id = p.topic_id ORDER BY 1, 2, 3`, func(s scanner) error {
		var name string
		var part int32
		var id int64
		var epoch int16
		if err := s.Scan(&name, &part, &id, &epoch); err != nil {
			return err
		}
		fmt.Fprintf(d.out, "  %s-%d: producer id %d, epoch %d\n", name, part, id, epoch)
		return nil
	})
	fmt.Fprintf(d.out, "remote segments: %d\n", q.count("SELECT count(*) FROM remote_segments"))
	q.each(`SELECT COALESCE(t.name, '?'), p.partition, r.base_offset, r.end_offset, r.size, r.key
		FROM remote_segments r JOIN partitions p ON p.pid = r.pid LEFT JOIN topics t ON t.topic_id = p.topic_id ORDER BY 1, 2, 3`, func(s scanner) error {
		var name, key string
		var part int32
		var base, end, size int64
		if err := s.Scan(&name, &part, &base, &end, &size, &key); err != nil {
			return err
		}
		fmt.Fprintf(d.out, "  %s-%d: offsets %d-%d, %d bytes, %s\n", name, part, base, end, size, key)
		return nil
	})
	return q.err
}

// ms formats a time in Unix milliseconds.
func ms(t int64) string { return time.UnixMilli(t).UTC().Format(time.RFC3339Nano) }

// scanner is what a row offers.
type scanner interface{ Scan(...any) error }

// querier runs queries with a sticky error: the first failure stops the
// rest, and is err.
type querier struct {
	ctx context.Context
	db  *sql.DB
	err error
}

// count runs a query of one integer.
func (q *querier) count(query string) int64 {
	var n int64
	if q.err == nil {
		q.err = q.db.QueryRowContext(q.ctx, query).Scan(&n)
	}
	return n
}

// each calls fn for every row of query.
func (q *querier) each(query string, fn func(scanner) error) {
	if q.err != nil {
		return
	}
	rows, err := q.db.QueryContext(q.ctx, query)
	if err != nil {
		q.err = err
		return
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			q.err = err
			return
		}
	}
	q.err = rows.Err()
}
