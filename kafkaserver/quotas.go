package kafkaserver

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/clock"
	"github.com/diskless-go/diskless/quota"
)

// Client quotas, enforced as Kafka enforces them, by each broker on what
// it serves (a client's quota is per broker, not per cluster):
//
//	producer_byte_rate   the bytes of the Produce requests the client sends
//	consumer_byte_rate   the bytes of records in the Fetch responses it gets
//	request_percentage   the time its requests take to handle, as a percent
//	                     of one thread's time
//
// The limit that applies to a request is resolved from its connection's
// user (its principal's name) and client ID (quota.Set.Resolve), each key
// apart, and the connections that resolve to the same (user, client ID)
// pair share one rate of each key. Rates are windowed (windowedRate), 11
// samples of 1 s. A request that takes its client's rate past the limit
// is answered at once, with the time the client must wait for the rate to
// fall back to the limit in the response's throttle_time_ms (the longest
// of its keys'), and its connection is muted for that long: no further
// request is read from it, while the other connections go on. The
// connection is never closed for it (KIP-219). A client that asked in a
// version before KIP-219 (one that does not wait on its own) gets its
// response only after the throttle time, as Kafka answers it.
//
// As Kafka does, a Fetch that would be throttled is answered without
// records (the client fetches them again after the throttle), and its
// bytes are not counted; a Fetch's MaxBytes is at most what the quota
// allows over the whole window but one sample, so that one response
// cannot be throttled whatever the rate before it.
//
// The request time of a request is the time its handler takes on the
// server's clock, less the waits that are not the broker's work, as Kafka
// counts the time on its request threads and not the time in purgatory:
// a Produce's wait for the commit of its batches once they are buffered,
// a Fetch's read and long poll in the facade, and the whole of JoinGroup
// and SyncGroup (they wait for the group's members). SaslHandshake and
// SaslAuthenticate are not counted, nor throttled: Kafka's authenticator
// answers them, not its request handlers. The byte-rate
// throttle is uncapped, as Kafka's; the request-time one is at most one
// window (1 s), as Kafka's.
//
// The quotas come from a source the server polls (quotaSource), as the
// ACLs are polled (authz.go).

// quotaState is the client quotas a source holds: all of them, with the
// version they are at. Changed says they changed since the version the
// poll gave; when it is false Quotas may be nil.
type quotaState struct {
	Version int64
	Changed bool
	Quotas  []quota.Quota
}

// quotaSource reads the client quotas, given the version read last (-1
// before the first read).
type quotaSource func(ctx context.Context, since int64) (quotaState, error)

// brokerQuotaSource is the source of the client quotas over b: the
// Broker's (diskless.Broker.ClientQuotas), that every node of a cluster
// reads alike.
func brokerQuotaSource(b *diskless.Broker) quotaSource {
	return func(ctx context.Context, since int64) (quotaState, error) {
		st, err := b.ClientQuotas(ctx, since)
		return quotaState{Version: st.Version, Changed: st.Changed, Quotas: st.Quotas}, err
	}
}

// staticQuotas is a source that always holds quotas, at version 1.
func staticQuotas(quotas []quota.Quota) quotaSource {
	return func(_ context.Context, since int64) (quotaState, error) {
		return quotaState{Version: 1, Changed: since != 1, Quotas: quotas}, nil
	}
}

// clientQuotas is the server's enforcement of client quotas: the quotas
// last read, and the rates they are measured by. It is safe for
// concurrent use.
type clientQuotas struct {
	polled // the quotas, read by version from src
	clock  clock.Clock
	set    atomic.Pointer[quota.Set] // nil or empty: no quota

	mu struct {
		sync.Mutex
		rates map[rateKey]*windowedRate
	}
}

// rateKey names one rate: a key's, for the connections of a (user,
// client ID) pair (quota.Limit).
type rateKey struct {
	key, user, clientID string
}

// newClientQuotas returns the enforcement of the quotas src holds, read
// once now (an error is returned: a server that cannot read its quotas
// would serve without them).
func newClientQuotas(ctx context.Context, c clock.Clock, src quotaSource, log *zap.Logger) (*clientQuotas, error) {
	q := &clientQuotas{clock: c}
	q.polled = polled{what: "the client quotas", log: log, read: func(ctx context.Context, since int64) (int64, bool, func(), error) {
		st, err := src(ctx, since)
		return st.Version, st.Changed, func() { q.set.Store(quota.NewSet(st.Quotas)) }, err
	}}
	q.mu.rates = map[rateKey]*windowedRate{}
	q.version.Store(-1)
	if err := q.refresh(ctx); err != nil {
		return nil, err
	}
	return q, nil
}

