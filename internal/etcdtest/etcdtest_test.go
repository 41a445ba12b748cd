package etcdtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestVersions checks that the server tools/etcd builds, the client in the
// root go.mod and Version agree.
func TestVersions(t *testing.T) {
	mod, err := os.ReadFile(filepath.Join("..", "..", "tools", "etcd", "go.mod"))
	require.NoError(t, err)
	require.Contains(t, string(mod), "go.etcd.io/etcd/server/v3 v"+Version+"\n", "tools/etcd/go.mod pins another server")

	root, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	require.NoError(t, err)
	require.Contains(t, string(root), "go.etcd.io/etcd/client/v3 v"+Version+"\n", "the root go.mod requires another client")
}

// TestCluster starts three members and writes and reads through each of
// them, and through a client of all: every member sees every write.
func TestCluster(t *testing.T) {
	c := Start(t, nil)
	require.Equal(t, 3, c.Len())
	require.Len(t, c.Endpoints(), 3)
	ctx := t.Context()

	for i := range c.Len() {
		require.True(t, strings.HasPrefix(c.Endpoint(i), "http://127.0.0.1:"), c.Endpoint(i))
		cli := c.MemberClient(t, i)
		st, err := cli.Status(ctx, c.Endpoint(i))
		require.NoError(t, err)
		require.Equal(t, Version, st.Version)
		_, err = cli.Put(ctx, fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i))
		require.NoError(t, err)
	}
	for i := range c.Len() {
		cli := c.MemberClient(t, i)
		for j := range c.Len() {
			requireValue(t, cli, fmt.Sprintf("k%d", j), fmt.Sprintf("v%d", j))
		}
	}
	all := c.Client(t)
	_, err := all.Put(ctx, "all", "yes")
	require.NoError(t, err)
	requireValue(t, all, "all", "yes")

	leader, err := c.Leader(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, leader, 0)
	require.Less(t, leader, c.Len())
}

// TestKillRestart kills the leader: the two others elect one and serve
// writes; the killed member, restarted on its data dir, rejoins and reads
// what was written while it was down.
func TestKillRestart(t *testing.T) {
	c := Start(t, nil)
	ctx := t.Context()
	all := c.Client(t)
	_, err := all.Put(ctx, "before", "1")
	require.NoError(t, err)

	leader, err := c.Leader(ctx)
	require.NoError(t, err)
	c.Kill(leader)
	c.Kill(leader) // killing a dead member does nothing
	require.Error(t, c.Stop(leader), "a dead member cannot be paused")

	putEventually(t, all, "during", "2")
	for i := range c.Len() {
		if i != leader {
			requireValue(t, c.MemberClient(t, i), "during", "2")
		}
	}
	newLeader, err := c.Leader(ctx)
	require.NoError(t, err)
	require.NotEqual(t, leader, newLeader)

	require.NoError(t, c.Restart(leader))
	back := c.MemberClient(t, leader)
	requireValue(t, back, "before", "1")
	requireValue(t, back, "during", "2")
	_, err = back.Put(ctx, "after", "3")
	require.NoError(t, err)
	requireValue(t, all, "after", "3")

	// Restart of a running member is a crash and a start.
	require.NoError(t, c.Restart(newLeader))
	requireValue(t, c.MemberClient(t, newLeader), "after", "3")
}

// TestStopCont pauses the leader with SIGSTOP: the others elect a new one
// and serve writes; resumed, the old leader steps down and catches up.
func TestStopCont(t *testing.T) {
	c := Start(t, nil)
	ctx := t.Context()
	leader, err := c.Leader(ctx)
	require.NoError(t, err)
	other := (leader + 1) % c.Len()

	require.NoError(t, c.Stop(leader))
	paused := c.MemberClient(t, leader)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = paused.Get(short, "x")
	cancel()
	require.Error(t, err, "a paused member answers nothing")

	putEventually(t, c.MemberClient(t, other), "while-paused", "1")
	newLeader, err := c.Leader(ctx)
	require.NoError(t, err)
	require.NotEqual(t, leader, newLeader)

	require.NoError(t, c.Cont(leader))
	requireValue(t, paused, "while-paused", "1")

	require.NoError(t, c.Stop(other)) // the cleanup kills a paused member
}

// TestPortTaken starts a cluster whose last member's peer port is taken:
// that member exits, and start says so at once, which is what makes Start
// retry with other ports.
func TestPortTaken(t *testing.T) {
	bin, err := serverBinary(t.Logf)
	require.NoError(t, err)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	ports, err := freePorts(6)
	require.NoError(t, err)
	ports[5] = taken.Addr().(*net.TCPAddr).Port
	// An hour outlasts the test: start returns because it noticed the exit.
	_, err = start(t, bin, &Options{Members: 3, Timeout: time.Hour}, ports)
	require.ErrorIs(t, err, errPortTaken)
}

