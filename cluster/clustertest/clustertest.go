// Package clustertest holds the conformance suites of package cluster's
// interfaces: every implementation of cluster.Transport, TCP or one an
// embedding program writes over its own RPC, must pass RunTransport, and
// every cluster.Backend (etcdcluster's, memcluster's) RunBackend.
package clustertest

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/cluster"
)

// bound is how long the suite waits for anything that should happen at
// once: generous, so that a loaded machine does not fail it; only a hang
// does.
const bound = 10 * time.Second

// RunTransport runs the conformance suite against the Transport that
// newTransport returns: a new one each time it is called, which the suite
// closes. A test calls it from its own Test function:
//
//	func TestTransport(t *testing.T) {
//		clustertest.RunTransport(t, func(t *testing.T) cluster.Transport { ... })
//	}
//
// The suite listens on 127.0.0.1 with port 0, and checks that:
//   - a call gets its answer, with shard, method and body as sent;
//   - many concurrent calls get their own answers;
//   - 1000 calls sent one after another from one goroutine reach the
//     Handler in that order, though it answers them out of order;
//   - the Handler's ctx carries the caller's deadline (or none) and ends
//     at it; wait returns an error wrapping ctx.Err() promptly when the
//     caller's ctx ends, and the transport still serves calls after;
//   - a call to an address nobody serves, to a closed Server, or waiting
//     on one when it closes fails without hanging, and a Server started
//     again on the same address serves the next call;
//   - 8 MiB bodies go both ways, and empty ones too;
//   - calls after Close fail, and Close may be called twice.
func RunTransport(t *testing.T, newTransport func(t *testing.T) cluster.Transport) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, func(*testing.T) cluster.Transport)
	}{
		{"CallAndAnswer", testCallAndAnswer},
		{"Concurrent", testConcurrent},
		{"Order", testOrder},
		{"Deadline", testDeadline},
		{"DeadlineExpires", testDeadlineExpires},
		{"Cancel", testCancel},
		{"NobodyThere", testNobodyThere},
		{"ServerGone", testServerGone},
		{"ServerGoneWhileWaiting", testServerGoneWhileWaiting},
		{"LargeBody", testLargeBody},
		{"EmptyBody", testEmptyBody},
		{"Closed", testClosed},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newTransport) })
	}
}

// open returns a new transport, closed when the test ends.
func open(t *testing.T, newTransport func(*testing.T) cluster.Transport) cluster.Transport {
	t.Helper()
	tr := newTransport(t)
	require.NotNil(t, tr)
	t.Cleanup(func() { require.NoError(t, tr.Close()) })
	return tr
}

// listen starts a Server for h on a transport of its own, closed when the
// test ends.
func listen(t *testing.T, newTransport func(*testing.T) cluster.Transport, addr string, h cluster.Handler) cluster.Server {
	t.Helper()
	srv, err := open(t, newTransport).Listen(addr, h)
	require.NoError(t, err)
	require.NotEmpty(t, srv.Addr())
	t.Cleanup(func() { srv.Close() })
	return srv
}

// pair starts a Server for h and returns a client transport and the
// Server's address. The client closes first when the test ends.
func pair(t *testing.T, newTransport func(*testing.T) cluster.Transport, h cluster.Handler) (cluster.Transport, string) {
	t.Helper()
	srv := listen(t, newTransport, "127.0.0.1:0", h)
	return open(t, newTransport), srv.Addr()
}

// await calls wait and fails the test if it does not return within bound.
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
	case <-time.After(bound): // real time: a bound on a hang of real transports, which fails the test, never a measurement
		t.Fatalf("wait did not return within %v", bound)
		return nil, nil
	}
}

// recv receives from ch, failing the test if nothing comes within bound.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(bound): // real time: a bound on a hang of real transports, which fails the test, never a measurement
		t.Fatalf("nothing came within %v", bound)
		var zero T
		return zero
	}
}

// echo answers shard, method and body, in that order.
func echo(_ context.Context, shard int, method string, body []byte) func() []byte {
	return func() []byte { return echoed(shard, method, body) }
}

func echoed(shard int, method string, body []byte) []byte {
	return fmt.Appendf(nil, "%d|%s|%s", shard, method, body)
}

func testCallAndAnswer(t *testing.T, newTransport func(*testing.T) cluster.Transport) {
	client, addr := pair(t, newTransport, echo)
	for i := range 3 {
		b, err := await(t, client.Call(t.Context(), addr, 7+i, "hello", []byte("world")))
		require.NoError(t, err)
		require.Equal(t, echoed(7+i, "hello", []byte("world")), b)
	}
}

