package memcluster

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/diskless-go/diskless/clock"
	"github.com/diskless-go/diskless/cluster"
)

// Node is one broker's membership of a cluster on a Service
// (cluster.Node), as etcdcluster.Node is on etcd: its registration under
// a lease, its campaigns for the shards, what its watch has shown it of
// the other members and of each shard's leader, and its transport. It is
// the coordinator.Forwarder of the broker's Coordinator, and safe for
// concurrent use.
//
// Shard n is meant to be led by the live member at position n mod (live
// members) in ID order: that member campaigns at once; the others only
// once the shard has had no leader for a lease TTL, and withdraw their
// campaign when a leader appears; a leader that is not the preferred
// member gives the shard up once the preferred one has been live for two
// lease TTLs.
type Node struct {
	svc   *Service
	clock clock.Clock
	conn  *conn
	opts  cluster.JoinOptions
	tr    cluster.Transport
	cb    cluster.Callbacks
	log   *zap.Logger
	srv   cluster.Server
	w     *watcher

	mu struct {
		sync.Mutex
		members  map[int32]memberSeen
		leaders  []map[string]leaderKey // by shard: election keys
		sess     *session
		leading  []bool
		own      []ownKey // by shard: the election key this Node leads with
		features cluster.FinalizedFeatures
		// featureMods are the mod revisions of the levels in features:
		// a watch behind what this Node read or wrote changes nothing.
		featureMods map[string]int64
	}
	changed chan struct{} // closed and replaced when a member or leader changes (under mu)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
	// killed is set by Kill: the Node tells the Service nothing more
	// (no revoke, no resign) and its leaders' appends fail.
	killed atomic.Bool
}

// session is one lease of the Node's and its registration; ctx ends
// when the Node learns that the lease has ended.
type session struct {
	lease  int64
	ctx    context.Context
	cancel context.CancelFunc
	// heldUntil is until when, on the Node's clock (in Unix
	// nanoseconds), the lease is surely held: its TTL after the sending
	// of the last grant or renewal that was answered. The Service ends a
	// lease its TTL after it took the last renewal, which is later.
	heldUntil atomic.Int64
}

// held reports whether the session's lease is surely held at now.
func (s *session) held(now time.Time) bool {
	return s.ctx.Err() == nil && now.UnixNano() < s.heldUntil.Load()
}

type memberSeen struct {
	m     cluster.Member
	since time.Time
}

// ownKey is the election key of a shard this Node leads, and whether
// its watch has shown it deleted since.
type ownKey struct {
	key  string
	rev  int64
	gone bool
}

type leaderKey struct {
	rev int64
	id  int32
}

var _ cluster.Node = (*Node)(nil)

