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
