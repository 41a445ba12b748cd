package memcluster

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/diskless-go/diskless/clock"
	"github.com/diskless-go/diskless/cluster"
	"github.com/diskless-go/diskless/coordinator/metalog"
)

// Options configure a Service. The zero value holds the defaults; a nil
// *Options means the zero value.
type Options struct {
	// Clock times leases, the watch delay and the Nodes' retries and
	// hand-overs; nil means clock.System, which testing/synctest makes
	// virtual inside a bubble.
	Clock clock.Clock
	// WatchDelay is how long after a change the Nodes' views see it (see
	// SetWatchDelay); 0 means at once.
	WatchDelay time.Duration
}

// Service is the shared store that the brokers of one or more clusters
// meet through, as they meet through etcd with package etcdcluster: the
// members' registrations under leases, an election per shard, each
// shard's metadata log, the finalized features. It is a cluster.Backend
// (Connect) and holds the fault hooks of a simulation (faults.go). It
// starts no goroutine of its own (a lease's expiry runs on a timer of
// its Clock); each Node runs its own until it is closed. It is safe for
// concurrent use.
type Service struct {
	clock clock.Clock
	tr    *cluster.Mem // the Transport of Nodes whose JoinOptions name none

	mu struct {
		sync.Mutex
		rev        int64 // the store's revision: advanced by every write
		keys       map[string]*kv
		leases     map[int64]*lease
		nextLease  int64
		watchers   map[*watcher]struct{}
		watchDelay time.Duration
		changed    chan struct{}           // closed and replaced at every write
		logs       map[string]*metalog.Mem // each shard's log, by its key prefix; never appended through
		paused     map[int32]bool          // PauseLease
		failures   map[int32][]error       // FailNext: the errors of the member's next operations
		elections  map[string]int          // every election's key prefix, with its shard (Depose)
	}
}

var _ cluster.Backend = (*Service)(nil)

// NewService returns an empty Service.
func NewService(opts *Options) *Service {
	var o Options
	if opts != nil {
		o = *opts
	}
	s := &Service{clock: clock.Or(o.Clock), tr: &cluster.Mem{}}
	s.mu.keys = map[string]*kv{}
	s.mu.leases = map[int64]*lease{}
	s.mu.watchers = map[*watcher]struct{}{}
	s.mu.watchDelay = max(o.WatchDelay, 0)
	s.mu.changed = make(chan struct{})
	s.mu.logs = map[string]*metalog.Mem{}
	s.mu.paused = map[int32]bool{}
	s.mu.failures = map[int32][]error{}
	s.mu.elections = map[string]int{}
	return s
}

// Transport returns the Transport of the Nodes whose JoinOptions name
// none: one cluster.Mem for the whole Service, which no Node closes.
func (s *Service) Transport() *cluster.Mem { return s.tr }

// Connect implements cluster.Backend. Options.Spill is ignored: an entry
// of any size fits in memory.
func (s *Service) Connect(ctx context.Context, opts *cluster.ConnectOptions) (cluster.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var o cluster.ConnectOptions
	if opts != nil {
		o = *opts
	}
	return &conn{svc: s, prefix: o.Prefix, log: cmp.Or(o.Logger, zap.NewNop())}, nil
}

// conn is a cluster.Conn to a Service.
type conn struct {
	svc    *Service
	prefix string
	log    *zap.Logger
	closed atomic.Bool
}

var _ cluster.Conn = (*conn)(nil)

// OpenLog implements cluster.Conn: a handle on shard's log, fenced by
// offset only (as etcdcluster's follower logs are), which a follower
// never appends through.
func (c *conn) OpenLog(ctx context.Context, shard int) (metalog.Log, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if c.closed.Load() {
		return nil, cluster.ErrClosed
	}
	if shard < 0 {
		return nil, fmt.Errorf("memcluster: no shard %d", shard)
	}
	return c.svc.shardLog(c.prefix, shard).Writer(), nil
}

// Close implements cluster.Conn: later OpenLog and Join calls fail with
// cluster.ErrClosed. It holds nothing else of its own.
func (c *conn) Close() error {
	c.closed.Store(true)
	return nil
}

// shardLog returns the log of a cluster's shard, made empty the first
// time it is asked for.
func (s *Service) shardLog(prefix string, shard int) *metalog.Mem {
	key := logPrefix(prefix, shard)
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.mu.logs[key]
	if l == nil {
		l = metalog.NewMem(&metalog.MemOptions{Clock: s.clock})
		s.mu.logs[key] = l
	}
	return l
}

// logPrefix is where a shard's log is, as etcdcluster keeps it: its
// appends are seen by the watches of that prefix (Callbacks.Appended).
func logPrefix(prefix string, shard int) string { return prefix + "meta/" + strconv.Itoa(shard) + "/" }

// opLocked is the start of one operation of member id: the error it
// fails with, if FailNext queued one.
func (s *Service) opLocked(id int32) error {
	q := s.mu.failures[id]
	if len(q) == 0 {
		return nil
	}
	err := q[0]
	if len(q) == 1 {
		delete(s.mu.failures, id)
	} else {
		s.mu.failures[id] = q[1:]
	}
	return fmt.Errorf("memcluster: member %d: injected failure: %w", id, err)
}

// op runs one operation of member id under the lock, unless FailNext
// makes it fail.
func (s *Service) op(id int32, fn func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.opLocked(id); err != nil {
		return err
	}
	return fn()
}

