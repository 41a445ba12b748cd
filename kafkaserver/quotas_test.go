package kafkaserver

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"golang.org/x/sync/semaphore"

	"github.com/diskless-go/diskless/clock"
	"github.com/diskless-go/diskless/quota"
)

// TestWindowedRate checks the rate against Kafka's arithmetic: the sum
// of the samples over at least 10 whole windows, samples obsolete after
// 11 windows without a value, and the throttle time (O-T)/T*W.
func TestWindowedRate(t *testing.T) {
	t.Run("first value is measured over ten windows", func(t *testing.T) {
		var r windowedRate
		r.record(1000, 0)
		require.Equal(t, int64(10_000), r.windowSize(0))
		require.InDelta(t, 100, r.measure(0), 1e-9)
		// 2.5 s later: still ten whole windows of time counted, plus the
		// half of the current one.
		require.Equal(t, int64(10_500), r.windowSize(2500))
	})
	t.Run("a steady rate is measured as itself", func(t *testing.T) {
		var r windowedRate
		for ms := int64(0); ms < 30_000; ms += 100 {
			r.record(10, ms) // 100 a second
		}
		require.InDelta(t, 100, r.measure(30_000), 2)
		require.LessOrEqual(t, len(r.samples), quotaSamples+1)
	})
	t.Run("samples are obsolete after eleven windows without a value", func(t *testing.T) {
		var r windowedRate
		r.record(1000, 0)
		require.Greater(t, r.measure(10_999), 0.0)
		require.Zero(t, r.measure(11_000))
	})
	t.Run("throttle time", func(t *testing.T) {
		var r windowedRate
		r.record(1000, 0) // 100 a second over 10 s
		require.Zero(t, r.throttle(r.measure(0), 100, 0), "at the bound")
		require.Equal(t, 10*time.Second, r.throttle(r.measure(0), 50, 0), "(100-50)/50 * 10 s")
		require.Equal(t, 2500*time.Millisecond, r.throttle(r.measure(0), 80, 0), "(100-80)/80 * 10 s")
	})
}

// simulateProducer runs a producer of size-byte requests against
// q's produce quota for user and client from start for d, sending as fast
// as it may (every gap apart, or after its throttle, as a client that
// honours throttle_time_ms does), and returns the bytes it sent in the
// last half.
func simulateProducer(q *clientQuotas, user, client string, size int64, gap time.Duration, start time.Time, d time.Duration) (throttled int, lastHalf int64) {
	now := start
	half := start.Add(d / 2)
	for now.Before(start.Add(d)) {
		wait := q.record(quota.ProducerByteRate, user, client, float64(size), now)
		if !now.Before(half) {
			lastHalf += size
		}
		if wait > 0 {
			throttled++
		}
		now = now.Add(max(wait, gap))
	}
	return throttled, lastHalf
}

// TestThrottleConverges: a producer five times faster than its quota,
// waiting out each throttle, is held to the quota within 10% over 30 s
// (Kafka's windows make the achieved rate swing a few percent around
// the quota as samples are recycled: 0.93 of it from 30 s to 60 s, 1.02
// from 60 s to 120 s); one without a quota is not throttled. Time is
// simulated.
func TestThrottleConverges(t *testing.T) {
	const limit = 1 << 20 // 1 MiB/s
	qs := []quota.Quota{{Entity: quota.Entity{User: quota.Component{Set: true, Name: "a"}}, Values: map[string]float64{quota.ProducerByteRate: limit}}}
	q, err := newClientQuotas(t.Context(), clock.System, staticQuotas(qs), zap.NewNop())
	require.NoError(t, err)
	start := time.Unix(1_000_000, 0)
	// 100 KiB every 20 ms: 5 MiB/s.
	throttled, bytes := simulateProducer(q, "a", "app", 100<<10, 20*time.Millisecond, start, 60*time.Second)
	require.Greater(t, throttled, 10)
	t.Logf("achieved %.0f B/s against %d, throttled %d times", float64(bytes)/30, limit, throttled)
	require.InEpsilon(t, float64(limit), float64(bytes)/30, 0.10, "bytes a second over the last 30 s")

	throttled, bytes = simulateProducer(q, "b", "app", 100<<10, 20*time.Millisecond, start, 60*time.Second)
	require.Zero(t, throttled)
	require.InEpsilon(t, float64(100<<10)/0.020, float64(bytes)/30, 0.01, "every request sent at once")
}

// TestRequestThrottleCapped: the request-time throttle is at most one
// window, the byte-rate one is not capped.
func TestRequestThrottleCapped(t *testing.T) {
	all := quota.Entity{User: quota.Component{Set: true, Default: true}}
	q, err := newClientQuotas(t.Context(), clock.System, staticQuotas([]quota.Quota{{Entity: all, Values: map[string]float64{
		quota.RequestPercentage: 1, quota.ProducerByteRate: 1,
	}}}), zap.NewNop())
	require.NoError(t, err)
	now := time.Unix(1_000_000, 0)
	require.Equal(t, quotaWindow, q.record(quota.RequestPercentage, "a", "x", 500, now), "5 s of request time is 50% over 10 s")
	require.Greater(t, q.record(quota.ProducerByteRate, "a", "x", 1000, now), time.Minute)
}

