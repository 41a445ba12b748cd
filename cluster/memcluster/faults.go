package memcluster

import (
	"slices"
	"strconv"
	"time"
)

// The fault hooks of a simulation. Each acts on every cluster (prefix)
// the Service holds; a member is named by its ID.

// ExpireLease ends every lease of member id now, as if the broker had
// been paused past its TTL: its registration and election keys go, so
// its leaders' appends fail with metalog.ErrFenced from now on and the
// others campaign once their watches show it. The broker's Node learns
// it at its next renewal (within a third of the TTL, as etcd's client
// does), or when its watch shows its election key gone, whichever comes
// first: its leaderships end (Unlead), and it registers again under a
// new lease and campaigns. It reports whether there was a lease.
func (s *Service) ExpireLease(id int32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []int64
	for lid, l := range s.mu.leases {
		if l.owner == id {
			ids = append(ids, lid)
		}
	}
	slices.Sort(ids)
	for _, lid := range ids {
		s.endLeaseLocked(s.mu.leases[lid])
	}
	return len(ids) > 0
}

// PauseLease makes member id a zombie: its lease renewals are lost and
// its watch shows it nothing, as if its streams to the Service had
// stalled, while its other requests (appends, campaigns) still get
// through. Its lease ends TTL after its last renewal; until it learns
// that, it goes on believing it leads its shards, and its leaders'
// appends fail with metalog.ErrFenced. ResumeLease ends the pause.
func (s *Service) PauseLease(id int32) { s.setPaused(id, true) }

// ResumeLease ends PauseLease: the member's watch shows it what it
// missed, in order, and its next renewal finds its lease (or finds it
// ended, and the member registers again).
func (s *Service) ResumeLease(id int32) { s.setPaused(id, false) }

func (s *Service) setPaused(id int32, paused bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if paused {
		s.mu.paused[id] = true
	} else {
		delete(s.mu.paused, id)
	}
	for w := range s.mu.watchers {
		if w.owner == id {
			w.setPaused(paused)
		}
	}
}

// Depose ends the leadership of shard's leader, keeping its lease: its
// election key is deleted (as an operator deleting it in etcd would), so
// its appends fail with metalog.ErrFenced from now on, the next
// candidate, if any, is elected, and the deposed Node gives the shard up
// (Unlead) when its watch shows the key gone, and campaigns again. It
// returns the deposed member's ID, and false if the shard had no leader.
func (s *Service) Depose(shard int) (int32, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var dirs []string
	for dir, sh := range s.mu.elections {
		if sh == shard {
			dirs = append(dirs, dir)
		}
	}
	slices.Sort(dirs)
	var id int32
	deposed := false
	for _, dir := range dirs {
		key, who, ok := s.leaderLocked(dir)
		if ok {
			s.deleteLocked(key)
			id, deposed = who, true
		}
	}
	return id, deposed
}

// Leader returns the member that leads shard of the cluster at prefix,
// as the Service knows it (the Nodes' views may lag by the watch
// delay).
func (s *Service) Leader(prefix string, shard int) (int32, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, id, ok := s.leaderLocked(prefix + "shards/" + strconv.Itoa(shard) + "/")
	return id, ok
}

// leaderLocked returns the oldest election key under dir, and the member
// it names.
func (s *Service) leaderLocked(dir string) (string, int32, bool) {
	best, rev := "", int64(-1)
	for _, k := range s.rangeLocked(dir) {
		if v := s.mu.keys[k]; rev < 0 || v.create < rev {
			best, rev = k, v.create
		}
	}
	if rev < 0 {
		return "", 0, false
	}
	id, err := strconv.ParseInt(string(s.mu.keys[best].val), 10, 32)
	return best, int32(id), err == nil
}

// SetWatchDelay sets how long after a change the Nodes' watches show it,
// from the next change on: a change is never shown before one made
// before it, so shortening the delay holds later changes behind earlier
// ones. 0 means at once.
func (s *Service) SetWatchDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.watchDelay = max(d, 0)
}

// FailNext makes the next n operations of member id fail with an error
// wrapping err (ErrInjected if nil): registering, renewing or revoking
// its lease, campaigning, resigning, reading or writing the features,
// and its leaders' appends. A failed renewal is one lost; a failed
// append fails the log's appends until its writer reads it, as
// metalog.Mem's FailNext does. The Node retries the others as
// etcdcluster's does.
func (s *Service) FailNext(id int32, n int, err error) {
	if err == nil {
		err = ErrInjected
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.mu.failures[id] = append(s.mu.failures[id], err)
	}
}
