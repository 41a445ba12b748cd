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

// viewFixture is a broker with a group of each kind, for the requests
// of those who look at groups: "simple" has committed offsets and has
// never had members (Kafka's simple group); "classic" has one static
// member (instance "i-1"), Stable with partitions 0-2 of "events";
// "kip848" one member of the consumer protocol, holding them too.
type viewFixture struct {
	p      *testBroker
	cl     *kgo.Client
	member string // the classic group's member ID
	gen    int32  // and its generation
	cg     *cgMember
}

func newViewFixture(t *testing.T) *viewFixture {
	t.Helper()
	p := startBroker(t, nil)
	cl := p.client(t)
	kafkatest.CreateTopic(t, cl, "events", 3, nil)
	f := &viewFixture{p: p, cl: cl}
	require.Zero(t, commitOffset(t, pinnedClient(t, p, 8, 9), 9, "simple", "", -1, 0, 3))

	instance := "i-1"
	jr := joinClassic(t, cl, "classic", instance, "consumer")
	f.member, f.gen = jr.MemberID, jr.Generation
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.Generation, sync.MemberID, sync.InstanceID = "classic", jr.Generation, jr.MemberID, &instance
	ptype, proto := "consumer", "range"
	sync.ProtocolType, sync.Protocol = &ptype, &proto
	a := kmsg.NewConsumerMemberAssignment()
	at := kmsg.NewConsumerMemberAssignmentTopic()
	at.Topic, at.Partitions = "events", []int32{0, 1, 2}
	a.Topics = append(a.Topics, at)
	sa := kmsg.NewSyncGroupRequestGroupAssignment()
	sa.MemberID, sa.MemberAssignment = jr.MemberID, a.AppendTo(nil)
	sync.GroupAssignment = append(sync.GroupAssignment, sa)
	sr, err := sync.RequestWith(t.Context(), cl)
	require.NoError(t, err)
	require.Zero(t, sr.ErrorCode)

	f.cg = &cgMember{t: t, cl: cl, group: "kip848", id: "member-a", topic: topicID(t, cl, "events")}
	r := f.cg.heartbeat([]int32{})
	require.Zero(t, r.ErrorCode)
	require.Equal(t, []int32{0, 1, 2}, f.cg.assigned(r))
	require.Zero(t, f.cg.heartbeat([]int32{0, 1, 2}).ErrorCode)
	return f
}

// joinClassic joins a static member (instance) to the classic group of
// protocol type ptype, subscribed to "events" with the range assignor,
// and returns the answer: with no other member, it leads at once.
func joinClassic(t *testing.T, cl *kgo.Client, group, instance, ptype string) *kmsg.JoinGroupResponse {
	t.Helper()
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = group, 30_000, 30_000
	join.InstanceID, join.ProtocolType = &instance, ptype
	md := kmsg.NewConsumerMemberMetadata()
	md.Topics = []string{"events"}
	jp := kmsg.NewJoinGroupRequestProtocol()
	jp.Name, jp.Metadata = "range", md.AppendTo(nil)
	join.Protocols = append(join.Protocols, jp)
	jr, err := join.RequestWith(t.Context(), cl)
	require.NoError(t, err)
	require.Zero(t, jr.ErrorCode)
	return jr
}

