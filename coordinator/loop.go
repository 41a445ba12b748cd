package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/diskless-go/diskless/coordinator/state"

	"go.uber.org/zap"

	"github.com/diskless-go/diskless/coordinator/metalog"
)

// The driver of the pure core (core.go): the coordinator's one loop. It
// takes requests, gathers the facts each group needs from the store, has
// the core decide the group against the speculative view, sends the
// group's records to the log (up to the log's MaxInFlight at once),
// applies each entry once durable (the core to the committed view, the
// store to SQLite), publishes, and answers. Every I/O is here; every
// decision is in the core.

// inflight is a group whose entry was sent to the log.
type inflight struct {
	ops     []state.Op
	records []state.Record
	ch      <-chan metalog.AppendResult // nil: the group had no records
	res     *metalog.AppendResult
	crc     uint32 // the entry's checksum
	size    int    // its encoded bytes
	coords  int
}

// controlOp is a request the driver carries out itself, in order with the
// groups before it, rather than a decision of the core: writing the
// producer states before a snapshot.
type controlOp interface {
	state.Op
	control(ctx context.Context, d *loopDriver) error
}

// driver is the loop's state; only the loop's goroutine touches it.
type loopDriver struct {
	c          *leader
	ctx        context.Context
	root, spec *state.View
	queue      []state.Op
	pending    []*inflight
	prev       uint32 // the checksum of the last entry sent: the next one's prev
	lastAppend time.Time
	// commitDue fires when the open database transaction is ApplyInterval
	// old.
	commitDue   chan struct{}
	commitTimer interface{ Stop() bool }
	// pend is the pending queue's (pending.go).
	pend pendingDriver
}

// loop runs the driver until Close.
func (l *leader) loop(root *state.View) {
	d := &loopDriver{c: l, ctx: context.Background(), root: root, spec: state.NewView(root), prev: l.store.Chain.CRC, lastAppend: l.clock.Now(), commitDue: make(chan struct{}, 1),
		pend: pendingDriver{landed: map[int64]bool{}, failed: map[int64]bool{}, waiters: map[int64][]*settleOp{}, voiding: -1}}
	defer d.stopCommitTimer()
	if l.opts.ApplyInterval > 0 {
		// SQLite writes behind the loop, on another core (store's
		// applier): the loop decides and answers the next entries
		// meanwhile. A failed statement breaks the coordinator, as a
		// failed write on the loop does.
		l.store.StartApplier(func(err error) {
			l.logger.Error("coordinator: applying to the database failed; no longer serving", zap.Error(err))
			l.broken.CompareAndSwap(nil, &err)
			l.wakeCommitWaiters()
		})
		defer func() {
			if err := l.store.StopApplier(); err != nil {
				l.broken.CompareAndSwap(nil, &err)
			}
		}()
	}
	for {
		if !d.ready() && !d.wait() {
			return
		}
		d.drain()
		if errp := l.broken.Load(); errp != nil {
			d.failAll(*errp)
			continue
		}
		if d.applyDurable() {
			d.respec()
			l.maybeSnapshot()
		}
		select {
		case <-l.nudge: // a read waits for what has been applied
			d.maybeCommit(true)
		default:
			d.maybeCommit(false)
		}
		d.sendGroup()
	}
}

// ready reports whether there is work without waiting: a head entry to
// apply, or a group to send.
func (d *loopDriver) ready() bool {
	headReady := len(d.pending) > 0 && (d.pending[0].ch == nil || d.pending[0].res != nil)
	return headReady || d.canSend()
}

// canSend reports whether the next group may be sent to the log.
func (d *loopDriver) canSend() bool {
	return len(d.queue) > 0 && len(d.pending) < d.c.maxPending() && d.c.broken.Load() == nil
}

// wait waits for a request, the head entry's result, the commit interval
// or a read that needs the applied entries committed. It reports false
// once the coordinator is closing and everything is answered.
func (d *loopDriver) wait() bool {
	c := d.c
	var head <-chan metalog.AppendResult
	if len(d.pending) > 0 {
		head = d.pending[0].ch
	}
	select {
	case <-d.commitDue:
		d.commitTimer = nil
		d.maybeCommit(false)
	case <-c.nudge:
		d.maybeCommit(true)
	case o := <-c.ops:
		d.take(o)
	case r := <-head:
		d.pending[0].res = &r
	case <-c.closing:
		d.close()
		return false
	}
	return true
}

