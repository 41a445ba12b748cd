package kafkaserver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/internal/kafkatest"
)

// staticGroup runs franz-go members of a group, each with a group
// instance ID, and records what each consumed, owns and lost.
type staticGroup struct {
	t            *testing.T
	p            *testBroker
	group, topic string

	mu       sync.Mutex
	owned    map[string]map[int32]bool // by member name
	revoked  map[string]int            // revocations and losses, by member name
	consumed map[string]int            // record value -> times consumed
	errs     map[string][]error        // errors polled, by member name
	changed  chan struct{}
}

func newStaticGroup(t *testing.T, p *testBroker, group, topic string) *staticGroup {
	return &staticGroup{t: t, p: p, group: group, topic: topic, owned: map[string]map[int32]bool{},
		revoked: map[string]int{}, consumed: map[string]int{}, errs: map[string][]error{}, changed: make(chan struct{}, 1)}
}

func (s *staticGroup) notify() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// staticMember is one running franz-go member.
type staticMember struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
}

// start starts a member called name with instance ID instance.
func (s *staticGroup) start(name, instance string) *staticMember {
	s.mu.Lock()
	s.owned[name] = map[int32]bool{}
	s.mu.Unlock()
	update := func(ps map[string][]int32, on bool) {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, p := range ps[s.topic] {
			if on {
				s.owned[name][p] = true
			} else {
				delete(s.owned[name], p)
			}
		}
		if !on && len(ps[s.topic]) > 0 {
			s.revoked[name]++
		}
		s.notify()
	}
	cl := s.p.client(s.t, kgo.ConsumerGroup(s.group), kgo.ConsumeTopics(s.topic), kgo.InstanceID(instance),
		kgo.DisableAutoCommit(), kgo.SessionTimeout(30*time.Second),
		kgo.HeartbeatInterval(100*time.Millisecond), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { update(ps, true) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { update(ps, false) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { update(ps, false) }),
	)
	ctx, cancel := context.WithCancel(s.t.Context())
	m := &staticMember{cl: cl, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				return
			}
			s.mu.Lock()
			fs.EachError(func(_ string, _ int32, err error) { s.errs[name] = append(s.errs[name], err) })
			for _, r := range fs.Records() {
				s.consumed[string(r.Value)]++
			}
			s.notify()
			s.mu.Unlock()
		}
	}()
	return m
}

// stop stops polling, commits what the member consumed and closes it (a
// static member does not leave the group).
func (s *staticGroup) stop(m *staticMember) {
	m.cancel()
	<-m.done
	require.NoError(s.t, m.cl.CommitUncommittedOffsets(s.t.Context()))
	m.cl.Close()
}

// waitFor waits until cond holds, called with s.mu held.
func (s *staticGroup) waitFor(what string, cond func() bool) {
	s.t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		s.mu.Lock()
		ok := cond()
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-s.changed:
		case <-timeout:
			s.mu.Lock()
			defer s.mu.Unlock()
			s.t.Fatalf("waiting for %s: owned %v, %d records, errors %v", what, s.owned, len(s.consumed), s.errs)
		}
	}
}

// produce produces n records named by round, spread over partitions.
func (s *staticGroup) produce(round string, n, partitions int) {
	cl := s.p.client(s.t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(s.topic))
	defer cl.Close()
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Partition: int32(i % partitions), Value: fmt.Appendf(nil, "%s %04d", round, i)})
	}
	require.NoError(s.t, cl.ProduceSync(s.t.Context(), rs...).FirstErr())
}

// consumedOnce reports whether n records were consumed, none twice.
func (s *staticGroup) consumedOnce(n int) bool {
	for v, k := range s.consumed {
		if k > 1 {
			s.t.Errorf("record %q consumed %d times", v, k)
		}
	}
	return len(s.consumed) == n
}

