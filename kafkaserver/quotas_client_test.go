package kafkaserver

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless/internal/kafkatest"
	"github.com/diskless-go/diskless/quota"
)

// quotaHooks counts what a franz-go client saw of its quotas: the
// throttles brokers imposed, and its connections that closed.
type quotaHooks struct {
	throttles   atomic.Int64
	throttled   atomic.Int64 // nanoseconds
	disconnects atomic.Int64
}

var (
	_ kgo.HookBrokerThrottle   = (*quotaHooks)(nil)
	_ kgo.HookBrokerDisconnect = (*quotaHooks)(nil)
)

func (h *quotaHooks) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	h.throttles.Add(1)
	h.throttled.Add(int64(d))
}

func (h *quotaHooks) OnBrokerDisconnect(kgo.BrokerMetadata, net.Conn) { h.disconnects.Add(1) }

// startQuotaBroker starts a broker whose SASL users are users, enforcing
// quotas.
func startQuotaBroker(t *testing.T, quotas []quota.Quota, users ...string) *testBroker {
	t.Helper()
	dir := t.TempDir()
	data, bucket := filepath.Join(dir, "data"), filepath.Join(dir, "bucket")
	require.NoError(t, os.MkdirAll(bucket, 0o755))
	return startBrokerSetup(t, &Config{SASL: saslConfig(newMemStore(t, users...))}, "127.0.0.1:0", data, "file://"+bucket, func(s *Server) {
		var err error
		s.quotas, err = newClientQuotas(t.Context(), s.clock, staticQuotas(quotas), zap.NewNop())
		require.NoError(t, err)
	})
}

// quotaClient is a franz-go client of p authenticated as user (SASL
// PLAIN), with hooks, producing without compression (quotas count the
// bytes on the wire).
func quotaClient(t *testing.T, p *testBroker, user string, hooks *quotaHooks, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return p.client(t, append([]kgo.Opt{kgo.SASL(plain.Auth{User: user, Pass: password(user)}.AsMechanism()), kgo.WithHooks(hooks), kgo.ClientID(user + "-app"), kgo.ProducerBatchCompression(kgo.NoCompression())}, opts...)...)
}

// produceFor produces values of size bytes to topic on cl as fast as it
// takes them, for d, and returns the bytes acknowledged by then.
func produceFor(t *testing.T, cl *kgo.Client, topic string, size int, d time.Duration) int64 {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	var acked atomic.Int64
	value := make([]byte, size)
	for ctx.Err() == nil {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: value}, func(r *kgo.Record, err error) {
			if err == nil {
				acked.Add(int64(len(r.Value)))
			}
		})
	}
	return acked.Load()
}

// TestQuotaClients: real clients against a server enforcing quotas.
// alice's producer, over her produce quota, gets throttle times and keeps
// her connections, and what she gets acknowledged is bounded by the quota
// (ten windows of it at first, Kafka's burst, then the quota); bob, with
// no quota, is never throttled on the same server. carol's consumer, over
// her fetch quota, is throttled (answered without records, and fetches
// them again) and reads every record, in order, on the connections she
// opened.
func TestQuotaClients(t *testing.T) {
	const (
		produceLimit = 256 << 10 // alice: bytes a second
		fetchLimit   = 64 << 10  // carol
		size         = 16 << 10
		fetched      = 44 // records for carol: 704 KiB, over the 640 KiB of her first ten windows
	)
	user := func(name string) quota.Entity { return quota.Entity{User: quota.Component{Set: true, Name: name}} }
	p := startQuotaBroker(t, []quota.Quota{
		{Entity: user("alice"), Values: map[string]float64{quota.ProducerByteRate: produceLimit}},
		{Entity: user("carol"), Values: map[string]float64{quota.ConsumerByteRate: fetchLimit}},
	}, "alice", "bob", "carol")

	var bobHooks, aliceHooks, carolHooks quotaHooks
	bob := quotaClient(t, p, "bob", &bobHooks, kgo.ProducerBatchMaxBytes(20<<10), kgo.MaxBufferedRecords(64))
	kafkatest.CreateTopic(t, bob, "fetched", 1, nil)
	kafkatest.CreateTopic(t, bob, "produced", 1, nil)
	for i := range fetched {
		bob.Produce(t.Context(), &kgo.Record{Topic: "fetched", Value: fmt.Appendf(make([]byte, 0, size), "%08d%0*d", i, size-8, 0)}, nil)
	}
	require.NoError(t, bob.Flush(t.Context()))

	var wg sync.WaitGroup
	var aliceBytes, bobBytes int64
	var aliceTook time.Duration
	wg.Go(func() {
		alice := quotaClient(t, p, "alice", &aliceHooks, kgo.MaxBufferedRecords(64))
		start := time.Now()                                                // real time: an upper bound of what she may send
		aliceBytes = produceFor(t, alice, "produced", size, 6*time.Second) //
		aliceTook = time.Since(start)
	})
	wg.Go(func() { bobBytes = produceFor(t, bob, "produced", size, 6*time.Second) })
	var got []*kgo.Record
	wg.Go(func() {
		carol := quotaClient(t, p, "carol", &carolHooks, kgo.ConsumeTopics("fetched"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxWait(500*time.Millisecond), kgo.FetchMaxPartitionBytes(32<<10))
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		for len(got) < fetched && ctx.Err() == nil {
			fs := carol.PollFetches(ctx)
			fs.EachError(func(topic string, p int32, err error) {
				if ctx.Err() == nil {
					t.Errorf("fetching %s-%d: %v", topic, p, err)
				}
			})
			got = append(got, fs.Records()...)
		}
	})
	wg.Wait()
	t.Logf("alice: %d B in %v (%.0f B/s against %d), %d throttles (%v); bob: %d B, %d throttles; carol: %d throttles (%v)",
		aliceBytes, aliceTook, float64(aliceBytes)/aliceTook.Seconds(), produceLimit, aliceHooks.throttles.Load(), time.Duration(aliceHooks.throttled.Load()),
		bobBytes, bobHooks.throttles.Load(), carolHooks.throttles.Load(), time.Duration(carolHooks.throttled.Load()))

	require.Positive(t, aliceHooks.throttles.Load(), "alice was throttled")
	require.Zero(t, aliceHooks.disconnects.Load(), "alice kept her connections")
	bound := produceLimit*(aliceTook.Seconds()+quotaSamples) + 64*size // her burst, her quota since, and what was under way
	require.Less(t, float64(aliceBytes), bound)
	require.Zero(t, bobHooks.throttles.Load(), "bob has no quota")

	require.Positive(t, carolHooks.throttles.Load(), "carol was throttled")
	require.Zero(t, carolHooks.disconnects.Load(), "carol kept her connections")
	require.Len(t, got, fetched)
	for i, r := range got {
		require.Equal(t, int64(i), r.Offset)
		require.Equal(t, fmt.Sprintf("%08d", i), string(r.Value[:8]))
	}
	require.Positive(t, p.srv.stats.throttled.Load())
	require.Positive(t, p.srv.stats.throttledMillis.Load())
}
