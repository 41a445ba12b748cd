// Package segment is the classic Kafka log: a partition directory of
// segment files with sparse indexes, recovery, retention and compaction
// (Log), byte-compatible with Kafka's, and the files of tiered segments
// (KIP-405). Its batches are package kbatch's RecordBatch v2.
//
// # What it does
//
//   - Log is one partition's classic log, byte-compatible with Kafka's
//     segment files: Append (batches that carry their offsets), Read
//     (Kafka's fetch semantics), OffsetForTimestamp, recovery on OpenLog,
//     retention (DeleteOldSegments, DeleteRecords) and compaction
//     (Compact), transactions included.
//   - For tiered storage (KIP-405): Log.SegmentFiles copies a closed
//     segment's files while the log runs; AppendProducerSnapshot,
//     ParseProducerSnapshot and ProducerSnapshotFromBatches give the
//     .snapshot file; AppendLeaderEpochCheckpoint,
//     ParseLeaderEpochCheckpoint and LeaderEpochsOfBatches the
//     leader-epoch checkpoint; LookupOffsetIndex and LookupTimeIndex look
//     up the indexes of a remote segment from their bytes; and
//     RemoteLogSegmentMetadata is the record of Kafka's
//     __remote_log_metadata topic.
//
// # The log directory
//
// A Log owns one partition's directory (Kafka's <topic>-<partition>).
// Each segment is three files named by its base offset, the offset of its
// first possible record, in 20 zero-padded digits:
//
//	00000000000000000000.log        batches, back to back (RecordBatch v2 above)
//	00000000000000000000.index      offset index
//	00000000000000000000.timeindex  time index
//	00000000000000368769.log        the next segment, from offset 368769
//	00000000000000368769.index
//	00000000000000368769.timeindex
//	recovery-point-offset-checkpoint  offsets below it are flushed
//	log-start-offset-checkpoint       the log start offset (DeleteRecords)
//	cleaner-offset-checkpoint         the first dirty offset (Compact)
//	.kafka_cleanshutdown              present only while the log is closed cleanly
//
// The last segment is the active one: appends go to it, and it rolls (a new
// segment starts at the next append's base offset) when the append would
// take it past segment.bytes, when the append's max timestamp is
// segment.ms past the max timestamp of the segment's first batch, when an
// index is full, or when the append's last offset minus the base offset
// would not fit in an int32. An append whose own offsets span more than
// an int32 (offsets may skip ahead) is split before the first batch that
// would not fit, each part in its own segment. Transient suffixes: ".cleaned" (compaction
// output being written), ".swap" (compaction output ready to replace the
// segments it covers), ".deleted" (a deleted segment's files, removed after
// FileDeleteDelay). OpenLog removes .cleaned and .deleted files and
// completes .swap ones.
//
// The offset index maps offsets to positions in the .log, sparsely. Each
// entry is 8 bytes, big-endian, with no header and no checksum:
//
//	offset  size  field
//	0       4     relativeOffset  int32: offset - the segment's base offset
//	4       4     position        int32: byte position in the .log of the
//	                              start of the append (batch) that holds it
//
// An append gets an entry when more than index.interval.bytes (4096) were
// appended since the last one, before this append; the entry maps the
// append's last offset to the position where the append starts, so the
// first append of a segment never gets one. Rebuilt from the .log, the
// rule applies per batch. A lookup takes the largest entry at or below the
// target offset (or position 0) and scans the batches from there for the
// first whose last offset reaches the target.
//
// The time index maps timestamps to offsets. Each entry is 12 bytes,
// big-endian:
//
//	offset  size  field
//	0       8     timestamp       int64: the greatest record timestamp of
//	                              the segment up to and including...
//	8       4     relativeOffset  int32: ...this offset (the last offset of
//	                              the batch that carried that timestamp)
//
// It gets an entry with each offset index entry, only when the greatest
// timestamp so far has grown; a segment that stops being active gets a
// last entry with its greatest timestamp, so the last entry holds it (what
// retention.ms reads). Its last slot is kept for that entry: it is full at
// segment.index.bytes/12 - 1 entries.
//
// Kafka preallocates both index files to segment.index.bytes while a
// segment is active and trims them to their entries on roll and close; a
// Log never preallocates, so its index files always hold exactly their
// entries: what Kafka leaves after a trim, or a prefix of it while the
// segment is active. Index files that are missing, not whole entries, or
// that disagree with their .log are rebuilt when the log opens. Index files
// loaded from disk are checked where a lookup lands: an offset index entry
// must point at the start of a valid batch that ends at or before its
// offset, and a time index entry's offset must be in a batch whose max
// timestamp is the entry's; a lookup that lands elsewhere scans the
// segment instead, and the indexes are rebuilt on the next open.
//
// The checkpoint files use the layout of Kafka's text checkpoint files (a
// version line, an entry count line, the entries), but with one entry that
// is the bare offset ("0\n1\n<offset>\n"): Kafka keeps one such file per
// log directory with a "<topic> <partition> <offset>" line per partition,
// so Kafka cannot read these as they are. They are written to a temporary
// file, synced and renamed into place; the clean shutdown marker holds
// {"version":0,"brokerEpoch":-1}.
//
// # Compaction and transactions
//
// Compact keeps the latest record of each key with Kafka's rules
// (docs/formats.md, "Compaction"): tombstones stay until their delete horizon, the
// active segment and everything at or after the last stable offset are
// never cleaned, offsets never change, and untouched batches are copied
// byte for byte. Transactions are supported without a .txnindex (a Log
// writes none and never reads one that Kafka wrote, but to hand it out
// with SegmentFiles; it goes when its segment is deleted or cleaned): each
// clean scans the batch headers of the log to find which transactions
// were aborted (their data batches are dropped whatever their keys and
// never supersede a record) and which are still open (the first offset of
// the earliest one is the last stable offset). COMMIT and ABORT markers
// stay while data of their transaction does, then get a delete horizon,
// then go. Reads return every batch (READ_UNCOMMITTED); nothing filters
// aborted records for READ_COMMITTED consumers.
//
// # Tiered storage formats
//
// A remote segment is the files of a closed segment (SegmentFiles: .log,
// .index, .timeindex, and .txnindex when Kafka left one) with a producer
// snapshot and a leader-epoch index beside it, as Kafka's RemoteLogManager
// uploads them (LogSegmentData), and a RemoteLogSegmentMetadata record
// describing it.
//
// A .txnindex entry (34 bytes, big-endian; an entry per aborted
// transaction with data in the segment, appended, never preallocated):
//
//	offset  size  field
//	 0      2     version           int16 0
//	 2      8     producerId
//	10      8     firstOffset       first offset of the transaction
//	18      8     lastOffset        offset of the ABORT marker
//	26      8     lastStableOffset  the last stable offset after the marker
//
// The producer-state snapshot (a .snapshot file, named by the offset it
// was taken at: the next segment's base offset for a remote segment;
// Kafka's ProducerStateManager), big-endian:
//
//	offset  size  field
//	 0      2     version      int16 1
//	 2      4     crc          uint32 CRC-32C of [6, end)
//	 6      4     entryCount   int32
//	10      46*N  entries
//
// and each entry:
//
//	offset  size  field
//	 0      8     producerId
//	 8      2     producerEpoch
//	10      4     lastSequence           of its last data batch; -1: none
//	14      8     lastOffset             of that batch; -1: none
//	22      4     offsetDelta            that batch's last - base offset
//	26      8     timestamp              its max timestamp, or a later marker's
//	34      4     coordinatorEpoch       of its last marker; -1: none
//	38      8     currentTxnFirstOffset  -1: no open transaction
//
// The leader-epoch checkpoint (Kafka's leader-epoch-checkpoint file, and
// the leader-epoch index of a remote segment) is text, each line ending
// with "\n":
//
//	0                      version
//	2                      entry count
//	5 1000                 epoch, space, its start offset; by ascending epoch
//	6 1500
//
// The RemoteLogSegmentMetadata record, a record value of Kafka's
// __remote_log_metadata topic (AbstractApiMessageSerde's frame around
// RemoteLogSegmentMetadataRecord version 0, a flexible message: uvarints
// are unsigned LEB128; a compact string, array or bytes is preceded by its
// length + 1 as a uvarint, 0 being null; each struct ends with its tagged
// fields, a uvarint count then, for each, uvarint tag, uvarint size and
// the bytes):
//
//	frameVersion         uvarint  1
//	apiKey               uvarint  0
//	version              uvarint  0
//	remoteLogSegmentId
//	  topicIdPartition
//	    name             compact string
//	    id               uuid     16 bytes
//	    partition        int32
//	    tagged fields
//	  id                 uuid     the segment's, unique per copy
//	  tagged fields
//	startOffset          int64
//	endOffset            int64    inclusive
//	brokerId             int32
//	maxTimestampMs       int64
//	eventTimestampMs     int64
//	segmentLeaderEpochs  compact array of
//	  leaderEpoch        int32
//	  offset             int64
//	  tagged fields
//	segmentSizeInBytes   int32
//	customMetadata       compact nullable bytes
//	remoteLogSegmentState int8    0 COPY_SEGMENT_STARTED ... 3 DELETE_SEGMENT_FINISHED
//	tagged fields                 tag 0: txnIndexEmpty bool, written only when true
//
// # Ownership and concurrency
//
// A Log is safe for concurrent use: one
// writer at a time, readers alongside, and a read keeps the files it
// started on open until it is done, whatever rolls, retention or
// compaction do meanwhile; SegmentFiles is such a read. The tiered-storage
// codecs copy what they decode (entries, RemoteLogSegmentMetadata), never
// alias their input, and their values are plain data: safe to share while
// nothing writes them.
package segment
