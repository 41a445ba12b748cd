package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/diskless-go/diskless/internal/etcdtest"
	"github.com/diskless-go/diskless/internal/kafkatest"
	"github.com/diskless-go/diskless/internal/s3test"
	"github.com/diskless-go/diskless/kbatch"
)

// testCluster is three broker processes (-etcd) on one bucket of the
// real S3 server, coordinated by a three-member etcd.
type testCluster struct {
	t     *testing.T
	procs []*brokerProc
	opts  []kgo.Opt // of the clients the test's own checks use (TLS, SASL)
	etcd  *etcdtest.Cluster
}

// startCluster starts etcd, the S3 server and n broker nodes (node i in
// racks[i], if racks is not nil), and waits until every node's Metadata
// names all n.
func startCluster(t *testing.T, n int, racks []string, extra ...string) *testCluster {
	t.Helper()
	return startClusterWith(t, n, racks, nil, extra...)
}

// startClusterWith is startCluster whose own checks connect with opts
// (the TLS and SASL of a secured cluster).
func startClusterWith(t *testing.T, n int, racks []string, opts []kgo.Opt, extra ...string) *testCluster {
	t.Helper()
	return startClusterOpts(t, n, racks, opts, nil, nil, extra...)
}

// startClusterEtcd is startClusterWith on an etcd started with etcdOpts.
// With etcdOpts.TLS the nodes connect with -etcd-ca, -etcd-cert and
// -etcd-key; with etcdOpts.Auth as its user, with -etcd-user and the
// password in $DISKLESS_ETCD_PASSWORD (set for the test: no parallel
// test may set it otherwise).
func startClusterEtcd(t *testing.T, n int, racks []string, opts []kgo.Opt, etcdOpts *etcdtest.Options, extra ...string) *testCluster {
	t.Helper()
	return startClusterOpts(t, n, racks, opts, etcdOpts, nil, extra...)
}

// startClusterEach is startClusterWith with, if each is not nil, node i's
// own flags each(i) after extra (its certificate, say).
func startClusterEach(t *testing.T, n int, racks []string, opts []kgo.Opt, each func(i int) []string, extra ...string) *testCluster {
	t.Helper()
	return startClusterOpts(t, n, racks, opts, nil, each, extra...)
}

// startClusterOpts is startClusterEtcd and startClusterEach in one.
func startClusterOpts(t *testing.T, n int, racks []string, opts []kgo.Opt, etcdOpts *etcdtest.Options, each func(i int) []string, extra ...string) *testCluster {
	extra = slices.DeleteFunc(extra, func(s string) bool { return s == "" })
	t.Helper()
	s3 := s3test.Start(t)
	s3.Bucket(t, "kafka-cluster") // creates it
	etcd := etcdtest.Start(t, etcdOpts)
	if etcdOpts != nil && etcdOpts.TLS {
		f := etcd.TLSFiles()
		extra = append(extra, "-etcd-ca", f.CA, "-etcd-cert", f.Cert, "-etcd-key", f.Key)
	}
	if etcdOpts != nil && etcdOpts.Auth != nil {
		extra = append(extra, "-etcd-user", etcdOpts.Auth.User)
		t.Setenv(envEtcdPassword, etcdOpts.Auth.Password) // the brokers inherit it
	}
	root := t.TempDir()
	c := &testCluster{t: t, opts: opts, etcd: etcd}
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0") // a port kept across restarts
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close())
		data := filepath.Join(root, fmt.Sprintf("node-%d", i), "data")
		require.NoError(t, os.MkdirAll(data, 0o755))
		args := append([]string{"-node-id", strconv.Itoa(i), "-etcd", strings.Join(etcd.Endpoints(), ","), "-lease-ttl", "2s",
			"-group-initial-rebalance-delay", "200ms", "-log-level", "info"}, extra...)
		if racks != nil {
			args = append(args, "-rack", racks[i])
		}
		if each != nil {
			args = append(args, each(i)...)
		}
		c.procs = append(c.procs, startBrokerAt(t, addr, data, s3.URL("kafka-cluster"), args...))
	}
	c.waitNodes(n)
	return c
}

// addrs returns every node's address, the dead ones too (clients are
// seeded with all).
func (c *testCluster) addrs() []string {
	var out []string
	for _, p := range c.procs {
		out = append(out, p.addr)
	}
	return out
}

// live returns the addresses of the nodes that run.
func (c *testCluster) live() []string {
	var out []string
	for _, p := range c.procs {
		select {
		case <-p.exited:
		default:
			out = append(out, p.addr)
		}
	}
	return out
}

