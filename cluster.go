package diskless

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/diskless-go/diskless/cluster"
	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/kafkaerr"
)

// ClusterConfig makes a Broker one of many stateless brokers on one
// bucket, coordinated through a cluster.Backend (Config.Cluster): each
// coordinator shard's metadata log is in the Backend, led by one broker
// at a time (elected there, fenced by its lease), and every broker takes
// produce, fetch and admin calls for every partition, forwarding to the
// shard's leader what it does not lead itself. The Backend over etcd is
// package cluster/etcdcluster's, which the program imports:
//
//	Cluster: &diskless.ClusterConfig{
//		Backend: &etcdcluster.Backend{Endpoints: []string{"10.0.0.1:2379"}},
//	}
//
// See package cluster and coordinator's forward.go for the design.
type ClusterConfig struct {
	// Backend is where the brokers meet: their membership, the shards'
	// elections and metadata logs. Required: &etcdcluster.Backend{...}
	// for etcd (with its TLS, Username and Password for an etcd that
	// serves TLS or has authentication on). Open connects with it;
	// Close closes that connection (an etcd client the Backend was given
	// stays open).
	Backend cluster.Backend
	// Prefix is before every key the cluster puts in the Backend. ""
	// means "diskless/". Every broker of one cluster says the same; two
	// clusters on one etcd say different ones.
	Prefix string
	// LeaseTTL is how long after a broker stops renewing its lease (it
	// died, froze, or was cut off) its membership and leaderships end. 0
	// means 5 s.
	LeaseTTL time.Duration
	// PeerAddr is where the broker listens for the calls other brokers
	// forward to the shards it leads. "" means "127.0.0.1:0" (a free port:
	// fine on one machine; give a reachable address otherwise).
	PeerAddr string
	// Advertise is where Kafka clients reach this broker, published with
	// its membership for the embedding program's Metadata (Members).
	Advertise string
	// Transport carries the calls between brokers; nil means TCP. Close
	// leaves a Transport given here open. A Transport given here brings
	// its own security: PeerTLS is for the default one.
	Transport cluster.Transport
	// PeerVersions keeps this broker to older versions of the calls
	// between brokers, for a staged upgrade (as Kafka's
	// inter.broker.protocol.version) or a test of one: see
	// coordinator.Options.PeerVersions. Nil: every version this release
	// speaks; a broker always speaks to another in the highest version
	// both speak.
	PeerVersions map[string]int
	// Features keeps this broker to lower levels of the cluster's
	// features than this release supports (see package coordinator's
	// features.go), to test an upgrade: a feature it names is advertised
	// at that level at the most. Nil: this release's levels.
	Features map[string]int
	// PeerTLS, if set, makes the calls between brokers mutual TLS with
	// the cluster's CA (cluster.TCPOptions.TLS; the rule is in package
	// cluster's doc, "Security between brokers"): RootCAs is the cluster
	// CA, and Certificates[0] is this broker's certificate, which must
	// name it, URI SAN diskless-node:<BrokerID> (cluster.NodeURI; Open
	// checks a certificate in Certificates; one that GetCertificate and
	// GetClientCertificate return is the caller's to check). A broker serves only brokers with a certificate of the
	// CA, and sends a call only to the broker whose certificate names the
	// member that leads the shard. Nil means plaintext: anything that
	// reaches PeerAddr can commit batches and delete topics; Open logs a
	// warning then (unless Transport is set).
	PeerTLS *tls.Config
}

// check validates the cluster's options of broker id.
func (cc *ClusterConfig) check(id int32) error {
	switch {
	case cc.Backend == nil:
		return fmt.Errorf("diskless: Config.Cluster.Backend is nil: set one, such as &etcdcluster.Backend{Endpoints: ...}")
	case cc.PeerTLS != nil && cc.Transport != nil:
		return fmt.Errorf("diskless: Config.Cluster.PeerTLS is the default TCP transport's: a Config.Cluster.Transport brings its own (cluster.TCPOptions.TLS)")
	case cc.PeerTLS == nil || len(cc.PeerTLS.Certificates) == 0:
		return nil
	}
	cert := cc.PeerTLS.Certificates[0]
	leaf := cert.Leaf
	if leaf == nil && len(cert.Certificate) > 0 {
		var err error
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return fmt.Errorf("diskless: Config.Cluster.PeerTLS.Certificates[0]: %w", err)
		}
	}
	if leaf == nil {
		return fmt.Errorf("diskless: Config.Cluster.PeerTLS.Certificates[0] is empty")
	}
	got, err := cluster.NodeID(leaf)
	if err != nil {
		return fmt.Errorf("diskless: Config.Cluster.PeerTLS.Certificates[0]: %w", err)
	}
	if got != id {
		return fmt.Errorf("diskless: Config.Cluster.PeerTLS.Certificates[0] names node %d, not this broker (Config.BrokerID %d)", got, id)
	}
	return nil
}

