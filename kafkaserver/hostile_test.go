package kafkaserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"net"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless"
)

// startServer starts a server configured by cfg, and returns it and its
// address.
func startServer(t *testing.T, cfg *Config) (*Server, string) {
	p := startBroker(t, cfg)
	return p.srv, p.addr
}

// gotAnswer sends an ApiVersions request on c and reports whether it
// was answered (false: the broker closed the connection).
func gotAnswer(t *testing.T, c net.Conn) bool {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 0
	frame := binary.BigEndian.AppendUint32(nil, 0)
	frame = binary.BigEndian.AppendUint16(frame, uint16(req.Key()))
	frame = binary.BigEndian.AppendUint16(frame, 0)
	frame = binary.BigEndian.AppendUint32(frame, 1)
	frame = binary.BigEndian.AppendUint16(frame, 0xffff) // null client ID
	frame = req.AppendTo(frame)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	require.NoError(t, c.SetDeadline(time.Now().Add(30*time.Second)))
	if _, err := c.Write(frame); err != nil {
		return false
	}
	var size [4]byte
	_, err := io.ReadFull(c, size[:])
	return err == nil
}

// TestConnectionLimits: connections past MaxConnections, or past
// MaxConnectionsPerIP from one address, are closed at once and counted;
// the others are served.
func TestConnectionLimits(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  *Config
		max  int
	}{
		{"total", &Config{MaxConnections: 3}, 3},
		{"per IP", &Config{MaxConnectionsPerIP: 2}, 2},
		{"per IP, overridden for this address", &Config{MaxConnectionsPerIP: 1, MaxConnectionsPerIPOverrides: map[string]int{"127.0.0.1": 3}}, 3},
		{"per IP, overridden for another address", &Config{MaxConnectionsPerIP: 2, MaxConnectionsPerIPOverrides: map[string]int{"10.0.0.1": 5}}, 2},
		{"per IP, overridden by host name", &Config{MaxConnectionsPerIPOverrides: map[string]int{"localhost": 1}}, 1},
		{"per IP, overridden to none", &Config{MaxConnectionsPerIPOverrides: map[string]int{"::ffff:127.0.0.1": 0}}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, addr := startServer(t, c.cfg)
			served := 0
			for range c.max + 2 {
				nc, err := net.Dial("tcp", addr)
				require.NoError(t, err)
				defer nc.Close()
				if gotAnswer(t, nc) {
					served++
				}
			}
			require.Equal(t, c.max, served)
			require.Equal(t, int64(2), s.stats.refused.Load())
		})
	}
}

// TestConnectionOverridesInvalid: a negative override, an empty host and
// a name that resolves to nothing are refused by New, naming the field.
func TestConnectionOverridesInvalid(t *testing.T) {
	b, err := diskless.Open(t.Context(), &diskless.Config{})
	require.NoError(t, err)
	defer func() { require.NoError(t, b.Close()) }()
	for _, o := range []map[string]int{
		{"127.0.0.1": -1},
		{"": 2},
		{"no-such-host.invalid": 2},
	} {
		_, err := New(t.Context(), b, &Config{MaxConnectionsPerIPOverrides: o})
		require.ErrorContains(t, err, "Config.MaxConnectionsPerIPOverrides", "%v", o)
	}
}

// TestIdleTimeout: a connection that sends nothing for IdleTimeout is
// closed (and counted); one with a long poll under way is not.
func TestIdleTimeout(t *testing.T) {
	s, addr := startServer(t, &Config{IdleTimeout: 100 * time.Millisecond})
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	require.NoError(t, nc.SetDeadline(time.Now().Add(time.Minute)))
	_, err = nc.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "closed by the broker")
	require.Equal(t, int64(1), s.stats.idle.Load())

	// A consumer long-polling for longer than the idle timeout.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("quiet"), kgo.FetchMaxWait(time.Second), kgo.AllowAutoTopicCreation())
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	fs := cl.PollFetches(ctx)
	for _, e := range fs.Errors() {
		require.ErrorIs(t, e.Err, context.DeadlineExceeded, "only the poll's own end")
	}
}

