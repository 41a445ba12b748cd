package main

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless/internal/kafkatest"
)

// The consumer group protocol of KIP-848 (kafkaserver/consumergroups.go)
// on a cluster of three broker processes, with franz-go members that
// leave the assignment to the coordinator (kgo.ServerSideBalancer).

// cgMember is what ConsumerGroupDescribe says of one member: its epoch,
// subscription, and its assignment and target, by topic name.
type cgMember struct {
	epoch      int32
	subscribed []string
	regex      string
	assigned   map[string][]int32
	target     map[string][]int32
}

// cgDescribed is what ConsumerGroupDescribe says of a group: its state,
// group epoch, assignment epoch, and its members by member ID.
type cgDescribed struct {
	state                  string
	epoch, assignmentEpoch int32
	members                map[string]cgMember
}

// describeConsumerGroup sends ConsumerGroupDescribe for group to node i
// itself (not to the coordinator a client would look up), and returns
// what it says, or its error code.
func (c *testCluster) describeConsumerGroup(i int, group string) (cgDescribed, int16, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.procs[i].addr)}, c.opts...)...)
	if err != nil {
		return cgDescribed{}, 0, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(c.t.Context(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl.SeedBrokers()[0])
	if err != nil {
		return cgDescribed{}, 0, err
	}
	g := resp.Groups[0]
	if g.ErrorCode != 0 {
		return cgDescribed{}, g.ErrorCode, nil
	}
	byTopic := func(a kmsg.Assignment) map[string][]int32 {
		out := map[string][]int32{}
		for _, tp := range a.TopicPartitions {
			out[tp.Topic] = append(out[tp.Topic], tp.Partitions...)
			slices.Sort(out[tp.Topic])
		}
		return out
	}
	d := cgDescribed{state: g.State, epoch: g.Epoch, assignmentEpoch: g.AssignmentEpoch, members: map[string]cgMember{}}
	for _, m := range g.Members {
		dm := cgMember{epoch: m.MemberEpoch, subscribed: m.SubscribedTopics, assigned: byTopic(m.Assignment), target: byTopic(m.TargetAssignment)}
		if m.SubscribedTopicRegex != nil {
			dm.regex = *m.SubscribedTopicRegex
		}
		d.members[m.MemberID] = dm
	}
	return d, 0, nil
}

// liveCoordinatorOf returns the node that the first live node says
// coordinates group, or the error of asking it.
func (c *testCluster) liveCoordinatorOf(group string) (int, error) {
	live := c.live()
	if len(live) == 0 {
		return -1, errors.New("no live node")
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(live[0])}, c.opts...)...)
	if err != nil {
		return -1, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(c.t.Context(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = group
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return -1, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return -1, err
	}
	return int(resp.NodeID), nil
}

// stableGroup waits until group's coordinator, node coord, describes it
// Stable with n members, each at the group epoch (which is the
// assignment epoch) holding its whole target and, if each is not 0,
// each partitions; it returns that description.
func (c *testCluster) stableGroup(coord int, group string, n, each int) cgDescribed {
	c.t.Helper()
	var d cgDescribed
	var code int16
	var err error
	require.Eventually(c.t, func() bool {
		d, code, err = c.describeConsumerGroup(coord, group)
		if err != nil || code != 0 || d.state != "Stable" || len(d.members) != n || d.epoch != d.assignmentEpoch {
			return false
		}
		for _, m := range d.members {
			if m.epoch != d.epoch || !maps.EqualFunc(m.assigned, m.target, slices.Equal) {
				return false
			}
			if each > 0 && len(m.assigned) != 1 {
				return false
			}
			for _, ps := range m.assigned {
				if each > 0 && len(ps) != each {
					return false
				}
			}
		}
		return true
	}, 60*time.Second, 100*time.Millisecond, "group %s on node %d: Stable with %d members (now %+v, code %d, %v)", group, coord, n, d, code, err)
	return d
}

// commit848 is a commit of one partition by a member: the offset
// committed, and whether the commit was acknowledged (one that failed
// may still have landed).
type commit848 struct {
	topic     string
	partition int32
	offset    int64
	acked     bool
}

// member848 is a franz-go member of a KIP-848 group (the server-side
// assignor, uniform) that, after each poll, keeps the records it polled
// (its processing) and then commits them with CommitRecords: a
// partition's committed offset is always one past a record the member
// processed. A partition taken from it is given up only between polls
// (kgo.BlockRebalanceOnPoll, allowed once the commit is answered), so
// that the next owner starts past what the member processed; records
// are consumed twice only when a commit fails or its answer is lost.
type member848 struct {
	cl       *kgo.Client
	cancel   context.CancelFunc
	done     chan struct{}
	stopOnce sync.Once

	mu       sync.Mutex
	records  []*kgo.Record      // consumed, in the order polled
	commits  []commit848        // in the order made
	owned    map[string][]int32 // what franz-go says the member owns
	lostOnes int                // revocations and losses of partitions
	errs     []error            // polled
	// heartbeats is, by node, when the last heartbeat answered by it
	// was read (an answer, whatever its error code).
	heartbeats map[int32]time.Time
}

// heartbeatHook tells a member848 of each heartbeat answered.
type heartbeatHook struct{ m *member848 }

// OnBrokerE2E implements kgo.HookBrokerE2E.
func (h heartbeatHook) OnBrokerE2E(meta kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if key != int16(kmsg.ConsumerGroupHeartbeat) || e2e.Err() != nil {
		return
	}
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	h.m.heartbeats[meta.NodeID] = time.Now()
}

// heartbeatSince reports whether node answered a heartbeat of the member
// after t.
func (m *member848) heartbeatSince(node int, t time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.heartbeats[int32(node)].After(t)
}

// startMember848 starts a member of group with opts (what it consumes,
// and its seed brokers) after franzOpts of the cluster's addresses.
func startMember848(t *testing.T, c *testCluster, group string, opts ...kgo.Opt) *member848 {
	m := &member848{done: make(chan struct{}), owned: map[string][]int32{}, heartbeats: map[int32]time.Time{}}
	change := func(add bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			for topic, parts := range ps {
				if add {
					m.owned[topic] = append(m.owned[topic], parts...)
					slices.Sort(m.owned[topic])
					continue
				}
				m.owned[topic] = slices.DeleteFunc(m.owned[topic], func(p int32) bool { return slices.Contains(parts, p) })
				if len(m.owned[topic]) == 0 {
					delete(m.owned, topic)
				}
				m.lostOnes += len(parts)
			}
		}
	}
	cl, err := kgo.NewClient(append(append(franzOpts(c.addrs()), kgo.ConsumerGroup(group), kgo.ServerSideBalancer(),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(300*time.Millisecond),
		kgo.OnPartitionsAssigned(change(true)), kgo.OnPartitionsRevoked(change(false)), kgo.OnPartitionsLost(change(false)),
		kgo.WithHooks(heartbeatHook{m})), opts...)...)
	require.NoError(t, err)
	m.cl = cl
	ctx, cancel := context.WithCancel(t.Context())
	m.cancel = cancel
	go func() {
		defer close(m.done)
		defer cl.AllowRebalance() // or Close waits for it, to leave
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				return
			}
			rs := fs.Records()
			m.mu.Lock()
			fs.EachError(func(_ string, _ int32, err error) { m.errs = append(m.errs, err) })
			m.records = append(m.records, rs...)
			m.mu.Unlock()
			if len(rs) == 0 {
				cl.AllowRebalance()
				continue
			}
			cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
			err := cl.CommitRecords(cctx, rs...)
			ccancel()
			cl.AllowRebalance()
			type tp struct {
				topic     string
				partition int32
			}
			last := map[tp]int64{}
			for _, r := range rs {
				k := tp{r.Topic, r.Partition}
				last[k] = max(last[k], r.Offset+1)
			}
			m.mu.Lock()
			for k, off := range last {
				m.commits = append(m.commits, commit848{topic: k.topic, partition: k.partition, offset: off, acked: err == nil})
			}
			m.mu.Unlock()
		}
	}()
	return m
}

