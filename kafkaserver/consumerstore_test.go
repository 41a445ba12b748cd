package kafkaserver

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/kafkaerr"
)

// TestConsumerStoredRoundTrip: a consumer group's stored form decodes to
// the group it was made of (sessions and a revocation's timeout started
// at the load), encodes again to the same bytes, and is told from a
// classic group's value, which still loads as one.
func TestConsumerStoredRoundTrip(t *testing.T) {
	g, topic := storedExample()
	value := g.appendStored(nil)
	require.True(t, isConsumerStored(value))

	now := time.Unix(1000, 0)
	got, err := decodeConsumerStored("g", value, now, session)
	require.NoError(t, err)
	require.Equal(t, value, got.appendStored(nil), "re-encoding is stable")
	require.Equal(t, g.epoch, got.epoch)
	require.Equal(t, g.targetEpoch, got.targetEpoch)
	require.Equal(t, g.assignor, got.assignor)
	require.Equal(t, g.topics, got.topics)
	require.Equal(t, g.names, got.names)
	require.Equal(t, g.target, got.target)
	require.Equal(t, g.static, got.static)
	a, b := got.members["a"], got.members["b"]
	require.Equal(t, int32(6), a.epoch)
	require.Equal(t, int32(5), a.prevEpoch)
	require.Equal(t, assignment{topic: {0, 1}}, a.assigned)
	require.Equal(t, assignment{topic: {2}}, a.revoking)
	require.Equal(t, assignment{topic: {0, 1, 2}}, a.owned)
	require.Equal(t, now.Add(rebalance), a.revokeBy, "the revocation's timeout starts at the load")
	require.Equal(t, now.Add(session), a.expires, "the session starts at the load")
	require.Equal(t, "i1", *b.instanceID)
	require.Equal(t, "r1", b.rack)
	require.True(t, b.subscribes("events"))
	require.Nil(t, b.revoking)
	require.True(t, b.revokeBy.IsZero())

	_, err = decodeConsumerStored("g", []byte(`{"version":3,"kind":"consumer"}`), now, session)
	require.Error(t, err, "an unknown version is not read")

	// A classic group's value (an old one, version 3) is not taken for a
	// consumer group's, and loads as a classic group.
	v := kmsg.NewGroupMetadataValue()
	v.Version, v.ProtocolType, v.Generation = 3, "consumer", 4
	v.Protocol, v.Leader = kmsg.StringPtr("range"), kmsg.StringPtr("m")
	vm := kmsg.NewGroupMetadataValueMember()
	vm.MemberID, vm.SessionTimeoutMillis, vm.RebalanceTimeoutMillis = "m", 30000, 30000
	v.Members = append(v.Members, vm)
	classic := v.AppendTo(nil)
	require.False(t, isConsumerStored(classic))
	gs := newGroups(groupOptions{ConsumerSession: session}, nil)
	defer gs.Close()
	require.NoError(t, gs.restore("classic", classic, now))
	require.NoError(t, gs.restore("g", value, now))
	gs.mu.Lock()
	defer gs.mu.Unlock()
	require.NotNil(t, gs.mu.groups["classic"])
	require.Equal(t, int32(4), gs.mu.groups["classic"].generation)
	require.Nil(t, gs.mu.consumer["classic"])
	require.NotNil(t, gs.mu.consumer["g"])
	require.Equal(t, int32(7), gs.mu.consumer["g"].epoch)
}

