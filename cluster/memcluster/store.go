package memcluster

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/diskless-go/diskless/clock"
)

// The Service keeps what etcd keeps for etcdcluster, in the same shape:
// keys with create and mod revisions, one revision counter for the whole
// store (a transaction's writes share one), leases that own keys (the
// keys go when the lease ends), and watches of a key prefix that see
// every change in revision order. The methods named *Locked are called
// with Service.mu held.

// kv is one key's value and revisions.
type kv struct {
	val         []byte
	create, mod int64
	lease       int64 // 0: none
}

// event is one change a watch sees: a put (val, create and mod) or a
// deletion (del, mod the revision of the deletion).
type event struct {
	key         string
	val         []byte
	create, mod int64
	del         bool
}

// lease is a granted lease: the keys put with it, and the timer that
// ends it TTL after its last renewal.
type lease struct {
	id    int64
	owner int32 // the member ID of the Node it was granted to
	ttl   time.Duration
	timer clock.Timer
	keys  map[string]struct{}
}

// putLocked writes key at revision rev (the caller has advanced the
// store's revision), owned by lease (0: none), and tells the watches.
func (s *Service) putLocked(key string, val []byte, rev, leaseID int64) {
	old, ok := s.mu.keys[key]
	create := rev
	if ok {
		create = old.create
		if l := s.mu.leases[old.lease]; l != nil && old.lease != leaseID {
			delete(l.keys, key)
		}
	}
	s.mu.keys[key] = &kv{val: val, create: create, mod: rev, lease: leaseID}
	if l := s.mu.leases[leaseID]; l != nil {
		l.keys[key] = struct{}{}
	}
	s.emitLocked(event{key: key, val: val, create: create, mod: rev})
}

// deleteLocked deletes key, if it is there, at a revision of its own.
func (s *Service) deleteLocked(key string) bool {
	old, ok := s.mu.keys[key]
	if !ok {
		return false
	}
	s.mu.rev++
	delete(s.mu.keys, key)
	if l := s.mu.leases[old.lease]; l != nil {
		delete(l.keys, key)
	}
	s.emitLocked(event{key: key, mod: s.mu.rev, del: true})
	return true
}

// rangeLocked returns the keys under prefix, in key order.
func (s *Service) rangeLocked(prefix string) []string {
	var keys []string
	for k := range s.mu.keys {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// endLeaseLocked ends a lease (it expired or was revoked): its keys go.
func (s *Service) endLeaseLocked(l *lease) {
	if l.timer != nil {
		l.timer.Stop()
	}
	delete(s.mu.leases, l.id)
	for _, k := range slices.Sorted(maps.Keys(l.keys)) {
		s.deleteLocked(k)
	}
}

// emitLocked hands e to every watch of a prefix of its key, to be seen
// after the watch delay, and wakes the campaigns waiting for a change.
func (s *Service) emitLocked(e event) {
	due := s.clock.Now().Add(s.mu.watchDelay)
	for w := range s.mu.watchers {
		if strings.HasPrefix(e.key, w.prefix) {
			w.push(e, due)
		}
	}
	close(s.mu.changed)
	s.mu.changed = make(chan struct{})
}

// watcher is one Node's watch of its cluster's keys: the events not yet
// seen, each with the time it may be seen. Events are seen in order: one
// is never seen before one emitted before it.
type watcher struct {
	prefix string
	owner  int32 // the member ID of the Node that watches
	mu     struct {
		sync.Mutex
		queue  []queued
		paused bool // PauseLease: nothing is seen until ResumeLease
	}
	wake chan struct{} // signalled when the queue or the pause changes
}

type queued struct {
	e   event
	due time.Time
}

func newWatcher(prefix string, owner int32) *watcher {
	return &watcher{prefix: prefix, owner: owner, wake: make(chan struct{}, 1)}
}

func (w *watcher) push(e event, due time.Time) {
	w.mu.Lock()
	if n := len(w.mu.queue); n > 0 && w.mu.queue[n-1].due.After(due) {
		due = w.mu.queue[n-1].due // the delay shrank: keep the order
	}
	w.mu.queue = append(w.mu.queue, queued{e, due})
	w.mu.Unlock()
	w.signal()
}

func (w *watcher) setPaused(p bool) {
	w.mu.Lock()
	w.mu.paused = p
	w.mu.Unlock()
	w.signal()
}

func (w *watcher) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// next returns the events due by now, waiting for the first of them on
// clk; nil once done is closed.
func (w *watcher) next(clk clock.Clock, done <-chan struct{}) []event {
	for {
		w.mu.Lock()
		var wait time.Duration
		if !w.mu.paused && len(w.mu.queue) > 0 {
			now := clk.Now()
			n := 0
			for n < len(w.mu.queue) && !w.mu.queue[n].due.After(now) {
				n++
			}
			if n > 0 {
				out := make([]event, n)
				for i := range n {
					out[i] = w.mu.queue[i].e
				}
				w.mu.queue = slices.Delete(w.mu.queue, 0, n)
				w.mu.Unlock()
				return out
			}
			wait = w.mu.queue[0].due.Sub(now)
		}
		w.mu.Unlock()
		var timer <-chan time.Time
		var stop clock.Timer
		if wait > 0 {
			timer, stop = clock.After(clk, wait)
		}
		select {
		case <-done:
		case <-w.wake:
		case <-timer:
		}
		if stop != nil {
			stop.Stop()
		}
		select {
		case <-done:
			return nil
		default:
		}
	}
}