// Join implements cluster.Conn: it registers this broker under a lease
// of JoinOptions.LeaseTTL, starts serving its peers on Member.PeerAddr
// (over JoinOptions.Transport, or the Service's), and campaigns for the
// shards. It returns once the broker is registered and knows the members
// and leaders there are, and the finalized features; a broker that does
// not support a finalized level is refused with INVALID_UPDATE_VERSION.
func (c *conn) Join(ctx context.Context, opts *cluster.JoinOptions, cb cluster.Callbacks) (cluster.Node, error) {
	if opts == nil || opts.Shards < 1 || cb.Lead == nil || cb.Unlead == nil || cb.Serve == nil {
		return nil, errors.New("memcluster: Join needs JoinOptions with Shards, and the Lead, Unlead and Serve callbacks")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if c.closed.Load() {
		return nil, cluster.ErrClosed
	}
	s := c.svc
	n := &Node{svc: s, clock: s.clock, conn: c, opts: *opts, tr: cmp.Or[cluster.Transport](opts.Transport, s.tr), cb: cb, log: c.log, changed: make(chan struct{})}
	n.opts.LeaseTTL = cmp.Or(n.opts.LeaseTTL, 5*time.Second)
	n.mu.members = map[int32]memberSeen{}
	n.mu.leaders = make([]map[string]leaderKey, n.opts.Shards)
	for i := range n.mu.leaders {
		n.mu.leaders[i] = map[string]leaderKey{}
	}
	n.mu.leading = make([]bool, n.opts.Shards)
	n.mu.own = make([]ownKey, n.opts.Shards)
	n.mu.features = cluster.FinalizedFeatures{Levels: map[string]int{}, Epoch: -1}
	n.mu.featureMods = map[string]int64{}
	srv, err := n.tr.Listen(n.opts.Member.PeerAddr, cb.Serve)
	if err != nil {
		return nil, fmt.Errorf("memcluster: listening for peers: %w", err)
	}
	n.srv = srv
	n.opts.Member.PeerAddr = srv.Addr()
	n.ctx, n.cancel = context.WithCancel(context.Background())
	if err := n.newSession(); err != nil {
		n.cancel()
		srv.Close()
		return nil, err
	}
	w, initial := s.watch(n.opts.Member.ID, c.prefix)
	n.w = w
	n.apply(initial)
	if err := n.joinFeatures(ctx); err != nil {
		n.Close()
		return nil, err
	}
	n.goLabelled("watch", n.watch)
	n.goLabelled("lease", n.keepLease)
	for i := range n.opts.Shards {
		n.goLabelled("campaign-"+strconv.Itoa(i), func() { n.campaign(i) })
	}
	return n, nil
}

// goLabelled runs fn on a goroutine of the Node's, labelled for pprof.
func (n *Node) goLabelled(what string, fn func()) {
	n.wg.Add(1)
	go pprof.Do(context.Background(), pprof.Labels("diskless", "memcluster-"+what), func(context.Context) {
		defer n.wg.Done()
		fn()
	})
}

func (n *Node) membersDir() string       { return n.conn.prefix + "members/" }
func (n *Node) shardsDir() string        { return n.conn.prefix + "shards/" }
func (n *Node) metaDir() string          { return n.conn.prefix + "meta/" }
func (n *Node) electionDir(i int) string { return n.shardsDir() + strconv.Itoa(i) + "/" }
func (n *Node) memberKey() string        { return n.membersDir() + strconv.Itoa(int(n.opts.Member.ID)) }

// newSession grants a lease and registers this member under it.
func (n *Node) newSession() error {
	val, _ := json.Marshal(n.opts.Member)
	sent := n.clock.Now()
	id, err := n.svc.grant(n.opts.Member.ID, n.opts.LeaseTTL, n.memberKey(), val)
	if err != nil {
		return fmt.Errorf("memcluster: registering member %d: %w", n.opts.Member.ID, err)
	}
	sess := &session{lease: id}
	sess.heldUntil.Store(sent.Add(n.opts.LeaseTTL).UnixNano())
	sess.ctx, sess.cancel = context.WithCancel(n.ctx)
	n.mu.Lock()
	n.mu.sess = sess
	n.mu.Unlock()
	n.log.Info("cluster: registered", zap.Int32("id", n.opts.Member.ID), zap.String("peer", n.opts.Member.PeerAddr), zap.Int64("lease", id))
	return nil
}

// keepLease renews the lease every third of its TTL, as etcd's client
// does; when a renewal finds it ended (this broker was paused or cut off
// past its TTL, or ExpireLease), the session's leaderships end and it
// registers again.
func (n *Node) keepLease() {
	ttl := n.opts.LeaseTTL
	for n.sleep(n.ctx, ttl/3) {
		n.mu.Lock()
		sess := n.mu.sess
		n.mu.Unlock()
		sent := n.clock.Now()
		err := n.svc.keepAlive(n.opts.Member.ID, sess.lease)
		if err == nil {
			sess.heldUntil.Store(sent.Add(ttl).UnixNano())
		}
		if !errors.Is(err, errLeaseNotFound) {
			if err != nil && !errors.Is(err, errNoAnswer) {
				n.log.Debug("cluster: renewing the lease", zap.Error(err))
			}
			continue
		}
		sess.cancel()
		n.log.Warn("cluster: lease lost; leaderships end; registering again", zap.Int32("id", n.opts.Member.ID))
		for {
			err := n.newSession()
			if err == nil || n.ctx.Err() != nil {
				break
			}
			n.log.Warn("cluster: registering again failed", zap.Error(err))
			if !n.sleep(n.ctx, ttl/4) {
				return
			}
		}
	}
}

// watch applies the changes the Service shows this Node until Close.
func (n *Node) watch() {
	for {
		evs := n.w.next(n.clock, n.ctx.Done())
		if evs == nil {
			return
		}
		n.apply(evs)
	}
}

// apply applies watched events to the Node's view and tells the
// waiters; an append to a shard's log calls Callbacks.Appended.
func (n *Node) apply(evs []event) {
	appended := false
	for _, e := range evs {
		switch {
		case strings.HasPrefix(e.key, n.membersDir()):
			n.applyMember(e)
		case strings.HasPrefix(e.key, n.shardsDir()):
			n.applyLeader(e)
		case strings.HasPrefix(e.key, n.featuresDir()):
			n.applyFeature(e)
		case strings.HasPrefix(e.key, n.metaDir()) && !e.del:
			appended = true
		}
	}
	n.notify()
	if appended && n.cb.Appended != nil {
		n.cb.Appended()
	}
}

func (n *Node) applyMember(e event) {
	id, err := strconv.ParseInt(strings.TrimPrefix(e.key, n.membersDir()), 10, 32)
	if err != nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if e.del {
		delete(n.mu.members, int32(id))
		return
	}
	var m cluster.Member
	if json.Unmarshal(e.val, &m) != nil {
		return
	}
	seen := n.mu.members[int32(id)]
	if seen.since.IsZero() {
		seen.since = n.clock.Now()
	}
	seen.m = m
	n.mu.members[int32(id)] = seen
}

func (n *Node) applyLeader(e event) {
	rest := strings.TrimPrefix(e.key, n.shardsDir())
	i, err := strconv.Atoi(rest[:max(strings.IndexByte(rest, '/'), 0)])
	if err != nil || i < 0 || i >= n.opts.Shards {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if e.del {
		delete(n.mu.leaders[i], e.key)
		if own := &n.mu.own[i]; own.key == e.key && e.mod > own.rev {
			own.gone = true
		}
		return
	}
	id, err := strconv.ParseInt(string(e.val), 10, 32)
	if err != nil {
		return
	}
	n.mu.leaders[i][e.key] = leaderKey{rev: e.create, id: int32(id)}
}

func (n *Node) notify() {
	n.mu.Lock()
	close(n.changed)
	n.changed = make(chan struct{})
	n.mu.Unlock()
}

// changes returns a channel closed at the next change.
func (n *Node) changes() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.changed
}

// Members returns the live members, by ID, as this Node's watch has
// shown them.
func (n *Node) Members() []cluster.Member {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]cluster.Member, 0, len(n.mu.members))
	for _, s := range n.mu.members {
		out = append(out, s.m)
	}
	slices.SortFunc(out, func(a, b cluster.Member) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Self returns this broker as registered (PeerAddr as listened on).
func (n *Node) Self() cluster.Member { return n.opts.Member }

// Leader returns the live member that leads shard i, if any, as this
// Node's watch has shown them: the member of the oldest election key.
func (n *Node) Leader(i int) (cluster.Member, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.leaderLocked(i)
}

func (n *Node) leaderLocked(i int) (cluster.Member, bool) {
	if i < 0 || i >= len(n.mu.leaders) {
		return cluster.Member{}, false
	}
	best := leaderKey{rev: -1}
	for _, k := range n.mu.leaders[i] {
		if best.rev < 0 || k.rev < best.rev {
			best = k
		}
	}
	if best.rev < 0 {
		return cluster.Member{}, false
	}
	s, ok := n.mu.members[best.id]
	return s.m, ok
}

// preferredLocked returns the member meant to lead shard i, and since
// when it has been live.
func (n *Node) preferredLocked(i int) (memberSeen, bool) {
	if len(n.mu.members) == 0 {
		return memberSeen{}, false
	}
	ids := slices.Sorted(maps.Keys(n.mu.members))
	return n.mu.members[ids[i%len(ids)]], true
}

// Leading reports whether this broker leads shard i (Lead was called,
// and Unlead not yet).
func (n *Node) Leading(i int) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return i >= 0 && i < len(n.mu.leading) && n.mu.leading[i]
}

