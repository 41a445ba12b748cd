package coordinator

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal"
)

// Compaction's replacement of a range (the coordinator's part of compacting
// diskless topics; the compactor is replica/compact.go).
//
// A compactor reads a partition's batches from From to To (FindBatches),
// keeps what Kafka's cleaner keeps, writes the result as a new WAL-format
// object and asks the partition's shard to replace the range with it:
// one record, compactRecord, that deletes every batch row of the range
// (their objects lose them, and die when they have none left: the
// existing deletion grace applies) and inserts the rows of the new
// object, at the offsets the batches had (a compacted log has holes, as
// in Kafka). A reader sees the old rows or the new ones, never a mix.
//
// The replacement is accepted only if the range is still what the
// compactor read: the request carries RangeFingerprint of the locations
// it read, and the shard's leader compares it with the committed rows
// (and refuses while a trim, an offload or another replacement of the
// partition is on its way to the log). A compactor that lost the race
// gets ErrRangeChanged and tries again later; its object is then an
// orphan the collector deletes, as is one whose commit never came (a
// crash between upload and commit).

// ErrRangeChanged is Compact's answer when the range is no longer what
// the compactor read.
var ErrRangeChanged = errors.New("coordinator: the range changed since it was read")

// CompactedRun is a run of batches of the compacted object, contiguous in
// it and in offsets.
type CompactedRun struct {
	BaseOffset, LastOffset int64
	BytePos, ByteSize      int64
	MaxTimestamp           int64
}

// CompactRequest replaces a partition's batches from From to To (a run's
// base offset and a run's last offset) with the runs of a new object.
type CompactRequest struct {
	TopicPartition wal.TopicPartition
	From, To       int64
	// Fingerprint is RangeFingerprint of the locations the compactor read
	// (FindBatches from From, up to To).
	Fingerprint uint64
	// ObjectKey, Size and Uploader name the new object; Runs are its
	// batches, in offset order, within [From, To]. No runs empties the
	// range (every record of it was removed).
	ObjectKey string
	Size      int64
	Uploader  int32
	Runs      []CompactedRun
}

// RangeFingerprint is the fingerprint of a range's batch rows, as the
// locations FindBatches returned for them: the FNV-1a hash of each one's
// last offset, offset count, object key, byte position and size.
func RangeFingerprint(locs []Location) uint64 {
	h := fnv.New64a()
	var b []byte
	for _, l := range locs {
		b = appendRowPrint(b[:0], l.LastOffset, l.LastOffset-l.BaseOffset+1, l.ObjectKey, l.BytePos, l.ByteSize)
		h.Write(b)
	}
	return h.Sum64()
}

func appendRowPrint(b []byte, last, n int64, key string, pos, size int64) []byte {
	b = binary.AppendVarint(b, last)
	b = binary.AppendVarint(b, n)
	b = appendString(b, key)
	b = binary.AppendVarint(b, pos)
	return binary.AppendVarint(b, size)
}

// compactRecord replaces the batch rows of PID from From to To with Rows
// of a new object (ObjectID, Key, Size, Uploader), committed at Time.
type compactRecord struct {
	PID        int64
	From, To   int64
	ObjectID   int64
	Key        string
	Size       int64
	Uploader   int32
	CommitTime int64
	Rows       []commitRow
}

func (compactRecord) kind() recordType { return recCompact }

func (r compactRecord) appendTo(b []byte) []byte {
	b = binary.AppendVarint(b, r.PID)
	b = binary.AppendVarint(b, r.From)
	b = binary.AppendVarint(b, r.To-r.From)
	b = binary.AppendVarint(b, r.ObjectID)
	b = appendString(b, r.Key)
	b = binary.AppendVarint(b, r.Size)
	b = binary.AppendVarint(b, int64(r.Uploader))
	b = binary.AppendVarint(b, r.CommitTime)
	b = binary.AppendUvarint(b, uint64(len(r.Rows)))
	for _, w := range r.Rows {
		b = binary.AppendVarint(b, w.BaseOffset-r.From)
		b = binary.AppendVarint(b, w.LastOffset-w.BaseOffset)
		b = binary.AppendVarint(b, w.BytePos)
		b = binary.AppendVarint(b, w.ByteSize)
		b = binary.AppendVarint(b, w.MaxTimestamp-r.CommitTime)
	}
	return b
}

