package coordinator

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
	"golang.org/x/sync/errgroup"

	"github.com/diskless-go/diskless/clock"

	"github.com/diskless-go/diskless/coordinator/state"
	"github.com/diskless-go/diskless/internal/upload"
	"github.com/diskless-go/diskless/kafkaerr"
)

// The driver's side of the parallel commit (docs/parallel-commit.md; the
// core's side is coordinator/state's pending.go). A broker that sent an
// object's PUT and its pending commit at once settles the commit once
// both are answered: the object landed (Settle with landed set), or its
// PUT failed. The loop takes a landed commit off the pending queue as
// soon as every commit before it is off too, in its views at once (the
// object exists, so no later leader can void it), publishes the visible
// high watermarks, and answers: what the broker then acknowledges is
// readable. The log learns it from a confirm record at the head of the
// loop's next entry. A commit whose PUT failed is voided, with every
// commit queued after it (a void record, written before anyone is
// answered), once it is the queue's head: this leader knows that no
// commit it voids was answered as landed, since it answers only what it
// took off the queue. A new leader cannot know what its predecessor
// answered, so on taking over it resolves each pending commit through
// the bucket (resolvePending): a conditional create of an empty object
// at its key either succeeds, and the object can never land (void), or
// finds the object there (confirm).

// settleOp settles a pending commit of the object Key. It does not go
// through the core: the loop takes it as it arrives (settle).
type settleOp struct {
	state.BaseOp
	Key    string
	Landed bool
	id     int64 // the commit's object ID, once found in the queue
}

func (o *settleOp) Check(*state.Group) {}

// voidOp has the core void the pending queue from object from on, if that
// is its head when the op is decided.
type voidOp struct {
	state.BaseOp
	from int64
}

func (o *voidOp) Check(g *state.Group) {
	if q := g.Spec.PendingQueue(); len(q) > 0 && q[0].ObjectID == o.from {
		r := state.VoidRecord{From: o.from, Time: g.Now}
		g.Records = append(g.Records, r)
		g.Spec.Apply(r)
	}
}

// errVoided answers a landed commit that was voided all the same: one
// queued before it was.
func errVoided(key string) error {
	return kafkaerr.New(kafkaerr.KafkaStorageError, "the commit of object %s was voided with an earlier one whose object did not land: upload its batches again", key)
}

// pendingDriver is the loop's state of the pending queue.
type pendingDriver struct {
	landed, failed map[int64]bool // settled commits still on the root's queue
	waiters        map[int64][]*settleOp
	confirmedTo    int64 // the last object ID taken off the queue early
	recordedTo     int64 // the last one a confirm record sent says
	voiding        int64 // the object ID a void op is on its way for, -1 if none
}

// Settle settles the pending commit of the object key on this shard: it
// returns once the commit is off the queue (its offsets readable) or
// void. landed says the object's PUT succeeded: then a void is an error
// (KAFKA_STORAGE_ERROR). A key with no pending commit here (never
// pending, or settled) answers as its commit did: an error if it was
// voided.
func (l *leader) Settle(ctx context.Context, key string, landed bool) error {
	o := &settleOp{BaseOp: state.NewBaseOp(ctx), Key: key, Landed: landed}
	return l.submit(ctx, o, o.Done)
}

// take queues a request, or settles a commit at once.
func (d *loopDriver) take(o state.Op) {
	if s, ok := o.(*settleOp); ok {
		d.settle(s)
		return
	}
	d.queue = append(d.queue, o)
}

// settle records how a pending commit's PUT ended and moves the queue.
func (d *loopDriver) settle(o *settleOp) {
	q := d.root.PendingQueue()
	i := 0
	for i < len(q) && q[i].Key != o.Key {
		i++
	}
	if i == len(q) {
		var err error
		if rc := d.root.RecentCommit(o.Key); rc != nil && rc.Void && o.Landed {
			err = errVoided(o.Key)
		}
		o.Finish(err)
		return
	}
	o.id = q[i].ObjectID
	p := &d.pend
	if o.Landed {
		p.landed[o.id] = true
	} else {
		p.failed[o.id] = true
	}
	p.waiters[o.id] = append(p.waiters[o.id], o)
	d.advance()
}

// advance takes the landed commits at the head of the queue off it (in
// the root and the speculative view, at once), publishes their
// partitions, and answers their waiters; a failed commit at the head
// gets a void op.
func (d *loopDriver) advance() {
	p := &d.pend
	q := d.root.PendingQueue()
	n := 0
	for n < len(q) && p.landed[q[n].ObjectID] {
		n++
	}
	if n > 0 {
		through := q[n-1].ObjectID
		d.root.Apply(state.ConfirmRecord{Through: through})
		d.spec.Apply(state.ConfirmRecord{Through: through})
		p.confirmedTo = max(p.confirmedTo, through)
		touched := map[int64]bool{}
		var eff state.Effects
		for _, pc := range q[:n] {
			for _, h := range pc.Held {
				if !touched[h.PID] && d.root.Part(h.PID) != nil {
					touched[h.PID] = true
					eff.Touched = append(eff.Touched, h.PID)
				}
			}
		}
		d.c.pub.Update(d.root, &eff, d.c.applied.Load())
		for _, pc := range q[:n] {
			d.answer(pc.ObjectID, nil)
		}
		q = q[n:]
	}
	if len(q) > 0 && p.failed[q[0].ObjectID] && p.voiding != q[0].ObjectID {
		p.voiding = q[0].ObjectID
		d.queue = append(d.queue, &voidOp{BaseOp: state.NewBaseOp(context.Background()), from: q[0].ObjectID})
	}
}

