package kafkaserver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless/internal/kafkatest"
)

// answered returns the partitions of a fetch answer, by partition.
func answered(resp *kmsg.FetchResponse) map[int32]kmsg.FetchResponseTopicPartition {
	out := map[int32]kmsg.FetchResponseTopicPartition{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = p
		}
	}
	return out
}

// TestFetchSessions walks an incremental fetch session (KIP-227) through
// a real broker: a full fetch with epoch 0 gets a session and every
// partition (an empty one with an empty, non-null record set); an
// incremental fetch names nothing and gets only what changed; forgotten
// partitions leave; a wrong epoch and an unknown session are refused;
// epoch -1 closes the session.
func TestFetchSessions(t *testing.T) {
	p := startBroker(t, nil)
	cl := p.client(t, kgo.DefaultProduceTopic("sess"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	kafkatest.CreateTopic(t, cl, "sess", 3, nil)
	ctx := t.Context()
	fetch := func(req *kmsg.FetchRequest) *kmsg.FetchResponse {
		t.Helper()
		resp, err := req.RequestWith(ctx, cl.Broker(0))
		require.NoError(t, err)
		return resp
	}

	full := fetch(fetchReq("sess", 0, 0, 0, 0, 0, 1, 2))
	require.NoError(t, kerr.ErrorForCode(full.ErrorCode))
	require.NotZero(t, full.SessionID, "a session for a full fetch with epoch 0")
	got := answered(full)
	require.Len(t, got, 3)
	for _, part := range got {
		require.NotNil(t, part.RecordBatches, "an empty partition has empty records, not null")
		require.Empty(t, part.RecordBatches)
	}
	id := full.SessionID

	// Nothing changed: an incremental fetch waits its MaxWait and names
	// no partition.
	inc := fetch(fetchReq("sess", 0, 50, id, 1))
	require.NoError(t, kerr.ErrorForCode(inc.ErrorCode))
	require.Equal(t, id, inc.SessionID)
	require.Empty(t, answered(inc))

	// Records on partition 1: only it is answered.
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte("x")}).FirstErr())
	inc = fetch(fetchReq("sess", 0, 5000, id, 2))
	got = answered(inc)
	require.Len(t, got, 1)
	require.NotEmpty(t, got[1].RecordBatches)
	require.Equal(t, int64(1), got[1].HighWatermark)

	// The consumer moves partition 1 on and forgets partition 2; a
	// record on 2 is not answered.
	req := fetchReq("sess", 1, 50, id, 3, 1)
	req.ForgottenTopics = []kmsg.FetchRequestForgottenTopic{{Topic: "sess", Partitions: []int32{2}}}
	require.Empty(t, answered(fetch(req)))
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Partition: 2, Value: []byte("y")}).FirstErr())
	require.Empty(t, answered(fetch(fetchReq("sess", 0, 50, id, 4))))

	// Errors: a wrong epoch, an unknown session.
	require.Equal(t, kerr.InvalidFetchSessionEpoch.Code, fetch(fetchReq("sess", 0, 0, id, 9)).ErrorCode)
	require.Equal(t, kerr.FetchSessionIDNotFound.Code, fetch(fetchReq("sess", 0, 0, id+1, 1)).ErrorCode)

	// Epoch -1 closes the session: a full fetch without one.
	closing := fetch(fetchReq("sess", 0, 0, id, -1, 0))
	require.Zero(t, closing.SessionID)
	require.Len(t, answered(closing), 1)
	require.Equal(t, kerr.FetchSessionIDNotFound.Code, fetch(fetchReq("sess", 0, 0, id, 5)).ErrorCode)
}

// TestFetchSessionCache checks the cache's bound: when it is full a new
// session takes the slot of an idle one, or of a smaller one, else gets
// none (ID 0).
func TestFetchSessionCache(t *testing.T) {
	fs := newFetchSessions(2)
	now := time.Now()
	parts := func(n int) []*sessionPartition {
		var ps []*sessionPartition
		for i := range n {
			ps = append(ps, &sessionPartition{tp: topicPartition{"t", int32(i)}, highWatermark: -1})
		}
		return ps
	}
	a := fs.create(parts(3), now)
	b := fs.create(parts(3), now)
	require.NotZero(t, a)
	require.NotZero(t, b)
	require.NotEqual(t, a, b)
	require.Zero(t, fs.create(parts(3), now), "full, none idle, none smaller")
	c := fs.create(parts(5), now)
	require.NotZero(t, c, "a larger session evicts a smaller one")
	require.Equal(t, 2, fs.len())
	d := fs.create(parts(1), now.Add(sessionEvictAfter))
	require.NotZero(t, d, "an idle session is evicted")
	require.Equal(t, 2, fs.len())
	require.Zero(t, newFetchSessions(0).create(parts(1), now), "no cache: no sessions")
}
