package coordinator

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/kafkaerr"
)

// loseOnce is a Forwarder to a Coordinator in the same process that,
// the first time method is forwarded, serves the call, runs then (the
// group claimed again, say) and loses the answer, as a connection that
// broke after the leader applied the call.
type loseOnce struct {
	to     *Coordinator
	method string
	then   func()

	mu   sync.Mutex
	lost bool
}

func (f *loseOnce) Forward(ctx context.Context, shard int, method string, body []byte) func() ([]byte, error) {
	answer := f.to.Shards().Serve(ctx, shard, method, body)
	f.mu.Lock()
	lose := method == f.method && !f.lost
	f.lost = f.lost || lose
	f.mu.Unlock()
	return func() ([]byte, error) {
		out := answer()
		if lose {
			f.then()
			return nil, errors.New("connection reset")
		}
		return out, nil
	}
}

// TestForwardOutcomeUnknown: a forwarded commit whose first attempt was
// applied and its answer lost, and whose retry is refused (the group
// was claimed again in between), fails with the refusal's code and
// ErrOutcomeUnknown, since it did land; a refusal with no lost attempt
// before it does not carry ErrOutcomeUnknown.
func TestForwardOutcomeUnknown(t *testing.T) {
	ctx := context.Background()
	lead, err := Open(ctx, []metalog.Log{newTestLog()}, &Options{Dir: t.TempDir(), ApplyInterval: -1, SnapshotEvery: -1})
	require.NoError(t, err)
	defer lead.Close()
	orders, err := lead.CreatePartitions(ctx, CreatePartitionsRequest{Name: "orders", Partitions: 1})
	require.NoError(t, err)
	at := func(off int64) []GroupOffset {
		return []GroupOffset{{Topic: "orders", TopicID: orders, Partition: 0, Offset: off, LeaderEpoch: -1}}
	}
	claim, err := lead.ClaimGroup(ctx, "readers")
	require.NoError(t, err)

	fw := &loseOnce{to: lead, method: fwCommitOffsets, then: func() {
		_, err := lead.ClaimGroup(ctx, "readers") // another node takes the group over
		require.NoError(t, err)
	}}
	other, err := Open(ctx, []metalog.Log{nil}, &Options{Dir: t.TempDir(), Forwarder: fw, ApplyInterval: -1, SnapshotEvery: -1})
	require.NoError(t, err)
	defer other.Close()

	err = other.CommitOffsets(ctx, "readers", claim, at(10))
	require.Equal(t, kafkaerr.NotCoordinator, kafkaerr.CodeOf(err), "%v", err)
	require.ErrorIs(t, err, ErrOutcomeUnknown, "the lost attempt was applied")
	got, err := lead.FetchOffsets(ctx, "readers", nil)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, int64(10), got[0].Offset, "the first attempt landed")

	// Refused at the first attempt: nothing applied, and it says so.
	err = other.CommitOffsets(ctx, "readers", claim, at(20))
	require.Equal(t, kafkaerr.NotCoordinator, kafkaerr.CodeOf(err), "%v", err)
	require.NotErrorIs(t, err, ErrOutcomeUnknown)
	got, err = lead.FetchOffsets(ctx, "readers", nil)
	require.NoError(t, err)
	require.Equal(t, int64(10), got[0].Offset)
}

// toCoordinator forwards every call to the Coordinator set in it.
type toCoordinator struct{ to *Coordinator }

func (f *toCoordinator) Forward(ctx context.Context, shard int, method string, body []byte) func() ([]byte, error) {
	answer := f.to.Shards().Serve(ctx, shard, method, body)
	return func() ([]byte, error) { return answer(), nil }
}

// TestCreateTopicAnswerLost: a topic created across two shards, where the
// second shard's answer is lost after it created its partitions (its
// retry is refused: the name is taken, by this very create), is undone on
// both shards, and the create fails with a code that says to try again
// (REQUEST_TIMED_OUT), not TOPIC_ALREADY_EXISTS; the next try creates it
// whole. (The undo once skipped the shard whose answer was lost: the
// topic was left on it alone, and every later create was
// TOPIC_ALREADY_EXISTS. The simulation found it.)
func TestCreateTopicAnswerLost(t *testing.T) {
	ctx := context.Background()
	toA := &toCoordinator{}
	b, err := Open(ctx, []metalog.Log{nil, newTestLog()}, &Options{Dir: t.TempDir(), Forwarder: toA, ApplyInterval: -1, SnapshotEvery: -1})
	require.NoError(t, err)
	defer b.Close()
	a, err := Open(ctx, []metalog.Log{newTestLog(), nil}, &Options{Dir: t.TempDir(), Forwarder: &loseOnce{to: b, method: fwCreate, then: func() {}}, ApplyInterval: -1, SnapshotEvery: -1})
	require.NoError(t, err)
	defer a.Close()
	toA.to = a

	_, err = a.CreatePartitions(ctx, CreatePartitionsRequest{Name: "orders", Partitions: 2})
	require.Equal(t, kafkaerr.RequestTimedOut, kafkaerr.CodeOf(err), "%v", err)
	named := func(c *Coordinator) []TopicInfo {
		c.Shards().RefreshTopics(ctx)
		ts, err := c.Topics(ctx)
		require.NoError(t, err)
		var out []TopicInfo
		for _, ti := range ts {
			if ti.Name == "orders" {
				out = append(out, ti)
			}
		}
		return out
	}
	require.Empty(t, named(b), "undone on the shard whose answer was lost too")
	require.Empty(t, named(a))

	id, err := a.CreatePartitions(ctx, CreatePartitionsRequest{Name: "orders", Partitions: 2})
	require.NoError(t, err, "created whole at the next try")
	got := named(b)
	require.Len(t, got, 1)
	require.Equal(t, id, got[0].ID)
}