// Member is one live broker of a cluster.
type Member = cluster.Member

// clusterState is a cluster broker's side of the Backend.
type clusterState struct {
	conn cluster.Conn
	node cluster.Node      // once joined
	tr   cluster.Transport // the TCP made for PeerTLS; nil otherwise
	fwd  lateForwarder
}

// lateForwarder is the Coordinator's Forwarder before the Node exists.
type lateForwarder struct {
	mu   sync.RWMutex
	node cluster.Node
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

// LeaderVersions implements coordinator.LeaderVersioner: what shard's
// leader advertised with its membership.
func (f *lateForwarder) LeaderVersions(shard int) map[string]int {
	f.mu.RLock()
	n := f.node
	f.mu.RUnlock()
	if n == nil {
		return nil
	}
	m, _ := n.Leader(shard)
	return m.Speaks
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

// peerVersions is ClusterConfig.PeerVersions, nil without a cluster.
func (b *Broker) peerVersions() map[string]int {
	if b.cfg.Cluster == nil {
		return nil
	}
	return b.cfg.Cluster.PeerVersions
}

// followerLog opens, for the coordinator's followers, a read-only view of
// each shard's log in the Backend (unfenced: a follower never appends).
func (b *Broker) followerLog() func(ctx context.Context, shard int) (metalog.Log, error) {
	if b.cfg.Cluster == nil {
		return nil
	}
	return func(ctx context.Context, i int) (metalog.Log, error) { return b.cl.conn.OpenLog(ctx, i) }
}

// openClusterClient connects to the Backend.
func (b *Broker) openClusterClient(ctx context.Context) error {
	conn, err := b.cfg.Cluster.Backend.Connect(ctx, &cluster.ConnectOptions{
		Prefix: cmp.Or(b.cfg.Cluster.Prefix, "diskless/"),
		Spill:  b.metaBucket, SpillPrefix: b.cfg.Prefix + "meta/", // <Prefix>meta/<n>/spill/
		Logger: b.cfg.Logger,
	})
	if err != nil {
		return fmt.Errorf("diskless: connecting to the cluster: %w", err)
	}
	b.cl = &clusterState{conn: conn}
	return nil
}

// joinCluster registers the broker and starts its campaigns, once the
// coordinator is open. The Node wakes the long polls at every entry any
// broker appends to any shard's log (a commit made elsewhere).
func (b *Broker) joinCluster(ctx context.Context) error {
	cc, cs := b.cfg.Cluster, b.cl
	peer := cc.PeerAddr
	if peer == "" {
		peer = "127.0.0.1:0"
	}
	tr := cc.Transport
	switch {
	case cc.PeerTLS != nil:
		tcp, err := cluster.NewTCP(&cluster.TCPOptions{TLS: cc.PeerTLS, Logger: b.cfg.Logger})
		if err != nil {
			return fmt.Errorf("diskless: Config.Cluster.PeerTLS: %w", err)
		}
		tr, cs.tr = tcp, tcp
	case tr == nil:
		b.cfg.Logger.Warn("diskless: the calls between brokers are plaintext and unauthenticated: anything that reaches the peer address can commit batches and delete topics; set ClusterConfig.PeerTLS",
			zap.String("peer", peer))
	}
	node, err := cs.conn.Join(ctx, &cluster.JoinOptions{
		Member: cluster.Member{ID: b.cfg.BrokerID, Rack: b.cfg.Rack, PeerAddr: peer, Advertise: cc.Advertise,
			Speaks: coordinator.PeerVersions(cc.PeerVersions), Features: coordinator.Features(cc.Features)},
		Shards:    b.cfg.Shards,
		LeaseTTL:  cc.LeaseTTL,
		Transport: tr,
	}, cluster.Callbacks{
		Lead:     b.leadShard,
		Unlead:   b.unleadShard,
		Serve:    b.coord.Shards().Serve,
		Healthy:  b.coord.Shards().ShardErr,
		Appended: b.signalCommit,
	})
	if err != nil {
		if cs.tr != nil {
			cs.tr.Close()
			cs.tr = nil
		}
		return fmt.Errorf("diskless: joining the cluster: %w", err)
	}
	cs.node = node
	cs.fwd.mu.Lock()
	cs.fwd.node = node
	cs.fwd.mu.Unlock()
	return nil
}

// leadShard has the coordinator lead shard i from its log, fenced by the
// election won (the Node closes the log after unleadShard).
func (b *Broker) leadShard(ctx context.Context, i int, log metalog.Log) error {
	return b.coord.Shards().Lead(ctx, i, log)
}

// unleadShard stops leading shard i.
func (b *Broker) unleadShard(i int) {
	if err := b.coord.Shards().Unlead(i); err != nil {
		b.cfg.Logger.Warn("diskless: closing a shard no longer led", zap.Int("shard", i), zap.Error(err))
	}
}

// closeCluster leaves the cluster (leaderships given up, membership
// withdrawn); the coordinator is closed after it.
func (b *Broker) closeCluster() error {
	if b.cl == nil || b.cl.node == nil {
		return nil
	}
	err := b.cl.node.Close()
	if b.cl.tr != nil {
		err = errors.Join(err, b.cl.tr.Close())
	}
	return err
}

// releaseCluster closes the connection to the Backend.
func (b *Broker) releaseCluster() error {
	if b.cl == nil {
		return nil
	}
	return b.cl.conn.Close()
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

var (
	_ coordinator.Forwarder       = (*lateForwarder)(nil)
	_ coordinator.LeaderVersioner = (*lateForwarder)(nil)
)

// FeatureState is this broker's feature levels (see package
// coordinator's features.go): the highest it supports, and the cluster's
// finalized ones.
type FeatureState struct {
	// Supported is the highest level of each feature this broker
	// supports; the lowest is 1.
	Supported map[string]int
	// Finalized is the cluster's finalized level of each feature: what
	// every broker supports, and may write.
	Finalized map[string]int
	// Epoch grows with every change of Finalized; -1 when they are not
	// known yet.
	Epoch int64
}

// Features returns this broker's supported feature levels and the
// cluster's finalized ones, as last seen: Kafka's ApiVersions answers
// them. A broker without Config.Cluster finalizes what it supports.
func (b *Broker) Features() FeatureState {
	var limit map[string]int
	if b.cfg.Cluster != nil {
		limit = b.cfg.Cluster.Features
	}
	st := FeatureState{Supported: coordinator.Features(limit)}
	if b.cl == nil || b.cl.node == nil {
		st.Finalized, st.Epoch = maps.Clone(st.Supported), 0
		return st
	}
	f := b.cl.node.Features()
	st.Finalized, st.Epoch = f.Levels, f.Epoch
	return st
}

// UpdateFeatures raises the cluster's finalized level of each feature
// named to the level given, all or none, once every live broker supports
// it (Kafka's UpdateFeatures): a lower level than the finalized one, one
// a broker does not support, or an unknown feature is refused with
// INVALID_UPDATE_VERSION, and nothing changes. With validateOnly nothing
// changes either way. A broker without Config.Cluster has its levels
// finalized already.
func (b *Broker) UpdateFeatures(ctx context.Context, levels map[string]int, validateOnly bool) error {
	if b.closed.Load() {
		return ErrClosed
	}
	if b.cl != nil && b.cl.node != nil {
		return b.cl.node.UpdateFeatures(ctx, levels, validateOnly)
	}
	have := b.Features().Finalized
	for name, l := range levels {
		switch cur, ok := have[name]; {
		case !ok:
			return kafkaerr.New(kafkaerr.InvalidUpdateVersion, "no feature %q", name)
		case l != cur:
			return kafkaerr.New(kafkaerr.InvalidUpdateVersion, "feature %s is at level %d, the highest this broker supports and the lowest it finalizes (%d asked)", name, cur, l)
		}
	}
	return nil
}
