// Package etcdtest runs a real etcd cluster for tests: N member processes
// (3 by default) of the etcd server that tools/etcd builds, on free
// 127.0.0.1 ports, each with its own temporary data dir, started by the
// test and killed when it ends. A member can be killed (SIGKILL), paused
// (SIGSTOP), resumed (SIGCONT) and restarted on its data dir and ports, so
// that what the library builds on etcd (membership, elections, the shards'
// logs) is tested against the faults a fleet sees, with no mock in between.
//
// The server binary is looked for in this order:
//
//  1. the path in $DISKLESS_ETCD, used as it is;
//  2. $GOPATH/bin/diskless-etcd, where `make deps` builds it;
//  3. diskless-etcd on the PATH;
//  4. otherwise it is built into $GOPATH/bin/diskless-etcd with `go build`
//     from the repository's tools/etcd (about two minutes the first time;
//     once for every test process on the machine).
//
// The second and third are used only if they report the etcd [Version]
// this package expects; a stale one is rebuilt. A server that can neither
// be found nor built fails the test: a missing etcd never skips one.
//
// Options.TLS has the members serve their clients over TLS, with
// certificates that Start makes in a temporary folder; Options.Auth turns
// etcd's authentication on, with a user whose role may read and write
// under a key prefix only. The clients this package gives connect as
// root, with TLS.
//
// Everything listens on 127.0.0.1 only. Unix only: members are paused with
// SIGSTOP.
package etcdtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// Version is the etcd release the tests run: the one tools/etcd/go.mod
// pins, and the version of go.etcd.io/etcd/client/v3 in the root go.mod
// (a test checks both).
const Version = "3.7.3"

// Options configure a cluster. The zero value (or a nil *Options) is
// three members with etcd's defaults, apart from the flags Start sets.
type Options struct {
	// Members is the number of members; 0 means 3.
	Members int

	// Flags are appended to every member's command line after the ones
	// Start sets, and override them (the last of a repeated flag wins):
	// "--max-request-bytes=65536", "--election-timeout=500",
	// "--log-level=debug". Run `diskless-etcd --help` for the list. Start
	// sets --name, --data-dir, the client and peer URLs, --initial-cluster,
	// --initial-cluster-state, --initial-cluster-token and --log-outputs;
	// overriding those breaks the cluster.
	Flags []string

	// Timeout bounds how long Start, and each Restart, wait for members to
	// serve; 0 means 30 seconds.
	Timeout time.Duration

	// TLS has every member serve its clients over TLS only: https://
	// endpoints, a certificate for 127.0.0.1 signed by a CA that Start
	// makes, and a client certificate signed by that CA required
	// (--client-cert-auth). Cluster.TLSFiles names the PEM files. The
	// members talk to each other in plain text.
	TLS bool

	// Auth, when set, turns etcd's authentication on once the members
	// serve: user root (with a password of Start's, which the clients of
	// Client and MemberClient use) and Auth.User, whose role may read and
	// write the keys under Auth.Prefix and nothing else.
	Auth *Auth
}

// Auth is the user of a cluster with authentication on (Options.Auth).
type Auth struct {
	// User and Password are the user's name and password; both are
	// required, and User may not be root.
	User, Password string
	// Prefix is what the keys the user may read and write (and delete)
	// start with; "" means every key.
	Prefix string
}

// Cluster is a running etcd cluster. Its methods are safe for concurrent
// use; Kill, Stop, Cont and Restart of different members may run at once.
// It stops when the test that started it ends.
type Cluster struct {
	members []*member
	timeout time.Duration
	files   TLSFiles // with Options.TLS
	acc     *access  // how this package's clients connect
}

// access is how the clients this package makes connect: with TLS, and
// as root once authentication is on. It is set by start, before any
// member is restarted, and read-only after.
type access struct {
	tls            *tls.Config
	user, password string
}

// healthKey is the key that readiness checks read: a linearizable Get of
// it succeeds only through a member that has a leader and a quorum.
const healthKey = "etcdtest/health"

