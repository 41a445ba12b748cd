package memcluster_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/cluster"
	"github.com/diskless-go/diskless/cluster/memcluster"
	"github.com/diskless-go/diskless/coordinator/metalog"
)

const ttl = time.Second

// broker is one member of a test's cluster, and what its callbacks were
// told.
type broker struct {
	node *memcluster.Node

	mu      sync.Mutex
	logs    map[int]metalog.Log
	unleads int
}

func (b *broker) log(shard int) metalog.Log {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.logs[shard]
}

func (b *broker) unleadCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.unleads
}

// join joins member id to the cluster of svc with one shard; it leaves
// when the test ends.
func join(t *testing.T, svc *memcluster.Service, id int32) *broker {
	t.Helper()
	b, err := tryJoin(t, svc, id)
	require.NoError(t, err)
	return b
}

func tryJoin(t *testing.T, svc *memcluster.Service, id int32) (*broker, error) {
	b := &broker{logs: map[int]metalog.Log{}}
	conn, err := svc.Connect(t.Context(), nil)
	require.NoError(t, err)
	n, err := conn.Join(t.Context(), &cluster.JoinOptions{Member: cluster.Member{ID: id}, Shards: 1, LeaseTTL: ttl}, cluster.Callbacks{
		Lead: func(_ context.Context, shard int, log metalog.Log) error {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.logs[shard] = log
			return nil
		},
		Unlead: func(shard int) {
			b.mu.Lock()
			defer b.mu.Unlock()
			delete(b.logs, shard)
			b.unleads++
		},
		Serve: func(context.Context, int, string, []byte) func() []byte { return func() []byte { return nil } },
	})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { n.Close() })
	b.node = n.(*memcluster.Node)
	return b, nil
}

func ids(ms []cluster.Member) []int32 {
	var out []int32
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

// TestLeaseExpiry: a leader whose renewals stop keeps its shard for one
// TTL of virtual time and loses it then: its appends fail with ErrFenced
// at once, though it still believes it leads (a zombie) and no one else
// has appended; the other member leads. Once its renewals get through
// again it learns that its lease ended, gives the shard up (Unlead), and
// registers again.
func TestLeaseExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc := memcluster.NewService(nil)
		one, two := join(t, svc, 1), join(t, svc, 2)
		synctest.Wait()
		log := one.log(0)
		require.NotNil(t, log, "member 1 (first in ID order) leads shard 0")
		require.NoError(t, (<-log.Append([]byte("a"))).Err)

		svc.PauseLease(1)
		require.True(t, log.(metalog.Leased).LeaseHeld(), "the lease was renewed less than its TTL ago")
		time.Sleep(ttl - time.Millisecond)
		synctest.Wait()
		leader, ok := svc.Leader("", 0)
		require.True(t, ok)
		require.Equal(t, int32(1), leader, "the lease holds for its TTL after the last renewal")
		require.NoError(t, (<-log.Append([]byte("b"))).Err, "the leader appends while its lease holds")

		time.Sleep(ttl / 3) // past the TTL since the last renewal
		synctest.Wait()
		require.True(t, one.node.Leading(0), "a zombie believes it leads")
		require.False(t, log.(metalog.Leased).LeaseHeld(), "but knows its lease is not surely held: no renewal answered for a TTL")
		require.ErrorIs(t, (<-log.Append([]byte("c"))).Err, metalog.ErrFenced, "a zombie's append is fenced, though no one else appended")
		require.NotNil(t, two.log(0), "the other member leads")
		require.Equal(t, []int32{2}, ids(two.node.Members()))
		r := <-two.log(0).Append([]byte("d"))
		require.NoError(t, r.Err)
		require.Equal(t, int64(2), r.Offset, "the new leader follows the old one's entries")
		require.True(t, two.log(0).(metalog.Leased).LeaseHeld())

		svc.ResumeLease(1)
		time.Sleep(ttl / 3)
		synctest.Wait()
		require.False(t, one.node.Leading(0), "the zombie learnt its lease ended")
		require.Equal(t, 1, one.unleadCount())
		require.Equal(t, []int32{1, 2}, ids(two.node.Members()), "it registered again")
	})
}

// TestExpireLease: ExpireLease fences the leader at once, before it
// knows; the leader learns it within a third of the TTL, and registers
// again; the shard moves to the other member and comes back to its
// preferred member.
func TestExpireLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc := memcluster.NewService(&memcluster.Options{WatchDelay: time.Millisecond})
		one, two := join(t, svc, 1), join(t, svc, 2)
		time.Sleep(time.Millisecond)
		synctest.Wait()
		log := one.log(0)
		require.NotNil(t, log)
		require.True(t, svc.ExpireLease(1))
		require.True(t, one.node.Leading(0), "the leader does not know yet")
		require.ErrorIs(t, (<-log.Append([]byte("a"))).Err, metalog.ErrFenced)
		time.Sleep(ttl / 3)
		synctest.Wait()
		require.Equal(t, 1, one.unleadCount(), "the leader learnt its lease ended")
		require.Equal(t, []int32{1, 2}, ids(one.node.Members()), "it registered again")
		require.Eventually(t, func() bool { return one.log(0) != nil && two.log(0) == nil }, time.Minute, ttl/4,
			"the shard goes back to its preferred member")
	})
}

