package kafkaserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"golang.org/x/sync/semaphore"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/clock"
	"github.com/diskless-go/diskless/internal/backoff"
)

// maxRequestBytes bounds a request frame, as Kafka's
// socket.request.max.bytes (100 MiB) does.
const maxRequestBytes = 100 << 20

// clusterID is the cluster ID Metadata reports.
const clusterID = "diskless"

// serverConfig configures a server: Config, as New fills it in, with the
// knobs only this package's tests turn.
type serverConfig struct {
	// NodeID is the broker's node ID; Host and Port where clients reach
	// it (Metadata and FindCoordinator answer them). Host "" and Port 0
	// mean the address of the listener Serve is given.
	NodeID int32
	Host   string
	Port   int32
	// Rack is this node's rack, "" if none.
	Rack string
	// Clustered says the Broker is one node of a cluster (its
	// Config.Cluster is set): Metadata names every live node
	// (Broker.Members), and groups are coordinated by one node each.
	Clustered bool
	// CoordinatorSettle is how long a node that becomes a group's
	// coordinator waits, from the last change of membership it saw,
	// before it takes the group over (answering
	// COORDINATOR_LOAD_IN_PROGRESS until then), so that the node that
	// coordinated it before has seen the change too and finished the
	// commits it had under way. 0 means 2 s.
	CoordinatorSettle time.Duration
	// AutoCreateTopics creates unknown topics on Metadata requests that
	// allow it, with DefaultPartitions partitions.
	AutoCreateTopics  bool
	DefaultPartitions int32
	// Groups configures the group coordinator; the zero value holds
	// Kafka's defaults.
	Groups groupOptions
	// MaxInFlightRequests bounds the requests of one connection read and
	// not yet answered (Kafka's queued.max.requests); 0 means 500.
	MaxInFlightRequests int
	// MaxRequestBytes bounds the bytes of the requests read (or being
	// read) and not yet answered, over every connection (Kafka's
	// queued.max.request.bytes): a frame's declared size is taken from it
	// once its size has arrived, and past it no connection reads another
	// frame until bytes are given back. A frame larger than the whole
	// bound is read alone. 0 means 100 MiB.
	MaxRequestBytes int64
	// MaxConnections bounds the connections open at once (Kafka's
	// max.connections), MaxConnectionsPerIP those from one IP address
	// (max.connections.per.ip): a connection past either is closed as soon
	// as it is accepted, and counted. 0 means 3/4 of the file descriptors
	// the process may open (RLIMIT_NOFILE), and no bound per IP;
	// negative means no bound.
	MaxConnections, MaxConnectionsPerIP int
	// IdleTimeout closes a connection that has sent nothing for this long
	// while none of its requests is under way (Kafka's
	// connections.max.idle.ms); 0 means 10 minutes.
	IdleTimeout time.Duration
	// FrameTimeout bounds the time from a frame's size to its last byte;
	// a slower frame closes the connection. 0 means 30 s (Kafka's
	// request.timeout.ms).
	FrameTimeout time.Duration
	// FetchSessions is how many incremental fetch sessions (KIP-227) the
	// broker keeps (Kafka's max.incremental.fetch.session.cache.slots);
	// 0 means 1000, negative none.
	FetchSessions int
	// LogDir is what DescribeLogDirs names the one log directory: the
	// bucket's URL.
	LogDir string
	// Authorizer checks every request (authz.go); nil allows all. ACL
	// turns on the built-in one over the Broker's ACLs instead.
	Authorizer Authorizer
	ACL        *ACLConfig
	// Quotas is where the client quotas are read from (quotas.go); nil
	// means the Broker's (brokerQuotaSource). QuotaRefresh is how often
	// they are read again; 0 means 250 ms, as the ACLs.
	Quotas       quotaSource
	QuotaRefresh time.Duration
	// MaxConnectionsPerIPOverrides bounds the connections of the IP
	// addresses it names instead of MaxConnectionsPerIP (Kafka's
	// max.connections.per.ip.overrides); keys are canonical (netip,
	// unmapped).
	MaxConnectionsPerIPOverrides map[string]int
	// MeterProvider, if not nil, gets the server's metrics (metrics.go).
	MeterProvider metric.MeterProvider
	// OffsetsTopicMirror is Config.OffsetsTopicMirror (offsetmirror.go).
	OffsetsTopicMirror bool
	// Logger logs; nil means none.
	Logger *zap.Logger
	// TLS, if set, serves TLS (Config.TLS); SASL, if set, requires SASL
	// authentication (Config.SASL, as New checked it).
	TLS  *tls.Config
	SASL *saslSetup
}

