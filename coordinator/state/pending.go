package state

import (
	"encoding/binary"
	"slices"
)

// Pending commits: the parallel commit (docs/parallel-commit.md). A
// broker may commit an object whose PUT is still on its way: the commit
// record is then pending (CommitOp.Pending; record type 26, the payload
// of a commit file record). Applying it assigns offsets and
// stores rows and producer states as any commit does, and queues the
// commit on the shard's pending queue, in log order. Nothing reads past a
// pending commit: a partition's visible high watermark (PartState.Visible)
// stops at the first offset of its oldest pending commit, and every read,
// DeleteRecords, retention, compaction and the last stable offset stay
// below it; offsets are still assigned from the high watermark.
//
// A confirm record (type 27) says the objects of the queue's commits up
// to an object ID landed: they leave the queue and their offsets become
// visible. A leader may apply a confirm to its views before the record is
// durable (the object exists, so no later leader can void the commit), so
// applying one is idempotent. A void record (type 28) says the commit of
// an object at the head of the queue will not land: it and every commit
// queued after it are void. Their rows are dropped; the high watermark
// goes back over their offsets where nothing was assigned after them
// (else they are a gap, as after a compaction); and each producer's state
// in each partition goes back to what it was before its first voided
// batch, unless another record changed it since.
//
//	confirm: through object ID varint
//	void:    from object ID varint | time varint

// ConfirmRecord confirms the pending commits of the objects whose IDs are
// at most Through: their objects landed.
type ConfirmRecord struct {
	Through int64
}

// VoidRecord voids the pending commit of object From, the head of the
// queue once the commits before it are confirmed, and every pending
// commit after it.
type VoidRecord struct {
	From int64
	Time int64
}

func (ConfirmRecord) Kind() recordType { return recConfirm }

func (VoidRecord) Kind() recordType { return recVoid }

func (r ConfirmRecord) AppendTo(b []byte) []byte { return binary.AppendVarint(b, r.Through) }

func (r VoidRecord) AppendTo(b []byte) []byte {
	b = binary.AppendVarint(b, r.From)
	return binary.AppendVarint(b, r.Time)
}

// PendingCommit is a commit on the pending queue: what confirming or
// voiding it changes.
type PendingCommit struct {
	ObjectID int64
	Key      string
	// Held are the offsets it assigned, by partition.
	Held []HeldRange
	// Undo are the producer states its batches changed, as they were
	// before and after it.
	Undo []ProducerUndo
}

// HeldRange is the offsets [From, To) a pending commit holds in the
// partition PID.
type HeldRange struct {
	PID, From, To int64
}

// ProducerUndo is a producer's state in a partition before and after a
// pending commit's batches.
type ProducerUndo struct {
	Key           ProducerKey
	Before, After ProducerState
}

// Visible is the partition's visible high watermark: reads see the
// offsets below it. It is the high watermark, or, while pending commits
// hold offsets here, HeldFrom.
func (p *PartState) Visible() int64 {
	if p.Held > 0 {
		return p.HeldFrom
	}
	return p.HW
}

// PendingQueue returns the pending commits, oldest first (the view's
// own queue, or its parent's while it has changed none): shared, not to
// be changed.
func (v *View) PendingQueue() []PendingCommit {
	for ; v != nil; v = v.Parent {
		if v.Parent == nil || v.queueOwn {
			return v.Queue
		}
	}
	return nil
}

// setQueue replaces the view's pending queue.
func (v *View) setQueue(q []PendingCommit) {
	v.Queue, v.queueOwn = q, true
}

// producerBefore appends to undo the state pb's producer has in v, unless
// seen says it is there already (and marks it).
func (v *View) producerBefore(undo []ProducerUndo, seen map[ProducerKey]bool, pb ProducerBatch) []ProducerUndo {
	k := ProducerKey{pb.PID, pb.ProducerID}
	if seen[k] {
		return undo
	}
	seen[k] = true
	u := ProducerUndo{Key: k, Before: ProducerState{Epoch: -1}}
	if st := v.Producer(k); st != nil {
		u.Before = ProducerState{Epoch: st.Epoch, Batches: slices.Clone(st.Batches)}
	}
	return append(undo, u)
}

