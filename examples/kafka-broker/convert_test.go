package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless/internal/kafkatest"
)

// split reports whether the members named own, between them, each of the
// partitions exactly once, each at least one, and no other member owns
// any. Called with s.mu held.
func (s *staticMembers) split(partitions int32, names ...string) bool {
	count := map[int32]int{}
	for _, n := range names {
		if len(s.owned[n]) == 0 {
			return false
		}
		for p := range s.owned[n] {
			count[p]++
		}
	}
	for p := range partitions {
		if count[p] != 1 {
			return false
		}
	}
	total := 0
	for _, ps := range s.owned {
		total += len(ps)
	}
	return total == int(partitions)
}

// describeGroup returns what ConsumerGroupDescribe and DescribeGroups
// say of group, asked of a live node (the client finds the coordinator).
func describeGroup(t *testing.T, c *testCluster, group string) (kmsg.ConsumerGroupDescribeResponseGroup, kmsg.DescribeGroupsResponseGroup, error) {
	cl, err := kgo.NewClient(franzOpts(c.live())...)
	require.NoError(t, err)
	defer cl.Close()
	creq := kmsg.NewPtrConsumerGroupDescribeRequest()
	creq.Groups = []string{group}
	cresp, err := creq.RequestWith(t.Context(), cl)
	if err != nil {
		return kmsg.ConsumerGroupDescribeResponseGroup{}, kmsg.DescribeGroupsResponseGroup{}, err
	}
	dreq := kmsg.NewPtrDescribeGroupsRequest()
	dreq.Groups = []string{group}
	dresp, err := dreq.RequestWith(t.Context(), cl)
	if err != nil {
		return kmsg.ConsumerGroupDescribeResponseGroup{}, kmsg.DescribeGroupsResponseGroup{}, err
	}
	return cresp.Groups[0], dresp.Groups[0], nil
}

// TestClusterGroupConversion: a rolling upgrade of a group's consumers to
// the consumer protocol and its rollback, on a cluster of three nodes.
// Two franz-go members of the classic protocol share a topic; a franz-go
// member of the consumer protocol joins, the group becomes a consumer
// group and the three share the partitions; the group's coordinator is
// killed (SIGKILL) and the node that takes the group over keeps it, at
// its epoch with its three members; the member of the consumer protocol
// leaves, and the group is a classic group again, the two sharing the
// partitions. Every record produced is consumed, in every phase, and
// none twice (the members commit after each poll and before they give a
// partition up).
func TestClusterGroupConversion(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, an S3 server and three broker processes")
	}
	c := startCluster(t, 3, nil)
	const topic, group, partitions = "convert", "convert-readers", 4
	admin := c.procs[0].client(t)
	kafkatest.CreateTopic(t, admin, topic, partitions, nil)
	s := &staticMembers{t: t, c: c, group: group, topic: topic, owned: map[string]map[int32]bool{},
		revoked: map[string]int{}, consumed: map[string]int{}, errs: map[string][]error{}, commitEach: true}
	producer, err := kgo.NewClient(append(franzOpts(c.addrs()), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	require.NoError(t, err)
	defer producer.Close()
	produced := map[string]bool{}
	produce := func(round string) {
		for i := range 40 {
			v := fmt.Sprintf("%s-%d", round, i)
			require.NoError(t, producer.ProduceSync(t.Context(), &kgo.Record{Partition: int32(i % partitions), Value: []byte(v)}).FirstErr())
			produced[v] = true
		}
		s.waitFor("round "+round+" consumed", func() bool {
			for v := range produced {
				if s.consumed[v] == 0 {
					return false
				}
			}
			return true
		})
	}
	members := map[string]*staticMember{}
	defer func() {
		for _, m := range members {
			s.stop(m)
		}
	}()

	members["c0"], members["c1"] = s.startWith("c0"), s.startWith("c1")
	s.waitFor("the classic members to share the partitions", func() bool { return s.split(partitions, "c0", "c1") })
	produce("classic")

	members["n2"] = s.startWith("n2", kgo.ServerSideBalancer())
	s.waitFor("the three to share the partitions", func() bool { return s.split(partitions, "c0", "c1", "n2") })
	cg, _, err := describeGroup(t, c, group)
	require.NoError(t, err)
	require.Zero(t, cg.ErrorCode, "a consumer group now")
	require.Len(t, cg.Members, 3)
	produce("mixed")

	// The coordinator dies: the node that takes the group over has it,
	// at its epoch, with its members.
	coord := c.coordinatorOf(group)
	c.procs[coord].kill()
	c.waitNodesExcept(coord, 2)
	require.Eventually(t, func() bool {
		after, _, err := describeGroup(t, c, group)
		return err == nil && after.ErrorCode == 0 && after.Epoch == cg.Epoch && len(after.Members) == 3
	}, 60*time.Second, 200*time.Millisecond, "the group on its new coordinator, at epoch %d with three members", cg.Epoch)
	produce("after the kill")
	s.waitFor("the three to share the partitions after the kill", func() bool { return s.split(partitions, "c0", "c1", "n2") })

	// The member of the consumer protocol leaves: a classic group again.
	s.stop(members["n2"])
	delete(members, "n2")
	s.waitFor("the classic members to share the partitions again", func() bool { return s.split(partitions, "c0", "c1") })
	require.Eventually(t, func() bool {
		_, dg, err := describeGroup(t, c, group)
		return err == nil && dg.ErrorCode == 0 && dg.State == "Stable" && len(dg.Members) == 2 && dg.ProtocolType == "consumer"
	}, 60*time.Second, 200*time.Millisecond, "a stable classic group of two")
	produce("classic again")
	s.mu.Lock()
	defer s.mu.Unlock()
	twice := 0
	for v := range produced {
		if s.consumed[v] > 1 {
			twice++
		}
	}
	require.Zero(t, twice, "of %d records, %d consumed more than once: members commit after each poll and before they give partitions up", len(produced), twice)
}
