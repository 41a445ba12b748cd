package kafkaserver

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
)

// TestPartitionLeader checks that partition leaders spread evenly over
// the nodes, prefer the client's rack, and are all nodes' when no node
// is in it.
func TestPartitionLeader(t *testing.T) {
	nodes := []node{{id: 0, rack: "a"}, {id: 1, rack: "b"}, {id: 2, rack: "a"}}
	count := map[int32]int{}
	for p := range int32(30) {
		count[partitionLeader(nodes, "events", p, "").id]++
	}
	require.Equal(t, map[int32]int{0: 10, 1: 10, 2: 10}, count, "30 partitions over 3 nodes")

	count = map[int32]int{}
	for p := range int32(30) {
		count[partitionLeader(nodes, "events", p, "a").id]++
	}
	require.Equal(t, map[int32]int{0: 15, 2: 15}, count, "rack a's clients go to rack a's nodes")

	count = map[int32]int{}
	for p := range int32(30) {
		count[partitionLeader(nodes, "events", p, "c").id]++
	}
	require.Len(t, count, 3, "no node in rack c: every node")

	// Stable: the same membership gives the same answer.
	for p := range int32(10) {
		require.Equal(t, partitionLeader(nodes, "x", p, ""), partitionLeader(append([]node(nil), nodes...), "x", p, ""))
	}
}

// TestGroupCoordinator checks rendezvous hashing: groups spread over the
// nodes, and when a node goes only its groups move; when it comes back
// they return to it.
func TestGroupCoordinator(t *testing.T) {
	three := []node{{id: 0}, {id: 1}, {id: 2}}
	two := []node{{id: 0}, {id: 2}}
	count := map[int32]int{}
	moved := 0
	for i := range 3000 {
		g := fmt.Sprintf("group-%d", i)
		c3 := groupCoordinator(three, g).id
		count[c3]++
		c2 := groupCoordinator(two, g).id
		if c3 != 1 {
			require.Equal(t, c3, c2, "group %s was not on node 1: it stays", g)
		} else {
			moved++
		}
		require.NotEqual(t, int32(1), c2)
	}
	for id, n := range count {
		require.InDelta(t, 1000, n, 150, "node %d coordinates %d of 3000 groups", id, n)
	}
	require.Equal(t, count[1], moved)
}

// TestRackOfClientID checks the diskless_rack= token of a client ID.
func TestRackOfClientID(t *testing.T) {
	for id, want := range map[string]string{
		"":                                  "",
		"producer":                          "",
		"diskless_rack=eu-1a":               "eu-1a",
		"app,diskless_rack=eu-1b":           "eu-1b",
		"app,diskless_rack=eu-1b,other=1":   "eu-1b",
		"app diskless_rack=r2; diskless_az": "r2",
	} {
		require.Equal(t, want, rackOfClientID(id), "client ID %q", id)
	}
}

// TestOwnershipSettle checks when a node that becomes a group's
// coordinator must wait before it takes the group over: only while a node
// that coordinated it within the settle time is still live.
func TestOwnershipSettle(t *testing.T) {
	three, two := []node{{id: 0}, {id: 1}, {id: 2}}, []node{{id: 0}, {id: 2}}
	group := ""
	for i := 0; group == ""; i++ { // a group on node 1 of three, on node 0 of two
		if g := fmt.Sprintf("g%d", i); groupCoordinator(three, g).id == 1 && groupCoordinator(two, g).id == 0 {
			group = g
		}
	}
	newOwner := func(self int32, view []node) *ownership {
		o := &ownership{s: &Server{cfg: serverConfig{NodeID: self}, log: zap.NewNop()}, settle: time.Second}
		o.mu.owned, o.mu.view = map[string]bool{}, view
		return o
	}
	t0 := time.Now()

	// Node 1 dies: node 0 takes the group over at once (node 1 commits
	// nothing more).
	o := newOwner(0, three)
	require.Empty(t, o.observeLocked(two, t0))
	require.False(t, o.mustWaitLocked(group))

	// Node 1 comes back: node 0 gives the group up, and node 1 waits the
	// settle time, node 0 being live.
	o.mu.owned[group] = true
	require.Equal(t, []string{group}, o.observeLocked(three, t0.Add(time.Second)))
	n1 := newOwner(1, two)
	n1.observeLocked(three, t0.Add(time.Second))
	require.True(t, n1.mustWaitLocked(group))
	n1.observeLocked(three, t0.Add(1500*time.Millisecond))
	require.True(t, n1.mustWaitLocked(group))
	n1.observeLocked(three, t0.Add(2*time.Second))
	require.False(t, n1.mustWaitLocked(group), "the settle time has passed")

	// A node that has just started waits too, unless it is alone.
	fresh := newOwner(1, three)
	fresh.mu.past = []pastView{{until: t0}}
	require.True(t, fresh.mustWaitLocked(group))
	alone := newOwner(1, []node{{id: 1}})
	alone.mu.past = []pastView{{until: t0}}
	require.False(t, alone.mustWaitLocked(group))
}
