package segment

import (
	"cmp"
	"encoding/binary"
	"hash/crc32"
	"slices"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

// The producer-state snapshot (docs/formats.md, "Producer-state snapshot"; Kafka's
// ProducerStateManager.writeSnapshot and readSnapshot, and
// ProducerSnapshot.json). The constants are part of the format.
const (
	// producerSnapshotVersion is the only version Kafka writes and reads.
	producerSnapshotVersion = 1
	// producerSnapshotCRCOffset is where the CRC-32C is stored; it covers
	// the bytes from producerSnapshotEntriesOffset to the end of the file.
	producerSnapshotCRCOffset = 2
	// producerSnapshotEntriesOffset is where the entry count starts.
	producerSnapshotEntriesOffset = 6
	// producerSnapshotHeaderSize is version, CRC and entry count.
	producerSnapshotHeaderSize = 10
	// producerSnapshotEntrySize is the size of one entry.
	producerSnapshotEntrySize = 46
)

// snapshotCRC is the CRC-32C table of the snapshot file's checksum.
var snapshotCRC = crc32.MakeTable(crc32.Castagnoli)

// ProducerSnapshotEntry is one producer's state in a producer-state
// snapshot (a .snapshot file): what Kafka keeps of its last batch so that a
// broker that loads the log from the snapshot's offset can go on checking
// the producer's sequence numbers and transactions.
type ProducerSnapshotEntry struct {
	// ProducerID and ProducerEpoch identify the producer.
	ProducerID    int64
	ProducerEpoch int16
	// LastSequence is the sequence number of the last record of the
	// producer's last data batch, or NoSequence.
	LastSequence int32
	// LastOffset is the last offset of that batch, or -1 when the producer
	// has no data batch since its epoch last changed (a marker bumped it).
	LastOffset int64
	// OffsetDelta is that batch's last offset minus its base offset (0
	// when LastOffset is -1).
	OffsetDelta int32
	// Timestamp is the max timestamp of the producer's last data batch, or
	// the timestamp of its last transaction marker if that came later.
	Timestamp int64
	// CoordinatorEpoch is the transaction coordinator epoch of the
	// producer's last marker, or -1.
	CoordinatorEpoch int32
	// CurrentTxnFirstOffset is the first offset of the producer's open
	// transaction, or -1 when it has none.
	CurrentTxnFirstOffset int64
}

// AppendProducerSnapshot appends a producer-state snapshot of entries to
// dst, byte for byte as Kafka's ProducerStateManager writes it: version 1,
// the CRC-32C of what follows it, the entry count, and the entries in the
// order given. Kafka writes its producers in the order of a Java HashMap,
// which no reader depends on; ProducerSnapshotFromBatches gives them by
// producer ID.
func AppendProducerSnapshot(dst []byte, entries []ProducerSnapshotEntry) []byte {
	start := len(dst)
	dst = slices.Grow(dst, producerSnapshotHeaderSize+len(entries)*producerSnapshotEntrySize)
	dst = binary.BigEndian.AppendUint16(dst, producerSnapshotVersion)
	dst = binary.BigEndian.AppendUint32(dst, 0) // the CRC, filled in below
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(entries)))
	for _, e := range entries {
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.ProducerID))
		dst = binary.BigEndian.AppendUint16(dst, uint16(e.ProducerEpoch))
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.LastSequence))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.LastOffset))
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.OffsetDelta))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.Timestamp))
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.CoordinatorEpoch))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.CurrentTxnFirstOffset))
	}
	crc := crc32.Checksum(dst[start+producerSnapshotEntriesOffset:], snapshotCRC)
	binary.BigEndian.PutUint32(dst[start+producerSnapshotCRCOffset:], crc)
	return dst
}

// ParseProducerSnapshot reads a producer-state snapshot as Kafka's
// ProducerStateManager.readSnapshot does: a file too short for its header
// or its entries, a version other than 1, a CRC that does not match, or a
// negative entry count is CORRUPT_MESSAGE (Kafka's
// CorruptSnapshotException). Bytes after the entries are covered by the
// CRC and otherwise ignored, as Kafka ignores them. The entries are copied
// out of b.
func ParseProducerSnapshot(b []byte) ([]ProducerSnapshotEntry, error) {
	if len(b) < producerSnapshotHeaderSize {
		return nil, kafkaerr.New(kafkaerr.CorruptMessage, "producer snapshot of %d bytes is shorter than its %d-byte header", len(b), producerSnapshotHeaderSize)
	}
	if v := int16(binary.BigEndian.Uint16(b)); v != producerSnapshotVersion {
		return nil, kafkaerr.New(kafkaerr.CorruptMessage, "producer snapshot has unknown version %d", v)
	}
	stored := binary.BigEndian.Uint32(b[producerSnapshotCRCOffset:])
	if computed := crc32.Checksum(b[producerSnapshotEntriesOffset:], snapshotCRC); stored != computed {
		return nil, kafkaerr.New(kafkaerr.CorruptMessage, "producer snapshot CRC %08x does not match computed %08x", stored, computed)
	}
	n := int32(binary.BigEndian.Uint32(b[producerSnapshotEntriesOffset:]))
	rest := b[producerSnapshotHeaderSize:]
	if n < 0 || int64(n)*producerSnapshotEntrySize > int64(len(rest)) {
		return nil, kafkaerr.New(kafkaerr.CorruptMessage, "producer snapshot says %d entries, but %d bytes follow", n, len(rest))
	}
	entries := make([]ProducerSnapshotEntry, n)
	for i := range entries {
		e := rest[i*producerSnapshotEntrySize:]
		entries[i] = ProducerSnapshotEntry{
			ProducerID:            int64(binary.BigEndian.Uint64(e)),
			ProducerEpoch:         int16(binary.BigEndian.Uint16(e[8:])),
			LastSequence:          int32(binary.BigEndian.Uint32(e[10:])),
			LastOffset:            int64(binary.BigEndian.Uint64(e[14:])),
			OffsetDelta:           int32(binary.BigEndian.Uint32(e[22:])),
			Timestamp:             int64(binary.BigEndian.Uint64(e[26:])),
			CoordinatorEpoch:      int32(binary.BigEndian.Uint32(e[34:])),
			CurrentTxnFirstOffset: int64(binary.BigEndian.Uint64(e[38:])),
		}
	}
	return entries, nil
}

