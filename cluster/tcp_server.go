package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/pprof"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/diskless-go/diskless/clock"
	"github.com/diskless-go/diskless/internal/backoff"
)

// tcpServer is the Server that TCP.Listen returns.
type tcpServer struct {
	ln               net.Listener
	h                Handler
	log              *zap.Logger
	maxFrame         int
	tls              *peerTLS // nil for plaintext
	handshakeTimeout time.Duration

	// ctx is the root of the handlers' contexts; cancel ends it at Close.
	ctx    context.Context
	cancel context.CancelFunc

	mu struct {
		sync.Mutex
		closed   bool
		closeErr error
		conns    map[*serverConn]struct{}
	}
	// wg counts the accept loop, the connections' readers and the answers
	// being computed.
	wg sync.WaitGroup
}

// serverConn is one connection a Server accepted.
type serverConn struct {
	// nc is the connection accepted, which Close closes.
	nc net.Conn
	// conn is what the frames travel on: nc, or the TLS connection over
	// it once its handshake succeeded. Set by the reader before it reads
	// the first frame, and read by it and by the answers it starts.
	conn net.Conn
	// wmu serialises the writing of answers.
	wmu sync.Mutex
}

// Listen listens on addr (host:port; port 0 picks a free one) and serves
// the calls that arrive with h. The frames of each connection are read in
// order and handed to h one after another, on the connection's reader
// goroutine; each answer is computed on a goroutine of its own and sent
// when it is ready. The ctx h gets carries the call's deadline and ends
// when the connection or the Server closes. The body h gets is its own to
// keep. The Server is safe for concurrent use, and outlives t's Close.
func (t *TCP) Listen(addr string, h Handler) (Server, error) {
	if h == nil {
		return nil, errors.New("cluster: Listen with a nil Handler")
	}
	t.mu.Lock()
	closed := t.mu.closed
	t.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cluster: listen: %w", err)
	}
	s := &tcpServer{ln: ln, h: h, log: t.log.With(zap.String("listen", ln.Addr().String())), maxFrame: t.maxFrame,
		tls: t.tls, handshakeTimeout: t.handshakeTimeout}
	// Listen takes no ctx (Transport's signature): the handlers' contexts
	// start here, and Close ends them.
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mu.conns = make(map[*serverConn]struct{})
	s.wg.Add(1)
	go pprof.Do(s.ctx, pprof.Labels("diskless", "cluster-tcp-accept"), func(context.Context) {
		defer s.wg.Done()
		s.accept()
	})
	return s, nil
}

// Addr returns the address the Server listens on.
func (s *tcpServer) Addr() string { return s.ln.Addr().String() }

// accept accepts connections until the Server closes. Any other accept
// error (too many open files, a connection reset before it was accepted)
// is waited out, backing off from 5ms to 1s.
func (s *tcpServer) accept() {
	bo := backoff.Backoff{Policy: backoff.Policy{Initial: 5 * time.Millisecond, Max: time.Second}}
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if s.isClosed() {
				return
			}
			d := bo.Next()
			s.log.Warn("cluster: accept failed; backing off", zap.Duration("backoff", d), zap.Error(err))
			if clock.Sleep(s.ctx, clock.System, d) != nil {
				return
			}
			continue
		}
		bo.Reset()
		c := &serverConn{nc: nc}
		s.mu.Lock()
		if s.mu.closed {
			s.mu.Unlock()
			nc.Close()
			return
		}
		s.mu.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go pprof.Do(s.ctx, pprof.Labels("diskless", "cluster-tcp-serve", "remote", nc.RemoteAddr().String()), func(ctx context.Context) {
			defer s.wg.Done()
			s.serve(ctx, c)
		})
	}
}

func (s *tcpServer) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.closed
}

// serve reads c's frames in order and hands each to the Handler, until
// the connection fails or a frame is refused. With TLS, the handshake
// comes first: a peer that does not complete it, with a certificate of
// the cluster CA that names a node, within the handshake timeout, is cut
// off before a byte of a frame is read.
func (s *tcpServer) serve(ctx context.Context, c *serverConn) {
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		c.nc.Close()
		s.mu.Lock()
		delete(s.mu.conns, c)
		s.mu.Unlock()
	}()
	c.conn = c.nc
	if s.tls != nil {
		conn, caller, err := s.tls.serverHandshake(c.nc, s.handshakeTimeout)
		if err != nil {
			if !s.isClosed() {
				s.log.Warn("cluster: peer refused", zap.String("remote", c.nc.RemoteAddr().String()), zap.Error(err))
			}
			return
		}
		c.conn = conn
		ctx = context.WithValue(ctx, callerKey{}, caller)
	}
	br := bufio.NewReaderSize(c.conn, 64<<10)
	for {
		frame, err := readFrame(br, requestHeaderSize, s.maxFrame)
		if err == nil {
			var req request
			req, err = parseRequest(frame)
			if err == nil {
				s.handle(ctx, c, req)
				continue
			}
		}
		if !errors.Is(err, io.EOF) && !s.isClosed() && !errors.Is(err, net.ErrClosed) {
			s.log.Warn("cluster: connection closed", zap.String("remote", c.nc.RemoteAddr().String()), zap.Error(err))
		}
		return
	}
}

// handle hands one call to the Handler, and starts the goroutine that
// answers it.
func (s *tcpServer) handle(ctx context.Context, c *serverConn, req request) {
	cancel := context.CancelFunc(func() {})
	if req.deadline != 0 {
		ctx, cancel = context.WithDeadline(ctx, time.Unix(0, req.deadline))
	}
	answer := s.h(ctx, int(req.shard), req.method, req.body)
	s.wg.Add(1) // under the reader's own count, so never from zero
	go func() {
		defer s.wg.Done()
		defer cancel()
		var body []byte
		if answer != nil {
			body = answer()
		}
		size := responseHeaderSize + len(body)
		if err := checkFrameSize(size, s.maxFrame); err != nil {
			// The frame cannot say so: the caller learns it as a lost
			// connection.
			s.log.Error("cluster: answer too large; closing the connection", zap.String("method", req.method), zap.Int("bytes", len(body)), zap.Error(err))
			c.nc.Close()
			return
		}
		hdr := appendResponseHeader(make([]byte, 0, lengthSize+responseHeaderSize), req.id, len(body))
		c.wmu.Lock()
		_, err := (&net.Buffers{hdr, body}).WriteTo(c.conn)
		c.wmu.Unlock()
		if err != nil {
			// The reader sees the connection closed, and stops.
			c.nc.Close()
		}
	}()
}

// Close stops listening, closes the connections (ending the handlers'
// contexts), and waits for the answers being computed. It is safe to call
// twice.
func (s *tcpServer) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		err := s.mu.closeErr
		s.mu.Unlock()
		s.wg.Wait()
		return err
	}
	s.mu.closed = true
	conns := make([]*serverConn, 0, len(s.mu.conns))
	for c := range s.mu.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	s.cancel()
	var err error
	if cerr := s.ln.Close(); cerr != nil && !errors.Is(cerr, net.ErrClosed) {
		err = fmt.Errorf("cluster: closing the listener: %w", cerr)
	}
	s.mu.Lock()
	s.mu.closeErr = err
	s.mu.Unlock()
	for _, c := range conns {
		c.nc.Close()
	}
	s.wg.Wait()
	return err
}
