// Package metalog is the metadata log under the batch coordinator: an
// ordered, durable sequence of opaque entries numbered from 0 without
// gaps, written by one leader at a time and read by anyone. The
// coordinator (package coordinator) encodes its decisions as entries and
// materialises them into SQLite; this package knows nothing of what an
// entry means.
//
// Four implementations:
//
//   - File (OpenFile): segment files in a local folder, fsynced with group
//     commit. The lowest latency; one machine.
//   - Bucket (OpenBucket): one object per entry in a gocloud.dev/blob
//     bucket, each written with a conditional put, which is also the
//     fence between two writers. Brokers keep no state that matters.
//   - etcdlog.Log (package etcdlog): one key per entry in etcd, written
//     in a transaction fenced by the writer's leadership (an etcd
//     election), several in flight; followers are woken by a watch. For
//     many brokers on one bucket; in a package of its own, so that a
//     program without etcd does not link its client.
//   - Mem (NewMem): in memory, for tests: latency, injected failures, and
//     several writers on one sequence of entries.
//
// Every implementation, ours and a user's, proves it keeps the contract
// of Log with the conformance suite in package metalogtest.
//
// # Guarantees
//
// Appends report an entry's offset once it is durable, in order; an
// append that fails fails every append queued after it, and the log keeps
// failing appends until the writer Reads to the end (Mem, Bucket) or is
// reopened (File). Read returns durable entries only. Trim never removes
// the newest entry, so a reopened log always knows its end. Wait lets a
// follower sleep until the next entry instead of polling Read: File and
// Mem wake it at once, etcdlog watches, Bucket polls
// (BucketOptions.PollInterval).
//
// # File
//
// A File is a folder of segment files named by the offset of their first
// entry in 20 decimal digits, 00000000000000001234.log. Segments are
// contiguous. A segment is a sequence of frames, one per entry:
//
//	+---------------+---------------+---------------------------+
//	| length uint32 | crc uint32    | payload (length bytes)    |
//	| big endian    | big endian    | the entry                 |
//	+---------------+---------------+---------------------------+
//	crc = CRC-32C (Castagnoli) of the 4 length bytes, then the payload
//
// The writer starts a new segment when the next frame would take the
// current one past SegmentBytes, writes at most 1 MiB to a segment between
// fsyncs, fsyncs a segment completely before it creates the next one, and
// reports an append once an fsync covers its frame (group commit). Recovery
// reads every frame: a bad frame (too short, a length past the end of the
// file, a wrong CRC) is a torn tail if it is in the last segment and starts
// in its last 1 MiB, the bytes a crash may have left unsynced; it and what
// follows are truncated away. Any other bad frame is corruption: OpenFile
// fails with ErrCorrupt and changes nothing.
//
// # Bucket
//
// A Bucket keeps one object per entry, <prefix>log/<20-digit offset>, the
// object's bytes being the entry (the coordinator's prefix is
// "<bucket prefix>meta/<shard>/"). Opening lists <prefix>log/ once. Every
// put is conditional (IfNotExist) and is the only fence: a writer appends
// at the end it knows; if another writer has appended there, the put
// fails, the append fails with ErrFenced, and so does every later one
// until the writer reads to the end. Two writers never both get an offset.
// A new leader claims the log with Claim, which puts its first entry at
// the first free offset (probing past the ones a busy old leader takes);
// the old leader's next put then finds its offset taken. The fence is the
// object at the contested offset, so Trim keeps every entry until it is
// TrimGrace (5 minutes) older than the newest, and a coordinator idle
// longer than 2 minutes reads the log's end before it appends. gocloud's
// fileblob makes IfNotExist a check followed by a rename, so over file://
// two puts at one offset at the same moment can both succeed: use file://
// for one writer at a time; S3, GCS, Azure and memory are atomic.
package metalog
