package coordinator

import (
	"testing"
	"time"

	"github.com/diskless-go/diskless/coordinator/state"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless/coordinator/metalog"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

// TestAlterTopicConfig: a topic served by two shards gets its new config
// in both (and in Topics); it survives a restart; a repeated request logs
// nothing; values out of range, a change of message.timestamp.type and an
// unknown topic are refused with Kafka's codes.
func TestAlterTopicConfig(t *testing.T) {
	ctx := t.Context()
	f := newShardsFixture(t, 2, memblob.OpenBucket(nil), nil)
	id, err := f.s.CreatePartitions(ctx, CreatePartitionsRequest{Name: "t", Partitions: 4})
	require.NoError(t, err)
	shardsOf := func() map[int]TopicConfig {
		out := map[int]TopicConfig{}
		for i := range f.s.Shards().NumShards() {
			c, err := f.s.local(i)
			require.NoError(t, err)
			if ti, ok := c.pub.Topic(id); ok {
				out[i] = ti.Config
			}
		}
		return out
	}
	require.Len(t, shardsOf(), 2, "both shards serve some of it")
	want := TopicConfig{Retention: time.Hour, RetentionBytes: 100, Compact: true, Delete: true, MaxMessageBytes: 2 << 20,
		SegmentBytes: 1 << 20, SegmentTime: time.Minute, DeleteRetention: -time.Hour, MinCompactionLag: time.Second, MinCleanableDirtyRatio: 0.1}
	require.NoError(t, f.s.AlterTopicConfig(ctx, id, want))
	expect := want
	expect.Partitions, expect.DeleteRetention = 4, -time.Millisecond
	check := func() {
		t.Helper()
		for i, c := range shardsOf() {
			require.Equal(t, expect, c, "shard %d", i)
		}
		ts, err := f.s.Topics(ctx)
		require.NoError(t, err)
		require.Equal(t, expect, ts[0].Config)
	}
	check()
	c0, err := f.s.local(0)
	require.NoError(t, err)
	end := c0.log.End()
	require.NoError(t, f.s.AlterTopicConfig(ctx, id, want))
	require.Equal(t, end, c0.log.End(), "nothing changes: nothing logged")
	f.restart()
	check()

	for _, bad := range []TopicConfig{{MinCleanableDirtyRatio: 2}, {MaxMessageBytes: -1}, {MaxCompactionLag: -time.Second}, {LogAppendTime: true}} {
		require.Equal(t, kafkaerr.InvalidConfig, code(f.s.AlterTopicConfig(ctx, id, bad)), "%+v", bad)
	}
	check()
	require.Equal(t, kafkaerr.UnknownTopicOrPartition, code(f.s.AlterTopicConfig(ctx, [16]byte{1}, want)))

	// Back to the defaults: zeros, as at creation.
	require.NoError(t, f.s.AlterTopicConfig(ctx, id, TopicConfig{}))
	ts, err := f.s.Topics(ctx)
	require.NoError(t, err)
	require.Equal(t, TopicConfig{Partitions: 4, Retention: 7 * 24 * time.Hour, RetentionBytes: -1, Delete: true, MaxMessageBytes: 1048588,
		SegmentBytes: kbatch.DefaultSegmentBytes, SegmentTime: state.MsDuration(state.DefaultSegmentMs)}, ts[0].Config)
}

// TestAlterTopicConfigForwarded: a broker that leads no shard alters a
// topic through its Forwarder (the admin call to shard 0's leader, which
// alters it in its shard); both see the new config, and errors keep
// their codes.
func TestAlterTopicConfigForwarded(t *testing.T) {
	ctx := t.Context()
	lead, err := Open(ctx, []metalog.Log{newTestLog()}, &Options{Dir: t.TempDir(), ApplyInterval: -1, SnapshotEvery: -1})
	require.NoError(t, err)
	defer lead.Close()
	id, err := lead.CreatePartitions(ctx, CreatePartitionsRequest{Name: "t", Partitions: 2, Config: TopicConfig{Compact: true}})
	require.NoError(t, err)
	other, err := Open(ctx, []metalog.Log{nil}, &Options{Dir: t.TempDir(), Forwarder: direct{lead}, ApplyInterval: -1, SnapshotEvery: -1})
	require.NoError(t, err)
	defer other.Close()
	require.NoError(t, other.AlterTopicConfig(ctx, id, TopicConfig{Compact: true, MinCompactionLag: time.Hour}))
	for _, c := range []*Coordinator{lead, other} {
		ts, err := c.Topics(ctx)
		require.NoError(t, err)
		require.Equal(t, time.Hour, ts[0].Config.MinCompactionLag)
	}
	require.Equal(t, kafkaerr.InvalidConfig, code(other.AlterTopicConfig(ctx, id, TopicConfig{MinCleanableDirtyRatio: 3})))
}
