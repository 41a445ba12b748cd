package kafkaserver

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless/internal/kafkatest"
)

// TestGroupAdmin drives the group admin APIs with kadm: ListGroups and
// DescribeGroups of a live group (its members and their assignments) and
// of an empty one that only has committed offsets; OffsetDelete refused
// for a subscribed topic and done for another; DeleteGroups refused for a
// group with members, done once it is empty, GROUP_ID_NOT_FOUND after.
func TestGroupAdmin(t *testing.T) {
	p := startBroker(t, &Config{GroupInitialRebalanceDelay: -1})
	cl := p.client(t)
	adm := kadm.NewClient(cl)
	ctx := t.Context()
	kafkatest.CreateTopic(t, cl, "ga", 2, nil)
	kafkatest.CreateTopic(t, cl, "other", 1, nil)

	// An empty group that only committed offsets (outside a group).
	_, err := adm.CommitOffsets(ctx, "offsets-only", kadm.OffsetsFromFetches(kgo.Fetches{}))
	require.NoError(t, err)
	var os kadm.Offsets
	os.AddOffset("other", 0, 3, -1)
	os.AddOffset("ga", 0, 1, -1)
	require.NoError(t, adm.CommitAllOffsets(ctx, "offsets-only", os))

	// A live group of one member.
	assigned := make(chan struct{})
	member := p.client(t, kgo.ConsumerGroup("live"), kgo.ConsumeTopics("ga"), kgo.ClientID("member-1"),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { close(assigned) }))
	go func() {
		for {
			if fs := member.PollFetches(ctx); fs.IsClientClosed() || ctx.Err() != nil {
				return
			}
		}
	}()
	select {
	case <-assigned:
	case <-time.After(30 * time.Second):
		t.Fatal("the member was not assigned within 30 s")
	}

	listed, err := adm.ListGroups(ctx)
	require.NoError(t, err)
	require.Contains(t, listed, "live")
	require.Contains(t, listed, "offsets-only")
	require.Equal(t, "Stable", listed["live"].State)
	require.Equal(t, "consumer", listed["live"].ProtocolType)
	require.Equal(t, "classic", listed["live"].GroupType)
	require.Equal(t, "Empty", listed["offsets-only"].State)
	empty, err := adm.ListGroups(ctx, "Empty")
	require.NoError(t, err)
	require.Equal(t, []string{"offsets-only"}, empty.Groups())

	described, err := adm.DescribeGroups(ctx, "live", "offsets-only", "nobody")
	require.NoError(t, err)
	live := described["live"]
	require.NoError(t, live.Err)
	require.Equal(t, "Stable", live.State)
	require.Len(t, live.Members, 1)
	require.Equal(t, "member-1", live.Members[0].ClientID)
	ca, ok := live.Members[0].Assigned.AsConsumer()
	require.True(t, ok)
	require.Len(t, ca.Topics, 1)
	require.ElementsMatch(t, []int32{0, 1}, ca.Topics[0].Partitions)
	require.Equal(t, "Empty", described["offsets-only"].State)
	require.ErrorIs(t, described["nobody"].Err, kerr.GroupIDNotFound, "version 6: a group that does not exist")

	// OffsetDelete: not while the group subscribes to the topic.
	del, err := adm.DeleteOffsets(ctx, "live", kadm.TopicsSet{"ga": {0: {}}})
	require.NoError(t, err)
	require.ErrorIs(t, del["ga"][0], kerr.GroupSubscribedToTopic)
	del, err = adm.DeleteOffsets(ctx, "offsets-only", kadm.TopicsSet{"other": {0: {}}})
	require.NoError(t, err)
	require.NoError(t, del.Error())
	left, err := adm.FetchOffsets(ctx, "offsets-only")
	require.NoError(t, err)
	_, ok = left.Lookup("other", 0)
	require.False(t, ok, "deleted")
	_, ok = left.Lookup("ga", 0)
	require.True(t, ok, "kept")

	// DeleteGroups: not while it has members.
	dg, err := adm.DeleteGroups(ctx, "live", "offsets-only", "nobody")
	require.NoError(t, err)
	require.ErrorIs(t, dg["live"].Err, kerr.NonEmptyGroup)
	require.NoError(t, dg["offsets-only"].Err)
	require.ErrorIs(t, dg["nobody"].Err, kerr.GroupIDNotFound)
	member.Close() // leaves the group
	dg, err = adm.DeleteGroups(ctx, "live")
	require.NoError(t, err)
	require.NoError(t, dg["live"].Err)
	listed, err = adm.ListGroups(ctx)
	require.NoError(t, err)
	require.Empty(t, listed.Groups())
}