func (d *decoder) compact() compactRecord {
	r := compactRecord{PID: d.varint(), From: d.varint()}
	r.To = r.From + d.varint()
	r.ObjectID, r.Key, r.Size, r.Uploader, r.CommitTime = d.varint(), d.string(), d.varint(), d.int32(), d.varint()
	if n := d.count(5); n > 0 {
		r.Rows = make([]commitRow, n)
		for i := range r.Rows {
			w := &r.Rows[i]
			w.PID = r.PID
			w.BaseOffset = r.From + d.varint()
			w.LastOffset = w.BaseOffset + d.varint()
			w.BytePos, w.ByteSize = d.varint(), d.varint()
			w.MaxTimestamp = r.CommitTime + d.varint()
		}
	}
	if d.err == nil {
		if err := checkRuns(r.From, r.To, r.Size, r.Rows); err != nil {
			d.fail("%v", err)
		}
	}
	return r
}

// checkRuns checks that rows are in offset order, within [from, to], not
// overlapping, and within an object of size bytes.
func checkRuns(from, to, size int64, rows []commitRow) error {
	if from < 0 || to < from {
		return fmt.Errorf("a range from %d to %d", from, to)
	}
	next := from
	for _, w := range rows {
		if w.BaseOffset < next || w.LastOffset < w.BaseOffset || w.LastOffset > to {
			return fmt.Errorf("a run of offsets %d to %d after %d, in a range to %d", w.BaseOffset, w.LastOffset, next, to)
		}
		if w.BytePos < 0 || w.ByteSize <= 0 || w.BytePos+w.ByteSize > size {
			return fmt.Errorf("a run of bytes %d+%d in an object of %d", w.BytePos, w.ByteSize, size)
		}
		next = w.LastOffset + 1
	}
	return nil
}

// --- deciding -------------------------------------------------------------

// compactOp decides a CompactRequest.
type compactOp struct {
	baseOp
	req CompactRequest
	pid int64
}

func (o *compactOp) need(n *needs) {
	n.keys = append(n.keys, o.req.ObjectKey)
	n.ranges = append(n.ranges, o.req)
}

