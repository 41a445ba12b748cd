package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/pprof"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless"
)

// maxRequestBytes bounds a request frame, as Kafka's
// socket.request.max.bytes (100 MiB) does.
const maxRequestBytes = 100 << 20

// clusterID is the cluster ID Metadata reports.
const clusterID = "diskless"

// serverConfig configures a server.
type serverConfig struct {
	// NodeID is the broker's node ID; Host and Port where clients reach
	// it (Metadata and FindCoordinator answer them).
	NodeID int32
	Host   string
	Port   int32
	// AutoCreateTopics creates unknown topics on Metadata requests that
	// allow it, with DefaultPartitions partitions.
	AutoCreateTopics  bool
	DefaultPartitions int32
	// Groups configures the group coordinator; the zero value holds
	// Kafka's defaults.
	Groups groupOptions
	// Logger logs; nil means none.
	Logger *zap.Logger
}

// server speaks the Kafka protocol over a diskless.Broker. It is safe for
// concurrent use; Close stops it.
type server struct {
	b       *diskless.Broker
	cfg     serverConfig
	log     *zap.Logger
	groups  *groups
	offsets *offsetStore

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
	}
	wg        sync.WaitGroup // connections
	closeOnce sync.Once
}

// newServer returns a server over b: it makes sure the offsets topic
// exists and loads the committed offsets from it, and starts the group
// coordinator. ctx bounds the start only.
func newServer(ctx context.Context, b *diskless.Broker, cfg serverConfig) (*server, error) {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.DefaultPartitions <= 0 {
		cfg.DefaultPartitions = 1
	}
	s := &server{b: b, cfg: cfg, log: cfg.Logger}
	s.mu.conns = map[*conn]struct{}{}
	var err error
	if s.offsets, err = openOffsetStore(ctx, b, cfg.Logger); err != nil {
		return nil, err
	}
	root := context.WithoutCancel(ctx)
	s.work = root
	s.ctx, s.cancel = context.WithCancel(root)
	s.groups = newGroups(cfg.Groups, cfg.Logger)
	return s, nil
}

// Serve accepts connections on ln until Close, and serves each on its own
// goroutines. It returns nil after Close, else the accept error.
func (s *server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.ln = ln
	s.mu.Unlock()
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.mu.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		c := &conn{s: s, nc: nc, remote: nc.RemoteAddr().String()}
		s.mu.Lock()
		if s.mu.closed {
			s.mu.Unlock()
			nc.Close()
			return nil
		}
		s.mu.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go pprof.Do(s.ctx, pprof.Labels("kafka-broker", "conn"), func(context.Context) {
			defer s.wg.Done()
			c.serve()
			s.mu.Lock()
			delete(s.mu.conns, c)
			s.mu.Unlock()
		})
	}
}

// Close stops accepting, stops reading requests, lets the requests under
// way finish (long polls and group barriers end at once), waits for every
// connection to close, and stops the group coordinator. It does not close
// the Broker. It is safe to call twice.
func (s *server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.mu.closed = true
		if s.mu.ln != nil {
			s.mu.ln.Close()
		}
		for c := range s.mu.conns {
			_ = c.nc.SetReadDeadline(time.Now()) // the reader stops; writes go on
		}
		s.mu.Unlock()
		s.cancel()
		s.wg.Wait()
		s.groups.Close()
	})
	return nil
}

// conn is one client connection.
type conn struct {
	s      *server
	nc     net.Conn
	remote string
}

// request is one request read from a connection.
type request struct {
	corr     int32
	clientID string
	kreq     kmsg.Request
}

