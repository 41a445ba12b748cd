package coordinator

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal"
)

// Transactions, as records of the metadata log (Kafka's transaction
// coordinator and the partition side of KIP-98 and KIP-890 part 1).
//
// A transactional ID lives in one shard, ShardOfTxn (the FNV-1a hash of
// the ID modulo the shards, as groups), whichever shards serve its
// partitions. Its whole state is one record, txnStateRecord, written at
// every transition and applied by replacing what the view had: the
// producer ID and epoch, the state (Empty, Ongoing, PrepareCommit,
// PrepareAbort, CompleteCommit, CompleteAbort), the timeout, when the
// transaction began, its partitions, its groups and the offsets committed
// in it (TxnOffsetCommit: they become the groups' offsets only when it
// commits). The view and the table txns mirror it.
//
// The partitions' side is in their own shards, in two records:
//
//   - txnBeginRecord opens a producer's transaction in a partition: the
//     verification of KIP-890 part 1, written when AddPartitionsToTxn
//     adds the partition. A transactional batch is accepted only while
//     its producer's transaction is open in the partition at its epoch,
//     and the first one accepted sets the transaction's first offset
//     there (what holds the last stable offset back). A write that comes
//     after the transaction ended finds it closed and is refused with
//     INVALID_TXN_STATE, so it cannot hang a partition.
//   - txnMarkerRecord ends it: a COMMIT or ABORT control batch at the
//     partition's next offset (a real offset, as in Kafka), whose bytes
//     are a function of the record (kbatch.AppendEndTxnMarker): markers
//     are rows of the batches table with no object (object_id
//     markerObject) and a row of txn_markers, and cost no PUT. An abort
//     of a transaction that wrote batches adds a row to the
//     aborted-transactions index (aborted_txns), which read_committed
//     fetches return.
//
// A partition's open transactions are in its partState (Open) and in the
// table txn_open. Its last stable offset is the first offset of the
// oldest open transaction that wrote, else the high watermark.
//
// Ending a transaction is two-phase across shards: the transaction's
// shard records PrepareCommit or PrepareAbort first; then the markers go
// to each partition's shard (and, on commit, the offsets to each group's
// shard), retried until written; then the transaction's shard records
// the Complete state. A marker for a transaction no longer open in the
// partition is a no-op, so the second phase can run again, from the
// start, after a crash anywhere in it (the shard's leader finishes every
// prepared transaction it finds: TxnExpire): a transaction is finished or
// aborted, never half of both. A transaction whose partitions and groups
// are all in its own shard (every transaction of a single-shard
// coordinator) needs no PREPARE: its markers, its offsets and its
// Complete state are one entry, applied whole or not at all, so EndTxn
// costs one log append instead of three.

// TxnState is a transaction's state, as Kafka's TransactionState.
type TxnState uint8

// The states. The values are part of the format.
const (
	TxnEmpty TxnState = iota
	TxnOngoing
	TxnPrepareCommit
	TxnPrepareAbort
	TxnCompleteCommit
	TxnCompleteAbort
	// TxnDead is an expired transactional ID's (Options.TxnIDExpiration):
	// its record removes the state; no ID is ever in it.
	TxnDead
)

// String returns Kafka's name of the state.
func (s TxnState) String() string {
	switch s {
	case TxnEmpty:
		return "Empty"
	case TxnOngoing:
		return "Ongoing"
	case TxnPrepareCommit:
		return "PrepareCommit"
	case TxnPrepareAbort:
		return "PrepareAbort"
	case TxnCompleteCommit:
		return "CompleteCommit"
	case TxnCompleteAbort:
		return "CompleteAbort"
	case TxnDead:
		return "Dead"
	}
	return "Unknown"
}

// preparing reports whether s is PrepareCommit or PrepareAbort.
func (s TxnState) preparing() bool { return s == TxnPrepareCommit || s == TxnPrepareAbort }

// Transaction is a transactional ID's state.
type Transaction struct {
	// ID is the transactional ID.
	ID string
	// ProducerID and Epoch are the producer's.
	ProducerID int64
	Epoch      int16
	// State is where the transaction is.
	State TxnState
	// TimeoutMs is transaction.timeout.ms: an Ongoing transaction older
	// is aborted by the coordinator (TxnExpire).
	TimeoutMs int32
	// StartTime is when the transaction began (its first partition or
	// group), and UpdateTime when the state last changed, in Unix
	// milliseconds.
	StartTime, UpdateTime int64
	// Partitions are the partitions in the transaction, by topic ID then
	// partition.
	Partitions []wal.TopicPartition
	// Groups are the consumer groups in it (AddOffsetsToTxn), sorted, and
	// Offsets the offsets committed in it (TxnOffsetCommit), by group,
	// topic and partition: on commit they become the groups' offsets.
	Groups  []string
	Offsets []TxnOffset
}

// TxnOffset is an offset committed in a transaction.
type TxnOffset struct {
	Group string
	GroupOffset
}

