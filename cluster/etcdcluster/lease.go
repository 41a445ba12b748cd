package etcdcluster

import (
	"context"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/diskless-go/diskless/clock"
	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/coordinator/metalog/etcdlog"
)

// heldLease is until when a session's lease is surely held: the TTL etcd
// answered after the sending of the last grant or renewal it answered.
// etcd ends a lease its TTL after it took the last renewal, which is
// later (and a new etcd leader extends the leases, never shortens them);
// only a revoke ends one sooner.
type heldLease struct {
	until atomic.Int64 // Unix nanoseconds, on the Node's clock
}

// renewed records a grant or renewal sent at sent and answered with ttl.
func (h *heldLease) renewed(sent time.Time, ttl time.Duration) {
	h.until.Store(sent.Add(ttl).UnixNano())
}

// held reports whether the lease is surely held at now.
func (h *heldLease) held(now time.Time) bool { return now.UnixNano() < h.until.Load() }

// sessionTTL is the TTL of the sessions: JoinOptions.LeaseTTL in whole
// seconds, at least one, as etcd grants it.
func (n *Node) sessionTTL() time.Duration {
	return time.Duration(max(1, int(n.opts.LeaseTTL/time.Second))) * time.Second
}

// renewals renews sess's lease every third of its TTL, beside the
// session's own keep-alive stream, to learn when each answered renewal
// was sent (the stream's answers do not say), until the session ends.
func (n *Node) renewals(sess *concurrency.Session, h *heldLease) {
	defer n.wg.Done()
	ttl := n.sessionTTL()
	for {
		wake, stop := clock.After(n.clock, ttl/3)
		select {
		case <-sess.Done():
			stop.Stop()
			return
		case <-n.ctx.Done():
			stop.Stop()
			return
		case <-wake:
		}
		sent := n.clock.Now()
		ctx, cancel := context.WithTimeout(sess.Ctx(), ttl/3)
		resp, err := n.client.KeepAliveOnce(ctx, sess.Lease())
		cancel()
		if err == nil && resp.TTL > 0 {
			h.renewed(sent, time.Duration(resp.TTL)*time.Second)
		}
	}
}

// leaderLog is the log of a shard led here: etcdlog's, fenced by the
// election, which confirms the leadership (metalog.Confirmer), and whose
// lease is that of the session it was won under (metalog.Leased).
type leaderLog struct {
	*etcdlog.Log
	held func() bool
}

var (
	_ metalog.Confirmer = (*leaderLog)(nil)
	_ metalog.Leased    = (*leaderLog)(nil)
)

// LeaseHeld implements metalog.Leased: the session is live and its lease
// was renewed less than its TTL ago, counting from the renewal's sending.
func (l *leaderLog) LeaseHeld() bool { return l.held() }