// metadataNodes returns the node IDs that node i's Metadata names.
func (c *testCluster) metadataNodes(i int) ([]int32, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.procs[i].addr)}, c.opts...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(c.t.Context(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	var ids []int32
	for _, b := range resp.Brokers {
		ids = append(ids, b.NodeID)
	}
	slices.Sort(ids)
	return ids, nil
}

// waitNodes waits until every live node's Metadata names n nodes.
func (c *testCluster) waitNodes(n int) {
	c.t.Helper()
	c.waitNodesExcept(-1, n)
}

// waitNodesExcept waits until every live node but skip (frozen, say; -1
// for none) names n nodes.
func (c *testCluster) waitNodesExcept(skip, n int) {
	c.t.Helper()
	require.Eventually(c.t, func() bool {
		for i, p := range c.procs {
			select {
			case <-p.exited:
				continue
			default:
			}
			if i == skip {
				continue
			}
			ids, err := c.metadataNodes(i)
			if err != nil || len(ids) != n {
				return false
			}
		}
		return true
	}, 60*time.Second, 100*time.Millisecond, "every live node (but %d) names %d nodes", skip, n)
}

// TestClusterMetadata checks that Metadata on each of three nodes names
// all three, spreads partition leaders over them evenly (over the nodes
// of the client's rack when it told it), and stops
// naming a node killed with SIGKILL once its lease ends; the partitions
// it led are then led by the others, and a produce to any node of any
// partition succeeds.
func TestClusterMetadata(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, an S3 server and three broker processes")
	}
	c := startCluster(t, 3, []string{"az-a", "az-a", "az-b"})
	cl := c.procs[0].client(t, kgo.SeedBrokers(c.addrs()...))
	kafkatest.CreateTopic(t, cl, "spread", 12, nil)
	leaders := func(i int, opts ...kgo.Opt) map[int32]int {
		kc, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.procs[i].addr)}, opts...)...)
		require.NoError(t, err)
		defer kc.Close()
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		topic := "spread"
		rt.Topic = &topic
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(t.Context(), kc)
		require.NoError(t, err)
		count := map[int32]int{}
		for _, p := range resp.Topics[0].Partitions {
			count[p.Leader]++
		}
		return count
	}
	for i := range 3 {
		require.Equal(t, map[int32]int{0: 4, 1: 4, 2: 4}, leaders(i), "node %d's Metadata", i)
	}
	// A client that names its rack is sent to that rack's nodes.
	require.Equal(t, map[int32]int{2: 12}, leaders(0, kgo.ClientID("app,diskless_rack=az-b")))
	require.Equal(t, map[int32]int{0: 6, 1: 6}, leaders(2, kgo.ClientID("app diskless_rack=az-a")))
	require.Len(t, leaders(1, kgo.ClientID("diskless_rack=az-c")), 3, "no node in az-c: every node")
	// A consumer names it in Fetch (KIP-392): the node remembers it for
	// the client's address and client ID, also for its Metadata on
	// another connection (franz-go fetches on a connection of its own).
	kc, err := kgo.NewClient(kgo.SeedBrokers(c.procs[1].addr))
	require.NoError(t, err)
	defer kc.Close()
	b := kc.Broker(1)
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Rack, fetch.MaxWaitMillis, fetch.SessionEpoch = "az-b", 1, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "spread"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 10
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(t.Context(), kc) // learn node 1
	require.NoError(t, err)
	fetch.Rack = "az-a"
	fresp, err := fetch.RequestWith(t.Context(), b)
	require.NoError(t, err)
	require.EqualValues(t, -1, fresp.Topics[0].Partitions[0].PreferredReadReplica, "a client of the node's own rack")
	fetch.Rack = "az-b"
	fresp, err = fetch.RequestWith(t.Context(), b)
	require.NoError(t, err)
	// Node 1 is in az-a: it sends the client to node 2 for its reads, with
	// no records (KIP-392's preferred read replica).
	fpr := fresp.Topics[0].Partitions[0]
	require.Zero(t, fpr.ErrorCode)
	require.EqualValues(t, 2, fpr.PreferredReadReplica)
	require.Empty(t, fpr.RecordBatches)
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("spread")
	mreq.Topics = append(mreq.Topics, mt)
	mresp, err := mreq.RequestWith(t.Context(), b)
	require.NoError(t, err)
	for _, p := range mresp.Topics[0].Partitions {
		require.EqualValues(t, 2, p.Leader, "after a Fetch from rack az-b, partition %d", p.Partition)
	}
	// A franz-go consumer in az-b that has told no node its rack yet (its
	// own client ID) is named leaders on every node, and reads every
	// batch from node 2, the one of its rack.
	pc := c.procs[0].client(t, kgo.SeedBrokers(c.addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 48 {
		require.NoError(t, pc.ProduceSync(t.Context(), &kgo.Record{Topic: "spread", Partition: int32(i % 12), Value: []byte("r")}).FirstErr())
	}
	var mu sync.Mutex
	readFrom := map[int32]int{}
	cc, err := kgo.NewClient(kgo.SeedBrokers(c.procs[0].addr), kgo.ClientID("rack-b-consumer"), kgo.Rack("az-b"),
		kgo.ConsumeTopics("spread"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.WithHooks(fetchBatchHook(func(node int32, records int) {
			mu.Lock()
			readFrom[node] += records
			mu.Unlock()
		})))
	require.NoError(t, err)
	defer cc.Close()
	for got := 0; got < 48; {
		fs := cc.PollFetches(t.Context())
		require.NoError(t, fs.Err())
		got += fs.NumRecords()
	}
	mu.Lock()
	require.Equal(t, map[int32]int{2: 48}, readFrom, "records read, by node")
	mu.Unlock()
	cc.Close()

	c.procs[2].kill()
	c.waitNodes(2)
	for i := range 2 {
		count := leaders(i)
		require.Zero(t, count[2], "node %d's Metadata names the dead node", i)
		require.Equal(t, 12, count[0]+count[1])
	}
	// Every live node takes produce for every partition.
	for i := range 2 {
		kc, err := kgo.NewClient(kgo.SeedBrokers(c.procs[i].addr))
		require.NoError(t, err)
		for part := range int32(12) {
			require.Zero(t, produceTo(t, kc.Broker(int(c.nodeIDOf(i))), "spread", part, oneBatch(t, "x")), "node %d, partition %d", i, part)
		}
		kc.Close()
	}
}

// coordinatorOf returns the node that a live node says coordinates
// group.
func (c *testCluster) coordinatorOf(group string) int {
	c.t.Helper()
	for i, p := range c.procs {
		select {
		case <-p.exited:
			continue
		default:
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr))
		require.NoError(c.t, err)
		defer cl.Close()
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey = group
		resp, err := req.RequestWith(c.t.Context(), cl)
		require.NoError(c.t, err, "FindCoordinator on node %d", i)
		require.Zero(c.t, resp.ErrorCode)
		return int(resp.NodeID)
	}
	c.t.Fatal("no live node")
	return -1
}

// nodeIDOf is process i's node ID.
func (c *testCluster) nodeIDOf(i int) int32 { return int32(i) }

// oneBatch is a record batch of one record, value v.
// fetchBatchHook is a franz-go hook that reports each fetched batch's
// node and record count.
type fetchBatchHook func(node int32, records int)

// OnFetchBatchRead implements kgo.HookFetchBatchRead.
func (h fetchBatchHook) OnFetchBatchRead(meta kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	h(meta.NodeID, m.NumRecords)
}

func oneBatch(t *testing.T, v string) []byte {
	bld := kbatch.NewBuilder(kbatch.CodecNone)
	bld.Append(time.Now().UnixMilli(), nil, []byte(v))
	b, err := bld.Build(nil)
	require.NoError(t, err)
	return b
}

// produceTo sends one Produce request (acks -1) of records to
// topic-partition through broker, with no retries, and returns the
// partition's error code.
func produceTo(t *testing.T, broker *kgo.Broker, topic string, partition int32, records []byte) int16 {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(t.Context(), broker)
	require.NoError(t, err)
	return resp.Topics[0].Partitions[0].ErrorCode
}

// clusterRecord is a record acknowledged to a producer, or consumed by a
// member of the group.
type clusterRecord struct {
	member    int
	partition int32
	offset    int64
	value     string
}

// clusterLog is what a workload's producer and consumers saw.
type clusterLog struct {
	mu       sync.Mutex
	acked    []clusterRecord
	consumed []clusterRecord // each member's in the order it got them
	errs     []error         // records the producer gave up on
}

func (l *clusterLog) ack(r clusterRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acked = append(l.acked, r)
}

func (l *clusterLog) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, err)
}

