package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/wal"
)

// dumpWAL prints a WAL object: its version, then its batches, each with
// its position and CRC status, grouped in regions when -db names them,
// then whether wal.Scan accepts the whole object.
func (d *dumper) dumpWAL(ctx context.Context, name string, data []byte) error {
	key := name
	if i := strings.LastIndex(name, "wal/"); i >= 0 {
		key = name[i:] // the key without the bucket prefix or local folders
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "WAL object %s: %d bytes", key, len(data))
	if _, t, err := wal.ParseObjectKey("", key); err == nil {
		fmt.Fprintf(&sb, ", named at %s", t.UTC().Format(time.RFC3339Nano))
	}
	fmt.Fprintln(d.out, sb.String())
	if len(data) == 0 || data[0] != wal.Version0 {
		if len(data) == 0 {
			fmt.Fprintln(d.out, "version: none: the object is empty")
		} else {
			fmt.Fprintf(d.out, "version: %d: not a version this build reads (%d)\n", data[0], wal.Version0)
		}
		d.problem()
		return nil
	}
	fmt.Fprintf(d.out, "version: %d\n", data[0])

	var regions []region
	if d.opts.db != "" {
		var err error
		if regions, err = regionsOf(ctx, d.opts.db, key); err != nil {
			return err
		}
		if len(regions) == 0 {
			fmt.Fprintf(d.out, "regions: the database %s has no batch of this object (deleted, released, or never committed)\n", d.opts.db)
		}
		compacted, err := objectCompacted(ctx, d.opts.db, key)
		if err != nil {
			return err
		}
		if compacted {
			fmt.Fprintln(d.out, "compacted: written by a compaction (its batches replaced a partition's range at their offsets; offsets the cleaner removed are holes)")
		}
	} else {
		fmt.Fprintln(d.out, "regions: unknown: an object does not record where partitions begin (pass -db)")
	}

	batches, bad, nregions := 0, 0, 0
	var cur *region
	next := int64(-1) // the offset of the next batch in the current region
	it := kbatch.NewBatchIter(data[1:])
	for it.Next() {
		b := it.Batch()
		pos := int64(1 + it.Pos())
		if cur != nil && pos >= cur.end() {
			d.endRegion(cur, next)
			cur, next = nil, -1
		}
		if cur == nil {
			if r := findRegion(regions, pos); r != nil {
				cur, next = r, r.baseOffset()
				nregions++
				fmt.Fprintf(d.out, "region: topic %s partition %d (topic ID %s): bytes [%d, %d), offsets %d-%d\n",
					r.topic, r.partition, r.topicID, r.pos, r.end(), r.baseOffset(), r.lastOffset)
			} else if regions != nil {
				fmt.Fprintln(d.out, "region: unknown: no batch row of the database covers the next batch")
			}
		}
		indent := ""
		if regions != nil {
			indent = "  "
		}
		batches++
		if !d.printBatch(indent, pos, b, next) {
			bad++
		}
		if next >= 0 {
			next += int64(b.LastOffsetDelta()) + 1
		}
	}
	if cur != nil {
		d.endRegion(cur, next)
	}
	end := int64(1 + it.Pos())
	switch {
	case it.Err() != nil:
		fmt.Fprintf(d.out, "at byte %d: %v\n", end, it.Err())
		d.problem()
	case it.Partial():
		fmt.Fprintf(d.out, "at byte %d: a batch cut short: %d bytes remain\n", end, int64(len(data))-end)
		d.problem()
	}
	summary := fmt.Sprintf("batches: %d", batches)
	if regions != nil {
		summary += fmt.Sprintf(" in %d regions", nregions)
	}
	if bad == 0 {
		summary += ", every CRC checks"
	} else {
		summary += fmt.Sprintf(", %d do not check", bad)
		d.problem()
	}
	fmt.Fprintln(d.out, summary)
	if err := wal.Scan(data, func(int64, kbatch.Batch) error { return nil }); err != nil {
		fmt.Fprintf(d.out, "object: %v\n", err)
		d.problem()
	} else {
		fmt.Fprintln(d.out, "object: valid")
	}
	return nil
}

// endRegion checks that a region's batches ended at its last offset.
func (d *dumper) endRegion(r *region, next int64) {
	if next != r.lastOffset+1 {
		fmt.Fprintf(d.out, "  region ends at offset %d, its batches at %d\n", r.lastOffset, next-1)
		d.problem()
	}
}

// findRegion returns the region that starts at pos, or nil.
func findRegion(regions []region, pos int64) *region {
	for i := range regions {
		if regions[i].pos == pos {
			return &regions[i]
		}
	}
	return nil
}