// Server speaks the Kafka protocol over a diskless.Broker, on the
// listener Serve is given. It is safe for concurrent use; Close stops it.
type Server struct {
	b        *diskless.Broker
	clock    clock.Clock // the Broker's: sessions, fetch sessions, log throttles
	cfg      serverConfig
	self     atomic.Pointer[node] // this node as Metadata names it; set by newServer or Serve
	commits  atomic.Int64         // offset commits tried, numbering them in the debug log
	log      *zap.Logger
	groups   *groups
	offsets  offsetStorage
	configs  *configStore
	budget   *semaphore.Weighted // MaxRequestBytes; see take
	stats    serverStats
	sessions *fetchSessions
	owners   *ownership // nil on a single node
	racks    clientRacks
	metrics  metric.Registration // nil without Config.MeterProvider
	authz    Authorizer          // nil: every request is allowed
	acls     *aclAuthorizer      // the built-in authorizer, if it is authz
	quotas   *clientQuotas       // nil: no quota source
	audit    keyedEverySecond    // denials logged at most once a second for each principal and reason
	bg       sync.WaitGroup      // background work: the ACLs' and the quotas' refresh

	// ctx ends at Close: long polls and group barriers return. Produce
	// uses work instead, which Close does not end, so that what a
	// producer sent is answered.
	ctx    context.Context
	cancel context.CancelFunc
	work   context.Context

	mu struct {
		sync.Mutex
		closed bool
		ln     net.Listener
		conns  map[*conn]struct{}
		perIP  map[string]int // open connections by remote IP
	}
	wg        sync.WaitGroup // connections
	closeOnce sync.Once
}

// newServer returns a server over b: it makes sure the offsets topic
// exists and loads the committed offsets from it, and starts the group
// coordinator. ctx bounds the start only.
func newServer(ctx context.Context, b *diskless.Broker, cfg serverConfig) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.DefaultPartitions <= 0 {
		cfg.DefaultPartitions = 1
	}
	if cfg.MaxInFlightRequests <= 0 {
		cfg.MaxInFlightRequests = 500
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = 100 << 20
	}
	if cfg.MaxConnections == 0 {
		cfg.MaxConnections = defaultMaxConnections()
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 10 * time.Minute
	}
	if cfg.FrameTimeout <= 0 {
		cfg.FrameTimeout = 30 * time.Second
	}
	if cfg.FetchSessions == 0 {
		cfg.FetchSessions = 1000
	}
	s := &Server{b: b, cfg: cfg, log: cfg.Logger, budget: semaphore.NewWeighted(cfg.MaxRequestBytes), sessions: newFetchSessions(max(cfg.FetchSessions, 0))}
	s.mu.conns = map[*conn]struct{}{}
	s.mu.perIP = map[string]int{}
	if cfg.Host != "" || cfg.Port != 0 {
		s.self.Store(&node{id: cfg.NodeID, host: cfg.Host, port: cfg.Port, rack: cfg.Rack})
	}
	var err error
	co, err := openOffsets(ctx, b, cfg.Logger, cfg.OffsetsTopicMirror)
	if err != nil {
		return nil, err
	}
	s.offsets = co
	var mirror *mirrorOffsets
	if cfg.OffsetsTopicMirror {
		mirror = newMirrorOffsets(co, b, cfg.Logger)
		s.offsets = mirror
	}
	if s.configs, err = openConfigStore(ctx, b, cfg.Logger); err != nil {
		return nil, err
	}
	root := context.WithoutCancel(ctx)
	s.work = root
	s.ctx, s.cancel = context.WithCancel(root)
	if mirror != nil {
		s.bg.Go(func() {
			pprof.Do(s.ctx, pprof.Labels("kafkaserver", "offsets-mirror"), func(ctx context.Context) { mirror.run(ctx, 5*time.Second) })
		})
	}
	if cfg.MeterProvider != nil {
		if s.metrics, err = s.registerMetrics(cfg.MeterProvider); err != nil {
			s.cancel()
			return nil, fmt.Errorf("kafkaserver: Config.MeterProvider: %w", err)
		}
	}
	switch {
	case cfg.ACL != nil:
		if s.acls, err = newACLAuthorizer(ctx, b, *cfg.ACL, cfg.Logger); err != nil {
			s.cancel()
			if s.metrics != nil {
				_ = s.metrics.Unregister()
			}
			return nil, err
		}
		s.authz = s.acls
		every := cfg.ACL.Refresh
		if every <= 0 {
			every = 250 * time.Millisecond
		}
		s.bg.Go(func() {
			pprof.Do(s.ctx, pprof.Labels("kafkaserver", "acl-refresh"), func(ctx context.Context) { s.acls.run(ctx, b.Clock(), every, nil) })
		})
	case cfg.Authorizer != nil:
		s.authz = cfg.Authorizer
	}
	s.clock = b.Clock()
	if cfg.Quotas == nil {
		cfg.Quotas = brokerQuotaSource(b)
	}
	if cfg.Quotas != nil {
		if s.quotas, err = newClientQuotas(ctx, s.clock, cfg.Quotas, cfg.Logger); err != nil {
			s.cancel()
			s.bg.Wait()
			if s.metrics != nil {
				_ = s.metrics.Unregister()
			}
			return nil, fmt.Errorf("kafkaserver: reading the client quotas: %w", err)
		}
		every := cfg.QuotaRefresh
		if every <= 0 {
			every = 250 * time.Millisecond
		}
		q := s.quotas // read here, not on the goroutine: a test may set s.quotas once New returns
		s.bg.Go(func() {
			pprof.Do(s.ctx, pprof.Labels("kafkaserver", "quota-refresh"), func(ctx context.Context) { q.run(ctx, every) })
		})
	}
	gopts := cfg.Groups
	gopts.clock = s.clock
	s.groups = newGroups(gopts, cfg.Logger)
	if s.b != nil {
		s.groups.topicsOf = s.b.DescribeTopics
	}
	if cfg.Clustered {
		if cfg.CoordinatorSettle <= 0 {
			cfg.CoordinatorSettle = 2 * time.Second
			s.cfg.CoordinatorSettle = cfg.CoordinatorSettle
		}
		s.owners = newOwnership(s, cfg.CoordinatorSettle)
		s.groups.store, s.groups.claimOf = s.storeGroup, s.claimOf
	}
	return s, nil
}

