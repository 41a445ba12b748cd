package coordinator

import (
	"slices"

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