func (l *clusterLog) consume(r clusterRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.consumed = append(l.consumed, r)
}

func (l *clusterLog) ackCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// consumedCount returns how many records were consumed (the same one
// twice counts twice).
func (l *clusterLog) consumedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.consumed)
}

// missing returns how many acknowledged records no member consumed.
func (l *clusterLog) missing() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := map[[2]int64]bool{}
	for _, r := range l.consumed {
		seen[[2]int64{int64(r.partition), r.offset}] = true
	}
	n := 0
	for _, r := range l.acked {
		if !seen[[2]int64{int64(r.partition), r.offset}] {
			n++
		}
	}
	return n
}

// clusterClients is a Kafka client library under test: its idempotent
// producer and its consumer group.
type clusterClients interface {
	// produce produces to topic's partitions round robin, values "0",
	// "1", ..., until stop is closed, then waits for every record's
	// answer; the acknowledged go to l.
	produce(t *testing.T, addrs []string, topic string, partitions int32, l *clusterLog, stop <-chan struct{})
	// consume is member of group until ctx ends, committing what it
	// consumed (to l) as it goes, and leaves the group.
	consume(t *testing.T, ctx context.Context, addrs []string, topic, group string, member int, l *clusterLog)
}

// runClusterKills runs a producer and a consumer group of three members
// over a three-node cluster; one node is killed with SIGKILL mid-stream,
// restarted, (with freeze) the group's coordinator is frozen with
// SIGSTOP past its lease and resumed, and then another node is killed.
// With exactlyOnce and one generation of the group, nothing is consumed
// twice. Then every acknowledged record
// has been consumed, with its value; the acknowledged records of each
// partition are in the order produced; a member's consumption of a
// partition starts, every time, at an offset the group committed (or
// the log start): records are consumed twice only past a committed
// offset; and the group's committed offsets, as the nodes logged them,
// never go back.
func runClusterKills(t *testing.T, clients clusterClients, freeze, exactlyOnce bool) {
	c := startCluster(t, 3, nil, append([]string{"-log-level", "debug"}, strings.Fields(os.Getenv("KB_CLUSTER_FLAGS"))...)...)
	all := slices.Clone(c.procs)                        // the restarted too
	if dir := os.Getenv("KB_CLUSTER_LOGS"); dir != "" { // keep the nodes' logs
		t.Cleanup(func() {
			for _, p := range all {
				b, _ := os.ReadFile(p.log)
				_ = os.WriteFile(filepath.Join(dir, filepath.Base(filepath.Dir(p.data))+"-"+filepath.Base(p.log)), b, 0o644)
			}
		})
	}
	const topic, group, partitions = "events", "readers", 6
	admin := c.procs[0].client(t, kgo.SeedBrokers(c.addrs()...))
	kafkatest.CreateTopic(t, admin, topic, partitions, nil)
	addrs := c.addrs()
	l := &clusterLog{}

	ctx, cancel := context.WithCancel(t.Context())
	var consumers sync.WaitGroup
	for m := range 3 {
		consumers.Go(func() { clients.consume(t, ctx, addrs, topic, group, m, l) })
	}
	stop := make(chan struct{})
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		clients.produce(t, addrs, topic, partitions, l, stop)
	}()
	// committedSum returns the sum of the group's committed offsets, -1
	// if they cannot be fetched now. Each time a new client: one caches
	// the coordinator, also when it has died.
	committedSum := func() int64 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.live()...))
		if err != nil {
			return -1
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		os, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
		if err != nil {
			return -1
		}
		var sum int64
		os.Each(func(o kadm.OffsetResponse) { sum += o.At })
		return sum
	}
	// progress waits until n more records are acknowledged, consumed and
	// committed.
	progress := func(n int) {
		t.Helper()
		acks, consumed, commits := l.ackCount()+n, l.consumedCount()+n, max(committedSum(), 0)+int64(n)
		require.Eventually(t, func() bool { return l.ackCount() >= acks && l.consumedCount() >= consumed && committedSum() >= commits }, 60*time.Second, 50*time.Millisecond,
			"%d records acknowledged, %d consumed, %d committed (now %d, %d and %d)", acks, consumed, commits, l.ackCount(), l.consumedCount(), committedSum())
	}

	progress(300)
	coord := c.coordinatorOf(group)
	t.Logf("killing node %d, the group's coordinator, at %d acknowledged, %d consumed", coord, l.ackCount(), l.consumedCount())
	c.procs[coord].kill()
	progress(300)
	t.Logf("restarting node %d at %d acknowledged, %d consumed", coord, l.ackCount(), l.consumedCount())
	c.procs[coord] = c.procs[coord].restart()
	all = append(all, c.procs[coord])
	c.waitNodes(3)
	progress(300)
	// Freeze the group's coordinator past its lease (a zombie): the
	// group is taken over by another node, which claims it; what the
	// frozen one commits when it wakes is refused.
	if freeze {
		frozen := c.coordinatorOf(group)
		t.Logf("freezing node %d, the group's coordinator, at %d acknowledged, %d consumed", frozen, l.ackCount(), l.consumedCount())
		c.procs[frozen].freeze()
		c.waitNodesExcept(frozen, 2)
		progress(300)
		t.Logf("resuming node %d at %d acknowledged, %d consumed", frozen, l.ackCount(), l.consumedCount())
		c.procs[frozen].thaw()
		c.waitNodes(3)
		progress(300)
	}
	other := (coord + 1) % 3
	t.Logf("killing node %d at %d acknowledged, %d consumed", other, l.ackCount(), l.consumedCount())
	c.procs[other].kill()
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
	require.Eventually(t, func() bool { return l.missing() == 0 }, 90*time.Second, 50*time.Millisecond, "every acknowledged record consumed")
	consumedAt := time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
	cancel()
	consumers.Wait()

	l.mu.Lock()
	defer l.mu.Unlock()
	// Each acknowledged record was consumed with its value; each
	// partition's acknowledged records are in the order produced.
	at := map[[2]int64]string{}
	for _, r := range l.consumed {
		k := [2]int64{int64(r.partition), r.offset}
		if v, ok := at[k]; ok {
			require.Equal(t, v, r.value, "partition %d offset %d consumed with two values", r.partition, r.offset)
		}
		at[k] = r.value
	}
	byPart := map[int32][]clusterRecord{}
	for _, r := range l.acked {
		require.Equal(t, r.value, at[[2]int64{int64(r.partition), r.offset}], "partition %d offset %d", r.partition, r.offset)
		byPart[r.partition] = append(byPart[r.partition], r)
	}
	for p, rs := range byPart {
		slices.SortFunc(rs, func(a, b clusterRecord) int { return int(a.offset - b.offset) })
		for i := 1; i < len(rs); i++ {
			prev, _ := strconv.Atoi(rs[i-1].value)
			cur, _ := strconv.Atoi(rs[i].value)
			require.Less(t, prev, cur, "partition %d: offset %d holds record %d, offset %d record %d", p, rs[i-1].offset, prev, rs[i].offset, cur)
			require.Less(t, rs[i-1].offset, rs[i].offset, "partition %d: offset %d acknowledged twice", p, rs[i].offset)
		}
	}

	// The group's commits, in the order they were written. An offset
	// goes back only by a commit of a member not assigned the partition
	// (in its generation, nor the one before, whose partitions it commits
	// as it gives them up): a client that kept consuming while its
	// coordinator was frozen, and joined again, may commit the position
	// it had reached then. Kafka accepts that commit too (it checks the
	// member and the generation, not the assignment).
	history, failed := committedHistory(t, all, group)
	commits, strays := 0, 0
	committed := map[int32]map[int64]bool{}
	for p, cs := range history {
		commits += len(cs)
		committed[p] = map[int64]bool{}
		for i, c := range cs {
			committed[p][c.offset] = true
			if i > 0 && c.offset < cs[i-1].offset {
				if !c.assigned {
					strays++
					continue
				}
				require.GreaterOrEqual(t, c.offset, cs[i-1].offset, "partition %d: the committed offset went back from %d to %d, by %s at generation %d (commits %v)",
					p, cs[i-1].offset, c.offset, c.member, c.generation, cs)
			}
		}
	}
	require.NotZero(t, commits, "the group committed")
	// Every run of a member over a partition starts at a committed offset
	// or at the log start, or at a record not consumed before: nothing is
	// consumed twice but from a commit.
	last := map[[2]int64]int64{}
	runs, dups := 0, 0
	seen := map[[2]int64]bool{}
	type run struct{ member, from int64 }
	runsOf := map[int32][]run{} // by partition, for the message below
	for _, r := range l.consumed {
		k := [2]int64{int64(r.member), int64(r.partition)}
		if prev, ok := last[k]; !ok || r.offset != prev+1 {
			runs++
			runsOf[r.partition] = append(runsOf[r.partition], run{int64(r.member), r.offset})
			// A run that starts at a record nobody consumed yet re-reads
			// nothing (a member that resumes its own position after a
			// rebalance, say); one that re-reads starts at a commit.
			require.True(t, r.offset == 0 || committed[r.partition][r.offset] || !seen[[2]int64{int64(r.partition), r.offset}],
				"member %d started on partition %d at offset %d, consumed before, which the group never committed (the partition's runs, member and first offset: %v; its commits: %v)",
				r.member, r.partition, r.offset, runsOf[r.partition], history[r.partition])
		}
		last[k] = r.offset
		pk := [2]int64{int64(r.partition), r.offset}
		if seen[pk] {
			dups++
		}
		seen[pk] = true
	}
	t.Logf("%d records consumed in %d runs, %d of them again after a rebalance from a committed offset; %d commits (and %d refused; %d back, by a member not assigned the partition)",
		len(l.consumed), runs, dups, commits, failed, strays)
	// The group's generation survives each takeover (the new
	// coordinator loads it), so a takeover by itself causes no
	// rebalance: with one generation while the records were consumed,
	// nothing is consumed twice. (A client may still rejoin on its own
	// when its heartbeats fail during the failover; franz-go sometimes
	// does, and then takes its partitions as lost.)
	generations := groupGenerations(t, all, consumedAt)
	t.Logf("%d generations of the group while consuming", generations)
	if exactlyOnce && generations == 1 {
		require.Zero(t, dups, "records consumed twice with no rebalance")
	}
}

