package coordinator

import (
	"context"
	"fmt"
)

// partBytes is what the store counts of a partition beside the view: the
// bytes of its batch rows and of its live remote segments' .log files.
// Retention reads them (store.retentionCuts); no other decision does.
type partBytes struct {
	batches, remote int64
}

// write writes a durable entry's records to the database, as the core
// applied them to root (applyEntry, whose effects e are), and records
// offset (and the entry's checksum, crc) as applied, in the writer's open transaction (it opens one if
// needed; commitTxn commits it: one transaction for many entries writes
// each hot page once, not once per entry). root is the committed view
// after the entry. If write fails, the transaction is rolled back and
// root is ahead of the database: the caller must stop using both (the
// coordinator stops; reopening replays the log from what was committed).
//
// chain is the log's chain after the entry (chainState.step's).
func (s *store) write(ctx context.Context, root *view, offset int64, crc uint32, chain chainState, records []record, e *effects) error {
	s.chain = chain
	if err := s.ensureTxn(ctx); err != nil {
		return fmt.Errorf("coordinator: applying entry %d: %w", offset, err)
	}
	if err := s.writeRecords(ctx, root, records, e); err != nil {
		s.rollbackTxn()
		return fmt.Errorf("coordinator: applying entry %d: %w", offset, err)
	}
	s.sinceFlush++
	if s.sinceFlush >= producerFlushEntries || len(s.dirtyProducers) >= producerFlushStates {
		if err := s.flushProducers(ctx, root, offset); err != nil {
			s.rollbackTxn()
			return err
		}
	}
	meta := []any{
		metaApplied, offset,
		metaAppliedCRC, int64(crc),
		metaProducersAt, s.producersAt,
		metaChainCRC, chainCRCValue(s.chain),
		metaProducersChainCRC, chainCRCValue(s.producersChain),
		metaProducersEpoch, int64(s.producersChain.epoch),
		metaEpoch, int64(root.epoch),
		metaNextPID, root.nextPID,
		metaNextObjectID, root.nextObjectID,
		metaNextProducerID, root.nextProducerID,
		metaSecurityVersion, root.securityVersion,
	}
	if err := s.bulk(ctx, sqlUpsertMetaHead, 2, sqlUpsertMetaTail, meta); err != nil {
		s.rollbackTxn()
		return err
	}
	return nil
}

