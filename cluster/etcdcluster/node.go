package etcdcluster

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless/clock"
	"github.com/diskless-go/diskless/cluster"
	"github.com/diskless-go/diskless/coordinator/metalog/etcdlog"
)

// Node is one broker's membership of a cluster (cluster.Node): its
// registration under an etcd lease, its campaigns for the shards, what it
// knows of the other members and of each shard's leader, and its
// transport. It is the coordinator.Forwarder of the broker's Coordinator,
// and safe for concurrent use.
//
// # Leadership
//
// Each shard has an etcd election under <prefix>shards/<n>/. Its leader
// is meant to be the live member at position n mod (live members) in ID
// order: that member campaigns at once; the others campaign only while
// the shard has had no leader for a lease TTL (its preferred member is
// gone or slow), and withdraw when a leader appears; and a leader that is
// not the preferred member gives the shard up once the preferred one has
// been live for two lease TTLs. So shards spread over the brokers, and
// move only when membership changes.
type Node struct {
	clock  clock.Clock // times leases, hand-overs and retries: clock.System
	client *clientv3.Client
	conn   *conn
	opts   cluster.JoinOptions
	tr     cluster.Transport
	ownTr  bool // tr is the default one Join made: Close closes it
	cb     cluster.Callbacks
	log    *zap.Logger
	srv    cluster.Server

	mu struct {
		sync.Mutex
		members map[int32]memberSeen
		leaders []map[string]leaderKey // by shard: election keys
		sess    *concurrency.Session
		sessCh  chan struct{} // closed when sess is replaced
		held    *heldLease    // sess's lease, as renewals answered it
		leading []bool
		// features are the finalized levels, as last seen (features.go).
		features cluster.FinalizedFeatures
	}
	changed chan struct{} // closed and replaced when a member or leader changes (under mu)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

type memberSeen struct {
	m     cluster.Member
	since time.Time
}

type leaderKey struct {
	rev int64
	id  int32
}

var _ cluster.Node = (*Node)(nil)

// Join implements cluster.Conn: it registers this broker in the cluster,
// starts serving its peers on Member.PeerAddr (Member.PeerAddr is then
// the address listened on, with its port picked if it was 0) and
// campaigns for the shards. It returns once the broker is registered and
// knows the members and leaders there are.
func (c *conn) Join(ctx context.Context, opts *cluster.JoinOptions, cb cluster.Callbacks) (cluster.Node, error) {
	if opts == nil || opts.Shards < 1 || cb.Lead == nil || cb.Unlead == nil || cb.Serve == nil {
		return nil, errors.New("etcdcluster: Join needs JoinOptions with Shards, and the Lead, Unlead and Serve callbacks")
	}
	n := &Node{clock: clock.System, client: c.client, conn: c, opts: *opts, tr: opts.Transport, cb: cb, log: c.log, changed: make(chan struct{})}
	n.opts.LeaseTTL = cmp.Or(n.opts.LeaseTTL, 5*time.Second)
	if n.tr == nil {
		n.tr, n.ownTr = defaultTransport(), true
	}
	n.mu.members = map[int32]memberSeen{}
	n.mu.leaders = make([]map[string]leaderKey, n.opts.Shards)
	for i := range n.mu.leaders {
		n.mu.leaders[i] = map[string]leaderKey{}
	}
	n.mu.leading = make([]bool, n.opts.Shards)
	n.mu.features = cluster.FinalizedFeatures{Levels: map[string]int{}, Epoch: -1}
	srv, err := n.tr.Listen(n.opts.Member.PeerAddr, cb.Serve)
	if err != nil {
		if n.ownTr {
			n.tr.Close()
		}
		return nil, fmt.Errorf("etcdcluster: listening for peers: %w", err)
	}
	n.srv = srv
	n.opts.Member.PeerAddr = srv.Addr()
	n.ctx, n.cancel = context.WithCancel(context.Background())
	if err := n.newSession(ctx); err != nil {
		n.cancel()
		srv.Close()
		if n.ownTr {
			n.tr.Close()
		}
		return nil, err
	}
	for _, w := range []struct {
		dir   string
		apply applyFunc
	}{{n.membersDir(), n.applyMember}, {n.shardsDir(), n.applyLeader}, {n.featuresDir(), n.applyFeature}} {
		rev, err := n.load(ctx, w.dir, w.apply)
		if err != nil {
			n.Close()
			return nil, err
		}
		n.wg.Add(1)
		go n.watch(w.dir, rev, w.apply)
	}
	if err := n.joinFeatures(ctx); err != nil {
		n.Close()
		return nil, err
	}
	n.wg.Add(1)
	go n.keepSession()
	for i := range n.opts.Shards {
		n.wg.Add(1)
		go n.campaign(i)
	}
	if cb.Appended != nil {
		n.wg.Add(1)
		go n.watchAppends()
	}
	return n, nil
}

// defaultTransport is the Transport of a Node whose JoinOptions name none:
// a TCP with the default options.
func defaultTransport() cluster.Transport {
	t, err := cluster.NewTCP(nil)
	if err != nil {
		panic(err) // the defaults are valid
	}
	return t
}

// watchAppends calls Callbacks.Appended at every entry any broker appends
// to any shard's log.
func (n *Node) watchAppends() {
	defer n.wg.Done()
	for n.ctx.Err() == nil {
		ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(n.ctx))
		for resp := range n.client.Watch(ctx, n.conn.prefix+"meta/", clientv3.WithPrefix(), clientv3.WithFilterDelete(), clientv3.WithKeysOnly()) {
			if resp.Err() != nil {
				break
			}
			n.cb.Appended()
		}
		cancel()
		if !n.sleep(n.ctx, 100*time.Millisecond) {
			return
		}
	}
}