// groupCommit is a commit of a group's offset, as a node logged it: by
// which member at which generation, and whether the member was assigned
// the partition then (or in its generation before).
type groupCommit struct {
	ts         string
	topic      string
	partition  int32
	offset     int64
	member     string
	generation int32
	assigned   bool
}

func (c groupCommit) String() string {
	if c.assigned {
		return strconv.FormatInt(c.offset, 10)
	}
	return strconv.FormatInt(c.offset, 10) + "*" // by a member not assigned the partition
}

// committedHistory returns, by partition, every offset that group
// committed, in the order committed: from the "committing offset" lines
// of the nodes' logs (at debug level), by time, less those of a commit
// the node logged as refused ("offset commit failed" with refused: a
// fenced one). A node logs each before it commits, so a node killed
// after a commit has logged it; a commit tried and not known to be
// refused is there too (one that failed otherwise may have landed). Each
// says whether its member was assigned the partition, in its generation
// or the one before, by the "member assigned" lines. It also returns how
// many commits were refused.
func committedHistory(t *testing.T, procs []*brokerProc, group string) (map[int32][]groupCommit, int) {
	t.Helper()
	type memberGen struct {
		member     string
		generation int32
	}
	assigned := map[memberGen]map[string][]int32{}
	gens := map[string][]int32{} // member -> its generations with an assignment
	var commits []groupCommit
	failedCommits := 0
	for _, p := range procs {
		b, err := os.ReadFile(p.log)
		require.NoError(t, err)
		type line struct {
			ts string
			v  struct {
				Group      string
				Partition  int32
				Topic      string
				Assigned   map[string][]int32
				Offset     int64
				Commit     int64
				Refused    bool
				Member     string
				Generation int32
			}
		}
		var tried []line
		failed := map[int64]bool{}
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Split(l, "\t")
			if len(f) < 4 || (f[2] != "committing offset" && f[2] != "offset commit failed" && f[2] != "member assigned") {
				continue
			}
			x := line{ts: f[0]}
			require.NoError(t, json.Unmarshal([]byte(f[len(f)-1]), &x.v), "%s", l)
			if x.v.Group != group {
				continue
			}
			if f[2] == "member assigned" {
				assigned[memberGen{x.v.Member, x.v.Generation}] = x.v.Assigned
				gens[x.v.Member] = append(gens[x.v.Member], x.v.Generation)
				continue
			}
			if f[2] == "offset commit failed" {
				if x.v.Refused {
					failed[x.v.Commit] = true
					failedCommits++
				}
				continue
			}
			tried = append(tried, x)
		}
		for _, x := range tried {
			if !failed[x.v.Commit] {
				commits = append(commits, groupCommit{ts: x.ts, topic: x.v.Topic, partition: x.v.Partition, offset: x.v.Offset, member: x.v.Member, generation: x.v.Generation})
			}
		}
	}
	slices.SortStableFunc(commits, func(a, b groupCommit) int { return strings.Compare(a.ts, b.ts) })
	out := map[int32][]groupCommit{}
	for _, c := range commits {
		// The member's assignment at its generation, and at the one
		// before it had (the partitions it gives up, it commits at the
		// next); a commit from outside the group, or at a generation
		// whose assignment no node logged, counts as assigned.
		now, known := assigned[memberGen{c.member, c.generation}]
		c.assigned = c.member == "" || !known || slices.Contains(now[c.topic], c.partition)
		var before int32 = -1
		for _, g := range gens[c.member] {
			if g < c.generation && g > before {
				before = g
			}
		}
		if before >= 0 && slices.Contains(assigned[memberGen{c.member, before}][c.topic], c.partition) {
			c.assigned = true
		}
		out[c.partition] = append(out[c.partition], c)
	}
	return out, failedCommits
}