// TestStaticMemberRestartFranzGo: two franz-go members with instance IDs
// share a topic; one restarts (closed, and a new client with the same
// instance ID) within the session timeout. The group does not rebalance:
// the generation stays, the other member loses no partition, the
// restarted one gets its partitions back, and no record is consumed
// twice.
func TestStaticMemberRestartFranzGo(t *testing.T) {
	p := startBroker(t, &Config{GroupInitialRebalanceDelay: -1})
	const topic, partitions = "static-orders", 4
	kafkatest.CreateTopic(t, p.client(t), topic, partitions, nil)
	s := newStaticGroup(t, p, "static-franz", topic)

	m0 := s.start("m0", "i0")
	s.waitFor("m0 to own every partition", func() bool { return len(s.owned["m0"]) == partitions })
	m1 := s.start("m1", "i1")
	s.waitFor("each member to own half", func() bool {
		return len(s.owned["m0"]) == partitions/2 && len(s.owned["m1"]) == partitions/2
	})
	s.produce("before", 40, partitions)
	s.waitFor("the records before", func() bool { return s.consumedOnce(40) })
	require.NoError(t, m0.cl.CommitUncommittedOffsets(t.Context()))
	_, gen := m0.cl.GroupMetadata()
	s.mu.Lock()
	revoked0, owned1 := s.revoked["m0"], maps.Clone(s.owned["m1"])
	s.mu.Unlock()

	s.stop(m1)
	m1 = s.start("m1-again", "i1")
	s.waitFor("the restarted member to own its partitions", func() bool { return len(s.owned["m1-again"]) == partitions/2 })
	s.produce("after", 40, partitions)
	s.waitFor("the records after", func() bool { return s.consumedOnce(80) })

	_, gen0 := m0.cl.GroupMetadata()
	_, gen1 := m1.cl.GroupMetadata()
	require.Equal(t, gen, gen0, "no rebalance: the generation stays")
	require.Equal(t, gen, gen1, "the restarted member joined the current generation")
	s.mu.Lock()
	revoked, owned, errs := s.revoked["m0"], s.owned["m1-again"], len(s.errs)
	s.mu.Unlock()
	require.Equal(t, revoked0, revoked, "the other member lost nothing")
	require.Equal(t, owned1, owned, "the instance's partitions")
	require.Zero(t, errs)

	// DescribeGroups (v4+) names the instance IDs.
	adm := kadm.NewClient(p.client(t))
	dg, err := adm.DescribeGroups(t.Context(), "static-franz")
	require.NoError(t, err)
	var instances []string
	for _, m := range dg["static-franz"].Members {
		require.NotNil(t, m.InstanceID)
		instances = append(instances, *m.InstanceID)
	}
	require.ElementsMatch(t, []string{"i0", "i1"}, instances)
	s.stop(m0)
	s.stop(m1)
}

// TestStaticMemberFencedFranzGo: a second franz-go client started with
// the instance ID of a live member takes its place; the first is fenced,
// and its poll reports FENCED_INSTANCE_ID.
func TestStaticMemberFencedFranzGo(t *testing.T) {
	p := startBroker(t, &Config{GroupInitialRebalanceDelay: -1})
	const topic, partitions = "static-dup", 2
	kafkatest.CreateTopic(t, p.client(t), topic, partitions, nil)
	s := newStaticGroup(t, p, "static-dup", topic)
	first := s.start("first", "dup")
	s.waitFor("the first to own every partition", func() bool { return len(s.owned["first"]) == partitions })
	second := s.start("second", "dup")
	s.waitFor("the first to be fenced", func() bool {
		for _, err := range s.errs["first"] {
			if errors.Is(err, kerr.FencedInstanceID) {
				return true
			}
		}
		return false
	})
	first.cancel()
	<-first.done
	first.cl.Close()
	second.cancel()
	<-second.done
	second.cl.Close()
}

// TestStaticMemberLeaveAdmin: kadm's LeaveGroup removes static members
// by instance ID (as kafka-consumer-groups --remove-members): each is
// answered on its own, an unknown instance UNKNOWN_MEMBER_ID; the group
// rebalances, and the member left gets every partition.
func TestStaticMemberLeaveAdmin(t *testing.T) {
	p := startBroker(t, &Config{GroupInitialRebalanceDelay: -1})
	const topic, partitions = "static-leave", 4
	kafkatest.CreateTopic(t, p.client(t), topic, partitions, nil)
	s := newStaticGroup(t, p, "static-leave", topic)
	m0 := s.start("m0", "i0")
	s.waitFor("m0 to own every partition", func() bool { return len(s.owned["m0"]) == partitions })
	m1 := s.start("m1", "i1")
	s.waitFor("each member to own half", func() bool {
		return len(s.owned["m0"]) == partitions/2 && len(s.owned["m1"]) == partitions/2
	})
	// m1's process is gone (it does not leave: it is static).
	m1.cancel()
	<-m1.done
	m1.cl.Close()

	adm := kadm.NewClient(p.client(t))
	lr, err := adm.LeaveGroup(t.Context(), kadm.LeaveGroup("static-leave").InstanceIDs("i1", "nope"))
	require.NoError(t, err)
	require.NoError(t, lr["i1"].Err)
	require.ErrorIs(t, lr["nope"].Err, kerr.UnknownMemberID)
	s.waitFor("m0 to own every partition again", func() bool { return len(s.owned["m0"]) == partitions })

	// The raw request: by member ID with an instance ID mapped to
	// another member ID, fenced; with one the group does not map, an
	// unknown member; m0 stays.
	dg, err := adm.DescribeGroups(t.Context(), "static-leave")
	require.NoError(t, err)
	require.Len(t, dg["static-leave"].Members, 1)
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version, req.Group = 5, "static-leave"
	req.Members = []kmsg.LeaveGroupRequestMember{
		{MemberID: "stale", InstanceID: kmsg.StringPtr("i0")},                                // i0 is another member
		{MemberID: dg["static-leave"].Members[0].MemberID, InstanceID: kmsg.StringPtr("i1")}, // i1 is no member
	}
	resp, err := req.RequestWith(t.Context(), p.client(t))
	require.NoError(t, err)
	require.Equal(t, kerr.FencedInstanceID.Code, resp.Members[0].ErrorCode)
	require.Equal(t, kerr.UnknownMemberID.Code, resp.Members[1].ErrorCode)
	s.stop(m0)
}