// TestKill: a killed leader's lease is not revoked: it keeps its
// registration and its shard for a TTL after its last renewal, its own
// appends fail at once, its callbacks are told (Unlead), and the other
// member leads only once the lease has ended. A clean Close, by
// contrast, hands the shard on at once.
func TestKill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc := memcluster.NewService(nil)
		one, two := join(t, svc, 1), join(t, svc, 2)
		synctest.Wait()
		log := one.log(0)
		require.NotNil(t, log, "member 1 leads shard 0")
		one.node.Kill()
		require.Equal(t, 1, one.unleadCount(), "the killed broker's leaderships end in the broker")
		require.ErrorIs(t, (<-log.Append([]byte("a"))).Err, metalog.ErrFenced, "a killed process appends nothing")
		leader, ok := svc.Leader("", 0)
		require.True(t, ok)
		require.Equal(t, int32(1), leader, "the election key stays under the lease")
		require.Equal(t, []int32{1, 2}, ids(two.node.Members()), "the registration stays under the lease")
		time.Sleep(ttl / 2)
		synctest.Wait()
		require.Nil(t, two.log(0), "no one else leads while the lease holds")
		time.Sleep(ttl)
		synctest.Wait()
		require.Equal(t, []int32{2}, ids(two.node.Members()), "the lease ended a TTL after its last renewal")
		require.Eventually(t, func() bool { return two.log(0) != nil }, time.Minute, ttl/4, "the other member leads")
		require.NoError(t, one.node.Close(), "Close after Kill does nothing more")

		three := join(t, svc, 3)
		synctest.Wait()
		require.NoError(t, two.node.Close())
		synctest.Wait()
		require.NotNil(t, three.log(0), "a clean Close revokes the lease: the shard moves at once")
	})
}

// TestKillRestart: a member killed and joined again (a new process)
// while its old lease still holds keeps its new registration when the
// old lease ends: the registration moved to the new lease, as a put
// under a new lease in etcd moves the key.
func TestKillRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc := memcluster.NewService(nil)
		one, two := join(t, svc, 1), join(t, svc, 2)
		synctest.Wait()
		one.node.Kill()
		again := join(t, svc, 1)
		time.Sleep(2 * ttl)
		synctest.Wait()
		require.Equal(t, []int32{1, 2}, ids(two.node.Members()), "the new process's registration outlives the old lease")
		require.Eventually(t, func() bool { return again.log(0) != nil }, time.Minute, ttl/4, "the new process leads its shard again")
	})
}

// TestDepose: a deposed leader's appends are fenced at once; it gives
// the shard up when its watch shows its election key gone, and (the
// only member) is elected again.
func TestDepose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc := memcluster.NewService(&memcluster.Options{WatchDelay: time.Millisecond})
		one := join(t, svc, 1)
		time.Sleep(time.Millisecond)
		synctest.Wait()
		log := one.log(0)
		require.NotNil(t, log)
		require.NoError(t, log.(metalog.Confirmer).Confirm(t.Context()), "a leader confirms its leadership")
		id, ok := svc.Depose(0)
		require.True(t, ok)
		require.Equal(t, int32(1), id)
		require.True(t, one.node.Leading(0), "the leader does not know yet")
		require.ErrorIs(t, log.(metalog.Confirmer).Confirm(t.Context()), metalog.ErrFenced, "nor can it confirm its leadership, for a read")
		require.ErrorIs(t, (<-log.Append([]byte("a"))).Err, metalog.ErrFenced, "a deposed leader's appends are fenced at once")
		time.Sleep(time.Millisecond)
		synctest.Wait()
		require.Equal(t, 1, one.unleadCount(), "the deposed leader gives the shard up when its watch shows the key gone")
		require.NotNil(t, one.log(0), "and, the preferred member, leads it again")
		require.NoError(t, (<-one.log(0).Append([]byte("b"))).Err)
	})
}

// TestWatchDelay: the members' views see a change the watch delay after
// it, and not before; the Service knows it at once.
func TestWatchDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const delay = 500 * time.Millisecond
		svc := memcluster.NewService(nil)
		one := join(t, svc, 1)
		synctest.Wait()
		svc.SetWatchDelay(delay)
		two := join(t, svc, 2)
		require.Equal(t, []int32{1, 2}, ids(two.node.Members()), "a joining member reads the members there are")
		time.Sleep(delay - time.Millisecond)
		synctest.Wait()
		require.Equal(t, []int32{1}, ids(one.node.Members()), "not seen before the delay")
		time.Sleep(time.Millisecond)
		synctest.Wait()
		require.Equal(t, []int32{1, 2}, ids(one.node.Members()), "seen at the delay")

		leader, ok := svc.Leader("", 0)
		require.True(t, ok)
		require.NoError(t, two.node.Close())
		require.Equal(t, int32(1), leader)
		time.Sleep(delay - time.Millisecond)
		synctest.Wait()
		require.Equal(t, []int32{1, 2}, ids(one.node.Members()), "a member that left is seen until the delay")
		time.Sleep(time.Millisecond)
		synctest.Wait()
		require.Equal(t, []int32{1}, ids(one.node.Members()))
	})
}

