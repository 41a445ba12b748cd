package kafkaserver

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless"
)

// Config configures a Server. A nil *Config, and the zero value of each
// field, mean the default that the field documents (Kafka's, where Kafka
// has the setting).
type Config struct {
	// Advertise is the HOST:PORT clients are told to connect to: this
	// node's address in Metadata, FindCoordinator and DescribeCluster
	// (Kafka's advertised.listeners). "" means the address of the
	// listener Serve is given, which is right unless clients reach the
	// server through another address (a proxy, a container's port) or
	// it listens on 0.0.0.0. In a cluster it must be the
	// diskless.ClusterConfig.Advertise the Broker was opened with: the
	// other nodes name this one to clients by that.
	Advertise string

	// NodeID is this node's Kafka node ID: the diskless.Config.BrokerID
	// the Broker was opened with (default 0, the Config's default).
	NodeID int32
	// Rack is this node's rack (availability zone): the
	// diskless.Config.Rack the Broker was opened with (default "": no
	// rack). Clients that tell theirs (Fetch's rack_id, or
	// diskless_rack=NAME in the client ID) are sent to nodes of it.
	Rack string
	// Clustered says the Broker is one node of a cluster (it was opened
	// with diskless.Config.Cluster): Metadata then names every live node
	// (Broker.Members) and spreads the partitions' leaders over them, and
	// each consumer group is coordinated by one live node. Default false:
	// the server is the only node, the leader of every partition and the
	// coordinator of every group.
	Clustered bool

	// DisableAutoCreateTopics refuses Metadata requests for unknown
	// topics (UNKNOWN_TOPIC_OR_PARTITION). Default false: a Metadata
	// request that allows it creates them, with DefaultPartitions
	// partitions (Kafka's auto.create.topics.enable, default true).
	DisableAutoCreateTopics bool
	// DefaultPartitions is the partitions of auto-created topics, and of
	// CreateTopics asking for -1 (Kafka's num.partitions); 0 means 1.
	DefaultPartitions int32

	// GroupInitialRebalanceDelay is how long the first rebalance of an
	// empty consumer group waits for more members, each new one
	// restarting the wait up to the rebalance timeout, so that consumers
	// started together share the first generation (Kafka's
	// group.initial.rebalance.delay.ms). 0 means 3 s, Kafka's default;
	// negative means no wait, as tests want.
	GroupInitialRebalanceDelay time.Duration

	// ConsumerGroupHeartbeatInterval is the heartbeat interval the
	// coordinator tells members of KIP-848 consumer groups (Kafka's
	// group.consumer.heartbeat.interval.ms): how soon they learn a new
	// assignment. 0 means 5 s, Kafka's default.
	ConsumerGroupHeartbeatInterval time.Duration
	// ConsumerGroupSessionTimeout is how long a member of a KIP-848
	// consumer group may go without a heartbeat before it is removed
	// (Kafka's group.consumer.session.timeout.ms). 0 means 45 s, Kafka's
	// default.
	ConsumerGroupSessionTimeout time.Duration
	// OffsetsTopicMirror writes every offset commit and deletion, once
	// the coordinator has it, to __consumer_offsets in Kafka's record
	// format too, in the background, for tools that read that topic
	// rather than ask for offsets (Burrow): see offsetmirror.go. Default
	// false: committed offsets live in the coordinator alone, and the
	// topic stays empty.
	OffsetsTopicMirror bool

	// MaxConnections bounds the connections open at once (Kafka's
	// max.connections): a connection past it is closed as soon as it is
	// accepted. 0 means 3/4 of the file descriptors the process may open
	// (RLIMIT_NOFILE); negative means no bound.
	MaxConnections int
	// MaxConnectionsPerIP bounds the connections open at once from one IP
	// address (Kafka's max.connections.per.ip), as MaxConnections does.
	// 0 or negative means no bound.
	MaxConnectionsPerIP int
	// MaxConnectionsPerIPOverrides bounds the connections open at once
	// from the IP addresses or host names it names, in place of
	// MaxConnectionsPerIP (Kafka's max.connections.per.ip.overrides): a
	// host name stands for each address it resolves to when New is
	// called, and a bound of 0 refuses every connection from it. A
	// negative bound, or a name that resolves to no address, is an error.
	MaxConnectionsPerIPOverrides map[string]int
	// IdleTimeout closes a connection that has sent nothing this long
	// while none of its requests is under way (Kafka's
	// connections.max.idle.ms); 0 means 10 minutes.
	IdleTimeout time.Duration
	// FrameTimeout closes a connection whose request frame is not whole
	// this long after its size arrived; 0 means 30 s (Kafka's
	// request.timeout.ms).
	FrameTimeout time.Duration
	// QueuedMaxRequestBytes bounds the bytes of the requests read, or
	// being read, and not yet answered, over every connection (Kafka's
	// queued.max.request.bytes): past it no connection reads another
	// frame until answers give bytes back. A frame larger than the whole
	// bound is read alone. 0 means 100 MiB.
	QueuedMaxRequestBytes int64

	// TLS, if set, makes the listener TLS (Kafka's SSL or, with SASL,
	// SASL_SSL listener): every accepted connection is served over
	// tls.Server, and its handshake must finish within FrameTimeout. With
	// client certificates (ClientAuth tls.RequireAndVerifyClientCert, or
	// VerifyClientCertIfGiven), a client's principal is "User:" and its
	// certificate's subject in RFC 2253 form, as Kafka's default
	// principal builder names it ("User:CN=alice,OU=eng,O=acme"), unless
	// it authenticates with SASL. nil means plaintext.
	TLS *tls.Config
	// SASL, if set, requires SASL authentication of every connection
	// (SASLConfig). nil means none: a connection's principal is its
	// client certificate's, or User:ANONYMOUS.
	SASL *SASLConfig

	// Authorizer, if not nil, checks every request as Kafka's authorizer
	// does (see Authorizer): an embedding program's own. ACL, if not nil,
	// turns on the built-in authorizer instead, over Kafka's ACLs as the
	// Broker keeps them (CreateAcls, DescribeAcls and DeleteAcls manage
	// them; without it they answer SECURITY_DISABLED). Both nil (the
	// default) allows every request, as Kafka without an authorizer; both
	// set is an error.
	Authorizer Authorizer
	ACL        *ACLConfig

	// MeterProvider, if not nil, gets the server's metrics through
	// OpenTelemetry: connections it closed (by reason), SASL
	// authentications (by result) and authorization denials (see
	// metrics.go). The Broker's own are diskless.Config.MeterProvider.
	MeterProvider metric.MeterProvider

	// LogDir is what DescribeLogDirs names the one log directory, the
	// bucket: its URL, say. "" means "diskless".
	LogDir string
	// Logger logs connections closed, topics created, groups' changes
	// and, at debug, every request; nil means none.
	Logger *zap.Logger
}