// clone returns a copy that shares nothing with t.
func (t *Transaction) clone() *Transaction {
	c := *t
	c.Partitions = slices.Clone(t.Partitions)
	c.Groups = slices.Clone(t.Groups)
	c.Offsets = slices.Clone(t.Offsets)
	return &c
}

// openTxn is a producer's transaction open in a partition: First is the
// offset of its first batch there, -1 before it wrote one.
type openTxn struct {
	ProducerID int64
	Epoch      int16
	First      int64
}

// markerObject is the object ID of the batch rows of transaction markers:
// no object holds them.
const markerObject = -1

// markerSize is the size of a transaction marker batch.
const markerSize = 78

// ShardOfTxn returns the shard that holds a transactional ID among n:
// the FNV-1a hash of the ID modulo n, as ShardOfGroup. Part of the
// format.
func ShardOfTxn(id string, n int) int { return ShardOfGroup(id, n) }

// --- records --------------------------------------------------------------

// txnStateRecord is a transactional ID's whole state after a transition.
type txnStateRecord struct {
	Txn Transaction
}

// txnBeginRecord opens a producer's transaction in a partition.
type txnBeginRecord struct {
	PID        int64
	ProducerID int64
	Epoch      int16
}

// txnMarkerRecord ends a producer's transaction in a partition with a
// marker at Offset (the partition's high watermark). First is the
// transaction's first offset there, -1 if it wrote nothing.
type txnMarkerRecord struct {
	PID              int64
	ProducerID       int64
	Epoch            int16
	Commit           bool
	CoordinatorEpoch int32
	Offset           int64
	First            int64
	Time             int64
}

func (txnStateRecord) kind() recordType  { return recTxnState }
func (txnBeginRecord) kind() recordType  { return recTxnBegin }
func (txnMarkerRecord) kind() recordType { return recTxnMarker }

func (r txnStateRecord) appendTo(b []byte) []byte {
	t := &r.Txn
	b = appendString(b, t.ID)
	b = binary.AppendVarint(b, t.ProducerID)
	b = binary.AppendVarint(b, int64(t.Epoch))
	b = append(b, byte(t.State))
	b = binary.AppendVarint(b, int64(t.TimeoutMs))
	b = binary.AppendVarint(b, t.StartTime)
	b = binary.AppendVarint(b, t.UpdateTime)
	b = binary.AppendUvarint(b, uint64(len(t.Partitions)))
	for _, p := range t.Partitions {
		b = append(b, p.TopicID[:]...)
		b = binary.AppendVarint(b, int64(p.Partition))
	}
	b = binary.AppendUvarint(b, uint64(len(t.Groups)))
	for _, g := range t.Groups {
		b = appendString(b, g)
	}
	b = binary.AppendUvarint(b, uint64(len(t.Offsets)))
	for _, o := range t.Offsets {
		b = appendString(b, o.Group)
		b = appendGroupOffset(b, o.GroupOffset)
	}
	return b
}

func (d *decoder) txnState() txnStateRecord {
	var t Transaction
	t.ID, t.ProducerID, t.Epoch = d.string(), d.varint(), d.int16()
	st := d.byte()
	if st > byte(TxnDead) && d.err == nil {
		d.fail("unknown transaction state %d", st)
	}
	t.State = TxnState(st)
	t.TimeoutMs, t.StartTime, t.UpdateTime = d.int32(), d.varint(), d.varint()
	if n := d.count(17); n > 0 {
		t.Partitions = make([]wal.TopicPartition, n)
		for i := range t.Partitions {
			t.Partitions[i] = wal.TopicPartition{TopicID: d.uuid(), Partition: d.int32()}
		}
	}
	if n := d.count(1); n > 0 {
		t.Groups = make([]string, n)
		for i := range t.Groups {
			t.Groups[i] = d.string()
		}
	}
	if n := d.count(22); n > 0 {
		t.Offsets = make([]TxnOffset, n)
		for i := range t.Offsets {
			t.Offsets[i].Group = d.string()
			t.Offsets[i].GroupOffset = d.groupOffset()
		}
	}
	if t.ID == "" && d.err == nil {
		d.fail("a transaction with no ID")
	}
	return txnStateRecord{Txn: t}
}

func (r txnBeginRecord) appendTo(b []byte) []byte {
	b = binary.AppendVarint(b, r.PID)
	b = binary.AppendVarint(b, r.ProducerID)
	return binary.AppendVarint(b, int64(r.Epoch))
}

func (d *decoder) txnBegin() txnBeginRecord {
	return txnBeginRecord{PID: d.varint(), ProducerID: d.varint(), Epoch: d.int16()}
}