// TestDescribeGroupsBeforeSync: a classic group between its join and its
// sync (CompletingRebalance) is described with its members but no
// protocol, metadata or assignments: Kafka 4 tells those in Stable only.
// OffsetDelete to a classic group with members of another protocol type
// than "consumer" is NON_EMPTY_GROUP (ClassicGroup.validateOffsetDelete).
func TestDescribeGroupsBeforeSync(t *testing.T) {
	f := newViewFixture(t)
	jr := joinClassic(t, f.cl, "syncing", "i-s", "consumer")
	joinClassic(t, f.cl, "connect", "i-c", "connect")
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{"syncing"}
	resp, err := req.RequestWith(t.Context(), f.cl)
	require.NoError(t, err)
	g := resp.Groups[0]
	require.Zero(t, g.ErrorCode)
	require.Equal(t, "CompletingRebalance", g.State)
	require.Equal(t, "consumer", g.ProtocolType)
	require.Empty(t, g.Protocol)
	require.Len(t, g.Members, 1)
	require.Equal(t, jr.MemberID, g.Members[0].MemberID)
	require.Empty(t, g.Members[0].ProtocolMetadata)
	require.Empty(t, g.Members[0].MemberAssignment)

	for group, want := range map[string]int16{"connect": kerr.NonEmptyGroup.Code, "simple": 0} {
		del := kmsg.NewPtrOffsetDeleteRequest()
		del.Group = group
		dt := kmsg.NewOffsetDeleteRequestTopic()
		dt.Topic = "events"
		dp := kmsg.NewOffsetDeleteRequestTopicPartition()
		dt.Partitions = append(dt.Partitions, dp)
		del.Topics = append(del.Topics, dt)
		dr, err := del.RequestWith(t.Context(), f.cl)
		require.NoError(t, err)
		require.Equal(t, want, dr.ErrorCode, group)
	}
}

// commitOffset commits offset of partition of "events" for group, at
// version (cl must be pinned to it), as member at generation (epoch), and
// returns the error code.
func commitOffset(t *testing.T, cl *kgo.Client, version int16, group, member string, generation, partition int32, offset int64) int16 {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.MemberID, req.Generation = version, group, member, generation
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "events"
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = partition, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := cl.Request(t.Context(), req)
	require.NoError(t, err)
	resp := kresp.(*kmsg.OffsetCommitResponse)
	require.Equal(t, version, resp.Version)
	return resp.Topics[0].Partitions[0].ErrorCode
}

// TestDescribeGroupsAsKafka: DescribeGroups at every version answers each
// kind of group as Kafka 4's GroupMetadataManager.describeGroups does.
func TestDescribeGroupsAsKafka(t *testing.T) {
	f := newViewFixture(t)
	type want struct {
		code                   int16
		msg                    string // version 6 on
		state, ptype, protocol string
		members                int
		ops                    int32 // with IncludeAuthorizedOperations (version 3 on)
	}
	const omitted = -2147483648
	for version := int16(0); version <= 6; version++ {
		for _, c := range []struct {
			group string
			want  want
		}{
			{"nope", want{state: "Dead", ops: groupOperations}},
			{"simple", want{state: "Empty", ops: groupOperations}},
			{"classic", want{state: "Stable", ptype: "consumer", protocol: "range", members: 1, ops: groupOperations}},
			{"kip848", want{state: "Dead", ops: groupOperations}},
		} {
			w := c.want
			if version >= 6 && w.state == "Dead" {
				w.code, w.ops = kerr.GroupIDNotFound.Code, omitted
				w.msg = map[string]string{"nope": "Group nope not found.", "kip848": "Group kip848 is not a classic group."}[c.group]
			}
			if version < 3 {
				w.ops = omitted
			}
			req := kmsg.NewPtrDescribeGroupsRequest()
			req.Groups, req.IncludeAuthorizedOperations = []string{c.group}, true
			kresp, err := pinnedClient(t, f.p, 15, version).Request(t.Context(), req)
			require.NoError(t, err)
			resp := kresp.(*kmsg.DescribeGroupsResponse)
			require.Equal(t, version, resp.Version)
			require.Len(t, resp.Groups, 1)
			g := resp.Groups[0]
			name := fmt.Sprintf("%s v%d", c.group, version)
			require.Equal(t, w.code, g.ErrorCode, name)
			if version >= 6 {
				require.Equal(t, w.msg, deref(g.ErrorMessage), name)
			}
			require.Equal(t, w.state, g.State, name)
			require.Equal(t, w.ptype, g.ProtocolType, name)
			require.Equal(t, w.protocol, g.Protocol, name)
			require.Len(t, g.Members, w.members, name)
			require.Equal(t, w.ops, g.AuthorizedOperations, name)
			if w.members == 1 {
				m := g.Members[0]
				require.Equal(t, f.member, m.MemberID, name)
				require.Equal(t, "/127.0.0.1", m.ClientHost, name)
				if version >= 4 {
					require.Equal(t, "i-1", deref(m.InstanceID), name)
				}
				var md kmsg.ConsumerMemberMetadata
				require.NoError(t, md.ReadFrom(m.ProtocolMetadata), name)
				require.Equal(t, []string{"events"}, md.Topics, name)
				var a kmsg.ConsumerMemberAssignment
				require.NoError(t, a.ReadFrom(m.MemberAssignment), name)
				require.Equal(t, []int32{0, 1, 2}, a.Topics[0].Partitions, name)
			}
		}
	}
}