// New returns a Server over b, configured by cfg (nil means the
// defaults). It makes sure the internal topics __consumer_offsets and
// __diskless_topic_configs exist, reads the committed offsets and the
// topic configs from them, and starts the group coordinator; ctx bounds that
// start only. The Server does not own b: close b after the Server.
func New(ctx context.Context, b *diskless.Broker, cfg *Config) (*Server, error) {
	if b == nil {
		return nil, fmt.Errorf("kafkaserver: a nil Broker")
	}
	var c Config
	if cfg != nil {
		c = *cfg
	}
	sc := serverConfig{
		NodeID:              c.NodeID,
		Rack:                c.Rack,
		Clustered:           c.Clustered,
		AutoCreateTopics:    !c.DisableAutoCreateTopics,
		DefaultPartitions:   c.DefaultPartitions,
		MaxConnections:      c.MaxConnections,
		MaxConnectionsPerIP: c.MaxConnectionsPerIP,
		IdleTimeout:         c.IdleTimeout,
		FrameTimeout:        c.FrameTimeout,
		MaxRequestBytes:     c.QueuedMaxRequestBytes,
		LogDir:              c.LogDir,
		Logger:              c.Logger,
		Authorizer:          c.Authorizer,
		ACL:                 c.ACL,
		TLS:                 c.TLS,
		MeterProvider:       c.MeterProvider,
		OffsetsTopicMirror:  c.OffsetsTopicMirror,
	}
	switch {
	case c.DefaultPartitions < 0:
		return nil, fmt.Errorf("kafkaserver: Config.DefaultPartitions %d is negative", c.DefaultPartitions)
	case c.NodeID < 0:
		return nil, fmt.Errorf("kafkaserver: Config.NodeID %d is negative", c.NodeID)
	case c.IdleTimeout < 0 || c.FrameTimeout < 0:
		return nil, fmt.Errorf("kafkaserver: Config.IdleTimeout and FrameTimeout may not be negative")
	case c.ConsumerGroupHeartbeatInterval < 0 || c.ConsumerGroupSessionTimeout < 0:
		return nil, fmt.Errorf("kafkaserver: Config.ConsumerGroupHeartbeatInterval and ConsumerGroupSessionTimeout may not be negative")
	case c.Authorizer != nil && c.ACL != nil:
		return nil, fmt.Errorf("kafkaserver: Config.Authorizer and Config.ACL are both set: give one")
	case c.ACL != nil && c.ACL.Refresh < 0:
		return nil, fmt.Errorf("kafkaserver: Config.ACL.Refresh %v is negative", c.ACL.Refresh)
	case c.QueuedMaxRequestBytes < 0:
		return nil, fmt.Errorf("kafkaserver: Config.QueuedMaxRequestBytes %d is negative", c.QueuedMaxRequestBytes)
	}
	if sc.MaxConnectionsPerIP < 0 {
		sc.MaxConnectionsPerIP = 0
	}
	if len(c.MaxConnectionsPerIPOverrides) > 0 {
		var err error
		if sc.MaxConnectionsPerIPOverrides, err = resolveConnectionOverrides(ctx, c.MaxConnectionsPerIPOverrides); err != nil {
			return nil, err
		}
	}
	if !c.Clustered {
		// The Broker of a single node is its only member: what Config
		// says of it must be what the Broker was opened with.
		if m := b.Members(); len(m) == 1 && (m[0].ID != c.NodeID || m[0].Rack != c.Rack) {
			return nil, fmt.Errorf("kafkaserver: Config.NodeID %d and Rack %q are not the Broker's (BrokerID %d, Rack %q)", c.NodeID, c.Rack, m[0].ID, m[0].Rack)
		}
	}
	sc.Groups.ConsumerHeartbeat, sc.Groups.ConsumerSession = c.ConsumerGroupHeartbeatInterval, c.ConsumerGroupSessionTimeout
	switch d := c.GroupInitialRebalanceDelay; {
	case d == 0:
		sc.Groups.InitialRebalanceDelay = 3 * time.Second
	case d > 0:
		sc.Groups.InitialRebalanceDelay = d
	}
	if sc.LogDir == "" {
		sc.LogDir = "diskless"
	}
	if err := checkTLS(c.TLS); err != nil {
		return nil, err
	}
	if c.SASL != nil {
		var err error
		if sc.SASL, err = newSASLSetup(c.SASL, b); err != nil {
			return nil, err
		}
	}
	if c.Advertise != "" {
		host, port, err := splitHostPort(c.Advertise)
		if err != nil {
			return nil, fmt.Errorf("kafkaserver: Config.Advertise: %w", err)
		}
		if ip := net.ParseIP(host); c.Clustered && ip != nil && ip.IsUnspecified() {
			return nil, fmt.Errorf("kafkaserver: Config.Advertise %s: other nodes name this one to clients by it; give an address they can reach", c.Advertise)
		}
		sc.Host, sc.Port = host, port
	}
	return newServer(ctx, b, sc)
}