func (r txnMarkerRecord) appendTo(b []byte) []byte {
	b = binary.AppendVarint(b, r.PID)
	b = binary.AppendVarint(b, r.ProducerID)
	b = binary.AppendVarint(b, int64(r.Epoch))
	b = append(b, boolByte(r.Commit))
	b = binary.AppendVarint(b, int64(r.CoordinatorEpoch))
	b = binary.AppendVarint(b, r.Offset)
	b = binary.AppendVarint(b, r.First)
	return binary.AppendVarint(b, r.Time)
}

func (d *decoder) txnMarker() txnMarkerRecord {
	r := txnMarkerRecord{PID: d.varint(), ProducerID: d.varint(), Epoch: d.int16()}
	switch c := d.byte(); c {
	case 0, 1:
		r.Commit = c == 1
	default:
		d.fail("a marker flag %d", c)
	}
	r.CoordinatorEpoch, r.Offset, r.First, r.Time = d.int32(), d.varint(), d.varint(), d.varint()
	if d.err == nil && (r.Offset < 0 || r.First < -1 || r.First > r.Offset) {
		d.fail("a marker at %d of a transaction from %d", r.Offset, r.First)
	}
	return r
}

// --- the view -------------------------------------------------------------

// txn returns a transactional ID's state, nil if it has none.
func (v *view) txn(id string) *Transaction {
	for ; v != nil; v = v.parent {
		if t, ok := v.txns[id]; ok {
			return t
		}
	}
	return nil
}

// openOf returns the index of producer's open transaction in p.Open, -1
// if none.
func (p *partState) openOf(producer int64) int {
	return slices.IndexFunc(p.Open, func(o openTxn) bool { return o.ProducerID == producer })
}

// lastStable is the partition's last stable offset: never below the log
// start offset (DeleteRecords may move it past an open transaction's
// first batch, as in Kafka).
func (p *partState) lastStable() int64 {
	lso := p.HW
	for _, o := range p.Open {
		if o.First >= 0 {
			lso = min(lso, o.First)
		}
	}
	return max(lso, p.LogStart)
}

// applyTxn applies a transaction record to the view.
func (v *view) applyTxn(r record) {
	switch r := r.(type) {
	case txnStateRecord:
		switch {
		case r.Txn.State != TxnDead:
			v.txns[r.Txn.ID] = r.Txn.clone()
		case v.parent == nil:
			delete(v.txns, r.Txn.ID)
		default:
			v.txns[r.Txn.ID] = nil // gone, over the parent's
		}
		v.nextProducerID = max(v.nextProducerID, r.Txn.ProducerID+1)
	case txnBeginRecord:
		p := v.mutPart(r.PID)
		if p == nil {
			return
		}
		p.Open = slices.Clone(p.Open)
		if i := p.openOf(r.ProducerID); i >= 0 {
			p.Open[i].Epoch = r.Epoch
			return
		}
		p.Open = append(p.Open, openTxn{ProducerID: r.ProducerID, Epoch: r.Epoch, First: -1})
	case txnMarkerRecord:
		p := v.mutPart(r.PID)
		if p == nil {
			return
		}
		p.HW = max(p.HW, r.Offset+1)
		if i := p.openOf(r.ProducerID); i >= 0 {
			p.Open = slices.Delete(slices.Clone(p.Open), i, i+1)
		}
		v.applyMarkerEpoch(r)
	}
}

// applyMarkerEpoch raises the producer's epoch in the partition to the
// marker's, as Kafka's marker does: a timeout's abort is written under a
// new epoch, and the old one's late writes are then fenced.
func (v *view) applyMarkerEpoch(r txnMarkerRecord) {
	k := producerKey{r.PID, r.ProducerID}
	if st := v.producer(k); st != nil && st.Epoch >= r.Epoch {
		return
	}
	st := v.mutProducer(k)
	st.Epoch, st.Batches = r.Epoch, st.Batches[:0]
}

// applyTxnFirst sets the first offset of the open transactions that the
// batches of a commit start: a batch of a producer with an open
// transaction is transactional (checkBatch sees to it).
func (v *view) applyTxnFirst(r commitFileRecord) {
	for _, pb := range r.Producers {
		p := v.part(pb.PID)
		if p == nil || len(p.Open) == 0 {
			continue
		}
		i := p.openOf(pb.ProducerID)
		if i < 0 || p.Open[i].First >= 0 {
			continue
		}
		p = v.mutPart(pb.PID)
		p.Open = slices.Clone(p.Open)
		p.Open[i].First = pb.LastOffset - int64(pb.Count) + 1
	}
}

// txnFirstSet calls mark for each partition whose open transaction the
// commit r, applied to v, started (applyTxnFirst set its first offset
// to one of r's batches).
func (v *view) txnFirstSet(r commitFileRecord, mark func(pid int64)) {
	for _, pb := range r.Producers {
		if p := v.part(pb.PID); p != nil && len(p.Open) > 0 {
			if i := p.openOf(pb.ProducerID); i >= 0 && p.Open[i].First == pb.LastOffset-int64(pb.Count)+1 {
				mark(pb.PID)
			}
		}
	}
}

