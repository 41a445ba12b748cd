package kafkaserver

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless/internal/kafkatest"
)

// readOffsetsTopic reads __consumer_offsets from its start to its end as
// Burrow does (a consumer of the topic that decodes Kafka's records), and
// returns the last offset each group's partition has there (-1: a
// tombstone) and the records read.
func readOffsetsTopic(t *testing.T, p *testBroker) (map[string]int64, int) {
	t.Helper()
	admin := kadm.NewClient(p.client(t))
	ends, err := admin.ListEndOffsets(t.Context(), offsetsTopic)
	require.NoError(t, err)
	end, _ := ends.Lookup(offsetsTopic, 0)
	cl := p.client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{offsetsTopic: {0: kgo.NewOffset().AtStart()}}))
	out, n := map[string]int64{}, 0
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for next := int64(0); next < end.Offset; {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		fs.EachRecord(func(r *kgo.Record) {
			next = r.Offset + 1
			n++
			var k kmsg.OffsetCommitKey
			require.NoError(t, k.ReadFrom(r.Key))
			require.EqualValues(t, 1, k.Version)
			id := fmt.Sprintf("%s/%s/%d", k.Group, k.Topic, k.Partition)
			if r.Value == nil {
				out[id] = -1
				return
			}
			var v kmsg.OffsetCommitValue
			require.NoError(t, v.ReadFrom(r.Value))
			require.EqualValues(t, 3, v.Version)
			require.Positive(t, v.CommitTimestamp)
			out[id] = v.Offset
		})
	}
	return out, n
}

// TestOffsetsTopicMirror: with Config.OffsetsTopicMirror, a reader of
// __consumer_offsets (as Burrow reads it) finds each group's commits in
// Kafka's record format, and a tombstone for an offset deleted; a
// restart keeps the coordinator's offsets and the mirror's records
// (nothing is imported from it). Without it, the topic stays empty.
func TestOffsetsTopicMirror(t *testing.T) {
	p := startBroker(t, &Config{OffsetsTopicMirror: true})
	cl := p.client(t)
	kafkatest.CreateTopic(t, cl, "events", 2, nil)
	admin := kadm.NewClient(cl)
	commit := func(group string, part int32, off int64) {
		os := kadm.Offsets{}
		os.AddOffset("events", part, off, -1)
		resp, err := admin.CommitOffsets(t.Context(), group, os)
		require.NoError(t, err)
		require.NoError(t, resp.Error())
	}
	commit("g", 0, 5)
	commit("g", 1, 7)
	commit("g", 0, 9)
	commit("h", 1, 3)
	require.Eventually(t, func() bool {
		got, _ := readOffsetsTopic(t, p)
		return got["g/events/0"] == 9 && got["g/events/1"] == 7 && got["h/events/1"] == 3
	}, 30*time.Second, 100*time.Millisecond, "the commits in the offsets topic")

	dresp, err := admin.DeleteOffsets(t.Context(), "h", kadm.TopicsSet{"events": {1: {}}})
	require.NoError(t, err)
	require.NoError(t, dresp.Error())
	require.Eventually(t, func() bool {
		got, _ := readOffsetsTopic(t, p)
		return got["h/events/1"] == -1
	}, 30*time.Second, 100*time.Millisecond, "a tombstone for the offset deleted")

	_, before := readOffsetsTopic(t, p)
	p.stop()
	p = p.restart()
	got, after := readOffsetsTopic(t, p)
	require.Equal(t, before, after, "a restart with the mirror on keeps its records")
	require.EqualValues(t, 9, got["g/events/0"])
	fetched, err := kadm.NewClient(p.client(t)).FetchOffsets(t.Context(), "g")
	require.NoError(t, err)
	o, _ := fetched.Lookup("events", 0)
	require.EqualValues(t, 9, o.At)

	plain := startBroker(t, nil)
	pcl := kadm.NewClient(plain.client(t))
	kafkatest.CreateTopic(t, plain.client(t), "events", 1, nil)
	os := kadm.Offsets{}
	os.AddOffset("events", 0, 4, -1)
	resp, err := pcl.CommitOffsets(t.Context(), "g", os)
	require.NoError(t, err)
	require.NoError(t, resp.Error())
	_, n := readOffsetsTopic(t, plain)
	require.Zero(t, n, "without the mirror, the topic stays empty")
}
