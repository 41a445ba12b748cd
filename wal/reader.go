package wal

import (
	"encoding/binary"
	"fmt"

	"github.com/diskless-go/diskless/kbatch"
)

// CheckObject checks that obj is a whole WAL object of a version this
// package reads and that coords, in object order, describe it exactly:
// each batch where its coordinate says, whole, valid (framing and CRC) and
// with the header fields its coordinate carries, with no gap or overlap,
// and nothing after the last. It reads obj and changes nothing.
func CheckObject(obj []byte, coords []Coordinate) error {
	if err := checkVersion(obj); err != nil {
		return err
	}
	off := int64(1)
	for i := range coords {
		c := &coords[i]
		if c.Offset != off {
			return objectErr(off, ErrMismatch, "coordinate %d (%s) starts at byte %d, where batch %d must", i, c.TopicPartition, c.Offset, i)
		}
		if _, err := checkBatch(obj, 0, c); err != nil {
			return err
		}
		off = c.End()
	}
	if off < int64(len(obj)) {
		return objectErr(off, ErrCorrupt, "%d bytes after the last batch", int64(len(obj))-off)
	}
	return nil
}

// CheckRange checks data, which holds the bytes [start, start+len(data)) of
// an object, against coords, each of which must lie inside that range (as
// after a ranged GET of a partition's region).
func CheckRange(data []byte, start int64, coords []Coordinate) error {
	for i := range coords {
		if _, err := checkBatch(data, start, &coords[i]); err != nil {
			return err
		}
	}
	return nil
}

// ReadBatch returns the batch at c from data, which holds an object's bytes
// from byte start on, after checking it against c. The batch aliases data.
func ReadBatch(data []byte, start int64, c *Coordinate) (kbatch.Batch, error) {
	return checkBatch(data, start, c)
}

// checkVersion checks the version byte.
func checkVersion(obj []byte) error {
	if len(obj) == 0 {
		return objectErr(0, ErrTruncated, "an object holds at least its version byte")
	}
	if v := obj[0]; v != Version0 {
		return objectErr(0, ErrUnknownVersion, "version %d; this package reads version %d", v, Version0)
	}
	return nil
}

// checkBatch returns the batch at c in data (object bytes from start),
// checked against c.
func checkBatch(data []byte, start int64, c *Coordinate) (kbatch.Batch, error) {
	rel := c.Offset - start
	switch {
	case c.Offset < 1 || c.Size < kbatch.HeaderSize:
		return nil, objectErr(c.Offset, ErrMismatch, "coordinate of %s names %d bytes at %d, not a batch", c.TopicPartition, c.Size, c.Offset)
	case rel < 0:
		return nil, objectErr(c.Offset, ErrMismatch, "batch of %s at byte %d is before the range, which starts at %d", c.TopicPartition, c.Offset, start)
	case rel+int64(c.Size) > int64(len(data)):
		return nil, objectErr(c.Offset, ErrTruncated, "batch of %s needs bytes up to %d, the data ends at %d", c.TopicPartition, c.End(), start+int64(len(data)))
	}
	raw := data[rel : rel+int64(c.Size)]
	if n := int64(int32(binary.BigEndian.Uint32(raw[8:]))) + kbatch.LogOverhead; n != int64(c.Size) {
		return nil, objectErr(c.Offset, ErrMismatch, "batch of %s is %d bytes, its coordinate says %d", c.TopicPartition, n, c.Size)
	}
	b, err := kbatch.ParseBatch(raw)
	if err != nil {
		return nil, &ObjectError{Offset: c.Offset, Err: fmt.Errorf("%w: batch of %s: %w", ErrCorrupt, c.TopicPartition, err)}
	}
	if err := b.CheckCRC(); err != nil {
		return nil, &ObjectError{Offset: c.Offset, Err: fmt.Errorf("%w: batch of %s: %w", ErrCorrupt, c.TopicPartition, err)}
	}
	if got := coordinateOf(c.TopicPartition, c.Offset, b); got != *c {
		return nil, objectErr(c.Offset, ErrMismatch, "batch of %s has header %+v, its coordinate says %+v", c.TopicPartition, got, *c)
	}
	return b, nil
}

// RegionIter iterates the batches at a list of coordinates (typically one
// partition's, from the coordinator) in data, which holds an object's bytes
// from byte start on, checking each against its coordinate. It stops at the
// first bad batch. It is not safe for concurrent use.
//
//	it := wal.NewRegionIter(data, start, coords)
//	for it.Next() {
//		b, c := it.Batch(), it.Coordinate()
//		...
//	}
//	if err := it.Err(); err != nil { ... }
type RegionIter struct {
	data   []byte
	start  int64
	coords []Coordinate
	i      int
	cur    kbatch.Batch
	err    error
}

// NewRegionIter returns an iterator over the batches at coords in data.
func NewRegionIter(data []byte, start int64, coords []Coordinate) *RegionIter {
	return &RegionIter{data: data, start: start, coords: coords, i: -1}
}

// Next advances to the next batch and reports whether there is one.
func (it *RegionIter) Next() bool {
	if it.err != nil || it.i+1 >= len(it.coords) {
		it.cur = nil
		return false
	}
	it.i++
	it.cur, it.err = checkBatch(it.data, it.start, &it.coords[it.i])
	return it.err == nil
}

// Batch returns the current batch, a view into the data.
func (it *RegionIter) Batch() kbatch.Batch { return it.cur }

// Coordinate returns the current batch's coordinate.
func (it *RegionIter) Coordinate() *Coordinate { return &it.coords[it.i] }

// Err returns the error that stopped the iteration, if any.
func (it *RegionIter) Err() error { return it.err }

// Scan reads a whole object without its coordinates, as a dump tool does:
// it checks the version byte, then calls fn with the offset and the view of
// each batch in turn. Every batch must be whole and valid (framing and
// CRC), and nothing may follow the last. Partition boundaries are not in
// the object, so Scan cannot tell them. It stops at fn's first error and
// returns it.
func Scan(obj []byte, fn func(offset int64, b kbatch.Batch) error) error {
	if err := checkVersion(obj); err != nil {
		return err
	}
	it := kbatch.NewBatchIter(obj[1:])
	for it.Next() {
		b := it.Batch()
		off := int64(1 + it.Pos())
		if err := b.CheckCRC(); err != nil {
			return &ObjectError{Offset: off, Err: fmt.Errorf("%w: %w", ErrCorrupt, err)}
		}
		if err := fn(off, b); err != nil {
			return err
		}
	}
	off := int64(1 + it.Pos())
	if err := it.Err(); err != nil {
		return &ObjectError{Offset: off, Err: fmt.Errorf("%w: %w", ErrCorrupt, err)}
	}
	if it.Partial() {
		return objectErr(off, ErrTruncated, "the last batch is cut short: %d bytes remain", int64(len(obj))-off)
	}
	return nil
}