// groupGenerations counts the generations the nodes' logs show formed
// ("group joined") before the time before (a log timestamp).
func groupGenerations(t *testing.T, procs []*brokerProc, before string) int {
	t.Helper()
	n := 0
	for _, p := range procs {
		b, err := os.ReadFile(p.log)
		require.NoError(t, err)
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Split(line, "\t"); len(f) >= 3 && f[2] == "group joined" && f[0] < before {
				n++
			}
		}
	}
	return n
}

// TestClusterKillsFranz runs runClusterKills with franz-go's idempotent
// producer and consumer group (cooperative-sticky, autocommit): with no
// rebalance (the takeovers cause none), every acknowledged record
// consumed exactly once.
func TestClusterKillsFranz(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, an S3 server and three broker processes")
	}
	runClusterKills(t, franzClients{}, false, true)
}

// TestClusterKillsSarama runs runClusterKills with sarama's idempotent
// async producer and consumer group. Records are consumed again (from
// committed offsets only): sarama ends its session on any error of the
// group's coordinator and starts the next from the committed offsets,
// and its leader's JoinGroup starts a rebalance, as in Kafka; the same
// happens against Kafka when a coordinator dies.
func TestClusterKillsSarama(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, an S3 server and three broker processes")
	}
	runClusterKills(t, saramaClients{}, false, false)
}

