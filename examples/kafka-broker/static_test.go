package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/diskless-go/diskless/internal/kafkatest"
)

// staticMembers are franz-go members of one group on a cluster, each
// with a group instance ID, and what each owns, lost and consumed.
type staticMembers struct {
	t            *testing.T
	c            *testCluster
	group, topic string

	mu       sync.Mutex
	owned    map[string]map[int32]bool // by member name
	revoked  map[string]int            // revocations and losses, by member name
	consumed map[string]int            // record value: times consumed
	errs     map[string][]error        // errors polled, by member name
	// commitEach makes members commit after each poll (startWith).
	commitEach bool
}

// staticMember is one running member.
type staticMember struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
}

// start starts member name with instance ID instance.
func (s *staticMembers) start(name, instance string) *staticMember {
	return s.startWith(name, kgo.InstanceID(instance))
}

// startWith starts member name with more options. If s.commitEach, it
// commits what it consumed after each poll, and before it gives
// partitions up.
func (s *staticMembers) startWith(name string, opts ...kgo.Opt) *staticMember {
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
	}
	opts = append(append(franzOpts(s.c.addrs()), kgo.ConsumerGroup(s.group), kgo.ConsumeTopics(s.topic),
		kgo.DisableAutoCommit(), kgo.SessionTimeout(30*time.Second), kgo.HeartbeatInterval(200*time.Millisecond),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { update(ps, true) }),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, ps map[string][]int32) {
			if s.commitEach {
				_ = cl.CommitUncommittedOffsets(ctx)
			}
			update(ps, false)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { update(ps, false) }),
	), opts...)
	cl, err := kgo.NewClient(opts...)
	require.NoError(s.t, err)
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
			s.mu.Unlock()
			if s.commitEach {
				_ = cl.CommitUncommittedOffsets(ctx)
			}
		}
	}()
	return m
}

// stop stops polling, commits what the member consumed and closes its
// client: a static member does not leave the group.
func (s *staticMembers) stop(m *staticMember) {
	m.cancel()
	<-m.done
	require.NoError(s.t, m.cl.CommitUncommittedOffsets(s.t.Context()))
	m.cl.Close()
}

// waitFor waits until cond, called with s.mu held, holds.
func (s *staticMembers) waitFor(what string, cond func() bool) {
	s.t.Helper()
	require.Eventually(s.t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return cond()
	}, 60*time.Second, 50*time.Millisecond, "%s", what)
}

