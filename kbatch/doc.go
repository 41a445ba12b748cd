// Package kbatch is Apache Kafka's record format: the RecordBatch v2 that
// producers send, brokers store and consumers fetch, byte for byte as
// Kafka writes and reads it. Everything diskless stores and serves is one
// of these batches; every package of the module that handles records
// (segment, wal, coordinator, replica, the root, kafkaserver) uses this one.
//
// # What it does
//
//   - ParseBatch and BatchIter give views over the caller's bytes, with
//     Kafka's framing rules; Batch reads every header field and the derived
//     values (last offset, next offset, last sequence with wrap-around).
//   - Validate checks one partition's produce records as a Kafka leader does
//     and returns Kafka's error code for each failure (*kafkaerr.Error).
//   - RecordReader decodes records (keys, values, headers, timestamps),
//     decompressing gzip, snappy (raw or xerial framing), lz4 (Kafka's frame
//     rules) and zstd, with no allocation per record.
//   - Builder builds batches with any codec, idempotent and transactional
//     producer fields; AppendEndTxnMarker builds COMMIT and ABORT markers.
//   - Batch.SetBaseOffset, SetPartitionLeaderEpoch, SetMaxTimestamp and
//     SetLogAppendTime rewrite in place what a Kafka leader rewrites, and
//     Rebuild rebuilds a batch as Kafka does when the topic's codec differs.
//
// # RecordBatch v2
//
// All integers are big-endian; the CRC is CRC-32C (Castagnoli) of the bytes
// from the attributes to the end of the batch, so the base offset, length,
// partition leader epoch and magic can change without it.
//
//	 offset  size  field
//	 0       8     baseOffset            offset of the first record; producers send 0
//	 8       4     length                bytes after this field (batch size - 12)
//	12       4     partitionLeaderEpoch  -1 from producers
//	16       1     magic                 2
//	17       4     crc                   CRC-32C of [21, end)
//	21       2     attributes            bits 0-2 codec, 3 LogAppendTime,
//	                                     4 transactional, 5 control,
//	                                     6 delete horizon set
//	23       4     lastOffsetDelta       last offset - base offset
//	27       8     baseTimestamp         first record's timestamp (or the delete horizon)
//	35       8     maxTimestamp          greatest record timestamp, or the append time
//	43       8     producerId            -1: none
//	51       2     producerEpoch         -1: none
//	53       4     baseSequence          -1: none
//	57       4     recordsCount
//	61       ...   records               raw, or one compressed stream of them
//
// Each record (varints are zig-zag LEB128):
//
//	length varint | attributes int8 | timestampDelta varlong |
//	offsetDelta varint | keyLength varint | key | valueLength varint |
//	value | headerCount varint | headers
//
// and each header: keyLength varint | key | valueLength varint | value. A
// length of -1 is null (a null key, a tombstone value, a null header value).
//
// Compressed records are one stream: gzip (RFC 1952), snappy (xerial
// framing, which Kafka's Java client writes and this package writes, or a
// raw block, which franz-go writes; both are read), lz4 (an LZ4 frame with
// independent 64 KiB blocks and Kafka's header checksum), zstd (standard
// frames).
//
// A transaction marker is a control batch (attributes 0x30) of one record
// whose key is version int16 0 | type int16 (0 ABORT, 1 COMMIT) and whose
// value is version int16 0 | coordinatorEpoch int32.
//
// # Compatibility
//
// The byte-level reference is docs/formats.md in this repository; its test
// vectors are reproduced in this package's tests, and batches are checked
// both ways against franz-go's kmsg decoder and encoder.
//
// Validate follows Kafka where Kafka's behaviour is surprising too: a
// partial batch after the one batch of a produce request is ignored (Kafka
// trims it); record attributes are not checked; an uncompressed batch's
// inner offset deltas are not checked (a compressed batch with wrong ones
// is rebuilt, not rejected); an unknown codec or an undecodable compressed
// payload is UNKNOWN_SERVER_ERROR. Decoding accepts non-minimal varints as
// Java's ByteUtils does. One addition: a compressed batch whose records
// decompress past a bound (DefaultMaxUncompressedBytes) is
// MESSAGE_TOO_LARGE, where Kafka sets no bound. Validate, like Kafka,
// reads the records as they are decompressed; RecordReader and Rebuild
// hold them whole.
//
// # Ownership and concurrency
//
// Views (Batch, Record, keys, values, headers) alias the bytes they were
// read from and never copy; the Set methods write into them. Builder,
// RecordReader and BatchIter are not safe for concurrent use; Validate,
// Rebuild and the functions are.
package kbatch