// TestConsumerGroupDescribeAsKafka: ConsumerGroupDescribe describes the
// consumer group (state, epochs, assignor, members, assignments by topic
// ID and name), and answers any other GROUP_ID_NOT_FOUND with Kafka 4's
// message and no authorized operations; a static member away (epoch -2)
// makes the group Reconciling, as in Kafka 4.
func TestConsumerGroupDescribeAsKafka(t *testing.T) {
	f := newViewFixture(t)
	describe := func(group string) kmsg.ConsumerGroupDescribeResponseGroup {
		t.Helper()
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups, req.IncludeAuthorizedOperations = []string{group}, true
		resp, err := req.RequestWith(t.Context(), f.cl)
		require.NoError(t, err)
		require.Len(t, resp.Groups, 1)
		return resp.Groups[0]
	}
	for group, msg := range map[string]string{
		"nope":    "Group nope not found.",
		"simple":  "Group simple is not a consumer group.",
		"classic": "Group classic is not a consumer group.",
	} {
		g := describe(group)
		require.Equal(t, kerr.GroupIDNotFound.Code, g.ErrorCode, group)
		require.Equal(t, msg, deref(g.ErrorMessage), group)
		require.Equal(t, int32(-2147483648), g.AuthorizedOperations, group)
	}

	g := describe("kip848")
	require.Zero(t, g.ErrorCode)
	require.Equal(t, "Stable", g.State)
	require.Equal(t, int32(1), g.Epoch)
	require.Equal(t, int32(1), g.AssignmentEpoch)
	require.Equal(t, "uniform", g.AssignorName)
	require.Equal(t, int32(groupOperations), g.AuthorizedOperations)
	require.Len(t, g.Members, 1)
	m := g.Members[0]
	require.Equal(t, "member-a", m.MemberID)
	require.Equal(t, "/127.0.0.1", m.ClientHost, "as Kafka's InetAddress.toString: no port")
	require.Equal(t, int32(1), m.MemberEpoch)
	require.Equal(t, []string{"events"}, m.SubscribedTopics)
	require.Len(t, m.Assignment.TopicPartitions, 1)
	require.Equal(t, "events", m.Assignment.TopicPartitions[0].Topic)
	require.Equal(t, f.cg.topic, m.Assignment.TopicPartitions[0].TopicID)
	require.Equal(t, []int32{0, 1, 2}, m.Assignment.TopicPartitions[0].Partitions)
	require.Equal(t, m.Assignment, m.TargetAssignment)

	// A second member, static and asking for the range assignor, then
	// away for a while (epoch -2): the group names the assignor most
	// members ask for, and is Reconciling while the member is away.
	b := &cgMember{t: t, cl: f.cl, group: "kip848", id: "member-b", topic: f.cg.topic}
	instance, rangeAssignor := "i-b", "range"
	r := b.heartbeat([]int32{}, func(req *kmsg.ConsumerGroupHeartbeatRequest) {
		req.InstanceID, req.ServerAssignor = &instance, &rangeAssignor
	})
	require.Zero(t, r.ErrorCode)
	require.Equal(t, "range", describe("kip848").AssignorName)
	owned := map[*cgMember][]int32{f.cg: {0, 1, 2}, b: {}}
	for range 3 { // a gives up what b is to have, reports it given up; b takes it
		for _, m := range []*cgMember{f.cg, b} {
			r := m.heartbeat(owned[m])
			require.Zero(t, r.ErrorCode)
			if got := m.assigned(r); got != nil {
				owned[m] = got
			}
		}
	}
	require.Equal(t, []int32{0, 1}, owned[f.cg])
	require.Equal(t, []int32{2}, owned[b])
	g = describe("kip848")
	require.Equal(t, "Stable", g.State, "both at the target: %+v", g.Members)
	require.Zero(t, b.heartbeat(nil, func(req *kmsg.ConsumerGroupHeartbeatRequest) {
		req.InstanceID, req.MemberEpoch = &instance, -2
	}).ErrorCode)
	g = describe("kip848")
	require.Equal(t, "Reconciling", g.State)
	require.Len(t, g.Members, 2)
	require.Equal(t, int32(-2), g.Members[1].MemberEpoch)
}