// TestClusterStaticMembers: three franz-go members with group instance
// IDs, on a cluster of three nodes, are restarted one at a time (closed
// after committing, and started again with the same instance ID within
// the session timeout): each gets its partitions back at the same
// generation (no rebalance: franz-go's GroupMetadata), no other member
// loses one, and no record is consumed twice. A second
// live client with an instance ID in use is fenced (FENCED_INSTANCE_ID).
func TestClusterStaticMembers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, an S3 server and three broker processes")
	}
	c := startCluster(t, 3, nil)
	const topic, partitions = "static", 6
	admin := c.procs[0].client(t)
	kafkatest.CreateTopic(t, admin, topic, partitions, nil)
	s := &staticMembers{t: t, c: c, group: "static-readers", topic: topic, owned: map[string]map[int32]bool{},
		revoked: map[string]int{}, consumed: map[string]int{}, errs: map[string][]error{}}
	producer, err := kgo.NewClient(append(franzOpts(c.addrs()), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	require.NoError(t, err)
	defer producer.Close()
	produced := 0
	produce := func(round string) {
		for i := range 60 {
			r := &kgo.Record{Partition: int32(i % partitions), Value: fmt.Appendf(nil, "%s-%d", round, i)}
			require.NoError(t, producer.ProduceSync(t.Context(), r).FirstErr())
		}
		produced += 60
		s.waitFor(fmt.Sprintf("round %s consumed", round), func() bool { return len(s.consumed) == produced })
	}

	names := []string{"a", "b", "c"}
	members := map[string]*staticMember{}
	for _, n := range names {
		members[n] = s.start(n, "instance-"+n)
	}
	defer func() {
		for _, m := range members {
			s.stop(m)
		}
	}()
	s.waitFor("two partitions each", func() bool {
		for _, n := range names {
			if len(s.owned[n]) != 2 {
				return false
			}
		}
		return true
	})
	produce("start")

	for _, n := range names {
		s.mu.Lock()
		had := maps.Clone(s.owned[n])
		revoked := maps.Clone(s.revoked)
		s.mu.Unlock()
		generations := map[string]int32{}
		for _, o := range names {
			_, generations[o] = members[o].cl.GroupMetadata()
		}
		s.stop(members[n])
		produce := fmt.Sprintf("while %s restarts", n)
		for i := range 12 {
			r := &kgo.Record{Partition: int32(i % partitions), Value: fmt.Appendf(nil, "%s-%d", produce, i)}
			require.NoError(t, producer.ProduceSync(t.Context(), r).FirstErr())
		}
		produced += 12
		members[n] = s.start(n, "instance-"+n)
		s.waitFor(n+" has its partitions back and every record is consumed", func() bool {
			return maps.Equal(s.owned[n], had) && len(s.consumed) == produced
		})
		s.mu.Lock()
		for _, o := range names {
			_, gen := members[o].cl.GroupMetadata()
			require.Equal(t, generations[o], gen, "%s's generation is unchanged: no rebalance while %s restarted", o, n)
			if o != n {
				require.Equal(t, revoked[o], s.revoked[o], "%s lost no partition while %s restarted", o, n)
			}
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	for v, k := range s.consumed {
		require.Equal(t, 1, k, "%s consumed once", v)
	}
	s.mu.Unlock()

	// A second live client with instance-a: one of the two is fenced.
	dup := s.start("a-duplicate", "instance-a")
	defer s.stop(dup)
	s.waitFor("a duplicate instance fenced", func() bool {
		for _, n := range []string{"a", "a-duplicate"} {
			for _, err := range s.errs[n] {
				if errors.Is(err, kerr.FencedInstanceID) {
					return true
				}
			}
		}
		return false
	})
}

// saramaStatic is a sarama member's handler: it hands over its sessions
// (generation and claims), counts those ended, and records what it
// consumed in s.
type saramaStatic struct {
	s        *staticMembers
	sessions chan sarama.ConsumerGroupSession
	ended    atomic.Int64
}

func (h *saramaStatic) Setup(sess sarama.ConsumerGroupSession) error {
	h.sessions <- sess
	return nil
}

func (h *saramaStatic) Cleanup(sarama.ConsumerGroupSession) error {
	h.ended.Add(1)
	return nil
}

func (h *saramaStatic) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		h.s.mu.Lock()
		h.s.consumed[string(m.Value)]++
		h.s.mu.Unlock()
		sess.MarkMessage(m, "")
		sess.Commit()
	}
	return nil
}

// saramaStaticMember is a running sarama member with an instance ID.
type saramaStaticMember struct {
	group  sarama.ConsumerGroup
	h      *saramaStatic
	cancel context.CancelFunc
	done   chan error
}

func (s *staticMembers) startSarama(instance string) *saramaStaticMember {
	c := saramaClusterConfig()
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.AutoCommit.Enable = false
	c.Consumer.MaxWaitTime = 200 * time.Millisecond
	c.Consumer.Group.InstanceId = instance
	c.Consumer.Group.Session.Timeout, c.Consumer.Group.Heartbeat.Interval = 30*time.Second, 200*time.Millisecond
	c.Consumer.Return.Errors = true
	group, err := sarama.NewConsumerGroup(s.c.addrs(), s.group, c)
	require.NoError(s.t, err)
	ctx, cancel := context.WithCancel(s.t.Context())
	m := &saramaStaticMember{group: group, h: &saramaStatic{s: s, sessions: make(chan sarama.ConsumerGroupSession, 16)}, cancel: cancel, done: make(chan error, 1)}
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
func (m *saramaStaticMember) session(t *testing.T) sarama.ConsumerGroupSession {
	t.Helper()
	select {
	case sess := <-m.h.sessions:
		return sess
	case <-time.After(60 * time.Second):
		t.Fatal("no session in 60 s")
		return nil
	}
}

// stop stops the member; the errors its Consume and Close return, if
// any, may only be FENCED_INSTANCE_ID when fenced.
func (m *saramaStaticMember) stop(t *testing.T, fenced bool) {
	m.cancel()
	for _, err := range []error{<-m.done, m.group.Close()} {
		if fenced && err != nil {
			require.ErrorIs(t, err, sarama.ErrFencedInstancedId)
		} else {
			require.NoError(t, err)
		}
	}
}

// TestClusterStaticMembersSarama: TestClusterStaticMembers with sarama
// members: each restarted member's next session has the generation and
// the claims of its last, the other member's session goes on, nothing is
// consumed twice; a duplicate of a live instance takes its place and the
// first reports FENCED_INSTANCE_ID.
func TestClusterStaticMembersSarama(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, an S3 server and three broker processes")
	}
	c := startCluster(t, 3, nil)
	const topic, partitions = "static-sarama", 4
	kafkatest.CreateTopic(t, c.procs[0].client(t), topic, partitions, nil)
	s := &staticMembers{t: t, c: c, group: "static-sarama", topic: topic, consumed: map[string]int{}}
	producer, err := kgo.NewClient(append(franzOpts(c.addrs()), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	require.NoError(t, err)
	defer producer.Close()
	produced := 0
	produce := func(round string) {
		for i := range 40 {
			r := &kgo.Record{Partition: int32(i % partitions), Value: fmt.Appendf(nil, "%s-%d", round, i)}
			require.NoError(t, producer.ProduceSync(t.Context(), r).FirstErr())
		}
		produced += 40
		s.waitFor("round "+round+" consumed", func() bool { return len(s.consumed) == produced })
	}

	members := []*saramaStaticMember{s.startSarama("instance-0")}
	members[0].session(t)
	members = append(members, s.startSarama("instance-1"))
	sessions := []sarama.ConsumerGroupSession{members[0].session(t), members[1].session(t)} // 0's next: the rebalance
	require.Equal(t, sessions[0].GenerationID(), sessions[1].GenerationID())
	produce("start")
	for i := range members {
		other := members[1-i]
		ended := other.h.ended.Load()
		members[i].stop(t, false)
		members[i] = s.startSarama(fmt.Sprintf("instance-%d", i))
		again := members[i].session(t)
		require.Equal(t, sessions[i].GenerationID(), again.GenerationID(), "member %d restarted: no rebalance", i)
		require.ElementsMatch(t, sessions[i].Claims()[topic], again.Claims()[topic], "member %d has its partitions back", i)
		sessions[i] = again
		produce(fmt.Sprintf("after restart %d", i))
		require.Equal(t, ended, other.h.ended.Load(), "the other member's session went on")
	}
	s.mu.Lock()
	for v, k := range s.consumed {
		require.Equal(t, 1, k, "%s consumed once", v)
	}
	s.mu.Unlock()

	dup := s.startSarama("instance-1")
	dup.session(t)
	select {
	case err := <-members[1].group.Errors():
		require.ErrorIs(t, err, sarama.ErrFencedInstancedId)
	case <-time.After(60 * time.Second):
		t.Fatal("the fenced member reported nothing in 60 s")
	}
	members[1].stop(t, true)
	dup.stop(t, true) // the first may have joined again meanwhile, fencing it
	members[0].stop(t, false)
}
