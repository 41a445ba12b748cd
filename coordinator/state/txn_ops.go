package state

import (
	"slices"
	"strings"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal/walmeta"
	"github.com/google/uuid"
)

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
	Partitions []walmeta.TopicPartition
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
	// V2 says a TxnEnd is of transactions v2 (EndTxn version 5 or later):
	// it bumps the producer's epoch, and its markers carry the new one
	// (txn_v2.go). Only a cluster whose transaction.version is 2 or more
	// sends it.
	V2 bool
}

// MaxTxnTimeoutMs is transaction.max.timeout.ms, Kafka's default.
const MaxTxnTimeoutMs = 15 * 60 * 1000

// TxnRequestOp decides a TxnRequest. Its answer is the transaction after it.
type TxnRequestOp struct {
	BaseOp
	Req TxnRequest
	Out Transaction
}

func (o *TxnRequestOp) Fail(code kafkaerr.Code, format string, args ...any) {
	o.Finish(kafkaerr.New(code, format, args...))
}

func (o *TxnRequestOp) Check(g *Group) {
	r := &o.Req
	if r.ID == "" {
		o.Fail(kafkaerr.InvalidRequest, "a transactional ID is empty")
		return
	}
	cur := g.Spec.txn(r.ID)
	if r.Op == TxnInit {
		o.init(g, cur)
		return
	}
	if cur != nil && o.endV2(g, cur) {
		return
	}
	if cur == nil || cur.ProducerID != r.ProducerID {
		o.Fail(kafkaerr.InvalidProducerIDMapping, "transactional ID %q has no producer %d", r.ID, r.ProducerID)
		return
	}
	if r.Epoch != cur.Epoch {
		o.Fail(kafkaerr.ProducerFenced, "producer %d of %q has epoch %d, not %d", r.ProducerID, r.ID, cur.Epoch, r.Epoch)
		return
	}
	t := cur.clone()
	t.UpdateTime = g.Now
	var answered bool
	switch r.Op {
	case TxnAddPartitions, TxnAddGroup:
		o.add(g, cur, t)
		return
	case TxnCommitOffsets:
		answered = o.commitOffsets(g, cur, t)
	case TxnEnd:
		answered = o.end(g, cur, t)
	case TxnComplete:
		answered = o.complete(cur, t)
	default:
		o.Fail(kafkaerr.InvalidRequest, "unknown transaction operation %d", r.Op)
		return
	}
	if answered {
		return
	}
	g.add(TxnStateRecord{Txn: *t})
	o.Out = *t
}

// add adds partitions, and a group with TxnAddGroup, to the transaction
// of cur (t is its copy to change), opening it if it was not ongoing.
func (o *TxnRequestOp) add(g *Group, cur, t *Transaction) {
	r := &o.Req
	if cur.State.Preparing() {
		o.Fail(kafkaerr.ConcurrentTransactions, "transaction %q is ending (%s)", r.ID, cur.State)
		return
	}
	if cur.State != TxnOngoing {
		t.State, t.StartTime, t.Partitions, t.Groups, t.Offsets = TxnOngoing, g.Now, nil, nil, nil
	}
	added := false
	for _, tp := range r.Partitions {
		i, found := slices.BinarySearchFunc(t.Partitions, tp, compareTP)
		if !found {
			t.Partitions, added = slices.Insert(t.Partitions, i, tp), true
		}
	}
	if r.Op == TxnAddGroup {
		if err := CheckGroupName(r.Group); err != nil {
			o.Finish(err)
			return
		}
		if i, found := slices.BinarySearch(t.Groups, r.Group); !found {
			t.Groups, added = slices.Insert(t.Groups, i, r.Group), true
		}
	}
	begins, err := o.begins(g, cur)
	if err != nil {
		o.Finish(err)
		return
	}
	if !added && cur.State == TxnOngoing {
		for _, b := range begins {
			g.add(b)
		}
		o.Out = *cur.clone()
		return
	}
	g.add(TxnStateRecord{Txn: *t})
	for _, b := range begins {
		g.add(b)
	}
	o.Out = *t
}