// eachTxn calls f with the state of every transactional ID of v (its
// newest, from v or a parent; not those expired).
func (v *view) eachTxn(f func(t *Transaction)) {
	seen := map[string]bool{}
	for w := v; w != nil; w = w.parent {
		for id := range w.txns {
			if !seen[id] {
				seen[id] = true
				if t := v.txn(id); t != nil {
					f(t)
				}
			}
		}
	}
}

// checkTxnBatch applies the transaction rules to a batch of an idempotent
// producer (ProducerID >= 0) in p: a transactional batch needs its
// producer's transaction open in the partition at its epoch; a
// non-transactional one may not come while one is open.
func checkTxnBatch(p *partState, c *wal.Coordinate) error {
	i := p.openOf(c.ProducerID)
	if !c.Transactional {
		if i >= 0 {
			return kafkaerr.New(kafkaerr.InvalidTxnState, "producer %d sent a non-transactional batch while its transaction is open in %d", c.ProducerID, p.PID)
		}
		return nil
	}
	if i < 0 {
		return kafkaerr.New(kafkaerr.InvalidTxnState, "producer %d has no transaction open in partition %d (add the partition to the transaction first)", c.ProducerID, p.PID)
	}
	if o := p.Open[i]; c.ProducerEpoch != o.Epoch {
		return kafkaerr.New(kafkaerr.InvalidProducerEpoch, "producer %d sent epoch %d; its transaction in partition %d is of epoch %d", c.ProducerID, c.ProducerEpoch, p.PID, o.Epoch)
	}
	return nil
}

// --- the transaction's shard ------------------------------------------------

// TxnOp is an operation on a transactional ID.
type TxnOp uint8

// The operations.
const (
	// TxnInit is InitProducerId with a transactional ID: a new producer
	// ID, or the next epoch of the one it has.
	TxnInit TxnOp = iota + 1
	// TxnAddPartitions adds partitions to the transaction (AddPartitionsToTxn).
	TxnAddPartitions
	// TxnAddGroup adds a consumer group to it (AddOffsetsToTxn).
	TxnAddGroup
	// TxnCommitOffsets commits offsets in it (TxnOffsetCommit).
	TxnCommitOffsets
	// TxnEnd prepares its end (EndTxn): PrepareCommit or PrepareAbort.
	TxnEnd
	// TxnComplete records that a prepared end is done.
	TxnComplete
)

// TxnRequest is an operation on one transactional ID.
type TxnRequest struct {
	Op TxnOp
	// ID is the transactional ID.
	ID string
	// ProducerID and Epoch are the caller's (-1 and -1 for a TxnInit of a
	// new producer).
	ProducerID int64
	Epoch      int16
	// TimeoutMs is transaction.timeout.ms (TxnInit).
	TimeoutMs int32
	// Partitions are the partitions to add (TxnAddPartitions).
	Partitions []wal.TopicPartition
	// Group is the group (TxnAddGroup, TxnCommitOffsets), Offsets its
	// offsets (TxnCommitOffsets).
	Group   string
	Offsets []GroupOffset
	// Commit says whether TxnEnd commits or aborts, and which prepared
	// state TxnComplete completes.
	Commit bool
	// Shards is the number of shards (TxnEnd): when every partition of
	// the transaction is served by this shard and every group's offsets
	// live in it (ShardOfGroup), the end is one entry, markers, offsets
	// and Complete state together, which needs no PREPARE: the entry is
	// applied whole or not at all. 0 always ends in two phases.
	Shards int
}

// MaxTxnTimeoutMs is transaction.max.timeout.ms, Kafka's default.
const MaxTxnTimeoutMs = 15 * 60 * 1000

// txnOp decides a TxnRequest. Its answer is the transaction after it.
type txnOp struct {
	baseOp
	req TxnRequest
	out Transaction
}

func (o *txnOp) fail(code kafkaerr.Code, format string, args ...any) {
	o.finish(kafkaerr.New(code, format, args...))
}

