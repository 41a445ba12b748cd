package coordinator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/diskless-go/diskless/wal"
)

// The WAL object lifecycle (KIP-1164's file ownership and deletion).
//
// An object that holds partitions of several shards is committed to each
// of them, with the same owners list: those shards in a random order
// (random, so that no shard ends up owning most objects). Each shard's
// commit record carries the list, so every shard knows its place in it.
//
// owners[0] owns the object first. A shard owns an object when it is
// owners[0] and has the object's row, or when it has logged receiving the
// object (an ownershipRecord); nothing else about ownership is logged,
// since the rest follows from the log: whether the shard still holds
// batches in the object (the row's live count), since when it holds none
// (dead_at).
//
// The owner, once none of its batches in the object is left (retention,
// DeleteRecords, topic deletion, offload), asks the owners after it, in
// order, to receive the object (ReceiveOwnership):
//
//   - a shard that holds batches in it, or has its commit on the way to
//     its log, logs receiving it and accepts: it is the owner now, and the
//     sender's part is done;
//   - a shard that has no row of the object (its commit failed, or has not
//     arrived yet) also logs receiving it, which makes a row with no
//     batches: from then on it refuses a commit of that key, so the
//     object can never gain a batch there;
//   - a shard that has the row and no batch left in it declines, and says
//     since when it holds none. It can never hold one again (a known key
//     is never committed twice), so ownership passes over it, and that
//     answer is kept in memory.
//
// The owner that finds every shard after it declining is the last one: it
// deletes the object from the bucket once the grace period has passed
// since the last batch in it went (its own, or a decliner's: the latest),
// so that reads already under way finish; then it tells every owner,
// itself last, with ObjectsDeleted, and they forget the object. They
// forget it only once the object's commit deadline (Options.
// CommitDeadline after the time in its key) has passed too: until then a
// shard that knows the key refuses its commit, and after it every shard
// does, so a commit that arrives late never puts a batch in a deleted
// object. (Without a CommitDeadline, or for a key that is not a WAL object
// key, they forget it at once, and that guarantee is the caller's.)
//
// Every step is idempotent and repeated until it succeeds: receiving an
// object twice logs it once; deleting a deleted object succeeds; forgetting
// a forgotten one does nothing. A sender does not log that it has handed an
// object on: after a restart (or on a new leader) it asks again, and the
// receiver accepts without logging again. A shard that handed an object on
// and is restarted after the object was deleted, before it was told, may
// make the receiver log a row again for an object that is gone: that row
// goes the same way (delete, which finds nothing, then forget).
//
// If owners[0] never had the commit, no one would start. So a shard that
// does not own an object, and has held no batch in it for StallAfter, asks
// owners[0] to receive it once (per process): owners[0] already owns it if
// it has the row, and otherwise logs a row and starts the chain.
//
// An object committed to one shard alone has no owners list: that shard is
// its owner and its last owner.

// LifecycleOptions configure a shard's part of the WAL object lifecycle.
// The zero value of each field but Bucket is the documented default.
type LifecycleOptions struct {
	// Bucket holds the WAL objects and remote segments; the last owner of
	// an object deletes it there. Required.
	Bucket *blob.Bucket
	// Peers returns the leader of another shard, to hand objects on to and
	// to tell of deletions (Coordinator gives its coordinators). Nil means none:
	// steps that need another shard fail, and are retried.
	Peers func(shard int) (Peer, error)
	// Grace is how long an object stays in the bucket after its last batch
	// went, so that reads under way finish. 0 means 60 s.
	Grace time.Duration
	// Interval is how often the worker runs in the background; it also
	// runs, at most once a second (or Interval, if shorter), when the
	// shard applies an entry that takes batches out of objects or receives
	// one. 0 means 10 s; negative means never (call
	// leader.RunLifecycle).
	Interval time.Duration
	// Backoff is the delay before a failed step (a shard unreachable, the
	// bucket failing) is retried, doubled after each failure up to
	// MaxBackoff, with jitter. 0 means 1 s and 5 minutes.
	Backoff, MaxBackoff time.Duration
	// StallAfter is how long a shard that does not own an object, and
	// holds no batch in it, waits before it asks the object's first owner
	// to take it (see above). 0 means 10 times Grace.
	StallAfter time.Duration
	// OnDelete, if set, is called with the key of each object the worker
	// deleted from the bucket (a broker drops it from its cache): for a
	// remote segment, once, with its key (RemoteSegmentKey), after every
	// one of its files is deleted. It runs on the worker's goroutine and
	// must not block.
	OnDelete func(key string)
}