// begins returns the records that open the transaction in the partitions
// of the request this shard serves, opened in the same entry (with
// Shards set): the caller opens only the others.
func (o *TxnRequestOp) begins(g *Group, cur *Transaction) ([]TxnBeginRecord, error) {
	r := &o.Req
	var begins []TxnBeginRecord
	for _, tp := range r.Partitions {
		p := g.Spec.Partition(tp)
		if r.Shards <= 0 || p == nil {
			continue
		}
		open, err := checkBegin(g, p, tp, cur.ProducerID, cur.Epoch)
		if err != nil {
			return nil, err
		}
		if open {
			begins = append(begins, TxnBeginRecord{PID: p.PID, ProducerID: cur.ProducerID, Epoch: cur.Epoch})
		}
	}
	return begins, nil
}

// commitOffsets adds the request's offsets to t. It reports whether it
// answered the op (with an error).
func (o *TxnRequestOp) commitOffsets(g *Group, cur, t *Transaction) bool {
	r := &o.Req
	if cur.State != TxnOngoing || !slices.Contains(cur.Groups, r.Group) {
		o.Fail(kafkaerr.InvalidTxnState, "group %q is not in transaction %q (%s)", r.Group, r.ID, cur.State)
		return true
	}
	for _, off := range r.Offsets {
		if len(off.Metadata) > MaxGroupOffsetMetadata {
			o.Fail(kafkaerr.OffsetMetadataTooLarge, "offset metadata of %d bytes", len(off.Metadata))
			return true
		}
		off.CommitTime = g.Now
		i := slices.IndexFunc(t.Offsets, func(x TxnOffset) bool {
			return x.Group == r.Group && x.Topic == off.Topic && x.Partition == off.Partition
		})
		if i >= 0 {
			t.Offsets[i].GroupOffset = off
		} else {
			t.Offsets = append(t.Offsets, TxnOffset{Group: r.Group, GroupOffset: off})
		}
	}
	return false
}

// end ends the transaction: at once when all of it is here, else by
// preparing t. It reports whether it answered the op.
func (o *TxnRequestOp) end(g *Group, cur, t *Transaction) bool {
	r := &o.Req
	want := TxnPrepareAbort
	if r.Commit {
		want = TxnPrepareCommit
	}
	switch {
	case cur.State == TxnOngoing && o.allHere(g, cur):
		o.endHere(g, t, r.Commit)
		return true
	case cur.State == TxnOngoing:
		t.State = want
		return false
	case cur.State == want: // a retry: the end goes on (the caller finishes it, through the log)
		o.Out = *cur.clone()
		return true
	case cur.State == want+2: // a retry of an end done
		doneThroughLog(g, cur)
		o.Out = *cur.clone()
		return true
	default:
		o.Fail(kafkaerr.InvalidTxnState, "transaction %q is %s: it cannot %s", r.ID, cur.State, map[bool]string{true: "commit", false: "abort"}[r.Commit])
		return true
	}
}

// complete completes a prepared transaction in t. It reports whether it
// answered the op (a retry, with the transaction as it is).
// doneThroughLog answers an end already done through the log: the
// transaction's state is written again, unchanged, so that the answer
// waits for an append, fenced as every write is. An answer that wrote
// nothing would not be: a leader that no longer leads, whose state lags
// the log (a zombie, paused past its lease), would take the end of a
// transaction it never saw begin for a retry of the one before, and
// answer it done, though the transaction's markers were never written.
// The simulation found that (internal/sim, seed 1793753493617455298).
func doneThroughLog(g *Group, cur *Transaction) {
	g.add(TxnStateRecord{Txn: *cur.clone()})
}

func (o *TxnRequestOp) complete(cur, t *Transaction) bool {
	want := TxnPrepareAbort
	if o.Req.Commit {
		want = TxnPrepareCommit
	}
	if cur.State != want {
		o.Out = *cur.clone()
		return true
	}
	t.State = want + 2
	t.Partitions, t.Groups, t.Offsets = nil, nil, nil
	completeV2(t)
	return false
}

// allHere reports whether the transaction's partitions are all served
// by this shard and its groups' offsets all live in it.
func (o *TxnRequestOp) allHere(g *Group, t *Transaction) bool {
	if o.Req.Shards <= 0 {
		return false
	}
	for _, tp := range t.Partitions {
		if g.Spec.Partition(tp) == nil {
			return false
		}
	}
	for _, grp := range t.Groups {
		if ShardOfGroup(grp, o.Req.Shards) != g.Shard {
			return false
		}
	}
	return true
}