// TestListGroupsAsKafka: ListGroups lists every group with its protocol
// type, its state (version 4 on) and its type (version 5 on), and
// filters by state (case-insensitive, trimmed) and by type
// (case-insensitive); a filter naming nothing known lists nothing.
func TestListGroupsAsKafka(t *testing.T) {
	f := newViewFixture(t)
	type listed struct{ group, ptype, state, kind string }
	all := []listed{
		{"classic", "consumer", "Stable", "classic"},
		{"kip848", "consumer", "Stable", "consumer"},
		{"simple", "", "Empty", "classic"},
	}
	for _, c := range []struct {
		version       int16
		states, types []string
		want          []string
	}{
		{0, nil, nil, []string{"classic", "kip848", "simple"}},
		{3, nil, nil, []string{"classic", "kip848", "simple"}},
		{4, []string{" stable "}, nil, []string{"classic", "kip848"}},
		{4, []string{"EMPTY"}, nil, []string{"simple"}},
		{4, []string{"Dead"}, nil, nil},
		{5, nil, []string{"CONSUMER"}, []string{"kip848"}},
		{5, nil, []string{"classic"}, []string{"classic", "simple"}},
		{5, []string{"Stable"}, []string{"classic"}, []string{"classic"}},
		{5, nil, []string{"share"}, nil},
		{5, nil, []string{" consumer"}, nil},
	} {
		req := kmsg.NewPtrListGroupsRequest()
		req.StatesFilter, req.TypesFilter = c.states, c.types
		kresp, err := pinnedClient(t, f.p, 16, c.version).SeedBrokers()[0].Request(t.Context(), req)
		require.NoError(t, err)
		resp := kresp.(*kmsg.ListGroupsResponse)
		require.Equal(t, c.version, resp.Version)
		require.Zero(t, resp.ErrorCode)
		var got []string
		for _, g := range resp.Groups {
			got = append(got, g.Group)
			for _, l := range all {
				if l.group != g.Group {
					continue
				}
				require.Equal(t, l.ptype, g.ProtocolType, g.Group)
				if c.version >= 4 {
					require.Equal(t, l.state, g.GroupState, g.Group)
				}
				if c.version >= 5 {
					require.Equal(t, l.kind, g.GroupType, g.Group)
				}
			}
		}
		require.Equal(t, c.want, got, "v%d states %q types %q", c.version, c.states, c.types)
	}
}