// TestClusterFreeze runs runClusterKills with franz-go's clients and the
// group's coordinator frozen with SIGSTOP past its lease, then resumed:
// its members, stuck on it past their session timeout, are removed by
// the node that took the group over (a rebalance, so records are
// consumed again, from committed offsets), and what the frozen node
// commits when it wakes is refused, so the committed offsets never go
// back. (A commit the frozen node sent just before it stopped may have
// landed, the answer lost: its forwarded retry, refused, carries
// diskless.ErrOutcomeUnknown, and the node logs it as not refused.)
func TestClusterFreeze(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, an S3 server and three broker processes")
	}
	runClusterKills(t, franzClients{}, true, false)
}

type franzClients struct{}

// franzOpts are the options of the test's franz-go clients. A frozen
// node keeps its connections open and answers nothing: franz-go retries a
// request that timed out on the same node without reading metadata
// again (a produce, the group's cached coordinator), so it only learns
// that the node left the cluster when its metadata ages out. As sarama's
// RefreshFrequency in saramaClusterConfig, MetadataMaxAge makes that a
// second instead of the default five minutes.
func franzOpts(addrs []string) []kgo.Opt {
	return []kgo.Opt{kgo.SeedBrokers(addrs...), kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		kgo.MetadataMinAge(100 * time.Millisecond), kgo.MetadataMaxAge(time.Second), kgo.AlwaysRetryEOF(), kgo.RequestTimeoutOverhead(5 * time.Second)}
}

func (franzClients) produce(t *testing.T, addrs []string, topic string, partitions int32, l *clusterLog, stop <-chan struct{}) {
	cl, err := kgo.NewClient(append(franzOpts(addrs), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxBufferedRecords(200), kgo.ProducerLinger(5*time.Millisecond))...)
	require.NoError(t, err)
	defer cl.Close()
	for i := 0; ; i++ {
		select {
		case <-stop:
			require.NoError(t, cl.Flush(context.Background()))
			return
		default:
		}
		r := &kgo.Record{Partition: int32(i) % partitions, Value: []byte(strconv.Itoa(i))}
		cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
			if err != nil {
				l.fail(err)
				return
			}
			l.ack(clusterRecord{partition: r.Partition, offset: r.Offset, value: string(r.Value)})
		})
		time.Sleep(time.Millisecond) // a stream, not a burst
	}
}

func (franzClients) consume(t *testing.T, ctx context.Context, addrs []string, topic, group string, member int, l *clusterLog) {
	cl, err := kgo.NewClient(append(franzOpts(addrs), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(300*time.Millisecond),
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond), kgo.RebalanceTimeout(10*time.Second),
		kgo.AutoCommitInterval(300*time.Millisecond))...)
	require.NoError(t, err)
	defer cl.Close() // commits and leaves
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			l.consume(clusterRecord{member: member, partition: r.Partition, offset: r.Offset, value: string(r.Value)})
		})
	}
}

type saramaClients struct{}

func saramaClusterConfig() *sarama.Config {
	c := sarama.NewConfig()
	c.Version = sarama.V3_6_0_0
	c.Metadata.Retry.Max, c.Metadata.Retry.Backoff = 1000, 100*time.Millisecond
	c.Metadata.RefreshFrequency = time.Second
	return c
}

func (saramaClients) produce(t *testing.T, addrs []string, topic string, partitions int32, l *clusterLog, stop <-chan struct{}) {
	c := saramaClusterConfig()
	c.ClientID = "cluster-producer"
	c.Producer.Idempotent, c.Net.MaxOpenRequests = true, 1
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Return.Successes = true
	c.Producer.Partitioner = sarama.NewManualPartitioner
	c.Producer.Retry.Max, c.Producer.Retry.Backoff = 1000, 100*time.Millisecond
	c.Producer.Flush.Frequency = 5 * time.Millisecond
	prod, err := sarama.NewAsyncProducer(addrs, c)
	require.NoError(t, err)
	answered := make(chan struct{})
	sem := make(chan struct{}, 200) // records in flight
	go func() {
		defer close(answered)
		succ, errs := prod.Successes(), prod.Errors()
		for succ != nil || errs != nil {
			select {
			case m, ok := <-succ:
				if !ok {
					succ = nil
					continue
				}
				v, _ := m.Value.Encode()
				l.ack(clusterRecord{partition: m.Partition, offset: m.Offset, value: string(v)})
				<-sem
			case e, ok := <-errs:
				if !ok {
					errs = nil
					continue
				}
				l.fail(e)
				<-sem
			}
		}
	}()
	for i := 0; ; i++ {
		select {
		case <-stop:
			// Wait for the answers first: AsyncClose fails what is still
			// being retried.
			for deadline := time.Now().Add(30 * time.Second); len(sem) > 0 && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond) // polls the in-flight count
			}
			prod.AsyncClose() // answers what is in flight, then closes the channels
			<-answered
			return
		case sem <- struct{}{}:
		}
		prod.Input() <- &sarama.ProducerMessage{Topic: topic, Partition: int32(i) % partitions, Value: sarama.StringEncoder(strconv.Itoa(i))}
		time.Sleep(time.Millisecond) // a stream, not a burst
	}
}

type saramaMember struct {
	member int
	l      *clusterLog
}

func (saramaMember) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (saramaMember) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h saramaMember) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			h.l.consume(clusterRecord{member: h.member, partition: m.Partition, offset: m.Offset, value: string(m.Value)})
			sess.MarkMessage(m, "")
		case <-sess.Context().Done():
			return nil
		}
	}
}