// Serve accepts connections on ln until Close, and serves each on its own
// goroutines; Close closes ln. An accept error (too many open files, say)
// does not end it: it is logged at warn, and Serve waits before it
// accepts again, 5 ms doubling to 1 s while errors go on, as net/http's
// server does. A connection past Config.MaxConnections or
// MaxConnectionsPerIP is closed at once. Without Config.Advertise,
// clients are told ln's address. It returns nil after Close (at once if
// Close came first), and an error if Serve was called before: a Server
// serves one listener.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	if s.mu.ln != nil {
		s.mu.Unlock()
		return errors.New("kafkaserver: Serve was called twice")
	}
	if s.self.Load() == nil {
		host, port, err := splitHostPort(ln.Addr().String())
		if err != nil {
			s.mu.Unlock()
			return fmt.Errorf("kafkaserver: the listener's address: %w", err)
		}
		s.self.Store(&node{id: s.cfg.NodeID, host: host, port: port, rack: s.cfg.Rack})
	}
	s.mu.ln = ln
	s.mu.Unlock()
	bo := backoff.Backoff{Policy: backoff.Policy{Initial: 5 * time.Millisecond, Max: time.Second}}
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.mu.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return nil // the listener was closed under us
			}
			delay := bo.Next()
			s.stats.acceptErrors.Add(1)
			s.log.Warn("accepting a connection failed; retrying", zap.Error(err), zap.Duration("retry_in", delay))
			_ = clock.Sleep(s.work, s.clock, delay) // never cancelled: the wait ends, as time.Sleep's did
			continue
		}
		bo.Reset()
		if s.cfg.TLS != nil {
			nc = tls.Server(nc, s.cfg.TLS) // the handshake is the connection's goroutine's (conn.startTLS)
		}
		ip := remoteIP(nc)
		c := &conn{s: s, nc: nc, remote: nc.RemoteAddr().String(), ip: ip, host: canonicalHost(ip)}
		s.mu.Lock()
		if s.mu.closed {
			s.mu.Unlock()
			nc.Close()
			return nil
		}
		if why := s.overLimit(ip); why != "" {
			s.mu.Unlock()
			refused := s.stats.refused.Add(1) // before the close, so a client that saw it sees it counted
			nc.Close()
			if s.stats.refusedLog.allow(s.clock.Now()) {
				s.log.Info("closed a connection past the limit (logged at most once a second)", zap.String("client", c.remote), zap.String("limit", why), zap.Int64("refused", refused))
			}
			continue
		}
		s.mu.conns[c] = struct{}{}
		s.mu.perIP[ip]++
		s.wg.Add(1)
		s.mu.Unlock()
		go pprof.Do(s.ctx, pprof.Labels("kafkaserver", "conn"), func(context.Context) {
			defer s.wg.Done()
			c.serve()
			s.mu.Lock()
			delete(s.mu.conns, c)
			if s.mu.perIP[ip]--; s.mu.perIP[ip] <= 0 {
				delete(s.mu.perIP, ip)
			}
			s.mu.Unlock()
		})
	}
}