func testConcurrent(t *testing.T, newTransport func(*testing.T) cluster.Transport) {
	const goroutines, calls = 16, 50
	var slow sync.Map // answers delayed at random, so they finish out of order
	h := func(ctx context.Context, shard int, method string, body []byte) func() []byte {
		return func() []byte {
			if _, ok := slow.Load(string(body)); ok {
				time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond) // real time: jitter that reorders real transport calls
			}
			return echoed(shard, method, body)
		}
	}
	client, addr := pair(t, newTransport, h)
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*calls)
	for g := range goroutines {
		wg.Go(func() {
			for i := range calls {
				method, body := fmt.Sprintf("m%d", g), fmt.Appendf(nil, "g%d-call%d", g, i)
				if rand.IntN(2) == 0 {
					slow.Store(string(body), true)
				}
				b, err := client.Call(t.Context(), addr, g, method, body)()
				switch {
				case err != nil:
					errs <- err
				case !bytes.Equal(b, echoed(g, method, body)):
					errs <- fmt.Errorf("call %s got %q", body, b)
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	recv(t, done)
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

func testOrder(t *testing.T, newTransport func(*testing.T) cluster.Transport) {
	const n = 1000
	var (
		mu   sync.Mutex
		seen []uint32
	)
	h := func(_ context.Context, _ int, _ string, body []byte) func() []byte {
		mu.Lock()
		seen = append(seen, binary.BigEndian.Uint32(body))
		mu.Unlock()
		body = bytes.Clone(body)
		return func() []byte {
			time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond) // real time: jitter that reorders real transport calls
			return body
		}
	}
	client, addr := pair(t, newTransport, h)
	waits := make([]func() ([]byte, error), n)
	for i := range n {
		waits[i] = client.Call(t.Context(), addr, 0, "order", binary.BigEndian.AppendUint32(nil, uint32(i)))
	}
	for i, wait := range waits {
		b, err := await(t, wait)
		require.NoError(t, err, "call %d", i)
		require.Equal(t, binary.BigEndian.AppendUint32(nil, uint32(i)), b, "call %d", i)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, n)
	for i, v := range seen {
		require.Equal(t, uint32(i), v, "the Handler's call %d", i)
	}
}

func testDeadline(t *testing.T, newTransport func(*testing.T) cluster.Transport) {
	type dl struct {
		at time.Time
		ok bool
	}
	got := make(chan dl, 1)
	h := func(ctx context.Context, _ int, _ string, _ []byte) func() []byte {
		at, ok := ctx.Deadline()
		got <- dl{at, ok}
		return func() []byte { return nil }
	}
	client, addr := pair(t, newTransport, h)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	want, _ := ctx.Deadline()
	_, err := await(t, client.Call(ctx, addr, 0, "deadline", nil))
	require.NoError(t, err)
	d := recv(t, got)
	require.True(t, d.ok, "the Handler's ctx has no deadline")
	require.WithinDuration(t, want, d.at, time.Second)

	ctx, cancel = context.WithCancel(t.Context())
	defer cancel()
	_, err = await(t, client.Call(ctx, addr, 0, "no-deadline", nil))
	require.NoError(t, err)
	d = recv(t, got)
	require.False(t, d.ok, "the Handler's ctx has a deadline (%v) the caller's had not", d.at)
}

func testDeadlineExpires(t *testing.T, newTransport func(*testing.T) cluster.Transport) {
	ended := make(chan error, 1)
	release := make(chan struct{})
	h := func(ctx context.Context, _ int, _ string, _ []byte) func() []byte {
		return func() []byte {
			select {
			case <-ctx.Done():
				ended <- ctx.Err()
			case <-time.After(bound): // real time: a bound on a hang of real transports, which fails the test, never a measurement
				ended <- nil
			}
			<-release // no answer, so that the caller's wait sees its deadline
			return nil
		}
	}
	client, addr := pair(t, newTransport, h)
	defer close(release) // before the Server's Close, which waits for the answer
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err := await(t, client.Call(ctx, addr, 0, "slow", nil))
	require.Error(t, err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, recv(t, ended), context.DeadlineExceeded, "the Handler's ctx did not end at the deadline")
}

func testCancel(t *testing.T, newTransport func(*testing.T) cluster.Transport) {
	called := make(chan struct{}, 1)
	release := make(chan struct{})
	h := func(ctx context.Context, _ int, method string, body []byte) func() []byte {
		if method != "block" {
			return func() []byte { return body }
		}
		called <- struct{}{}
		return func() []byte {
			<-release
			return body
		}
	}
	client, addr := pair(t, newTransport, h)
	defer close(release) // before the Server's Close, which waits for the answer

	ctx, cancel := context.WithCancel(t.Context())
	wait := client.Call(ctx, addr, 0, "block", []byte("x"))
	recv(t, called)
	cancel()
	_, err := await(t, wait)
	require.Error(t, err)
	require.ErrorIs(t, err, context.Canceled)

	// The transport still serves calls.
	b, err := await(t, client.Call(t.Context(), addr, 0, "after", []byte("y")))
	require.NoError(t, err)
	require.Equal(t, []byte("y"), b)

	// A ctx that ended already.
	_, err = await(t, client.Call(ctx, addr, 0, "after", []byte("z")))
	require.ErrorIs(t, err, context.Canceled)
}

// freeAddr returns a loopback address that nobody listens on (as far as
// anybody can know).
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

func testNobodyThere(t *testing.T, newTransport func(*testing.T) cluster.Transport) {
	client := open(t, newTransport)
	addr := freeAddr(t)
	for range 2 {
		_, err := await(t, client.Call(t.Context(), addr, 0, "anyone", nil))
		require.Error(t, err)
	}
}

func testServerGone(t *testing.T, newTransport func(*testing.T) cluster.Transport) {
	srvTransport := open(t, newTransport)
	srv, err := srvTransport.Listen("127.0.0.1:0", echo)
	require.NoError(t, err)
	addr := srv.Addr()
	client := open(t, newTransport)

	_, err = await(t, client.Call(t.Context(), addr, 0, "first", nil))
	require.NoError(t, err)
	require.NoError(t, srv.Close())
	require.NoError(t, srv.Close(), "a second Close")

	_, err = await(t, client.Call(t.Context(), addr, 0, "gone", nil))
	require.Error(t, err)

	srv, err = srvTransport.Listen(addr, echo)
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	b, err := await(t, client.Call(t.Context(), addr, 1, "again", []byte("b")))
	require.NoError(t, err)
	require.Equal(t, echoed(1, "again", []byte("b")), b)
}

func testServerGoneWhileWaiting(t *testing.T, newTransport func(*testing.T) cluster.Transport) {
	called := make(chan struct{}, 1)
	release := make(chan struct{})
	h := func(context.Context, int, string, []byte) func() []byte {
		called <- struct{}{}
		return func() []byte {
			<-release
			return nil
		}
	}
	srv := listen(t, newTransport, "127.0.0.1:0", h)
	client := open(t, newTransport)
	wait := client.Call(t.Context(), srv.Addr(), 0, "block", nil)
	recv(t, called)

	closed := make(chan error, 1)
	go func() { closed <- srv.Close() }() // returns once the answer does
	_, err := await(t, wait)
	require.Error(t, err, "a call waiting on a Server that closed")
	close(release)
	require.NoError(t, recv(t, closed))
}

func testLargeBody(t *testing.T, newTransport func(*testing.T) cluster.Transport) {
	const size = 8 << 20
	h := func(_ context.Context, _ int, _ string, body []byte) func() []byte {
		out := make([]byte, len(body))
		for i, c := range body {
			out[len(out)-1-i] = ^c
		}
		return func() []byte { return out }
	}
	client, addr := pair(t, newTransport, h)
	body := make([]byte, size)
	for i := range body {
		body[i] = byte(rand.Uint32())
	}
	b, err := await(t, client.Call(t.Context(), addr, 0, "large", body))
	require.NoError(t, err)
	require.Len(t, b, size)
	for i := range b {
		if b[i] != ^body[size-1-i] {
			t.Fatalf("byte %d of the answer is %#x, want %#x", i, b[i], ^body[size-1-i])
		}
	}
}

func testEmptyBody(t *testing.T, newTransport func(*testing.T) cluster.Transport) {
	lens := make(chan int, 1)
	h := func(_ context.Context, _ int, method string, body []byte) func() []byte {
		lens <- len(body)
		return func() []byte {
			if method == "answer" {
				return []byte("answer")
			}
			return nil
		}
	}
	client, addr := pair(t, newTransport, h)
	for _, method := range []string{"", "nothing", "answer"} {
		b, err := await(t, client.Call(t.Context(), addr, 0, method, nil))
		require.NoError(t, err, method)
		require.Zero(t, recv(t, lens), method)
		if method == "answer" {
			require.Equal(t, []byte("answer"), b)
		} else {
			require.Empty(t, b, method)
		}
	}
	b, err := await(t, client.Call(t.Context(), addr, 0, "nothing", []byte("body")))
	require.NoError(t, err)
	require.Equal(t, 4, recv(t, lens))
	require.Empty(t, b)
}

func testClosed(t *testing.T, newTransport func(*testing.T) cluster.Transport) {
	srv := listen(t, newTransport, "127.0.0.1:0", echo)
	client := newTransport(t)
	_, err := await(t, client.Call(t.Context(), srv.Addr(), 0, "before", nil))
	require.NoError(t, err)
	require.NoError(t, client.Close())
	require.NoError(t, client.Close(), "a second Close")
	_, err = await(t, client.Call(t.Context(), srv.Addr(), 0, "after", nil))
	require.Error(t, err)
}
