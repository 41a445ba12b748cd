package kbatch

import "github.com/diskless-go/diskless/kafkaerr"

// Rebuild appends to dst the batch a Kafka leader builds in place of b when
// ValidateResult.NeedsRebuild says so (LogValidator's
// buildRecordsAndAssignOffsets): the records of b, with offset deltas
// 0, 1, 2, ..., compressed with the topic's codec (b's own for
// "producer"), with b's producer id, epoch, base sequence and transactional
// flag, the first record's timestamp as base timestamp, and for a
// LogAppendTime topic the LogAppendTime attribute with opts.Now as max
// timestamp. Base offset 0 and partition leader epoch -1 are left for the
// append to assign. A result larger than max.message.bytes is
// MESSAGE_TOO_LARGE, and dst is returned unchanged.
//
// b must have passed Validate with the same options.
func Rebuild(dst []byte, b Batch, opts *ValidateOptions) ([]byte, error) {
	o := resolve(opts)
	codec, ok := o.o.Compression.Codec()
	if !ok {
		codec = b.Codec()
	}
	var rr RecordReader
	rr.MaxUncompressedBytes = o.maxUncompressed
	if err := rr.Reset(b); err != nil {
		return dst, err
	}
	var bld Builder
	bld.Reset(codec)
	bld.SetProducer(b.ProducerID(), b.ProducerEpoch(), b.BaseSequence())
	bld.SetTransactional(b.Transactional())
	if o.o.TimestampType == LogAppendTime {
		bld.SetLogAppendTime(o.now)
	}
	var headers []Header
	for rr.Next() {
		r := rr.Record()
		headers = r.AppendHeaders(headers[:0])
		bld.Append(r.Timestamp, r.Key, r.Value, headers...)
	}
	if err := rr.Err(); err != nil {
		return dst, err
	}
	start := len(dst)
	out, err := bld.Build(dst)
	if err != nil {
		return dst, err
	}
	if size := len(out) - start; size > o.maxMessageBytes {
		return dst, kafkaerr.New(kafkaerr.MessageTooLarge, "the rebuilt batch of %d bytes exceeds max.message.bytes %d", size, o.maxMessageBytes)
	}
	return out, nil
}