// Addr returns the address of the listener Serve was given, nil before
// Serve is called.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.ln == nil {
		return nil
	}
	return s.mu.ln.Addr()
}

// Close stops accepting (it closes the listener), stops reading
// requests, lets the requests under way finish and answers them (long
// polls and group barriers end at once), waits for every connection to
// close, and stops the group coordinator. It does not close the Broker:
// close it after. It is safe to call twice, and returns nil.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.mu.closed = true
		if s.mu.ln != nil {
			s.mu.ln.Close()
		}
		for c := range s.mu.conns {
			c.stopReading() // writes go on
		}
		s.mu.Unlock()
		s.cancel()
		s.wg.Wait()
		s.bg.Wait()
		if s.metrics != nil {
			_ = s.metrics.Unregister()
		}
		if s.owners != nil {
			s.owners.close()
		}
		s.groups.Close()
	})
	return nil
}

// conn is one client connection.
type conn struct {
	s       *Server
	nc      net.Conn
	remote  string
	ip      string
	host    string       // ip as Kafka names a client's host in ACLs (canonicalHost)
	pending atomic.Int32 // requests read and not yet answered
	// mutedUntil is when a throttled connection may be read again (unix
	// nanoseconds of the server's clock; quotas.go).
	mutedUntil atomic.Int64
	auth       authState // TLS and SASL principals, the SASL exchange (auth.go)

	mu struct {
		sync.Mutex
		stopped bool   // Close stopped the reader: no deadline moves again
		rack    string // the client's rack: its last Fetch's rack_id, or its client ID's diskless_rack=
	}
}

// setReadDeadline sets the read deadline, unless Close stopped the
// reader.
func (c *conn) setReadDeadline(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.mu.stopped {
		_ = c.nc.SetReadDeadline(t)
	}
}

// isStopped reports whether Close stopped the reader.
func (c *conn) isStopped() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.stopped
}

// stopReading ends the reader's read under way, and every later one.
func (c *conn) stopReading() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.stopped = true
	_ = c.nc.SetReadDeadline(time.Now()) // real time: a deadline for the kernel's clock
}

// request is one request read from a connection.
type request struct {
	corr     int32
	clientID string
	kreq     kmsg.Request
	size     int64 // its frame's bytes, held against the server's budget
	raw      bool  // an unframed SASL token after SaslHandshake v0 (kreq is a SaslAuthenticate request), answered unframed
	use      usage // what it used of its client's quotas; its handler's
}

// call is a request under way on a connection: its answer, once done is
// closed.
type call struct {
	r    *request
	done chan struct{}
	resp kmsg.Response // nil: nothing to send (Produce with acks 0)
	err  error         // closes the connection once the calls before it are answered
}

