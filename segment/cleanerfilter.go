package segment

import (
	"fmt"

	"github.com/diskless-go/diskless/kbatch"
)

// filter returns what a batch becomes (MemoryRecords.filterTo with
// LogCleaner's filter): b itself when it keeps every record and needs no
// delete horizon, a rebuilt batch (in c.buf) with the records it keeps, a
// bare header for an emptied batch that must stay, or nil.
//
// A batch past the mapped part is copied as it is. A data batch of an
// aborted transaction loses every record. A COMMIT or ABORT marker whose
// transaction has no data batch left is stamped with a delete horizon, as
// a tombstone's batch is, and loses its record once the horizon passes.
// An emptied batch stays when it is the last of the round or its
// producer needs it (BatchRetention.RETAIN_EMPTY).
func (c *cleaner) filter(b kbatch.Batch, lastOfRound bool, res *CompactResult) ([]byte, error) {
	n := int64(max(b.NumRecords(), 0))
	res.RecordsRead += n
	if b.BaseOffset() > c.latest {
		// Past a full map, or at or after the first uncleanable offset
		// (the last stable offset): not cleaned.
		return b, nil
	}
	canDiscard := c.canDiscardBatch(b)
	retainEmpty := lastOfRound || (b.HasProducerID() && c.txns.lastOfProducer(b))
	horizon, hasHorizon := b.DeleteHorizon()
	if b.Control() {
		switch {
		case n == 0:
			// Emptied by an earlier clean.
			if retainEmpty {
				return b, nil
			}
			res.BatchesRemoved++
			return nil, nil
		case !canDiscard:
			return b, nil
		case !hasHorizon:
			// A marker whose transaction has no data left: stamped with
			// a delete horizon first.
			horizon = c.now + c.l.cfg.deleteRetentionMs
			c.minHorizon = min(c.minHorizon, horizon)
			if err := c.keepAll(b); err != nil {
				return nil, err
			}
			res.BatchesRewritten++
			return c.rebuild(b, horizon, true)
		case c.now < horizon:
			c.minHorizon = min(c.minHorizon, horizon)
			return b, nil
		}
	}
	if canDiscard {
		// A batch of an aborted transaction, or a marker past its
		// horizon: its records go.
		res.RecordsRemoved += n
		if !retainEmpty {
			res.BatchesRemoved++
			return nil, nil
		}
		if n == 0 {
			return b, nil
		}
		res.BatchesRewritten++
		return c.emptyBatch(b)
	}
	if err := c.rr.Reset(b); err != nil {
		return nil, err
	}
	c.kept = c.kept[:0]
	dropped, tombstone := false, false
	for c.rr.Next() {
		r := c.rr.Record()
		if !c.retain(r, horizon, hasHorizon) {
			dropped = true
			continue
		}
		c.kept = append(c.kept, *r)
		tombstone = tombstone || r.Value == nil
	}
	if err := c.rr.Err(); err != nil {
		return nil, err
	}
	res.RecordsRemoved += n - int64(len(c.kept))
	needHorizon := tombstone && !hasHorizon
	if needHorizon {
		horizon = c.now + c.l.cfg.deleteRetentionMs
	}
	if tombstone {
		c.minHorizon = min(c.minHorizon, horizon)
	}
	if len(c.kept) == 0 {
		// Emptied now or by an earlier clean: kept only as a bare header
		// that some rule needs.
		switch {
		case !retainEmpty:
			res.BatchesRemoved++
			return nil, nil
		case n == 0:
			return b, nil
		}
		res.BatchesRewritten++
		return c.emptyBatch(b)
	}
	if !dropped && !needHorizon {
		return b, nil
	}
	res.BatchesRewritten++
	return c.rebuild(b, horizon, needHorizon || hasHorizon)
}

// keepAll reads every record of b into c.kept.
func (c *cleaner) keepAll(b kbatch.Batch) error {
	if err := c.rr.Reset(b); err != nil {
		return err
	}
	c.kept = c.kept[:0]
	for c.rr.Next() {
		c.kept = append(c.kept, *c.rr.Record())
	}
	if err := c.rr.Err(); err != nil {
		return err
	}
	if len(c.kept) == 0 {
		return fmt.Errorf("segment: the batch at offset %d has no record", b.BaseOffset())
	}
	return nil
}

// retain says whether a record stays (LogCleaner.shouldRetainRecord).
func (c *cleaner) retain(r *kbatch.Record, horizon int64, hasHorizon bool) bool {
	if r.Offset > c.latest {
		return true
	}
	if r.Key == nil {
		return false
	}
	if j, ok := c.keys[string(r.Key)]; ok && r.Offset < c.offsets[j] {
		return false
	}
	return r.Value != nil || !hasHorizon || c.now < horizon
}

// setHeader copies b's header fields that a rebuilt batch keeps into the
// Builder, reset for codec.
func (c *cleaner) setHeader(b kbatch.Batch, codec kbatch.Codec) {
	c.bld.Reset(codec)
	c.bld.SetBaseOffset(b.BaseOffset())
	c.bld.SetPartitionLeaderEpoch(b.PartitionLeaderEpoch())
	c.bld.SetProducer(b.ProducerID(), b.ProducerEpoch(), b.BaseSequence())
	c.bld.SetTransactional(b.Transactional())
	c.bld.SetControl(b.Control())
	c.bld.SetLastOffsetDelta(b.LastOffsetDelta())
	if b.TimestampType() == kbatch.LogAppendTime {
		c.bld.SetLogAppendTime(b.MaxTimestamp())
	}
}

// rebuild builds b with only the records kept: the same base offset, last
// offset delta, producer fields, partition leader epoch, transactional
// flag and codec; the base timestamp is the delete horizon when the batch
// has one, else the first kept record's timestamp, with each record's
// delta recomputed so that its timestamp stays.
func (c *cleaner) rebuild(b kbatch.Batch, horizon int64, setHorizon bool) ([]byte, error) {
	c.setHeader(b, b.Codec())
	origBase := b.BaseTimestamp()
	newBase := origBase + c.kept[0].TimestampDelta
	if setHorizon {
		c.bld.SetDeleteHorizon(horizon)
		newBase = horizon
	} else {
		c.bld.SetBaseTimestamp(newBase)
	}
	for i := range c.kept {
		r := &c.kept[i]
		r.TimestampDelta = origBase + r.TimestampDelta - newBase
		c.bld.AppendRecord(r)
	}
	out, err := c.bld.Build(c.buf[:0])
	if err != nil {
		return nil, err
	}
	c.buf = out
	return out, nil
}

// emptyBatch builds the bare header Kafka keeps for an emptied batch
// (DefaultRecordBatch.writeEmptyHeader): the same offsets, producer fields,
// partition leader epoch, flags and max timestamp, no compression, base
// timestamp -1, no records.
func (c *cleaner) emptyBatch(b kbatch.Batch) ([]byte, error) {
	c.setHeader(b, kbatch.CodecNone)
	c.bld.SetBaseTimestamp(kbatch.NoTimestamp)
	out, err := c.bld.Build(c.buf[:0])
	if err != nil {
		return nil, err
	}
	if b.TimestampType() == kbatch.CreateTime {
		kbatch.Batch(out).SetMaxTimestamp(kbatch.CreateTime, b.MaxTimestamp())
	}
	c.buf = out
	return out, nil
}