// TestFailNext: injected failures fail a member's Join, and its
// leader's appends until it reads its log, with the error given.
func TestFailNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc := memcluster.NewService(nil)
		boom := errors.New("boom")
		svc.FailNext(1, 1, boom)
		_, err := tryJoin(t, svc, 1)
		require.ErrorIs(t, err, boom, "registering failed")
		one := join(t, svc, 1)
		synctest.Wait()
		log := one.log(0)
		require.NotNil(t, log)
		svc.FailNext(1, 1, nil)
		require.ErrorIs(t, (<-log.Append([]byte("a"))).Err, memcluster.ErrInjected)
		require.ErrorIs(t, (<-log.Append([]byte("b"))).Err, memcluster.ErrInjected, "until the writer reads the log")
		require.NoError(t, log.Read(t.Context(), log.Start(), func(int64, []byte) error { return nil }))
		r := <-log.Append([]byte("c"))
		require.NoError(t, r.Err)
		require.Equal(t, int64(0), r.Offset)
	})
}

// TestRecovers: a member whose lease ended and whose next operations
// fail (registering again, campaigns, appends) recovers once they
// succeed again: it leads its shard and appends. Its campaigns wait for
// it to register again rather than spin (which would never let the
// bubble's time move).
func TestRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc := memcluster.NewService(nil)
		one := join(t, svc, 1)
		synctest.Wait()
		require.NotNil(t, one.log(0))
		svc.FailNext(1, 20, nil)
		require.True(t, svc.ExpireLease(1))
		require.Eventually(t, func() bool {
			log := one.log(0)
			if log == nil {
				return false
			}
			if err := log.Read(t.Context(), log.Start(), func(int64, []byte) error { return nil }); err != nil {
				return false
			}
			return (<-log.Append([]byte("x"))).Err == nil
		}, time.Minute, ttl/4, "the member leads and appends again")
	})
}

// TestForward: a Node whose JoinOptions name no Transport reaches the
// leader over the Service's: a call forwarded for a shard is served by
// the member that leads it.
func TestForward(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc := memcluster.NewService(nil)
		var nodes []cluster.Node
		for id := int32(1); id <= 2; id++ {
			conn, err := svc.Connect(t.Context(), nil)
			require.NoError(t, err)
			n, err := conn.Join(t.Context(), &cluster.JoinOptions{Member: cluster.Member{ID: id}, Shards: 1, LeaseTTL: ttl}, cluster.Callbacks{
				Lead:   func(context.Context, int, metalog.Log) error { return nil },
				Unlead: func(int) {},
				Serve: func(_ context.Context, shard int, method string, body []byte) func() []byte {
					return func() []byte { return append([]byte{byte(id)}, body...) }
				},
			})
			require.NoError(t, err)
			t.Cleanup(func() { n.Close() })
			nodes = append(nodes, n)
		}
		synctest.Wait()
		leader, ok := nodes[1].Leader(0)
		require.True(t, ok)
		require.Equal(t, int32(1), leader.ID)
		b, err := nodes[1].Forward(t.Context(), 0, "m", []byte("hi"))()
		require.NoError(t, err)
		require.Equal(t, append([]byte{1}, "hi"...), b, "served by the leader")
	})
}

// TestResignFails: a leader that gives its shard to the preferred member
// and fails to delete its election key (the Service failing its calls
// then) does not leave the shard leaderless: its key, which only its
// lease would end, is taken up again by its next campaign, and the shard
// is handed over again later.
func TestResignFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc := memcluster.NewService(nil)
		two := join(t, svc, 2)
		synctest.Wait()
		require.NotNil(t, two.log(0), "the only member leads")
		one := join(t, svc, 1) // preferred for shard 0 (the lowest ID)
		synctest.Wait()
		time.Sleep(2*ttl + ttl/8) // just before the next check hands the shard over
		synctest.Wait()
		require.True(t, two.node.Leading(0))
		svc.FailNext(2, 3, nil) // the resign among them
		leads := func() bool {
			return one.node.Leading(0) || two.node.Leading(0)
		}
		for range 40 {
			time.Sleep(ttl / 4)
			synctest.Wait()
			if !two.node.Leading(0) {
				break
			}
		}
		require.False(t, two.node.Leading(0), "the shard was given up")
		time.Sleep(5 * ttl)
		synctest.Wait()
		require.True(t, leads(), "a member leads the shard again")
		leader, ok := svc.Leader("", 0)
		require.True(t, ok)
		require.True(t, map[int32]*broker{1: one, 2: two}[leader].node.Leading(0), "the member whose key leads is the one leading")
	})
}
