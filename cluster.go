package diskless

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless/cluster"
	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/coordinator/metalog"
)

// ClusterConfig makes a Broker one of many stateless brokers on one
// bucket, coordinated through etcd (Config.Cluster): each coordinator
// shard's metadata log is in etcd, led by one broker at a time (elected
// there, fenced by its lease), and every broker takes produce, fetch and
// admin calls for every partition, forwarding to the shard's leader what
// it does not lead itself. See package cluster and coordinator's
// forward.go for the design.
type ClusterConfig struct {
	// Endpoints are the etcd members' addresses (host:port). Ignored when
	// Client is set.
	Endpoints []string
	// Client, when set, is the etcd client to use; Close leaves it open.
	Client *clientv3.Client
	// Prefix is before every key the cluster puts in etcd. "" means
	// "diskless/". Every broker of one cluster says the same; two
	// clusters on one etcd say different ones.
	Prefix string
	// LeaseTTL is how long after a broker stops renewing its etcd lease
	// (it died, froze, or was cut off) its membership and leaderships
	// end. 0 means 5 s.
	LeaseTTL time.Duration
	// PeerAddr is where the broker listens for the calls other brokers
	// forward to the shards it leads. "" means "127.0.0.1:0" (a free port:
	// fine on one machine; give a reachable address otherwise).
	PeerAddr string
	// Advertise is where Kafka clients reach this broker, published with
	// its membership for the embedding program's Metadata (Members).
	Advertise string
	// Transport carries the calls between brokers; nil means TCP. Close
	// leaves a Transport given here open.
	Transport cluster.Transport
}

// Member is one live broker of a cluster.
type Member = cluster.Member

// clusterState is a cluster broker's etcd side.
type clusterState struct {
	client    *clientv3.Client
	ownClient bool
	prefix    string
	node      *cluster.Node
	fwd       lateForwarder

	mu   sync.Mutex
	logs map[int]metalog.Log // those of the shards led here
}

// lateForwarder is the Coordinator's Forwarder before the Node exists.
type lateForwarder struct {
	mu   sync.RWMutex
	node *cluster.Node
}

func (f *lateForwarder) Forward(ctx context.Context, shard int, method string, body []byte) func() ([]byte, error) {
	f.mu.RLock()
	n := f.node
	f.mu.RUnlock()
	if n == nil {
		return func() ([]byte, error) { return nil, fmt.Errorf("diskless: not in the cluster yet") }
	}
	return n.Forward(ctx, shard, method, body)
}

// forwardAttemptTimeout is two lease TTLs: a leader silent that long has
// lost its lease, and another one leads (or is being elected).
func (b *Broker) forwardAttemptTimeout() time.Duration {
	if b.cfg.Cluster == nil {
		return 0
	}
	ttl := b.cfg.Cluster.LeaseTTL
	if ttl <= 0 {
		ttl = 5 * time.Second
	}
	return 2 * ttl
}

// followerLog opens, for the coordinator's followers, a read-only view of
// each shard's log in etcd (unfenced: a follower never appends).
func (b *Broker) followerLog() func(ctx context.Context, shard int) (metalog.Log, error) {
	if b.cfg.Cluster == nil {
		return nil
	}
	return func(ctx context.Context, i int) (metalog.Log, error) {
		return metalog.OpenEtcd(ctx, b.cl.client, b.cl.metaPrefix(i), &metalog.EtcdOptions{
			Spill: b.metaBucket, SpillPrefix: fmt.Sprintf("%smeta/%d/spill/", b.cfg.Prefix, i), Logger: b.cfg.Logger,
		})
	}
}

// openClusterClient connects to etcd.
func (b *Broker) openClusterClient(ctx context.Context) error {
	cc := b.cfg.Cluster
	cs := &clusterState{client: cc.Client, prefix: cc.Prefix, logs: map[int]metalog.Log{}}
	if cs.prefix == "" {
		cs.prefix = "diskless/"
	}
	if cs.client == nil {
		c, err := clientv3.New(clientv3.Config{Endpoints: cc.Endpoints, DialTimeout: 5 * time.Second, Logger: b.cfg.Logger.Named("etcd")})
		if err != nil {
			return fmt.Errorf("diskless: connecting to etcd %v: %w", cc.Endpoints, err)
		}
		cs.client, cs.ownClient = c, true
	}
	b.cl = cs
	return nil
}

