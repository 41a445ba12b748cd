package coordinator

import (
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal"
)

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
		if ShardOfGroup(grp, o.req.Shards) != g.shard {
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
