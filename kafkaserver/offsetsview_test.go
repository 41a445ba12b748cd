package kafkaserver

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless/internal/kafkatest"
)

// pendingTxnOffsets opens a transaction of transactional ID txid that
// commits offsets of group (partition: offset, of "events") and leaves it
// open; end ends it (commit or abort).
func pendingTxnOffsets(t *testing.T, cl *kgo.Client, txid, group string, offsets map[int32]int64) (end func(commit bool)) {
	t.Helper()
	ctx := t.Context()
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = &txid, 60_000
	ir, err := init.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Zero(t, ir.ErrorCode)
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = txid, ir.ProducerID, ir.ProducerEpoch, group
	ar, err := add.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Zero(t, ar.ErrorCode)
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group, req.Generation = txid, ir.ProducerID, ir.ProducerEpoch, group, -1
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = "events"
	for p, o := range offsets {
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = p, o, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	for _, p := range resp.Topics[0].Partitions {
		require.Zero(t, p.ErrorCode)
	}
	return func(commit bool) {
		t.Helper()
		end := kmsg.NewPtrEndTxnRequest()
		end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = txid, ir.ProducerID, ir.ProducerEpoch, commit
		er, err := end.RequestWith(ctx, cl)
		require.NoError(t, err)
		require.Zero(t, er.ErrorCode)
	}
}

// fetched is one partition of an OffsetFetch answer.
type fetched struct {
	partition int32
	offset    int64
	code      int16
}

// offsetsOf returns the partitions of "events" in an OffsetFetch group
// answer.
func offsetsOf(topics []kmsg.OffsetFetchResponseGroupTopic) []fetched {
	var out []fetched
	for _, t := range topics {
		for _, p := range t.Partitions {
			out = append(out, fetched{p.Partition, p.Offset, p.ErrorCode})
		}
	}
	return out
}

// TestOffsetFetchAsKafka: OffsetFetch answers as Kafka 4's
// OffsetMetadataManager.fetchOffsets and fetchAllOffsets do: every
// committed partition, or those asked (-1 when none is committed); with
// require_stable, a partition with offsets committed in a transaction
// still open is UNSTABLE_OFFSET_COMMIT; several groups at once from
// version 8, one that does not exist with nothing; from version 9 a
// consumer group checks the member (ConsumerGroup.validateOffsetFetch), a
// classic group does not.
func TestOffsetFetchAsKafka(t *testing.T) {
	f := newViewFixture(t)
	require.Zero(t, commitOffset(t, pinnedClient(t, f.p, 8, 8), 8, "classic", f.member, f.gen, 2, 5))
	require.Zero(t, commitOffset(t, pinnedClient(t, f.p, 8, 9), 9, "kip848", f.cg.id, f.cg.epoch, 1, 4))
	end := pendingTxnOffsets(t, f.cl, "tx-view", "simple", map[int32]int64{0: 7, 1: 8})

	v7 := func(stable bool, partitions []int32) []fetched {
		t.Helper()
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group, req.RequireStable = "simple", stable
		if partitions != nil {
			rt := kmsg.NewOffsetFetchRequestTopic()
			rt.Topic, rt.Partitions = "events", partitions
			req.Topics = append(req.Topics, rt)
		}
		kresp, err := pinnedClient(t, f.p, 9, 7).Request(t.Context(), req)
		require.NoError(t, err)
		resp := kresp.(*kmsg.OffsetFetchResponse)
		require.Equal(t, int16(7), resp.Version)
		require.Zero(t, resp.ErrorCode)
		var out []fetched
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				out = append(out, fetched{p.Partition, p.Offset, p.ErrorCode})
			}
		}
		return out
	}
	unstable := kerr.UnstableOffsetCommit.Code
	require.Equal(t, []fetched{{0, 3, 0}}, v7(false, nil))
	require.Equal(t, []fetched{{0, -1, unstable}}, v7(true, nil), "all partitions: the committed ones")
	require.Equal(t, []fetched{{0, 3, 0}, {1, -1, 0}, {2, -1, 0}}, v7(false, []int32{0, 1, 2}))
	require.Equal(t, []fetched{{0, -1, unstable}, {1, -1, unstable}, {2, -1, 0}}, v7(true, []int32{0, 1, 2}))

	// Version 8: several groups, each answered on its own.
	req := kmsg.NewPtrOffsetFetchRequest()
	for _, g := range []string{"simple", "classic", "kip848", "nope"} {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = g
		req.Groups = append(req.Groups, rg)
	}
	kresp, err := pinnedClient(t, f.p, 9, 8).Request(t.Context(), req)
	require.NoError(t, err)
	resp := kresp.(*kmsg.OffsetFetchResponse)
	require.Equal(t, int16(8), resp.Version)
	got := map[string][]fetched{}
	for _, g := range resp.Groups {
		require.Zero(t, g.ErrorCode, g.Group)
		got[g.Group] = offsetsOf(g.Topics)
	}
	require.Equal(t, map[string][]fetched{"simple": {{0, 3, 0}}, "classic": {{2, 5, 0}}, "kip848": {{1, 4, 0}}, "nope": nil}, got)

	// Version 9: the member and its epoch.
	str := func(s string) *string { return &s }
	for _, c := range []struct {
		group  string
		member *string
		epoch  int32
		want   int16
	}{
		{"kip848", nil, -1, 0},
		{"kip848", str(f.cg.id), f.cg.epoch, 0},
		{"kip848", str(f.cg.id), f.cg.epoch - 1, kerr.StaleMemberEpoch.Code},
		{"kip848", str(f.cg.id), f.cg.epoch + 1, kerr.StaleMemberEpoch.Code},
		{"kip848", str(""), -1, kerr.UnknownMemberID.Code},
		{"kip848", nil, f.cg.epoch, kerr.UnknownMemberID.Code},
		{"kip848", str("ghost"), 1, kerr.UnknownMemberID.Code},
		{"classic", str("ghost"), 7, 0},
		{"nope", str("ghost"), 7, 0},
	} {
		req := kmsg.NewPtrOffsetFetchRequest()
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group, rg.MemberID, rg.MemberEpoch = c.group, c.member, c.epoch
		req.Groups = append(req.Groups, rg)
		kresp, err := pinnedClient(t, f.p, 9, 9).Request(t.Context(), req)
		require.NoError(t, err)
		resp := kresp.(*kmsg.OffsetFetchResponse)
		require.Equal(t, int16(9), resp.Version)
		require.Equal(t, c.want, resp.Groups[0].ErrorCode, "%s member %v epoch %d", c.group, c.member, c.epoch)
	}

	end(true)
	require.Equal(t, []fetched{{0, 7, 0}, {1, 8, 0}, {2, -1, 0}}, v7(true, []int32{0, 1, 2}), "the transaction committed")
}