// TestConsumerGroupTakeover: on a cluster node, a consumer group of two
// members, one of them revoking partitions for the other, is stored; when
// another node claims the group, this node's next store is fenced and it
// drops the group; when it takes the group over again it loads the
// stored state: both members carry on at their epochs with their
// assignments, the revoking one still revoking, and the reconciliation
// completes as before.
func TestConsumerGroupTakeover(t *testing.T) {
	ctx := t.Context()
	p := startBroker(t, &Config{Clustered: true})
	cl := p.client(t)
	topicID, err := p.b.CreateTopic(ctx, "orders", diskless.TopicConfig{Partitions: 4})
	require.NoError(t, err)
	const group = "consumer-kept"
	send := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := cl.Broker(0).Request(ctx, req) // no retries
		require.NoError(t, err)
		return resp
	}
	hb := func(member string, epoch int32, owned []int32) *kmsg.ConsumerGroupHeartbeatResponse {
		t.Helper()
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version, req.Group, req.MemberID, req.MemberEpoch = 1, group, member, epoch
		req.RebalanceTimeoutMillis = -1
		if owned != nil {
			rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
			rt.TopicID, rt.Partitions = topicID, owned
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{rt}
		}
		if epoch == 0 {
			req.SubscribedTopicNames = []string{"orders"}
			req.RebalanceTimeoutMillis = 60000
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		}
		return send(req).(*kmsg.ConsumerGroupHeartbeatResponse)
	}
	ok := func(r *kmsg.ConsumerGroupHeartbeatResponse) *kmsg.ConsumerGroupHeartbeatResponse {
		t.Helper()
		require.Zero(t, r.ErrorCode, "%v", r.ErrorMessage)
		return r
	}

	r := ok(hb("a", 0, nil))
	require.Equal(t, int32(1), r.MemberEpoch)
	require.Equal(t, []int32{0, 1, 2, 3}, partitions(r))
	ok(hb("a", 1, []int32{0, 1, 2, 3}))
	r = ok(hb("b", 0, nil)) // group epoch 2: two partitions each
	require.Equal(t, int32(2), r.MemberEpoch)
	require.Empty(t, partitions(r), "a still holds them")
	r = ok(hb("a", 1, []int32{0, 1, 2, 3})) // told to revoke two
	require.Equal(t, int32(1), r.MemberEpoch)
	kept := partitions(r)
	require.Len(t, kept, 2)

	md, err := p.b.GroupMetadata(ctx, group)
	require.NoError(t, err)
	require.True(t, isConsumerStored(md.Value))
	require.Equal(t, int64(2), md.Generation, "stored at the group epoch")
	stored, err := decodeConsumerStored(group, md.Value, time.Now(), time.Minute)
	require.NoError(t, err)
	require.Len(t, stored.members, 2)
	require.Equal(t, int32(1), stored.members["a"].epoch)
	require.Len(t, stored.members["a"].revoking[topicID], 2)
	require.Equal(t, int32(2), stored.members["b"].epoch)

	// Another node claims the group. A join here stores under the lost
	// claim: fenced, NOT_COORDINATOR, and this node drops the group; it
	// takes it over again on a later request, loading the stored state.
	_, err = p.b.ClaimGroup(ctx, group)
	require.NoError(t, err)
	require.Equal(t, kerr.NotCoordinator.Code, hb("c", 0, nil).ErrorCode)
	require.Eventually(t, func() bool { return hb("b", 2, nil).ErrorCode == 0 },
		10*time.Second, 50*time.Millisecond, "b carries on at its epoch")

	// a, still owning all four, is still revoking two, at its epoch.
	r = ok(hb("a", 1, []int32{0, 1, 2, 3}))
	require.Equal(t, int32(1), r.MemberEpoch)
	require.Equal(t, kept, partitions(r), "no reassignment")
	r = ok(hb("b", 2, []int32{}))
	require.Equal(t, int32(2), r.MemberEpoch)
	require.Empty(t, partitions(r), "the partitions a revokes are not given yet")

	// a gives them up: it moves to epoch 2, and b gets them.
	r = ok(hb("a", 1, kept))
	require.Equal(t, int32(2), r.MemberEpoch)
	r = ok(hb("b", 2, []int32{}))
	require.Equal(t, int32(2), r.MemberEpoch)
	require.Len(t, partitions(r), 2)
	require.NotContains(t, partitions(r), kept[0])
	require.NotContains(t, partitions(r), kept[1])

	d := kmsg.NewPtrConsumerGroupDescribeRequest()
	d.Groups = []string{group}
	dr := send(d).(*kmsg.ConsumerGroupDescribeResponse)
	require.Len(t, dr.Groups, 1)
	require.Zero(t, dr.Groups[0].ErrorCode)
	require.Equal(t, int32(2), dr.Groups[0].Epoch, "no new group epoch")
	require.Len(t, dr.Groups[0].Members, 2, "c's join was not kept")
}

// storedExample is a consumer group of two members, one static and one
// revoking a partition, over one topic, and the topic's ID.
func storedExample() (*cgroup, uuid.UUID) {
	topic := uuid.MustParse("6f1c2a4e-0b7d-4c3e-9a51-2d8e4f6a7b90")
	inst := "i1"
	g := &cgroup{id: "g", epoch: 7, targetEpoch: 7, assignor: assignorRange,
		topics: map[uuid.UUID]int32{topic: 4}, names: map[uuid.UUID]string{topic: "events"},
		target: map[string]assignment{"a": {topic: {0, 1}}, "b": {topic: {2, 3}}},
		static: map[string]string{inst: "b"}, members: map[string]*cmember{}}
	g.members["a"] = &cmember{id: "a", clientID: "c", clientHost: "/h", epoch: 6, prevEpoch: 5, rebalanceTimeout: rebalance,
		subscribed: []string{"events"}, serverAssignor: assignorRange,
		assigned: assignment{topic: {0, 1}}, revoking: assignment{topic: {2}}, owned: assignment{topic: {0, 1, 2}}}
	g.members["b"] = &cmember{id: "b", instanceID: &inst, rack: "r1", epoch: 7, prevEpoch: 6, rebalanceTimeout: time.Minute,
		regex: "ev.*", re: regexp.MustCompile("^(?:ev.*)$"), assigned: assignment{topic: {3}}, owned: assignment{topic: {3}}}
	return g, topic
}