func (o *txnOp) check(g *group) {
	r := &o.req
	if r.ID == "" {
		o.fail(kafkaerr.InvalidRequest, "a transactional ID is empty")
		return
	}
	cur := g.spec.txn(r.ID)
	if r.Op == TxnInit {
		o.init(g, cur)
		return
	}
	if cur == nil || cur.ProducerID != r.ProducerID {
		o.fail(kafkaerr.InvalidProducerIDMapping, "transactional ID %q has no producer %d", r.ID, r.ProducerID)
		return
	}
	if r.Epoch != cur.Epoch {
		o.fail(kafkaerr.ProducerFenced, "producer %d of %q has epoch %d, not %d", r.ProducerID, r.ID, cur.Epoch, r.Epoch)
		return
	}
	t := cur.clone()
	t.UpdateTime = g.now
	switch r.Op {
	case TxnAddPartitions, TxnAddGroup:
		if cur.State.preparing() {
			o.fail(kafkaerr.ConcurrentTransactions, "transaction %q is ending (%s)", r.ID, cur.State)
			return
		}
		if cur.State != TxnOngoing {
			t.State, t.StartTime, t.Partitions, t.Groups, t.Offsets = TxnOngoing, g.now, nil, nil, nil
		}
		added := false
		for _, tp := range r.Partitions {
			i, found := slices.BinarySearchFunc(t.Partitions, tp, compareTP)
			if !found {
				t.Partitions, added = slices.Insert(t.Partitions, i, tp), true
			}
		}
		if r.Op == TxnAddGroup {
			if err := checkGroupName(r.Group); err != nil {
				o.finish(err)
				return
			}
			if i, found := slices.BinarySearch(t.Groups, r.Group); !found {
				t.Groups, added = slices.Insert(t.Groups, i, r.Group), true
			}
		}
		// The partitions this shard serves are opened in the same entry
		// (with Shards set): the caller opens only the others.
		var begins []txnBeginRecord
		for _, tp := range r.Partitions {
			p := g.spec.partition(tp)
			if r.Shards <= 0 || p == nil {
				continue
			}
			open, err := checkBegin(g, p, tp, cur.ProducerID, cur.Epoch)
			if err != nil {
				o.finish(err)
				return
			}
			if open {
				begins = append(begins, txnBeginRecord{PID: p.PID, ProducerID: cur.ProducerID, Epoch: cur.Epoch})
			}
		}
		if !added && cur.State == TxnOngoing {
			for _, b := range begins {
				g.add(b)
			}
			o.out = *cur.clone()
			return
		}
		g.add(txnStateRecord{Txn: *t})
		for _, b := range begins {
			g.add(b)
		}
		o.out = *t
		return
	case TxnCommitOffsets:
		if cur.State != TxnOngoing || !slices.Contains(cur.Groups, r.Group) {
			o.fail(kafkaerr.InvalidTxnState, "group %q is not in transaction %q (%s)", r.Group, r.ID, cur.State)
			return
		}
		for _, off := range r.Offsets {
			if len(off.Metadata) > MaxGroupOffsetMetadata {
				o.fail(kafkaerr.OffsetMetadataTooLarge, "offset metadata of %d bytes", len(off.Metadata))
				return
			}
			off.CommitTime = g.now
			i := slices.IndexFunc(t.Offsets, func(x TxnOffset) bool {
				return x.Group == r.Group && x.Topic == off.Topic && x.Partition == off.Partition
			})
			if i >= 0 {
				t.Offsets[i].GroupOffset = off
			} else {
				t.Offsets = append(t.Offsets, TxnOffset{Group: r.Group, GroupOffset: off})
			}
		}
	case TxnEnd:
		want := TxnPrepareAbort
		if r.Commit {
			want = TxnPrepareCommit
		}
		switch {
		case cur.State == TxnOngoing && o.allHere(g, cur):
			o.endHere(g, t, r.Commit)
			return
		case cur.State == TxnOngoing:
			t.State = want
		case cur.State == want, cur.State == want+2: // a retry: the end goes on, or is done
			o.out = *cur.clone()
			return
		default:
			o.fail(kafkaerr.InvalidTxnState, "transaction %q is %s: it cannot %s", r.ID, cur.State, map[bool]string{true: "commit", false: "abort"}[r.Commit])
			return
		}
	case TxnComplete:
		want := TxnPrepareAbort
		if r.Commit {
			want = TxnPrepareCommit
		}
		if cur.State != want {
			o.out = *cur.clone()
			return
		}
		t.State = want + 2
		t.Partitions, t.Groups, t.Offsets = nil, nil, nil
	default:
		o.fail(kafkaerr.InvalidRequest, "unknown transaction operation %d", r.Op)
		return
	}
	g.add(txnStateRecord{Txn: *t})
	o.out = *t
}

// allHere reports whether the transaction's partitions are all served
// by this shard and its groups' offsets all live in it.
func (o *txnOp) allHere(g *group, t *Transaction) bool {
	if o.req.Shards <= 0 {
		return false
	}
	for _, tp := range t.Partitions {
		if g.spec.partition(tp) == nil {
			return false
		}
	}
	for _, grp := range t.Groups {
		if ShardOfGroup(grp, o.req.Shards) != g.opts.Shard {
			return false
		}
	}
	return true
}

// endHere ends a transaction whose partitions and groups are all in this
// shard in the group's one entry: its markers, on commit its offsets, and
// its Complete state.
func (o *txnOp) endHere(g *group, t *Transaction, commit bool) {
	for _, tp := range t.Partitions {
		addMarker(g, g.spec.partition(tp), t.ProducerID, t.Epoch, commit, 0)
	}
	if commit {
		byGroup := map[string][]GroupOffset{}
		for _, off := range t.Offsets {
			off.CommitTime = g.now
			byGroup[off.Group] = append(byGroup[off.Group], off.GroupOffset)
		}
		for _, grp := range t.Groups {
			if offs := byGroup[grp]; len(offs) > 0 {
				g.add(offsetCommitRecord{Group: grp, Time: g.now, Offsets: offs})
			}
		}
	}
	t.State = TxnCompleteAbort
	if commit {
		t.State = TxnCompleteCommit
	}
	t.Partitions, t.Groups, t.Offsets = nil, nil, nil
	g.add(txnStateRecord{Txn: *t})
	o.out = *t
}

