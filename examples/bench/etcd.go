package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/coordinator/metalog/etcdlog"
)

// etcdServer is the etcd of -metadata etcd: the diskless-etcd binary
// started on loopback with its data in a temporary folder on the local
// disk, or the cluster -etcd-endpoints names.
type etcdServer struct {
	cmd    *exec.Cmd
	exited chan error
	dir    string
	client *clientv3.Client
}

// startEtcd starts diskless-etcd (from the PATH or GOPATH/bin), or
// connects to endpoints if any, and waits until it answers.
func startEtcd(ctx context.Context, endpoints []string) (*etcdServer, error) {
	s := &etcdServer{}
	if len(endpoints) == 0 {
		bin, err := exec.LookPath("diskless-etcd")
		if err != nil {
			home, _ := os.UserHomeDir()
			bin = filepath.Join(home, "go", "bin", "diskless-etcd")
			if _, serr := os.Stat(bin); serr != nil {
				return nil, fmt.Errorf("-metadata etcd: diskless-etcd is neither on the PATH nor in ~/go/bin (make deps installs it), and no -etcd-endpoints: %w", err)
			}
		}
		if s.dir, err = os.MkdirTemp("", "diskless-bench-etcd-"); err != nil {
			return nil, err
		}
		ports, err := freePorts(2)
		if err != nil {
			s.close()
			return nil, err
		}
		client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
		peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
		s.cmd = exec.Command(bin, "--name", "bench", "--data-dir", filepath.Join(s.dir, "data"),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", "bench="+peer, "--log-level", "error", "--log-outputs", filepath.Join(s.dir, "etcd.log"))
		if err := s.cmd.Start(); err != nil {
			s.close()
			return nil, fmt.Errorf("starting %s: %w", bin, err)
		}
		s.exited = make(chan error, 1)
		go func() { s.exited <- s.cmd.Wait() }()
		endpoints = []string{client}
	}
	var err error
	s.client, err = clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		s.close()
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := s.client.Get(sctx, "diskless-bench-ping")
		cancel()
		if err == nil {
			return s, nil
		}
		if s.exited != nil {
			select {
			case werr := <-s.exited:
				s.exited = nil
				s.close()
				return nil, fmt.Errorf("diskless-etcd exited: %v (log in %s)", werr, s.dir)
			default:
			}
		}
		if time.Now().After(deadline) {
			s.close()
			return nil, fmt.Errorf("etcd at %s does not answer: %w", strings.Join(endpoints, ","), err)
		}
		time.Sleep(50 * time.Millisecond) // polling a server that is starting: nothing to wait on
	}
}

// openLog opens shard's log under its own prefix, fenced by an election
// this process wins (so that appends pipeline), as a coordinator's leader
// would hold one.
func (s *etcdServer) openLog(ctx context.Context, run string, shard int) (metalog.Log, error) {
	sess, err := concurrency.NewSession(s.client, concurrency.WithTTL(10))
	if err != nil {
		return nil, err
	}
	prefix := fmt.Sprintf("/diskless-bench/%s/%d/", run, shard)
	e := concurrency.NewElection(sess, prefix+"election")
	if err := e.Campaign(ctx, "bench"); err != nil {
		sess.Close()
		return nil, err
	}
	l, err := etcdlog.Open(ctx, s.client, prefix+"log/", &etcdlog.Options{Fence: &etcdlog.Fence{Key: e.Key(), Revision: e.Rev()}})
	if err != nil {
		sess.Close()
		return nil, err
	}
	return &sessionLog{Log: l, sess: sess}, nil
}

// sessionLog closes the election's session with the log.
type sessionLog struct {
	metalog.Log
	sess *concurrency.Session
}

func (l *sessionLog) Close() error { return errors.Join(l.Log.Close(), l.sess.Close()) }

func (s *etcdServer) close() error {
	var err error
	if s.client != nil {
		err = s.client.Close()
	}
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Kill()
		if s.exited != nil {
			<-s.exited
		}
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
	return err
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
