package cluster_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/diskless-go/diskless/cluster"
)

const bound = 10 * time.Second

func newTCPWith(t *testing.T, opts cluster.TCPOptions) *cluster.TCP {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = zaptest.NewLogger(t)
	}
	tr, err := cluster.NewTCP(&opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, tr.Close()) })
	return tr
}

func TestNewTCPOptions(t *testing.T) {
	tr, err := cluster.NewTCP(nil)
	require.NoError(t, err)
	require.NoError(t, tr.Close())
	for _, tc := range []struct {
		opts  cluster.TCPOptions
		field string
	}{
		{cluster.TCPOptions{DialTimeout: -1}, "DialTimeout"},
		{cluster.TCPOptions{MaxFrameBytes: -1}, "MaxFrameBytes"},
		{cluster.TCPOptions{MaxFrameBytes: 10}, "MaxFrameBytes"},
		{cluster.TCPOptions{MaxFrameBytes: 1 << 32}, "MaxFrameBytes"},
	} {
		_, err := cluster.NewTCP(&tc.opts)
		require.ErrorContains(t, err, tc.field)
	}
}

// await calls wait, failing the test if it does not return within bound.
func await(t *testing.T, wait func() ([]byte, error)) ([]byte, error) {
	t.Helper()
	type res struct {
		b   []byte
		err error
	}
	ch := make(chan res, 1)
	go func() {
		b, err := wait()
		ch <- res{b, err}
	}()
	select {
	case r := <-ch:
		return r.b, r.err
	case <-time.After(bound):
		t.Fatalf("wait did not return within %v", bound)
		return nil, nil
	}
}

func echo(_ context.Context, _ int, _ string, body []byte) func() []byte {
	return func() []byte { return body }
}

func TestTCPCallTooLarge(t *testing.T) {
	tr := newTCPWith(t, cluster.TCPOptions{MaxFrameBytes: 1024})
	srv, err := tr.Listen("127.0.0.1:0", echo)
	require.NoError(t, err)
	defer srv.Close()
	_, err = await(t, tr.Call(t.Context(), srv.Addr(), 0, "m", make([]byte, 1024)))
	require.ErrorIs(t, err, cluster.ErrFrameTooLarge)
	b, err := await(t, tr.Call(t.Context(), srv.Addr(), 0, "m", make([]byte, 1024-22-1)))
	require.NoError(t, err, "the largest frame that fits")
	require.Len(t, b, 1024-22-1)
	_, err = await(t, tr.Call(t.Context(), srv.Addr(), -1, "m", nil))
	require.Error(t, err)
	_, err = await(t, tr.Call(t.Context(), srv.Addr(), 0, string(make([]byte, 1<<16)), nil))
	require.Error(t, err)
}

func TestTCPAnswerTooLarge(t *testing.T) {
	big := func(context.Context, int, string, []byte) func() []byte {
		return func() []byte { return make([]byte, 2000) }
	}
	// The server refuses to send it.
	small := newTCPWith(t, cluster.TCPOptions{MaxFrameBytes: 1024})
	srv, err := small.Listen("127.0.0.1:0", big)
	require.NoError(t, err)
	defer srv.Close()
	client := newTCPWith(t, cluster.TCPOptions{})
	_, err = await(t, client.Call(t.Context(), srv.Addr(), 0, "m", nil))
	require.ErrorIs(t, err, cluster.ErrConnectionLost)

	// The client refuses to read it.
	srv2, err := client.Listen("127.0.0.1:0", big)
	require.NoError(t, err)
	defer srv2.Close()
	_, err = await(t, small.Call(t.Context(), srv2.Addr(), 0, "m", nil))
	require.ErrorIs(t, err, cluster.ErrConnectionLost)
	require.ErrorIs(t, err, cluster.ErrFrameTooLarge)
}

// TestTCPServerRefuses sends the Server frames it must refuse, by hand:
// it closes the connection.
func TestTCPServerRefuses(t *testing.T) {
	tr := newTCPWith(t, cluster.TCPOptions{MaxFrameBytes: 1024})
	srv, err := tr.Listen("127.0.0.1:0", echo)
	require.NoError(t, err)
	defer srv.Close()
	for name, frame := range map[string][]byte{
		"too large":             binary.BigEndian.AppendUint32(nil, 1025),
		"shorter than a header": {0, 0, 0, 3, 1, 2, 3},
		"method past the end":   append(binary.BigEndian.AppendUint32(nil, 22), append(make([]byte, 20), 0, 1)...),
	} {
		t.Run(name, func(t *testing.T) {
			nc, err := net.Dial("tcp", srv.Addr())
			require.NoError(t, err)
			defer nc.Close()
			_, err = nc.Write(frame)
			require.NoError(t, err)
			require.NoError(t, nc.SetReadDeadline(time.Now().Add(bound)))
			_, err = nc.Read(make([]byte, 1))
			// io.EOF, or a reset if the Server closed with bytes unread.
			var ne net.Error
			require.Error(t, err, "the Server should close the connection")
			require.False(t, errors.As(err, &ne) && ne.Timeout(), "the Server did not close the connection: %v", err)
		})
	}
}

