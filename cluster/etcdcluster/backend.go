package etcdcluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless/cluster"
	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/coordinator/metalog/etcdlog"
)

// Backend is the cluster.Backend over etcd: a diskless.ClusterConfig's
// Backend, given as &etcdcluster.Backend{Endpoints: ...}. Connect opens
// an etcd client on Endpoints, or uses Client. A Backend is safe for
// concurrent use once set; one may serve many brokers of a process.
type Backend struct {
	// Endpoints are the etcd members' addresses (host:port). Ignored when
	// Client is set.
	Endpoints []string
	// Client, when set, is the etcd client to use; the Conn's Close
	// leaves it open.
	Client *clientv3.Client
}

var _ cluster.Backend = (*Backend)(nil)

// Connect implements cluster.Backend: a client on Endpoints (closed by
// the Conn's Close), or Client.
func (b *Backend) Connect(ctx context.Context, opts *cluster.ConnectOptions) (cluster.Conn, error) {
	var o cluster.ConnectOptions
	if opts != nil {
		o = *opts
	}
	c := &conn{client: b.Client, prefix: o.Prefix, opts: o, log: cmp.Or(o.Logger, zap.NewNop())}
	if c.client == nil {
		if len(b.Endpoints) == 0 {
			return nil, errors.New("etcdcluster: Backend needs Endpoints or a Client")
		}
		client, err := clientv3.New(clientv3.Config{Endpoints: b.Endpoints, DialTimeout: 5 * time.Second, Logger: c.log.Named("etcd")})
		if err != nil {
			return nil, fmt.Errorf("etcdcluster: connecting to etcd %v: %w", b.Endpoints, err)
		}
		c.client, c.own = client, true
	}
	return c, nil
}

// conn is a cluster.Conn over etcd: the shards' metadata logs are
// etcdlog.Logs under <prefix>meta/<n>/, and Join makes a Node.
type conn struct {
	client *clientv3.Client
	own    bool // client is the one Connect opened: Close closes it
	prefix string
	opts   cluster.ConnectOptions
	log    *zap.Logger
}

var _ cluster.Conn = (*conn)(nil)

// OpenLog implements cluster.Conn: shard's log, unfenced (a follower
// never appends).
func (c *conn) OpenLog(ctx context.Context, shard int) (metalog.Log, error) {
	l, err := c.openLog(ctx, shard, nil)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// openLog opens shard's log in etcd, its appends fenced by fence if it is
// not nil.
func (c *conn) openLog(ctx context.Context, shard int, fence *etcdlog.Fence) (*etcdlog.Log, error) {
	n := strconv.Itoa(shard)
	return etcdlog.Open(ctx, c.client, c.prefix+"meta/"+n+"/", &etcdlog.Options{
		Fence: fence, Spill: c.opts.Spill, SpillPrefix: c.opts.SpillPrefix + n + "/spill/", Logger: c.log,
	})
}

// Close implements cluster.Conn: it closes the etcd client if Connect
// opened it.
func (c *conn) Close() error {
	if !c.own {
		return nil
	}
	return c.client.Close()
}
