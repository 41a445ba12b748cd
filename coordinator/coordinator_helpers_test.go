package coordinator

import (
	"context"
	"testing"

	"github.com/diskless-go/diskless/coordinator/store"

	"github.com/diskless-go/diskless/coordinator/state"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal"
)

func newTestLog() *metalog.Mem { return metalog.NewMem(nil) }

// openTest opens a coordinator over log in dir (a fresh temp dir if "").
func openTest(t testing.TB, log metalog.Log, dir string, opts *leaderOptions) *leader {
	t.Helper()
	var o leaderOptions
	if opts != nil {
		o = *opts
	}
	if dir == "" {
		dir = t.TempDir()
	}
	o.Dir = dir
	if o.ApplyInterval == 0 {
		o.ApplyInterval = -1 // read-your-writes: the tests read right after
	}
	c, err := openLeader(context.Background(), log, &o)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// coord makes a coordinate of a batch of n records for tp.
func coord(tp wal.TopicPartition, pos int64, n int32, producerID int64, epoch int16, seq int32, ts int64) wal.Coordinate {
	return wal.Coordinate{
		TopicPartition: tp, Offset: pos, Size: 100, NumRecords: n,
		BaseTimestamp: ts, MaxTimestamp: ts, ProducerID: producerID, ProducerEpoch: epoch, BaseSequence: seq,
	}
}

func mustCreate(t testing.TB, c *leader, name string, parts int32, cfg TopicConfig) uuid.UUID {
	t.Helper()
	id, err := c.CreatePartitions(context.Background(), CreatePartitionsRequest{Name: name, Partitions: parts, Config: cfg})
	require.NoError(t, err)
	return id
}

func code(err error) kafkaerr.Code { return kafkaerr.CodeOf(err) }

// storeApply applies records as the loop does a durable entry at offset:
// the core to root, then the store.
func storeApply(ctx context.Context, st *store.DB, root *state.View, offset int64, records []state.Record) error {
	eff := state.ApplyEntry(root, records)
	return st.Write(ctx, root, offset, 0, state.ChainState{}, records, &eff)
}