// run reads the quotas every interval, and drops the rates idle for the
// whole window, until ctx ends.
func (q *clientQuotas) run(ctx context.Context, interval time.Duration) {
	q.polled.run(ctx, q.clock, interval, func() { q.dropIdle(q.clock.Now().UnixMilli()) })
}

// dropIdle drops the rates with no value for the whole window: a new
// rate measures the same as they would.
func (q *clientQuotas) dropIdle(now int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for k, r := range q.mu.rates {
		if now-r.last >= quotaSamples*quotaWindow.Milliseconds() {
			delete(q.mu.rates, k)
		}
	}
}

// enabled reports whether any client quota is set.
func (q *clientQuotas) enabled() bool {
	return q != nil && !q.set.Load().Empty()
}

// record adds value to the rate of key for user and clientID at now, and
// returns how long the client is to be throttled for it: 0 within its
// limit, or without one. The request-time throttle is capped at one
// window.
func (q *clientQuotas) record(key, user, clientID string, value float64, now time.Time) time.Duration {
	if !q.enabled() {
		return 0
	}
	lim, ok := q.set.Load().Resolve(key, user, clientID)
	if !ok {
		return 0
	}
	ms := now.UnixMilli()
	q.mu.Lock()
	defer q.mu.Unlock()
	k := rateKey{key, lim.User, lim.ClientID}
	r := q.mu.rates[k]
	if r == nil {
		r = &windowedRate{}
		q.mu.rates[k] = r
	}
	r.record(value, ms)
	d := r.throttle(r.measure(ms), lim.Value, ms)
	if key == quota.RequestPercentage {
		d = min(d, quotaWindow)
	}
	return d
}