// queuePending puts a pending commit, just applied (its producers' states
// before it in undo), on the queue, and holds its offsets.
func (v *View) queuePending(r CommitFileRecord, undo []ProducerUndo) {
	pc := PendingCommit{ObjectID: r.ObjectID, Key: r.Key, Undo: undo}
	for i := range pc.Undo {
		if st := v.Producer(pc.Undo[i].Key); st != nil {
			pc.Undo[i].After = ProducerState{Epoch: st.Epoch, Batches: slices.Clone(st.Batches)}
		}
	}
	at := make(map[int64]int, len(r.Rows)) // PID: its index in pc.Held
	for _, w := range r.Rows {
		if i, ok := at[w.PID]; ok {
			pc.Held[i].From = min(pc.Held[i].From, w.BaseOffset)
			pc.Held[i].To = max(pc.Held[i].To, w.LastOffset+1)
			continue
		}
		at[w.PID] = len(pc.Held)
		pc.Held = append(pc.Held, HeldRange{PID: w.PID, From: w.BaseOffset, To: w.LastOffset + 1})
	}
	v.holdPending(pc)
	v.setQueue(append(slices.Clip(v.PendingQueue()), pc))
}

// holdPending holds a queued commit's offsets in its partitions.
func (v *View) holdPending(pc PendingCommit) {
	for _, h := range pc.Held {
		if p := v.mutPart(h.PID); p != nil {
			if p.Held == 0 {
				p.HeldFrom = h.From
			}
			p.Held++
		}
	}
}

// applyConfirm takes the commits of objects up to through off the queue,
// and returns them. Their partitions' visible high watermarks move up:
// to the end of what the commit held while later pending commits still
// hold offsets there (the next one's start, or below it when offsets not
// pending, a marker's, lie between).
func (v *View) applyConfirm(through int64) []PendingCommit {
	q := v.PendingQueue()
	n := 0
	for n < len(q) && q[n].ObjectID <= through {
		n++
	}
	if n == 0 {
		return nil
	}
	for _, pc := range q[:n] {
		for _, h := range pc.Held {
			if p := v.mutPart(h.PID); p != nil && p.Held > 0 {
				p.Held--
				p.HeldFrom = max(p.HeldFrom, h.To)
			}
		}
	}
	v.setQueue(q[n:])
	return q[:n]
}

// applyVoid voids the queue from object from on (after confirming those
// before it) and returns the commits voided. Their offsets are held no
// longer, and are assigned again where nothing came after them (else they
// are a gap); each producer's state goes back to what it was before its
// first voided batch, when it is still what its last voided batch left.
func (v *View) applyVoid(from int64) []PendingCommit {
	v.applyConfirm(from - 1)
	q := v.PendingQueue()
	if len(q) == 0 {
		return nil
	}
	for _, pc := range q {
		for _, h := range pc.Held {
			if p := v.mutPart(h.PID); p != nil {
				p.Held = 0
			}
		}
	}
	// No one saw the voided offsets nor was answered with them: they were
	// above the visible high watermark. (A leader shows a commit's offsets
	// before the log confirms it, but only once its object landed; a new
	// leader voids only a commit whose object is not there, and the
	// lifecycle deletes an object only after a trim of its batches, which
	// the log holds after their confirm. So only an object damaged from
	// outside, its data lost, can be voided once shown.) Where nothing
	// was assigned after them (a marker of another producer's
	// transaction may have been), the high watermark goes back over them,
	// so that a partition's offsets stay without gaps.
	for i := len(q) - 1; i >= 0; i-- {
		for _, h := range q[i].Held {
			if p := v.mutPart(h.PID); p != nil && p.HW == h.To {
				p.HW = h.From
			}
		}
	}
	first := map[ProducerKey]ProducerState{}
	last := map[ProducerKey]ProducerState{}
	var keys []ProducerKey
	for _, pc := range q {
		for _, u := range pc.Undo {
			if _, ok := first[u.Key]; !ok {
				first[u.Key] = u.Before
				keys = append(keys, u.Key)
			}
			last[u.Key] = u.After
		}
	}
	for _, k := range keys {
		st := v.Producer(k)
		if st == nil || v.Part(k.PID) == nil || !sameProducerState(*st, last[k]) {
			continue // gone, or changed since by another record
		}
		b := first[k]
		m := v.mutProducer(k)
		m.Epoch, m.Batches = b.Epoch, append(m.Batches[:0], b.Batches...)
	}
	for _, pc := range q {
		if rc := v.recentCommitOf(pc.Key); rc != nil {
			if v.Parent != nil {
				c := *rc
				rc = &c
				v.Recent[pc.Key] = rc
			}
			rc.Void = true
		}
	}
	v.setQueue(nil)
	return q
}

