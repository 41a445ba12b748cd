package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/diskless-go/diskless/kbatch"
)

// printBatch prints a batch as kafka-dump-log does: one line of header
// fields, then, with -records, a line per record. base is the offset of
// its first record: the batch's own in a .log, the coordinator's for a
// WAL batch (whose base offset field is 0), or -1 when unknown. It
// reports whether the batch checks (CRC, records).
func (d *dumper) printBatch(indent string, position int64, b kbatch.Batch, base int64) bool {
	crcErr := b.CheckCRC()
	var sb strings.Builder
	sb.WriteString(indent)
	if base >= 0 {
		fmt.Fprintf(&sb, "baseOffset: %d lastOffset: %d ", base, base+int64(b.LastOffsetDelta()))
	} else {
		fmt.Fprintf(&sb, "offsets: unknown (lastOffsetDelta %d) ", b.LastOffsetDelta())
	}
	fmt.Fprintf(&sb, "count: %d baseSequence: %d lastSequence: %d producerId: %d producerEpoch: %d partitionLeaderEpoch: %d isTransactional: %t isControl: %t",
		b.NumRecords(), b.BaseSequence(), b.LastSequence(), b.ProducerID(), b.ProducerEpoch(), b.PartitionLeaderEpoch(), b.Transactional(), b.Control())
	if h, ok := b.DeleteHorizon(); ok {
		fmt.Fprintf(&sb, " deleteHorizonMs: %d", h)
	}
	fmt.Fprintf(&sb, " position: %d %s: %d size: %d magic: %d compresscodec: %s crc: %d isvalid: %t",
		position, b.TimestampType(), b.MaxTimestamp(), len(b), b.Magic(), b.Codec(), b.CRC(), crcErr == nil)
	fmt.Fprintln(d.out, sb.String())
	ok := crcErr == nil
	if crcErr != nil {
		fmt.Fprintf(d.out, "%s  CRC: %v\n", indent, crcErr)
	}
	if !d.opts.records && ok {
		return true
	}
	// Read the records: with -records to print them, and always when the
	// CRC failed, to say what else is wrong.
	var rr kbatch.RecordReader
	if err := rr.Reset(b); err != nil {
		fmt.Fprintf(d.out, "%s  records: %v\n", indent, err)
		return false
	}
	for rr.Next() {
		if d.opts.records {
			d.printRecord(indent, b, rr.Record(), base)
		}
	}
	if err := rr.Err(); err != nil {
		fmt.Fprintf(d.out, "%s  records: %v\n", indent, err)
		return false
	}
	return ok
}

// printRecord prints one record.
func (d *dumper) printRecord(indent string, b kbatch.Batch, r *kbatch.Record, base int64) {
	var sb strings.Builder
	sb.WriteString(indent)
	if base >= 0 {
		fmt.Fprintf(&sb, "| offset: %d", base+int64(r.OffsetDelta))
	} else {
		fmt.Fprintf(&sb, "| offsetDelta: %d", r.OffsetDelta)
	}
	fmt.Fprintf(&sb, " %s: %d keySize: %d valueSize: %d sequence: %d", b.TimestampType(), r.Timestamp, size(r.Key), size(r.Value), r.Sequence)
	var keys []string
	it := r.Headers()
	for it.Next() {
		keys = append(keys, strconv.Quote(string(it.Key()))+"="+d.show(it.Value()))
	}
	fmt.Fprintf(&sb, " headers: [%s]", strings.Join(keys, " "))
	if b.Control() {
		if c, err := kbatch.ParseControlRecord(r); err == nil {
			fmt.Fprintf(&sb, " control: %v", c)
		} else {
			fmt.Fprintf(&sb, " control: %v", err)
		}
	} else {
		fmt.Fprintf(&sb, " key: %s payload: %s", d.show(r.Key), d.show(r.Value))
	}
	fmt.Fprintln(d.out, sb.String())
}

// size is a key's or value's size as Kafka prints it: -1 for null.
func size(b []byte) int {
	if b == nil {
		return -1
	}
	return len(b)
}

// show quotes bytes for printing, cut at -max-bytes; null is null.
func (d *dumper) show(b []byte) string {
	if b == nil {
		return "null"
	}
	if n := d.opts.maxBytes; n >= 0 && len(b) > n {
		return strconv.Quote(string(b[:n])) + fmt.Sprintf("...(%d bytes)", len(b))
	}
	return strconv.Quote(string(b))
}