// endHere ends a transaction whose partitions and groups are all in this
// shard in the group's one entry: its markers, on commit its offsets, and
// its Complete state.
func (o *TxnRequestOp) endHere(g *Group, t *Transaction, commit bool) {
	for _, tp := range t.Partitions {
		addMarker(g, g.Spec.Partition(tp), t.ProducerID, t.Epoch, commit, 0)
	}
	if commit {
		byGroup := map[string][]GroupOffset{}
		for _, off := range t.Offsets {
			off.CommitTime = g.Now
			byGroup[off.Group] = append(byGroup[off.Group], off.GroupOffset)
		}
		for _, grp := range t.Groups {
			if offs := byGroup[grp]; len(offs) > 0 {
				g.add(OffsetCommitRecord{Group: grp, Time: g.Now, Offsets: offs})
			}
		}
	}
	t.State = TxnCompleteAbort
	if commit {
		t.State = TxnCompleteCommit
	}
	t.Partitions, t.Groups, t.Offsets = nil, nil, nil
	completeV2(t)
	g.add(TxnStateRecord{Txn: *t})
	o.Out = *t
}

// addMarker adds the marker of a producer's transaction in partition p,
// unless it is open there under a newer epoch, or not open and the
// partition already knows the marker's epoch (ended already: a retry).
//
// A transaction not open here whose marker brings a newer epoch (an
// abort under the epoch that fenced the producer: a timeout's, or an
// InitProducerId's) still gets its marker, as Kafka writes one to every
// partition of a transaction: the marker raises the producer's epoch in
// the partition, so that a begin of the older epoch that arrives late
// (its call delayed past the transaction's end) is fenced as its writes
// are, instead of opening a transaction that nothing would end.
func addMarker(g *Group, p *PartState, producer int64, epoch int16, commit bool, coordinatorEpoch int32) {
	first := int64(-1) // no batch of the transaction here
	switch j := p.openOf(producer); {
	case j >= 0 && p.Open[j].Epoch > epoch:
		return
	case j >= 0:
		first = p.Open[j].First
	default:
		if st := g.Spec.Producer(ProducerKey{p.PID, producer}); st != nil && st.Epoch >= epoch {
			return
		}
	}
	g.add(TxnMarkerRecord{PID: p.PID, ProducerID: producer, Epoch: epoch, Commit: commit,
		CoordinatorEpoch: coordinatorEpoch, Offset: p.HW, First: first, Time: g.Now})
}

// init decides a TxnInit: a producer ID for a new transactional ID, or the
// next epoch of its producer (a new producer ID when the epoch would
// overflow). A transaction left Ongoing is aborted first: its state goes
// to PrepareAbort under the new epoch (which fences the producer of the
// old one), and the caller finishes it and asks again; a prepared one is
// answered as it is, for the caller to finish.
func (o *TxnRequestOp) init(g *Group, cur *Transaction) {
	r := &o.Req
	timeout := r.TimeoutMs
	if timeout <= 0 || timeout > MaxTxnTimeoutMs {
		o.Fail(kafkaerr.InvalidTransactionTimeout, "transaction timeout %d ms is outside (0, %d]", timeout, MaxTxnTimeoutMs)
		return
	}
	if cur != nil && cur.State.Preparing() {
		o.Out = *cur.clone() // the caller finishes it, and asks again
		return
	}
	if cur != nil && r.ProducerID >= 0 && o.initAfterV2End(g, cur, timeout) {
		return
	}
	if cur != nil && r.ProducerID >= 0 && (r.ProducerID != cur.ProducerID || r.Epoch != cur.Epoch) {
		// KIP-360: a producer that asks for its own epoch to be bumped
		// must still hold it.
		o.Fail(kafkaerr.ProducerFenced, "transactional ID %q has producer %d epoch %d, not %d epoch %d", r.ID, cur.ProducerID, cur.Epoch, r.ProducerID, r.Epoch)
		return
	}
	var t *Transaction
	switch {
	case cur == nil:
		t = &Transaction{ID: r.ID, ProducerID: nextProducerID(g), Epoch: 0}
		g.add(InitProducerIDRecord{ProducerID: t.ProducerID})
	default:
		t = cur.clone()
		clearV2(t)
		// A new producer ID when the epoch is spent, or when the ID is
		// outside this shard's range (given before the ranges, it may
		// be another shard's producer's too: ops.go's producerIDShift);
		// not while a transaction is open, whose abort markers carry
		// its producer ID.
		if t.Epoch >= 1<<15-2 || (!inShardRange(g, t.ProducerID) && cur.State != TxnOngoing) {
			t.ProducerID, t.Epoch = nextProducerID(g), 0
			g.add(InitProducerIDRecord{ProducerID: t.ProducerID})
		} else {
			t.Epoch++
		}
		if cur.State == TxnOngoing {
			t.State = TxnPrepareAbort
		} else {
			t.State, t.StartTime, t.Partitions, t.Groups, t.Offsets = TxnEmpty, 0, nil, nil, nil
		}
	}
	t.TimeoutMs, t.UpdateTime = timeout, g.Now
	g.add(TxnStateRecord{Txn: *t})
	o.Out = *t
}