func (o *compactOp) check(g *group) {
	r := &o.req
	p := g.spec.partition(r.TopicPartition)
	if p == nil {
		o.finish(kafkaerr.New(kafkaerr.UnknownTopicOrPartition, "this coordinator has no partition %s", r.TopicPartition))
		return
	}
	rows := make([]commitRow, len(r.Runs))
	for i, run := range r.Runs {
		rows[i] = commitRow{PID: p.PID, BaseOffset: run.BaseOffset, LastOffset: run.LastOffset, BytePos: run.BytePos, ByteSize: run.ByteSize, MaxTimestamp: run.MaxTimestamp}
	}
	if err := checkRuns(r.From, r.To, r.Size, rows); err != nil {
		o.finish(kafkaerr.New(kafkaerr.InvalidRequest, "compacting %s: %v", r.TopicPartition, err))
		return
	}
	if known, err := g.objectKnown(r.ObjectKey); err != nil || known {
		if err == nil {
			err = kafkaerr.New(kafkaerr.InvalidRequest, "object %s is already committed", r.ObjectKey)
		}
		o.finish(err)
		return
	}
	if err := g.checkDeadline(r.ObjectKey); err != nil {
		o.finish(err)
		return
	}
	// The range must be what the compactor read: below the high
	// watermark, above the log start and the tiered data, with nothing
	// on its way to the log that changes it, and its committed rows as
	// fingerprinted.
	root := g.spec
	for root.parent != nil {
		root = root.parent
	}
	committed := root.part(p.PID)
	switch {
	case r.To >= p.HW || r.From < p.LogStart || r.From < p.DisklessStart:
		o.finish(fmt.Errorf("%w: %s holds batches from %d (diskless from %d) to %d, not %d to %d", ErrRangeChanged, r.TopicPartition, p.LogStart, p.DisklessStart, p.HW-1, r.From, r.To))
		return
	case committed == nil || committed.LogStart != p.LogStart || committed.DisklessStart != p.DisklessStart || committed.Compactions != p.Compactions:
		o.finish(fmt.Errorf("%w: %s has a trim, an offload or a compaction on its way to the log", ErrRangeChanged, r.TopicPartition))
		return
	}
	print, ok, err := g.facts.rangePrint(p.PID, r.From, r.To)
	switch {
	case err != nil:
		o.finish(err)
		return
	case !ok || print != r.Fingerprint:
		o.finish(fmt.Errorf("%w: the batches of %s from %d to %d are not those read", ErrRangeChanged, r.TopicPartition, r.From, r.To))
		return
	}
	o.pid = p.PID
	g.add(compactRecord{PID: p.PID, From: r.From, To: r.To, ObjectID: g.spec.nextObjectID, Key: r.ObjectKey, Size: r.Size,
		Uploader: r.Uploader, CommitTime: g.now, Rows: rows})
}

// applyCompact applies a compactRecord to the view.
func (v *view) applyCompact(r compactRecord) {
	v.nextObjectID = max(v.nextObjectID, r.ObjectID+1)
	if p := v.mutPart(r.PID); p != nil {
		p.Compactions++
		p.CleanedTo = max(p.CleanedTo, r.To+1)
	}
	if v.parent != nil {
		v.pendingKeys[r.Key] = struct{}{}
	}
}

// --- the store --------------------------------------------------------------

const (
	sqlRangeRows = `SELECT b.last_offset, b.n, COALESCE(o.key, ''), b.pos, b.size FROM batches b LEFT JOIN objects o ON o.object_id = b.object_id
WHERE b.pid = ? AND b.last_offset BETWEEN ? AND ? ORDER BY b.last_offset`
	sqlBatchesIn       = "SELECT object_id, COUNT(*) FROM batches WHERE pid = ? AND last_offset BETWEEN ? AND ? GROUP BY object_id"
	sqlBytesIn         = "SELECT COALESCE(SUM(size), 0) FROM batches WHERE pid = ? AND last_offset BETWEEN ? AND ?"
	sqlDeleteBatchesIn = "DELETE FROM batches WHERE pid = ? AND last_offset BETWEEN ? AND ?"
	sqlDeleteMarkersIn = "DELETE FROM txn_markers WHERE pid = ? AND offset BETWEEN ? AND ?"
	// The objects a compaction wrote are marked (objects.compacted): a
	// LogAppendTime topic's batches in them are stamped already (reads
	// leave their times), and examples/dump shows them.
	sqlMarkCompacted = "UPDATE objects SET compacted = 1 WHERE object_id = ?"
)