// serve serves one connection, pipelined as Kafka clients expect: one
// goroutine reads requests while earlier ones are handled, and another
// writes the answers in request order. Produce and Fetch requests run
// concurrently with each other (a producer's produce requests reach the
// facade in the order they came, each once the one before is buffered, so
// its sequence numbers are checked in order); any other request waits
// for every request before it, and the requests after it wait for it, so
// that everything but produce and fetch is seen in order. At most
// MaxInFlightRequests requests of a connection are read and not yet
// answered; past that the connection is not read.
func (c *conn) serve() {
	defer c.nc.Close()
	if !c.startTLS() {
		return
	}
	max := c.s.cfg.MaxInFlightRequests
	calls := make(chan *call, max) // in request order, to the writer
	slots := make(chan struct{}, max)
	var handlers sync.WaitGroup
	written := make(chan struct{})
	go func() {
		defer close(written)
		c.writeAnswers(calls, slots)
	}()

	var (
		barrier  = closedChan    // done when the last barrier request is
		since    []chan struct{} // produce and fetch requests since that barrier
		buffered = closedChan    // closed once the last produce request is buffered
	)
	for {
		select {
		case slots <- struct{}{}:
		case <-c.s.ctx.Done():
		}
		c.waitUnmuted() // a throttled client's next request waits (quotas.go)
		if c.s.ctx.Err() != nil {
			break
		}
		r, err := c.read()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.ErrUnexpectedEOF) && !isTimeout(err) && !errors.Is(err, context.Canceled) {
				c.s.log.Info("closing a connection", zap.String("client", c.remote), zap.Error(err))
			}
			break
		}
		c.waitUnmuted() // muted while the frame was read
		if err := c.admit(r); err != nil {
			c.s.budget.Release(r.size)
			c.s.log.Info("closing a connection", zap.String("client", c.remote), zap.Error(err))
			break
		}
		c.setRack(r.clientID, rackOfClientID(r.clientID))
		cl := &call{r: r, done: make(chan struct{})}
		c.pending.Add(1)
		calls <- cl // never blocks: a slot is held for it
		handlers.Add(1)
		start := func(wait []chan struct{}, run func(context.Context) (kmsg.Response, error)) {
			go func() {
				defer handlers.Done()
				defer close(cl.done)
				for _, w := range wait {
					<-w
				}
				began := time.Now() // real time: the debug log's latency of real work
				id := c.identity(r)
				r.use.began = c.s.clock.Now()
				cl.resp, cl.err = run(withUsage(withIdentity(c.s.ctx, id), &r.use))
				if cl.err == nil {
					// Every response, Produce and Fetch too, with the
					// error codes its request's version knows
					// (errorversions.go).
					answerForVersion(r.kreq, cl.resp)
					c.throttle(id, r, cl.resp)
				}
				if ce := c.s.log.Check(zap.DebugLevel, "request"); ce != nil {
					ce.Write(zap.String("client", c.remote), zap.String("client_id", r.clientID), zap.String("api", kmsg.NameForKey(r.kreq.Key())),
						zap.Int16("version", r.kreq.GetVersion()), zap.Int32("correlation", r.corr), zap.Duration("took", time.Since(began)), zap.Error(cl.err)) // real time: a latency
				}
			}()
		}
		switch req := r.kreq.(type) {
		case *kmsg.ProduceRequest:
			prev, mine := buffered, make(chan struct{})
			buffered = mine
			start([]chan struct{}{barrier, prev}, func(ctx context.Context) (kmsg.Response, error) {
				served := false
				resp, err := c.s.authorized(ctx, req, func(ctx context.Context) (kmsg.Response, error) {
					served = true
					return c.s.produce(ctx, req, mine)
				})
				if !served {
					close(mine) // denied whole: nothing to buffer
				}
				return resp, err
			})
			since = append(since, cl.done)
		case *kmsg.FetchRequest:
			c.setRack(r.clientID, req.Rack)
			start([]chan struct{}{barrier}, func(ctx context.Context) (kmsg.Response, error) { return c.s.fetch(ctx, req) })
			since = append(since, cl.done)
		default:
			wait := append(since, barrier)
			since, barrier = nil, cl.done
			start(wait, func(ctx context.Context) (kmsg.Response, error) { return c.s.handle(ctx, r, c) })
		}
		if isSASLRequest(r) {
			<-cl.done // its answer decides how the next frame is read, and whether one is
			if !c.stepped() {
				break
			}
		}
	}
	close(calls)
	handlers.Wait()
	<-written
}

// closedChan is a closed channel: nothing to wait for.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// writeAnswers writes the answers of calls in order, each once it is
// done, and frees its slot and its bytes. A handler's error, or a failed
// write, closes the connection (the reader stops); the calls after it
// are waited for and dropped.
func (c *conn) writeAnswers(calls <-chan *call, slots <-chan struct{}) {
	var buf []byte
	broken := false
	for cl := range calls {
		<-cl.done
		if !broken && cl.err != nil {
			c.s.log.Info("closing a connection", zap.String("client", c.remote), zap.String("request", kmsg.NameForKey(cl.r.kreq.Key())), zap.Error(cl.err))
			broken = true
			c.nc.Close()
		}
		if !broken && cl.resp != nil {
			if cl.r.raw {
				buf = appendRawToken(buf[:0], cl.resp)
			} else {
				buf = appendResponse(buf[:0], cl.r.corr, cl.resp)
			}
			if _, err := c.nc.Write(buf); err != nil {
				broken = true
				c.nc.Close()
			}
		}
		if cap(buf) > 1<<20 {
			buf = nil // do not keep a large fetch's buffer
		}
		c.s.budget.Release(cl.r.size)
		c.pending.Add(-1)
		<-slots
	}
}

// errIdle closes a connection idle for IdleTimeout.
var errIdle = errors.New("an idle connection")

// firstFrameBuffer bounds the buffer a frame is first read into.
const firstFrameBuffer = 64 << 10