// Forward sends a call for shard i to its leader (coordinator.Forwarder),
// at the peer address it registered, for its node ID.
func (n *Node) Forward(ctx context.Context, shard int, method string, body []byte) func() ([]byte, error) {
	m, ok := n.Leader(shard)
	if !ok {
		err := fmt.Errorf("memcluster: shard %d has no leader now", shard)
		return func() ([]byte, error) { return nil, err }
	}
	return n.tr.Call(cluster.WithCallee(ctx, m.ID), m.PeerAddr, shard, method, body)
}

// campaign runs shard i's elections for this broker until Close.
func (n *Node) campaign(i int) {
	ttl := n.opts.LeaseTTL
	var leaderless time.Time // since when the shard has had no leader, as seen here
	for n.ctx.Err() == nil {
		n.mu.Lock()
		sess := n.mu.sess
		pref, havePref := n.preferredLocked(i)
		leader, hasLeader := n.leaderLocked(i)
		n.mu.Unlock()
		if sess.ctx.Err() != nil {
			// The lease ended and keepLease registers again: wait for
			// it (its registration is a change) rather than campaign
			// with a lease that is gone.
			n.waitChange(ttl / 4)
			continue
		}
		preferred := havePref && pref.m.ID == n.opts.Member.ID
		if hasLeader && leader.ID == n.opts.Member.ID {
			// This member's key leads the election, and this member
			// does not lead: a resign that failed (or a campaign
			// withdrawn) left it behind, and it goes only with the
			// lease, which lives as long as this member. Every other
			// candidate waits behind it. So it counts as no leader:
			// campaigning takes it up again (the same lease, the same
			// key); a member not preferred first waits a TTL, as for
			// any shard without a leader (the watch may still show a
			// key it has just resigned).
			hasLeader = false
		}
		switch {
		case hasLeader:
			leaderless = time.Time{}
		case leaderless.IsZero():
			leaderless = n.clock.Now()
		}
		if !preferred && (hasLeader || clock.Since(n.clock, leaderless) < ttl) {
			n.waitChange(ttl / 4)
			continue
		}
		n.runElection(i, sess, preferred)
	}
}