// TestTCPServerWire speaks to the Server by hand: the frames of the
// package doc.
func TestTCPServerWire(t *testing.T) {
	type call struct {
		shard    int
		method   string
		body     string
		deadline time.Time
		ok       bool
	}
	calls := make(chan call, 2)
	tr := newTCPWith(t, cluster.TCPOptions{})
	srv, err := tr.Listen("127.0.0.1:0", func(ctx context.Context, shard int, method string, body []byte) func() []byte {
		d, ok := ctx.Deadline()
		calls <- call{shard, method, string(body), d, ok}
		return func() []byte { return append([]byte("re:"), body...) }
	})
	require.NoError(t, err)
	defer srv.Close()
	nc, err := net.Dial("tcp", srv.Addr())
	require.NoError(t, err)
	defer nc.Close()

	deadline := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	var req []byte
	for i, d := range []int64{0, deadline.UnixNano()} {
		body := []byte{'a' + byte(i)}
		req = binary.BigEndian.AppendUint32(req, uint32(22+len("topics")+len(body)))
		req = binary.BigEndian.AppendUint64(req, uint64(100+i))
		req = binary.BigEndian.AppendUint32(req, uint32(7+i))
		req = binary.BigEndian.AppendUint64(req, uint64(d))
		req = binary.BigEndian.AppendUint16(req, uint16(len("topics")))
		req = append(req, "topics"...)
		req = append(req, body...)
	}
	_, err = nc.Write(req)
	require.NoError(t, err)

	got := []call{<-calls, <-calls}
	require.Equal(t, call{shard: 7, method: "topics", body: "a"}, got[0])
	require.Equal(t, 8, got[1].shard)
	require.True(t, got[1].ok)
	require.True(t, deadline.Equal(got[1].deadline), "deadline %v, want %v", got[1].deadline, deadline)

	require.NoError(t, nc.SetReadDeadline(time.Now().Add(bound)))
	answers := map[uint64]string{}
	br := bufio.NewReader(nc)
	for range 2 {
		var hdr [12]byte
		_, err := io.ReadFull(br, hdr[:])
		require.NoError(t, err)
		n := binary.BigEndian.Uint32(hdr[:])
		body := make([]byte, n-8)
		_, err = io.ReadFull(br, body)
		require.NoError(t, err)
		answers[binary.BigEndian.Uint64(hdr[4:])] = string(body)
	}
	require.Equal(t, map[uint64]string{100: "re:a", 101: "re:b"}, answers)
}

// TestTCPClientWire serves the TCP transport's calls by hand: one
// connection for all of them, each answered by its id whatever the order,
// and an answer nobody waits for is dropped.
func TestTCPClientWire(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	const n = 10
	accepted := make(chan int, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		conns := 0
		defer func() { accepted <- conns }()
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		conns++
		defer nc.Close()
		br := bufio.NewReader(nc)
		type req struct {
			id   uint64
			body []byte
		}
		var reqs []req
		for range n {
			var hdr [4]byte
			if _, err := io.ReadFull(br, hdr[:]); err != nil {
				return
			}
			frame := make([]byte, binary.BigEndian.Uint32(hdr[:]))
			if _, err := io.ReadFull(br, frame); err != nil {
				return
			}
			mlen := int(binary.BigEndian.Uint16(frame[20:]))
			reqs = append(reqs, req{binary.BigEndian.Uint64(frame), frame[22+mlen:]})
		}
		var out []byte
		out = binary.BigEndian.AppendUint32(out, 8+3) // an id nobody waits for
		out = binary.BigEndian.AppendUint64(out, 1<<60)
		out = append(out, "???"...)
		for i := len(reqs) - 1; i >= 0; i-- { // answered in reverse
			out = binary.BigEndian.AppendUint32(out, uint32(8+len(reqs[i].body)))
			out = binary.BigEndian.AppendUint64(out, reqs[i].id)
			out = append(out, reqs[i].body...)
		}
		nc.Write(out)
		// Keep the connection open until the client closes it, and
		// count whatever else connects meanwhile.
		ln.(*net.TCPListener).SetDeadline(time.Now().Add(100 * time.Millisecond))
		if nc2, err := ln.Accept(); err == nil {
			conns++
			nc2.Close()
		}
	})

	tr := newTCPWith(t, cluster.TCPOptions{})
	var waits []func() ([]byte, error)
	for i := range n {
		waits = append(waits, tr.Call(t.Context(), ln.Addr().String(), i, "m", []byte{byte(i)}))
	}
	for i, wait := range waits {
		b, err := await(t, wait)
		require.NoError(t, err)
		require.Equal(t, []byte{byte(i)}, b)
	}
	require.Equal(t, 1, <-accepted, "connections accepted")
}