// answer answers the settles of the commit of object id.
func (d *loopDriver) answer(id int64, err error) {
	p := &d.pend
	for _, o := range p.waiters[id] {
		if o.Landed {
			o.Finish(err)
		} else {
			o.Finish(nil)
		}
	}
	delete(p.waiters, id)
	delete(p.landed, id)
	delete(p.failed, id)
}

// voided answers the settles of the commits an applied entry voided,
// and moves the queue on.
func (d *loopDriver) voided(voided []state.PendingCommit) {
	if len(voided) == 0 {
		return
	}
	for _, pc := range voided {
		d.answer(pc.ObjectID, errVoided(pc.Key))
		if d.pend.voiding == pc.ObjectID {
			d.pend.voiding = -1
		}
	}
	d.advance()
}

// confirmRecord adds to a group the confirm record of the commits taken
// off the queue early since the last one sent.
func (d *loopDriver) confirmRecord(g *state.Group) {
	p := &d.pend
	if p.confirmedTo <= p.recordedTo {
		return
	}
	r := state.ConfirmRecord{Through: p.confirmedTo}
	g.Records = append(g.Records, r)
	g.Spec.Apply(r)
	p.recordedTo = p.confirmedTo
}

// recordConfirms, at close, logs the commits taken off the queue early
// that no entry records yet: the next leader then need not resolve them
// through the bucket (and finds them confirmed even if their objects were
// damaged since, as it should: they were answered).
func (d *loopDriver) recordConfirms() {
	c, p := d.c, &d.pend
	if c.broken.Load() != nil || p.confirmedTo <= p.recordedTo {
		return
	}
	_, crc, err := c.appendApplied(d.ctx, d.root, c.epoch, d.prev, []state.Record{state.ConfirmRecord{Through: p.confirmedTo}})
	if err != nil {
		c.logger.Warn("coordinator: logging the last confirms at close", zap.Error(err))
		return
	}
	d.prev, p.recordedTo = crc, p.confirmedTo
}

// resolvePending, on taking over the shard, resolves every commit its
// predecessor left pending, in order, through the bucket: a landed
// object's commit is confirmed; at the first whose object can no longer
// land, that one and every one after it are voided. It logs the outcome
// in one entry before the loop starts: no read is answered before.
func (l *leader) resolvePending(ctx context.Context, root *state.View) error {
	q := root.PendingQueue()
	if len(q) == 0 {
		return nil
	}
	if l.opts.WALBucket == nil {
		return fmt.Errorf("coordinator: %d pending commits to resolve and no bucket of WAL objects (Options.Bucket)", len(q))
	}
	// Each object at once (a few at a time), each resolve retried a few
	// times: a store that fails some calls should not keep the shard
	// closed. The commits after the first void are void whatever their
	// objects' fate; resolving them too costs nothing but their PUTs.
	landed := make([]bool, len(q))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(resolveConcurrency)
	for i, pc := range q {
		g.Go(func() error {
			var err error
			for attempt := range resolveAttempts {
				if landed[i], err = resolveObject(gctx, l.opts.WALBucket, pc.Key); err == nil {
					return nil
				}
				if clock.Sleep(gctx, l.clock, resolveBackoff<<attempt) != nil {
					break
				}
			}
			return fmt.Errorf("coordinator: resolving the pending commit of %s: %w", pc.Key, err)
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	var records []state.Record
	for i, pc := range q {
		if !landed[i] {
			if i > 0 {
				records = append(records, state.ConfirmRecord{Through: q[i-1].ObjectID})
			}
			records = append(records, state.VoidRecord{From: pc.ObjectID, Time: l.clock.Now().UnixMilli()})
			break
		}
		if i == len(q)-1 {
			records = append(records, state.ConfirmRecord{Through: pc.ObjectID})
		}
	}
	if _, _, err := l.appendApplied(ctx, root, l.epoch, l.store.Chain.CRC, records); err != nil {
		return fmt.Errorf("coordinator: logging the pending commits resolved: %w", err)
	}
	l.logger.Info("coordinator: resolved the pending commits left by the last leader", zap.Int("shard", l.opts.Shard), zap.Int("pending", len(q)))
	return l.commit(ctx)
}

// resolveObject reports whether the WAL object key landed, making sure
// that if it did not, it never will: it creates an empty object (a
// tombstone) at key if nothing is there. A WAL object is never empty, so
// an empty one found there is a tombstone an earlier resolve made.
func resolveObject(ctx context.Context, bucket *blob.Bucket, key string) (landed bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	err = bucket.WriteAll(ctx, key, nil, &blob.WriterOptions{IfNotExist: true, ContentType: upload.ContentType})
	if err == nil {
		return false, nil
	}
	if gcerrors.Code(err) != gcerrors.FailedPrecondition {
		return false, err
	}
	a, err := bucket.Attributes(ctx, key)
	if err != nil {
		return false, err
	}
	return a.Size > 0, nil
}

// A new leader resolves resolveConcurrency objects at once, each in up
// to resolveAttempts attempts, the first retry after resolveBackoff and
// each next after twice as long; resolveTimeout bounds one attempt.
const (
	resolveConcurrency = 8
	resolveAttempts    = 5
	resolveBackoff     = 100 * time.Millisecond
	resolveTimeout     = 30 * time.Second
)