// TestFrameMemory: frames declared at 100 MiB on 20 connections make the
// broker hold what arrived, not what was declared; together they hold at
// most MaxRequestBytes (the others wait); a frame not whole within
// FrameTimeout closes its connection.
func TestFrameMemory(t *testing.T) {
	const declared = maxRequestBytes
	s, addr := startServer(t, &Config{FrameTimeout: time.Second})
	head := func() []byte { // a frame's size and a header: ApiVersions v0
		b := binary.BigEndian.AppendUint32(nil, declared)
		b = binary.BigEndian.AppendUint16(b, 18)
		b = binary.BigEndian.AppendUint16(b, 0)
		return binary.BigEndian.AppendUint32(b, 1)
	}
	zeros := make([]byte, declared) // the senders' bytes, before the baseline

	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := int64(ms.HeapInuse)
	heap := func() int64 {
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapInuse) - base
	}

	// Almost nothing: the declared sizes are taken from the budget, one
	// frame's at a time, but no memory.
	var conns []net.Conn
	for range 20 {
		nc, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		conns = append(conns, nc)
		_, err = nc.Write(head())
		require.NoError(t, err)
	}
	for s.budget.TryAcquire(1) { // the first frame takes the whole budget
		s.budget.Release(1)
		runtime.Gosched()
	}
	grew := heap()
	t.Logf("20 frames of 100 MiB declared, 8 bytes sent: heap +%d KiB", grew>>10)
	require.Less(t, grew, int64(8<<20), "declared bytes are not allocated")
	for _, nc := range conns {
		nc.Close()
	}
	for !s.budget.TryAcquire(s.cfg.MaxRequestBytes) { // every frame given back
		runtime.Gosched()
	}
	s.budget.Release(s.cfg.MaxRequestBytes)

	// All but a byte: one frame at a time is read, the others wait.
	slow := s.stats.slowFrames.Load()
	var peak int64
	var wg sync.WaitGroup
	for range 20 {
		nc, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer nc.Close()
		wg.Go(func() {
			if _, err := nc.Write(head()); err != nil {
				return
			}
			_, _ = nc.Write(zeros[:declared-8-1]) // fails once the broker gives up on it
		})
	}
	for s.stats.slowFrames.Load() < slow+2 {
		runtime.GC() // what is live, not garbage the collector has not reached
		peak = max(peak, heap())
		time.Sleep(5 * time.Millisecond) // sampling, not waiting for a condition
	}
	t.Logf("20 frames of 100 MiB, all but a byte sent: heap peak +%d MiB", peak>>20)
	require.Less(t, peak, int64(s.cfg.MaxRequestBytes+s.cfg.MaxRequestBytes/4+16<<20), "the budget bounds the frames held together")
	// The frames are read as their bytes come, until the slow-frame
	// deadline: how much of one is held when a sample is taken depends
	// on the machine's load (CI saw 29 MiB of 100), so this only checks
	// that the sampling saw reading at all.
	require.GreaterOrEqual(t, peak, int64(8<<20), "a frame was read")
	s.Close() // the waiting readers end
	wg.Wait()
}

// TestNegativeArrayLength: a negative array length where the protocol
// has no nullable array (CreateTopics' topics) closes the connection, as
// Kafka does for a request it cannot parse; kmsg alone reads it as
// empty. A null nullable array (Metadata's topics: all of them) is
// served.
func TestNegativeArrayLength(t *testing.T) {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 4
	req.TimeoutMillis = 1000
	body := req.AppendTo(nil)
	require.Equal(t, []byte{0, 0, 0, 0}, body[:4], "an empty topics array")
	binary.BigEndian.PutUint32(body, uint32(0xfffffffe)) // -2
	parsed := kmsg.NewPtrCreateTopicsRequest()
	parsed.Version = 4
	require.NoError(t, parsed.ReadFrom(body), "kmsg reads -2 as empty")

	frame := func(key, version int16, body []byte) []byte { return append(requestHeader(key, version), body...) }
	_, err := parseRequest(frame(19, 4, body))
	require.ErrorContains(t, err, "does not encode back")

	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 4
	meta.Topics = nil // null: every topic
	mbody := meta.AppendTo(nil)
	require.True(t, bytes.HasPrefix(mbody, []byte{0xff, 0xff, 0xff, 0xff}))
	_, err = parseRequest(frame(3, 4, mbody))
	require.NoError(t, err)

	_, addr := startServer(t, &Config{})
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	require.NoError(t, nc.SetDeadline(time.Now().Add(30*time.Second)))
	wire := frame(19, 4, body)
	_, err = nc.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(wire))), wire...))
	require.NoError(t, err)
	_, err = nc.Read(make([]byte, 1))
	require.True(t, errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err), "closed: %v", err)
}

func isReset(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && !oe.Timeout()
}