// drain takes every request already waiting.
func (d *loopDriver) drain() {
	for {
		select {
		case o := <-d.c.ops:
			d.take(o)
		default:
			return
		}
	}
}

// failAll answers every pending and queued request with err.
func (d *loopDriver) failAll(err error) {
	for _, f := range d.pending {
		for _, o := range f.ops {
			o.Finish(err)
		}
	}
	d.pending = nil
	for _, o := range d.queue {
		o.Finish(err)
	}
	d.queue = nil
	for id, ws := range d.pend.waiters {
		for _, o := range ws {
			o.Finish(err)
		}
		delete(d.pend.waiters, id)
	}
	clear(d.pend.landed)
	clear(d.pend.failed)
	d.pend.voiding = -1
}

// close answers what the log already holds, fails the rest, writes the
// producer states, and answers whatever is still sent.
func (d *loopDriver) close() {
	c := d.c
	for len(d.pending) > 0 {
		f := d.pending[0]
		if f.res == nil && f.ch != nil {
			r := <-f.ch
			f.res = &r
		}
		if !d.applyHead(f) {
			break
		}
		d.pending = d.pending[1:]
	}
	if len(d.pending) == 0 {
		d.recordConfirms()
	}
	d.failAll(ErrClosed)
	if c.broken.Load() == nil {
		if err := c.store.SyncProducers(d.ctx, d.root, c.applied.Load()); err != nil {
			c.logger.Warn("coordinator: writing producer states at close", zap.Error(err))
		} else {
			c.setCommitted(c.applied.Load())
		}
	}
	for {
		select {
		case o := <-c.ops:
			o.Finish(ErrClosed)
		default:
			return
		}
	}
}

// applyDurable applies the entries that are durable, in order, and
// reports whether it applied any.
func (d *loopDriver) applyDurable() bool {
	applied := false
	for len(d.pending) > 0 {
		f := d.pending[0]
		if f.res == nil && f.ch != nil {
			select {
			case r := <-f.ch:
				f.res = &r
			default:
			}
		}
		if f.res == nil && f.ch != nil {
			break
		}
		if !d.applyHead(f) {
			d.failAll(*d.c.broken.Load())
			break
		}
		d.c.sinceSnapshot.Add(int64(f.size))
		d.pending = d.pending[1:]
		applied = true
	}
	return applied
}

// respec rebuilds the speculative view from the committed one and the
// entries still pending.
func (d *loopDriver) respec() {
	d.spec = state.NewView(d.root)
	for _, f := range d.pending {
		for _, r := range f.records {
			d.spec.Apply(r)
		}
	}
}

// maybeCommit commits the open database transaction when it is
// ApplyInterval old, or at once when now is set (a read waits for it),
// so that the read pool sees what has been applied; it arms the timer of
// the next commit otherwise.
func (d *loopDriver) maybeCommit(now bool) {
	c := d.c
	st := c.store
	if !st.InTxn {
		return
	}
	age := c.clock.Now().Sub(st.TxnSince)
	if !now && age < c.opts.ApplyInterval {
		if d.commitTimer == nil {
			d.commitTimer = c.clock.AfterFunc(c.opts.ApplyInterval-age, func() {
				select {
				case d.commitDue <- struct{}{}:
				default:
				}
			})
		}
		return
	}
	d.stopCommitTimer()
	// With the applier, the commit is queued behind the entries' rows and
	// the read pool sees them once it ran.
	applied := c.applied.Load()
	if err := st.CommitTxnThen(d.ctx, func() { c.setCommitted(applied) }); err != nil {
		d.fail("committing the database failed", err)
		return
	}
}

func (d *loopDriver) stopCommitTimer() {
	if d.commitTimer != nil {
		d.commitTimer.Stop()
		d.commitTimer = nil
	}
}

// fail marks the coordinator broken by err and fails every request.
func (d *loopDriver) fail(what string, err error) {
	d.c.logger.Error("coordinator: "+what+"; no longer serving", zap.Error(err))
	d.c.broken.CompareAndSwap(nil, &err)
	d.failAll(*d.c.broken.Load())
}