// joinCluster registers the broker and starts its campaigns, once the
// coordinator is open.
func (b *Broker) joinCluster(ctx context.Context) error {
	cc, cs := b.cfg.Cluster, b.cl
	peer := cc.PeerAddr
	if peer == "" {
		peer = "127.0.0.1:0"
	}
	node, err := cluster.Join(ctx, cs.client, &cluster.Options{
		Member:    cluster.Member{ID: b.cfg.BrokerID, Rack: b.cfg.Rack, PeerAddr: peer, Advertise: cc.Advertise},
		Shards:    b.cfg.Shards,
		Prefix:    cs.prefix,
		LeaseTTL:  cc.LeaseTTL,
		Transport: cc.Transport,
		Logger:    b.cfg.Logger,
	}, cluster.Callbacks{
		Lead:    b.leadShard,
		Unlead:  b.unleadShard,
		Serve:   b.coord.Serve,
		Healthy: b.coord.ShardErr,
	})
	if err != nil {
		return fmt.Errorf("diskless: joining the cluster: %w", err)
	}
	cs.node = node
	cs.fwd.mu.Lock()
	cs.fwd.node = node
	cs.fwd.mu.Unlock()
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		b.watchCommits()
	}()
	return nil
}

// metaPrefix is shard i's key prefix in etcd.
func (cs *clusterState) metaPrefix(i int) string { return cs.prefix + "meta/" + strconv.Itoa(i) + "/" }

// leadShard opens shard i's log in etcd, fenced by the election won, and
// has the coordinator lead it.
func (b *Broker) leadShard(ctx context.Context, i int, fence metalog.Fence) error {
	cs := b.cl
	log, err := metalog.OpenEtcd(ctx, cs.client, cs.metaPrefix(i), &metalog.EtcdOptions{
		Fence: &fence, Spill: b.metaBucket, SpillPrefix: fmt.Sprintf("%smeta/%d/spill/", b.cfg.Prefix, i), Logger: b.cfg.Logger,
	})
	if err != nil {
		return err
	}
	if err := b.coord.Lead(ctx, i, log); err != nil {
		log.Close()
		return err
	}
	cs.mu.Lock()
	cs.logs[i] = log
	cs.mu.Unlock()
	return nil
}

// unleadShard stops leading shard i and closes its log.
func (b *Broker) unleadShard(i int) {
	cs := b.cl
	if err := b.coord.Unlead(i); err != nil {
		b.cfg.Logger.Warn("diskless: closing a shard no longer led", zap.Int("shard", i), zap.Error(err))
	}
	cs.mu.Lock()
	log := cs.logs[i]
	delete(cs.logs, i)
	cs.mu.Unlock()
	if log != nil {
		log.Close()
	}
}

// watchCommits wakes long polls at every entry any broker appends to any
// shard's log (a commit made elsewhere).
func (b *Broker) watchCommits() {
	cs := b.cl
	for b.bg.Err() == nil {
		ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(b.bg))
		for resp := range cs.client.Watch(ctx, cs.prefix+"meta/", clientv3.WithPrefix(), clientv3.WithFilterDelete(), clientv3.WithKeysOnly()) {
			if resp.Err() != nil {
				break
			}
			b.signalCommit()
		}
		cancel()
		select {
		case <-b.bg.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// closeCluster leaves the cluster (leaderships given up, membership
// withdrawn); the coordinator is closed after it.
func (b *Broker) closeCluster() error {
	if b.cl == nil || b.cl.node == nil {
		return nil
	}
	return b.cl.node.Close()
}

// releaseCluster closes the etcd client if the broker opened it.
func (b *Broker) releaseCluster() error {
	if b.cl == nil || !b.cl.ownClient {
		return nil
	}
	return b.cl.client.Close()
}

// Members returns the live brokers of the cluster, by ID; a broker
// without Config.Cluster is a cluster of one.
func (b *Broker) Members() []Member {
	if b.cl == nil || b.cl.node == nil {
		return []Member{{ID: b.cfg.BrokerID, Rack: b.cfg.Rack}}
	}
	return b.cl.node.Members()
}

// ShardLeader returns the live broker that leads coordinator shard i.
func (b *Broker) ShardLeader(i int) (Member, bool) {
	if b.cl == nil || b.cl.node == nil {
		return Member{ID: b.cfg.BrokerID, Rack: b.cfg.Rack}, i >= 0 && i < b.cfg.Shards
	}
	return b.cl.node.Leader(i)
}

var _ coordinator.Forwarder = (*lateForwarder)(nil)