func (o *LifecycleOptions) withDefaults() (LifecycleOptions, error) {
	l := *o
	if l.Bucket == nil {
		return l, fmt.Errorf("%w: Lifecycle.Bucket is nil", ErrInvalidOptions)
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{{"Grace", &l.Grace, time.Minute}, {"Backoff", &l.Backoff, time.Second}, {"MaxBackoff", &l.MaxBackoff, 5 * time.Minute}, {"StallAfter", &l.StallAfter, 0}} {
		if *d.v < 0 {
			return l, fmt.Errorf("%w: Lifecycle.%s %v is negative", ErrInvalidOptions, d.name, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if l.StallAfter == 0 {
		l.StallAfter = 10 * l.Grace
	}
	if l.Interval == 0 {
		l.Interval = 10 * time.Second
	}
	return l, nil
}

// Peer is another shard's coordinator, as the lifecycle reaches it. A
// *leader is one; a deployment with a coordinator per process would
// put an RPC client here.
type Peer interface {
	ReceiveOwnership(ctx context.Context, req OwnershipRequest) (OwnershipResult, error)
	ObjectsDeleted(ctx context.Context, keys []string) error
}

var _ Peer = (*leader)(nil)

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

// ReceiveOwnership makes this shard the owner of an object, if it still
// holds batches in it or has no row of it (then a row with no batches is
// made: a later commit of that key is refused). It is idempotent: an
// owner accepts again without logging again. A shard that has the
// object's row and no batch left in it declines (Accepted false): the
// ownership passes over it. Owners that do not hold this shard, once, are
// INVALID_REQUEST.
func (c *leader) ReceiveOwnership(ctx context.Context, req OwnershipRequest) (OwnershipResult, error) {
	o := &receiveOp{baseOp: newBaseOp(ctx), req: req}
	if err := c.submit(ctx, o, o.done); err != nil {
		return OwnershipResult{}, err
	}
	return o.res, nil
}

type receiveOp struct {
	baseOp
	req OwnershipRequest
	res OwnershipResult
}

func (o *receiveOp) need(n *needs) { n.keys = append(n.keys, o.req.ObjectKey) }

func (o *receiveOp) check(g *group) {
	self := g.opts.Shard
	owners, err := checkOwners(o.req.Owners, self)
	if err != nil {
		o.finish(err)
		return
	}
	if owners == nil {
		owners = []int32{int32(self)}
	}
	rec := ownershipRecord{ObjectID: -1, Key: o.req.ObjectKey, Owners: owners, Time: g.now}
	if !o.req.DeadSince.IsZero() {
		rec.Time = max(rec.Time, o.req.DeadSince.UnixMilli())
	}
	pendingKnown, pendingReceived := g.spec.pending(o.req.ObjectKey)
	if pendingReceived {
		o.res.Accepted = true
		return
	}
	row, found, err := g.facts.object(o.req.ObjectKey)
	if err != nil {
		o.finish(err)
		return
	}
	switch {
	case found && row.owns(self):
		o.res.Accepted = true
		return
	case found && row.live <= 0 && !pendingKnown:
		o.res.DeadSince = time.UnixMilli(row.deadAt)
		return
	case found:
		rec.ObjectID = row.id
	case !pendingKnown:
		rec.ObjectID = g.spec.nextObjectID // a new row
	}
	// Held batches, a commit on its way (whose row this record finds when
	// it is applied), or no row at all: receive it.
	o.res.Accepted = true
	g.add(rec)
}

// LifecycleRun is what one pass of the lifecycle worker did.
type LifecycleRun struct {
	// HandedOff counts the objects handed to a next owner, and
	// StallChecks the objects whose first owner this shard asked to take
	// them (see StallAfter).
	HandedOff, StallChecks int
	// Deleted counts the objects deleted from the bucket (and forgotten by
	// every owner).
	Deleted int
	// Waiting counts the objects this shard is the last owner of whose
	// grace period has not passed.
	Waiting int
	// Failed counts the steps that failed (retried after a backoff), and
	// Deferred the objects skipped because their backoff has not passed.
	Failed, Deferred int
}

// RunLifecycle runs one pass of the lifecycle worker now (tests, or a
// caller that set LifecycleOptions.Interval negative): hand on the dead
// objects this shard owns, delete those it is the last owner of whose grace
// has passed. The error is the first failure, if any; the run counts them
// all. It needs Options.Lifecycle.
func (c *leader) RunLifecycle(ctx context.Context) (LifecycleRun, error) {
	if c.lc == nil {
		return LifecycleRun{}, fmt.Errorf("%w: RunLifecycle needs leaderOptions.Lifecycle", ErrInvalidOptions)
	}
	return c.lc.pass(ctx)
}

// lifecycle is a shard's lifecycle worker. A pass holds mu; the maps are
// what it learned and keeps between passes (all of it can be learned
// again: a restart loses it and asks again).
type lifecycle struct {
	c      *leader
	o      LifecycleOptions
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	wakeCh chan struct{}

	mu       sync.Mutex
	retry    map[string]retryState
	handed   map[string]bool            // accepted by a next owner
	declined map[string]map[int32]int64 // shard -> its dead_at
	checked  map[string]bool            // owners[0] asked (stall check)
	gone     map[string]bool            // deleted from the bucket, not yet forgotten
	seen     map[string]bool            // scratch: the keys of the pass
	due      time.Time                  // the pass's earliest grace end or retry; zero: none
}

type retryState struct {
	attempts int
	next     time.Time
}

func newLifecycle(c *leader, o LifecycleOptions) *lifecycle {
	ctx, cancel := context.WithCancel(context.Background())
	return &lifecycle{
		c: c, o: o, ctx: ctx, cancel: cancel,
		wakeCh:   make(chan struct{}, 1),
		retry:    map[string]retryState{},
		handed:   map[string]bool{},
		declined: map[string]map[int32]int64{},
		checked:  map[string]bool{},
		gone:     map[string]bool{},
		seen:     map[string]bool{},
	}
}

// start starts the background worker, unless Interval is negative. Its
// first pass runs at once: a new leader resumes where the last one was.
func (l *lifecycle) start() {
	if l.o.Interval < 0 {
		return
	}
	l.wg.Add(1)
	go pprof.Do(l.ctx, pprof.Labels("diskless", "coordinator-lifecycle", "shard", fmt.Sprint(l.c.opts.Shard)), func(ctx context.Context) {
		defer l.wg.Done()
		t := time.NewTicker(l.o.Interval)
		defer t.Stop()
		var last time.Time
		for {
			if _, err := l.pass(ctx); err != nil && ctx.Err() == nil {
				l.c.logger.Warn("coordinator: lifecycle pass", zap.Int("shard", l.c.opts.Shard), zap.Error(err))
			}
			last = time.Now()
			// An object whose grace (or retry backoff) ends before the
			// next tick gets a pass then, not up to Interval later.
			var dueC <-chan time.Time
			var dueTimer *time.Timer
			l.mu.Lock()
			if !l.due.IsZero() {
				if d := l.due.Sub(l.c.clock.Now()); d < l.o.Interval {
					dueTimer = time.NewTimer(max(d, 10*time.Millisecond))
					dueC = dueTimer.C
				}
			}
			l.mu.Unlock()
			stopDue := func() {
				if dueTimer != nil {
					dueTimer.Stop()
				}
			}
			select {
			case <-ctx.Done():
				stopDue()
				return
			case <-t.C:
			case <-dueC:
			case <-l.wakeCh:
				if wait := min(time.Second, l.o.Interval) - time.Since(last); wait > 0 {
					timer := time.NewTimer(wait)
					select {
					case <-ctx.Done():
						timer.Stop()
						return
					case <-timer.C:
					}
				}
			}
			stopDue()
		}
	})
}

func (l *lifecycle) stop() {
	l.cancel()
	l.wg.Wait()
}

// wake asks the background worker for a pass soon.
func (l *lifecycle) wake() {
	select {
	case l.wakeCh <- struct{}{}:
	default:
	}
}

// deadRow is a dead object as a pass sees it.
type deadRow struct {
	key    string
	owners []int32 // never empty: this shard alone when the row has none
	owned  bool
	deadAt int64
}

// maxPassRows bounds the dead objects one pass looks at.
const maxPassRows = 10_000

// deadRows reads the dead objects from the read pool (at most
// ApplyInterval behind: an object dead there is dead).
func (l *lifecycle) deadRows(ctx context.Context) ([]deadRow, error) {
	self := l.c.opts.Shard
	// Read what has been applied so far: a pass woken by an entry sees it.
	if err := l.c.readBarrier(ctx, l.c.applied.Load()); err != nil {
		return nil, err
	}
	rows, err := l.c.store.rdb.QueryContext(ctx, "SELECT key, owners, received, dead_at FROM objects WHERE dead_at IS NOT NULL ORDER BY dead_at, object_id LIMIT ?", maxPassRows)
	if err != nil {
		return nil, fmt.Errorf("coordinator: listing dead objects: %w", err)
	}
	defer rows.Close()
	var out []deadRow
	for rows.Next() {
		var r deadRow
		var owners []byte
		var received bool
		if err := rows.Scan(&r.key, &owners, &received, &r.deadAt); err != nil {
			return nil, err
		}
		s := objectState{received: received}
		if s.owners, err = decodeInt32s(owners); err != nil {
			return nil, fmt.Errorf("coordinator: object %s: %w", r.key, err)
		}
		r.owned = s.owns(self)
		r.owners = s.owners
		if r.owners == nil {
			r.owners = []int32{int32(self)}
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// pass is one run of the worker.
func (l *lifecycle) pass(ctx context.Context) (LifecycleRun, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var run LifecycleRun
	if errp := l.c.broken.Load(); errp != nil {
		return run, *errp // another leader has the log, and the lifecycle
	}
	l.c.stats.lifecycleRuns.Add(1)
	rows, err := l.deadRows(ctx)
	if err != nil {
		return run, err
	}
	self := int32(l.c.opts.Shard)
	now := l.c.clock.Now()
	var firstErr error
	fail := func(key string, err error) {
		run.Failed++
		l.c.stats.lifecycleErrors.Add(1)
		if firstErr == nil {
			firstErr = err
		}
		r := l.retry[key]
		r.attempts++
		d := l.o.Backoff << min(r.attempts-1, 30)
		if d <= 0 || d > l.o.MaxBackoff {
			d = l.o.MaxBackoff
		}
		d = d/2 + rand.N(d/2+1) // jitter: [d/2, d]
		r.next = now.Add(d)
		l.retry[key] = r
		l.c.logger.Debug("coordinator: lifecycle step failed", zap.Int("shard", l.c.opts.Shard), zap.String("key", key), zap.Int("attempts", r.attempts), zap.Error(err))
	}
	clear(l.seen)
	l.due = time.Time{}
	due := l.setDue
	var last []deadRow // this shard is the last owner, the grace has passed
	for _, r := range rows {
		l.seen[r.key] = true
		if rs, ok := l.retry[r.key]; ok && now.Before(rs.next) {
			run.Deferred++
			due(rs.next)
			continue
		}
		if l.handed[r.key] {
			continue
		}
		pos := slices.Index(r.owners, self)
		if pos < 0 {
			// checkOwners makes this impossible; an object with no place
			// for this shard is not this shard's to act on.
			continue
		}
		if !r.owned {
			// The stall check: owners[0] may never have had the commit.
			if l.checked[r.key] || now.Before(time.UnixMilli(r.deadAt).Add(l.o.StallAfter)) {
				continue
			}
			if _, err := l.ask(ctx, r, r.owners[0], r.deadAt); err != nil {
				fail(r.key, err)
				continue
			}
			l.checked[r.key] = true
			delete(l.retry, r.key)
			run.StallChecks++
			continue
		}
		deadAt, handed, err := l.handOn(ctx, r, pos)
		if err != nil {
			fail(r.key, err)
			continue
		}
		if handed {
			run.HandedOff++
			l.c.stats.handedOff.Add(1)
			delete(l.retry, r.key)
			continue
		}
		if end := time.UnixMilli(deadAt).Add(l.o.Grace); now.Before(end) {
			run.Waiting++
			due(end)
			continue
		}
		last = append(last, r)
	}
	for key := range l.retry {
		if !l.seen[key] {
			delete(l.retry, key)
		}
	}
	for _, m := range []map[string]bool{l.handed, l.checked, l.gone} {
		for key := range m {
			if !l.seen[key] {
				delete(m, key)
			}
		}
	}
	for key := range l.declined {
		if !l.seen[key] {
			delete(l.declined, key)
		}
	}
	if len(last) > 0 {
		deleted, errs := l.deleteObjects(ctx, last, now)
		for key, err := range errs {
			fail(key, err)
		}
		run.Deleted += deleted
	}
	return run, firstErr
}

// setDue makes t the time of the next pass, if it is earlier than the
// one set. The caller holds l.mu.
func (l *lifecycle) setDue(t time.Time) {
	if l.due.IsZero() || t.Before(l.due) {
		l.due = t
	}
}

// handOn asks the owners after pos, in order, to receive the object. It
// returns whether one accepted, or else the latest time since which no
// owner has held a batch in it (this shard is then its last owner).
func (l *lifecycle) handOn(ctx context.Context, r deadRow, pos int) (deadAt int64, handed bool, err error) {
	deadAt = r.deadAt
	decl := l.declined[r.key]
	for _, next := range r.owners[pos+1:] {
		if at, ok := decl[next]; ok {
			deadAt = max(deadAt, at)
			continue
		}
		res, err := l.ask(ctx, r, next, deadAt)
		if err != nil {
			return deadAt, false, err
		}
		if res.Accepted {
			l.handed[r.key] = true
			delete(l.declined, r.key)
			l.c.logger.Debug("coordinator: handed an object on", zap.Int("shard", l.c.opts.Shard), zap.String("key", r.key), zap.Int32("to", next))
			return deadAt, true, nil
		}
		if decl == nil {
			decl = map[int32]int64{}
			l.declined[r.key] = decl
		}
		at := res.DeadSince.UnixMilli()
		decl[next] = at
		deadAt = max(deadAt, at)
	}
	return deadAt, false, nil
}

// ask sends a ReceiveOwnership to shard.
func (l *lifecycle) ask(ctx context.Context, r deadRow, shard int32, deadAt int64) (OwnershipResult, error) {
	p, err := l.peer(int(shard))
	if err != nil {
		return OwnershipResult{}, err
	}
	owners := make([]int, len(r.owners))
	for i, s := range r.owners {
		owners[i] = int(s)
	}
	res, err := p.ReceiveOwnership(ctx, OwnershipRequest{ObjectKey: r.key, Owners: owners, From: l.c.opts.Shard, DeadSince: time.UnixMilli(deadAt)})
	if err != nil {
		return res, fmt.Errorf("coordinator: shard %d receiving %s: %w", shard, r.key, err)
	}
	return res, nil
}

func (l *lifecycle) peer(shard int) (Peer, error) {
	if shard == l.c.opts.Shard {
		return l.c, nil
	}
	if l.o.Peers == nil {
		return nil, fmt.Errorf("coordinator: no Lifecycle.Peers to reach shard %d", shard)
	}
	p, err := l.o.Peers(shard)
	if err != nil {
		return nil, fmt.Errorf("coordinator: reaching shard %d: %w", shard, err)
	}
	return p, nil
}

// deleteConcurrency bounds the bucket deletes of a pass in flight.
const deleteConcurrency = 16

// deleteObjects deletes from the bucket the objects this shard is the last
// owner of, then has every owner forget those whose commit deadline has
// passed, this shard last. It returns how many it deleted, and the error
// of each key that failed.
func (l *lifecycle) deleteObjects(ctx context.Context, rows []deadRow, now time.Time) (int, map[string]error) {
	var toDelete []string
	for _, r := range rows {
		if !l.gone[r.key] {
			toDelete = append(toDelete, r.key)
		}
	}
	errs := map[string]error{}
	var done []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, deleteConcurrency)
	for _, key := range toDelete {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			err := l.deleteFiles(ctx, key)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs[key] = err
				return
			}
			done = append(done, key)
		}()
	}
	wg.Wait()
	for _, key := range done {
		l.gone[key] = true
		delete(l.retry, key)
		l.c.stats.deleted.Add(1)
		if l.o.OnDelete != nil {
			l.o.OnDelete(key)
		}
		l.c.logger.Debug("coordinator: deleted an object", zap.Int("shard", l.c.opts.Shard), zap.String("key", key))
	}
	deleted := len(done)

	// Forget those past their commit deadline: the other owners first (if
	// this shard forgot first and then stopped, they would wait for
	// StallAfter), then this one.
	var forget []deadRow
	for _, r := range rows {
		if !l.gone[r.key] {
			continue
		}
		if at := l.forgetAt(r.key); now.Before(at) {
			l.setDue(at) // a pass then forgets it
			continue
		}
		forget = append(forget, r)
	}
	byShard := map[int32][]string{}
	for _, r := range forget {
		for _, s := range r.owners {
			if s != int32(l.c.opts.Shard) {
				byShard[s] = append(byShard[s], r.key)
			}
		}
	}
	shards := make([]int32, 0, len(byShard))
	for s := range byShard {
		shards = append(shards, s)
	}
	slices.Sort(shards)
	for _, s := range shards {
		keys := byShard[s]
		p, err := l.peer(int(s))
		if err == nil {
			err = p.ObjectsDeleted(ctx, keys)
		}
		if err != nil {
			for _, k := range keys {
				if errs[k] == nil {
					errs[k] = fmt.Errorf("coordinator: shard %d forgetting deleted objects: %w", s, err)
				}
			}
		}
	}
	var mine []string
	for _, r := range forget {
		if errs[r.key] == nil {
			mine = append(mine, r.key)
		}
	}
	if len(mine) == 0 {
		return deleted, errs
	}
	if err := l.c.ObjectsDeleted(ctx, mine); err != nil {
		for _, k := range mine {
			errs[k] = fmt.Errorf("coordinator: forgetting deleted objects: %w", err)
		}
		return deleted, errs
	}
	for _, k := range mine {
		delete(l.gone, k)
		delete(l.retry, k)
	}
	return deleted, errs
}

// deleteFiles deletes an object from the bucket; for a remote segment's
// key (under <prefix>tiered/), every file of the segment: the key plus
// each of RemoteSegmentExts. A file that is not there is fine.
func (l *lifecycle) deleteFiles(ctx context.Context, key string) error {
	files := []string{key}
	if strings.HasPrefix(key, l.c.opts.Prefix+tieredDir) {
		files = files[:0]
		for _, ext := range RemoteSegmentExts {
			files = append(files, key+ext)
		}
	}
	for _, f := range files {
		if err := l.o.Bucket.Delete(ctx, f); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return fmt.Errorf("coordinator: deleting %s: %w", f, err)
		}
	}
	return nil
}

// forgetAt is when the owners of a deleted object may forget it: once no
// shard would accept its commit (or a remote segment's registration) any
// more (see Options.CommitDeadline).
func (l *lifecycle) forgetAt(key string) time.Time {
	if l.c.opts.CommitDeadline <= 0 {
		return time.Time{}
	}
	_, named, err := wal.ParseObjectKey(l.c.opts.Prefix, key)
	if err != nil {
		_, _, t, ok := ParseRemoteSegmentKey(l.c.opts.Prefix, key)
		if !ok {
			return time.Time{}
		}
		named = t
	}
	return named.Add(l.c.opts.CommitDeadline + time.Millisecond) // the deadline is inclusive
}
