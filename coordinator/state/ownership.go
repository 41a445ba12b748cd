package state

import "time"

// OwnershipRequest asks a shard to receive the ownership of an object.
type OwnershipRequest struct {
	// ObjectKey names the object.
	ObjectKey string
	// Owners is the object's owners list, which holds the receiving shard.
	Owners []int
	// From is the shard that asks (for logs).
	From int
	// DeadSince is since when no batch of the shards before the receiver
	// is in the object: a row the receiver makes is dead since then, or
	// since now, whichever is later.
	DeadSince time.Time
}

// OwnershipResult is the answer to ReceiveOwnership.
type OwnershipResult struct {
	// Accepted is true when the shard owns the object now: it logged
	// receiving it, or owned it already.
	Accepted bool
	// DeadSince, when the shard declined, is since when it has held no
	// batch in the object. It never will again.
	DeadSince time.Time
}

type ReceiveOp struct {
	BaseOp
	Req OwnershipRequest
	Res OwnershipResult
}

func (o *ReceiveOp) Need(n *Needs) { n.Keys = append(n.Keys, o.Req.ObjectKey) }

func (o *ReceiveOp) Check(g *Group) {
	self := g.Shard
	owners, err := checkOwners(o.Req.Owners, self)
	if err != nil {
		o.Finish(err)
		return
	}
	if owners == nil {
		owners = []int32{int32(self)}
	}
	rec := OwnershipRecord{ObjectID: -1, Key: o.Req.ObjectKey, Owners: owners, Time: g.Now}
	if !o.Req.DeadSince.IsZero() {
		rec.Time = max(rec.Time, o.Req.DeadSince.UnixMilli())
	}
	pendingKnown, pendingReceived := g.Spec.pending(o.Req.ObjectKey)
	if pendingReceived {
		o.Res.Accepted = true
		return
	}
	row, found, err := g.Facts.object(o.Req.ObjectKey)
	if err != nil {
		o.Finish(err)
		return
	}
	switch {
	case found && row.Owns(self):
		o.Res.Accepted = true
		return
	case found && row.Live <= 0 && !pendingKnown:
		o.Res.DeadSince = time.UnixMilli(row.DeadAt)
		return
	case found:
		rec.ObjectID = row.ID
	case !pendingKnown:
		rec.ObjectID = g.Spec.NextObjectID // a new row
	}
	// Held batches, a commit on its way (whose row this record finds when
	// it is applied), or no row at all: receive it.
	o.Res.Accepted = true
	g.add(rec)
}
