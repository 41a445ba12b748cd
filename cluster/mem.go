package cluster

import (
	"context"
	"fmt"
	"strconv"
	"sync"
)

// Mem is a Transport within one process: brokers of one Mem reach each
// other by the addresses their Listen calls got ("mem:1", "mem:2", ...),
// with no network, for tests and for programs that run several brokers in
// one process. Its zero value is ready to use; it is safe for concurrent
// use. Calls keep their order per caller goroutine as the Transport
// contract asks: each Call is handed to the Handler before it returns.
type Mem struct {
	mu      sync.Mutex
	next    int
	servers map[string]*memServer
	closed  bool
}

var _ Transport = (*Mem)(nil)

type memServer struct {
	m    *Mem
	addr string
	h    Handler
	mu   sync.Mutex
	wg   sync.WaitGroup
	done bool
	ctx  context.Context // ended by Close: callers waiting fail then
	stop context.CancelFunc
}

// Listen registers a server; addr is ignored unless it is a "mem:N"
// address not in use.
func (m *Mem) Listen(addr string, h Handler) (Server, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.servers == nil {
		m.servers = map[string]*memServer{}
	}
	if _, taken := m.servers[addr]; taken || len(addr) < 5 || addr[:4] != "mem:" {
		m.next++
		addr = "mem:" + strconv.Itoa(m.next)
	}
	s := &memServer{m: m, addr: addr, h: h}
	s.ctx, s.stop = context.WithCancel(context.Background())
	m.servers[addr] = s
	return s, nil
}

// Call hands the call to the server at addr.
func (m *Mem) Call(ctx context.Context, addr string, shard int, method string, body []byte) func() ([]byte, error) {
	m.mu.Lock()
	s, closed := m.servers[addr], m.closed
	m.mu.Unlock()
	fail := func(err error) func() ([]byte, error) { return func() ([]byte, error) { return nil, err } }
	switch {
	case closed:
		return fail(ErrClosed)
	case ctx.Err() != nil:
		return fail(ctx.Err())
	}
	if s == nil {
		return fail(fmt.Errorf("cluster: no server at %s", addr))
	}
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return fail(fmt.Errorf("cluster: the server at %s is closed", addr))
	}
	s.wg.Add(1)
	s.mu.Unlock()
	sctx, cancel := context.WithCancel(s.ctx)
	if d, ok := ctx.Deadline(); ok {
		sctx, cancel = context.WithDeadline(s.ctx, d)
	}
	stopOnCaller := context.AfterFunc(ctx, cancel)
	answer := s.h(sctx, shard, method, append([]byte(nil), body...))
	ch := make(chan []byte, 1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		defer stopOnCaller()
		ch <- answer()
	}()
	return func() ([]byte, error) {
		select {
		case b := <-ch:
			return b, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.ctx.Done():
			return nil, fmt.Errorf("cluster: the server at %s closed: %w", addr, ErrConnectionLost)
		}
	}
}

// Close makes later Calls fail with ErrClosed; its servers serve on until
// their own Close.
func (m *Mem) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	return nil
}

func (s *memServer) Addr() string { return s.addr }

func (s *memServer) Close() error {
	s.m.mu.Lock()
	if s.m.servers[s.addr] == s {
		delete(s.m.servers, s.addr)
	}
	s.m.mu.Unlock()
	s.mu.Lock()
	s.done = true
	s.mu.Unlock()
	s.stop()
	s.wg.Wait()
	return nil
}
