package state

import (
	"slices"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal/walmeta"
)

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

// Preparing reports whether s is PrepareCommit or PrepareAbort.
func (s TxnState) Preparing() bool { return s == TxnPrepareCommit || s == TxnPrepareAbort }

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
	Partitions []walmeta.TopicPartition
	// Groups are the consumer groups in it (AddOffsetsToTxn), sorted, and
	// Offsets the offsets committed in it (TxnOffsetCommit), by group,
	// topic and partition: on commit they become the groups' offsets.
	Groups  []string
	Offsets []TxnOffset
	// V2 says the transaction's last end was of transactions v2 (EndTxn
	// version 5 or later, Kafka's TransactionVersion 2): it bumped the
	// epoch, so a retry of it comes at Epoch-1 (or, past an exhausted
	// epoch, as PrevProducerID at the last epoch). InitProducerId and a
	// timeout's abort clear it. PrevProducerID and NextProducerID mean
	// something only when it is set.
	V2 bool
	// PrevProducerID is the producer ID a v2 end left because its epoch
	// was exhausted (Kafka's previousProducerId), -1 for none.
	PrevProducerID int64
	// NextProducerID is the producer ID a v2 end moves to once complete,
	// because the epoch it bumped to is the last (Kafka's
	// nextProducerId), -1 for none: the markers are written under the
	// old ID at the last epoch, and the producer goes on under this one
	// at epoch 0.
	NextProducerID int64
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

// OpenTxn is a producer's transaction open in a partition: First is the
// offset of its first batch there, -1 before it wrote one.
type OpenTxn struct {
	ProducerID int64
	Epoch      int16
	First      int64
}

// txn returns a transactional ID's state, nil if it has none.
func (v *View) txn(id string) *Transaction {
	for ; v != nil; v = v.Parent {
		if t, ok := v.Txns[id]; ok {
			return t
		}
	}
	return nil
}

// openOf returns the index of producer's open transaction in p.Open, -1
// if none.
func (p *PartState) openOf(producer int64) int {
	return slices.IndexFunc(p.Open, func(o OpenTxn) bool { return o.ProducerID == producer })
}

// LastStable is the partition's last stable offset: never below the log
// start offset (DeleteRecords may move it past an open transaction's
// first batch, as in Kafka).
func (p *PartState) LastStable() int64 {
	lso := p.Visible()
	for _, o := range p.Open {
		if o.First >= 0 {
			lso = min(lso, o.First)
		}
	}
	return max(lso, p.LogStart)
}

// applyTxn applies a transaction record to the view.
func (v *View) applyTxn(r Record) {
	switch r := r.(type) {
	case TxnStateRecord:
		switch {
		case r.Txn.State != TxnDead:
			v.Txns[r.Txn.ID] = r.Txn.clone()
		case v.Parent == nil:
			delete(v.Txns, r.Txn.ID)
		default:
			v.Txns[r.Txn.ID] = nil // gone, over the parent's
		}
		v.NextProducerID = max(v.NextProducerID, r.Txn.ProducerID+1, r.Txn.NextProducerID+1)
	case TxnBeginRecord:
		p := v.mutPart(r.PID)
		if p == nil {
			return
		}
		p.Open = slices.Clone(p.Open)
		if i := p.openOf(r.ProducerID); i >= 0 {
			p.Open[i].Epoch = r.Epoch
			return
		}
		p.Open = append(p.Open, OpenTxn{ProducerID: r.ProducerID, Epoch: r.Epoch, First: -1})
	case TxnMarkerRecord:
		p := v.mutPart(r.PID)
		if p == nil {
			return
		}
		p.HW = max(p.HW, r.Offset+1)
		if i := p.openOf(r.ProducerID); i >= 0 {
			p.Open = slices.Delete(slices.Clone(p.Open), i, i+1)
		}
		v.ApplyMarkerEpoch(r)
	}
}

// ApplyMarkerEpoch raises the producer's epoch in the partition to the
// marker's, as Kafka's marker does: a timeout's abort is written under a
// new epoch, and the old one's late writes are then fenced.
func (v *View) ApplyMarkerEpoch(r TxnMarkerRecord) {
	k := ProducerKey{r.PID, r.ProducerID}
	if st := v.Producer(k); st != nil && st.Epoch >= r.Epoch {
		return
	}
	st := v.mutProducer(k)
	st.Epoch, st.Batches = r.Epoch, st.Batches[:0]
}

// applyTxnFirst sets the first offset of the open transactions that the
// batches of a commit start: a batch of a producer with an open
// transaction is transactional (checkBatch sees to it).
func (v *View) applyTxnFirst(r CommitFileRecord) {
	for _, pb := range r.Producers {
		p := v.Part(pb.PID)
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
func (v *View) txnFirstSet(r CommitFileRecord, mark func(pid int64)) {
	for _, pb := range r.Producers {
		if p := v.Part(pb.PID); p != nil && len(p.Open) > 0 {
			if i := p.openOf(pb.ProducerID); i >= 0 && p.Open[i].First == pb.LastOffset-int64(pb.Count)+1 {
				mark(pb.PID)
			}
		}
	}
}

// eachTxn calls f with the state of every transactional ID of v (its
// newest, from v or a parent; not those expired).
func (v *View) eachTxn(f func(t *Transaction)) {
	seen := map[string]bool{}
	for w := v; w != nil; w = w.Parent {
		for id := range w.Txns {
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
func checkTxnBatch(p *PartState, c *walmeta.Coordinate) error {
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
