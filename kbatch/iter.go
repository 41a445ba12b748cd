package kbatch

import "github.com/diskless-go/diskless/kafkaerr"

// BatchIter iterates the batches in a byte slice with Kafka's framing rules
// (ByteBufferLogInputStream): a length below 14 or a magic outside 0..2 is
// corrupt; a trailing batch cut short is the end of the data, not an error,
// as after a crash mid-append or at the end of a fetch response.
//
// Batches of the legacy formats (magic 0 and 1) and v2 batches shorter than
// the header end the iteration with a CORRUPT_MESSAGE error. The iterator
// checks framing only: see Batch.CheckCRC and Validate.
//
// A BatchIter is a small value; it is not safe for concurrent use.
//
//	it := kbatch.NewBatchIter(data)
//	for it.Next() {
//		b := it.Batch()
//		...
//	}
//	if err := it.Err(); err != nil { ... }
type BatchIter struct {
	data []byte
	pos  int
	cur  Batch
	err  error
}

// NewBatchIter returns an iterator over the batches in data.
func NewBatchIter(data []byte) BatchIter { return BatchIter{data: data} }

// Next advances to the next whole batch and reports whether there is one.
func (it *BatchIter) Next() bool {
	if it.err != nil {
		return false
	}
	if it.cur != nil {
		it.pos += len(it.cur)
		it.cur = nil
	}
	rest := it.data[it.pos:]
	n, err := nextFrame(rest)
	if n == 0 || err != nil {
		it.err = err
		return false
	}
	b, err := checkBatch(rest[:n])
	if err != nil {
		it.err = err
		return false
	}
	it.cur = b
	return true
}

// Batch returns the current batch: a view into the data.
func (it *BatchIter) Batch() Batch { return it.cur }

// Err returns the framing error that ended the iteration, if any.
func (it *BatchIter) Err() error { return it.err }

// Pos returns the byte position of the current batch; after Next has
// returned false, the position where the whole batches end: the valid
// prefix of the data.
func (it *BatchIter) Pos() int { return it.pos }

// Partial reports, once Next has returned false with no error, whether a
// batch cut short follows the whole ones (Pos < len(data)).
func (it *BatchIter) Partial() bool {
	return it.err == nil && it.cur == nil && it.pos < len(it.data)
}

// nextFrame applies Kafka's framing rules to the batch of any magic at the
// start of b. It returns the batch's size, 0 when b holds no whole batch
// (the end of the data), or a CORRUPT_MESSAGE error for a length below 14
// or a magic outside 0..2.
// BatchSize returns the size of the batch that starts b, checking its
// framing as NewBatchIter does (a length below the minimum, or a magic this
// package does not know, is CORRUPT_MESSAGE), or 0 if b holds less than the
// whole batch.
func BatchSize(b []byte) (int, error) { return nextFrame(b) }

func nextFrame(b []byte) (int, error) {
	if len(b) < LogOverhead {
		return 0, nil
	}
	size, err := frameSize(b)
	if err != nil {
		return 0, err
	}
	if int64(len(b)) < size {
		return 0, nil
	}
	if magic := int8(b[magicOffset]); magic < 0 || magic > Magic {
		return 0, kafkaerr.New(kafkaerr.CorruptMessage, "invalid magic %d", magic)
	}
	return int(size), nil
}

// LastOffset returns the last offset of the last whole batch in batches,
// or -1 if it holds none. It reads the framing only, as NewBatchIter.
func LastOffset(batches []byte) int64 {
	last := int64(-1)
	it := NewBatchIter(batches)
	for it.Next() {
		last = it.Batch().LastOffset()
	}
	return last
}

// FindRecord returns the first record in batches at or after offset whose
// timestamp is at or after ts (Kafka's lookup by time within a log's
// batches), skipping the batches that end before offset or whose max
// timestamp is before ts. found is false if no record qualifies.
func FindRecord(batches []byte, offset, ts int64) (off, timestamp int64, found bool, err error) {
	it := NewBatchIter(batches)
	var rr RecordReader
	for it.Next() {
		b := it.Batch()
		if b.LastOffset() < offset || b.MaxTimestamp() < ts {
			continue
		}
		if err := rr.Reset(b); err != nil {
			return -1, -1, false, err
		}
		for rr.Next() {
			r := rr.Record()
			if r.Offset >= offset && r.Timestamp >= ts {
				return r.Offset, r.Timestamp, true, nil
			}
		}
		if err := rr.Err(); err != nil {
			return -1, -1, false, err
		}
	}
	return -1, -1, false, it.Err()
}

// MaxTimestampRecord returns the record at or after offset with the
// greatest timestamp in batches (the first of them on a tie), as Kafka's
// ListOffsets with MAX_TIMESTAMP finds it. found is false if there is no
// record at or after offset.
func MaxTimestampRecord(batches []byte, offset int64) (off, timestamp int64, found bool, err error) {
	off, timestamp = -1, -1
	it := NewBatchIter(batches)
	var rr RecordReader
	for it.Next() {
		b := it.Batch()
		if b.LastOffset() < offset || (found && b.MaxTimestamp() <= timestamp) {
			continue
		}
		if err := rr.Reset(b); err != nil {
			return -1, -1, false, err
		}
		for rr.Next() {
			r := rr.Record()
			if r.Offset >= offset && (!found || r.Timestamp > timestamp) {
				off, timestamp, found = r.Offset, r.Timestamp, true
			}
		}
		if err := rr.Err(); err != nil {
			return -1, -1, false, err
		}
	}
	return off, timestamp, found, it.Err()
}