// TestCreateTopicsPartitionLimit: CreateTopics with 2^31-1 partitions is
// INVALID_PARTITIONS, with validateOnly too, and creates nothing.
func TestCreateTopicsPartitionLimit(t *testing.T) {
	s, addr := startServer(t, &Config{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	require.NoError(t, err)
	defer cl.Close()
	for _, validateOnly := range []bool{true, false} {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.ValidateOnly = validateOnly
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "huge", math.MaxInt32, -1
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(t.Context(), cl)
		require.NoError(t, err)
		require.Equal(t, kerr.InvalidPartitions.Code, resp.Topics[0].ErrorCode, "validateOnly %v", validateOnly)
	}
	ts, err := s.b.DescribeTopics(t.Context())
	require.NoError(t, err)
	for _, d := range ts {
		require.NotEqual(t, "huge", d.Name)
	}
}

// TestProduceLengths: a Produce request, checked by walking its lengths
// rather than by encoding it back, is refused where a non-nullable
// array or string is null (topics, a topic's name, its partitions) in
// every served version, and served with null records or a null
// transactional ID.
func TestProduceLengths(t *testing.T) {
	for v := int16(3); v <= 11; v++ {
		build := func(txn *string, name string, records []byte) *kmsg.ProduceRequest {
			return produceRequest(v, txn, name, records)
		}
		frame := func(body []byte) []byte { return append(requestHeader(0, v), body...) }
		for _, req := range []*kmsg.ProduceRequest{
			build(nil, "orders", []byte("batch")),
			build(kmsg.StringPtr("txn"), "orders", nil),
			build(nil, "", []byte{}),
		} {
			body := req.AppendTo(nil)
			require.True(t, produceLengthsOK(body, v), "v%d", v)
			_, err := parseRequest(frame(body))
			require.NoError(t, err, "v%d", v)
		}
		// Nulls where Kafka has none: the topic's name, the partitions,
		// the topics. The name is after the transactional ID (null here),
		// acks and the timeout.
		body := build(nil, "orders", []byte("batch")).AppendTo(nil)
		at := 2 + 2 + 4 // a null transactional ID (int16 -1), acks, timeout
		if v >= 9 {
			at = 1 + 2 + 4 // uvarint 0: null
		}
		var nulls [][]byte
		if v >= 9 {
			topics := append(slices.Clone(body[:at]), 0) // compact array: null
			name := slices.Clone(body)
			name[at+1] = 0 // the name's compact length: null
			nulls = [][]byte{topics, name}
		} else {
			topics := slices.Clone(body)
			binary.BigEndian.PutUint32(topics[at:], 0xfffffffe) // -2
			name := slices.Clone(body)
			binary.BigEndian.PutUint16(name[at+4:], 0xffff) // -1
			parts := slices.Clone(body)
			binary.BigEndian.PutUint32(parts[at+4+2+len("orders"):], 0xffffffff)
			nulls = [][]byte{topics, name, parts}
		}
		for i, b := range nulls {
			require.False(t, produceLengthsOK(b, v), "v%d null %d", v, i)
			_, err := parseRequest(frame(b))
			require.Error(t, err, "v%d null %d", v, i) // kmsg may already fail: the rest no longer parses
		}
	}
}

// FuzzParseRequest: parseRequest never panics, and a request it accepts
// encodes to bytes that parse back to the same request.
func FuzzParseRequest(f *testing.F) {
	for _, v := range []int16{3, 8, 9, 11} {
		f.Add(append(requestHeader(0, v), produceRequest(v, nil, "t", []byte("records")).AppendTo(nil)...))
	}
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 12
	f.Add(append(requestHeader(3, 12), meta.AppendTo(nil)...))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := parseRequest(body)
		if err != nil {
			return
		}
		enc := r.kreq.AppendTo(nil)
		again := kmsg.RequestForKey(r.kreq.Key())
		again.SetVersion(r.kreq.GetVersion())
		require.NoError(t, again.ReadFrom(enc))
		require.Equal(t, enc, again.AppendTo(nil))
	})
}

// produceRequest is a Produce request of version v, acks -1, with one
// partition (2) of topic holding records.
func produceRequest(v int16, txn *string, topic string, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.TransactionID, req.Acks, req.TimeoutMillis = v, txn, -1, 1000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 2, records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// requestHeader is the header parseRequest reads of a request of key and
// version v (correlation 1, a null client ID, and the tags of a flexible
// version).
func requestHeader(key, v int16) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(v))
	b = binary.BigEndian.AppendUint32(b, 1)
	b = binary.BigEndian.AppendUint16(b, 0xffff)
	req := kmsg.RequestForKey(key)
	req.SetVersion(v)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	return b
}