// runElection campaigns for shard i once and, if elected, leads it until
// the session ends, Close, the Node sees its election key go, or the
// leadership is given up.
func (n *Node) runElection(i int, sess *session, preferred bool) {
	ttl := n.opts.LeaseTTL
	id := n.opts.Member.ID
	cctx, cancel := context.WithCancel(sess.ctx)
	defer cancel()
	var withdraw func() bool
	if !preferred {
		// Withdraw the campaign when another leader appears (the
		// preferred member came back). Only the campaign: a leadership
		// won is kept.
		withdraw = func() bool { m, ok := n.Leader(i); return ok && m.ID != id }
	}
	key, rev, err := n.svc.campaign(cctx, candidacy{
		id: id, lease: sess.lease, dir: n.electionDir(i), shard: i, val: []byte(strconv.Itoa(int(id))),
		withdraw: withdraw, changes: n.changes,
	})
	if err != nil {
		if n.ctx.Err() == nil && cctx.Err() == nil && !errors.Is(err, context.Canceled) {
			n.log.Warn("cluster: campaign failed", zap.Int("shard", i), zap.Error(err))
			n.sleep(n.ctx, ttl/4)
		}
		return
	}
	n.log.Info("cluster: elected", zap.Int("shard", i), zap.Int32("id", id))
	// Watch for the key's deletion from now on; one before is found by
	// asking the Service once.
	n.mu.Lock()
	n.mu.own[i] = ownKey{key: key, rev: rev}
	n.mu.Unlock()
	if !n.svc.holds(key, rev) {
		n.mu.Lock()
		n.mu.own[i] = ownKey{}
		n.mu.Unlock()
		return
	}
	log := &fencedLog{Mem: n.svc.shardLog(n.conn.prefix, i).Writer(), svc: n.svc, owner: id, key: key, rev: rev, prefix: logPrefix(n.conn.prefix, i),
		leased: func() bool { return sess.held(n.clock.Now()) }, killed: &n.killed}
	if err := n.cb.Lead(cctx, i, log); err != nil {
		n.mu.Lock()
		n.mu.own[i] = ownKey{}
		n.mu.Unlock()
		log.giveUp()
		log.Close()
		n.log.Warn("cluster: could not lead an elected shard; giving it up", zap.Int("shard", i), zap.Error(err))
		n.resign(key, rev)
		n.sleep(n.ctx, ttl)
		return
	}
	n.mu.Lock()
	n.mu.leading[i] = true
	n.mu.Unlock()
	defer func() {
		// As etcdcluster: Unlead runs while the election is still held
		// (when the leadership is given up rather than lost, appends
		// under way may land), then the log is closed and the election
		// resigned.
		n.mu.Lock()
		n.mu.leading[i] = false
		n.mu.Unlock()
		n.cb.Unlead(i)
		log.Close()
		log.giveUp()
		n.resign(key, rev)
		n.mu.Lock()
		n.mu.own[i] = ownKey{}
		n.mu.Unlock()
	}()
	for {
		wake, stop := clock.After(n.clock, ttl/4)
		select {
		case <-cctx.Done():
			stop.Stop()
			return
		case <-n.changes():
		case <-wake:
		}
		stop.Stop()
		n.mu.Lock()
		gone := n.mu.own[i].gone
		n.mu.Unlock()
		if gone {
			n.log.Warn("cluster: this broker's election key is gone; the leadership has ended", zap.Int("shard", i))
			return
		}
		if n.cb.Healthy != nil {
			if err := n.cb.Healthy(i); err != nil {
				n.log.Warn("cluster: a led shard stopped serving; giving it up to lead it again", zap.Int("shard", i), zap.Error(err))
				return
			}
		}
		n.mu.Lock()
		pref, ok := n.preferredLocked(i)
		n.mu.Unlock()
		if ok && pref.m.ID != id && clock.Since(n.clock, pref.since) > 2*ttl {
			n.log.Info("cluster: giving a shard to its preferred member", zap.Int("shard", i), zap.Int32("to", pref.m.ID))
			return
		}
	}
}

