package main

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// delayProxy forwards TCP connections to a target address, delaying what
// the target sends back by a fixed time. When the target's side of a
// connection ends, the client's side is closed at once and whatever was
// not yet delivered is lost: as the responses on the wire are when a
// broker dies. Requests pass at once.
type delayProxy struct {
	ln     net.Listener
	target string
	delay  time.Duration
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	// lost counts the response bytes never delivered; held, the bytes
	// read from the target and not yet delivered; lastRead, when the
	// target last sent bytes (Unix nanoseconds).
	lost, held, lastRead atomic.Int64
}

// fresh reports whether bytes are held that the target sent less than
// half the delay ago: bytes still some way from delivery, so that a kill
// of the target made now loses them (bytes about to be delivered may
// reach the client before the kill closes the connection).
func (p *delayProxy) fresh() bool {
	return p.held.Load() > 0 && time.Since(time.Unix(0, p.lastRead.Load())) < p.delay/2
}

// startProxy starts a proxy to target on 127.0.0.1, stopped at cleanup.
func startProxy(t *testing.T, target string, delay time.Duration) *delayProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &delayProxy{ln: ln, target: target, delay: delay, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *delayProxy) addr() string { return p.ln.Addr().String() }

func (p *delayProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// track adds c to the connections that close closes.
func (p *delayProxy) track(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns[c] = struct{}{}
}

func (p *delayProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close() // the broker is down: the client retries
			continue
		}
		p.track(c)
		p.track(up)
		p.wg.Add(3)
		go func() { // requests: at once
			defer p.wg.Done()
			buf := make([]byte, 64<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					if _, werr := up.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			up.Close()
		}()
		type chunk struct {
			data []byte
			at   time.Time
		}
		chunks := make(chan chunk, 1024)
		go func() { // responses: read as they come
			defer p.wg.Done()
			defer close(chunks)
			for {
				buf := make([]byte, 64<<10)
				n, err := up.Read(buf)
				if n > 0 {
					p.held.Add(int64(n))
					p.lastRead.Store(time.Now().UnixNano())
					chunks <- chunk{buf[:n], time.Now()}
				}
				if err != nil {
					c.Close() // what is still queued is lost
					return
				}
			}
		}()
		go func() { // responses: delivered after the delay
			defer p.wg.Done()
			for ch := range chunks {
				time.Sleep(time.Until(ch.at.Add(p.delay))) // the latency injected, not a wait for a condition
				n, err := c.Write(ch.data)
				p.held.Add(-int64(len(ch.data)))
				if err != nil {
					p.lost.Add(int64(len(ch.data) - n))
					c.Close()
					up.Close()
				}
			}
		}()
	}
}
