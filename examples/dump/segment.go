package main

import (
	"context"
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"

	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/segment"
)

// The sizes of index entries, Kafka's (docs/formats.md, "Offset index", "Time index"): an offset
// index entry is a relative offset and a position (int32 each), a time
// index entry a timestamp (int64) and a relative offset (int32). Each
// entry is decoded by package segment's lookups, run over that one entry.
const (
	offsetEntrySize = 8
	timeEntrySize   = 12
)

// segmentBase returns the base offset a segment file's name gives
// (00000000000000000042.log, or 00000000000000000042-<segment ID>.log in
// the bucket), or -1.
func segmentBase(name string) int64 {
	base := path.Base(strings.ReplaceAll(name, "\\", "/"))
	if i := strings.IndexAny(base, ".-"); i > 0 {
		base = base[:i]
	}
	n, err := strconv.ParseInt(base, 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// logBatch is what the index checks need of a batch of the .log.
type logBatch struct {
	base, last, maxTs int64
}

// segmentLog is a dumped .log, for checking its indexes.
type segmentLog struct {
	base       int64
	byPosition map[int64]logBatch
	byLast     map[int64]logBatch
	last       int64
}

// dumpSegment prints a .log as kafka-dump-log does, then its .index and
// .timeindex when they are beside it.
func (d *dumper) dumpSegment(ctx context.Context, name string, data []byte) error {
	base := segmentBase(name)
	fmt.Fprintf(d.out, "Dumping %s\n", name)
	if base >= 0 {
		fmt.Fprintf(d.out, "Log starting offset: %d\n", base)
	}
	batches, bad, records := 0, 0, 0
	first, last := int64(-1), int64(-1)
	it := kbatch.NewBatchIter(data)
	for it.Next() {
		b := it.Batch()
		pos := int64(it.Pos())
		batches++
		records += int(b.NumRecords())
		if !d.printBatch("", pos, b, b.BaseOffset()) {
			bad++
		}
		if first < 0 {
			first = b.BaseOffset()
		}
		if b.BaseOffset() <= last || (base >= 0 && b.BaseOffset() < base) {
			fmt.Fprintf(d.out, "  offsets out of order: batch at position %d starts at %d, after %d\n", pos, b.BaseOffset(), last)
			d.problem()
		}
		last = max(last, b.LastOffset())
	}
	end := int64(it.Pos())
	switch {
	case it.Err() != nil:
		fmt.Fprintf(d.out, "at position %d: %v\n", end, it.Err())
		d.problem()
	case it.Partial():
		fmt.Fprintf(d.out, "at position %d: a batch cut short (%d bytes): a crash mid-append, which recovery truncates\n", end, int64(len(data))-end)
		d.problem()
	}
	summary := fmt.Sprintf("batches: %d, records: %d", batches, records)
	if batches > 0 {
		summary += fmt.Sprintf(", offsets %d-%d", first, last)
	}
	if bad > 0 {
		summary += fmt.Sprintf(", %d do not check", bad)
		d.problem()
	} else {
		summary += ", every CRC checks"
	}
	fmt.Fprintln(d.out, summary)
	seg := newSegmentLog(base, data)
	stem := strings.TrimSuffix(name, ".log")
	for _, sib := range []struct {
		suffix string
		dump   func(context.Context, string, []byte, *segmentLog) error
	}{{".index", d.dumpIndex}, {".timeindex", d.dumpTimeIndex}} {
		if stem == name || !d.src.Exists(ctx, stem+sib.suffix) {
			continue
		}
		idx, err := d.src.Read(ctx, stem+sib.suffix)
		if err != nil {
			return err
		}
		fmt.Fprintln(d.out)
		if err := sib.dump(ctx, stem+sib.suffix, idx, seg); err != nil {
			return err
		}
	}
	return nil
}

// newSegmentLog indexes the batches of a .log for the index checks.
func newSegmentLog(base int64, data []byte) *segmentLog {
	seg := &segmentLog{base: base, byPosition: map[int64]logBatch{}, byLast: map[int64]logBatch{}, last: -1}
	it := kbatch.NewBatchIter(data)
	for it.Next() {
		b := it.Batch()
		lb := logBatch{base: b.BaseOffset(), last: b.LastOffset(), maxTs: b.MaxTimestamp()}
		seg.byPosition[int64(it.Pos())], seg.byLast[lb.last] = lb, lb
		seg.last = max(seg.last, lb.last)
		if seg.base < 0 {
			seg.base = lb.base
		}
	}
	return seg
}

// logOf returns the .log beside an index, indexed for the checks, or nil.
func (d *dumper) logOf(ctx context.Context, name string) *segmentLog {
	i := strings.LastIndexByte(name, '.')
	if i < 0 || !d.src.Exists(ctx, name[:i]+".log") {
		return nil
	}
	data, err := d.src.Read(ctx, name[:i]+".log")
	if err != nil {
		return nil
	}
	return newSegmentLog(segmentBase(name), data)
}

// indexHeader prints an index's first lines and returns its segment's
// base offset and its .log (nil when there is none to check against).
func (d *dumper) indexHeader(ctx context.Context, name string, seg *segmentLog) (int64, *segmentLog) {
	if seg == nil {
		seg = d.logOf(ctx, name)
	}
	base := segmentBase(name)
	if base < 0 && seg != nil {
		base = seg.base
	}
	fmt.Fprintf(d.out, "Dumping %s\n", name)
	if base < 0 {
		fmt.Fprintln(d.out, "base offset: unknown (not in the name, no .log beside it): offsets are relative")
		base = 0
	}
	if seg == nil {
		fmt.Fprintln(d.out, "no .log beside it: entries not checked")
	}
	return base, seg
}

// dumpIndex prints an offset index, checking each entry against the .log
// (given, or read from beside the index): entries ascend, and each points
// at the start of a batch whose offsets reach the entry's.
func (d *dumper) dumpIndex(ctx context.Context, name string, data []byte, seg *segmentLog) error {
	base, seg := d.indexHeader(ctx, name, seg)
	entries, bad := 0, 0
	prevOff, prevPos := int64(-1), int64(-1)
	for i := 0; i+offsetEntrySize <= len(data); i += offsetEntrySize {
		off, pos := segment.LookupOffsetIndex(data[i:i+offsetEntrySize], base, math.MaxInt64)
		if i > 0 && off == base && pos == 0 {
			fmt.Fprintf(d.out, "(%d bytes of preallocated, unused entries follow)\n", len(data)-i)
			break
		}
		entries++
		check := ""
		switch b, ok := seg.at(pos); {
		case off <= prevOff || pos <= prevPos:
			check = fmt.Sprintf(" MISMATCH: does not ascend after offset %d position %d", prevOff, prevPos)
		case seg == nil:
		case !ok:
			check = " MISMATCH: no batch starts at that position"
		case off < b.last || off > seg.last:
			check = fmt.Sprintf(" MISMATCH: the batch there holds offsets %d-%d", b.base, b.last)
		}
		if check != "" {
			bad++
		}
		fmt.Fprintf(d.out, "offset: %d position: %d%s\n", off, pos, check)
		prevOff, prevPos = off, pos
	}
	return d.indexSummary(len(data)%offsetEntrySize, offsetEntrySize, entries, bad)
}

// dumpTimeIndex prints a time index, checking each entry against the
// .log: timestamps ascend, and each entry's offset is the last offset of a
// batch whose max timestamp is the entry's.
func (d *dumper) dumpTimeIndex(ctx context.Context, name string, data []byte, seg *segmentLog) error {
	base, seg := d.indexHeader(ctx, name, seg)
	entries, bad := 0, 0
	prevTs := int64(math.MinInt64)
	for i := 0; i+timeEntrySize <= len(data); i += timeEntrySize {
		ts, off, _ := segment.LookupTimeIndex(data[i:i+timeEntrySize], base, math.MaxInt64)
		if i > 0 && ts == 0 && off == base {
			fmt.Fprintf(d.out, "(%d bytes of preallocated, unused entries follow)\n", len(data)-i)
			break
		}
		entries++
		check := ""
		switch b, ok := seg.withLast(off); {
		case ts < prevTs:
			check = fmt.Sprintf(" MISMATCH: timestamp goes back from %d", prevTs)
		case seg == nil:
		case !ok:
			check = " MISMATCH: no batch ends at that offset"
		case b.maxTs != ts:
			check = fmt.Sprintf(" MISMATCH: the batch's max timestamp is %d", b.maxTs)
		}
		if check != "" {
			bad++
		}
		fmt.Fprintf(d.out, "timestamp: %d offset: %d%s\n", ts, off, check)
		prevTs = ts
	}
	return d.indexSummary(len(data)%timeEntrySize, timeEntrySize, entries, bad)
}

func (d *dumper) indexSummary(rest, size, entries, bad int) error {
	line := fmt.Sprintf("entries: %d", entries)
	if rest != 0 {
		line += fmt.Sprintf(", %d bytes after the last whole %d-byte entry", rest, size)
		d.problem()
	}
	if bad > 0 {
		line += fmt.Sprintf(", %d do not match the .log", bad)
		d.problem()
	}
	fmt.Fprintln(d.out, line)
	return nil
}

// at returns the batch starting at position pos.
func (s *segmentLog) at(pos int64) (logBatch, bool) {
	if s == nil {
		return logBatch{}, false
	}
	b, ok := s.byPosition[pos]
	return b, ok
}

// withLast returns the batch whose last offset is off.
func (s *segmentLog) withLast(off int64) (logBatch, bool) {
	if s == nil {
		return logBatch{}, false
	}
	b, ok := s.byLast[off]
	return b, ok
}

// dumpSnapshot prints a producer-state snapshot.
func (d *dumper) dumpSnapshot(name string, data []byte) error {
	fmt.Fprintf(d.out, "Dumping %s\n", name)
	entries, err := segment.ParseProducerSnapshot(data)
	if err != nil {
		fmt.Fprintf(d.out, "snapshot: %v\n", err)
		d.problem()
		return nil
	}
	for _, e := range entries {
		fmt.Fprintf(d.out, "producerId: %d producerEpoch: %d lastSequence: %d lastOffset: %d offsetDelta: %d timestamp: %d coordinatorEpoch: %d currentTxnFirstOffset: %d\n",
			e.ProducerID, e.ProducerEpoch, e.LastSequence, e.LastOffset, e.OffsetDelta, e.Timestamp, e.CoordinatorEpoch, e.CurrentTxnFirstOffset)
	}
	fmt.Fprintf(d.out, "producers: %d\n", len(entries))
	return nil
}

// dumpCheckpoint prints a leader-epoch checkpoint.
func (d *dumper) dumpCheckpoint(name string, data []byte) error {
	fmt.Fprintf(d.out, "Dumping %s\n", name)
	entries, err := segment.ParseLeaderEpochCheckpoint(data)
	if err != nil {
		fmt.Fprintf(d.out, "checkpoint: %v\n", err)
		d.problem()
		return nil
	}
	for _, e := range entries {
		fmt.Fprintf(d.out, "epoch: %d startOffset: %d\n", e.Epoch, e.StartOffset)
	}
	fmt.Fprintf(d.out, "epochs: %d\n", len(entries))
	return nil
}

// dumpRemoteMetadata prints the RemoteLogSegmentMetadata record of a
// tiered segment.
func (d *dumper) dumpRemoteMetadata(name string, data []byte) error {
	fmt.Fprintf(d.out, "Dumping %s\n", name)
	var m segment.RemoteLogSegmentMetadata
	if err := m.Unmarshal(data); err != nil {
		fmt.Fprintf(d.out, "metadata: %v\n", err)
		d.problem()
		return nil
	}
	fmt.Fprintf(d.out, "topic: %s (ID %s) partition: %d segmentId: %s startOffset: %d endOffset: %d maxTimestampMs: %d brokerId: %d eventTimestampMs: %d segmentSizeInBytes: %d state: %v txnIndexEmpty: %t\n",
		m.Topic, m.TopicID, m.Partition, m.SegmentID, m.StartOffset, m.EndOffset, m.MaxTimestampMs, m.BrokerID, m.EventTimestampMs, m.SegmentSizeInBytes, m.State, m.TxnIndexEmpty)
	for _, e := range m.SegmentLeaderEpochs {
		fmt.Fprintf(d.out, "epoch: %d startOffset: %d\n", e.Epoch, e.StartOffset)
	}
	return nil
}