// Start starts a cluster, waits until every member serves a linearizable
// read, and registers its end with tb.Cleanup: every member is killed and
// waited for. It fails the test if the server cannot be found, built or
// started. A port taken by someone else between the choice of free ports
// and the server's listen is retried with new ports, a few times.
func Start(tb testing.TB, opts *Options) *Cluster {
	tb.Helper()
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Members < 0 {
		tb.Fatalf("etcdtest: Options.Members is %d, want 0 (for 3) or more", o.Members)
	}
	if o.Members == 0 {
		o.Members = 3
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if a := o.Auth; a != nil && (a.User == "" || a.Password == "" || a.User == rootUser) {
		tb.Fatalf("etcdtest: Options.Auth needs a User other than %s, and a Password", rootUser)
	}
	bin, err := serverBinary(tb.Logf)
	if err != nil {
		tb.Fatalf("etcdtest: %v", err)
	}
	const attempts = 4
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(2 * o.Members)
		if err != nil {
			tb.Fatal(err)
		}
		c, err := start(tb, bin, &o, ports)
		if err == nil {
			return c
		}
		if errors.Is(err, errPortTaken) && attempt < attempts {
			tb.Logf("etcdtest: attempt %d: %v; trying other ports", attempt, err)
			continue
		}
		tb.Fatal(err)
	}
}

// start makes one attempt at starting the cluster, member i on client port
// ports[2*i] and peer port ports[2*i+1].
func start(tb testing.TB, bin string, o *Options, ports []int) (*Cluster, error) {
	token := make([]byte, 8)
	rand.Read(token)
	c := &Cluster{timeout: o.Timeout, acc: &access{}}
	scheme, flags := "http", o.Flags
	if o.TLS {
		var err error
		if c.files, err = makePKI(tb.TempDir()); err != nil {
			return nil, fmt.Errorf("etcdtest: making certificates: %w", err)
		}
		if c.acc.tls, err = c.files.ClientConfig(true); err != nil {
			return nil, err
		}
		scheme = "https"
		flags = append([]string{"--cert-file=" + c.files.ServerCert, "--key-file=" + c.files.ServerKey,
			"--trusted-ca-file=" + c.files.CA, "--client-cert-auth"}, flags...)
	}
	var initial []string
	for i := range o.Members {
		m := &member{
			index:     i,
			name:      fmt.Sprintf("m%d", i),
			dir:       tb.TempDir(),
			clientURL: fmt.Sprintf("%s://127.0.0.1:%d", scheme, ports[2*i]),
			peerURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]),
			bin:       bin,
			acc:       c.acc,
		}
		c.members = append(c.members, m)
		initial = append(initial, m.name+"="+m.peerURL)
	}
	for _, m := range c.members {
		m.args = m.commandLine(strings.Join(initial, ","), "etcdtest-"+hex.EncodeToString(token), flags)
	}
	procs := make([]*proc, len(c.members))
	for i, m := range c.members {
		var err error
		if procs[i], err = m.launch(); err != nil {
			c.stopAll()
			return nil, err
		}
	}
	// A member waits for the others to be ready; if one of them has
	// exited, it never will be.
	anyExited := func() error {
		for i, m := range c.members {
			if err := m.exitedError(procs[i]); err != nil {
				return err
			}
		}
		return nil
	}
	deadline := time.Now().Add(o.Timeout) // real time: a deadline for a real etcd process
	for i, m := range c.members {
		if err := m.waitReady(procs[i], deadline, anyExited); err != nil {
			c.stopAll()
			return nil, err
		}
	}
	if o.Auth != nil {
		if err := c.enableAuth(*o.Auth, deadline); err != nil {
			c.stopAll()
			return nil, err
		}
	}
	tb.Cleanup(func() {
		c.stopAll()
		if tb.Failed() {
			for _, m := range c.members {
				tb.Logf("etcdtest: member %d (%s), last lines of its log:\n%s", m.index, m.clientURL, m.logTail())
			}
		}
	})
	return c, nil
}

// stopAll kills every member and waits for it.
func (c *Cluster) stopAll() {
	for _, m := range c.members {
		m.kill()
	}
}

// freePorts returns n distinct ports that were free on 127.0.0.1 a moment
// ago: listening on port 0 asks the kernel for one. All n listen at once,
// so that the kernel does not hand out one twice.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("etcdtest: finding a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Len returns the number of members.
func (c *Cluster) Len() int { return len(c.members) }

// Endpoint returns member i's client URL, http://127.0.0.1:PORT (https://
// with Options.TLS). It stays the same across restarts.
func (c *Cluster) Endpoint(i int) string { return c.members[i].clientURL }

// Endpoints returns every member's client URL, in member order.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.members))
	for i, m := range c.members {
		eps[i] = m.clientURL
	}
	return eps
}