// TxnExpireOp aborts the Ongoing transactions older than their timeout (a
// new epoch, PrepareAbort) and answers them with the prepared ones left
// unfinished for longer than stale: those the caller must finish.
type TxnExpireOp struct {
	BaseOp
	Stale int64
	// idExpiry is Options.TxnIDExpiration in milliseconds, 0 for never.
	IDExpiry int64
	Out      []Transaction
}

func (o *TxnExpireOp) Check(g *Group) {
	var due []*Transaction
	g.Spec.eachTxn(func(t *Transaction) { due = append(due, t) })
	for _, t := range due { // g.add changes the view eachTxn walks
		switch {
		case t.State == TxnOngoing && g.Now-t.StartTime > int64(t.TimeoutMs):
			a := t.clone()
			clearV2(a)
			a.State, a.UpdateTime = TxnPrepareAbort, g.Now
			if a.Epoch < 1<<15-2 {
				a.Epoch++ // fences the producer, as Kafka's timeout abort
			}
			g.add(TxnStateRecord{Txn: *a})
			o.Out = append(o.Out, *a)
		case t.State.Preparing() && g.Now-t.UpdateTime >= o.Stale:
			o.Out = append(o.Out, *t.clone())
		case (t.State == TxnEmpty || t.State == TxnCompleteCommit || t.State == TxnCompleteAbort) &&
			o.IDExpiry > 0 && g.Now-t.UpdateTime > o.IDExpiry:
			// Kafka's transactional.id.expiration.ms: an ID no
			// transaction used for this long goes, with its producer ID
			// (an InitProducerId for it later gets a new one).
			d := Transaction{ID: t.ID, ProducerID: t.ProducerID, Epoch: t.Epoch, State: TxnDead, UpdateTime: g.Now}
			g.add(TxnStateRecord{Txn: d})
		}
	}
	slices.SortFunc(o.Out, func(a, b Transaction) int { return strings.Compare(a.ID, b.ID) })
}

// PartitionTxn is an operation of a transaction on one of its partitions.
type PartitionTxn struct {
	walmeta.TopicPartition
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

// PartitionTxnsOp decides PartitionTxns; errs are the answers.
type PartitionTxnsOp struct {
	BaseOp
	Ops  []PartitionTxn
	Errs []error
}

func (o *PartitionTxnsOp) Coords() int { return max(len(o.Ops), 1) }

func (o *PartitionTxnsOp) Check(g *Group) {
	o.Errs = make([]error, len(o.Ops))
	for i, x := range o.Ops {
		p := g.Spec.Partition(x.TopicPartition)
		if p == nil {
			o.Errs[i] = kafkaerr.New(kafkaerr.UnknownTopicOrPartition, "this coordinator has no partition %s", x.TopicPartition)
			continue
		}
		if x.Begin {
			if open, err := checkBegin(g, p, x.TopicPartition, x.ProducerID, x.Epoch); err != nil {
				o.Errs[i] = err
			} else if open {
				g.add(TxnBeginRecord{PID: p.PID, ProducerID: x.ProducerID, Epoch: x.Epoch})
			}
			continue
		}
		addMarker(g, p, x.ProducerID, x.Epoch, x.Commit, x.CoordinatorEpoch)
	}
}

// checkBegin decides opening a producer's transaction in partition p:
// open says a txnBeginRecord is needed (false: it is open already, a
// retry); an error refuses it.
func checkBegin(g *Group, p *PartState, tp walmeta.TopicPartition, producer int64, epoch int16) (open bool, err error) {
	if st := g.Spec.Producer(ProducerKey{p.PID, producer}); st != nil && st.Epoch > epoch {
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
func compareTP(a, b walmeta.TopicPartition) int {
	if c := compareUUID(a.TopicID, b.TopicID); c != 0 {
		return c
	}
	return int(a.Partition) - int(b.Partition)
}

func compareUUID(a, b uuid.UUID) int { return strings.Compare(string(a[:]), string(b[:])) }