// TestOffsetCommitToNoGroupAsKafka: a commit with a generation to a group
// that does not exist is ILLEGAL_GENERATION before version 9 and
// GROUP_ID_NOT_FOUND from it; to a group that exists with no members (it
// has committed offsets) UNKNOWN_MEMBER_ID; with generation -1 it
// commits, as Kafka 4's OffsetMetadataManager.validateOffsetCommit
// decides.
func TestOffsetCommitToNoGroupAsKafka(t *testing.T) {
	f := newViewFixture(t)
	for _, c := range []struct {
		version    int16
		group      string
		generation int32
		want       int16
	}{
		{8, "ghost", 1, kerr.IllegalGeneration.Code},
		{9, "ghost", 1, kerr.GroupIDNotFound.Code},
		{9, "ghost", 0, kerr.GroupIDNotFound.Code},
		{8, "simple", 1, kerr.UnknownMemberID.Code},
		{9, "simple", 1, kerr.UnknownMemberID.Code},
		{8, "classic", f.gen + 1, kerr.IllegalGeneration.Code},
		{8, "classic", f.gen, 0},
		{9, "kip848", 5, kerr.FencedMemberEpoch.Code},
		{8, "kip848", 1, kerr.UnsupportedVersion.Code},
		{8, "kip848", -1, kerr.UnsupportedVersion.Code},
		{9, "kip848", 1, 0},
		{9, "ghost", -1, 0},
	} {
		member := ""
		switch c.group {
		case "classic":
			member = f.member
		case "kip848":
			member = f.cg.id
		}
		require.Equal(t, c.want, commitOffset(t, pinnedClient(t, f.p, 8, c.version), c.version, c.group, member, c.generation, 1, 2),
			"v%d %s generation %d", c.version, c.group, c.generation)
	}
}

// TestKafkaClientHost: a member's host is told as Kafka tells it: "/"
// and the address, no port, an IPv6 address in Java's long form.
func TestKafkaClientHost(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:53016": "/127.0.0.1",
		"[::1]:9092":      "/0:0:0:0:0:0:0:1",
		"10.0.0.7":        "/10.0.0.7",
		"/10.0.0.7":       "/10.0.0.7",
		"":                "",
	} {
		require.Equal(t, want, kafkaClientHost(in), in)
	}
}

// TestConsumerGroupClassicMemberAsKafka: a member of the classic protocol
// in a consumer group (consumerclassic.go) is described with member type
// 0 (Kafka 4.1's ConsumerGroupMember.asConsumerGroupDescribeMember); an
// OffsetFetch naming it at another generation is ILLEGAL_GENERATION, not
// STALE_MEMBER_EPOCH, and its commits below version 9 are not refused
// (ConsumerGroup.validateOffsetFetch and validateOffsetCommit); the group
// is still no classic group to DescribeGroups.
func TestConsumerGroupClassicMemberAsKafka(t *testing.T) {
	f := newViewFixture(t)
	jr := joinClassic(t, f.cl, "kip848", "i-x", "consumer")
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{"kip848"}
	resp, err := req.RequestWith(t.Context(), f.cl)
	require.NoError(t, err)
	types := map[string]int8{}
	for _, m := range resp.Groups[0].Members {
		types[m.MemberID] = m.MemberType
	}
	require.Equal(t, map[string]int8{"member-a": 1, jr.MemberID: 0}, types)

	fetch := func(epoch int32) int16 {
		t.Helper()
		req := kmsg.NewPtrOffsetFetchRequest()
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group, rg.MemberID, rg.MemberEpoch = "kip848", &jr.MemberID, epoch
		req.Groups = append(req.Groups, rg)
		resp, err := req.RequestWith(t.Context(), f.cl)
		require.NoError(t, err)
		return resp.Groups[0].ErrorCode
	}
	require.Zero(t, fetch(jr.Generation))
	require.Equal(t, kerr.IllegalGeneration.Code, fetch(jr.Generation+1))
	require.Zero(t, commitOffset(t, pinnedClient(t, f.p, 8, 8), 8, "kip848", jr.MemberID, jr.Generation, 0, 1))

	dreq := kmsg.NewPtrDescribeGroupsRequest()
	dreq.Groups = []string{"kip848"}
	dresp, err := dreq.RequestWith(t.Context(), f.cl)
	require.NoError(t, err)
	require.Equal(t, kerr.GroupIDNotFound.Code, dresp.Groups[0].ErrorCode)
}

