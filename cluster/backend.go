package cluster

import (
	"context"
	"time"

	"go.uber.org/zap"
	"gocloud.dev/blob"

	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/coordinator/metalog"
)

// Backend is the service the brokers of a cluster coordinate through:
// where each broker registers, where each coordinator shard's leader is
// elected, and where the shards' metadata logs live, a leader's appends
// fenced by its election. Package etcdcluster is the Backend over etcd,
// package memcluster one in memory with etcd's semantics, and
// clustertest.RunBackend the suite every implementation must pass;
// diskless.ClusterConfig.Backend takes one, which the Broker connects
// with when it opens and whose connection it closes when it closes.
type Backend interface {
	// Connect opens one broker's connection to the backend.
	Connect(ctx context.Context, opts *ConnectOptions) (Conn, error)
}

// ConnectOptions configure a Conn. The zero value holds the defaults; a
// nil *ConnectOptions means the zero value.
type ConnectOptions struct {
	// Prefix is before every key the cluster keeps in the backend. Every
	// broker of one cluster says the same; two clusters on one backend
	// say different ones.
	Prefix string
	// Spill holds the metadata log entries too large for the backend
	// (etcd refuses requests past 1.5 MiB by default): shard n's under
	// SpillPrefix + "<n>/spill/". Nil means such entries fail.
	Spill       *blob.Bucket
	SpillPrefix string
	// Logger logs membership, leadership and the logs' retries; nil means
	// none.
	Logger *zap.Logger
}

// Conn is one broker's connection to its cluster's Backend. It is safe
// for concurrent use.
type Conn interface {
	// OpenLog opens shard's metadata log for a follower, which reads and
	// waits, and never appends (the log of a shard led here comes with
	// Callbacks.Lead). The caller closes it.
	OpenLog(ctx context.Context, shard int) (metalog.Log, error)
	// Join registers the broker opts describes, serves its peers' calls
	// on opts.Member.PeerAddr and campaigns for the shards, calling cb as
	// leaderships come and go. It returns once the broker is registered
	// and knows the members and leaders there are.
	Join(ctx context.Context, opts *JoinOptions, cb Callbacks) (Node, error)
	// Close closes the connection. The Node it joined, and the logs it
	// opened, are closed before.
	Close() error
}

// Node is one broker's membership of a cluster, as Conn.Join made it: its
// registration, its campaigns for the shards, what it knows of the other
// members and of each shard's leader, and its transport. It is the
// coordinator.Forwarder of the broker's Coordinator, and safe for
// concurrent use.
type Node interface {
	coordinator.Forwarder
	// Members returns the live members, by ID.
	Members() []Member
	// Leader returns the live member that leads shard i, if any.
	Leader(i int) (Member, bool)
	// Features returns the cluster's finalized feature levels, as last
	// seen here.
	Features() FinalizedFeatures
	// UpdateFeatures raises each named feature's finalized level to the
	// one given, all or none, if every live member supports it: a level
	// below the finalized one (a downgrade), one some member does not
	// support, or an unknown feature is refused with
	// INVALID_UPDATE_VERSION, and nothing changes. With validateOnly it
	// changes nothing either way.
	UpdateFeatures(ctx context.Context, levels map[string]int, validateOnly bool) error
	// Close gives up every leadership (Callbacks.Unlead is called for
	// each), withdraws the membership, and stops serving the peers.
	Close() error
}

// JoinOptions configure a Node. Member and Shards are required.
type JoinOptions struct {
	// Member is this broker: its ID, rack and addresses.
	Member Member
	// Shards is how many coordinator shards the cluster has; every broker
	// must say the same.
	Shards int
	// LeaseTTL is the life of this broker's lease: its membership and
	// leaderships end that long after it stops renewing it (it died, was
	// paused, or was cut off). 0 means 5 s.
	LeaseTTL time.Duration
	// Transport carries calls between brokers; nil means a TCP, which
	// Node.Close closes (one given here is left open).
	Transport Transport
}

// Callbacks are what a Node does when leadership changes, and how it
// serves its peers' calls.
type Callbacks struct {
	// Lead is called when this broker wins shard's election, with the
	// shard's metadata log, its appends fenced by that leadership, and a
	// metalog.Confirmer of it (the leader confirms it before the reads
	// that must not be stale); an
	// error gives the leadership up (and it is campaigned for again
	// later). The Node closes the log after Unlead returns, or after Lead
	// fails.
	Lead func(ctx context.Context, shard int, log metalog.Log) error
	// Unlead is called when the leadership is lost or given up. A
	// leadership lost (the lease ended, the election key was deleted)
	// is no longer fenced in: appends through its log fail. One given up
	// (Close, Healthy, a hand-over to the preferred member) is resigned
	// only once Unlead has returned and the log is closed, so that
	// appends under way may still land meanwhile; either way no other
	// broker leads the shard while this one's appends can land.
	Unlead func(shard int)
	// Serve serves the calls other brokers forward.
	Serve Handler
	// Healthy, if set, is asked now and then about each shard led here:
	// an error gives it up (to be campaigned for and led again, from its
	// log).
	Healthy func(shard int) error
	// Appended, if set, is called after entries land in any shard's log,
	// whichever broker appended them (the broker wakes its long polls).
	Appended func()
}

// Member is one live broker of the cluster, as it registered itself.
type Member struct {
	// ID is the broker's ID, unique in the cluster.
	ID int32 `json:"id"`
	// Rack is its rack (availability zone), "" if none.
	Rack string `json:"rack,omitempty"`
	// PeerAddr is where other brokers send it the calls of the shards it
	// leads.
	PeerAddr string `json:"peer"`
	// Advertise is where clients reach it (a Kafka listener's host:port,
	// for Metadata), "" if the embedding program has none.
	Advertise string `json:"advertise,omitempty"`
	// Speaks is the highest version of each method of the calls between
	// brokers it speaks (coordinator.PeerVersions); nil for a broker of
	// a release before versions, which speaks version 1 of each.
	Speaks map[string]int `json:"speaks,omitempty"`
	// Features is the highest level of each feature it supports
	// (coordinator.Features); nil for a broker of a release before
	// feature levels, which supports level 1 of each.
	Features map[string]int `json:"features,omitempty"`
}

// Supports returns the highest level of feature m supports: 1 for a
// broker that advertises none.
func (m Member) Supports(feature string) int {
	if m.Features == nil {
		return 1
	}
	return m.Features[feature]
}

// FinalizedFeatures are a cluster's finalized feature levels: what every
// broker of it supports and may write (see package coordinator's
// features.go).
type FinalizedFeatures struct {
	// Levels is the finalized level of each feature.
	Levels map[string]int
	// Epoch grows with every change of Levels; -1 when none is known
	// yet.
	Epoch int64
}