// TestFlags passes a flag through Options: a one-member cluster whose
// requests are limited to 4 KiB refuses a larger value.
func TestFlags(t *testing.T) {
	c := Start(t, &Options{Members: 1, Flags: []string{"--max-request-bytes=4096"}})
	require.Equal(t, 1, c.Len())
	cli := c.Client(t)
	ctx := t.Context()
	_, err := cli.Put(ctx, "small", strings.Repeat("x", 1024))
	require.NoError(t, err)
	_, err = cli.Put(ctx, "large", strings.Repeat("x", 8192))
	require.ErrorIs(t, err, rpctypes.ErrRequestTooLarge)
}

// requireValue reads key (linearizably) and checks its value.
func requireValue(t *testing.T, cli *clientv3.Client, key, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, key)
	require.NoError(t, err, "get %s through %v", key, cli.Endpoints())
	require.Len(t, resp.Kvs, 1, "get %s through %v", key, cli.Endpoints())
	require.Equal(t, want, string(resp.Kvs[0].Value))
}

// putEventually writes key, retrying while the cluster elects a leader: a
// write proposed while there is none waits for the server's request
// timeout (7 s) unless its context ends first, so each attempt is short.
func putEventually(t *testing.T, cli *clientv3.Client, key, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		attempt, cancelAttempt := context.WithTimeout(ctx, 2*time.Second)
		_, err := cli.Put(attempt, key, value)
		cancelAttempt()
		if err == nil {
			return
		}
		require.NoError(t, ctx.Err(), "put %s: %v", key, err)
		t.Logf("put %s: %v; retrying", key, err)
	}
}

// TestTLSAuth starts three members that serve clients over TLS only,
// with authentication on: the user may read and write under its prefix
// and nothing else; a wrong password, a client without the client
// certificate and one without TLS are refused; root (the package's
// clients) reaches every key, also through a member restarted.
func TestTLSAuth(t *testing.T) {
	c := Start(t, &Options{TLS: true, Auth: &Auth{User: "app", Password: "app-secret", Prefix: "app/"}})
	ctx := t.Context()
	for _, ep := range c.Endpoints() {
		require.True(t, strings.HasPrefix(ep, "https://127.0.0.1:"), ep)
	}
	files := c.TLSFiles()
	withCert, err := files.ClientConfig(true)
	require.NoError(t, err)
	connect := func(cfg clientv3.Config) (*clientv3.Client, error) {
		cfg.Endpoints, cfg.DialTimeout = c.Endpoints(), 2*time.Second
		cli, err := clientv3.New(cfg)
		if err == nil {
			t.Cleanup(func() { cli.Close() })
		}
		return cli, err
	}

	app, err := connect(clientv3.Config{TLS: withCert, Username: "app", Password: "app-secret"})
	require.NoError(t, err)
	_, err = app.Put(ctx, "app/k", "v")
	require.NoError(t, err)
	requireValue(t, app, "app/k", "v")
	_, err = app.Put(ctx, "other/k", "v")
	require.ErrorIs(t, err, rpctypes.ErrPermissionDenied)
	_, err = app.Get(ctx, "", clientv3.WithPrefix())
	require.ErrorIs(t, err, rpctypes.ErrPermissionDenied)

	_, err = connect(clientv3.Config{TLS: withCert, Username: "app", Password: "wrong"})
	require.ErrorIs(t, err, rpctypes.ErrAuthFailed)

	noCert, err := files.ClientConfig(false)
	require.NoError(t, err)
	_, err = connect(clientv3.Config{TLS: noCert, Username: "app", Password: "app-secret"})
	require.Error(t, err, "the members require a client certificate")
	plainEPs := make([]string, c.Len())
	for i, ep := range c.Endpoints() {
		plainEPs[i] = "http://" + strings.TrimPrefix(ep, "https://")
	}
	_, err = clientv3.New(clientv3.Config{Endpoints: plainEPs, DialTimeout: 2 * time.Second, Username: "app", Password: "app-secret"})
	require.Error(t, err, "the members serve TLS only")

	root := c.Client(t)
	_, err = root.Put(ctx, "other/k", "root")
	require.NoError(t, err)
	require.NoError(t, c.Restart(1))
	requireValue(t, c.MemberClient(t, 1), "other/k", "root")
	requireValue(t, c.MemberClient(t, 1), "app/k", "v")
}