// TestListOffsetsAsKafka: ListOffsets answers each special timestamp from
// the version Kafka 4 does, and as a broker with no tiered storage
// answers it; -1 is the last stable offset at read_committed, and a
// record found by timestamp at or past it is none there; a partition
// named twice is INVALID_REQUEST.
func TestListOffsetsAsKafka(t *testing.T) {
	p := startBroker(t, nil)
	ctx := t.Context()
	kafkatest.CreateTopic(t, p.client(t), "lo", 1, nil)
	now := time.Now().Truncate(time.Millisecond)
	t0 := now.Add(-time.Hour)
	plain := p.client(t, kgo.DefaultProduceTopic("lo"))
	for i := range 5 { // offsets 0-4
		r := &kgo.Record{Value: []byte{byte(i)}, Timestamp: t0.Add(time.Duration(i) * time.Second)}
		require.NoError(t, plain.ProduceSync(ctx, r).FirstErr())
	}
	tx := p.client(t, kgo.DefaultProduceTopic("lo"), kgo.TransactionalID("tx-lo"))
	require.NoError(t, tx.BeginTransaction())
	for i := 5; i < 7; i++ { // offsets 5, 6, and the marker 7
		r := &kgo.Record{Value: []byte{byte(i)}, Timestamp: t0.Add(time.Duration(i) * time.Second)}
		require.NoError(t, tx.ProduceSync(ctx, r).FirstErr())
	}
	require.NoError(t, tx.EndTransaction(ctx, kgo.TryCommit))
	require.NoError(t, tx.BeginTransaction())
	open := now.Add(30 * time.Minute) // offset 8, the greatest timestamp, in a transaction left open
	require.NoError(t, tx.ProduceSync(ctx, &kgo.Record{Value: []byte{8}, Timestamp: open}).FirstErr())

	ms := func(at time.Time) int64 { return at.UnixMilli() }
	const ru, rc = 0, 1
	unsupported := kerr.UnsupportedVersion.Code
	for _, c := range []struct {
		version   int16
		isolation int8
		ts        int64
		code      int16
		offset    int64
		at        int64
	}{
		{1, ru, -1, 0, 9, -1},
		{2, rc, -1, 0, 8, -1},
		{2, ru, -2, 0, 0, -1},
		{6, ru, -3, unsupported, -1, -1},
		{7, ru, -3, 0, 8, ms(open)},
		{7, rc, -3, 0, -1, -1},
		{7, ru, -4, unsupported, -1, -1},
		{8, ru, -4, 0, 0, -1},
		{8, ru, -5, unsupported, -1, -1},
		{9, ru, -5, 0, -1, -1},
		{10, rc, -5, 0, -1, -1},
		{10, ru, -6, unsupported, -1, -1},
		{10, ru, -7, unsupported, -1, -1},
		{10, ru, ms(t0.Add(2 * time.Second)), 0, 2, ms(t0.Add(2 * time.Second))},
		{10, rc, ms(t0.Add(5500 * time.Millisecond)), 0, 6, ms(t0.Add(6 * time.Second))},
		{10, ru, ms(now.Add(10 * time.Minute)), 0, 8, ms(open)},
		{10, rc, ms(now.Add(10 * time.Minute)), 0, -1, -1},
		{10, ru, ms(now.Add(time.Hour)), 0, -1, -1},
	} {
		name := fmt.Sprintf("v%d isolation %d timestamp %d", c.version, c.isolation, c.ts)
		req := kmsg.NewPtrListOffsetsRequest()
		req.IsolationLevel = c.isolation
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "lo"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = c.ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		kresp, err := pinnedClient(t, p, 2, c.version).SeedBrokers()[0].Request(ctx, req)
		require.NoError(t, err, name)
		resp := kresp.(*kmsg.ListOffsetsResponse)
		require.Equal(t, c.version, resp.Version, name)
		got := resp.Topics[0].Partitions[0]
		require.Equal(t, c.code, got.ErrorCode, name)
		require.Equal(t, c.offset, got.Offset, name)
		require.Equal(t, c.at, got.Timestamp, name)
		if c.offset < 0 && c.version >= 4 {
			require.Equal(t, int32(-1), got.LeaderEpoch, name)
		}
	}

	// An empty partition: no record has the greatest timestamp.
	kafkatest.CreateTopic(t, p.client(t), "empty", 1, nil)
	for ts, want := range map[int64]int64{-1: 0, -2: 0, -3: -1, -4: 0, -5: -1} {
		got := listOffsets(t, pinnedClient(t, p, 2, 10), "empty", 0, ts)
		require.Zero(t, got.ErrorCode, "timestamp %d", ts)
		require.Equal(t, want, got.Offset, "timestamp %d", ts)
		require.Equal(t, int64(-1), got.Timestamp, "timestamp %d", ts)
	}

	// A partition named twice is answered once, INVALID_REQUEST; a topic
	// that does not exist is UNKNOWN_TOPIC_OR_PARTITION, -5 too.
	req := kmsg.NewPtrListOffsetsRequest()
	for topic, n := range map[string]int{"lo": 2, "nope": 1} {
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		for range n {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Timestamp = -5
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	kresp, err := p.client(t).SeedBrokers()[0].Request(ctx, req)
	require.NoError(t, err)
	resp := kresp.(*kmsg.ListOffsetsResponse)
	codes := map[string][]int16{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			codes[rt.Topic] = append(codes[rt.Topic], rp.ErrorCode)
		}
	}
	require.Equal(t, map[string][]int16{"lo": {kerr.InvalidRequest.Code}, "nope": {kerr.UnknownTopicOrPartition.Code}}, codes)
}