// sendGroup takes the next group of requests, has the core decide it, and
// sends its records to the log.
func (d *loopDriver) sendGroup() {
	c := d.c
	if !d.canSend() {
		return
	}
	f := &inflight{}
	n := 0
	for n < len(d.queue) && (f.coords == 0 || f.coords+d.queue[n].Coords() <= c.opts.MaxGroupCoordinates) {
		f.coords += d.queue[n].Coords()
		n++
	}
	ops := d.queue[:n]
	d.queue = d.queue[n:]
	now := c.clock.Now().UnixMilli()
	nd := state.Needs{Prefix: c.opts.Prefix}
	for _, o := range ops {
		o.Need(&nd)
	}
	g := &state.Group{Shard: c.opts.Shard, Prefix: c.opts.Prefix, CommitDeadline: c.opts.CommitDeadline, Spec: d.spec, Now: now, Facts: c.store.Gather(d.ctx, d.root, &nd, now)}
	d.confirmRecord(g)
	for _, o := range ops {
		if err := o.Context().Err(); err != nil {
			o.Finish(err)
			continue
		}
		if co, ok := o.(controlOp); ok {
			co.Finish(co.control(d.ctx, d))
			continue
		}
		o.Check(g)
		f.ops = append(f.ops, o)
	}
	f.records = g.Records
	if len(g.Records) > 0 {
		if err := d.checkStillLeader(); err != nil {
			c.broken.CompareAndSwap(nil, &err)
			d.failAll(err)
			for _, o := range f.ops {
				o.Finish(err)
			}
			return
		}
		b := state.AppendEntry(nil, state.Entry{Epoch: c.epoch, Prev: d.prev, Records: g.Records})
		f.crc, f.size = entryCRC(b), len(b)
		d.prev = f.crc
		f.ch = c.log.Append(b)
		d.lastAppend = c.clock.Now()
	}
	d.pending = append(d.pending, f)
}

// idleFenceCheck is how long the leader may go without appending before
// it reads the log's end before its next append. The fence of a
// metalog.Bucket is the object at the contested offset, and Trim deletes
// old objects (after metalog.BucketOptions.TrimGrace, 5 minutes by
// default): a leader that sat idle longer could otherwise write below
// another leader's entries.
const idleFenceCheck = 2 * time.Minute

// errForeignEntry stops the Read of checkStillLeader.
var errForeignEntry = errors.New("coordinator: another writer appended")

// checkStillLeader, after an idle spell and with nothing in flight, reads
// the log past the end this leader knows: any entry there was written by
// another leader.
func (d *loopDriver) checkStillLeader() error {
	c := d.c
	if c.clock.Now().Sub(d.lastAppend) < idleFenceCheck {
		return nil
	}
	for _, f := range d.pending {
		if f.ch != nil && f.res == nil {
			return nil // an append in flight fences by itself
		}
	}
	err := c.log.Read(d.ctx, c.log.End(), func(int64, []byte) error { return errForeignEntry })
	switch {
	case errors.Is(err, errForeignEntry):
		return fmt.Errorf("%w: another leader appended to the log", ErrNotLeader)
	case err != nil:
		return fmt.Errorf("coordinator: reading the log's end: %w", err)
	}
	d.lastAppend = c.clock.Now()
	return nil
}

// maxPending is how many groups may be sent to the log and not yet
// applied: what the log takes in flight. The next group closes only when
// one of those has its answer, so that the requests that arrive while
// every slot is busy go out together in the first free one, and none
// waits behind a group closed early and queued behind the log's puts.
func (l *leader) maxPending() int { return l.log.MaxInFlight() }

// maxLeftovers bounds the entries fencedByLeftovers reads: an earlier
// leader leaves fewer than its log's MaxInFlight.
const maxLeftovers = metalog.MaxBucketMaxInFlight

