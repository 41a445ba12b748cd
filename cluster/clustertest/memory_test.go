package clustertest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/diskless-go/diskless/cluster"
	"github.com/diskless-go/diskless/cluster/clustertest"
)

// TestMemory runs the suite over a transport in memory, to show that it
// asks nothing of TCP in particular.
func TestMemory(t *testing.T) {
	network := &memNetwork{servers: make(map[string]*memServer)}
	clustertest.RunTransport(t, func(*testing.T) cluster.Transport {
		return &memTransport{network: network, calls: make(map[*memCall]struct{})}
	})
}

// memNetwork is where memServers listen.
type memNetwork struct {
	mu      sync.Mutex
	next    int
	servers map[string]*memServer
}

// memTransport calls the Handler of the memServer at addr on the calling
// goroutine (so the Handler sees one goroutine's calls in order), and
// computes the answer on a goroutine of its own.
type memTransport struct {
	network *memNetwork
	mu      sync.Mutex
	closed  bool
	calls   map[*memCall]struct{}
}

// memCall is one call in flight: whoever ends it first (the answer, the
// Server's or the Transport's Close) says how.
type memCall struct {
	once sync.Once
	ch   chan result
}

type result struct {
	b   []byte
	err error
}

func (c *memCall) end(b []byte, err error) {
	c.once.Do(func() { c.ch <- result{b, err} })
}

func (tr *memTransport) Listen(addr string, h cluster.Handler) (cluster.Server, error) {
	n := tr.network
	n.mu.Lock()
	defer n.mu.Unlock()
	if addr == "127.0.0.1:0" {
		n.next++
		addr = fmt.Sprintf("mem:%d", n.next)
	}
	if n.servers[addr] != nil {
		return nil, fmt.Errorf("%s: address in use", addr)
	}
	s := &memServer{network: n, addr: addr, h: h, calls: make(map[*memCall]struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	n.servers[addr] = s
	return s, nil
}

func (tr *memTransport) Call(ctx context.Context, addr string, shard int, method string, body []byte) func() ([]byte, error) {
	fail := func(err error) func() ([]byte, error) { return func() ([]byte, error) { return nil, err } }
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	tr.network.mu.Lock()
	s := tr.network.servers[addr]
	tr.network.mu.Unlock()
	if s == nil {
		return fail(fmt.Errorf("%s: nobody there", addr))
	}
	c := &memCall{ch: make(chan result, 1)}
	tr.mu.Lock()
	if tr.closed {
		tr.mu.Unlock()
		return fail(cluster.ErrClosed)
	}
	tr.calls[c] = struct{}{}
	tr.mu.Unlock()
	if err := s.serve(ctx, c, shard, method, bytes.Clone(body)); err != nil {
		c.end(nil, err)
	}
	return sync.OnceValues(func() ([]byte, error) {
		defer func() {
			tr.mu.Lock()
			delete(tr.calls, c)
			tr.mu.Unlock()
		}()
		select {
		case r := <-c.ch:
			return r.b, r.err
		case <-ctx.Done():
			c.end(nil, ctx.Err())
			r := <-c.ch
			return r.b, r.err
		}
	})
}

func (tr *memTransport) Close() error {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.closed = true
	for c := range tr.calls {
		c.end(nil, cluster.ErrClosed)
	}
	return nil
}

type memServer struct {
	network *memNetwork
	addr    string
	h       cluster.Handler
	ctx     context.Context
	cancel  context.CancelFunc

	// mu serialises the Handler's calls, as one connection would.
	mu     sync.Mutex
	closed bool
	calls  map[*memCall]struct{}
	wg     sync.WaitGroup
}

func (s *memServer) serve(ctx context.Context, c *memCall, shard int, method string, body []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("connection refused")
	}
	hctx, cancel := s.ctx, context.CancelFunc(func() {})
	if d, ok := ctx.Deadline(); ok {
		hctx, cancel = context.WithDeadline(s.ctx, d)
	}
	answer := s.h(hctx, shard, method, body)
	s.calls[c] = struct{}{}
	s.wg.Go(func() {
		defer cancel()
		b := bytes.Clone(answer())
		s.mu.Lock()
		delete(s.calls, c)
		s.mu.Unlock()
		c.end(b, nil)
	})
	return nil
}

func (s *memServer) Addr() string { return s.addr }

func (s *memServer) Close() error {
	s.network.mu.Lock()
	if s.network.servers[s.addr] == s {
		delete(s.network.servers, s.addr)
	}
	s.network.mu.Unlock()
	s.mu.Lock()
	s.closed = true
	for c := range s.calls {
		c.end(nil, cluster.ErrConnectionLost)
	}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}
