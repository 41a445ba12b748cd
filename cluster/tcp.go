package cluster

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"runtime/pprof"
	"sync"
	"time"

	"go.uber.org/zap"
)

// DefaultDialTimeout bounds a TCP transport's dial unless
// TCPOptions.DialTimeout says otherwise.
const DefaultDialTimeout = 5 * time.Second

// TCPOptions configures a TCP transport. The zero value (or a nil
// *TCPOptions) gives the documented defaults.
type TCPOptions struct {
	// DialTimeout bounds each dial to a remote address (within the
	// calling ctx's own deadline). Zero means DefaultDialTimeout (5s).
	DialTimeout time.Duration
	// Logger logs connections lost and frames refused. Nil means
	// zap.NewNop().
	Logger *zap.Logger
	// MaxFrameBytes is the largest frame (its length field: everything
	// after the 4-byte length prefix) sent or accepted, by Call and by
	// the Servers that Listen returns. A call or answer that would need
	// a larger frame fails with ErrFrameTooLarge; a larger frame read
	// closes its connection. Zero means DefaultMaxFrameBytes (64 MiB).
	MaxFrameBytes int
	// TLS, if set, makes every connection mutual TLS with the cluster's
	// CA, under the rule of the package doc ("Security between
	// brokers"): RootCAs is the cluster CA (ClientCAs, if set, is used
	// instead to verify callers); Certificates[0] (or GetCertificate and
	// GetClientCertificate) is this broker's certificate, which both
	// serves and calls and names the broker (NodeURI). The config is
	// cloned: the transport sets ClientAuth to
	// tls.RequireAndVerifyClientCert, checks the server's chain and node
	// identity itself instead of its host name (so the clone has
	// InsecureSkipVerify set; the config given must not), and calls
	// VerifyConnection, if set, after its own checks. MinVersion 0 means
	// TLS 1.3. Nil means plaintext: anything that reaches a Server can
	// call it.
	TLS *tls.Config
	// HandshakeTimeout bounds the TLS handshake of a connection a Server
	// accepted: a peer that has not finished it by then is cut off.
	// (A dial's handshake is within DialTimeout.) Zero means
	// DefaultHandshakeTimeout (10s).
	HandshakeTimeout time.Duration
}

// TCP is the default Transport: length-prefixed binary frames over one
// TCP connection per remote address, multiplexed by request ID (the
// frames are drawn in the package doc), in mutual TLS with
// TCPOptions.TLS.
//
// A TCP is safe for concurrent use. Close closes the connections that
// Call opened; the Servers that Listen returned are closed by their own
// Close.
type TCP struct {
	dialTimeout      time.Duration
	log              *zap.Logger
	maxFrame         int
	tls              *peerTLS // nil for plaintext
	handshakeTimeout time.Duration

	mu struct {
		sync.Mutex
		closed bool
		peers  map[string]*tcpPeer
		conns  map[*tcpConn]struct{}
		// dials cancels the dials under way, so that Close need not
		// wait for them to time out.
		dials map[*int]context.CancelFunc
	}
	// wg counts the connections' reader goroutines.
	wg sync.WaitGroup
}

var _ Transport = (*TCP)(nil)

// NewTCP returns a TCP transport; nil opts means the defaults.
func NewTCP(opts *TCPOptions) (*TCP, error) {
	var o TCPOptions
	if opts != nil {
		o = *opts
	}
	switch {
	case o.DialTimeout < 0:
		return nil, fmt.Errorf("cluster: TCPOptions.DialTimeout %v is negative", o.DialTimeout)
	case o.MaxFrameBytes < 0:
		return nil, fmt.Errorf("cluster: TCPOptions.MaxFrameBytes %d is negative", o.MaxFrameBytes)
	case o.MaxFrameBytes > math.MaxUint32:
		return nil, fmt.Errorf("cluster: TCPOptions.MaxFrameBytes %d is more than a frame's u32 length can say", o.MaxFrameBytes)
	case o.MaxFrameBytes != 0 && o.MaxFrameBytes < requestHeaderSize:
		return nil, fmt.Errorf("cluster: TCPOptions.MaxFrameBytes %d is less than a request's %d-byte header", o.MaxFrameBytes, requestHeaderSize)
	case o.HandshakeTimeout < 0:
		return nil, fmt.Errorf("cluster: TCPOptions.HandshakeTimeout %v is negative", o.HandshakeTimeout)
	}
	t := &TCP{dialTimeout: o.DialTimeout, log: o.Logger, maxFrame: o.MaxFrameBytes, handshakeTimeout: o.HandshakeTimeout}
	if o.TLS != nil {
		var err error
		if t.tls, err = newPeerTLS(o.TLS); err != nil {
			return nil, err
		}
	}
	if t.dialTimeout == 0 {
		t.dialTimeout = DefaultDialTimeout
	}
	if t.handshakeTimeout == 0 {
		t.handshakeTimeout = DefaultHandshakeTimeout
	}
	if t.log == nil {
		t.log = zap.NewNop()
	}
	if t.maxFrame == 0 {
		t.maxFrame = DefaultMaxFrameBytes
	}
	t.mu.peers = make(map[string]*tcpPeer)
	t.mu.conns = make(map[*tcpConn]struct{})
	t.mu.dials = make(map[*int]context.CancelFunc)
	return t, nil
}