// addMarker adds the marker of a producer's transaction in partition p,
// unless it is not open there (ended already: a retry) or open under a
// newer epoch.
func addMarker(g *group, p *partState, producer int64, epoch int16, commit bool, coordinatorEpoch int32) {
	j := p.openOf(producer)
	if j < 0 || p.Open[j].Epoch > epoch {
		return
	}
	g.add(txnMarkerRecord{PID: p.PID, ProducerID: producer, Epoch: epoch, Commit: commit,
		CoordinatorEpoch: coordinatorEpoch, Offset: p.HW, First: p.Open[j].First, Time: g.now})
}

// init decides a TxnInit: a producer ID for a new transactional ID, or the
// next epoch of its producer (a new producer ID when the epoch would
// overflow). A transaction left Ongoing is aborted first: its state goes
// to PrepareAbort under the new epoch (which fences the producer of the
// old one), and the caller finishes it and asks again; a prepared one is
// answered as it is, for the caller to finish.
func (o *txnOp) init(g *group, cur *Transaction) {
	r := &o.req
	timeout := r.TimeoutMs
	if timeout <= 0 || timeout > MaxTxnTimeoutMs {
		o.fail(kafkaerr.InvalidTransactionTimeout, "transaction timeout %d ms is outside (0, %d]", timeout, MaxTxnTimeoutMs)
		return
	}
	if cur != nil && cur.State.preparing() {
		o.out = *cur.clone() // the caller finishes it, and asks again
		return
	}
	if cur != nil && r.ProducerID >= 0 && (r.ProducerID != cur.ProducerID || r.Epoch != cur.Epoch) {
		// KIP-360: a producer that asks for its own epoch to be bumped
		// must still hold it.
		o.fail(kafkaerr.ProducerFenced, "transactional ID %q has producer %d epoch %d, not %d epoch %d", r.ID, cur.ProducerID, cur.Epoch, r.ProducerID, r.Epoch)
		return
	}
	var t *Transaction
	switch {
	case cur == nil:
		t = &Transaction{ID: r.ID, ProducerID: g.spec.nextProducerID, Epoch: 0}
		g.add(initProducerIDRecord{ProducerID: t.ProducerID})
	default:
		t = cur.clone()
		if t.Epoch >= 1<<15-2 {
			t.ProducerID, t.Epoch = g.spec.nextProducerID, 0
			g.add(initProducerIDRecord{ProducerID: t.ProducerID})
		} else {
			t.Epoch++
		}
		if cur.State == TxnOngoing {
			t.State = TxnPrepareAbort
		} else {
			t.State, t.StartTime, t.Partitions, t.Groups, t.Offsets = TxnEmpty, 0, nil, nil, nil
		}
	}
	t.TimeoutMs, t.UpdateTime = timeout, g.now
	g.add(txnStateRecord{Txn: *t})
	o.out = *t
}

// txnExpireOp aborts the Ongoing transactions older than their timeout (a
// new epoch, PrepareAbort) and answers them with the prepared ones left
// unfinished for longer than stale: those the caller must finish.
type txnExpireOp struct {
	baseOp
	stale int64
	// idExpiry is Options.TxnIDExpiration in milliseconds, 0 for never.
	idExpiry int64
	out      []Transaction
}

func (o *txnExpireOp) check(g *group) {
	var due []*Transaction
	g.spec.eachTxn(func(t *Transaction) { due = append(due, t) })
	for _, t := range due { // g.add changes the view eachTxn walks
		switch {
		case t.State == TxnOngoing && g.now-t.StartTime > int64(t.TimeoutMs):
			a := t.clone()
			a.State, a.UpdateTime = TxnPrepareAbort, g.now
			if a.Epoch < 1<<15-2 {
				a.Epoch++ // fences the producer, as Kafka's timeout abort
			}
			g.add(txnStateRecord{Txn: *a})
			o.out = append(o.out, *a)
		case t.State.preparing() && g.now-t.UpdateTime >= o.stale:
			o.out = append(o.out, *t.clone())
		case (t.State == TxnEmpty || t.State == TxnCompleteCommit || t.State == TxnCompleteAbort) &&
			o.idExpiry > 0 && g.now-t.UpdateTime > o.idExpiry:
			// Kafka's transactional.id.expiration.ms: an ID no
			// transaction used for this long goes, with its producer ID
			// (an InitProducerId for it later gets a new one).
			d := Transaction{ID: t.ID, ProducerID: t.ProducerID, Epoch: t.Epoch, State: TxnDead, UpdateTime: g.now}
			g.add(txnStateRecord{Txn: d})
		}
	}
	slices.SortFunc(o.out, func(a, b Transaction) int { return strings.Compare(a.ID, b.ID) })
}