// resign gives up an election, best effort: a key it fails to delete
// stays while this member's lease lives, and campaign takes it up again.
func (n *Node) resign(key string, rev int64) {
	if n.killed.Load() {
		return // a killed process tells the Service nothing
	}
	if err := n.svc.resign(n.opts.Member.ID, key, rev); err != nil {
		n.log.Debug("cluster: resigning", zap.Error(err))
	}
}

// waitChange waits for a change of members or leaders, or d.
func (n *Node) waitChange(d time.Duration) {
	wake, t := clock.After(n.clock, d)
	defer t.Stop()
	select {
	case <-n.ctx.Done():
	case <-n.changes():
	case <-wake:
	}
}

// Close gives up every leadership (Callbacks.Unlead is called for each),
// withdraws the membership (the lease is revoked: the others see it gone
// after the watch delay), and closes the server. The Transport is left
// open. It is safe to call twice.
func (n *Node) Close() error {
	var err error
	n.once.Do(func() {
		n.cancel()
		n.wg.Wait()
		n.mu.Lock()
		sess := n.mu.sess
		n.mu.Unlock()
		if sess != nil && !n.killed.Load() {
			if rerr := n.svc.revoke(n.opts.Member.ID, sess.lease); rerr != nil {
				n.log.Debug("cluster: revoking the lease", zap.Error(rerr))
			}
		}
		if n.w != nil {
			n.svc.unwatch(n.w)
		}
		err = n.srv.Close()
	})
	return err
}

// Kill ends the Node as the death of its process (a SIGKILL) would: its
// goroutines stop and its server closes, as Close does, but the Service
// is told nothing: the lease is not revoked and no election is resigned,
// so the member's registration and leaderships stay until the lease ends
// a TTL after its last renewal, as a killed etcd client's session does.
// Its leaders' appends fail with metalog.ErrFenced from the call on (a
// dead process writes nothing), and Callbacks.Unlead is still called for
// each leadership, so that the broker's own goroutines stop. Close after
// Kill does nothing more. It is for simulations of crashes.
func (n *Node) Kill() {
	n.killed.Store(true)
	n.Close()
}

// sleep waits d on n's clock or until ctx ends; false if it ended.
func (n *Node) sleep(ctx context.Context, d time.Duration) bool {
	return clock.Sleep(ctx, n.clock, d) == nil
}
