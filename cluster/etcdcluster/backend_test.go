package etcdcluster_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"

	"github.com/diskless-go/diskless/cluster"
	"github.com/diskless-go/diskless/cluster/etcdcluster"
	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/internal/etcdtest"
)

// TestBackendTLSAuth: against an etcd that serves TLS only, requires
// client certificates and has authentication on, a Backend without TLS,
// without the client certificate, that does not trust the CA, with a
// wrong password, without credentials, or whose user may not touch the
// prefix, fails to connect with an error that says why, and writes
// nothing; a Backend with the CA, the certificate and the user connects,
// and two brokers join, elect a leader of each shard and append to its
// log, which the other reads.
func TestBackendTLSAuth(t *testing.T) {
	const user, password, prefix = "broker", "broker-secret", "tls/"
	etcd := etcdtest.Start(t, &etcdtest.Options{TLS: true, Auth: &etcdtest.Auth{User: user, Password: password, Prefix: prefix}})
	files := etcd.TLSFiles()
	withCert, err := files.ClientConfig(true)
	require.NoError(t, err)
	noCert, err := files.ClientConfig(false)
	require.NoError(t, err)
	bare := make([]string, etcd.Len()) // host:port
	for i, ep := range etcd.Endpoints() {
		bare[i] = strings.TrimPrefix(ep, "https://")
	}
	root := etcd.Client(t)
	before, err := root.Get(t.Context(), "", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)

	for _, tc := range []struct {
		name    string
		b       etcdcluster.Backend
		prefix  string
		is      error // nil: any
		message string
	}{
		{"wrong password", etcdcluster.Backend{Endpoints: bare, TLS: withCert, Username: user, Password: "wrong"}, prefix,
			rpctypes.ErrAuthFailed, `as user "broker"`},
		{"no TLS", etcdcluster.Backend{Endpoints: bare, Username: user, Password: password}, prefix,
			nil, "serves TLS: set the Backend's TLS"},
		{"no client certificate", etcdcluster.Backend{Endpoints: bare, TLS: noCert, Username: user, Password: password}, prefix,
			nil, "certificate required"},
		{"unknown CA", etcdcluster.Backend{Endpoints: bare, TLS: &tls.Config{RootCAs: x509.NewCertPool(), Certificates: withCert.Certificates}, Username: user, Password: password}, prefix,
			nil, "certificate signed by unknown authority"},
		{"no credentials", etcdcluster.Backend{Endpoints: bare, TLS: withCert}, prefix,
			rpctypes.ErrPermissionDenied, "set the Backend's Username and Password"},
		{"another prefix", etcdcluster.Backend{Endpoints: bare, TLS: withCert, Username: user, Password: password}, "other/",
			rpctypes.ErrPermissionDenied, `readwrite on the keys under "other/"`},
		{"user without password", etcdcluster.Backend{Endpoints: bare, Username: user}, prefix, nil, "Username and Password go together"},
		{"TLS on http://", etcdcluster.Backend{Endpoints: []string{"http://" + bare[0]}, TLS: withCert}, prefix, nil, "says http://"},
		{"Client and TLS", etcdcluster.Backend{Client: root, TLS: withCert}, prefix, nil, "the Client's own"},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		conn, err := tc.b.Connect(ctx, &cluster.ConnectOptions{Prefix: tc.prefix, Logger: zaptest.NewLogger(t)})
		cancel()
		if conn != nil {
			conn.Close()
		}
		require.Error(t, err, tc.name)
		t.Logf("%s: %v", tc.name, err)
		require.ErrorContains(t, err, tc.message, tc.name)
		if tc.is != nil {
			require.ErrorIs(t, err, tc.is, tc.name)
		}
	}
	after, err := root.Get(t.Context(), "", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	require.Equal(t, before.Header.Revision, after.Header.Revision, "the failed connections wrote nothing")
	require.Equal(t, before.Count, after.Count)

	backend := &etcdcluster.Backend{Endpoints: etcd.Endpoints(), TLS: withCert, Username: user, Password: password}
	conn, err := backend.Connect(t.Context(), &cluster.ConnectOptions{Prefix: prefix, Logger: zaptest.NewLogger(t)})
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	const shards = 2
	var mem cluster.Mem
	var nodes []cluster.Node
	var ls []*leads
	for id := range 2 {
		l := &leads{shards: map[int]metalog.Log{}}
		n, err := conn.Join(t.Context(), &cluster.JoinOptions{
			Member: cluster.Member{ID: int32(id)}, Shards: shards, LeaseTTL: time.Second, Transport: &mem,
		}, l.callbacks())
		require.NoError(t, err)
		t.Cleanup(func() { n.Close() })
		nodes, ls = append(nodes, n), append(ls, l)
	}
	require.Eventually(t, func() bool {
		return len(nodes[0].Members()) == 2 && len(nodes[1].Members()) == 2 && ls[0].count() == 1 && ls[1].count() == 1
	}, 30*time.Second, 10*time.Millisecond, "both members seen, each leads a shard")
	for i := range shards {
		leader, ok := nodes[0].Leader(i)
		require.True(t, ok)
		ls[leader.ID].mu.Lock()
		log := ls[leader.ID].shards[i]
		ls[leader.ID].mu.Unlock()
		r := <-log.Append([]byte("over TLS"))
		require.NoError(t, r.Err, "the leader's log takes appends")
		follower, err := conn.OpenLog(t.Context(), i)
		require.NoError(t, err)
		var got []string
		require.NoError(t, follower.Read(t.Context(), 0, func(_ int64, e []byte) error { got = append(got, string(e)); return nil }))
		require.Equal(t, []string{"over TLS"}, got, "a follower reads shard %d's log", i)
		require.NoError(t, follower.Close())
	}
	resp, err := root.Get(t.Context(), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	require.NotZero(t, resp.Count, "the brokers wrote under their prefix")
}
