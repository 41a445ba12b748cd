package state

import (
	"math"

	"github.com/diskless-go/diskless/kafkaerr"
)

// Transactions v2 (KIP-890 part 2): every end bumps the producer's epoch.
//
// An EndTxn of version 5 or later (TxnRequest.V2) prepares the end under
// the next epoch, and its markers carry that epoch: each partition's
// producer state takes it (View.ApplyMarkerEpoch), so a write of the
// ended transaction that arrives late, at the old epoch, is refused
// (INVALID_PRODUCER_EPOCH) instead of opening a transaction no one will
// end. When the epoch it bumps to is the last (math.MaxInt16), the end
// also takes a new producer ID (Transaction.NextProducerID): the markers
// are written under the old ID at the last epoch, and the producer goes
// on under the new ID at epoch 0 once the end is complete.
//
// The rules follow Kafka's TransactionCoordinator.endTransaction and
// TransactionMetadata.prepareAbortOrCommit and prepareComplete: whether
// the request's epoch is valid depends on how the transaction last ended
// (Transaction.V2), whether it bumps on the request's version. A v2 end
// retried after it was done comes at the epoch before (or as the old
// producer ID at the epoch before the last) and is answered with the
// producer ID and epoch it gave; an abort of no transaction (Empty, or
// Complete at the current epoch) is allowed under v2 and bumps the epoch.

// maxEpoch is the highest producer epoch.
const maxEpoch = math.MaxInt16

// endV2 decides the TxnEnd requests of transactions v2, or of a
// transaction whose last end was v2, and the TxnComplete of an end that
// moved to a new producer ID. It reports whether it answered the op;
// false leaves it to the v1 rules of Check.
func (o *TxnRequestOp) endV2(g *Group, cur *Transaction) bool {
	r := &o.Req
	if r.Op == TxnComplete {
		if cur.V2 && cur.PrevProducerID == r.ProducerID && cur.ProducerID != r.ProducerID {
			o.Out = *cur.clone() // done: the producer moved to its new ID
			return true
		}
		return false
	}
	if r.Op != TxnEnd || (!r.V2 && !cur.V2) {
		return false
	}
	want := TxnPrepareAbort
	if r.Commit {
		want = TxnPrepareCommit
	}
	complete := cur.State == TxnCompleteCommit || cur.State == TxnCompleteAbort
	// A retry of a v2 end: at the epoch before the bump, or, when the end
	// took a new producer ID, as the old one at the epoch before the last.
	overflowRetry := cur.V2 && complete && cur.PrevProducerID == r.ProducerID && r.Epoch == maxEpoch-1 && cur.Epoch == 0
	retry := overflowRetry || (cur.V2 && (complete || cur.State.Preparing()) && cur.ProducerID == r.ProducerID && cur.Epoch == r.Epoch+1)
	if cur.ProducerID != r.ProducerID && !overflowRetry {
		o.Fail(kafkaerr.InvalidProducerIDMapping, "transactional ID %q has no producer %d", r.ID, r.ProducerID)
		return true
	}
	valid := r.Epoch == cur.Epoch
	if cur.V2 {
		switch {
		case cur.State.Preparing():
			valid = retry
		case complete:
			valid = valid || retry
		}
	}
	if !valid {
		o.Fail(kafkaerr.ProducerFenced, "producer %d of %q has epoch %d, not %d", r.ProducerID, r.ID, cur.Epoch, r.Epoch)
		return true
	}
	invalid := func() bool {
		o.Fail(kafkaerr.InvalidTxnState, "transaction %q is %s: it cannot %s", r.ID, cur.State, map[bool]string{true: "commit", false: "abort"}[r.Commit])
		return true
	}
	t := cur.clone()
	t.UpdateTime = g.Now
	switch {
	case cur.State == TxnOngoing:
		if r.V2 {
			bumpV2(g, t)
		} else {
			clearV2(t)
		}
		if o.allHere(g, cur) {
			o.endHere(g, t, r.Commit)
			return true
		}
		t.State = want
		g.add(TxnStateRecord{Txn: *t})
		o.Out = *t
	case cur.State.Preparing():
		if cur.State != want {
			return invalid()
		}
		o.Out = *t // the end goes on: the caller finishes it
	case complete && cur.State == want+2 && (retry || !cur.V2):
		doneThroughLog(g, cur) // done already
		o.Out = *cur.clone()
	case retry, r.Commit, !r.V2:
		return invalid()
	default:
		// Under v2 an abort of no transaction is allowed (a producer that
		// may have added partitions by Produce, none of which answered):
		// it bumps the epoch and writes no marker.
		bumpV2(g, t)
		t.State, t.Partitions, t.Groups, t.Offsets = TxnCompleteAbort, nil, nil, nil
		completeV2(t)
		g.add(TxnStateRecord{Txn: *t})
		o.Out = *t
	}
	return true
}

// initAfterV2End decides an InitProducerId of a producer that did not
// hear the answer to its v2 end (a broker went away): it asks to carry on
// from the epoch before the bump (or, past an exhausted epoch, as the old
// producer ID at the epoch before the last). As Kafka's
// prepareIncrementProducerEpoch answers a request at lastProducerEpoch,
// it gets the epoch the end gave, not bumped again: nothing is ongoing
// to fence, and no other producer asked since (an InitProducerId clears
// Transaction.V2). It reports whether it answered the op.
func (o *TxnRequestOp) initAfterV2End(g *Group, cur *Transaction, timeout int32) bool {
	r := &o.Req
	complete := cur.State == TxnCompleteCommit || cur.State == TxnCompleteAbort || cur.State == TxnEmpty
	retry := (r.ProducerID == cur.ProducerID && r.Epoch == cur.Epoch-1) ||
		(r.ProducerID == cur.PrevProducerID && r.Epoch == maxEpoch-1 && cur.Epoch == 0)
	if !cur.V2 || !complete || !retry {
		return false
	}
	t := cur.clone()
	t.State, t.StartTime, t.Partitions, t.Groups, t.Offsets = TxnEmpty, 0, nil, nil, nil
	t.TimeoutMs, t.UpdateTime = timeout, g.Now
	g.add(TxnStateRecord{Txn: *t})
	o.Out = *t
	return true
}

// bumpV2 bumps t's epoch for a v2 end, with a new producer ID for after
// it when the epoch reaches the last, as Kafka's prepareAbortOrCommit
// with transaction version 2.
func bumpV2(g *Group, t *Transaction) {
	t.V2, t.PrevProducerID, t.NextProducerID = true, -1, -1
	if t.Epoch >= maxEpoch-1 {
		t.NextProducerID = nextProducerID(g)
		g.add(InitProducerIDRecord{ProducerID: t.NextProducerID})
		t.Epoch = maxEpoch
		return
	}
	t.Epoch++
}

// completeV2 moves a v2 end that took a new producer ID to it, at epoch
// 0, as Kafka's prepareComplete: from now on the producer writes as it.
func completeV2(t *Transaction) {
	if t.V2 && t.NextProducerID >= 0 {
		t.PrevProducerID, t.ProducerID, t.Epoch, t.NextProducerID = t.ProducerID, t.NextProducerID, 0, -1
	}
}

// clearV2 forgets how the last end was made: InitProducerId, a timeout's
// abort and a v1 end set the epoch themselves.
func clearV2(t *Transaction) {
	t.V2, t.PrevProducerID, t.NextProducerID = false, 0, 0
}