// TestConsumerStoredGolden: the stored form of version 1 is read and
// written as testdata/consumergroup-v1.json has it.
func TestConsumerStoredGolden(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("testdata", "consumergroup-v1.json"))
	require.NoError(t, err)
	golden = bytes.TrimSpace(golden)
	g, _ := storedExample()
	require.Equal(t, string(golden), string(g.appendStored(nil)), "written")
	got, err := decodeConsumerStored("g", golden, time.Unix(1000, 0), session)
	require.NoError(t, err)
	require.Equal(t, string(golden), string(got.appendStored(nil)), "read")
}

// FuzzConsumerStored: decoding never panics, and what decodes encodes
// again stably.
func FuzzConsumerStored(f *testing.F) {
	g, _ := storedExample()
	f.Add(g.appendStored(nil))
	f.Add([]byte(`{"version":1,"kind":"consumer","members":[{"id":"x","regex":"("}]}`))
	f.Fuzz(func(t *testing.T, value []byte) {
		got, err := decodeConsumerStored("g", value, time.Unix(1000, 0), session)
		if err != nil {
			return
		}
		once := got.appendStored(nil)
		again, err := decodeConsumerStored("g", once, time.Unix(1000, 0), session)
		require.NoError(t, err)
		require.Equal(t, string(once), string(again.appendStored(nil)))
	})
}

// TestConsumerStoreWrites: a heartbeat stores what it changes, and one
// that changes nothing stores nothing; a failed store is the answer's
// error, and the next heartbeat stores again.
func TestConsumerStoreWrites(t *testing.T) {
	var mu sync.Mutex
	var values [][]byte
	var failNext bool
	gs := newGroups(groupOptions{ConsumerSession: session}, nil)
	defer gs.Close()
	gs.store = func(_ context.Context, _ string, _ int64, _ int32, value []byte) error {
		mu.Lock()
		defer mu.Unlock()
		if failNext {
			failNext = false
			return kafkaerr.New(kafkaerr.RequestTimedOut, "injected")
		}
		values = append(values, value)
		return nil
	}
	gs.claimOf = func(string) int64 { return 1 }
	stores := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(values)
	}
	topic := uuid.New()
	td := diskless.TopicDescription{Name: "events", ID: topic}
	td.Config.Partitions = 2
	hb := func(epoch int32, owned []int32) *kmsg.ConsumerGroupHeartbeatResponse {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version, req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = 1, "g", "a", epoch, -1
		if epoch == 0 {
			req.SubscribedTopicNames, req.RebalanceTimeoutMillis = []string{"events"}, 60000
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		} else if owned != nil {
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: topic, Partitions: owned}}
		}
		return gs.consumerHeartbeat(req, []diskless.TopicDescription{td}, "client", "/h").(*kmsg.ConsumerGroupHeartbeatResponse)
	}
	r := hb(0, nil)
	require.Zero(t, r.ErrorCode)
	require.Equal(t, 2, stores(), "what was stored for the name deleted, then the group")
	require.Nil(t, values[0])
	require.True(t, isConsumerStored(values[1]))
	require.Zero(t, hb(1, []int32{0, 1}).ErrorCode)
	n := stores() // the owned partitions reported
	for range 3 {
		require.Zero(t, hb(1, nil).ErrorCode)
		require.Zero(t, hb(1, []int32{0, 1}).ErrorCode)
	}
	require.Equal(t, n, stores(), "heartbeats that change nothing store nothing")

	mu.Lock()
	failNext = true
	mu.Unlock()
	r = hb(1, []int32{0}) // a change, whose store fails
	require.Equal(t, kerr.CoordinatorNotAvailable.Code, r.ErrorCode)
	require.Equal(t, n, stores())
	require.Zero(t, hb(1, []int32{0}).ErrorCode)
	require.Equal(t, n+1, stores(), "stored again")
}
