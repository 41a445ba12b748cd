package segment

// What compaction knows of transactions (docs/formats.md, "Compaction", rule 5;
// Kafka's LogCleaner.CleanedTransactionMetadata), without a .txnindex: a
// scan of the batch headers of the whole log, and of the one record of each
// control batch.

import (
	"fmt"
	"math"
	"sort"

	"github.com/diskless-go/diskless/kbatch"
)

// txnSpan is an aborted transaction of one producer: its first offset
// and the offset of its ABORT marker.
type txnSpan struct{ first, marker int64 }

// producerTail is what Kafka's producer state keeps of a producer that
// the cleaner reads (ProducerStateEntry): its latest epoch and the last
// offset of its last data batch of that epoch.
type producerTail struct {
	epoch int16
	// lastData is -1 when the producer has no data batch since its epoch
	// last changed (a marker that bumped the epoch clears it).
	lastData int64
}

// txnIndex is what one scan of the log learnt of its transactions and
// producers. A transactional data batch belongs to its producer's open
// transaction, which the producer's first transactional batch opens and
// its next COMMIT or ABORT marker closes (Kafka's ProducerAppendInfo).
type txnIndex struct {
	// aborted holds each producer's aborted transactions, in offset
	// order: what Kafka's .txnindex files hold.
	aborted map[int64][]txnSpan
	// lso is the last stable offset: the first offset of the earliest
	// transaction that no marker closes, or MaxInt64 when there is none
	// (the log end offset bounds it then).
	lso int64
	// producers has an entry for each producer id in the log.
	producers map[int64]producerTail
}

// scanTransactions reads every batch header of the views, in order, and
// the record of each control batch.
func scanTransactions(views []segView, done func() error) (*txnIndex, error) {
	x := &txnIndex{aborted: make(map[int64][]txnSpan), lso: math.MaxInt64, producers: make(map[int64]producerTail)}
	open := make(map[int64]int64) // producer id -> first offset of its open transaction
	var rr kbatch.RecordReader
	var win []byte // one read window for all the segments
	for _, v := range views {
		sc := newBatchScanner(v.seg.file, 0, v.size, sequentialWindow)
		sc.win = win
		for sc.Next() {
			if err := done(); err != nil {
				return nil, err
			}
			fb := sc.Batch()
			h := fb.header()
			pid := h.ProducerID()
			if pid <= kbatch.NoProducerID {
				continue
			}
			p, ok := x.producers[pid]
			if !ok {
				p = producerTail{epoch: h.ProducerEpoch(), lastData: -1}
			}
			if p.epoch != h.ProducerEpoch() {
				p = producerTail{epoch: h.ProducerEpoch(), lastData: -1} // maybeUpdateProducerEpoch
			}
			if !h.Control() {
				p.lastData = fb.lastOffset()
				x.producers[pid] = p
				if _, ok := open[pid]; !ok && h.Transactional() {
					open[pid] = fb.baseOffset()
				}
				continue
			}
			if h.NumRecords() == 0 {
				continue // emptied by an earlier clean: producer state ignores it
			}
			data, err := sc.Bytes()
			if err != nil {
				return nil, err
			}
			typ, err := controlType(&rr, kbatch.Batch(data))
			if err != nil || (typ != kbatch.ControlAbort && typ != kbatch.ControlCommit) {
				continue // not a transaction marker (Kafka would not append it)
			}
			x.producers[pid] = p
			first, ok := open[pid]
			if !ok {
				continue // a marker of a transaction with no data here
			}
			delete(open, pid)
			if typ == kbatch.ControlAbort {
				x.aborted[pid] = append(x.aborted[pid], txnSpan{first: first, marker: fb.baseOffset()})
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("segment: scanning %s for transactions: %w", v.seg.file.Name(), err)
		}
		win = sc.win[:0]
	}
	for _, first := range open {
		x.lso = min(x.lso, first)
	}
	return x, nil
}

// controlType returns the type of the first record of control batch b.
func controlType(rr *kbatch.RecordReader, b kbatch.Batch) (kbatch.ControlType, error) {
	if err := rr.Reset(b); err != nil {
		return kbatch.ControlUnknown, err
	}
	if !rr.Next() {
		if err := rr.Err(); err != nil {
			return kbatch.ControlUnknown, err
		}
		return kbatch.ControlUnknown, fmt.Errorf("segment: control batch at offset %d has no record", b.BaseOffset())
	}
	cr, err := kbatch.ParseControlRecord(rr.Record())
	if err != nil {
		return kbatch.ControlUnknown, err
	}
	return cr.Type, nil
}

// isAborted reports whether the transactional data batch of producer pid
// at offset belongs to an aborted transaction.
func (x *txnIndex) isAborted(pid, offset int64) bool {
	spans := x.aborted[pid]
	i := sort.Search(len(spans), func(i int) bool { return spans[i].marker > offset })
	return i < len(spans) && spans[i].first <= offset
}

// lastOfProducer reports whether b must stay, emptied if need be, to keep
// its producer's state (LogCleaner's isBatchLastRecordOfProducer): it holds
// the producer's last data offset, or, when the producer has no data batch
// of its latest epoch, b is a marker of that epoch. A Log tracks no
// producer expiry, so every producer counts as active.
func (x *txnIndex) lastOfProducer(b kbatch.Batch) bool {
	p, ok := x.producers[b.ProducerID()]
	switch {
	case !ok:
		return false
	case p.lastData >= 0:
		return b.LastOffset() == p.lastData
	}
	return b.Control() && b.ProducerEpoch() == p.epoch
}

// canDiscardBatch applies Kafka's transaction rules to the next batch of
// the clean, in offset order (CleanedTransactionMetadata.onBatchRead and
// onControlBatchRead). A data batch can be discarded whole when its
// transaction was aborted. A COMMIT or ABORT marker can be discarded (once
// its delete horizon passes) when no data batch of its transaction was
// read before it in this clean; an emptied control batch always can.
// Other control batches stay.
func (c *cleaner) canDiscardBatch(b kbatch.Batch) bool {
	pid := b.ProducerID()
	if !b.Control() {
		if !b.Transactional() || pid <= kbatch.NoProducerID {
			return false
		}
		c.txnSeen[pid] = true
		return c.txns.isAborted(pid, b.BaseOffset())
	}
	if b.NumRecords() == 0 {
		return true
	}
	typ, err := controlType(&c.rr, b)
	if err != nil || (typ != kbatch.ControlAbort && typ != kbatch.ControlCommit) {
		return false
	}
	seen := c.txnSeen[pid]
	delete(c.txnSeen, pid)
	return !seen
}