// writeRecords writes the rows of records. Commits' object and batch rows
// are inserted together, a multi-row statement for many commits, before
// any other record that reads them.
func (s *store) writeRecords(ctx context.Context, root *view, records []record, e *effects) error {
	var objects, rows []any
	flush := func() error {
		if err := s.bulk(ctx, sqlInsertObjectsHead, 8, "", objects); err != nil {
			return err
		}
		if err := s.bulk(ctx, sqlInsertBatchesHead, 7, "", rows); err != nil {
			return err
		}
		objects, rows = objects[:0], rows[:0]
		return nil
	}
	for i, r := range records {
		if e.skip[i] {
			continue
		}
		if c, ok := r.(commitFileRecord); ok {
			objects, rows = s.commitRows(c, objects, rows)
			continue
		}
		if err := flush(); err != nil {
			return err
		}
		var err error
		switch r := r.(type) {
		case createTopicRecord:
			err = s.createTopic(ctx, root, r)
		case addPartitionsRecord:
			err = s.addPartitions(ctx, root.topic(r.TopicID))
		case alterTopicRecord:
			err = s.alterTopic(ctx, root.topic(r.TopicID))
		case scramUpsertRecord, scramDeleteRecord:
			err = s.writeScram(ctx, r)
		case aclCreateRecord, aclDeleteRecord:
			err = s.writeACLs(ctx, r)
		case deleteTopicRecord:
			err = s.deleteTopic(ctx, e.goneTopic(r.TopicID), r.Time)
		case trimRecord:
			err = s.trim(ctx, r)
		case remoteSegmentRecord:
			err = s.addRemote(ctx, r)
		case ownershipRecord:
			err = s.receive(ctx, r)
		case objectsDeletedRecord:
			err = s.forget(ctx, r.ObjectIDs)
		case offsetCommitRecord:
			err = s.commitOffsets(ctx, r)
		case offsetDeleteRecord:
			err = s.deleteOffsets(ctx, r)
		case groupClaimRecord:
			err = s.claimGroup(ctx, r)
		case groupMetadataRecord:
			err = s.putGroupMetadata(ctx, r)
		case txnStateRecord:
			err = s.putTxn(ctx, r)
		case txnMarkerRecord:
			err = s.addMarker(ctx, root, r)
		case compactRecord:
			err = s.compactRows(ctx, r)
		}
		if err != nil {
			return err
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if err := s.writeOpenTxns(ctx, root, e.txnParts); err != nil {
		return err
	}
	var args []any
	for _, pid := range e.touched {
		p := root.part(pid)
		b := s.bytes[pid]
		if p == nil || b == nil {
			continue // its topic is gone: nothing to write
		}
		args = append(args, p.PID, p.TopicID[:], p.Partition, p.LogStart, p.HW, b.batches, p.DisklessStart, b.remote, p.CleanedTo)
	}
	return s.bulk(ctx, sqlUpsertPartitionsHead, 9, sqlUpsertPartitionsTail, args)
}

// commitRows appends a commit's object row and batch rows to the rows of
// the next multi-row inserts, and counts its bytes and producers.
func (s *store) commitRows(r commitFileRecord, objects, rows []any) ([]any, []any) {
	live := int64(len(r.Rows))
	var deadAt any
	if live == 0 {
		deadAt = r.CommitTime
	}
	objects = append(objects, r.ObjectID, r.Key, r.Size, r.Uploader, r.CommitTime, live, deadAt, int32sBlob(r.Owners))
	for _, w := range r.Rows {
		rows = append(rows, w.PID, w.LastOffset, w.LastOffset-w.BaseOffset+1, r.ObjectID, w.BytePos, w.ByteSize, w.MaxTimestamp-r.CommitTime)
		if b := s.bytes[w.PID]; b != nil {
			b.batches += w.ByteSize
		}
	}
	for _, p := range r.Producers {
		s.dirtyProducers[producerKey{p.PID, p.ProducerID}] = struct{}{}
	}
	return objects, rows
}

// createTopic inserts a topic's row, and starts the byte counts of the
// partitions this shard serves.
func (s *store) createTopic(ctx context.Context, root *view, r createTopicRecord) error {
	c := r.Config
	if _, err := s.exec(ctx, sqlInsertTopic, r.TopicID[:], r.Name, r.Partitions, r.FirstPID, c.retentionMs(), c.RetentionBytes, c.flags(),
		c.MaxMessageBytes, int32sBlob(r.Assigned), c.SegmentBytes, c.segmentMs(),
		c.DeleteRetention.Milliseconds(), c.MinCompactionLag.Milliseconds(), c.MaxCompactionLag.Milliseconds(), c.MinCleanableDirtyRatio); err != nil {
		return err
	}
	t := topicState{Partitions: r.Partitions, Assigned: r.Assigned}
	for i := range r.Partitions {
		if t.serves(i) {
			s.bytes[r.FirstPID+int64(i)] = &partBytes{}
		}
	}
	return nil
}

// deleteTopic deletes a topic's rows: its batches (their objects lose
// them, and may die at now), remote segments, partitions and producers.
func (s *store) deleteTopic(ctx context.Context, t *topicState, now int64) error {
	ranges := t.pidRanges()
	for _, r := range ranges {
		lo, hi := r[0], r[1]
		if err := s.releaseRows(ctx, sqlBatchesOfPIDs, now, lo, hi); err != nil {
			return err
		}
		if _, err := s.dropRemote(ctx, sqlRemoteOfPIDs, sqlDeleteRemoteOfPIDs, now, lo, hi); err != nil {
			return err
		}
		for _, q := range []string{sqlDeleteBatchesOfPIDs, sqlDeletePartitionsOfPIDs, sqlDeleteProducersOfPIDs,
			sqlDeleteTxnOpenOfPIDs, sqlDeleteMarkersOfPIDs, sqlDeleteAbortedOfPIDs} {
			if _, err := s.exec(ctx, q, lo, hi); err != nil {
				return err
			}
		}
	}
	if _, err := s.exec(ctx, sqlDeleteTopic, t.ID[:]); err != nil {
		return err
	}
	if _, err := s.exec(ctx, sqlDeleteExtents, t.ID[:]); err != nil {
		return err
	}
	if _, err := s.exec(ctx, sqlDeleteTopicGroupOffset, t.ID[:]); err != nil {
		return err
	}
	for i := range t.Partitions {
		delete(s.bytes, t.pid(i))
	}
	for k := range s.dirtyProducers {
		if t.hasPID(k.PID) {
			delete(s.dirtyProducers, k)
		}
	}
	return nil
}

// trim deletes a partition's batch rows and remote segments wholly below
// its new log start.
func (s *store) trim(ctx context.Context, r trimRecord) error {
	var freed int64
	st, err := s.stmt(ctx, sqlBytesBelow)
	if err != nil {
		return err
	}
	if err := st.QueryRowContext(ctx, r.PID, r.LogStart).Scan(&freed); err != nil {
		return fmt.Errorf("coordinator: trimming: %w", err)
	}
	if err := s.releaseRows(ctx, sqlBatchesBelow, r.Time, r.PID, r.LogStart); err != nil {
		return err
	}
	if _, err := s.exec(ctx, sqlDeleteBatchesBelow, r.PID, r.LogStart); err != nil {
		return err
	}
	if err := s.trimTxns(ctx, r); err != nil {
		return err
	}
	remoteFreed, err := s.dropRemote(ctx, sqlRemoteBelow, sqlDeleteRemoteBelow, r.Time, r.PID, r.LogStart)
	if err != nil {
		return err
	}
	if b := s.bytes[r.PID]; b != nil {
		b.batches -= freed
		b.remote -= remoteFreed
	}
	return nil
}

// receive writes an ownershipRecord: it marks the object's row received,
// or makes a row with no batches, dead since r.Time, if there is none.
func (s *store) receive(ctx context.Context, r ownershipRecord) error {
	res, err := s.exec(ctx, sqlMarkReceived, r.Key)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n > 0 {
		return nil
	}
	_, err = s.exec(ctx, sqlInsertReceived, r.ObjectID, r.Key, r.Time, r.Time, int32sBlob(r.Owners))
	return err
}

// forget deletes the rows of objects that are gone from the bucket.
func (s *store) forget(ctx context.Context, ids []int64) error {
	for _, id := range ids {
		if _, err := s.exec(ctx, sqlForgetObject, id); err != nil {
			return err
		}
	}
	return nil
}

// When the producers table is written (see schema): every
// producerFlushEntries entries, or once producerFlushStates states changed.
const (
	producerFlushEntries = 10000
	producerFlushStates  = 1_000_000
)

// flushProducers writes the changed producer states, inside the current
// transaction, and records them as of offset.
func (s *store) flushProducers(ctx context.Context, root *view, offset int64) error {
	var args []any
	for k := range s.dirtyProducers {
		p := root.producer(k)
		if p == nil {
			continue // its topic was deleted, rows and all
		}
		args = append(args, k.PID, k.ProducerID, p.Epoch, appendProducerBatches(nil, p.Batches))
	}
	if err := s.bulk(ctx, sqlUpsertProducersHead, 4, sqlUpsertProducersTail, args); err != nil {
		return err
	}
	clear(s.dirtyProducers)
	s.producersAt, s.producersChain, s.sinceFlush = offset, s.chain, 0
	return nil
}

// chainCRCValue is how meta keeps a chain's checksum: -1 when not known.
func chainCRCValue(c chainState) int64 {
	if !c.known {
		return -1
	}
	return int64(c.crc)
}

// syncProducers writes the changed producer states now, as of the applied
// offset (before a snapshot or a close), and commits.
func (s *store) syncProducers(ctx context.Context, root *view, applied int64) error {
	if s.producersAt == applied {
		return s.commitTxn(ctx)
	}
	if err := s.ensureTxn(ctx); err != nil {
		return err
	}
	if err := s.flushProducers(ctx, root, applied); err != nil {
		s.rollbackTxn()
		return err
	}
	for _, kv := range []struct {
		k string
		v int64
	}{
		{metaProducersAt, applied},
		{metaProducersChainCRC, chainCRCValue(s.producersChain)},
		{metaProducersEpoch, int64(s.producersChain.epoch)},
	} {
		if _, err := s.exec(ctx, sqlUpsertMeta, kv.k, kv.v); err != nil {
			s.rollbackTxn()
			return err
		}
	}
	return s.commitTxn(ctx)
}

// applyProducers applies what a record changes in producer states only:
// replaying entries that the producers table is behind on.
func (s *store) applyProducers(root *view, r record) {
	if m, ok := r.(txnMarkerRecord); ok {
		if root.part(m.PID) != nil {
			root.applyMarkerEpoch(m)
			s.dirtyProducers[producerKey{m.PID, m.ProducerID}] = struct{}{}
		}
		return
	}
	c, ok := r.(commitFileRecord)
	if !ok {
		return // a deleted topic's rows are gone from the table already
	}
	var live []producerBatch
	for _, p := range c.Producers {
		if root.part(p.PID) != nil { // else its topic is gone by now
			live = append(live, p)
			s.dirtyProducers[producerKey{p.PID, p.ProducerID}] = struct{}{}
		}
	}
	// The producer states only: the partitions (and their open
	// transactions) are as of applied already.
	root.applyProducerBatches(live)
}

// releaseRows takes the batch rows that where (a query of the object IDs
// of the rows to release, with their counts: sqlBatchesBelow and the
// like) selects out of their objects' live counts, marking objects left
// with none dead as of now.
func (s *store) releaseRows(ctx context.Context, where string, now int64, args ...any) error {
	st, err := s.stmt(ctx, where)
	if err != nil {
		return err
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return fmt.Errorf("coordinator: releasing rows: %w", err)
	}
	type count struct{ id, n int64 }
	var counts []count
	for rows.Next() {
		var c count
		if err := rows.Scan(&c.id, &c.n); err != nil {
			rows.Close()
			return err
		}
		counts = append(counts, c)
	}
	if err := rows.Close(); err != nil {
		return err
	}
	for _, c := range counts {
		if _, err := s.exec(ctx, sqlReleaseRows, c.n, now, c.id); err != nil {
			return err
		}
	}
	return nil
}

// addRemote writes a remoteSegmentRecord: the segment's row and its
// files' object row (one live reference, this shard alone), and the
// release of the batch rows wholly at or below its end.
func (s *store) addRemote(ctx context.Context, r remoteSegmentRecord) error {
	size := r.Size + r.IndexSize + r.TimeIndexSize + r.TxnIndexSize
	if _, err := s.exec(ctx, sqlInsertRemoteObject, r.ObjectID, r.Key, size, r.Uploader, r.Time); err != nil {
		return err
	}
	if _, err := s.exec(ctx, sqlInsertRemoteSegment, r.PID, r.EndOffset, r.BaseOffset, r.ID[:], r.Key, r.ObjectID, r.MaxTimestamp,
		r.Size, r.IndexSize, r.TimeIndexSize, r.TxnIndexSize, r.Uploader, r.Time); err != nil {
		return err
	}
	var freed int64
	st, err := s.stmt(ctx, sqlBytesAtOrBelow)
	if err != nil {
		return err
	}
	if err := st.QueryRowContext(ctx, r.PID, r.EndOffset).Scan(&freed); err != nil {
		return fmt.Errorf("coordinator: registering a remote segment: %w", err)
	}
	if err := s.releaseRows(ctx, sqlBatchesAtOrBelow, r.Time, r.PID, r.EndOffset); err != nil {
		return err
	}
	if _, err := s.exec(ctx, sqlDeleteBatchesAtOrBelow, r.PID, r.EndOffset); err != nil {
		return err
	}
	if b := s.bytes[r.PID]; b != nil {
		b.batches -= freed
		b.remote += r.Size
	}
	s.remoteSegments.Add(1)
	s.remoteBytes.Add(r.Size)
	return nil
}

// dropRemote drops the remote segments that sel (a query of their object
// IDs and sizes: sqlRemoteBelow and the like) selects, and whose rows del
// deletes, with the same args: their object rows become dead as of now
// (the lifecycle deletes their files). It returns their .log bytes.
func (s *store) dropRemote(ctx context.Context, sel, del string, now int64, args ...any) (int64, error) {
	st, err := s.stmt(ctx, sel)
	if err != nil {
		return 0, err
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return 0, fmt.Errorf("coordinator: dropping remote segments: %w", err)
	}
	var ids []int64
	var freed int64
	for rows.Next() {
		var id, size int64
		if err := rows.Scan(&id, &size); err != nil {
			rows.Close()
			return 0, err
		}
		ids = append(ids, id)
		freed += size
	}
	if err := rows.Close(); err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, nil
	}
	for _, id := range ids {
		if _, err := s.exec(ctx, sqlKillObject, now, id); err != nil {
			return 0, err
		}
	}
	if _, err := s.exec(ctx, del, args...); err != nil {
		return 0, err
	}
	s.remoteSegments.Add(-int64(len(ids)))
	s.remoteBytes.Add(-freed)
	return freed, nil
}
