package store

import (
	"context"
	"fmt"

	"github.com/diskless-go/diskless/coordinator/state"
)

// partBytes is what the store counts of a partition beside the view: the
// bytes of its batch rows and of its live remote segments' .log files.
// Retention reads them (store.retentionCuts); no other decision does.
type partBytes struct {
	batches, remote int64
}

// Write writes a durable entry's records to the database, as the core
// applied them to root (applyEntry, whose effects e are), and records
// offset (and the entry's checksum, crc) as applied, in the writer's open
// transaction (it opens one if needed; CommitTxn commits it: one
// transaction for many entries writes each hot page once, not once per
// entry). root is the committed view after the entry. The rows of the
// partitions it touched, and meta, are written once a transaction, at
// its commit (flushDeferred), from root as it is then: every Write of a
// transaction must get the same root. If write fails, the transaction is
// rolled back and root is ahead of the database: the caller must stop
// using both (the coordinator stops; reopening replays the log from what
// was committed).
//
// chain is the log's chain after the entry (chainState.step's).
//
// With an applier running (applier.go), an entry whose records are all
// deferrable has its statements queued rather than run; any other entry
// waits for the queue to empty first and runs as without one.
func (s *DB) Write(ctx context.Context, root *state.View, offset int64, crc uint32, chain state.ChainState, records []state.Record, e *state.Effects) error {
	if s.ap != nil {
		behind := len(e.Voided) == 0
		for _, r := range records {
			behind = behind && deferrable(r)
		}
		if !behind {
			if err := s.Sync(); err != nil {
				return fmt.Errorf("coordinator: applying entry %d: %w", offset, err)
			}
			s.dirtyTxn = s.txnNo + 1 // this transaction's
		} else {
			s.deferNow = true
			defer func() { s.deferNow = false }()
		}
	}
	s.Chain = chain
	if err := s.ensureTxn(ctx); err != nil {
		return fmt.Errorf("coordinator: applying entry %d: %w", offset, err)
	}
	if err := s.writeRecords(ctx, root, records, e); err != nil {
		s.RollbackTxn()
		return fmt.Errorf("coordinator: applying entry %d: %w", offset, err)
	}
	s.sinceFlush++
	// An entry that voided pending commits took producer states back: they
	// are written with it, so that no replay of producer states crosses a
	// void (which needs the queue as it was).
	if s.sinceFlush >= producerFlushEntries || len(s.dirtyProducers) >= producerFlushStates || len(e.Voided) > 0 {
		if err := s.flushProducers(ctx, root, offset); err != nil {
			s.RollbackTxn()
			return err
		}
	}
	s.metaDue = &deferredMeta{root: root, applied: offset, crc: crc}
	if s.deferring() {
		// Gather must not take these objects for unknown until their
		// rows are committed.
		for i, r := range records {
			if c, ok := r.(state.CommitFileRecord); ok && !e.Skip[i] {
				s.queueKey(c.Key, s.txnNo+1)
			}
		}
	}
	return nil
}

// deferredMeta is what meta says after the last entry Write applied.
type deferredMeta struct {
	root    *state.View
	applied int64
	crc     uint32
}

// flushDeferred writes, before the transaction commits, the rows Write
// left to it: each partition the transaction's entries touched, as the
// committed view has it now (what they left), and meta as of the last
// entry. Only the transaction's own statements could read them before
// the commit, and none does (the partitions table is read at load; meta
// at load and by SyncProducers' own upserts).
func (s *DB) flushDeferred(ctx context.Context) error {
	m := s.metaDue
	if m == nil {
		return nil
	}
	var args []any
	for pid := range s.dirtyParts {
		p := m.root.Part(pid)
		b := s.bytes[pid]
		if p == nil || b == nil {
			continue // its topic is gone: nothing to write
		}
		args = append(args, p.PID, p.TopicID[:], p.Partition, p.LogStart, p.HW, b.batches, p.DisklessStart, b.remote, p.CleanedTo)
	}
	if err := s.bulk(ctx, sqlUpsertPartitionsHead, 9, sqlUpsertPartitionsTail, args); err != nil {
		return err
	}
	root := m.root
	meta := []any{
		MetaApplied, m.applied,
		metaAppliedCRC, int64(m.crc),
		MetaProducersAt, s.ProducersAt,
		metaChainCRC, chainCRCValue(s.Chain),
		MetaProducersChainCRC, chainCRCValue(s.ProducersChain),
		MetaProducersEpoch, int64(s.ProducersChain.Epoch),
		metaEpoch, int64(root.Epoch),
		metaNextPID, root.NextPID,
		metaNextObjectID, root.NextObjectID,
		metaNextProducerID, root.NextProducerID,
		metaSecurityVersion, root.SecurityVersion,
		metaQuotaVersion, root.QuotaVersion,
	}
	if err := s.bulk(ctx, sqlUpsertMetaHead, 2, sqlUpsertMetaTail, meta); err != nil {
		return err
	}
	clear(s.dirtyParts)
	s.metaDue = nil
	return nil
}

