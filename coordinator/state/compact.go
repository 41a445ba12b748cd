package state

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal/walmeta"
)

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
	TopicPartition walmeta.TopicPartition
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

// CompactRecord replaces the batch rows of PID from From to To with Rows
// of a new object (ObjectID, Key, Size, Uploader), committed at Time.
type CompactRecord struct {
	PID        int64
	From, To   int64
	ObjectID   int64
	Key        string
	Size       int64
	Uploader   int32
	CommitTime int64
	Rows       []CommitRow
}

func (CompactRecord) Kind() recordType { return recCompact }

func (r CompactRecord) AppendTo(b []byte) []byte {
	b = binary.AppendVarint(b, r.PID)
	b = binary.AppendVarint(b, r.From)
	b = binary.AppendVarint(b, r.To-r.From)
	b = binary.AppendVarint(b, r.ObjectID)
	b = AppendString(b, r.Key)
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

func (d *Decoder) compact() CompactRecord {
	r := CompactRecord{PID: d.Varint(), From: d.Varint()}
	r.To = r.From + d.Varint()
	r.ObjectID, r.Key, r.Size, r.Uploader, r.CommitTime = d.Varint(), d.string(), d.Varint(), d.Int32(), d.Varint()
	if n := d.Count(5); n > 0 {
		r.Rows = make([]CommitRow, n)
		for i := range r.Rows {
			w := &r.Rows[i]
			w.PID = r.PID
			w.BaseOffset = r.From + d.Varint()
			w.LastOffset = w.BaseOffset + d.Varint()
			w.BytePos, w.ByteSize = d.Varint(), d.Varint()
			w.MaxTimestamp = r.CommitTime + d.Varint()
		}
	}
	if d.Err == nil {
		if err := checkRuns(r.From, r.To, r.Size, r.Rows); err != nil {
			d.Fail("%v", err)
		}
	}
	return r
}

// checkRuns checks that rows are in offset order, within [from, to], not
// overlapping, and within an object of size bytes.
func checkRuns(from, to, size int64, rows []CommitRow) error {
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

// CompactOp decides a CompactRequest.
type CompactOp struct {
	BaseOp
	Req CompactRequest
	pid int64
}

func (o *CompactOp) Need(n *Needs) {
	n.Keys = append(n.Keys, o.Req.ObjectKey)
	n.Ranges = append(n.Ranges, o.Req)
}

func (o *CompactOp) Check(g *Group) {
	r := &o.Req
	p := g.Spec.Partition(r.TopicPartition)
	if p == nil {
		o.Finish(kafkaerr.New(kafkaerr.UnknownTopicOrPartition, "this coordinator has no partition %s", r.TopicPartition))
		return
	}
	rows := make([]CommitRow, len(r.Runs))
	for i, run := range r.Runs {
		rows[i] = CommitRow{PID: p.PID, BaseOffset: run.BaseOffset, LastOffset: run.LastOffset, BytePos: run.BytePos, ByteSize: run.ByteSize, MaxTimestamp: run.MaxTimestamp}
	}
	if err := checkRuns(r.From, r.To, r.Size, rows); err != nil {
		o.Finish(kafkaerr.New(kafkaerr.InvalidRequest, "compacting %s: %v", r.TopicPartition, err))
		return
	}
	if known, err := g.objectKnown(r.ObjectKey); err != nil || known {
		if err == nil {
			err = kafkaerr.New(kafkaerr.InvalidRequest, "object %s is already committed", r.ObjectKey)
		}
		o.Finish(err)
		return
	}
	if err := g.checkDeadline(r.ObjectKey); err != nil {
		o.Finish(err)
		return
	}
	// The range must be what the compactor read: below the high
	// watermark, above the log start and the tiered data, with nothing
	// on its way to the log that changes it, and its committed rows as
	// fingerprinted.
	root := g.Spec
	for root.Parent != nil {
		root = root.Parent
	}
	committed := root.Part(p.PID)
	switch {
	case r.To >= p.Visible() || r.From < p.LogStart || r.From < p.DisklessStart:
		o.Finish(fmt.Errorf("%w: %s holds batches from %d (diskless from %d) to %d, not %d to %d", ErrRangeChanged, r.TopicPartition, p.LogStart, p.DisklessStart, p.HW-1, r.From, r.To))
		return
	case committed == nil || committed.LogStart != p.LogStart || committed.DisklessStart != p.DisklessStart || committed.Compactions != p.Compactions:
		o.Finish(fmt.Errorf("%w: %s has a trim, an offload or a compaction on its way to the log", ErrRangeChanged, r.TopicPartition))
		return
	}
	print, ok, err := g.Facts.rangePrint(p.PID, r.From, r.To)
	switch {
	case err != nil:
		o.Finish(err)
		return
	case !ok || print != r.Fingerprint:
		o.Finish(fmt.Errorf("%w: the batches of %s from %d to %d are not those read", ErrRangeChanged, r.TopicPartition, r.From, r.To))
		return
	}
	o.pid = p.PID
	g.add(CompactRecord{PID: p.PID, From: r.From, To: r.To, ObjectID: g.Spec.NextObjectID, Key: r.ObjectKey, Size: r.Size,
		Uploader: r.Uploader, CommitTime: g.Now, Rows: rows})
}

// applyCompact applies a compactRecord to the view.
func (v *View) applyCompact(r CompactRecord) {
	v.NextObjectID = max(v.NextObjectID, r.ObjectID+1)
	if p := v.mutPart(r.PID); p != nil {
		p.Compactions++
		p.CleanedTo = max(p.CleanedTo, r.To+1)
	}
	if v.Parent != nil {
		v.PendingKeys[r.Key] = struct{}{}
	}
}

// rangePrint returns the fingerprint of a range's committed rows, ok
// false when it has none that fits (a run straddles its start).
func (f *Facts) rangePrint(pid, from, to int64) (uint64, bool, error) {
	if f == nil {
		return 0, false, nil
	}
	v, ok := f.Prints[[3]int64{pid, from, to}]
	return v, ok, f.Err
}