// saramaStatic is a sarama consumer group member's handler: it records
// its sessions (generation and claims) and what it consumed.
type saramaStatic struct {
	s        *staticGroup
	name     string
	sessions chan sarama.ConsumerGroupSession
	mu       sync.Mutex
	ended    int
}

func (h *saramaStatic) Setup(sess sarama.ConsumerGroupSession) error {
	h.sessions <- sess
	return nil
}

func (h *saramaStatic) Cleanup(sarama.ConsumerGroupSession) error {
	h.mu.Lock()
	h.ended++
	h.mu.Unlock()
	return nil
}

func (h *saramaStatic) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		h.s.mu.Lock()
		h.s.consumed[string(m.Value)]++
		h.s.notify()
		h.s.mu.Unlock()
		sess.MarkMessage(m, "")
		sess.Commit()
	}
	return nil
}

// saramaMember is a running sarama member.
type saramaMember struct {
	group  sarama.ConsumerGroup
	h      *saramaStatic
	cancel context.CancelFunc
	done   chan error
}

func startSaramaStatic(t *testing.T, s *staticGroup, name, instance string) *saramaMember {
	c := saramaConfig()
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.AutoCommit.Enable = false
	c.Consumer.MaxWaitTime = 100 * time.Millisecond
	c.Consumer.Group.InstanceId = instance
	c.Consumer.Group.Session.Timeout = 30 * time.Second
	c.Consumer.Group.Heartbeat.Interval = 100 * time.Millisecond
	c.Consumer.Return.Errors = true
	group, err := sarama.NewConsumerGroup([]string{s.p.addr}, s.group, c)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	m := &saramaMember{group: group, h: &saramaStatic{s: s, name: name, sessions: make(chan sarama.ConsumerGroupSession, 16)}, cancel: cancel, done: make(chan error, 1)}
	go func() {
		for ctx.Err() == nil {
			if err := group.Consume(ctx, []string{s.topic}, m.h); err != nil {
				m.done <- err
				return
			}
		}
		m.done <- nil
	}()
	return m
}

// session waits for the member's next session.
func (m *saramaMember) session(t *testing.T) sarama.ConsumerGroupSession {
	t.Helper()
	select {
	case sess := <-m.h.sessions:
		return sess
	case <-time.After(30 * time.Second):
		t.Fatal("no session in 30 s")
		return nil
	}
}

func (m *saramaMember) stop(t *testing.T) {
	m.cancel()
	require.NoError(t, <-m.done)
	require.NoError(t, m.group.Close())
}

// stopFenced stops a member that may have been fenced: the errors its
// Consume and Close return, if any, are FENCED_INSTANCE_ID.
func (m *saramaMember) stopFenced(t *testing.T) {
	m.cancel()
	if err := <-m.done; err != nil {
		require.ErrorIs(t, err, sarama.ErrFencedInstancedId)
	}
	if err := m.group.Close(); err != nil {
		require.ErrorIs(t, err, sarama.ErrFencedInstancedId)
	}
}

// TestStaticMemberRestartSarama: the restart of TestStaticMemberRestartFranzGo
// with sarama members; then a duplicate of a live instance is fenced, and
// sarama reports FENCED_INSTANCE_ID.
func TestStaticMemberRestartSarama(t *testing.T) {
	p := startBroker(t, &Config{GroupInitialRebalanceDelay: -1})
	const topic, partitions = "static-sarama", 4
	kafkatest.CreateTopic(t, p.client(t), topic, partitions, nil)
	s := newStaticGroup(t, p, "static-sarama", topic)

	m0 := startSaramaStatic(t, s, "m0", "i0")
	m0.session(t)
	m1 := startSaramaStatic(t, s, "m1", "i1")
	s0, s1 := m0.session(t), m1.session(t) // m0's next session: the rebalance
	require.Equal(t, s0.GenerationID(), s1.GenerationID())
	require.Len(t, s0.Claims()[topic], partitions/2)
	require.Len(t, s1.Claims()[topic], partitions/2)
	s.produce("before", 40, partitions)
	s.waitFor("the records before", func() bool { return s.consumedOnce(40) })
	m0.h.mu.Lock()
	ended0 := m0.h.ended
	m0.h.mu.Unlock()

	m1.stop(t)
	m1 = startSaramaStatic(t, s, "m1-again", "i1")
	again := m1.session(t)
	require.Equal(t, s1.GenerationID(), again.GenerationID(), "no rebalance: the generation stays")
	require.ElementsMatch(t, s1.Claims()[topic], again.Claims()[topic], "the instance's partitions")
	s.produce("after", 40, partitions)
	s.waitFor("the records after", func() bool { return s.consumedOnce(80) })
	m0.h.mu.Lock()
	ended := m0.h.ended
	m0.h.mu.Unlock()
	require.Equal(t, ended0, ended, "the other member's session went on")

	// A duplicate of i1 takes its place: m1 is fenced.
	dup := startSaramaStatic(t, s, "dup", "i1")
	dup.session(t)
	select {
	case err := <-m1.group.Errors():
		require.ErrorIs(t, err, sarama.ErrFencedInstancedId)
	case <-time.After(30 * time.Second):
		t.Fatal("the fenced member reported nothing in 30 s")
	}
	m1.stopFenced(t)
	dup.stopFenced(t) // m1 may have joined again meanwhile, fencing it
	m0.stop(t)
}

