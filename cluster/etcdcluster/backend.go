package etcdcluster

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless/cluster"
	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/coordinator/metalog/etcdlog"
)

// Backend is the cluster.Backend over etcd: a diskless.ClusterConfig's
// Backend, given as &etcdcluster.Backend{Endpoints: ...}. Connect opens
// an etcd client on Endpoints, with TLS and Username and Password if
// set, or uses Client. A Backend is safe for concurrent use once set;
// one may serve many brokers of a process.
type Backend struct {
	// Endpoints are the etcd members' addresses: host:port, or
	// http://host:port and https://host:port. Ignored when Client is
	// set.
	Endpoints []string
	// TLS, when set, is the configuration of the TLS connections to the
	// members: RootCAs (the CAs that sign the members' certificates;
	// nil means the system's) and, if the members require client
	// certificates (etcd's --client-cert-auth), Certificates. With TLS
	// no endpoint may say http://; without it an https:// endpoint is
	// dialed with the system's CAs and no client certificate.
	TLS *tls.Config
	// Username and Password are the etcd user the brokers act as, when
	// the etcd has authentication on (etcdctl auth enable); they go
	// together. The user's role needs readwrite on every key under the
	// cluster's prefix (ClusterConfig.Prefix, "diskless/" by default):
	// etcdctl role grant-permission ROLE --prefix readwrite diskless/.
	// Without TLS the password crosses the network in the clear.
	Username, Password string
	// Client, when set, is the etcd client to use; the Conn's Close
	// leaves it open. Endpoints is then ignored, and TLS, Username and
	// Password must not be set (they are the Client's own).
	Client *clientv3.Client
}

var _ cluster.Backend = (*Backend)(nil)

// connectTimeout bounds how long Connect waits for the etcd to answer
// when it opens the client.
const connectTimeout = 10 * time.Second

// Connect implements cluster.Backend: a client on Endpoints (closed by
// the Conn's Close), or Client. A client it opens authenticates (with
// Username and Password) and checks that it may read and write the keys
// under the prefix, writing none, within 10 s: an etcd that does not
// answer, refuses the credentials or withholds a permission fails
// Connect, with an error that says which and wraps etcd's (errors.Is
// matches rpctypes.ErrAuthFailed, ErrPermissionDenied, ErrUserEmpty, and
// context.DeadlineExceeded when no member answered; the error then says
// what a TLS handshake with a member showed, if anything).
func (b *Backend) Connect(ctx context.Context, opts *cluster.ConnectOptions) (cluster.Conn, error) {
	var o cluster.ConnectOptions
	if opts != nil {
		o = *opts
	}
	c := &conn{client: b.Client, prefix: o.Prefix, opts: o, log: cmp.Or(o.Logger, zap.NewNop())}
	if c.client != nil {
		if b.TLS != nil || b.Username != "" || b.Password != "" {
			return nil, errors.New("etcdcluster: Backend has a Client and TLS, Username or Password: those are the Client's own")
		}
		return c, nil
	}
	if err := b.check(); err != nil {
		return nil, err
	}
	client, err := clientv3.New(clientv3.Config{
		Endpoints: b.Endpoints, DialTimeout: 5 * time.Second, Logger: c.log.Named("etcd"),
		TLS: b.TLS, Username: b.Username, Password: b.Password,
	})
	if err != nil {
		return nil, b.connectError(ctx, err, o.Prefix)
	}
	if err := checkAccess(ctx, client, o.Prefix); err != nil {
		client.Close()
		return nil, b.connectError(ctx, err, o.Prefix)
	}
	c.client, c.own = client, true
	return c, nil
}

// check validates the Backend's fields for Connect to open a client.
func (b *Backend) check() error {
	if len(b.Endpoints) == 0 {
		return errors.New("etcdcluster: Backend needs Endpoints or a Client")
	}
	if (b.Username == "") != (b.Password == "") {
		return errors.New("etcdcluster: Backend's Username and Password go together")
	}
	schemes := map[string]bool{}
	for _, ep := range b.Endpoints {
		scheme, _, ok := strings.Cut(ep, "://")
		if !ok {
			scheme = ""
		}
		if b.TLS != nil && scheme == "http" {
			return fmt.Errorf("etcdcluster: Backend has TLS but endpoint %q says http://: give https://host:port or host:port", ep)
		}
		schemes[scheme] = true
	}
	if schemes["http"] && schemes["https"] {
		return fmt.Errorf("etcdcluster: Backend's Endpoints %v mix http:// and https://", b.Endpoints)
	}
	return nil
}

// checkAccess checks that the client may read and write the keys under
// prefix, and writes none: etcd checks the permissions of every
// operation of a transaction, in both branches, before it runs one, and
// this one's condition (a key created before revision 0) never holds.
// The branch that runs reads one key's name.
func checkAccess(ctx context.Context, client *clientv3.Client, prefix string) error {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	probe := prefix + "members/"
	_, err := client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(probe), "<", 0)).
		Then(clientv3.OpPut(probe, "")).
		Else(clientv3.OpGet(prefix, clientv3.WithPrefix(), clientv3.WithLimit(1), clientv3.WithKeysOnly())).
		Commit()
	return err
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