// TLSFiles returns the PEM files of a cluster started with Options.TLS;
// the zero TLSFiles without.
func (c *Cluster) TLSFiles() TLSFiles { return c.files }

// Client returns a client of every member, closed when tb ends: with
// TLS (and the client certificate) under Options.TLS, as root under
// Options.Auth. A request
// in flight to a stopped member waits until its context ends (the
// connection is still open): fault tests that pause a member write
// through MemberClient of another one.
func (c *Cluster) Client(tb testing.TB) *clientv3.Client {
	tb.Helper()
	return newClient(tb, c.Endpoints(), c.acc)
}

// MemberClient returns a client of member i alone, closed when tb ends.
func (c *Cluster) MemberClient(tb testing.TB, i int) *clientv3.Client {
	tb.Helper()
	return newClient(tb, []string{c.members[i].clientURL}, c.acc)
}

func newClient(tb testing.TB, endpoints []string, acc *access) *clientv3.Client {
	tb.Helper()
	w := &tbWriter{tb: tb}
	lg := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), w, zapcore.WarnLevel))
	cli, err := clientv3.New(clientConfig(endpoints, lg, acc))
	if err != nil {
		tb.Fatalf("etcdtest: connecting to %v: %v", endpoints, err)
	}
	tb.Cleanup(func() {
		cli.Close()
		w.close()
	})
	return cli
}

// tbWriter writes a client's warnings to the test's log until the client
// is closed, and drops them after: a call still in flight when its client
// closes goes on for a while (the client retries codes.Canceled unless the
// call's own context has ended: up to 100 attempts, about a second), it
// logs each attempt, and logging to a test that has ended panics.
type tbWriter struct {
	tb testing.TB
	mu struct {
		sync.Mutex
		closed bool
	}
}

func (w *tbWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.mu.closed {
		w.tb.Logf("etcd client: %s", bytes.TrimRight(p, "\n"))
	}
	return len(p), nil
}

func (w *tbWriter) Sync() error { return nil }

func (w *tbWriter) close() {
	w.mu.Lock()
	w.mu.closed = true
	w.mu.Unlock()
}

// clientConfig is the configuration of every client this package makes,
// with acc's TLS and credentials. gRPC's reconnection backoff is
// shortened from its default (growing to two minutes) to at most a
// second, so that a client of a restarted member finds it again at once.
func clientConfig(endpoints []string, lg *zap.Logger, acc *access) clientv3.Config {
	return clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      lg,
		TLS:         acc.tls,
		Username:    acc.user,
		Password:    acc.password,
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{
				BaseDelay:  50 * time.Millisecond,
				Multiplier: 1.6,
				Jitter:     0.2,
				MaxDelay:   time.Second,
			},
			MinConnectTimeout: 5 * time.Second,
		})},
	}
}

// Leader returns the index of the member that the running members say
// leads the cluster: the first answer of a member that knows a leader.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	var errs []error
	for _, m := range c.members {
		if !m.running() {
			continue
		}
		id, err := m.leaderID(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("member %d: %w", m.index, err))
			continue
		}
		for _, l := range c.members {
			if l.memberID() == id {
				return l.index, nil
			}
		}
		errs = append(errs, fmt.Errorf("member %d: the leader %x is none of the members", m.index, id))
	}
	if len(errs) == 0 {
		return -1, errors.New("etcdtest: no member is running")
	}
	return -1, fmt.Errorf("etcdtest: no member knows the leader: %w", errors.Join(errs...))
}

// Kill kills member i with SIGKILL, as a crash, and waits for it to exit.
// Killing a member that is not running does nothing.
func (c *Cluster) Kill(i int) { c.members[i].kill() }

// Stop pauses member i with SIGSTOP: it keeps its connections open and
// answers nothing until Cont.
func (c *Cluster) Stop(i int) error { return c.members[i].signal(sigStop) }

// Cont resumes member i, paused by Stop, with SIGCONT.
func (c *Cluster) Cont(i int) error { return c.members[i].signal(sigCont) }

// Restart kills member i if it is running (SIGKILL: a crash), starts it
// again on the same data dir and ports, and waits until it serves a
// linearizable read, which it can once it has rejoined a quorum. To bring
// back a cluster that lost its quorum, restart enough members at once,
// from several goroutines.
func (c *Cluster) Restart(i int) error {
	return c.members[i].restart(time.Now().Add(c.timeout)) // real time: a deadline for a real etcd process
}
