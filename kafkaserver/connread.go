package kafkaserver

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// Reading a connection's frames: their sizes held against the request
// budget, each frame whole within FrameTimeout.

// isTimeout reports whether err is a network timeout (a read deadline
// passed).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// read reads and parses one request frame: its size, the request header
// (key, version, correlation ID, client ID, and tagged fields in flexible
// versions) and the body. Once the size has arrived, the frame's declared
// bytes are taken from the server's budget (the reader waits while it is
// spent) and held until its answer is written, but memory is allocated
// only as the bytes arrive, and the rest of the frame must arrive within
// FrameTimeout. A connection that sends nothing for IdleTimeout while
// none of its requests is under way is closed. A version the broker does
// not serve is an error (the connection closes, as Kafka closes it),
// except for ApiVersions, which is answered.
func (c *conn) read() (*request, error) {
	var size [4]byte
	for got := 0; got < len(size); {
		c.setReadDeadline(time.Now().Add(c.s.cfg.IdleTimeout)) // real time: a deadline for the kernel's clock
		k, err := c.nc.Read(size[got:])
		got += k
		if err == nil || (k > 0 && isTimeout(err)) {
			continue
		}
		if !isTimeout(err) || c.isStopped() {
			return nil, err
		}
		if got == 0 && c.pending.Load() > 0 {
			continue // quiet while its requests are under way (a long poll)
		}
		c.s.stats.idle.Add(1)
		return nil, fmt.Errorf("%w: nothing for %v", errIdle, c.s.cfg.IdleTimeout)
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	bounded, raw := c.authenticating()
	if raw {
		return c.readToken(n)
	}
	if n < 8 || n > maxRequestBytes || (bounded && n > maxSASLFrame) {
		return nil, fmt.Errorf("a request frame of %d bytes", n)
	}
	body, w, err := c.readBudgeted(n)
	if err != nil {
		return nil, err
	}
	r, err := parseRequest(body)
	if err != nil {
		c.s.budget.Release(w)
		return nil, err
	}
	r.size = w
	return r, nil
}

// take takes a frame of n bytes from the budget, waiting with the
// server's context while it is spent, and returns what it took, to be
// given back: a frame larger than the whole budget takes all of it, and
// so is read alone.
func (s *Server) take(n int64) (int64, error) {
	w := min(n, s.cfg.MaxRequestBytes)
	return w, s.budget.Acquire(s.ctx, w)
}

// readBudgeted takes a frame of n bytes from the budget (take) and reads
// it (readFrame). w is what it took, to be given back; a failed read has
// given it back already.
func (c *conn) readBudgeted(n int32) (body []byte, w int64, err error) {
	if w, err = c.s.take(int64(n)); err != nil {
		return nil, 0, err
	}
	if body, err = c.readFrame(int(n)); err != nil {
		c.s.budget.Release(w)
		return nil, 0, err
	}
	return body, w, nil
}

// readFrame reads the n bytes of a frame within FrameTimeout. Its buffer
// grows as the bytes arrive, each time 4 times larger, the sizes chosen
// (n/4^k) so that the last step is to n exactly from at most n/4: a
// client that declares a large frame and sends little makes the broker
// hold little, and a whole frame costs at most n plus a quarter while its
// buffer grows.
func (c *conn) readFrame(n int) ([]byte, error) {
	shift := 0
	for n>>shift > firstFrameBuffer {
		shift += 2
	}
	buf := make([]byte, n>>shift)
	c.setReadDeadline(time.Now().Add(c.s.cfg.FrameTimeout)) // real time: a deadline for the kernel's clock
	for got := 0; got < n; {
		if got == len(buf) {
			shift -= 2
			grown := make([]byte, n>>shift)
			copy(grown, buf)
			buf = grown
		}
		k, err := c.nc.Read(buf[got:])
		got += k
		if err != nil && got < n {
			if isTimeout(err) && !c.isStopped() {
				c.s.stats.slowFrames.Add(1)
				return nil, fmt.Errorf("%d of a frame's %d bytes arrived within %v", got, n, c.s.cfg.FrameTimeout)
			}
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return buf, nil
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