// grant grants member id a lease of ttl and puts key (its registration)
// under it, as etcdcluster's session and registration do.
func (s *Service) grant(id int32, ttl time.Duration, key string, val []byte) (int64, error) {
	var leaseID int64
	err := s.op(id, func() error {
		s.mu.nextLease++
		l := &lease{id: s.mu.nextLease, owner: id, ttl: ttl, keys: map[string]struct{}{}}
		s.mu.leases[l.id] = l
		s.armLocked(l)
		s.mu.rev++
		s.putLocked(key, val, s.mu.rev, l.id)
		leaseID = l.id
		return nil
	})
	return leaseID, err
}

// armLocked (re)starts l's timer: it ends TTL from now.
func (s *Service) armLocked(l *lease) {
	if l.timer != nil {
		l.timer.Stop()
	}
	l.timer = s.clock.AfterFunc(l.ttl, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.mu.leases[l.id] == l {
			s.endLeaseLocked(l)
		}
	})
}

// keepAlive renews member id's lease: errLeaseNotFound once it has
// ended, errNoAnswer while the member is paused.
func (s *Service) keepAlive(id int32, leaseID int64) error {
	return s.op(id, func() error {
		if s.mu.paused[id] {
			return errNoAnswer
		}
		l := s.mu.leases[leaseID]
		if l == nil {
			return errLeaseNotFound
		}
		s.armLocked(l)
		return nil
	})
}

// revoke ends member id's lease now.
func (s *Service) revoke(id int32, leaseID int64) error {
	return s.op(id, func() error {
		if l := s.mu.leases[leaseID]; l != nil {
			s.endLeaseLocked(l)
		}
		return nil
	})
}

// watch starts a watch of prefix for member id and returns it with the
// keys under prefix at the revision it starts after, as events.
func (s *Service) watch(id int32, prefix string) (*watcher, []event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := newWatcher(prefix, id)
	w.mu.paused = s.mu.paused[id]
	s.mu.watchers[w] = struct{}{}
	var evs []event
	for _, k := range s.rangeLocked(prefix) {
		v := s.mu.keys[k]
		evs = append(evs, event{key: k, val: v.val, create: v.create, mod: v.mod})
	}
	return w, evs
}

func (s *Service) unwatch(w *watcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mu.watchers, w)
}

// candidacy is one campaign for a shard's leadership.
type candidacy struct {
	id    int32  // the member's ID
	lease int64  // its lease, which the key is put under
	dir   string // the election's key prefix
	shard int
	val   []byte // the key's value: the member's ID in decimal
	// withdraw, if set, is asked at each change while the candidate
	// waits: true withdraws the campaign.
	withdraw func() bool
	// changes, if set, returns a channel closed at the next change of
	// what withdraw looks at.
	changes func() <-chan struct{}
}

// campaign is etcd's election recipe (go.etcd.io/etcd/client/v3/
// concurrency's Campaign) in memory: it puts the candidate's key (under
// c.dir, owned by c.lease) unless that lease already has it, and waits
// until no key under c.dir was created before it. It returns the key and
// its create revision, the leadership's fence. If ctx ends, or withdraw
// says so, first, it deletes the key (resigns) and fails with an error
// wrapping context.Canceled; if the key goes (the lease ended), it fails.
func (s *Service) campaign(ctx context.Context, c candidacy) (key string, rev int64, err error) {
	key = c.dir + strconv.FormatInt(c.lease, 16)
	err = s.op(c.id, func() error {
		if s.mu.leases[c.lease] == nil {
			return errLeaseNotFound
		}
		s.mu.elections[c.dir] = c.shard
		if v, ok := s.mu.keys[key]; ok {
			rev = v.create
			return nil
		}
		s.mu.rev++
		s.putLocked(key, c.val, s.mu.rev, c.lease)
		rev = s.mu.rev
		return nil
	})
	if err != nil {
		return "", 0, fmt.Errorf("memcluster: campaigning: %w", err)
	}
	for {
		s.mu.Lock()
		v, ok := s.mu.keys[key]
		first := ok && v.create == rev
		if first {
			for _, k := range s.rangeLocked(c.dir) {
				if s.mu.keys[k].create < rev {
					first = false
					break
				}
			}
		}
		changed := s.mu.changed
		s.mu.Unlock()
		switch {
		case !ok || v.create != rev:
			return "", 0, fmt.Errorf("memcluster: campaigning: the candidate's key is gone: %w", errLeaseNotFound)
		case first:
			return key, rev, nil
		}
		var viewChanged <-chan struct{}
		if c.changes != nil {
			viewChanged = c.changes()
		}
		select {
		case <-ctx.Done():
		case <-changed:
		case <-viewChanged:
		}
		if ctx.Err() != nil || (c.withdraw != nil && c.withdraw()) {
			if err := s.resign(c.id, key, rev); err != nil {
				return "", 0, fmt.Errorf("memcluster: campaign withdrawn, its key left to its lease (%v): %w", err, context.Canceled)
			}
			return "", 0, fmt.Errorf("memcluster: campaign withdrawn: %w", context.Canceled)
		}
	}
}

// holds reports whether key is there at create revision rev.
func (s *Service) holds(key string, rev int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.mu.keys[key]
	return ok && v.create == rev
}

// resign deletes an election key, if it is still the one of revision
// rev (best effort: the lease ends it anyway).
func (s *Service) resign(id int32, key string, rev int64) error {
	return s.op(id, func() error {
		if v, ok := s.mu.keys[key]; ok && v.create == rev {
			s.deleteLocked(key)
		}
		return nil
	})
}