// --- the partitions' shards -------------------------------------------------

// PartitionTxn is an operation of a transaction on one of its partitions.
type PartitionTxn struct {
	wal.TopicPartition
	// ProducerID and Epoch are the transaction's producer.
	ProducerID int64
	Epoch      int16
	// Begin opens the transaction in the partition (AddPartitionsToTxn);
	// otherwise the operation writes its marker: COMMIT if Commit, else
	// ABORT, with CoordinatorEpoch.
	Begin            bool
	Commit           bool
	CoordinatorEpoch int32
}

// partitionTxnsOp decides PartitionTxns; errs are the answers.
type partitionTxnsOp struct {
	baseOp
	ops  []PartitionTxn
	errs []error
}

func (o *partitionTxnsOp) coords() int { return max(len(o.ops), 1) }

func (o *partitionTxnsOp) check(g *group) {
	o.errs = make([]error, len(o.ops))
	for i, x := range o.ops {
		p := g.spec.partition(x.TopicPartition)
		if p == nil {
			o.errs[i] = kafkaerr.New(kafkaerr.UnknownTopicOrPartition, "this coordinator has no partition %s", x.TopicPartition)
			continue
		}
		if x.Begin {
			if open, err := checkBegin(g, p, x.TopicPartition, x.ProducerID, x.Epoch); err != nil {
				o.errs[i] = err
			} else if open {
				g.add(txnBeginRecord{PID: p.PID, ProducerID: x.ProducerID, Epoch: x.Epoch})
			}
			continue
		}
		addMarker(g, p, x.ProducerID, x.Epoch, x.Commit, x.CoordinatorEpoch)
	}
}

// checkBegin decides opening a producer's transaction in partition p:
// open says a txnBeginRecord is needed (false: it is open already, a
// retry); an error refuses it.
func checkBegin(g *group, p *partState, tp wal.TopicPartition, producer int64, epoch int16) (open bool, err error) {
	if st := g.spec.producer(producerKey{p.PID, producer}); st != nil && st.Epoch > epoch {
		return false, kafkaerr.New(kafkaerr.ProducerFenced, "producer %d has epoch %d in %s, newer than %d", producer, st.Epoch, tp, epoch)
	}
	j := p.openOf(producer)
	switch {
	case j < 0:
		return true, nil
	case p.Open[j].Epoch == epoch:
		return false, nil
	case p.Open[j].Epoch > epoch:
		return false, kafkaerr.New(kafkaerr.ProducerFenced, "producer %d has a transaction of epoch %d in %s, newer than %d", producer, p.Open[j].Epoch, tp, epoch)
	}
	// A transaction of an older epoch was never ended here: the
	// transaction coordinator aborts before it bumps, so this is a marker
	// still on its way.
	return false, kafkaerr.New(kafkaerr.ConcurrentTransactions, "producer %d's transaction of epoch %d is still open in %s", producer, p.Open[j].Epoch, tp)
}

// compareTP orders partitions by topic ID, then partition.
func compareTP(a, b wal.TopicPartition) int {
	if c := compareUUID(a.TopicID, b.TopicID); c != 0 {
		return c
	}
	return int(a.Partition) - int(b.Partition)
}

func compareUUID(a, b uuid.UUID) int { return strings.Compare(string(a[:]), string(b[:])) }

// --- the store ----------------------------------------------------------------

// The statements of transactions.
const (
	sqlUpsertTxn       = "INSERT INTO txns (id, state) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET state = excluded.state"
	sqlLoadTxns        = "SELECT state FROM txns"
	sqlDeleteTxn       = "DELETE FROM txns WHERE id = ?"
	sqlLoadTxnOpen     = "SELECT pid, producer_id, epoch, first_offset FROM txn_open ORDER BY pid, producer_id"
	sqlDeleteTxnOpen   = "DELETE FROM txn_open WHERE pid = ?"
	sqlInsertTxnOpen   = "INSERT INTO txn_open (pid, producer_id, epoch, first_offset) VALUES (?, ?, ?, ?)"
	sqlInsertMarker    = "INSERT INTO txn_markers (pid, offset, producer_id, epoch, commit_marker, coordinator_epoch, ts) VALUES (?, ?, ?, ?, ?, ?, ?)"
	sqlInsertMarkerRow = "INSERT INTO batches (pid, last_offset, n, object_id, pos, size, ts) VALUES (?, ?, 1, -1, 0, ?, ?)"
	sqlInsertAborted   = "INSERT OR REPLACE INTO aborted_txns (pid, last_offset, producer_id, first_offset, last_stable) VALUES (?, ?, ?, ?, ?)"
	sqlMarkerAt        = "SELECT producer_id, epoch, commit_marker, coordinator_epoch, ts FROM txn_markers WHERE pid = ? AND offset = ?"
	sqlAbortedIn       = "SELECT producer_id, first_offset, last_offset, last_stable FROM aborted_txns WHERE pid = ? AND last_offset >= ? AND first_offset <= ? ORDER BY first_offset"

	sqlDeleteTxnOpenOfPIDs = "DELETE FROM txn_open WHERE pid BETWEEN ? AND ?"
	sqlDeleteMarkersOfPIDs = "DELETE FROM txn_markers WHERE pid BETWEEN ? AND ?"
	sqlDeleteAbortedOfPIDs = "DELETE FROM aborted_txns WHERE pid BETWEEN ? AND ?"
	sqlDeleteMarkersBelow  = "DELETE FROM txn_markers WHERE pid = ? AND offset < ?"
	sqlDeleteAbortedBelow  = "DELETE FROM aborted_txns WHERE pid = ? AND last_offset < ?"
)