// fencedByLeftovers reports whether an append that came back fenced met
// only entries of earlier epochs (and this leader's own) past the last
// applied one: the puts that a leader of a pipelined log
// (metalog.BucketOptions.MaxInFlight) had in flight when this one claimed
// the log, which landed after the claim. Replay skips them (they do not
// follow the chain), so they fence no one. A later claim (another leader;
// a claim of this epoch past this leader's is later, and wins) or a log
// that cannot be read does. It runs on the loop, the log's appender, once
// every append sent has its answer.
func (d *loopDriver) fencedByLeftovers() bool {
	c := d.c
	errNewer := errors.New("a later leader's entry")
	n := 0
	err := c.log.Read(d.ctx, c.applied.Load()+1, func(off int64, b []byte) error {
		e, err := state.DecodeEntry(b)
		switch {
		case err != nil:
			return err
		case e.Epoch > d.root.Epoch, e.Epoch == d.root.Epoch && state.Claims(e):
			return errNewer // a later claim: it wins
		case e.Epoch < d.root.Epoch:
			if n++; n > maxLeftovers {
				return errNewer
			}
		}
		// Else one of this leader's own, sent behind the append that
		// failed: replay skips it too (it follows that append).
		return nil
	})
	if err == nil && n > 0 {
		c.logger.Warn("coordinator: an earlier leader's puts landed after this leader's claim", zap.Int("entries", n), zap.Int64("after", c.applied.Load()))
	}
	return err == nil && n > 0
}

// applyHead applies the head entry once its result is in, and answers its
// requests. It reports false if the log failed, after marking the
// coordinator broken.
func (d *loopDriver) applyHead(f *inflight) bool {
	c := d.c
	if f.ch == nil {
		// No records: answered once all before it are, from this
		// leader's state alone (a begin that finds the transaction open,
		// a marker for one no longer open, a retried commit): no append
		// fences it, so it is refused, as a read is, when the lease is
		// not surely held (checkLease): a leader replaced without knowing
		// it yet must not answer from its older state.
		err := c.checkLease()
		for _, o := range f.ops {
			o.Finish(err)
		}
		return true
	}
	if f.res.Err != nil {
		err := f.res.Err
		if errors.Is(err, metalog.ErrFenced) {
			if d.fencedByLeftovers() {
				// Not another leader: stop, and a reopen claims again.
				err = fmt.Errorf("coordinator: the log holds entries of an earlier leader past this one's (puts it had in flight when this leader claimed the log); stopping so that a reopen claims it again: %w", err)
			} else {
				err = fmt.Errorf("%w: %w", ErrNotLeader, err)
			}
		}
		c.logger.Error("coordinator: log append failed; no longer serving", zap.Error(f.res.Err))
		c.broken.CompareAndSwap(nil, &err)
		for _, o := range f.ops {
			o.Finish(err)
		}
		return false
	}
	fail := func(what string, err error) bool {
		// The state is no longer trustworthy: stop. Reopening replays.
		c.logger.Error("coordinator: "+what+"; no longer serving", zap.Error(err))
		c.broken.CompareAndSwap(nil, &err)
		for _, o := range f.ops {
			o.Finish(err)
		}
		return false
	}
	eff, err := c.applyEntry(d.ctx, d.root, f.res.Offset, f.crc, state.ChainState{Epoch: d.root.Epoch, CRC: f.crc, Known: true}, f.records)
	if err != nil {
		return fail("applying a durable entry failed", err)
	}
	if c.opts.ApplyInterval < 0 {
		if err := c.store.CommitTxn(d.ctx); err != nil {
			return fail("committing the database failed", err)
		}
		c.setCommitted(f.res.Offset)
	}
	c.stats.entries.Add(1)
	c.stats.records.Add(int64(len(f.records)))
	for _, o := range f.ops {
		if co, ok := o.(*state.CommitOp); ok {
			c.stats.commits.Add(1)
			c.stats.coords.Add(int64(len(co.Req.Coordinates)))
		}
		o.Finish(nil)
	}
	d.voided(eff.Voided)
	return true
}

// applyEntry applies a durable entry (crc is its checksum, which the
// database keeps to tell its last entry from another at the same offset):
// the core to the committed view,
// then the store to SQLite; it publishes the effects and records the
// entry as applied.
//
// chain is the log's chain after the entry: its own checksum and epoch
// when it is applied, what it was when it is skipped (records nil).
func (l *leader) applyEntry(ctx context.Context, root *state.View, offset int64, crc uint32, chain state.ChainState, records []state.Record) (state.Effects, error) {
	eff := state.ApplyEntry(root, records)
	if err := l.store.Write(ctx, root, offset, crc, chain, records, &eff); err != nil {
		return eff, err
	}
	l.pub.Update(root, &eff, offset)
	l.applied.Store(offset)
	l.stats.received.Add(int64(eff.Received))
	l.stats.forgotten.Add(int64(len(eff.DeadObjects)))
	if l.lc != nil && eff.Lifecycle {
		l.lc.Wake()
	}
	return eff, nil
}