func (n *Node) membersDir() string       { return n.conn.prefix + "members/" }
func (n *Node) shardsDir() string        { return n.conn.prefix + "shards/" }
func (n *Node) electionDir(i int) string { return n.shardsDir() + strconv.Itoa(i) + "/" }

// newSession opens a session (a lease kept alive) and registers this
// member under it.
func (n *Node) newSession(ctx context.Context) error {
	sent := n.clock.Now()
	sess, err := concurrency.NewSession(n.client, concurrency.WithTTL(int(n.sessionTTL()/time.Second)), concurrency.WithContext(n.ctx))
	if err != nil {
		return fmt.Errorf("etcdcluster: opening an etcd session: %w", err)
	}
	val, _ := json.Marshal(n.opts.Member)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := n.client.Put(pctx, n.membersDir()+strconv.Itoa(int(n.opts.Member.ID)), string(val), clientv3.WithLease(sess.Lease())); err != nil {
		sess.Close()
		return fmt.Errorf("etcdcluster: registering member %d: %w", n.opts.Member.ID, err)
	}
	held := &heldLease{}
	held.renewed(sent, n.sessionTTL())
	n.mu.Lock()
	old := n.mu.sessCh
	n.mu.sess, n.mu.sessCh, n.mu.held = sess, make(chan struct{}), held
	n.mu.Unlock()
	n.wg.Add(1)
	go n.renewals(sess, held)
	if old != nil {
		close(old)
	}
	n.log.Info("cluster: registered", zap.Int32("id", n.opts.Member.ID), zap.String("peer", n.opts.Member.PeerAddr), zap.Int64("lease", int64(sess.Lease())))
	return nil
}

// keepSession opens a new session whenever the current one ends (the
// lease expired: this broker was paused or cut off past its TTL).
func (n *Node) keepSession() {
	defer n.wg.Done()
	for {
		n.mu.Lock()
		sess := n.mu.sess
		n.mu.Unlock()
		select {
		case <-n.ctx.Done():
			return
		case <-sess.Done():
		}
		n.log.Warn("cluster: etcd session lost; leaderships end; registering again", zap.Int32("id", n.opts.Member.ID))
		for {
			err := n.newSession(n.ctx)
			if err == nil || n.ctx.Err() != nil {
				break
			}
			n.log.Warn("cluster: registering again failed", zap.Error(err))
			if !n.sleep(n.ctx, n.opts.LeaseTTL/4) {
				return
			}
		}
	}
}

// load reads dir and applies every key; it returns the revision read.
func (n *Node) load(ctx context.Context, dir string, apply applyFunc) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := n.client.Get(ctx, dir, clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("etcdcluster: reading %s: %w", dir, err)
	}
	for _, kv := range resp.Kvs {
		apply(string(kv.Key), kv.Value, kv.CreateRevision, kv.ModRevision, false)
	}
	n.notify()
	return resp.Header.Revision, nil
}