// tcpPeer is one remote address: its connection, if there is one.
type tcpPeer struct {
	// sem (a lock that a ctx can give up waiting for) is held to read or
	// change conn, and while dialing, so that calls to one address made
	// at once share one dial. Lock order: sem before TCP.mu.
	sem  chan struct{}
	conn *tcpConn
}

// result is a call's answer, or why none came.
type result struct {
	body []byte
	err  error
}

// tcpConn is one client connection and the calls waiting on it.
type tcpConn struct {
	t    *TCP
	addr string
	nc   net.Conn // over TLS with TCPOptions.TLS
	// peer is the node ID the server's certificate proved; -1 without
	// TLS.
	peer int32

	// wmu serialises the writing of frames.
	wmu sync.Mutex
	mu  struct {
		sync.Mutex
		nextID  uint64
		pending map[uint64]chan result
		err     error // why the connection is closed; nil while it is open
	}
}

// Call sends one call to addr, dialing it first if no connection to it is
// open, and returns once the call's frame is written (or could not be).
// See Transport.Call. The body is not kept after Call returns; the bytes
// wait returns are the caller's. If ctx ends while the frame is being
// written, the connection is closed (its stream can no longer be trusted)
// and the other calls waiting on it fail too.
func (t *TCP) Call(ctx context.Context, addr string, shard int, method string, body []byte) (wait func() ([]byte, error)) {
	fail := func(err error) func() ([]byte, error) {
		err = fmt.Errorf("cluster: call %q to %s: %w", method, addr, err)
		return func() ([]byte, error) { return nil, err }
	}
	switch {
	case shard < 0 || shard > math.MaxUint32:
		return fail(fmt.Errorf("shard %d out of a frame's u32 range", shard))
	case len(method) > math.MaxUint16:
		return fail(fmt.Errorf("method name of %d bytes, at most %d", len(method), math.MaxUint16))
	}
	if err := checkFrameSize(requestSize(method, len(body)), t.maxFrame); err != nil {
		return fail(err)
	}
	if ctx.Err() != nil {
		return fail(ctxErr(ctx))
	}
	c, err := t.conn(ctx, addr)
	if err != nil {
		return fail(err)
	}
	if want, ok := Callee(ctx); ok && t.tls != nil && c.peer != want {
		return fail(fmt.Errorf("%w: the broker there is node %d, not node %d", ErrPeerIdentity, c.peer, want))
	}
	wait, err = c.call(ctx, uint32(shard), method, body)
	if err != nil {
		return fail(err)
	}
	return wait
}

// conn returns the open connection to addr, dialing it if there is none.
func (t *TCP) conn(ctx context.Context, addr string) (*tcpConn, error) {
	t.mu.Lock()
	if t.mu.closed {
		t.mu.Unlock()
		return nil, ErrClosed
	}
	p := t.mu.peers[addr]
	if p == nil {
		p = &tcpPeer{sem: make(chan struct{}, 1)}
		t.mu.peers[addr] = p
	}
	t.mu.Unlock()

	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctxErr(ctx)
	}
	defer func() { <-p.sem }()
	if p.conn != nil && p.conn.open() {
		return p.conn, nil
	}
	p.conn = nil

	dctx, cancel := context.WithTimeout(ctx, t.dialTimeout)
	defer cancel()
	key := new(int)
	t.mu.Lock()
	if t.mu.closed {
		t.mu.Unlock()
		return nil, ErrClosed
	}
	t.mu.dials[key] = cancel
	t.mu.Unlock()
	var d net.Dialer
	nc, err := d.DialContext(dctx, "tcp", addr)
	peer := int32(-1)
	if err == nil && t.tls != nil {
		nc, peer, err = t.tls.clientHandshake(dctx, nc)
	}
	t.mu.Lock()
	delete(t.mu.dials, key)
	closed := t.mu.closed
	if err == nil && closed {
		nc.Close()
	}
	if err != nil || closed {
		t.mu.Unlock()
		if closed {
			return nil, ErrClosed
		}
		return nil, fmt.Errorf("dialing: %w", err)
	}
	c := &tcpConn{t: t, addr: addr, nc: nc, peer: peer}
	c.mu.pending = make(map[uint64]chan result)
	t.mu.conns[c] = struct{}{}
	t.wg.Add(1)
	t.mu.Unlock()
	go pprof.Do(context.Background(), pprof.Labels("diskless", "cluster-tcp-reader", "addr", addr), func(context.Context) {
		defer t.wg.Done()
		c.read()
	})
	p.conn = c
	return c, nil
}

