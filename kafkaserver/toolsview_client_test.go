package kafkaserver

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless/internal/kafkatest"
)

// What lag tools see of groups, through real clients: franz-go's kadm
// (Lag, DescribeGroups, DescribeConsumerGroups, ListGroups, FetchOffsets)
// and sarama's ClusterAdmin, against the answers Kafka 4 gives them.

// lagTopic is the topic of the lag tests: 10, 20 and 30 records in its
// partitions 0, 1 and 2.
const lagTopic = "lag"

// lagCommits is what the members commit: partition 0 at 4 (lag 6),
// partition 1 at 20 (lag 0), partition 2 nothing (lag 30, from its log
// start offset).
var lagCommits = map[int32]int64{0: 4, 1: 20}

// wantLag is the lag of each partition after lagCommits.
var wantLag = map[int32]int64{0: 6, 1: 0, 2: 30}

// startLagBroker starts a broker with the lag topic filled.
func startLagBroker(t *testing.T) *testBroker {
	t.Helper()
	p := startBroker(t, &Config{ConsumerGroupHeartbeatInterval: 100 * time.Millisecond})
	cl := p.client(t, kgo.DefaultProduceTopic(lagTopic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	kafkatest.CreateTopic(t, cl, lagTopic, 3, nil)
	var rs []*kgo.Record
	for part, n := range map[int32]int{0: 10, 1: 20, 2: 30} {
		for i := range n {
			rs = append(rs, &kgo.Record{Partition: part, Value: fmt.Appendf(nil, "%d-%d", part, i)})
		}
	}
	require.NoError(t, cl.ProduceSync(t.Context(), rs...).FirstErr())
	return p
}

// lagMembers is a group of franz-go members that hold the lag topic's
// partitions and consume nothing.
type lagMembers struct {
	t       *testing.T
	mu      sync.Mutex
	owned   map[int]map[int32]bool
	clients []*kgo.Client
}

// startLagMembers starts n members of group with opts, and waits until
// they hold the three partitions between them, each at least one.
func startLagMembers(t *testing.T, p *testBroker, group string, n int, opts func(i int) []kgo.Opt) *lagMembers {
	t.Helper()
	g := &lagMembers{t: t, owned: map[int]map[int32]bool{}}
	for i := range n { // before any client runs: their callbacks read g.owned
		g.owned[i] = map[int32]bool{}
	}
	for i := range n {
		update := func(ps map[string][]int32, on bool) {
			g.mu.Lock()
			defer g.mu.Unlock()
			for _, part := range ps[lagTopic] {
				if on {
					g.owned[i][part] = true
				} else {
					delete(g.owned[i], part)
				}
			}
		}
		cl := p.client(t, append([]kgo.Opt{
			kgo.ConsumerGroup(group), kgo.ConsumeTopics(lagTopic), kgo.DisableAutoCommit(),
			kgo.HeartbeatInterval(100 * time.Millisecond), kgo.SessionTimeout(30 * time.Second),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { update(ps, true) }),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { update(ps, false) }),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { update(ps, false) }),
		}, opts(i)...)...)
		g.clients = append(g.clients, cl)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { // polls, so that the client runs its group; records are dropped
			defer close(done)
			for ctx.Err() == nil {
				cl.PollFetches(ctx)
			}
		}()
		t.Cleanup(func() { cancel(); <-done })
	}
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		all := map[int32]bool{}
		for _, ps := range g.owned {
			if len(ps) == 0 {
				return false
			}
			maps.Copy(all, ps)
		}
		return len(all) == 3
	}, 30*time.Second, 20*time.Millisecond, "the members hold the partitions")
	return g
}

