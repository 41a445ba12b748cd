package kbatch

import (
	"errors"
	"fmt"

	"github.com/diskless-go/diskless/kafkaerr"
)

// DefaultMaxUncompressedBytes bounds the decompressed size of one batch's
// records unless a RecordReader or ValidateOptions sets another bound. Kafka
// streams compressed batches and sets no bound; a reader that holds them
// whole needs one, or a small batch of zeros could take all memory.
const DefaultMaxUncompressedBytes = 64 << 20

// RecordReader iterates the records of a batch, decompressing them first
// when the batch is compressed. It reuses its decompression buffer from one
// batch to the next, and allocates nothing per record.
//
// A RecordReader is not safe for concurrent use. Its zero value is ready.
//
//	var rr kbatch.RecordReader
//	if err := rr.Reset(batch); err != nil { ... }
//	for rr.Next() {
//		r := rr.Record()
//		...
//	}
//	if err := rr.Err(); err != nil { ... }
type RecordReader struct {
	// MaxUncompressedBytes bounds the decompressed size of a batch's
	// records; 0 means DefaultMaxUncompressedBytes.
	MaxUncompressedBytes int

	buf   []byte
	data  []byte
	base  recordBase
	count int32
	index int32
	rec   Record
	err   error
}

// Reset starts reading the records of b, which must be a checked batch
// (ParseBatch, BatchIter). It decompresses the records section if needed:
// an unknown codec or a payload the codec rejects is an UNKNOWN_SERVER_ERROR
// as in Kafka, a payload that ends early is INVALID_RECORD, and one that
// decompresses past MaxUncompressedBytes is MESSAGE_TOO_LARGE. A negative
// record count is INVALID_RECORD.
func (rr *RecordReader) Reset(b Batch) error {
	rr.data, rr.count, rr.index, rr.err = nil, 0, 0, nil
	rr.base = newRecordBase(b)
	if n := b.NumRecords(); n < 0 {
		rr.err = invalidRecord("negative record count %d", n)
		return rr.err
	}
	data, err := rr.decompress(b)
	if err != nil {
		rr.err = err
		return err
	}
	rr.data, rr.count = data, b.NumRecords()
	return nil
}

func (rr *RecordReader) decompress(b Batch) ([]byte, error) {
	codec := b.Codec()
	if codec == CodecNone {
		return b.RecordsData(), nil
	}
	if !codec.Valid() {
		return nil, kafkaerr.New(kafkaerr.UnknownServerError, "unknown compression type id %d", int8(codec))
	}
	limit := rr.MaxUncompressedBytes
	if limit <= 0 {
		limit = DefaultMaxUncompressedBytes
	}
	out, err := appendDecompressed(rr.buf[:0], b.RecordsData(), codec, limit)
	if cap(out) > cap(rr.buf) {
		rr.buf = out[:0]
	}
	if err != nil {
		return nil, decompressError(codec, limit, err)
	}
	return out, nil
}

// decompressError maps a decompression failure to the code Kafka gives.
func decompressError(codec Codec, limit int, err error) error {
	switch {
	case errors.Is(err, errPayloadTooLarge):
		return &kafkaerr.Error{Code: kafkaerr.MessageTooLarge, Message: fmt.Sprintf("%s records decompress to more than %d bytes", codec, limit), Err: err}
	case errors.Is(err, errPayloadTruncated):
		return &kafkaerr.Error{Code: kafkaerr.InvalidRecord, Message: fmt.Sprintf("%s records end early", codec), Err: err}
	}
	return &kafkaerr.Error{Code: kafkaerr.UnknownServerError, Message: fmt.Sprintf("failed to decompress %s records", codec), Err: err}
}

// Next decodes the next record and reports whether there is one. It
// returns false at the end of the batch or on a malformed record; Err tells
// which. Once the declared count is read, bytes left over are an error, as
// in Kafka ("records still remaining").
func (rr *RecordReader) Next() bool {
	if rr.err != nil {
		return false
	}
	if rr.index >= rr.count {
		if len(rr.data) != 0 {
			rr.err = invalidRecord("incorrect declared batch size: %d bytes remain after %d records", len(rr.data), rr.count)
		}
		return false
	}
	n, err := decodeRecord(rr.data, &rr.base, &rr.rec)
	if err != nil {
		rr.err = err
		return false
	}
	rr.data = rr.data[n:]
	rr.index++
	return true
}

// Record returns the current record. The pointer is to the reader's own
// copy, which the next call to Next overwrites.
func (rr *RecordReader) Record() *Record { return &rr.rec }

// Index returns the position of the current record in the batch, from 0.
func (rr *RecordReader) Index() int { return int(rr.index) - 1 }

// Err returns the error that ended the iteration, if any.
func (rr *RecordReader) Err() error { return rr.err }