// watch applies the changes under dir from rev on, reading it again if
// the watch is lost.
func (n *Node) watch(dir string, rev int64, apply applyFunc) {
	defer n.wg.Done()
	for n.ctx.Err() == nil {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(n.ctx))
		for resp := range n.client.Watch(wctx, dir, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
			if resp.Err() != nil {
				break
			}
			for _, ev := range resp.Events {
				apply(string(ev.Kv.Key), ev.Kv.Value, ev.Kv.CreateRevision, ev.Kv.ModRevision, ev.Type == clientv3.EventTypeDelete)
			}
			rev = resp.Header.Revision
			n.notify()
		}
		cancel()
		if !n.sleep(n.ctx, 100*time.Millisecond) {
			return
		}
		// Read it all again: keys may have gone meanwhile.
		switch dir {
		case n.membersDir():
			n.mu.Lock()
			n.mu.members = map[int32]memberSeen{}
			n.mu.Unlock()
		case n.featuresDir():
			n.mu.Lock()
			n.mu.features = cluster.FinalizedFeatures{Levels: map[string]int{}, Epoch: -1}
			n.mu.Unlock()
		default:
			n.mu.Lock()
			for i := range n.mu.leaders {
				n.mu.leaders[i] = map[string]leaderKey{}
			}
			n.mu.Unlock()
		}
		r, err := n.load(n.ctx, dir, apply)
		if err != nil {
			n.log.Warn("cluster: reading again after a lost watch", zap.String("dir", dir), zap.Error(err))
			continue
		}
		rev = r
	}
}

// applyFunc applies one key of a watched folder: its value, create and
// mod revisions, or its deletion.
type applyFunc func(key string, val []byte, createRev, modRev int64, del bool)

func (n *Node) applyMember(key string, val []byte, _, _ int64, del bool) {
	id, err := strconv.ParseInt(strings.TrimPrefix(key, n.membersDir()), 10, 32)
	if err != nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if del {
		delete(n.mu.members, int32(id))
		return
	}
	var m cluster.Member
	if json.Unmarshal(val, &m) != nil {
		return
	}
	seen := n.mu.members[int32(id)]
	if seen.since.IsZero() {
		seen.since = n.clock.Now()
	}
	seen.m = m
	n.mu.members[int32(id)] = seen
}

func (n *Node) applyLeader(key string, val []byte, rev, _ int64, del bool) {
	rest := strings.TrimPrefix(key, n.shardsDir())
	i, err := strconv.Atoi(rest[:max(strings.IndexByte(rest, '/'), 0)])
	if err != nil || i < 0 || i >= n.opts.Shards {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if del {
		delete(n.mu.leaders[i], key)
		return
	}
	id, err := strconv.ParseInt(string(val), 10, 32)
	if err != nil {
		return
	}
	n.mu.leaders[i][key] = leaderKey{rev: rev, id: int32(id)}
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

// Members returns the live members, by ID.
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

// Self returns this broker as registered (PeerAddr with its port).
func (n *Node) Self() cluster.Member { return n.opts.Member }

// Leader returns the live member that leads shard i, if any.
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
	ids := make([]int32, 0, len(n.mu.members))
	for id := range n.mu.members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return n.mu.members[ids[i%len(ids)]], true
}

// Leading reports whether this broker leads shard i.
func (n *Node) Leading(i int) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return i >= 0 && i < len(n.mu.leading) && n.mu.leading[i]
}

// Forward sends a call for shard i to its leader (coordinator.Forwarder),
// at the peer address it registered, for its node ID (cluster.WithCallee:
// over TLS, a broker there whose certificate names another node is not
// sent the call).
func (n *Node) Forward(ctx context.Context, shard int, method string, body []byte) func() ([]byte, error) {
	m, ok := n.Leader(shard)
	if !ok {
		err := fmt.Errorf("etcdcluster: shard %d has no leader now", shard)
		return func() ([]byte, error) { return nil, err }
	}
	return n.tr.Call(cluster.WithCallee(ctx, m.ID), m.PeerAddr, shard, method, body)
}

// campaign runs shard i's elections for this broker until Close.
func (n *Node) campaign(i int) {
	defer n.wg.Done()
	ttl := n.opts.LeaseTTL
	var leaderless time.Time // since when the shard has had no leader, as seen here
	for n.ctx.Err() == nil {
		n.mu.Lock()
		sess, sessCh, held := n.mu.sess, n.mu.sessCh, n.mu.held
		pref, havePref := n.preferredLocked(i)
		leader, hasLeader := n.leaderLocked(i)
		n.mu.Unlock()
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
		select {
		case <-sess.Done():
			// The session is lost and not yet replaced (keepSession
			// makes the next one once etcd answers): campaigning on it
			// would fail at once, in a loop that burns a core while etcd
			// is out of reach. Wait for the next one.
			select {
			case <-sessCh:
			case <-n.ctx.Done():
			}
			continue
		default:
		}
		n.runElection(i, sess, sessCh, held, preferred)
	}
}