// commit commits lagCommits, each partition by the member that holds it.
func (g *lagMembers) commit() {
	g.t.Helper()
	g.mu.Lock()
	owned := map[int][]int32{}
	for i, ps := range g.owned {
		owned[i] = slices.Sorted(maps.Keys(ps))
	}
	g.mu.Unlock()
	for i, cl := range g.clients {
		offsets := map[int32]kgo.EpochOffset{}
		for _, part := range owned[i] {
			if o, ok := lagCommits[part]; ok {
				offsets[part] = kgo.EpochOffset{Epoch: -1, Offset: o}
			}
		}
		if len(offsets) == 0 {
			continue
		}
		var err error
		cl.CommitOffsetsSync(g.t.Context(), map[string]map[int32]kgo.EpochOffset{lagTopic: offsets},
			func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, e error) {
				err = e
				for _, rt := range resp.Topics {
					for _, rp := range rt.Partitions {
						err = cmpErr(err, kerr.ErrorForCode(rp.ErrorCode))
					}
				}
			})
		require.NoError(g.t, err, "member %d commits %v", i, offsets)
	}
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// lagByPartition returns a group lag's lag of each partition of the lag
// topic, and which member (instance ID, else member ID) it is assigned to.
func lagByPartition(t *testing.T, l kadm.GroupLag) (map[int32]int64, map[int32]string) {
	t.Helper()
	lags, owners := map[int32]int64{}, map[int32]string{}
	for part, ml := range l[lagTopic] {
		require.NoError(t, ml.Err, "partition %d", part)
		lags[part] = ml.Lag
		if !ml.IsEmpty() {
			owners[part] = ml.Member.MemberID
			if ml.Member.InstanceID != nil {
				owners[part] = *ml.Member.InstanceID
			}
		}
	}
	return lags, owners
}

// saramaAdmin returns a sarama ClusterAdmin of p, closed at cleanup.
func saramaAdmin(t *testing.T, p *testBroker) sarama.ClusterAdmin {
	t.Helper()
	c := sarama.NewConfig()
	c.Version = sarama.V3_0_0_0
	adm, err := sarama.NewClusterAdmin([]string{p.addr}, c)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, adm.Close()) })
	return adm
}

// requireSaramaOffsets checks the group's committed offsets as sarama's
// ListConsumerGroupOffsets sees them: lagCommits, -1 for partition 2.
func requireSaramaOffsets(t *testing.T, adm sarama.ClusterAdmin, group string) {
	t.Helper()
	got, err := adm.ListConsumerGroupOffsets(group, map[string][]int32{lagTopic: {0, 1, 2}})
	require.NoError(t, err)
	require.Equal(t, sarama.ErrNoError, got.Err)
	for part, want := range map[int32]int64{0: 4, 1: 20, 2: -1} {
		b := got.GetBlock(lagTopic, part)
		require.NotNil(t, b, "partition %d", part)
		require.Equal(t, sarama.ErrNoError, b.Err, "partition %d", part)
		require.Equal(t, want, b.Offset, "partition %d", part)
	}
}