// stop stops polling and closes the client (which leaves the group); it
// may be called twice.
func (m *member848) stop() {
	m.stopOnce.Do(func() {
		m.cancel()
		<-m.done
		m.cl.Close()
	})
}

// consumed returns how many records of topic the member consumed.
func (m *member848) consumed(topic string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, r := range m.records {
		if r.Topic == topic {
			n++
		}
	}
	return n
}

// ackedCommits returns, by partition of topic, the highest offset the
// member's acknowledged commits committed.
func (m *member848) ackedCommits(topic string) map[int32]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[int32]int64{}
	for _, c := range m.commits {
		if c.acked && c.topic == topic {
			out[c.partition] = max(out[c.partition], c.offset)
		}
	}
	return out
}

// state returns the member's ID and epoch (franz-go's), what it owns,
// and how many partitions it gave up or lost so far.
func (m *member848) state() (string, int32, map[string][]int32, int) {
	id, epoch := m.cl.GroupMetadata()
	m.mu.Lock()
	defer m.mu.Unlock()
	owned := map[string][]int32{}
	for t, ps := range m.owned {
		owned[t] = slices.Clone(ps)
	}
	return id, epoch, owned, m.lostOnes
}

// TestClusterConsumerProtocolKill runs three franz-go members of a
// KIP-848 group (kgo.ServerSideBalancer, the uniform assignor) over a
// topic of six partitions on three nodes; each commits what it processed
// after each poll (CommitRecords). Records are produced before the
// members join, and while they consume. The first member, seeded with
// the coordinator's address alone, consumes on its own before the others
// join and take partitions from it. Once the group is stable (two partitions a
// member, each at the group epoch, as franz-go and ConsumerGroupDescribe
// agree), the group's coordinator is killed with SIGKILL: every member's
// heartbeats and commits went to it, and it led a third of the
// partitions. Then another node coordinates the group and describes it
// with the same group epoch, and the same members with the same member
// epochs and assignments; consumption goes on, every acknowledged record
// is consumed, with its value; and through to the end the group is the
// one described before the kill (no rebalance), no member gave up or
// lost a partition, and franz-go's member IDs and epochs are those
// described. A record consumed twice is at or past the last commit its
// partition had acknowledged before the kill (the uncommitted tail, read
// again from the committed offset), and each run of a member over a
// partition that re-reads records starts at an offset the group
// committed.
func TestClusterConsumerProtocolKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, an S3 server and three broker processes")
	}
	// Heartbeats every 250 ms, and a session of 5 s, so that the test
	// sees sessions that only the new coordinator can keep.
	const session = 5 * time.Second
	c := startCluster(t, 3, nil, "-consumer-group-heartbeat-interval", "250ms", "-consumer-group-session-timeout", session.String())
	const topic, group, partitions = "kip848", "kip848-readers", 6
	admin := c.procs[0].client(t, kgo.SeedBrokers(c.addrs()...))
	kafkatest.CreateTopic(t, admin, topic, partitions, nil)
	l := &clusterLog{}
	// Records before the members join.
	pre, err := kgo.NewClient(append(franzOpts(c.addrs()), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	require.NoError(t, err)
	const before = 300
	var rs []*kgo.Record
	for i := range before {
		rs = append(rs, &kgo.Record{Partition: int32(i % partitions), Value: []byte("pre-" + strconv.Itoa(i))})
	}
	results := pre.ProduceSync(t.Context(), rs...)
	pre.Close()
	require.NoError(t, results.FirstErr())
	for _, r := range results {
		l.ack(clusterRecord{partition: r.Record.Partition, offset: r.Record.Offset, value: string(r.Record.Value)})
	}

	coord := c.coordinatorOf(group)
	var members []*member848
	defer func() {
		for _, m := range members {
			m.stop()
		}
	}()
	// The first member is on its own for a while: it is assigned every
	// partition, and gives up two thirds of them when the others join.
	// It learns the other nodes from the one that dies.
	members = append(members, startMember848(t, c, group, kgo.SeedBrokers(c.procs[coord].addr), kgo.ConsumeTopics(topic)))
	require.Eventually(t, func() bool { return members[0].consumed(topic) > 0 }, 60*time.Second, 50*time.Millisecond, "the first member consumes")
	for range 2 {
		members = append(members, startMember848(t, c, group, kgo.ConsumeTopics(topic)))
	}
	stable := c.stableGroup(coord, group, 3, partitions/3)
	// franz-go agrees: each member has the ID, epoch and partitions
	// described.
	lost := make([]int, len(members))
	require.Eventually(t, func() bool {
		for i, m := range members {
			id, epoch, owned, n := m.state()
			d, ok := stable.members[id]
			if !ok || d.epoch != epoch || !maps.EqualFunc(d.assigned, owned, slices.Equal) {
				return false
			}
			lost[i] = n
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "each member holds what the coordinator describes: %+v", stable)
	t.Logf("group stable at epoch %d on node %d: %+v", stable.epoch, coord, stable.members)

	stop := make(chan struct{})
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		franzClients{}.produce(t, c.addrs(), topic, partitions, l, stop)
	}()
	// committedSum is the sum, over the partitions, of the highest offset
	// acknowledged to a member's commit.
	committedSum := func() int64 {
		var sum int64
		for _, m := range members {
			for _, off := range m.ackedCommits(topic) {
				sum += off
			}
		}
		return sum
	}
	consumedCount := func() int {
		n := 0
		for _, m := range members {
			n += m.consumed(topic)
		}
		return n
	}
	// progress waits until n more records are acknowledged, consumed and
	// committed.
	progress := func(n int) {
		t.Helper()
		acks, consumed, commits := l.ackCount()+n, consumedCount()+n, committedSum()+int64(n)
		require.Eventually(t, func() bool { return l.ackCount() >= acks && consumedCount() >= consumed && committedSum() >= commits },
			60*time.Second, 50*time.Millisecond, "%d records acknowledged, %d consumed, %d committed (now %d, %d and %d)",
			acks, consumed, commits, l.ackCount(), consumedCount(), committedSum())
	}
	progress(before + 300)

	now := c.coordinatorOf(group)
	require.Equal(t, coord, now, "the coordinator moved with every node up")
	// The last commits acknowledged before the kill.
	floor := map[int32]int64{}
	for _, m := range members {
		for p, off := range m.ackedCommits(topic) {
			floor[p] = max(floor[p], off)
		}
	}
	t.Logf("killing node %d, the group's coordinator, at %d acknowledged, %d consumed, commits %v", coord, l.ackCount(), consumedCount(), floor)
	type mark struct{ records, commits int }
	atKill := make([]mark, len(members))
	for i, m := range members {
		m.mu.Lock()
		atKill[i] = mark{len(m.records), len(m.commits)}
		m.mu.Unlock()
	}
	c.procs[coord].kill()

	// Another node takes the group over, as it was.
	var next int
	var after cgDescribed
	require.Eventually(t, func() bool {
		var err error
		if next, err = c.liveCoordinatorOf(group); err != nil || next == coord {
			return false
		}
		d, code, err := c.describeConsumerGroup(next, group)
		if err != nil || code != 0 {
			return false
		}
		after = d
		return true
	}, 60*time.Second, 100*time.Millisecond, "another node coordinates the group, and describes it")
	t.Logf("node %d took the group over: %+v", next, after.members)
	require.Equal(t, stable, after, "the group as node %d loaded it, against the group before the kill", next)
	// The members' sessions at the new coordinator started when it loaded
	// the group, before now: once it has answered a heartbeat of each
	// member a session later, those sessions were kept by heartbeats to
	// it alone (if not, the members would have been removed, and
	// franz-go would have joined again with new member IDs: the group
	// checked at the end would differ).
	loaded := time.Now()
	require.Eventually(t, func() bool {
		for _, m := range members {
			if !m.heartbeatSince(next, loaded.Add(session)) {
				return false
			}
		}
		return true
	}, 60*time.Second, 100*time.Millisecond, "node %d answers every member's heartbeats a session after it loaded the group", next)

	progress(300)
	close(stop)
	<-produced
	t.Logf("%d records acknowledged, %d given up", l.ackCount(), len(l.errs))
	for i, err := range l.errs {
		if i == 3 {
			break
		}
		t.Logf("given up: %v", err)
	}
	// gather puts the members' records in l, in the order each consumed
	// them.
	gather := func() {
		l.mu.Lock()
		l.consumed = nil
		l.mu.Unlock()
		for i, m := range members {
			m.mu.Lock()
			for _, r := range m.records {
				l.consume(clusterRecord{member: i, partition: r.Partition, offset: r.Offset, value: string(r.Value)})
			}
			m.mu.Unlock()
		}
	}
	require.Eventually(t, func() bool { gather(); return l.missing() == 0 }, 60*time.Second, 100*time.Millisecond,
		"every acknowledged record consumed")
	// The group is still the one before the kill, and so is each member
	// as franz-go sees it.
	final, code, err := c.describeConsumerGroup(next, group)
	require.NoError(t, err)
	require.Zero(t, code)
	require.Equal(t, stable, final, "the group at the end, against the group before the kill")
	for i, m := range members {
		id, epoch, owned, n := m.state()
		require.Contains(t, stable.members, id, "member %d's ID", i)
		require.Equal(t, stable.members[id].epoch, epoch, "member %d's epoch", i)
		require.Equal(t, stable.members[id].assigned, owned, "member %d's partitions", i)
		require.Equal(t, lost[i], n, "member %d gave up or lost no partition", i)
		// Each member, the one that knew only the killed node too,
		// consumed and committed through the new coordinator.
		m.mu.Lock()
		require.Greater(t, len(m.records), atKill[i].records, "member %d consumed after the kill", i)
		require.True(t, slices.ContainsFunc(m.commits[atKill[i].commits:], func(c commit848) bool { return c.acked }),
			"member %d committed after the kill", i)
		t.Logf("member %d: %d records consumed, %d after the kill; %d errors polled %v", i, len(m.records), len(m.records)-atKill[i].records, len(m.errs), m.errs)
		m.mu.Unlock()
	}
	for _, m := range members {
		m.stop()
	}
	gather()

	// Each acknowledged record consumed with its value.
	at := map[[2]int64]string{}
	for _, r := range l.consumed {
		at[[2]int64{int64(r.partition), r.offset}] = r.value
	}
	for _, r := range l.acked {
		require.Equal(t, r.value, at[[2]int64{int64(r.partition), r.offset}], "partition %d offset %d", r.partition, r.offset)
	}
	// Every offset a member committed, acknowledged or not (a commit that
	// failed may have landed).
	committed := map[int32]map[int64]bool{}
	commits := 0
	for _, m := range members {
		for _, cm := range m.commits {
			if committed[cm.partition] == nil {
				committed[cm.partition] = map[int64]bool{}
			}
			committed[cm.partition][cm.offset] = true
			commits++
		}
	}
	// A record consumed twice is at or past its partition's last commit
	// before the kill; a run of a member over a partition that starts
	// at a record consumed before starts at an offset committed.
	last := map[[2]int64]int64{}
	seen := map[[2]int64]bool{}
	runs, dups := 0, 0
	for _, r := range l.consumed {
		k, pk := [2]int64{int64(r.member), int64(r.partition)}, [2]int64{int64(r.partition), r.offset}
		if prev, ok := last[k]; !ok || r.offset != prev+1 {
			runs++
			require.True(t, !seen[pk] || committed[r.partition][r.offset],
				"member %d started on partition %d at offset %d, consumed before, which was never committed", r.member, r.partition, r.offset)
		}
		last[k] = r.offset
		if seen[pk] {
			dups++
			require.GreaterOrEqual(t, r.offset, floor[r.partition],
				"partition %d offset %d consumed twice, below the partition's commit before the kill", r.partition, r.offset)
		}
		seen[pk] = true
	}
	t.Logf("%d records consumed in %d runs, %d of them a second time; %d commits", len(l.consumed), runs, dups, commits)
}

// TestClusterConsumerProtocolRegex runs a franz-go member of a KIP-848
// group that subscribes by regular expression (kgo.ConsumeRegex with
// kgo.ConsumeTopics("orders-.*")) on a cluster of three nodes. franz-go
// (v1.22.3), with no topics excluded, sends the expression in its
// heartbeats (SubscribedTopicRegex, as .*(?:(?:orders-.*)).*, to match
// anywhere in a name as its own matching does) and no topic names, so it
// is the coordinator that resolves it. The member is assigned, and
// consumes, the matching topic and not the other; a matching topic
// created after it joined is then assigned to it at a new group epoch,
// as ConsumerGroupDescribe shows, its records are consumed (from the
// start), and nothing is consumed twice. Raw heartbeats of members of
// other groups check that the coordinator matches an expression against
// the whole name, as Kafka does.
func TestClusterConsumerProtocolRegex(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, an S3 server and three broker processes")
	}
	c := startCluster(t, 3, nil)
	const group = "kip848-regex"
	admin := c.procs[0].client(t, kgo.SeedBrokers(c.addrs()...))
	kafkatest.CreateTopic(t, admin, "orders-eu", 2, nil)
	kafkatest.CreateTopic(t, admin, "payments", 2, nil)
	producer, err := kgo.NewClient(append(franzOpts(c.addrs()), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	require.NoError(t, err)
	defer producer.Close()
	sent := map[string]int{} // records produced, by topic
	produce := func(topic string, partitions, n int) {
		t.Helper()
		var rs []*kgo.Record
		for i := range n {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(i % partitions), Value: []byte(topic + "-" + strconv.Itoa(sent[topic]+i))})
		}
		sent[topic] += n
		require.NoError(t, producer.ProduceSync(t.Context(), rs...).FirstErr())
	}
	produce("orders-eu", 2, 20)
	produce("payments", 2, 20)

	m := startMember848(t, c, group, kgo.ConsumeRegex(), kgo.ConsumeTopics("orders-.*"))
	defer m.stop()
	coord := c.coordinatorOf(group)
	joined := c.stableGroup(coord, group, 1, 0)
	var id string
	var d cgMember
	for id, d = range joined.members {
	}
	require.Equal(t, ".*(?:(?:orders-.*)).*", d.regex, "the expression franz-go sends")
	require.Empty(t, d.subscribed, "no topic names: the coordinator resolves the expression")
	require.Equal(t, map[string][]int32{"orders-eu": {0, 1}}, d.assigned)
	require.Eventually(t, func() bool { return m.consumed("orders-eu") == 20 }, 30*time.Second, 50*time.Millisecond, "orders-eu consumed")

	// A matching topic created now: the coordinator assigns it to the
	// member at its next heartbeat.
	kafkatest.CreateTopic(t, admin, "orders-us", 3, nil)
	produce("orders-us", 3, 30)
	var now cgDescribed
	require.Eventually(t, func() bool {
		now = c.stableGroup(coord, group, 1, 0)
		return len(now.members[id].assigned) == 2
	}, 60*time.Second, 100*time.Millisecond, "orders-us assigned (now %+v)", now)
	require.Greater(t, now.epoch, joined.epoch, "a new group epoch for the new topic")
	require.Equal(t, map[string][]int32{"orders-eu": {0, 1}, "orders-us": {0, 1, 2}}, now.members[id].assigned)
	require.Equal(t, now.epoch, now.members[id].epoch)

	// franz-go's wrapping aside, the coordinator matches an expression
	// against the whole topic name, as Kafka does: a member joining
	// another group by a raw heartbeat with "orders-.*" is assigned both
	// orders topics, and with "rders-.*" none.
	rawJoin := func(group, regex string) map[string][]int32 {
		t.Helper()
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = group, "raw-member", 0, 30000
		req.SubscribedTopicRegex, req.Topics = &regex, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		var resp *kmsg.ConsumerGroupHeartbeatResponse
		require.Eventually(t, func() bool { // the coordinator claims the group first
			var err error
			resp, err = req.RequestWith(t.Context(), admin)
			return err == nil && resp.ErrorCode == 0
		}, 30*time.Second, 100*time.Millisecond, "joining %s with %q", group, regex)
		d, code, err := c.describeConsumerGroup(c.coordinatorOf(group), group)
		require.NoError(t, err)
		require.Zero(t, code)
		require.Equal(t, regex, d.members["raw-member"].regex)
		leave := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		leave.Group, leave.MemberID, leave.MemberEpoch = group, "raw-member", -1
		lresp, err := leave.RequestWith(t.Context(), admin)
		require.NoError(t, err)
		require.Zero(t, lresp.ErrorCode)
		return d.members["raw-member"].assigned
	}
	require.Equal(t, map[string][]int32{"orders-eu": {0, 1}, "orders-us": {0, 1, 2}}, rawJoin("kip848-raw", "orders-.*"))
	require.Empty(t, rawJoin("kip848-raw-partial", "rders-.*"))
	require.Eventually(t, func() bool { return m.consumed("orders-us") == 30 }, 60*time.Second, 50*time.Millisecond,
		"orders-us consumed (%d of 30)", m.consumed("orders-us"))
	produce("orders-eu", 2, 10)
	require.Eventually(t, func() bool { return m.consumed("orders-eu") == 30 }, 30*time.Second, 50*time.Millisecond, "orders-eu consumed again")
	gotID, epoch, owned, lost := m.state()
	require.Equal(t, id, gotID, "franz-go's member ID")
	require.Equal(t, now.epoch, epoch, "franz-go's member epoch")
	require.Equal(t, now.members[id].assigned, owned, "franz-go's partitions")
	require.Zero(t, lost, "no partition given up")
	m.stop()

	require.Zero(t, m.consumed("payments"), "payments does not match")
	values := map[string]int{}
	for _, r := range m.records {
		values[string(r.Value)]++
	}
	for v, n := range values {
		require.Equal(t, 1, n, "%s consumed once", v)
	}
}