// putTxn writes a transaction's state, or deletes an expired one's.
func (s *store) putTxn(ctx context.Context, r txnStateRecord) error {
	if r.Txn.State == TxnDead {
		_, err := s.exec(ctx, sqlDeleteTxn, r.Txn.ID)
		return err
	}
	_, err := s.exec(ctx, sqlUpsertTxn, r.Txn.ID, r.appendTo(nil))
	return err
}

// addMarker writes a marker: its batch row, its row, and the aborted
// index's row of an abort of a transaction that wrote.
func (s *store) addMarker(ctx context.Context, root *view, r txnMarkerRecord) error {
	if _, err := s.exec(ctx, sqlInsertMarkerRow, r.PID, r.Offset, markerSize, r.Time); err != nil {
		return err
	}
	if _, err := s.exec(ctx, sqlInsertMarker, r.PID, r.Offset, r.ProducerID, r.Epoch, boolByte(r.Commit), r.CoordinatorEpoch, r.Time); err != nil {
		return err
	}
	if !r.Commit && r.First >= 0 {
		lso := r.Offset + 1
		if p := root.part(r.PID); p != nil {
			// What the partition's open transactions hold back after
			// the marker: those that began before it.
			for _, o := range p.Open {
				if o.First >= 0 && o.First < r.Offset {
					lso = min(lso, o.First)
				}
			}
		}
		if _, err := s.exec(ctx, sqlInsertAborted, r.PID, r.Offset, r.ProducerID, r.First, lso); err != nil {
			return err
		}
	}
	if b := s.bytes[r.PID]; b != nil {
		b.batches += markerSize
	}
	s.dirtyProducers[producerKey{r.PID, r.ProducerID}] = struct{}{}
	return nil
}

// writeOpenTxns writes the open transactions of the partitions pids as
// root has them.
func (s *store) writeOpenTxns(ctx context.Context, root *view, pids []int64) error {
	for _, pid := range pids {
		if _, err := s.exec(ctx, sqlDeleteTxnOpen, pid); err != nil {
			return err
		}
		p := root.part(pid)
		if p == nil {
			continue
		}
		for _, o := range p.Open {
			if _, err := s.exec(ctx, sqlInsertTxnOpen, pid, o.ProducerID, o.Epoch, o.First); err != nil {
				return err
			}
		}
	}
	return nil
}

// trimTxns deletes the markers and the aborted index's rows wholly below
// a partition's new log start.
func (s *store) trimTxns(ctx context.Context, r trimRecord) error {
	for _, q := range []string{sqlDeleteMarkersBelow, sqlDeleteAbortedBelow} {
		if _, err := s.exec(ctx, q, r.PID, r.LogStart); err != nil {
			return err
		}
	}
	return nil
}

// loadTxns loads the transactions' tables into v (opening).
func (s *store) loadTxns(ctx context.Context, v *view) error {
	if err := s.scanEach(ctx, sqlLoadTxns, func(rows *sql.Rows) error {
		var blob []byte
		if err := rows.Scan(&blob); err != nil {
			return err
		}
		d := decoder{b: blob}
		r := d.txnState()
		if d.err == nil && len(d.b) > 0 {
			d.fail("bytes after a transaction")
		}
		if d.err != nil {
			return fmt.Errorf("coordinator: a transaction row: %w", d.err)
		}
		v.txns[r.Txn.ID] = &r.Txn
		return nil
	}); err != nil {
		return err
	}
	return s.scanEach(ctx, sqlLoadTxnOpen, func(rows *sql.Rows) error {
		var o openTxn
		var pid int64
		if err := rows.Scan(&pid, &o.ProducerID, &o.Epoch, &o.First); err != nil {
			return err
		}
		if p := v.parts[pid]; p != nil {
			p.Open = append(p.Open, o)
		}
		return nil
	})
}