// writeRecords writes the rows of records. Commits' object and batch rows
// are inserted together, a multi-row statement for many commits, before
// any other record that reads them.
func (s *DB) writeRecords(ctx context.Context, root *state.View, records []state.Record, e *state.Effects) error {
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
	queued := e.Queued
	for i, r := range records {
		if e.Skip[i] {
			continue
		}
		if c, ok := r.(state.CommitFileRecord); ok {
			objects, rows = s.commitRows(c, objects, rows)
			if c.Pending {
				if _, err := s.exec(ctx, sqlInsertPending, c.ObjectID, state.AppendPendingCommit(nil, queued[0])); err != nil {
					return err
				}
				queued = queued[1:]
			}
			continue
		}
		if err := flush(); err != nil {
			return err
		}
		var err error
		switch r := r.(type) {
		case state.CreateTopicRecord:
			err = s.createTopic(ctx, root, r)
		case state.AddPartitionsRecord:
			err = s.addPartitions(ctx, root.Topic(r.TopicID))
		case state.AlterTopicRecord:
			err = s.alterTopic(ctx, root.Topic(r.TopicID))
		case state.ScramUpsertRecord, state.ScramDeleteRecord:
			err = s.writeScram(ctx, r)
		case state.ACLCreateRecord, state.ACLDeleteRecord:
			err = s.writeACLs(ctx, r)
		case state.QuotaSetRecord, state.QuotaRemoveRecord:
			err = s.writeQuota(ctx, r)
		case state.DeleteTopicRecord:
			err = s.deleteTopic(ctx, e.GoneTopic(r.TopicID), r.Time)
		case state.TrimRecord:
			err = s.trim(ctx, r)
		case state.RemoteSegmentRecord:
			err = s.addRemote(ctx, r)
		case state.OwnershipRecord:
			err = s.receive(ctx, r)
		case state.ObjectsDeletedRecord:
			err = s.forget(ctx, r.ObjectIDs)
		case state.OffsetCommitRecord:
			err = s.commitOffsets(ctx, r)
		case state.OffsetDeleteRecord:
			err = s.deleteOffsets(ctx, r)
		case state.GroupClaimRecord:
			err = s.claimGroup(ctx, r)
		case state.GroupMetadataRecord:
			err = s.putGroupMetadata(ctx, r)
		case state.TxnStateRecord:
			err = s.putTxn(ctx, r)
		case state.TxnMarkerRecord:
			err = s.addMarker(ctx, root, r)
		case state.CompactRecord:
			err = s.compactRows(ctx, r)
		case state.ConfirmRecord:
			_, err = s.exec(ctx, sqlDeletePendingTo, r.Through)
		case state.VoidRecord:
			err = s.void(ctx, r, e.Voided)
		}
		if err != nil {
			return err
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if err := s.writeOpenTxns(ctx, root, e.TxnParts); err != nil {
		return err
	}
	for _, pid := range e.Touched {
		s.dirtyParts[pid] = struct{}{} // written at the commit (flushDeferred)
	}
	return nil
}

// void writes a void record: every pending commit left is confirmed or
// void, so the queue's rows go; the voided commits' batch rows go too,
// their objects hold no batch from now, and their producers' states,
// which the void took back, are marked to be written with this entry
// (Write).
func (s *DB) void(ctx context.Context, r state.VoidRecord, voided []state.PendingCommit) error {
	if _, err := s.exec(ctx, sqlDeletePending); err != nil {
		return err
	}
	sum, err := s.Stmt(ctx, sqlVoidBytes)
	if err != nil {
		return err
	}
	for _, pc := range voided {
		for _, h := range pc.Held {
			var n int64
			if err := sum.QueryRowContext(ctx, h.PID, h.From, h.To, pc.ObjectID).Scan(&n); err != nil {
				return fmt.Errorf("coordinator: voiding object %d: %w", pc.ObjectID, err)
			}
			if b := s.bytes[h.PID]; b != nil {
				b.batches -= n
			}
			if _, err := s.exec(ctx, sqlVoidBatches, h.PID, h.From, h.To, pc.ObjectID); err != nil {
				return err
			}
		}
		if _, err := s.exec(ctx, sqlVoidObject, r.Time, pc.ObjectID); err != nil {
			return err
		}
		for _, u := range pc.Undo {
			s.dirtyProducers[u.Key] = struct{}{}
		}
	}
	return nil
}

// commitRows appends a commit's object row and batch rows to the rows of
// the next multi-row inserts, and counts its bytes and producers.
func (s *DB) commitRows(r state.CommitFileRecord, objects, rows []any) ([]any, []any) {
	live := int64(len(r.Rows))
	var deadAt any
	if live == 0 {
		deadAt = r.CommitTime
	}
	objects = append(objects, r.ObjectID, r.Key, r.Size, r.Uploader, r.CommitTime, live, deadAt, Int32sBlob(r.Owners))
	for _, w := range r.Rows {
		rows = append(rows, w.PID, w.LastOffset, w.LastOffset-w.BaseOffset+1, r.ObjectID, w.BytePos, w.ByteSize, w.MaxTimestamp-r.CommitTime)
		if b := s.bytes[w.PID]; b != nil {
			b.batches += w.ByteSize
		}
	}
	for _, p := range r.Producers {
		s.dirtyProducers[state.ProducerKey{PID: p.PID, ProducerID: p.ProducerID}] = struct{}{}
	}
	return objects, rows
}

// createTopic inserts a topic's row, and starts the byte counts of the
// partitions this shard serves.
func (s *DB) createTopic(ctx context.Context, root *state.View, r state.CreateTopicRecord) error {
	c := r.Config
	if _, err := s.exec(ctx, sqlInsertTopic, r.TopicID[:], r.Name, r.Partitions, r.FirstPID, c.RetentionMs(), c.RetentionBytes, c.Flags(),
		c.MaxMessageBytes, Int32sBlob(r.Assigned), c.SegmentBytes, c.SegmentMs(),
		c.DeleteRetention.Milliseconds(), c.MinCompactionLag.Milliseconds(), c.MaxCompactionLag.Milliseconds(), c.MinCleanableDirtyRatio); err != nil {
		return err
	}
	t := state.TopicState{Partitions: r.Partitions, Assigned: r.Assigned}
	for i := range r.Partitions {
		if t.Serves(i) {
			s.bytes[r.FirstPID+int64(i)] = &partBytes{}
		}
	}
	return nil
}

// deleteTopic deletes a topic's rows: its batches (their objects lose
// them, and may die at now), remote segments, partitions and producers.
func (s *DB) deleteTopic(ctx context.Context, t *state.TopicState, now int64) error {
	ranges := t.PIDRanges()
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
		delete(s.bytes, t.PID(i))
	}
	for k := range s.dirtyProducers {
		if t.HasPID(k.PID) {
			delete(s.dirtyProducers, k)
		}
	}
	return nil
}

// dropBatches deletes the batch rows of pid up to offset (below it or at
// and below it, as the three queries say: the bytes they hold, the rows
// to release, the delete) and releases their objects' references at now.
// It returns the bytes the rows held; what names the work in errors.
func (s *DB) dropBatches(ctx context.Context, what, bytesQ, rowsQ, deleteQ string, now, pid, offset int64) (int64, error) {
	var freed int64
	st, err := s.Stmt(ctx, bytesQ)
	if err != nil {
		return 0, err
	}
	if err := st.QueryRowContext(ctx, pid, offset).Scan(&freed); err != nil {
		return 0, fmt.Errorf("coordinator: %s: %w", what, err)
	}
	if err := s.releaseRows(ctx, rowsQ, now, pid, offset); err != nil {
		return 0, err
	}
	if _, err := s.exec(ctx, deleteQ, pid, offset); err != nil {
		return 0, err
	}
	return freed, nil
}

// trim deletes a partition's batch rows and remote segments wholly below
// its new log start.
func (s *DB) trim(ctx context.Context, r state.TrimRecord) error {
	freed, err := s.dropBatches(ctx, "trimming", sqlBytesBelow, sqlBatchesBelow, sqlDeleteBatchesBelow, r.Time, r.PID, r.LogStart)
	if err != nil {
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
func (s *DB) receive(ctx context.Context, r state.OwnershipRecord) error {
	res, err := s.exec(ctx, sqlMarkReceived, r.Key)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n > 0 {
		return nil
	}
	_, err = s.exec(ctx, sqlInsertReceived, r.ObjectID, r.Key, r.Time, r.Time, Int32sBlob(r.Owners))
	return err
}

// forget deletes the rows of objects that are gone from the bucket.
func (s *DB) forget(ctx context.Context, ids []int64) error {
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
func (s *DB) flushProducers(ctx context.Context, root *state.View, offset int64) error {
	var args []any
	for k := range s.dirtyProducers {
		p := root.Producer(k)
		if p == nil {
			continue // its topic was deleted, rows and all
		}
		args = append(args, k.PID, k.ProducerID, p.Epoch, AppendProducerBatches(nil, p.Batches))
	}
	if err := s.bulk(ctx, sqlUpsertProducersHead, 4, sqlUpsertProducersTail, args); err != nil {
		return err
	}
	clear(s.dirtyProducers)
	s.ProducersAt, s.ProducersChain, s.sinceFlush = offset, s.Chain, 0
	return nil
}

// chainCRCValue is how meta keeps a chain's checksum: -1 when not known.
func chainCRCValue(c state.ChainState) int64 {
	if !c.Known {
		return -1
	}
	return int64(c.CRC)
}

// SyncProducers writes the changed producer states now, as of the applied
// offset (before a snapshot or a close), and commits.
func (s *DB) SyncProducers(ctx context.Context, root *state.View, applied int64) error {
	if s.ProducersAt == applied {
		return s.CommitTxn(ctx)
	}
	if err := s.ensureTxn(ctx); err != nil {
		return err
	}
	if err := s.flushProducers(ctx, root, applied); err != nil {
		s.RollbackTxn()
		return err
	}
	for _, kv := range []struct {
		k string
		v int64
	}{
		{MetaProducersAt, applied},
		{MetaProducersChainCRC, chainCRCValue(s.ProducersChain)},
		{MetaProducersEpoch, int64(s.ProducersChain.Epoch)},
	} {
		if _, err := s.exec(ctx, sqlUpsertMeta, kv.k, kv.v); err != nil {
			s.RollbackTxn()
			return err
		}
	}
	return s.CommitTxn(ctx)
}

// ApplyProducers applies what a record changes in producer states only:
// replaying entries that the producers table is behind on.
func (s *DB) ApplyProducers(root *state.View, r state.Record) {
	if m, ok := r.(state.TxnMarkerRecord); ok {
		if root.Part(m.PID) != nil {
			root.ApplyMarkerEpoch(m)
			s.dirtyProducers[state.ProducerKey{PID: m.PID, ProducerID: m.ProducerID}] = struct{}{}
		}
		return
	}
	c, ok := r.(state.CommitFileRecord)
	if !ok {
		return // a deleted topic's rows are gone from the table already
	}
	var live []state.ProducerBatch
	for _, p := range c.Producers {
		if root.Part(p.PID) != nil { // else its topic is gone by now
			live = append(live, p)
			s.dirtyProducers[state.ProducerKey{PID: p.PID, ProducerID: p.ProducerID}] = struct{}{}
		}
	}
	// The producer states only: the partitions (and their open
	// transactions) are as of applied already.
	root.ApplyProducerBatches(live)
}

// releaseRows takes the batch rows that where (a query of the object IDs
// of the rows to release, with their counts: sqlBatchesBelow and the
// like) selects out of their objects' live counts, marking objects left
// with none dead as of now.
func (s *DB) releaseRows(ctx context.Context, where string, now int64, args ...any) error {
	st, err := s.Stmt(ctx, where)
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
func (s *DB) addRemote(ctx context.Context, r state.RemoteSegmentRecord) error {
	size := r.Size + r.IndexSize + r.TimeIndexSize + r.TxnIndexSize
	if _, err := s.exec(ctx, sqlInsertRemoteObject, r.ObjectID, r.Key, size, r.Uploader, r.Time); err != nil {
		return err
	}
	if _, err := s.exec(ctx, sqlInsertRemoteSegment, r.PID, r.EndOffset, r.BaseOffset, r.ID[:], r.Key, r.ObjectID, r.MaxTimestamp,
		r.Size, r.IndexSize, r.TimeIndexSize, r.TxnIndexSize, r.Uploader, r.Time); err != nil {
		return err
	}
	freed, err := s.dropBatches(ctx, "registering a remote segment", sqlBytesAtOrBelow, sqlBatchesAtOrBelow, sqlDeleteBatchesAtOrBelow, r.Time, r.PID, r.EndOffset)
	if err != nil {
		return err
	}
	if b := s.bytes[r.PID]; b != nil {
		b.batches -= freed
		b.remote += r.Size
	}
	s.RemoteSegments.Add(1)
	s.RemoteBytes.Add(r.Size)
	return nil
}

// dropRemote drops the remote segments that sel (a query of their object
// IDs and sizes: sqlRemoteBelow and the like) selects, and whose rows del
// deletes, with the same args: their object rows become dead as of now
// (the lifecycle deletes their files). It returns their .log bytes.
func (s *DB) dropRemote(ctx context.Context, sel, del string, now int64, args ...any) (int64, error) {
	st, err := s.Stmt(ctx, sel)
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
	s.RemoteSegments.Add(-int64(len(ids)))
	s.RemoteBytes.Add(-freed)
	return freed, nil
}