// TestPartitionAdmin drives OffsetForLeaderEpoch, CreatePartitions,
// DescribeProducers, DescribeLogDirs and DescribeCluster.
func TestPartitionAdmin(t *testing.T) {
	p := startBroker(t, nil)
	cl := p.client(t, kgo.DefaultProduceTopic("pa"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	ctx := t.Context()
	kafkatest.CreateTopic(t, cl, "pa", 2, nil)
	for i := range 5 {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte{byte(i)}}).FirstErr())
	}

	// OffsetForLeaderEpoch: epoch 0 ends at the high watermark, a later
	// one is unknown.
	var req kadm.OffsetForLeaderEpochRequest
	req.Add("pa", 1, 0)
	req.Add("pa", 0, 0)
	eps, err := adm.OffsetForLeaderEpoch(ctx, req)
	require.NoError(t, err)
	require.NoError(t, eps["pa"][1].Err)
	require.Equal(t, int64(5), eps["pa"][1].EndOffset)
	require.Equal(t, int32(0), eps["pa"][1].LeaderEpoch)
	require.Equal(t, int64(0), eps["pa"][0].EndOffset)
	var later kadm.OffsetForLeaderEpochRequest
	later.Add("pa", 1, 3)
	eps, err = adm.OffsetForLeaderEpoch(ctx, later)
	require.NoError(t, err)
	require.Equal(t, int64(-1), eps["pa"][1].EndOffset)
	require.Equal(t, int32(-1), eps["pa"][1].LeaderEpoch)

	// CreatePartitions: Kafka's checks; a valid increase validates
	// (TestCreatePartitions adds some).
	cp, err := adm.UpdatePartitions(ctx, 2, "pa")
	require.NoError(t, err)
	require.ErrorIs(t, cp["pa"].Err, kerr.InvalidPartitions)
	cp, err = adm.UpdatePartitions(ctx, 1, "pa")
	require.NoError(t, err)
	require.ErrorIs(t, cp["pa"].Err, kerr.InvalidPartitions)
	cp, err = adm.ValidateCreatePartitions(ctx, 2, "pa")
	require.NoError(t, err)
	require.NoError(t, cp["pa"].Err)
	cp, err = adm.CreatePartitions(ctx, 2, "nope")
	require.NoError(t, err)
	require.ErrorIs(t, cp["nope"].Err, kerr.UnknownTopicOrPartition)
	td, err := adm.ListTopics(ctx, "pa")
	require.NoError(t, err)
	require.Len(t, td["pa"].Partitions, 2, "validation added nothing")

	// DescribeProducers: the idempotent producer of partition 1.
	dp, err := adm.DescribeProducers(ctx, kadm.TopicsSet{"pa": {0: {}, 1: {}}})
	require.NoError(t, err)
	require.Empty(t, dp["pa"].Partitions[0].ActiveProducers)
	prods := dp["pa"].Partitions[1].ActiveProducers
	require.Len(t, prods, 1)
	for _, ap := range prods {
		require.Equal(t, int32(4), ap.LastSequence)
		require.Positive(t, ap.LastTimestamp)
	}

	// DescribeLogDirs: one directory, the bucket; partition 1 holds five
	// batches, partition 0 none.
	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	require.NoError(t, err)
	require.Len(t, dirs[0], 1)
	for dir, d := range dirs[0] {
		require.Equal(t, p.bucket, dir)
		require.NoError(t, d.Err)
		require.Equal(t, int64(0), d.Topics["pa"][0].Size)
		require.Greater(t, d.Topics["pa"][1].Size, int64(5*61))
	}

	// DescribeCluster: this broker, the controller.
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.EndpointType = 1
	dresp, err := dc.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.NoError(t, kerr.ErrorForCode(dresp.ErrorCode))
	require.Equal(t, clusterID, dresp.ClusterID)
	require.Len(t, dresp.Brokers, 1)
	require.Equal(t, int32(0), dresp.ControllerID)
	dc.EndpointType = 2
	dresp, err = dc.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Equal(t, kerr.UnsupportedEndpointType.Code, dresp.ErrorCode)
}

// TestCreatePartitions: CreatePartitions adds partitions to a topic; its
// records stay where they were, Metadata names the new partitions, and
// they take produce and fetch like the first ones; a validate-only
// request and a refused one change nothing; the topic keeps its config.
func TestCreatePartitions(t *testing.T) {
	p := startBroker(t, nil)
	cl := p.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	ctx := t.Context()
	kafkatest.CreateTopic(t, cl, "grow", 2, map[string]string{"retention.ms": "3600000"})
	for part := range int32(2) {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "grow", Partition: part, Value: fmt.Appendf(nil, "old-%d", part)}).FirstErr())
	}

	cp, err := adm.ValidateCreatePartitions(ctx, 3, "grow")
	require.NoError(t, err)
	require.NoError(t, cp["grow"].Err)
	cp, err = adm.CreatePartitions(ctx, 3, "grow", "__consumer_offsets")
	require.NoError(t, err)
	require.NoError(t, cp["grow"].Err)
	require.ErrorIs(t, cp["__consumer_offsets"].Err, kerr.InvalidRequest)
	cp, err = adm.UpdatePartitions(ctx, 4, "grow")
	require.NoError(t, err)
	require.ErrorIs(t, cp["grow"].Err, kerr.InvalidPartitions, "fewer than it has now")

	td, err := adm.ListTopics(ctx, "grow")
	require.NoError(t, err)
	require.Len(t, td["grow"].Partitions, 5)
	cl = p.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner())) // one that learns the partitions afresh
	for part := range int32(5) {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "grow", Partition: part, Value: fmt.Appendf(nil, "new-%d", part)}).FirstErr(), "partition %d", part)
	}
	want := map[int32][]string{0: {"old-0", "new-0"}, 1: {"old-1", "new-1"}, 2: {"new-2"}, 3: {"new-3"}, 4: {"new-4"}}
	for part, values := range want {
		rc := p.client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"grow": {part: kgo.NewOffset().AtStart()}}))
		var got []string
		for len(got) < len(values) {
			fs := rc.PollFetches(ctx)
			require.NoError(t, fs.Err())
			fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		}
		require.Equal(t, values, got, "partition %d", part)
	}
	rc, err := adm.DescribeTopicConfigs(ctx, "grow")
	require.NoError(t, err)
	v, err := rc.On("grow", nil)
	require.NoError(t, err)
	for _, c := range v.Configs {
		if c.Key == "retention.ms" {
			require.Equal(t, "3600000", *c.Value, "the config is kept")
		}
	}
}