// TestLagClassicStaticGroup: a classic group of two static members
// (group.instance.id) as kadm's Lag, DescribeGroups and ListGroups and
// sarama's ClusterAdmin see it: Stable, each member with its instance ID
// and assignment, the exact lag of each partition attributed to the
// member holding it; a static member that closes (franz-go sends no
// LeaveGroup for it) stays a member, with its partitions, until its
// session expires, as in Kafka.
func TestLagClassicStaticGroup(t *testing.T) {
	p := startLagBroker(t)
	ctx := t.Context()
	g := startLagMembers(t, p, "static", 2, func(i int) []kgo.Opt { return []kgo.Opt{kgo.InstanceID(fmt.Sprintf("lag-%d", i))} })
	g.commit()
	adm := kadm.NewClient(p.client(t))

	check := func() {
		t.Helper()
		lags, err := adm.Lag(ctx, "static")
		require.NoError(t, err)
		l := lags["static"]
		require.NoError(t, (&l).Error())
		require.Equal(t, "Stable", l.State)
		require.Equal(t, "consumer", l.ProtocolType)
		require.Equal(t, "cooperative-sticky", l.Protocol)
		require.Len(t, l.Members, 2)
		require.Equal(t, "lag-0", *l.Members[0].InstanceID)
		require.Equal(t, "lag-1", *l.Members[1].InstanceID)
		got, owners := lagByPartition(t, l.Lag)
		require.Equal(t, wantLag, got)
		require.Equal(t, int64(36), l.Lag.Total())
		g.mu.Lock()
		for i, ps := range g.owned {
			for part := range ps {
				require.Equal(t, fmt.Sprintf("lag-%d", i), owners[part], "partition %d", part)
			}
		}
		g.mu.Unlock()
	}
	check()

	listed, err := adm.ListGroupsByType(ctx, []string{"classic"})
	require.NoError(t, err)
	require.Equal(t, kadm.ListedGroup{Coordinator: 0, Group: "static", ProtocolType: "consumer", State: "Stable", GroupType: "classic"},
		withCoordinator(listed["static"], 0))
	listed, err = adm.ListGroupsByType(ctx, []string{"consumer"})
	require.NoError(t, err)
	require.NotContains(t, listed, "static")

	sadm := saramaAdmin(t, p)
	described, err := sadm.DescribeConsumerGroups([]string{"static"})
	require.NoError(t, err)
	require.Len(t, described, 1)
	d := described[0]
	require.Equal(t, sarama.ErrNoError, d.Err)
	require.Equal(t, "Stable", d.State)
	require.Equal(t, "consumer", d.ProtocolType)
	require.Equal(t, "cooperative-sticky", d.Protocol)
	require.Len(t, d.Members, 2)
	assigned := map[int32]string{}
	for _, m := range d.Members {
		require.NotNil(t, m.GroupInstanceId)
		a, err := m.GetMemberAssignment()
		require.NoError(t, err)
		for _, part := range a.Topics[lagTopic] {
			assigned[part] = *m.GroupInstanceId
		}
	}
	require.Len(t, assigned, 3)
	requireSaramaOffsets(t, sadm, "static")
	groups, err := sadm.ListConsumerGroups()
	require.NoError(t, err)
	require.Equal(t, "consumer", groups["static"])

	// lag-1 closes: a static member, it stays until its session expires.
	g.clients[1].Close()
	check()
}

// withCoordinator returns l with its coordinator set to id.
func withCoordinator(l kadm.ListedGroup, id int32) kadm.ListedGroup {
	l.Coordinator = id
	return l
}

// TestLagConsumerGroup: a group of the consumer protocol (KIP-848,
// kgo.ServerSideBalancer). kadm's Lag describes groups with
// DescribeGroups, which Kafka 4 answers GROUP_ID_NOT_FOUND for such a
// group (version 6; Dead before): Lag reports that and no lag, as
// against Kafka 4. The tools of that protocol see it whole:
// ConsumerGroupDescribe (kadm.DescribeConsumerGroups), ListGroups by
// type, and the committed offsets with the end offsets give the exact
// lag; sarama (DescribeGroups version 5) sees it Dead, with its offsets.
func TestLagConsumerGroup(t *testing.T) {
	p := startLagBroker(t)
	ctx := t.Context()
	g := startLagMembers(t, p, "kip848", 2, func(int) []kgo.Opt { return []kgo.Opt{kgo.ServerSideBalancer()} })
	adm := kadm.NewClient(p.client(t))
	require.Eventually(t, func() bool {
		d, err := adm.DescribeConsumerGroups(ctx, "kip848")
		return err == nil && d["kip848"].State == "Stable"
	}, 30*time.Second, 20*time.Millisecond, "the group is Stable")
	g.commit()

	lags, err := adm.Lag(ctx, "kip848")
	require.NoError(t, err)
	require.ErrorIs(t, lags["kip848"].DescribeErr, kerr.GroupIDNotFound)
	require.Nil(t, lags["kip848"].Lag, "no lag: the group is not described")

	described, err := adm.DescribeConsumerGroups(ctx, "kip848")
	require.NoError(t, err)
	d := described["kip848"]
	require.NoError(t, d.Err)
	require.Equal(t, "Stable", d.State)
	require.Equal(t, "uniform", d.AssignorName)
	require.Equal(t, d.Epoch, d.AssignmentEpoch)
	require.Len(t, d.Members, 2)
	assigned := map[int32]string{}
	for _, m := range d.Members {
		require.Equal(t, d.Epoch, m.MemberEpoch)
		require.Equal(t, m.Assignment, m.TargetAssignment)
		for part := range m.Assignment[lagTopic] {
			assigned[part] = m.MemberID
		}
	}
	require.Len(t, assigned, 3)

	committed, err := adm.FetchOffsets(ctx, "kip848")
	require.NoError(t, err)
	starts, err := adm.ListStartOffsets(ctx, lagTopic)
	require.NoError(t, err)
	ends, err := adm.ListEndOffsets(ctx, lagTopic)
	require.NoError(t, err)
	got := map[int32]int64{}
	for part := range int32(3) {
		from := starts[lagTopic][part].Offset
		if c, ok := committed.Lookup(lagTopic, part); ok {
			require.NoError(t, c.Err)
			from = c.At
		}
		got[part] = ends[lagTopic][part].Offset - from
	}
	require.Equal(t, wantLag, got)

	listed, err := adm.ListGroupsByType(ctx, []string{"consumer"})
	require.NoError(t, err)
	require.Equal(t, kadm.ListedGroup{Group: "kip848", ProtocolType: "consumer", State: "Stable", GroupType: "consumer"},
		withCoordinator(listed["kip848"], 0))
	listed, err = adm.ListGroupsByType(ctx, []string{"classic"})
	require.NoError(t, err)
	require.NotContains(t, listed, "kip848")

	sadm := saramaAdmin(t, p)
	sd, err := sadm.DescribeConsumerGroups([]string{"kip848"})
	require.NoError(t, err)
	require.Len(t, sd, 1)
	require.Equal(t, sarama.ErrNoError, sd[0].Err)
	require.Equal(t, "Dead", sd[0].State)
	require.Empty(t, sd[0].Members)
	requireSaramaOffsets(t, sadm, "kip848")
}