// TestEmptiedGroupsAsKafka: a group whose members all left, known by its
// committed offsets, is told with the kind and protocol type it had, as
// Kafka tells the empty group it keeps: ListGroups lists a consumer group
// as "consumer", ConsumerGroupDescribe describes it Empty at the epoch it
// had, and DescribeGroups says it is not a classic group; a classic group
// is listed and described Empty with its protocol type. A member of the
// consumer protocol joining again goes on from the epoch it had.
func TestEmptiedGroupsAsKafka(t *testing.T) {
	f := newViewFixture(t)
	require.Zero(t, commitOffset(t, pinnedClient(t, f.p, 8, 9), 9, "kip848", f.cg.id, f.cg.epoch, 0, 1))
	require.Zero(t, commitOffset(t, pinnedClient(t, f.p, 8, 9), 9, "classic", f.member, f.gen, 0, 1))
	epoch := f.cg.epoch
	require.Zero(t, f.cg.heartbeat(nil, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -1 }).ErrorCode)
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group = "classic"
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.InstanceID = kmsg.StringPtr("i-1")
	leave.Members = append(leave.Members, lm)
	lresp, err := leave.RequestWith(t.Context(), f.cl)
	require.NoError(t, err)
	require.Zero(t, lresp.Members[0].ErrorCode)

	require.Eventually(t, func() bool { // the coordinator drops empty groups from memory on its tick
		f.p.srv.groups.mu.Lock()
		defer f.p.srv.groups.mu.Unlock()
		return f.p.srv.groups.mu.consumer["kip848"] == nil && f.p.srv.groups.mu.groups["classic"] == nil
	}, 10*time.Second, 20*time.Millisecond)

	list := kmsg.NewPtrListGroupsRequest()
	lg, err := list.RequestWith(t.Context(), f.cl)
	require.NoError(t, err)
	got := map[string][3]string{}
	for _, g := range lg.Groups {
		got[g.Group] = [3]string{g.GroupType, g.ProtocolType, g.GroupState}
	}
	require.Equal(t, [3]string{"consumer", "consumer", "Empty"}, got["kip848"])
	require.Equal(t, [3]string{"classic", "consumer", "Empty"}, got["classic"])

	d := describeConsumer(t, f.cl, "kip848")
	require.Zero(t, d.ErrorCode)
	require.Equal(t, "Empty", d.State)
	require.Equal(t, epoch+1, d.Epoch, "the epoch it had: the leave moved it on")
	require.Empty(t, d.Members)
	dg := describeClassic(t, f.cl, "kip848")
	require.Equal(t, kerr.GroupIDNotFound.Code, dg.ErrorCode)
	dg = describeClassic(t, f.cl, "classic")
	require.Zero(t, dg.ErrorCode)
	require.Equal(t, "Empty", dg.State)
	require.Equal(t, "consumer", dg.ProtocolType)

	again := &cgMember{t: t, cl: f.cl, group: "kip848", id: "member-b", topic: f.cg.topic}
	r := again.heartbeat([]int32{})
	require.Zero(t, r.ErrorCode)
	require.Equal(t, epoch+2, r.MemberEpoch, "the group goes on from its epoch")
}

// TestCommitDuringSyncAsKafka: during a classic group's sync barrier, a
// commit by a member the group does not have is UNKNOWN_MEMBER_ID and one
// at another generation ILLEGAL_GENERATION; only a commit by the member at
// its generation is REBALANCE_IN_PROGRESS (ClassicGroup.validateOffsetCommit
// checks the member, then the generation, then the state).
func TestCommitDuringSyncAsKafka(t *testing.T) {
	f := newViewFixture(t)
	jr := joinClassic(t, f.cl, "syncing", "i-s", "consumer")
	cl := pinnedClient(t, f.p, 8, 8)
	require.Equal(t, kerr.UnknownMemberID.Code, commitOffset(t, cl, 8, "syncing", "nobody", jr.Generation, 0, 1))
	require.Equal(t, kerr.IllegalGeneration.Code, commitOffset(t, cl, 8, "syncing", jr.MemberID, jr.Generation+1, 0, 1))
	require.Equal(t, kerr.RebalanceInProgress.Code, commitOffset(t, cl, 8, "syncing", jr.MemberID, jr.Generation, 0, 1))
}
