package kafkaserver

import (
	"cmp"
	"context"
	"hash/fnv"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/diskless-go/diskless/clock"
	"github.com/diskless-go/diskless/kafkaerr"
)

// The nodes of a cluster (-etcd): every node serves every partition, so
// which node Metadata names as a partition's leader only spreads the
// clients over the nodes; and one node coordinates each consumer group,
// chosen by rendezvous hashing over the live nodes, so that a group moves
// only when the node it is on comes or goes.

// node is one live node as clients see it.
type node struct {
	id   int32
	host string
	port int32
	rack string
}

// rackOrNil is the node's rack for a nullable field: nil when it has
// none.
func (n node) rackOrNil() *string {
	if n.rack == "" {
		return nil
	}
	return &n.rack
}

// nodes returns the live nodes, by ID: this one as the server was
// configured, the others as they advertised themselves (a member that
// advertised no address is left out: clients could not reach it).
func (s *Server) nodes() []node {
	self := node{id: s.cfg.NodeID, rack: s.cfg.Rack}
	if p := s.self.Load(); p != nil {
		self = *p
	}
	if !s.cfg.Clustered {
		return []node{self}
	}
	out := []node{self}
	for _, m := range s.b.Members() {
		if m.ID == self.id {
			continue
		}
		host, port, err := splitHostPort(m.Advertise)
		if err != nil {
			continue
		}
		out = append(out, node{id: m.ID, host: host, port: port, rack: m.Rack})
	}
	slices.SortFunc(out, func(a, b node) int { return cmp.Compare(a.id, b.id) })
	return out
}

// partitionLeader returns the node Metadata names as a partition's
// leader: (hash(topic) + partition) mod the live nodes, over the nodes of
// the client's rack when it has told it and some are in it, else over
// all. It is stable while the membership is, and spreads a topic's
// partitions evenly.
func partitionLeader(nodes []node, topic string, partition int32, rack string) node {
	if rack != "" {
		var in []node
		for _, n := range nodes {
			if n.rack == rack {
				in = append(in, n)
			}
		}
		if len(in) > 0 {
			nodes = in
		}
	}
	h := fnv.New32a()
	h.Write([]byte(topic))
	return nodes[(uint64(h.Sum32())+uint64(uint32(partition)))%uint64(len(nodes))]
}

// groupCoordinator returns the node that coordinates group: the live
// node with the highest hash of (group, node ID), rendezvous hashing, so
// that when a node goes only its groups move, and when one comes only
// the groups it wins do.
func groupCoordinator(nodes []node, group string) node {
	var best node
	var bestScore uint64
	for i, n := range nodes {
		h := fnv.New64a()
		h.Write([]byte(group))
		h.Write([]byte{0, byte(n.id >> 24), byte(n.id >> 16), byte(n.id >> 8), byte(n.id)})
		score := mix64(h.Sum64())
		if i == 0 || score > bestScore {
			best, bestScore = n, score
		}
	}
	return best
}

// mix64 is splitmix64's finalizer: FNV's low bits alone spread poorly.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// rackOfClientID returns the rack a client names in its client ID with a
// diskless_rack=NAME token (tokens separated by commas, semicolons or
// spaces; Inkless reads diskless_az= the same way), "" if none.
func rackOfClientID(clientID string) string {
	const key = "diskless_rack="
	i := strings.Index(clientID, key)
	if i < 0 {
		return ""
	}
	v := clientID[i+len(key):]
	if j := strings.IndexAny(v, ",; "); j >= 0 {
		v = v[:j]
	}
	return v
}

// ownership is which consumer groups this node coordinates, in a
// cluster. A group is taken over (its state started afresh; the
// committed offsets are in the coordinator, the same for every node) at
// its first request once this node is its coordinator: the node claims it
// in the coordinator (Broker.ClaimGroup) and commits its offsets under
// that claim, so that a node that lost the group without knowing it (it
// was frozen, or cut off, while this one took over) has its commits
// refused with NOT_COORDINATOR, and cannot move the offsets back. If,
// within the settle time, the group was coordinated by another node that
// is still live (a node joined and the group moved to it), the takeover
// also waits until the settle time has passed since, so that the other
// node has seen the change and finished the commits it had under way
// rather than have them refused. A group whose coordinator is now another
// node, or whose claim was superseded, is dropped (its waiting members
// told NOT_COORDINATOR). A group dropped because its claim was superseded
// is not taken over again before the settle time has passed since: the
// node learns so when it wakes from a pause (or its partition heals), and
// the requests its clients sent meanwhile are still in its sockets, read
// at once; a commit among them, which the client has since retried
// elsewhere and moved past, must not land under a new claim after the
// other node's later commits. It is safe for concurrent use.
type ownership struct {
	s      *Server
	settle time.Duration

	mu struct {
		sync.Mutex
		owned  map[string]int64         // group -> its claim's epoch
		taking map[string]chan struct{} // takeovers under way, closed when done
		view   []node                   // the live nodes, as last seen
		past   []pastView               // the views before it, the last settle time's
		fenced map[string]time.Time     // group -> when its claim here was found superseded, the last settle time's
	}
	stop chan struct{}
	done chan struct{}
}