// serve reads requests on one goroutine and handles them on this one, in
// order, writing each response before handling the next request.
func (c *conn) serve() {
	defer c.nc.Close()
	reqs := make(chan *request, 8)
	go func() {
		defer close(reqs)
		for {
			r, err := c.read()
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.ErrUnexpectedEOF) && !isTimeout(err) {
					c.s.log.Info("closing a connection", zap.String("client", c.remote), zap.Error(err))
				}
				return
			}
			reqs <- r
		}
	}()
	var buf []byte
	for r := range reqs {
		start := time.Now()
		resp, err := c.s.handle(r, c.remote)
		if ce := c.s.log.Check(zap.DebugLevel, "request"); ce != nil {
			ce.Write(zap.String("client", c.remote), zap.String("client_id", r.clientID), zap.String("api", kmsg.NameForKey(r.kreq.Key())),
				zap.Int16("version", r.kreq.GetVersion()), zap.Int32("correlation", r.corr), zap.Duration("took", time.Since(start)), zap.Error(err))
		}
		if err != nil {
			c.s.log.Info("closing a connection", zap.String("client", c.remote), zap.String("request", kmsg.NameForKey(r.kreq.Key())), zap.Error(err))
			break
		}
		if resp == nil {
			continue // Produce with acks 0: no response
		}
		buf = appendResponse(buf[:0], r.corr, resp)
		if _, err := c.nc.Write(buf); err != nil {
			break
		}
	}
	c.nc.Close() // the reader stops
	for range reqs {
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// read reads and parses one request frame: its size, the request header
// (key, version, correlation ID, client ID, and tagged fields in flexible
// versions) and the body. A version the broker does not serve is an
// error (the connection closes, as Kafka closes it), except for
// ApiVersions, which is answered.
func (c *conn) read() (*request, error) {
	var size [4]byte
	if _, err := io.ReadFull(c.nc, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 8 || n > maxRequestBytes {
		return nil, fmt.Errorf("a request frame of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c.nc, body); err != nil {
		return nil, err
	}
	rd := kbin.Reader{Src: body}
	key, version, corr := rd.Int16(), rd.Int16(), rd.Int32()
	clientID := rd.NullableString()
	if !rd.Ok() {
		return nil, errors.New("a truncated request header")
	}
	r := &request{corr: corr}
	if clientID != nil {
		r.clientID = *clientID
	}
	if !serves(key, version) {
		if key == apiVersionsKey {
			r.kreq = &kmsg.ApiVersionsRequest{Version: version} // answered in version 0, unread
			return r, nil
		}
		return nil, fmt.Errorf("%s (key %d) version %d is not served", kmsg.NameForKey(key), key, version)
	}
	r.kreq = kmsg.RequestForKey(key)
	r.kreq.SetVersion(version)
	if r.kreq.IsFlexible() {
		kmsg.SkipTags(&rd)
	}
	if !rd.Ok() {
		return nil, errors.New("a truncated request header")
	}
	if err := r.kreq.ReadFrom(rd.Src); err != nil {
		return nil, fmt.Errorf("parsing %s v%d: %w", kmsg.NameForKey(key), version, err)
	}
	return r, nil
}

// apiVersionsKey is ApiVersions' key.
const apiVersionsKey = 18

// appendResponse appends a response frame: its size, the response header
// (the correlation ID; header v1 adds empty tagged fields in flexible
// versions, except for ApiVersions, whose response header is always v0)
// and the body.
func appendResponse(dst []byte, corr int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	if resp.IsFlexible() && resp.Key() != apiVersionsKey {
		dst = append(dst, 0) // no tagged fields
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// handle serves one request. A nil response sends nothing (Produce with
// acks 0); an error closes the connection.
func (s *server) handle(r *request, remote string) (kmsg.Response, error) {
	ctx := s.ctx
	switch req := r.kreq.(type) {
	case *kmsg.ApiVersionsRequest:
		return apiVersions(req), nil
	case *kmsg.MetadataRequest:
		return s.metadata(ctx, req)
	case *kmsg.CreateTopicsRequest:
		return s.createTopics(ctx, req)
	case *kmsg.DeleteTopicsRequest:
		return s.deleteTopics(ctx, req)
	case *kmsg.DescribeConfigsRequest:
		return s.describeConfigs(ctx, req)
	case *kmsg.ProduceRequest:
		return s.produce(req)
	case *kmsg.FetchRequest:
		return s.fetch(ctx, req)
	case *kmsg.ListOffsetsRequest:
		return s.listOffsets(ctx, req)
	case *kmsg.DeleteRecordsRequest:
		return s.deleteRecords(ctx, req)
	case *kmsg.InitProducerIDRequest:
		return s.initProducerID(ctx, req)
	case *kmsg.FindCoordinatorRequest:
		return s.findCoordinator(req), nil
	case *kmsg.JoinGroupRequest:
		return s.groups.join(ctx, req, r.clientID, remote), nil
	case *kmsg.SyncGroupRequest:
		return s.groups.sync(ctx, req), nil
	case *kmsg.HeartbeatRequest:
		return s.groups.heartbeat(req), nil
	case *kmsg.LeaveGroupRequest:
		return s.groups.leave(req), nil
	case *kmsg.OffsetCommitRequest:
		return s.offsetCommit(req)
	case *kmsg.OffsetFetchRequest:
		return s.offsetFetch(req), nil
	}
	return nil, fmt.Errorf("no handler for %s", kmsg.NameForKey(r.kreq.Key()))
}

// splitHostPort splits HOST:PORT with a numeric port.
func splitHostPort(addr string) (string, int32, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("port %q: %w", p, err)
	}
	return host, int32(port), nil
}