// unrecord takes value back out of the rate of key, as Kafka does for
// the bytes of a Fetch it answers without records.
func (q *clientQuotas) unrecord(key, user, clientID string, value float64, now time.Time) {
	lim, ok := q.set.Load().Resolve(key, user, clientID)
	if !ok {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if r := q.mu.rates[rateKey{key, lim.User, lim.ClientID}]; r != nil {
		r.record(-value, now.UnixMilli())
	}
}

// maxWindowValue is the most of key a client may use in one request
// without being throttled whatever it used before: its limit over all
// the samples but one. ok is false without a limit.
func (q *clientQuotas) maxWindowValue(key, user, clientID string) (v float64, ok bool) {
	if !q.enabled() {
		return 0, false
	}
	lim, ok := q.set.Load().Resolve(key, user, clientID)
	if !ok {
		return 0, false
	}
	return lim.Value * (quotaSamples - 1) * quotaWindow.Seconds(), true
}

// quotaUser is the name quotas know a principal by: "User:alice" is
// alice.
func quotaUser(principal string) string {
	_, name, ok := strings.Cut(principal, ":")
	if !ok {
		return principal
	}
	return name
}

// usage is what one request used of its client's quotas: its handler
// counts the waits that are not request time in it, and Fetch decides its
// throttle itself (so that a throttled fetch is answered without
// records). It is the handler goroutine's.
type usage struct {
	began   time.Time     // when the handler started
	waited  time.Duration // not request time
	exempt  bool          // no request time at all (JoinGroup, SyncGroup)
	decided bool          // throttle is decided (Fetch)
	wait    time.Duration // the throttle decided
}

type usageKey struct{}

// withUsage returns ctx carrying u.
func withUsage(ctx context.Context, u *usage) context.Context {
	return context.WithValue(ctx, usageKey{}, u)
}

// usageOf returns the usage ctx carries; one that goes nowhere if none.
func usageOf(ctx context.Context) *usage {
	if u, _ := ctx.Value(usageKey{}).(*usage); u != nil {
		return u
	}
	return &usage{}
}

// waitedSince counts the time since from as a wait.
func (u *usage) waitedSince(c clock.Clock, from time.Time) {
	u.waited += clock.Since(c, from)
}

// requestPercent is the request time of u at now, in Kafka's unit of the
// request quota: percent of one thread over a second.
func (u *usage) requestPercent(now time.Time) float64 {
	if u.exempt || u.began.IsZero() {
		return 0
	}
	d := now.Sub(u.began) - u.waited
	return max(d.Seconds(), 0) * 100
}

// requestThrottle records the request time of u and the bytes of key (""
// for none) of the request of id at now, and returns the longest
// throttle of the two.
func (s *Server) requestThrottle(id *identity, u *usage, key string, bytes int64, now time.Time) (d time.Duration) {
	if !s.quotas.enabled() {
		return 0
	}
	user := quotaUser(id.rc.Principal)
	if key != "" {
		d = s.quotas.record(key, user, id.rc.ClientID, float64(bytes), now)
	}
	if !u.exempt {
		d = max(d, s.quotas.record(quota.RequestPercentage, user, id.rc.ClientID, u.requestPercent(now), now))
	}
	return d
}

// fetchThrottle decides the throttle of a Fetch of bytes of records at
// now, as Kafka does: the bytes and the request time are recorded, and
// if either is over its limit the bytes are taken back out (the fetch is
// to be answered without records) and the throttle is returned.
func (s *Server) fetchThrottle(ctx context.Context, bytes int64) time.Duration {
	if !s.quotas.enabled() {
		return 0
	}
	id, u, now := identityOf(ctx), usageOf(ctx), s.clock.Now()
	d := s.requestThrottle(id, u, quota.ConsumerByteRate, bytes, now)
	if d > 0 {
		s.quotas.unrecord(quota.ConsumerByteRate, quotaUser(id.rc.Principal), id.rc.ClientID, float64(bytes), now)
	}
	u.decided, u.wait = true, d
	return d
}

// fetchMaxBytes bounds a Fetch's max bytes by what the client's quota
// allows in one response (clientQuotas.maxWindowValue).
func (s *Server) fetchMaxBytes(ctx context.Context, maxBytes int32) int32 {
	id := identityOf(ctx)
	if v, ok := s.quotas.maxWindowValue(quota.ConsumerByteRate, quotaUser(id.rc.Principal), id.rc.ClientID); ok && v < float64(maxBytes) {
		return int32(max(v, 1))
	}
	return maxBytes
}

// throttle applies the quotas to a request answered: it records what the
// request used (unless its handler decided already), and if the client is
// over a limit, sets the response's throttle time, mutes the connection
// for that long and, for a client that does not wait on its own (a
// version before KIP-219), holds the response back as long. resp may be
// nil (Produce with acks 0): the connection is muted all the same.
func (c *conn) throttle(id *identity, r *request, resp kmsg.Response) {
	s := c.s
	if !s.quotas.enabled() || isSASLRequest(r) {
		return // Kafka's authenticator answers these, off the request threads and their quota
	}
	u := &r.use
	now := s.clock.Now()
	d := u.wait
	if !u.decided {
		key, bytes := "", int64(0)
		if _, ok := r.kreq.(*kmsg.ProduceRequest); ok {
			key, bytes = quota.ProducerByteRate, r.size
		}
		d = s.requestThrottle(id, u, key, bytes, now)
	}
	if d <= 0 {
		return
	}
	ms := int32(min(d.Milliseconds(), 1<<31-1))
	s.stats.throttled.Add(1)
	s.stats.throttledMillis.Add(int64(ms))
	if s.stats.throttledLogs.allow(id.rc.Principal+"\x00"+id.rc.ClientID, now) {
		s.log.Info("throttled a client over its quota (logged at most once a second for each user and client ID)", zap.String("client", c.remote),
			zap.String("principal", id.rc.Principal), zap.String("client_id", id.rc.ClientID), zap.String("api", kmsg.NameForKey(r.kreq.Key())), zap.Duration("throttle", d))
	}
	c.mute(now.Add(d))
	clientWaits := false
	if tr, ok := resp.(kmsg.ThrottleResponse); ok {
		tr.(kmsg.SetThrottleResponse).SetThrottle(ms)
		_, clientWaits = tr.Throttle()
	}
	if resp != nil && !clientWaits {
		_ = clock.Sleep(s.ctx, s.clock, d) // Close ends it: the answer goes at once
	}
}

// mute stops the reading of requests until t (the server's clock), or
// later if it is muted longer already.
func (c *conn) mute(t time.Time) {
	until := t.UnixNano()
	for {
		old := c.mutedUntil.Load()
		if old >= until || c.mutedUntil.CompareAndSwap(old, until) {
			return
		}
	}
}

// waitUnmuted waits until the connection is not muted, or the server
// closes.
func (c *conn) waitUnmuted() {
	for {
		d := time.Duration(c.mutedUntil.Load() - c.s.clock.Now().UnixNano())
		if d <= 0 || c.s.ctx.Err() != nil {
			return
		}
		if clock.Sleep(c.s.ctx, c.s.clock, d) != nil {
			return
		}
	}
}