// runElection campaigns for shard i once and, if elected, leads it until
// the session ends, Close, or the leadership is given up.
func (n *Node) runElection(i int, sess *concurrency.Session, sessCh chan struct{}, held *heldLease, preferred bool) {
	ttl := n.opts.LeaseTTL
	e := concurrency.NewElection(sess, n.electionDir(i))
	cctx, cancel := context.WithCancel(n.ctx)
	defer cancel()
	if !preferred {
		// Withdraw when another member's leadership appears (the
		// preferred member came back); this one's own, once elected,
		// stays until the hand-over below.
		go func() {
			for cctx.Err() == nil {
				if m, ok := n.Leader(i); ok && m.ID != n.opts.Member.ID {
					cancel()
					return
				}
				n.sleep(cctx, ttl/4)
			}
		}()
	}
	go func() {
		select {
		case <-sess.Done():
		case <-sessCh:
		case <-cctx.Done():
		}
		cancel()
	}()
	if err := e.Campaign(cctx, strconv.Itoa(int(n.opts.Member.ID))); err != nil {
		if n.ctx.Err() == nil && cctx.Err() == nil {
			n.log.Warn("cluster: campaign failed", zap.Int("shard", i), zap.Error(err))
			n.sleep(n.ctx, ttl/4)
		}
		return
	}
	n.log.Info("cluster: elected", zap.Int("shard", i), zap.Int32("id", n.opts.Member.ID))
	var log *leaderLog
	elog, err := n.conn.openLog(cctx, i, &etcdlog.Fence{Key: e.Key(), Revision: e.Rev()})
	if err == nil {
		log = &leaderLog{Log: elog, held: func() bool { return held.held(n.clock.Now()) && sess.Ctx().Err() == nil }}
		if err = n.cb.Lead(cctx, i, log); err != nil {
			log.Close()
		}
	}
	if err != nil {
		n.log.Warn("cluster: could not lead an elected shard; giving it up", zap.Int("shard", i), zap.Error(err))
		n.resign(e)
		n.sleep(n.ctx, ttl)
		return
	}
	n.mu.Lock()
	n.mu.leading[i] = true
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		n.mu.leading[i] = false
		n.mu.Unlock()
		n.cb.Unlead(i)
		log.Close()
		n.resign(e)
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
		if n.cb.Healthy != nil {
			if err := n.cb.Healthy(i); err != nil {
				n.log.Warn("cluster: a led shard stopped serving; giving it up to lead it again", zap.Int("shard", i), zap.Error(err))
				return
			}
		}
		n.mu.Lock()
		pref, ok := n.preferredLocked(i)
		n.mu.Unlock()
		if ok && pref.m.ID != n.opts.Member.ID && clock.Since(n.clock, pref.since) > 2*ttl {
			n.log.Info("cluster: giving a shard to its preferred member", zap.Int("shard", i), zap.Int32("to", pref.m.ID))
			return
		}
	}
}

// resign gives up an election, best effort: a key it fails to delete
// stays while this member's lease lives, and campaign takes it up again.
func (n *Node) resign(e *concurrency.Election) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := e.Resign(ctx); err != nil {
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

// Close gives up every leadership, withdraws the membership (the lease is
// revoked), and closes the server, and the transport if Join made it
// (JoinOptions.Transport nil). It does not close the etcd client.
func (n *Node) Close() error {
	var err error
	n.once.Do(func() {
		n.cancel()
		n.wg.Wait()
		n.mu.Lock()
		sess := n.mu.sess
		n.mu.Unlock()
		var errs []error
		if sess != nil {
			// Revoke the lease: members and elections see it gone at once.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, rerr := n.client.Revoke(ctx, sess.Lease())
			cancel()
			if rerr != nil {
				n.log.Debug("cluster: revoking the lease", zap.Error(rerr))
			}
			sess.Orphan()
		}
		errs = append(errs, n.srv.Close())
		if n.ownTr {
			errs = append(errs, n.tr.Close())
		}
		err = errors.Join(errs...)
	})
	return err
}

// sleep waits d on n's clock or until ctx ends; false if it ended.
func (n *Node) sleep(ctx context.Context, d time.Duration) bool {
	return clock.Sleep(ctx, n.clock, d) == nil
}