func (saramaClients) consume(t *testing.T, ctx context.Context, addrs []string, topic, group string, member int, l *clusterLog) {
	c := saramaClusterConfig()
	c.ClientID = fmt.Sprintf("cluster-member-%d", member)
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.AutoCommit.Enable, c.Consumer.Offsets.AutoCommit.Interval = true, 300*time.Millisecond
	c.Consumer.MaxWaitTime = 300 * time.Millisecond
	c.Consumer.Group.Session.Timeout, c.Consumer.Group.Heartbeat.Interval = 6*time.Second, 500*time.Millisecond
	c.Consumer.Group.Rebalance.Timeout = 10 * time.Second
	c.Consumer.Group.Rebalance.Retry.Max, c.Consumer.Group.Rebalance.Retry.Backoff = 1000, 200*time.Millisecond
	cg, err := sarama.NewConsumerGroup(addrs, group, c)
	require.NoError(t, err)
	defer cg.Close()
	h := saramaMember{member: member, l: l}
	for ctx.Err() == nil {
		if err := cg.Consume(ctx, []string{topic}, h); err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) && ctx.Err() == nil {
			t.Logf("member %d: %v (consuming again)", member, err)
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// TestClusterAdmin checks that the admin calls work on any node: a
// topic created (with a config) on one is described on another, records
// deleted on a third; a group's offsets committed at its coordinator are
// NOT_COORDINATOR elsewhere, and deleting the topic on a node that is not
// the coordinator deletes them there too.
func TestClusterAdmin(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, an S3 server and three broker processes")
	}
	c := startCluster(t, 3, nil)
	cl := c.procs[0].client(t, kgo.SeedBrokers(c.addrs()...))
	_, err := kmsg.NewPtrMetadataRequest().RequestWith(t.Context(), cl) // learn the nodes
	require.NoError(t, err)
	node := func(i int) *kgo.Broker { return cl.Broker(i) }

	// Create on node 1, with a config.
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "admin", 2, 3
	cc := kmsg.NewCreateTopicsRequestTopicConfig()
	cc.Name, cc.Value = "retention.ms", kmsg.StringPtr("3600000")
	ct.Configs = append(ct.Configs, cc)
	create.Topics = append(create.Topics, ct)
	cr, err := create.RequestWith(t.Context(), node(1))
	require.NoError(t, err)
	require.Zero(t, cr.Topics[0].ErrorCode)

	// Described on node 2.
	desc := kmsg.NewPtrDescribeConfigsRequest()
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType, dr.ResourceName, dr.ConfigNames = kmsg.ConfigResourceTypeTopic, "admin", []string{"retention.ms"}
	desc.Resources = append(desc.Resources, dr)
	dresp, err := desc.RequestWith(t.Context(), node(2))
	require.NoError(t, err)
	require.Zero(t, dresp.Resources[0].ErrorCode)
	require.Equal(t, "3600000", *dresp.Resources[0].Configs[0].Value, "node 2 sees the config node 1 stored")

	// Records produced through node 0, deleted through node 2.
	pc := c.procs[0].client(t, kgo.SeedBrokers(c.addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for range 5 {
		require.NoError(t, pc.ProduceSync(t.Context(), &kgo.Record{Topic: "admin", Partition: 0, Value: []byte("x")}).FirstErr())
	}
	del := kmsg.NewPtrDeleteRecordsRequest()
	dt := kmsg.NewDeleteRecordsRequestTopic()
	dt.Topic = "admin"
	dp := kmsg.NewDeleteRecordsRequestTopicPartition()
	dp.Partition, dp.Offset = 0, 3
	dt.Partitions = append(dt.Partitions, dp)
	del.Topics, del.TimeoutMillis = append(del.Topics, dt), 10000
	delr, err := del.RequestWith(t.Context(), node(2))
	require.NoError(t, err)
	require.Zero(t, delr.Topics[0].Partitions[0].ErrorCode)
	require.EqualValues(t, 3, delr.Topics[0].Partitions[0].LowWatermark)

	// A group's offsets, committed at its coordinator.
	const group = "admins"
	coord := c.coordinatorOf(group)
	commit := func(i int) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation = group, -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "admin"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, 4
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(t.Context(), node(i))
		require.NoError(t, err)
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	fetch := func(i int) (int16, int64) {
		req := kmsg.NewPtrOffsetFetchRequest() // version 8 on: by group
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = group
		req.Groups = append(req.Groups, rg)
		resp, err := req.RequestWith(t.Context(), node(i))
		require.NoError(t, err)
		require.Len(t, resp.Groups, 1)
		g := resp.Groups[0]
		if g.ErrorCode != 0 || len(g.Topics) == 0 {
			return g.ErrorCode, -1
		}
		return 0, g.Topics[0].Partitions[0].Offset
	}
	var code int16
	require.Eventually(t, func() bool { code = commit(coord); return code == 0 }, 30*time.Second, 100*time.Millisecond, "commit at the coordinator: %v", code)
	other := (coord + 1) % 3
	require.Equal(t, kerr.NotCoordinator.Code, commit(other))
	code, _ = fetch(other)
	require.Equal(t, kerr.NotCoordinator.Code, code)
	code, off := fetch(coord)
	require.Zero(t, code)
	require.EqualValues(t, 4, off)

	// Partitions added on node 1: node 2's Metadata names them, and node
	// 0 takes produce for them.
	cpr := kmsg.NewPtrCreatePartitionsRequest()
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = "admin", 4
	cpr.Topics, cpr.TimeoutMillis = append(cpr.Topics, cpt), 10000
	cpresp, err := cpr.RequestWith(t.Context(), node(1))
	require.NoError(t, err)
	require.Zero(t, cpresp.Topics[0].ErrorCode, "%v", cpresp.Topics[0].ErrorMessage)
	md := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("admin")
	md.Topics = append(md.Topics, mt)
	// Node 2's catalog of topics may be up to 200 ms old (the
	// coordinator's catalogFresh), as a Kafka broker's metadata cache
	// lags the controller.
	require.Eventually(t, func() bool {
		mresp, err := md.RequestWith(t.Context(), node(2))
		require.NoError(t, err)
		return len(mresp.Topics[0].Partitions) == 4
	}, 5*time.Second, 20*time.Millisecond, "node 2 names the new partitions")
	for part := int32(2); part < 4; part++ {
		require.Zero(t, produceTo(t, node(0), "admin", part, oneBatch(t, "new")), "partition %d", part)
	}

	// Groups over the nodes: each committed at its coordinator (kadm
	// finds it); each node's ListGroups lists the groups it coordinates,
	// so that the lists are disjoint and together name every group once,
	// and DescribeGroups at the coordinator knows each.
	adm := kadm.NewClient(cl)
	want := []string{group}
	for i := range 9 {
		g := fmt.Sprintf("listed-%d", i)
		want = append(want, g)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			resp, err := adm.CommitOffsets(t.Context(), g, kadm.OffsetsFromRecords(kgo.Record{Topic: "admin", Partition: 1, Offset: int64(i)}))
			if assert.NoError(c, err) {
				assert.NoError(c, resp.Error())
			}
		}, 30*time.Second, 100*time.Millisecond, "commit of group %s", g)
	}
	slices.Sort(want)
	var listed []string
	for i := range 3 {
		resp, err := kmsg.NewPtrListGroupsRequest().RequestWith(t.Context(), node(i))
		require.NoError(t, err)
		require.Zero(t, resp.ErrorCode)
		for _, g := range resp.Groups {
			require.Equal(t, c.coordinatorOf(g.Group), i, "node %d lists group %s, which it does not coordinate", i, g.Group)
			listed = append(listed, g.Group)
		}
	}
	slices.Sort(listed)
	require.Equal(t, want, listed, "every group listed once, over the nodes")
	described, err := adm.DescribeGroups(t.Context(), want...)
	require.NoError(t, err)
	for _, g := range want {
		require.NoError(t, described[g].Err, "group %s", g)
		require.Equal(t, "Empty", described[g].State, "group %s", g)
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{group}
	dgr, err := dg.RequestWith(t.Context(), node(other))
	require.NoError(t, err)
	require.Equal(t, kerr.NotCoordinator.Code, dgr.Groups[0].ErrorCode, "DescribeGroups on a node that is not the coordinator")

	// Deleted on a node that is not the coordinator: the offsets go too.
	dtr := kmsg.NewPtrDeleteTopicsRequest()
	dtt := kmsg.NewDeleteTopicsRequestTopic()
	dtt.Topic = kmsg.StringPtr("admin")
	dtr.Topics, dtr.TopicNames, dtr.TimeoutMillis = []kmsg.DeleteTopicsRequestTopic{dtt}, []string{"admin"}, 10000
	dtresp, err := dtr.RequestWith(t.Context(), node(other))
	require.NoError(t, err)
	require.Zero(t, dtresp.Topics[0].ErrorCode)
	code, off = fetch(coord)
	require.Zero(t, code)
	require.EqualValues(t, -1, off, "the deleted topic's committed offset is gone at the coordinator")
}

// TestClusterEtcdTLS runs three nodes against an etcd that serves TLS
// only, requires client certificates and has authentication on: each
// node connects with -etcd-ca, -etcd-cert, -etcd-key and -etcd-user (the
// password from $DISKLESS_ETCD_PASSWORD), as a user whose role may only
// touch the cluster's prefix; records produced through one node are
// consumed through another, and the cluster's keys are under the prefix.
// A fourth node with a wrong password exits at once, saying so.
func TestClusterEtcdTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, an S3 server and three broker processes")
	}
	c := startClusterEtcd(t, 3, nil, nil, &etcdtest.Options{TLS: true, Auth: &etcdtest.Auth{User: "kafka", Password: "kafka-secret", Prefix: "diskless/"}})
	const topic, records = "over-tls", 30
	producer := c.procs[0].client(t, kgo.SeedBrokers(c.procs[0].addr))
	kafkatest.CreateTopic(t, producer, topic, 3, nil)
	for i := range records {
		require.NoError(t, producer.ProduceSync(t.Context(), &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(i))}).FirstErr())
	}
	consumer := c.procs[2].client(t, kgo.SeedBrokers(c.procs[2].addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[string]bool{}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for len(got) < records {
		fs := consumer.PollFetches(ctx)
		require.NoError(t, fs.Err())
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Value)] = true })
	}
	resp, err := c.etcd.Client(t).Get(t.Context(), "diskless/members/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	require.EqualValues(t, 3, resp.Count, "the three nodes registered under the prefix")

	// A fourth node with a wrong password exits, saying so.
	f := c.etcd.TLSFiles()
	cmd := exec.CommandContext(t.Context(), brokerBin, "-addr", "127.0.0.1:0", "-data", t.TempDir(), "-bucket", c.procs[0].bucket,
		"-node-id", "3", "-etcd", strings.Join(c.etcd.Endpoints(), ","), "-etcd-ca", f.CA, "-etcd-cert", f.Cert, "-etcd-key", f.Key, "-etcd-user", "kafka")
	cmd.Env = append(os.Environ(), envEtcdPassword+"=wrong")
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "%s", out)
	require.Contains(t, string(out), "the user or its password is wrong")
	t.Logf("the fourth node: %s", bytes.TrimSpace(out[bytes.LastIndex(bytes.TrimSpace(out), []byte("\n"))+1:]))
}
