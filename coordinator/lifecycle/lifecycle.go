package lifecycle

import (
	"context"
	"fmt"
	"maps"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/diskless-go/diskless/clock"
	"github.com/diskless-go/diskless/coordinator/state"
	"github.com/diskless-go/diskless/coordinator/store"
	"github.com/diskless-go/diskless/internal/backoff"
	"github.com/diskless-go/diskless/wal"
	"go.uber.org/zap"
	"gocloud.dev/gcerrors"
)

// Shard is all the lifecycle worker needs of its shard.
type Shard interface {
	Peer
	// DeadRows returns at most limit of the shard's dead objects, the
	// longest dead first, as of every entry applied.
	DeadRows(ctx context.Context, limit int) ([]store.ObjectRowState, error)
	// Err returns why the shard stopped serving, nil while it serves.
	Err() error
}

// Env is what the worker knows of its shard beside the calls.
type Env struct {
	Shard          int
	Prefix         string
	CommitDeadline time.Duration
	Clock          clock.Clock
	Logger         *zap.Logger
}

// stats are the worker's counters (see ShardStats).
type stats struct {
	HandedOff, Deleted, Errors, Runs atomic.Int64
}

// Run is what one pass of the lifecycle worker did.
type Run struct {
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

// Worker is a shard's lifecycle worker. A pass holds mu; the maps are
// what it learned and keeps between passes (all of it can be learned
// again: a restart loses it and asks again).
type Worker struct {
	host   Shard
	env    Env
	o      Options
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	wakeCh chan struct{}

	Stats stats

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

func New(host Shard, env Env, o Options) *Worker {
	ctx, cancel := context.WithCancel(context.Background())
	return &Worker{
		host: host, env: env, o: o, ctx: ctx, cancel: cancel,
		wakeCh:   make(chan struct{}, 1),
		retry:    map[string]retryState{},
		handed:   map[string]bool{},
		declined: map[string]map[int32]int64{},
		checked:  map[string]bool{},
		gone:     map[string]bool{},
		seen:     map[string]bool{},
	}
}

// Start starts the background worker, unless Interval is negative. Its
// first pass runs at once: a new leader resumes where the last one was.
func (l *Worker) Start() {
	if l.o.Interval < 0 {
		return
	}
	l.wg.Add(1)
	go pprof.Do(l.ctx, pprof.Labels("diskless", "coordinator-lifecycle", "shard", fmt.Sprint(l.env.Shard)), func(ctx context.Context) {
		defer l.wg.Done()
		t := clock.NewTicker(l.env.Clock, l.o.Interval)
		defer t.Stop()
		var last time.Time
		for {
			if _, err := l.Pass(ctx); err != nil && ctx.Err() == nil {
				l.env.Logger.Warn("coordinator: lifecycle pass", zap.Int("shard", l.env.Shard), zap.Error(err))
			}
			last = l.env.Clock.Now()
			// An object whose grace (or retry backoff) ends before the
			// next tick gets a pass then, not up to Interval later.
			var dueC <-chan time.Time
			var dueTimer clock.Timer
			l.mu.Lock()
			if !l.due.IsZero() {
				if d := l.due.Sub(l.env.Clock.Now()); d < l.o.Interval {
					dueC, dueTimer = clock.After(l.env.Clock, max(d, 10*time.Millisecond))
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
				if wait := min(time.Second, l.o.Interval) - clock.Since(l.env.Clock, last); wait > 0 {
					if clock.Sleep(ctx, l.env.Clock, wait) != nil {
						return
					}
				}
			}
			stopDue()
		}
	})
}

func (l *Worker) Stop() {
	l.cancel()
	l.wg.Wait()
}

// Wake asks the background worker for a pass soon.
func (l *Worker) Wake() {
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

// deadRows reads the shard's dead objects, as of every entry applied.
func (l *Worker) deadRows(ctx context.Context) ([]deadRow, error) {
	objs, err := l.host.DeadRows(ctx, maxPassRows)
	if err != nil {
		return nil, err
	}
	out := make([]deadRow, 0, len(objs))
	for _, o := range objs {
		r := deadRow{key: o.Key, owners: o.Owners, owned: o.Owns(l.env.Shard), deadAt: o.DeadAt}
		if r.owners == nil {
			r.owners = []int32{int32(l.env.Shard)}
		}
		out = append(out, r)
	}
	return out, nil
}

// Pass is one run of the worker.
func (l *Worker) Pass(ctx context.Context) (Run, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var run Run
	if err := l.host.Err(); err != nil {
		return run, err // another leader has the log, and the lifecycle
	}
	l.Stats.Runs.Add(1)
	rows, err := l.deadRows(ctx)
	if err != nil {
		return run, err
	}
	self := int32(l.env.Shard)
	now := l.env.Clock.Now()
	var firstErr error
	fail := func(key string, err error) {
		run.Failed++
		if firstErr == nil {
			firstErr = err
		}
		l.backOff(key, now, err)
	}
	clear(l.seen)
	l.due = time.Time{}
	var last []deadRow // this shard is the last owner, the grace has passed
	for _, r := range rows {
		if l.visit(ctx, r, self, now, &run, fail) {
			last = append(last, r)
		}
	}
	l.forgetUnseen()
	if len(last) > 0 {
		deleted, errs := l.deleteObjects(ctx, last, now)
		for key, err := range errs {
			fail(key, err)
		}
		run.Deleted += deleted
	}
	return run, firstErr
}

// visit acts on one dead row: a stall check, a hand-on, or waiting out
// the grace. It reports whether this shard, the last owner, may delete
// the object now.
func (l *Worker) visit(ctx context.Context, r deadRow, self int32, now time.Time, run *Run, fail func(key string, err error)) bool {
	l.seen[r.key] = true
	if rs, ok := l.retry[r.key]; ok && now.Before(rs.next) {
		run.Deferred++
		l.setDue(rs.next)
		return false
	}
	if l.handed[r.key] {
		return false
	}
	pos := slices.Index(r.owners, self)
	if pos < 0 {
		// checkOwners makes this impossible; an object with no place
		// for this shard is not this shard's to act on.
		return false
	}
	if !r.owned {
		// The stall check: owners[0] may never have had the commit.
		if l.checked[r.key] || now.Before(time.UnixMilli(r.deadAt).Add(l.o.StallAfter)) {
			return false
		}
		if _, err := l.ask(ctx, r, r.owners[0], r.deadAt); err != nil {
			fail(r.key, err)
			return false
		}
		l.checked[r.key] = true
		delete(l.retry, r.key)
		run.StallChecks++
		return false
	}
	deadAt, handed, err := l.handOn(ctx, r, pos)
	if err != nil {
		fail(r.key, err)
		return false
	}
	if handed {
		run.HandedOff++
		l.Stats.HandedOff.Add(1)
		delete(l.retry, r.key)
		return false
	}
	if end := time.UnixMilli(deadAt).Add(l.o.Grace); now.Before(end) {
		run.Waiting++
		l.setDue(end)
		return false
	}
	return true
}

// forgetUnseen drops what the worker learned of the objects the pass did
// not see: they are gone, or no longer dead.
func (l *Worker) forgetUnseen() {
	maps.DeleteFunc(l.retry, func(key string, _ retryState) bool { return !l.seen[key] })
	for _, m := range []map[string]bool{l.handed, l.checked, l.gone} {
		maps.DeleteFunc(m, func(key string, _ bool) bool { return !l.seen[key] })
	}
	maps.DeleteFunc(l.declined, func(key string, _ map[int32]int64) bool { return !l.seen[key] })
}

// backOff records that a step on key failed at now with err: the key is
// skipped until a backoff (doubling, with jitter, up to MaxBackoff) ends.
func (l *Worker) backOff(key string, now time.Time, err error) {
	l.Stats.Errors.Add(1)
	r := l.retry[key]
	r.attempts++
	r.next = now.Add(backoff.Policy{Initial: l.o.Backoff, Max: l.o.MaxBackoff, Jitter: true}.Delay(r.attempts))
	l.retry[key] = r
	l.env.Logger.Debug("coordinator: lifecycle step failed", zap.Int("shard", l.env.Shard), zap.String("key", key), zap.Int("attempts", r.attempts), zap.Error(err))
}

// setDue makes t the time of the next pass, if it is earlier than the
// one set. The caller holds l.mu.
func (l *Worker) setDue(t time.Time) {
	if l.due.IsZero() || t.Before(l.due) {
		l.due = t
	}
}

// handOn asks the owners after pos, in order, to receive the object. It
// returns whether one accepted, or else the latest time since which no
// owner has held a batch in it (this shard is then its last owner).
func (l *Worker) handOn(ctx context.Context, r deadRow, pos int) (deadAt int64, handed bool, err error) {
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
			l.env.Logger.Debug("coordinator: handed an object on", zap.Int("shard", l.env.Shard), zap.String("key", r.key), zap.Int32("to", next))
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
func (l *Worker) ask(ctx context.Context, r deadRow, shard int32, deadAt int64) (state.OwnershipResult, error) {
	p, err := l.peer(int(shard))
	if err != nil {
		return state.OwnershipResult{}, err
	}
	owners := make([]int, len(r.owners))
	for i, s := range r.owners {
		owners[i] = int(s)
	}
	res, err := p.ReceiveOwnership(ctx, state.OwnershipRequest{ObjectKey: r.key, Owners: owners, From: l.env.Shard, DeadSince: time.UnixMilli(deadAt)})
	if err != nil {
		return res, fmt.Errorf("coordinator: shard %d receiving %s: %w", shard, r.key, err)
	}
	return res, nil
}

func (l *Worker) peer(shard int) (Peer, error) {
	if shard == l.env.Shard {
		return l.host, nil
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

// DeleteConcurrency bounds the bucket deletes of a pass in flight.
const DeleteConcurrency = 16

// deleteObjects deletes from the bucket the objects this shard is the last
// owner of, then has every owner forget those whose commit deadline has
// passed, this shard last. It returns how many it deleted, and the error
// of each key that failed.
func (l *Worker) deleteObjects(ctx context.Context, rows []deadRow, now time.Time) (int, map[string]error) {
	var toDelete []string
	for _, r := range rows {
		if !l.gone[r.key] {
			toDelete = append(toDelete, r.key)
		}
	}
	errs := ForEachConcurrently(toDelete, DeleteConcurrency, func(key string) error { return l.deleteFiles(ctx, key) })
	deleted := 0
	for _, key := range toDelete {
		if errs[key] != nil {
			continue
		}
		deleted++
		l.gone[key] = true
		delete(l.retry, key)
		l.Stats.Deleted.Add(1)
		if l.o.OnDelete != nil {
			l.o.OnDelete(key)
		}
		l.env.Logger.Debug("coordinator: deleted an object", zap.Int("shard", l.env.Shard), zap.String("key", key))
	}

	l.forget(ctx, rows, now, errs)
	return deleted, errs
}

// forget makes the owners forget the deleted objects of rows that are past
// their commit deadline: the other owners first (if this shard forgot
// first and then stopped, they would wait for StallAfter), then this one.
// A failure goes into errs, by key.
func (l *Worker) forget(ctx context.Context, rows []deadRow, now time.Time, errs map[string]error) {
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
	l.othersForget(ctx, forget, errs)
	var mine []string
	for _, r := range forget {
		if errs[r.key] == nil {
			mine = append(mine, r.key)
		}
	}
	if len(mine) == 0 {
		return
	}
	if err := l.host.ObjectsDeleted(ctx, mine); err != nil {
		for _, k := range mine {
			errs[k] = fmt.Errorf("coordinator: forgetting deleted objects: %w", err)
		}
		return
	}
	for _, k := range mine {
		delete(l.gone, k)
		delete(l.retry, k)
	}
}

// othersForget tells the other owners of forget's objects to forget
// them, a call per shard. A failure goes into errs, by key.
func (l *Worker) othersForget(ctx context.Context, forget []deadRow, errs map[string]error) {
	byShard := map[int32][]string{}
	for _, r := range forget {
		for _, s := range r.owners {
			if s != int32(l.env.Shard) {
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
}

// deleteFiles deletes an object from the bucket; for a remote segment's
// key (under <prefix>tiered/), every file of the segment: the key plus
// each of state.RemoteSegmentExts. A file that is not there is fine.
func (l *Worker) deleteFiles(ctx context.Context, key string) error {
	files := []string{key}
	if strings.HasPrefix(key, l.env.Prefix+state.TieredDir) {
		files = files[:0]
		for _, ext := range state.RemoteSegmentExts {
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
func (l *Worker) forgetAt(key string) time.Time {
	if l.env.CommitDeadline <= 0 {
		return time.Time{}
	}
	_, named, err := wal.ParseObjectKey(l.env.Prefix, key)
	if err != nil {
		_, _, t, ok := state.ParseRemoteSegmentKey(l.env.Prefix, key)
		if !ok {
			return time.Time{}
		}
		named = t
	}
	return named.Add(l.env.CommitDeadline + time.Millisecond) // the deadline is inclusive
}

// ForEachConcurrently calls fn for each key, at most n at once, and
// returns the error of each key whose call failed.
func ForEachConcurrently(keys []string, n int, fn func(key string) error) map[string]error {
	errs := map[string]error{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, n)
	for _, key := range keys {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(key); err != nil {
				mu.Lock()
				errs[key] = err
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errs
}