// TestStaticMemberTakeover: on a cluster node, a static member that
// restarted (its instance ID mapped to a new member ID) is stored so; a
// takeover of the group by another node keeps the mapping: the stale
// member ID is fenced, the current one carries on, and a restart of the
// instance at the new coordinator gets no rebalance.
func TestStaticMemberTakeover(t *testing.T) {
	ctx := t.Context()
	p := startBroker(t, &Config{Clustered: true, GroupInitialRebalanceDelay: -1})
	cl := p.client(t)
	_, err := p.b.CreateTopic(ctx, "orders", diskless.TopicConfig{Partitions: 1})
	require.NoError(t, err)
	const group = "static-kept"
	send := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := cl.Broker(0).Request(ctx, req) // no retries
		require.NoError(t, err)
		return resp
	}
	join := func() *kmsg.JoinGroupResponse {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version, req.Group, req.ProtocolType, req.InstanceID = 9, group, "consumer", kmsg.StringPtr("i0")
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 30000, 30000
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte("subscription")}}
		return send(req).(*kmsg.JoinGroupResponse)
	}
	heartbeat := func(member string, gen int32) int16 {
		req := kmsg.NewPtrHeartbeatRequest()
		req.Version, req.Group, req.MemberID, req.InstanceID, req.Generation = 4, group, member, kmsg.StringPtr("i0"), gen
		return send(req).(*kmsg.HeartbeatResponse).ErrorCode
	}
	jr := join()
	require.Zero(t, jr.ErrorCode)
	first, gen := jr.MemberID, jr.Generation
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version, sync.Group, sync.MemberID, sync.InstanceID, sync.Generation = 5, group, first, kmsg.StringPtr("i0"), gen
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: first, MemberAssignment: []byte("assignment")}}
	require.Zero(t, send(sync).(*kmsg.SyncGroupResponse).ErrorCode)

	jr = join() // restarted: a new member ID, stored before the answer
	require.Zero(t, jr.ErrorCode)
	require.Equal(t, gen, jr.Generation)
	member := jr.MemberID
	require.NotEqual(t, first, member)
	md, err := p.b.GroupMetadata(ctx, group)
	require.NoError(t, err)
	var v kmsg.GroupMetadataValue
	require.NoError(t, v.ReadFrom(md.Value))
	require.Len(t, v.Members, 1)
	require.Equal(t, member, v.Members[0].MemberID, "the new member ID is stored")
	require.Equal(t, "i0", *v.Members[0].InstanceID)

	// Another node takes the group over. A restart of the instance here
	// stores under the lost claim: fenced, NOT_COORDINATOR (the mapping
	// stored stays), and this node drops the group; it takes it over
	// again on a later request, loading the stored state.
	_, err = p.b.ClaimGroup(ctx, group)
	require.NoError(t, err)
	require.Equal(t, kerr.NotCoordinator.Code, join().ErrorCode)
	require.Eventually(t, func() bool { return heartbeat(member, gen) == 0 },
		10*time.Second, 50*time.Millisecond, "the member carries on at its generation")
	require.Equal(t, kerr.FencedInstanceID.Code, heartbeat(first, gen), "the stale member ID is fenced after the load")
	jr = join() // restarted again at the new coordinator
	require.Zero(t, jr.ErrorCode)
	require.Equal(t, gen, jr.Generation, "no rebalance")
	sync.MemberID, sync.GroupAssignment = jr.MemberID, nil
	sr := send(sync).(*kmsg.SyncGroupResponse)
	require.Zero(t, sr.ErrorCode)
	require.Equal(t, []byte("assignment"), sr.MemberAssignment)
}