// producerState is one producer's ProducerStateEntry as Kafka's
// ProducerAppendInfo updates it, keeping only the last batch.
type producerState struct {
	epoch            int16
	coordinatorEpoch int32
	lastTimestamp    int64
	txnFirstOffset   int64 // -1: no open transaction
	hasBatch         bool
	lastSeq          int32
	lastOffset       int64
	offsetDelta      int32
}

// setEpoch is ProducerStateEntry.maybeUpdateProducerEpoch: a new epoch
// forgets the batches of the old one.
func (p *producerState) setEpoch(epoch int16) {
	if p.epoch != epoch {
		p.epoch, p.hasBatch = epoch, false
	}
}

// ProducerSnapshotFromBatches returns the state that Kafka's producer
// state manager would hold for the producers of batches (whole v2
// batches, such as a segment's .log) after starting empty and loading
// them in order (ProducerAppendInfo.append, as on log recovery): for each
// producer ID, the last data batch (sequence, last offset, offset delta,
// max timestamp), the coordinator epoch and timestamp of its last
// transaction marker when that came later, and the first offset of its
// open transaction, if any. A marker with a new producer epoch forgets
// the last batch (LastOffset -1), as in Kafka; a control batch emptied by
// the cleaner changes nothing, though its producer gets an entry (all -1)
// as in Kafka. Batches without a producer ID are skipped, and so are
// control batches that are not a readable transaction marker (where Kafka
// fails the load); iteration stops at the first batch that does not
// frame. The entries are ordered by producer ID.
//
// Kafka also drops producers whose last timestamp is older than
// producer.id.expiration.ms when it loads a snapshot; that is the
// reader's business, and nothing here expires.
func ProducerSnapshotFromBatches(batches []byte) []ProducerSnapshotEntry {
	producers := make(map[int64]*producerState)
	var rr kbatch.RecordReader
	it := kbatch.NewBatchIter(batches)
	for it.Next() {
		b := it.Batch()
		if !b.HasProducerID() {
			continue
		}
		pid := b.ProducerID()
		p := producers[pid]
		if p == nil {
			// Kafka keeps the producer's (empty) entry whatever its batch
			// changes (ProducerStateManager.update).
			p = &producerState{epoch: kbatch.NoProducerEpoch, coordinatorEpoch: -1, lastTimestamp: kbatch.NoTimestamp, txnFirstOffset: -1}
			producers[pid] = p
		}
		if b.Control() {
			if rr.Reset(b) != nil || !rr.Next() {
				continue // an emptied control batch changes nothing; an unreadable one is skipped
			}
			r := rr.Record()
			cr, err := kbatch.ParseControlRecord(r)
			if err != nil || (cr.Type != kbatch.ControlAbort && cr.Type != kbatch.ControlCommit) {
				continue
			}
			p.setEpoch(b.ProducerEpoch())
			p.coordinatorEpoch = cr.CoordinatorEpoch
			p.txnFirstOffset = -1
			p.lastTimestamp = r.Timestamp
		} else {
			p.setEpoch(b.ProducerEpoch())
			p.hasBatch = true
			p.lastSeq, p.lastOffset, p.offsetDelta = b.LastSequence(), b.LastOffset(), b.LastOffsetDelta()
			p.lastTimestamp = b.MaxTimestamp()
			if b.Transactional() && p.txnFirstOffset < 0 {
				p.txnFirstOffset = b.BaseOffset()
			}
		}
	}
	entries := make([]ProducerSnapshotEntry, 0, len(producers))
	for pid, p := range producers {
		e := ProducerSnapshotEntry{
			ProducerID: pid, ProducerEpoch: p.epoch,
			LastSequence: kbatch.NoSequence, LastOffset: -1,
			Timestamp: p.lastTimestamp, CoordinatorEpoch: p.coordinatorEpoch,
			CurrentTxnFirstOffset: p.txnFirstOffset,
		}
		if p.hasBatch {
			e.LastSequence, e.LastOffset, e.OffsetDelta = p.lastSeq, p.lastOffset, p.offsetDelta
		}
		entries = append(entries, e)
	}
	slices.SortFunc(entries, func(a, b ProducerSnapshotEntry) int { return cmp.Compare(a.ProducerID, b.ProducerID) })
	return entries
}