// RecentCommit returns the commit of the object key made lately (in
// recentCommitWindow), or nil.
func (v *View) RecentCommit(key string) *RecentCommit { return v.recentCommitOf(key) }

// sameProducerState reports whether two producer states are equal.
func sameProducerState(a, b ProducerState) bool {
	return a.Epoch == b.Epoch && slices.Equal(a.Batches, b.Batches)
}

// AppendPendingCommit appends pc's encoding, as the store keeps the
// queue:
//
//	object ID varint | key (uvarint length, bytes) | n uvarint | per
//	partition: PID varint | from varint | to - from varint | n uvarint |
//	per producer: PID varint | producer ID varint | before | after
//	state: epoch varint | n uvarint | per batch: first seq varint |
//	last seq varint | last offset varint | count varint | timestamp varint
func AppendPendingCommit(b []byte, pc PendingCommit) []byte {
	b = binary.AppendVarint(b, pc.ObjectID)
	b = AppendString(b, pc.Key)
	b = binary.AppendUvarint(b, uint64(len(pc.Held)))
	for _, h := range pc.Held {
		b = binary.AppendVarint(b, h.PID)
		b = binary.AppendVarint(b, h.From)
		b = binary.AppendVarint(b, h.To-h.From)
	}
	b = binary.AppendUvarint(b, uint64(len(pc.Undo)))
	for _, u := range pc.Undo {
		b = binary.AppendVarint(b, u.Key.PID)
		b = binary.AppendVarint(b, u.Key.ProducerID)
		b = appendProducerState(b, u.Before)
		b = appendProducerState(b, u.After)
	}
	return b
}

func appendProducerState(b []byte, s ProducerState) []byte {
	return AppendBatchMetas(binary.AppendVarint(b, int64(s.Epoch)), s.Batches)
}

// AppendBatchMetas appends a producer's retained batches: n uvarint, per
// batch first seq, last seq, last offset, count and timestamp, each a
// varint (also the producers table's blob, store.AppendProducerBatches).
func AppendBatchMetas(b []byte, batches []BatchMeta) []byte {
	b = binary.AppendUvarint(b, uint64(len(batches)))
	for _, m := range batches {
		b = binary.AppendVarint(b, int64(m.FirstSeq))
		b = binary.AppendVarint(b, int64(m.LastSeq))
		b = binary.AppendVarint(b, m.LastOffset)
		b = binary.AppendVarint(b, int64(m.Count))
		b = binary.AppendVarint(b, m.Timestamp)
	}
	return b
}

// BatchMetas reads what AppendBatchMetas wrote.
func (d *Decoder) BatchMetas() []BatchMeta {
	n := d.Count(5)
	out := make([]BatchMeta, 0, n)
	for i := 0; i < n && d.Err == nil; i++ {
		out = append(out, BatchMeta{FirstSeq: d.Int32(), LastSeq: d.Int32(), LastOffset: d.Varint(), Count: d.Int32(), Timestamp: d.Varint()})
	}
	return out
}

// DecodePendingCommit decodes what AppendPendingCommit wrote.
func DecodePendingCommit(b []byte) (PendingCommit, error) {
	d := &Decoder{B: b}
	pc := PendingCommit{ObjectID: d.Varint(), Key: d.string()}
	n := d.Count(3)
	for i := 0; i < n && d.Err == nil; i++ {
		h := HeldRange{PID: d.Varint(), From: d.Varint()}
		h.To = h.From + d.Varint()
		pc.Held = append(pc.Held, h)
	}
	n = d.Count(4)
	for i := 0; i < n && d.Err == nil; i++ {
		u := ProducerUndo{Key: ProducerKey{PID: d.Varint(), ProducerID: d.Varint()}}
		u.Before = d.producerState()
		u.After = d.producerState()
		pc.Undo = append(pc.Undo, u)
	}
	if d.Err == nil && len(d.B) > 0 {
		d.Fail("%d bytes after a pending commit", len(d.B))
	}
	return pc, d.Err
}

func (d *Decoder) producerState() ProducerState {
	s := ProducerState{Epoch: d.int16()}
	if bs := d.BatchMetas(); len(bs) > 0 {
		s.Batches = bs
	}
	return s
}

// LoadPending sets a committed view's pending queue, as the store kept
// it, and holds its offsets: the view's partitions are loaded already.
func (v *View) LoadPending(q []PendingCommit) {
	v.Queue = nil
	for _, pc := range q {
		v.holdPending(pc)
		v.Queue = append(v.Queue, pc)
	}
}