// pastView is a membership that held until a time.
type pastView struct {
	nodes []node
	until time.Time
}

// newOwnership starts watching the membership of s's cluster (every
// 100 ms); close stops it.
func newOwnership(s *Server, settle time.Duration) *ownership {
	o := &ownership{s: s, settle: settle, stop: make(chan struct{}), done: make(chan struct{})}
	o.mu.owned = map[string]int64{}
	o.mu.taking = map[string]chan struct{}{}
	o.mu.fenced = map[string]time.Time{}
	o.mu.view = s.nodes()
	// Whoever coordinated before this node started may still be at it.
	o.mu.past = []pastView{{nodes: nil, until: s.clock.Now()}}
	go pprof.Do(context.Background(), pprof.Labels("kafkaserver", "ownership"), func(context.Context) {
		defer close(o.done)
		t := clock.NewTicker(s.clock, 100*time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-o.stop:
				return
			case <-t.C:
				o.refresh()
			}
		}
	})
	return o
}

func (o *ownership) close() {
	close(o.stop)
	<-o.done
}

// sameNodes reports whether two memberships have the same node IDs.
func sameNodes(a, b []node) bool {
	return slices.EqualFunc(a, b, func(x, y node) bool { return x.id == y.id })
}

// observeLocked records the live nodes seen now, and returns the groups
// owned here that are now coordinated elsewhere (no longer owned).
func (o *ownership) observeLocked(nodes []node, now time.Time) (lost []string) {
	keep := o.mu.past[:0]
	for _, p := range o.mu.past {
		if now.Sub(p.until) < o.settle {
			keep = append(keep, p)
		}
	}
	o.mu.past = keep
	for g, at := range o.mu.fenced {
		if now.Sub(at) >= o.settle {
			delete(o.mu.fenced, g)
		}
	}
	if sameNodes(nodes, o.mu.view) {
		return nil
	}
	o.mu.past = append(o.mu.past, pastView{nodes: o.mu.view, until: now})
	o.mu.view = nodes
	for g := range o.mu.owned {
		if groupCoordinator(nodes, g).id != o.s.cfg.NodeID {
			lost = append(lost, g)
			delete(o.mu.owned, g)
		}
	}
	o.s.log.Info("cluster membership changed", zap.Int("nodes", len(nodes)), zap.Strings("groups_moved_away", lost))
	return lost
}

// refresh notes a change of membership, and drops the groups now
// coordinated elsewhere.
func (o *ownership) refresh() {
	nodes := o.s.nodes()
	o.mu.Lock()
	lost := o.observeLocked(nodes, o.s.clock.Now())
	o.mu.Unlock()
	for _, g := range lost {
		o.s.groups.forget(g)
	}
}

// mustWaitLocked reports whether a takeover of group must wait: another
// node, live now, coordinated it under a membership that ended less than
// the settle time ago, or this node's claim on it was found superseded
// less than the settle time ago (observeLocked forgets older ones). A
// past view of nil (before this node started) stands for any node.
func (o *ownership) mustWaitLocked(group string) bool {
	if _, ok := o.mu.fenced[group]; ok {
		return true
	}
	self := o.s.cfg.NodeID
	for _, p := range o.mu.past {
		if p.nodes == nil {
			if len(o.mu.view) > 1 {
				return true
			}
			continue
		}
		c := groupCoordinator(p.nodes, group)
		if c.id != self && slices.ContainsFunc(o.mu.view, func(n node) bool { return n.id == c.id }) {
			return true
		}
	}
	return false
}

// check returns 0 if this node coordinates group and may answer for it
// now, else the code to answer: NOT_COORDINATOR (the client looks the
// coordinator up again) or COORDINATOR_LOAD_IN_PROGRESS (it retries). A
// takeover claims the group first; one at a time per group. With 0 it
// returns the epoch of this node's claim on the group, which what the
// request writes is made under.
func (o *ownership) check(ctx context.Context, group string) (int16, int64) {
	for {
		nodes := o.s.nodes()
		o.mu.Lock()
		lost := o.observeLocked(nodes, o.s.clock.Now())
		code := int16(0)
		var wait chan struct{}
		claim, owned := o.mu.owned[group]
		switch {
		case groupCoordinator(nodes, group).id != o.s.cfg.NodeID:
			code = int16(kafkaerr.NotCoordinator)
			if owned {
				delete(o.mu.owned, group)
				lost = append(lost, group)
			}
		case owned:
		case o.mustWaitLocked(group):
			code = int16(kafkaerr.CoordinatorLoadInProgress)
		case o.mu.taking[group] != nil:
			wait = o.mu.taking[group]
		default:
			code = -1 // take it over
			o.mu.taking[group] = make(chan struct{})
		}
		o.mu.Unlock()
		for _, g := range lost {
			o.s.groups.forget(g)
		}
		if wait != nil {
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return int16(kafkaerr.CoordinatorLoadInProgress), 0
			}
		}
		if code != -1 {
			if code != 0 {
				claim = 0
			}
			return code, claim
		}
		return o.takeOver(ctx, group)
	}
}