// TestQuotaRefresh: the quotas are read again as the source changes, and
// an older version is not taken.
func TestQuotaRefresh(t *testing.T) {
	state := quotaState{Version: 3, Changed: true}
	src := func(_ context.Context, since int64) (quotaState, error) {
		st := state
		st.Changed = st.Version != since
		return st, nil
	}
	q, err := newClientQuotas(t.Context(), clock.System, src, zap.NewNop())
	require.NoError(t, err)
	require.False(t, q.enabled())
	state = quotaState{Version: 4, Quotas: []quota.Quota{{Entity: quota.Entity{ClientID: quota.Component{Set: true, Default: true}}, Values: map[string]float64{quota.ConsumerByteRate: 10}}}}
	require.NoError(t, q.refresh(t.Context()))
	require.True(t, q.enabled())
	require.Equal(t, int64(4), q.version.Load())
	state = quotaState{Version: 2}
	require.NoError(t, q.refresh(t.Context()))
	require.True(t, q.enabled(), "an older state is not taken")
}

// pipeServer is a Server with no Broker behind it, enough to serve
// ApiVersions on a connection over net.Pipe, with the quotas qs: for
// tests in a synctest bubble.
func pipeServer(t *testing.T, qs []quota.Quota) (*Server, net.Conn) {
	s := &Server{
		cfg:    serverConfig{MaxInFlightRequests: 8, MaxRequestBytes: 1 << 20, IdleTimeout: time.Hour, FrameTimeout: time.Hour},
		log:    zap.NewNop(),
		budget: semaphore.NewWeighted(1 << 20),
		clock:  clock.System,
	}
	s.ctx, s.cancel = context.WithCancel(context.WithoutCancel(t.Context()))
	var err error
	s.quotas, err = newClientQuotas(t.Context(), s.clock, staticQuotas(qs), zap.NewNop())
	require.NoError(t, err)
	client, server := net.Pipe()
	c := &conn{s: s, nc: server, remote: "pipe", ip: "127.0.0.1", host: "127.0.0.1"}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.serve()
	}()
	t.Cleanup(func() {
		s.cancel()
		client.Close()
		<-done
	})
	s.mu.conns = map[*conn]struct{}{c: {}}
	return s, client
}

// connOf returns the one connection of a pipeServer.
func connOf(s *Server) *conn {
	for c := range s.mu.conns {
		return c
	}
	return nil
}

// askAPIVersions sends an ApiVersions request of version v on c and reads
// its answer.
func askAPIVersions(t *testing.T, c net.Conn, v int16, corr int32) *kmsg.ApiVersionsResponse {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = v
	frame := binary.BigEndian.AppendUint32(nil, 0)
	frame = binary.BigEndian.AppendUint16(frame, uint16(req.Key()))
	frame = binary.BigEndian.AppendUint16(frame, uint16(v))
	frame = binary.BigEndian.AppendUint32(frame, uint32(corr))
	frame = binary.BigEndian.AppendUint16(frame, 0xffff) // null client ID
	if req.IsFlexible() {
		frame = append(frame, 0)
	}
	frame = req.AppendTo(frame)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	_, err := c.Write(frame)
	require.NoError(t, err)
	var size [4]byte
	_, err = io.ReadFull(c, size[:])
	require.NoError(t, err)
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err = io.ReadFull(c, body)
	require.NoError(t, err)
	require.Equal(t, corr, int32(binary.BigEndian.Uint32(body)))
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	require.NoError(t, resp.ReadFrom(body[4:])) // ApiVersions answers with header v0
	return resp
}

// TestMuteDelaysNextRead: a muted connection's next request is read only
// when the mute ends, on the server's clock; an unmuted one at once.
func TestMuteDelaysNextRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, cl := pipeServer(t, nil)
		start := time.Now()
		askAPIVersions(t, cl, 3, 1)
		require.Zero(t, time.Since(start), "not muted: at once")

		connOf(s).mute(time.Now().Add(300 * time.Millisecond))
		start = time.Now()
		askAPIVersions(t, cl, 3, 2)
		require.Equal(t, 300*time.Millisecond, time.Since(start))
	})
}

// TestThrottleResponse: a request over its client's quota is answered at
// once with the throttle time, and the connection is muted for it (the
// next request waits); a client of a version before KIP-219 gets its
// answer only after the throttle time. The throttle is counted.
func TestThrottleResponse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		all := quota.Entity{User: quota.Component{Set: true, Default: true}}
		s, cl := pipeServer(t, []quota.Quota{{Entity: all, Values: map[string]float64{quota.RequestPercentage: 1}}})
		c := connOf(s)
		id := &identity{rc: RequestContext{Principal: Anonymous}}

		// A request that took 500 ms: 50 percent-seconds over 10 s is 5%,
		// against a quota of 1%: (5-1)/1 * 10 s, capped at 1 s.
		r := &request{kreq: &kmsg.ApiVersionsRequest{Version: 3}}
		r.use.began = time.Now().Add(-500 * time.Millisecond)
		resp := &kmsg.ApiVersionsResponse{Version: 3}
		start := time.Now()
		c.throttle(id, r, resp)
		require.Zero(t, time.Since(start), "answered at once: the client waits")
		require.Equal(t, int32(1000), resp.ThrottleMillis)
		require.Equal(t, start.Add(time.Second).UnixNano(), c.mutedUntil.Load())
		require.Equal(t, int64(1), s.stats.throttled.Load())
		require.Equal(t, int64(1000), s.stats.throttledMillis.Load())

		got := askAPIVersions(t, cl, 3, 1)
		require.Equal(t, time.Second, time.Since(start), "muted: read after the throttle")
		require.Zero(t, got.ErrorCode)

		// Version 0 has no throttle time: the answer is held back.
		r = &request{kreq: &kmsg.ApiVersionsRequest{Version: 0}}
		r.use.began = time.Now().Add(-500 * time.Millisecond)
		start = time.Now()
		c.throttle(id, r, &kmsg.ApiVersionsResponse{Version: 0})
		require.Equal(t, time.Second, time.Since(start))
	})
}
