// Package wal packs produced batches of many partitions into shared,
// immutable WAL objects (KIP-1163), and buffers produce requests until an
// object is full or has waited long enough.
//
// One object per broker per flush, whatever the number of partitions: that
// is where diskless saves its users' money. At 10,000 partitions flushed
// four times a second, an object per partition would be 40,000 PUTs a
// second; packed objects are 4.
//
// # The WAL object, format v0
//
// An object is a version byte and then one region per partition, the
// partition's batches contiguous in it, regions in partition order (topic
// ID, then partition number). Each batch is a Kafka RecordBatch v2 exactly
// as the producer sent it: base offset 0, no offsets anywhere. Nothing in
// the object orders it; the batch coordinates that Encode returns (and the
// coordinator stores) are its index.
//
//	+---------+------------------------------+------------------------------+-----+
//	| version | region: topic A, partition 0 | region: topic A, partition 3 | ... |
//	|  1 byte | batch | batch | batch        | batch                        |     |
//	|   = 0   | (RecordBatch v2, base off 0) |                              |     |
//	+---------+------------------------------+------------------------------+-----+
//	byte 0     byte 1                                                  object size
//
// A coordinate names one batch: its topic ID and partition, its byte offset
// and size in the object, and the header fields the coordinator needs to
// assign offsets and check producer state without reading the object
// (record count, base and max timestamps, timestamp type, producer id,
// epoch and base sequence, transactional and control flags). A partition's
// batches are one byte range, so moving a partition out of an object is one
// ranged GET.
//
// Object keys are <prefix>wal/<UUIDv7>: unique without coordination, and
// sorted by creation time.
//
// # The buffer
//
// Buffer takes produce requests (the batches of one produce call, for any
// number of partitions, and a function that answers the call) and closes an
// object when it is full (FullBytes; a full object is not budgeted), early
// when the next request would not fit in MaxBytes, as soon as its PUT
// budget (ObjectsPerSecond) allows while a
// committer waits in Next for an object to upload, and at the latest when
// it has lingered for Linger. A request is never split across objects;
// one larger than MaxBytes gets an object of its own. Closed objects are
// handed on, in the order they were closed, to whoever calls Next: it
// encodes and uploads them, commits their coordinates, and answers their
// requests (Object.Answer, Object.Fail), which frees their bytes. The bytes
// buffered and in flight are bounded; past the bound, Add waits for room.
package wal
