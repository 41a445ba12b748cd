// Package kafkatest holds what the tests of a Kafka server share, whether
// they run it in their process (kafkaserver) or as a child process
// (examples/kafka-broker): a franz-go client that retries quickly,
// creating a topic, consuming a topic to a count, and collecting a
// producer's acknowledgements.
package kafkatest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless/kafkaerr"
)

// Client returns a franz-go client seeded with addr that backs off 50 ms
// between retries and refreshes metadata as often, with opts after those;
// it is closed at the test's cleanup.
func Client(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }), kgo.MetadataMinAge(50 * time.Millisecond)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// CreateTopic creates a topic with CreateTopics (replication factor 3,
// which a diskless server accepts), and fails the test unless it was
// created with the partitions asked for.
func CreateTopic(t testing.TB, cl *kgo.Client, name string, partitions int32, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, 3
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, &v
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(t.Context(), cl)
	require.NoError(t, err)
	require.Len(t, resp.Topics, 1)
	if code := kafkaerr.Code(resp.Topics[0].ErrorCode); code != kafkaerr.NoError {
		t.Fatalf("creating %s: %v", name, code)
	}
	require.Equal(t, partitions, resp.Topics[0].NumPartitions)
}

// ConsumeAll consumes topic from the start with a direct consumer of
// addr (a Client, with opts after its own) until n records have come,
// within 30 s, and returns them; more than n fails the test.
func ConsumeAll(t testing.TB, addr, topic string, n int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl := Client(t, addr, append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500 * time.Millisecond)}, opts...)...)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records of %s: %v", len(out), n, topic, err)
		}
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("fetching %s-%d: %v", topic, p, err)
			}
		})
		out = append(out, fs.Records()...)
	}
	require.Len(t, out, n, "more records than produced")
	return out
}

// ByPartition groups records by partition, each in offset order as
// consumed.
func ByPartition(rs []*kgo.Record) map[int32][]*kgo.Record {
	m := map[int32][]*kgo.Record{}
	for _, r := range rs {
		m[r.Partition] = append(m[r.Partition], r)
	}
	return m
}

// Acked collects what a producer's callbacks said: Done is the callback.
// It is safe for concurrent use; the zero value is ready.
type Acked struct {
	mu   sync.Mutex
	recs []*kgo.Record // acknowledged
	errs []error       // given up
}

// Done records one callback.
func (a *Acked) Done(r *kgo.Record, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.errs = append(a.errs, err)
		return
	}
	a.recs = append(a.recs, r)
}

// Count returns how many records were acknowledged so far.
func (a *Acked) Count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.recs)
}

// Records returns the records acknowledged so far, in the order they were.
func (a *Acked) Records() []*kgo.Record {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*kgo.Record(nil), a.recs...)
}

// Errors returns the errors of the records given up so far.
func (a *Acked) Errors() []error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]error(nil), a.errs...)
}