// TestLagReadCommitted: the lag of a group on a partition with a
// transaction open is, for a read_committed consumer, up to the last
// stable offset (ListOffsets -1 at READ_COMMITTED: kadm's
// ListCommittedOffsets), and up to the high watermark for the others
// (kadm's Lag); once the transaction ends, the two meet.
func TestLagReadCommitted(t *testing.T) {
	p := startBroker(t, nil)
	ctx := t.Context()
	kafkatest.CreateTopic(t, p.client(t), "txlag", 1, nil)
	plain := p.client(t, kgo.DefaultProduceTopic("txlag"))
	for i := range 5 { // offsets 0-4
		require.NoError(t, plain.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr())
	}
	tx := p.client(t, kgo.DefaultProduceTopic("txlag"), kgo.TransactionalID("tx-lag"))
	send := func(n int) {
		require.NoError(t, tx.BeginTransaction())
		for i := range n {
			require.NoError(t, tx.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr())
		}
	}
	send(3) // offsets 5-7, the marker 8
	require.NoError(t, tx.EndTransaction(ctx, kgo.TryCommit))
	send(2) // offsets 9-10, left open

	adm := kadm.NewClient(p.client(t))
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "txlag", Partition: 0, At: 2, LeaderEpoch: -1})
	_, err := adm.CommitOffsets(ctx, "txg", os)
	require.NoError(t, err)

	lags := func() (uncommitted, committed int64) {
		t.Helper()
		l, err := adm.Lag(ctx, "txg")
		require.NoError(t, err)
		gl := l["txg"]
		require.NoError(t, gl.Error())
		require.Equal(t, "Empty", gl.State)
		uncommitted = gl.Lag.Total()
		described, err := adm.DescribeGroups(ctx, "txg")
		require.NoError(t, err)
		fetched, err := adm.FetchOffsets(ctx, "txg")
		require.NoError(t, err)
		starts, err := adm.ListStartOffsets(ctx, "txlag")
		require.NoError(t, err)
		stable, err := adm.ListCommittedOffsets(ctx, "txlag")
		require.NoError(t, err)
		committed = kadm.CalculateGroupLagWithStartOffsets(described["txg"], fetched, starts, stable).Total()
		return uncommitted, committed
	}
	u, c := lags()
	require.Equal(t, int64(11-2), u, "up to the high watermark")
	require.Equal(t, int64(9-2), c, "up to the last stable offset: the open transaction's first offset")

	require.NoError(t, tx.EndTransaction(ctx, kgo.TryCommit)) // its marker at 11
	u, c = lags()
	require.Equal(t, int64(12-2), u)
	require.Equal(t, int64(12-2), c)
}