// takeOver claims group, whose takeover this caller registered in
// o.mu.taking, loads its stored state (groupstore.go), and owns it if
// this node is still its coordinator.
func (o *ownership) takeOver(ctx context.Context, group string) (int16, int64) {
	o.s.groups.forget(group) // whatever this node knew of it is stale
	epoch, err := o.s.b.ClaimGroup(ctx, group)
	if err == nil {
		// Its state as the last coordinator stored it, under a claim
		// before this one: nothing stored under those lands from now on.
		err = o.s.loadGroup(ctx, group)
	}
	o.mu.Lock()
	close(o.mu.taking[group])
	delete(o.mu.taking, group)
	code := int16(0)
	switch {
	case err != nil:
		o.s.log.Warn("taking a group over", zap.String("group", group), zap.Error(err))
		code = int16(kafkaerr.CoordinatorLoadInProgress)
	case groupCoordinator(o.mu.view, group).id != o.s.cfg.NodeID:
		code = int16(kafkaerr.NotCoordinator)
	default:
		o.mu.owned[group] = epoch
		o.s.log.Info("group taken over", zap.String("group", group), zap.Int64("claim", epoch))
	}
	o.mu.Unlock()
	if code != 0 {
		o.s.groups.forget(group)
		return code, 0
	}
	return 0, epoch
}

// claimOf returns the epoch of this node's claim on group, 0 if it holds
// none.
func (o *ownership) claimOf(group string) int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.mu.owned[group]
}

// drop gives group up if this node holds it under claim: another node
// claimed it since. Unless this node holds a later claim already, the
// group is not taken over again before the settle time has passed
// (mustWaitLocked).
func (o *ownership) drop(group string, claim int64) {
	if claim == 0 {
		return
	}
	o.mu.Lock()
	cur, owned := o.mu.owned[group]
	held := owned && cur == claim
	if held {
		delete(o.mu.owned, group)
	}
	if !owned || held {
		o.mu.fenced[group] = o.s.clock.Now()
	}
	o.mu.Unlock()
	if held {
		o.s.log.Info("group claimed by another node; dropped", zap.String("group", group), zap.Int64("claim", claim))
		o.s.groups.forget(group)
	}
}

// coordinates returns 0 if this node coordinates group and may answer
// for it, else the error code to answer (NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS). A single node coordinates every group.
func (s *Server) coordinates(ctx context.Context, group string) int16 {
	code, _ := s.coordinatesUnder(ctx, group)
	return code
}

// coordinatesUnder is coordinates, and returns with 0 the epoch of this
// node's claim on group (0 on a single node): what a request writes for
// the group is written under it, so that a node that lost the group
// while the request was under way writes nothing.
func (s *Server) coordinatesUnder(ctx context.Context, group string) (int16, int64) {
	if s.owners == nil || group == "" {
		return 0, 0
	}
	return s.owners.check(ctx, group)
}

// claimOf returns the epoch of this node's claim on group (0 on a single
// node, which claims nothing).
func (s *Server) claimOf(group string) int64 {
	if s.owners == nil {
		return 0
	}
	return s.owners.claimOf(group)
}

// fenced drops group if err says another node claimed it since this one
// did (NOT_COORDINATOR from the coordinator): the group's members then
// look its coordinator up again, and the group is taken over afresh.
func (s *Server) fenced(group string, claim int64, err error) {
	if s.owners != nil && kafkaerr.CodeOf(err) == kafkaerr.NotCoordinator {
		s.owners.drop(group, claim)
	}
}

// coordinatedHere reports whether this node is group's coordinator by
// the membership it sees now (ListGroups lists those).
func (s *Server) coordinatedHere(group string) bool {
	return s.owners == nil || groupCoordinator(s.nodes(), group).id == s.cfg.NodeID
}

// catchUpConfigs reads on the topic configs that other nodes stored, on
// a cluster node.
func (s *Server) catchUpConfigs(ctx context.Context) error {
	if !s.cfg.Clustered {
		return nil
	}
	return s.configs.catchUp(ctx)
}