// open says whether the connection is still open.
func (c *tcpConn) open() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.err == nil
}

// call registers a call and writes its frame.
func (c *tcpConn) call(ctx context.Context, shard uint32, method string, body []byte) (func() ([]byte, error), error) {
	ch := make(chan result, 1)
	c.mu.Lock()
	if err := c.mu.err; err != nil {
		c.mu.Unlock()
		return nil, err
	}
	id := c.mu.nextID
	c.mu.nextID++
	c.mu.pending[id] = ch
	c.mu.Unlock()

	var deadline int64
	if d, ok := ctx.Deadline(); ok {
		deadline = d.UnixNano()
	}
	hdr := appendRequestHeader(make([]byte, 0, lengthSize+requestHeaderSize+len(method)), id, shard, deadline, method, len(body))
	c.wmu.Lock()
	err := writeFrame(ctx, c.nc, net.Buffers{hdr, body})
	c.wmu.Unlock()
	if err != nil {
		// The frame may be half written: nothing after it can be read
		// right.
		err = fmt.Errorf("%w: writing: %w", ErrConnectionLost, err)
		c.close(err)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w (%w)", ctxErr(ctx), err)
		}
		return nil, err
	}
	return sync.OnceValues(func() ([]byte, error) {
		select {
		case r := <-ch:
			return r.body, r.err
		case <-ctx.Done():
		}
		c.mu.Lock()
		delete(c.mu.pending, id)
		c.mu.Unlock()
		select {
		case r := <-ch: // it came as ctx ended
			return r.body, r.err
		default:
			return nil, fmt.Errorf("cluster: call %q to %s: %w", method, c.addr, ctxErr(ctx))
		}
	}), nil
}

// read reads the answers until the connection fails, and hands each to
// its call.
func (c *tcpConn) read() {
	br := bufio.NewReaderSize(c.nc, 64<<10)
	for {
		frame, err := readFrame(br, responseHeaderSize, c.t.maxFrame)
		if err != nil {
			c.close(fmt.Errorf("%w: reading: %w", ErrConnectionLost, err))
			return
		}
		id, body, _ := parseResponse(frame) // readFrame checked the header's length
		c.mu.Lock()
		ch, ok := c.mu.pending[id]
		delete(c.mu.pending, id)
		c.mu.Unlock()
		if ok {
			ch <- result{body: body}
		}
	}
}

// close closes the connection, if it is open, and fails the calls
// waiting on it with err.
func (c *tcpConn) close(err error) {
	c.mu.Lock()
	if c.mu.err != nil {
		c.mu.Unlock()
		return
	}
	c.mu.err = fmt.Errorf("connection to %s: %w", c.addr, err)
	err = c.mu.err
	pending := c.mu.pending
	c.mu.pending = nil
	c.mu.Unlock()
	c.nc.Close()
	if !errors.Is(err, ErrClosed) {
		c.t.log.Warn("cluster: connection lost", zap.String("addr", c.addr), zap.Int("pending", len(pending)), zap.Error(err))
	}
	for _, ch := range pending {
		ch <- result{err: err}
	}
	c.t.mu.Lock()
	delete(c.t.mu.conns, c)
	c.t.mu.Unlock()
}

// Close closes every connection Call opened, failing the calls waiting on
// them with ErrClosed, and waits for their goroutines. Calls after Close
// fail with ErrClosed. Close is safe to call twice.
func (t *TCP) Close() error {
	t.mu.Lock()
	t.mu.closed = true
	var conns []*tcpConn
	for c := range t.mu.conns {
		conns = append(conns, c)
	}
	for _, cancel := range t.mu.dials {
		cancel()
	}
	t.mu.Unlock()
	for _, c := range conns {
		c.close(ErrClosed)
	}
	t.wg.Wait()
	return nil
}

// writeFrame writes bufs to nc, giving up (with a write deadline in the
// past) if ctx ends first. It is called under the connection's write lock.
func writeFrame(ctx context.Context, nc net.Conn, bufs net.Buffers) error {
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		nc.SetWriteDeadline(time.Unix(1, 0))
		close(fired)
	})
	_, err := bufs.WriteTo(nc)
	if !stop() {
		<-fired
		nc.SetWriteDeadline(time.Time{})
	}
	return err
}

// ctxErr is why ctx ended: ctx.Err(), so that errors.Is finds
// context.Canceled or context.DeadlineExceeded, and its cause beside it
// if that says more.
func ctxErr(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("%w: %w", err, cause)
	}
	return err
}