// rangePrints reads the fingerprints of the ranges of compactions
// (gather).
func (s *store) rangePrints(ctx context.Context, root *view, reqs []CompactRequest) (map[[3]int64]uint64, error) {
	out := map[[3]int64]uint64{}
	for _, r := range reqs {
		p := root.partition(r.TopicPartition)
		if p == nil {
			continue
		}
		st, err := s.stmt(ctx, sqlRangeRows)
		if err != nil {
			return nil, err
		}
		rows, err := st.QueryContext(ctx, p.PID, r.From, r.To)
		if err != nil {
			return nil, fmt.Errorf("coordinator: reading a range: %w", err)
		}
		h := fnv.New64a()
		var b []byte
		first := true
		ok := true
		for rows.Next() {
			var last, n, pos, size int64
			var key string
			if err := rows.Scan(&last, &n, &key, &pos, &size); err != nil {
				rows.Close()
				return nil, err
			}
			if first && last-n+1 < r.From {
				ok = false // a run straddles From
			}
			first = false
			b = appendRowPrint(b[:0], last, n, key, pos, size)
			h.Write(b)
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
		if ok {
			out[[3]int64{p.PID, r.From, r.To}] = h.Sum64()
		}
	}
	return out, nil
}

// rangePrint returns the fingerprint of a range's committed rows, ok
// false when it has none that fits (a run straddles its start).
func (f *facts) rangePrint(pid, from, to int64) (uint64, bool, error) {
	if f == nil {
		return 0, false, nil
	}
	v, ok := f.prints[[3]int64{pid, from, to}]
	return v, ok, f.err
}

// compactRows writes a compactRecord: the range's rows go (their objects
// lose them, and die at r.CommitTime when left with none; its markers'
// rows with them: the new object holds them as batches), the new
// object's row and its rows come.
func (s *store) compactRows(ctx context.Context, r compactRecord) error {
	var freed int64
	st, err := s.stmt(ctx, sqlBytesIn)
	if err != nil {
		return err
	}
	if err := st.QueryRowContext(ctx, r.PID, r.From, r.To).Scan(&freed); err != nil {
		return fmt.Errorf("coordinator: compacting: %w", err)
	}
	if err := s.releaseRows(ctx, sqlBatchesIn, r.CommitTime, r.PID, r.From, r.To); err != nil {
		return err
	}
	for _, q := range []string{sqlDeleteBatchesIn, sqlDeleteMarkersIn} {
		if _, err := s.exec(ctx, q, r.PID, r.From, r.To); err != nil {
			return err
		}
	}
	if b := s.bytes[r.PID]; b != nil {
		b.batches -= freed
	}
	objects, rows := s.commitRows(commitFileRecord{ObjectID: r.ObjectID, Key: r.Key, Size: r.Size, Uploader: r.Uploader, CommitTime: r.CommitTime, Rows: r.Rows}, nil, nil)
	if err := s.bulk(ctx, sqlInsertObjectsHead, 8, "", objects); err != nil {
		return err
	}
	if _, err := s.exec(ctx, sqlMarkCompacted, r.ObjectID); err != nil {
		return err
	}
	return s.bulk(ctx, sqlInsertBatchesHead, 7, "", rows)
}

// --- the API ----------------------------------------------------------------

// Compact replaces a range of a partition of this shard (see
// CompactRequest); ErrRangeChanged when it is no longer what was read.
func (c *leader) Compact(ctx context.Context, req CompactRequest) error {
	o := &compactOp{baseOp: newBaseOp(ctx), req: req}
	return c.submit(ctx, o, o.done)
}

// LeadsPartition reports whether this process leads the shard that
// serves tp: there, and only there, Compact is served (exactly one
// compactor per partition at a time: the shard's leader's).
func (s *Coordinator) LeadsPartition(tp wal.TopicPartition) bool {
	i, err := s.ShardOf(tp)
	return err == nil && s.Leads(i)
}

// Compact replaces a range of a partition's batches with the compacted
// runs of a new object, at the same offsets, atomically: readers see
// the old batches or the new ones. It fails with ErrRangeChanged when the
// range is no longer what the compactor read (RangeFingerprint), and with
// Kafka's codes for a bad request (INVALID_REQUEST) or an unknown
// partition.
func (s *Coordinator) Compact(ctx context.Context, req CompactRequest) error {
	c, err := s.shardFor(ctx, req.TopicPartition)
	if err != nil {
		return err
	}
	l, ok := c.(*leader)
	if !ok {
		return kafkaerr.New(kafkaerr.NotLeaderOrFollower, "the shard of %s is led by another broker: compact there", req.TopicPartition)
	}
	return l.Compact(ctx, req)
}
