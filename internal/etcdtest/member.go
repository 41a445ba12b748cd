package etcdtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

const (
	sigStop = syscall.SIGSTOP
	sigCont = syscall.SIGCONT
)

// errPortTaken says that a member could not listen on its port: someone
// took it between freePorts and the server's listen.
var errPortTaken = errors.New("etcdtest: a port was taken")

// member is one etcd process of a cluster: its fixed identity (name, data
// dir, ports, command line) and the process running now, if any.
type member struct {
	index     int
	name      string
	dir       string // the member's temporary dir: data/ and etcd.log
	clientURL string
	peerURL   string
	bin       string
	args      []string
	acc       *access // the cluster's: how to connect

	mu struct {
		sync.Mutex
		p  *proc  // the process running (or paused) now; nil when none
		id uint64 // etcd's member ID, once a read has answered
	}
}

// proc is one run of a member's server.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has exited and been waited for
	err    error         // what Wait returned; read after exited is closed
}

// commandLine returns the member's flags: everything on 127.0.0.1, the
// cluster's initial members, its token (which keeps members of another
// cluster that got the same ports out), and then extra.
func (m *member) commandLine(initialCluster, token string, extra []string) []string {
	return append([]string{
		"--name=" + m.name,
		"--data-dir=" + m.dataDir(),
		"--listen-client-urls=" + m.clientURL,
		"--advertise-client-urls=" + m.clientURL,
		"--listen-peer-urls=" + m.peerURL,
		"--initial-advertise-peer-urls=" + m.peerURL,
		"--initial-cluster=" + initialCluster,
		"--initial-cluster-state=new",
		"--initial-cluster-token=" + token,
		"--log-outputs=stderr",
	}, extra...)
}

func (m *member) dataDir() string { return filepath.Join(m.dir, "data") }
func (m *member) logPath() string { return filepath.Join(m.dir, "etcd.log") }

// launch kills the member's process if there is one and starts a new one,
// its output appended to the member's log.
func (m *member) launch() (*proc, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.killLocked()
	log, err := os.OpenFile(m.logPath(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("etcdtest: member %d: %w", m.index, err)
	}
	defer log.Close() // the child has its own copy
	// real time: stamps a real process log
	fmt.Fprintf(log, "=== etcdtest %s: %s %s\n", time.Now().Format(time.RFC3339Nano), m.bin, strings.Join(m.args, " "))
	cmd := exec.Command(m.bin, m.args...)
	cmd.Stdout = log
	cmd.Stderr = log
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("etcdtest: member %d: starting %s: %w", m.index, m.bin, err)
	}
	p := &proc{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	m.mu.p = p
	return p, nil
}

// kill kills the member's process, if there is one, and waits for it.
func (m *member) kill() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.killLocked()
}

func (m *member) killLocked() {
	p := m.mu.p
	if p == nil {
		return
	}
	p.cmd.Process.Kill() // fails only if it has exited already
	<-p.exited
	m.mu.p = nil
}

// signal sends sig to the member's process.
func (m *member) signal(sig os.Signal) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.mu.p
	if p == nil {
		return fmt.Errorf("etcdtest: member %d is not running", m.index)
	}
	select {
	case <-p.exited:
		return fmt.Errorf("etcdtest: member %d has exited (%v)", m.index, p.err)
	default:
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("etcdtest: member %d: %v: %w", m.index, sig, err)
	}
	return nil
}

// running says whether the member has a process that has not exited (it
// may be paused).
func (m *member) running() bool {
	m.mu.Lock()
	p := m.mu.p
	m.mu.Unlock()
	if p == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

func (m *member) memberID() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.id
}

// restart launches the member and waits until it is ready.
func (m *member) restart(deadline time.Time) error {
	p, err := m.launch()
	if err != nil {
		return err
	}
	return m.waitReady(p, deadline, func() error { return m.exitedError(p) })
}

// waitReady waits until p, the member's process, serves a linearizable
// read (so it has a leader and is part of a quorum), the deadline passes,
// or failed returns an error (p has exited, or another member that p
// waits for has).
func (m *member) waitReady(p *proc, deadline time.Time, failed func() error) error {
	u, err := url.Parse(m.clientURL)
	if err != nil {
		return err
	}
	// First the port: a client of a port that refuses would wait out
	// gRPC's reconnection backoff.
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		if err := failed(); err != nil {
			return err
		}
		if c, err := net.DialTimeout("tcp", u.Host, time.Second); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) { // real time: a deadline for a real etcd process
			return m.errorf("nothing listens on %s", u.Host)
		}
		time.Sleep(delay) // polling a port: there is nothing to wait on
	}
	// With authentication on, a client authenticates as it is made,
	// which needs a leader: made again until it can.
	var cli *clientv3.Client
	defer func() {
		if cli != nil {
			cli.Close()
		}
	}()
	for {
		var resp *clientv3.GetResponse
		var err error
		if cli == nil {
			cli, err = clientv3.New(clientConfig([]string{m.clientURL}, zap.NewNop(), m.acc))
		}
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), min(time.Until(deadline), 2*time.Second)) // real time: a deadline for a real etcd process
			resp, err = cli.Get(ctx, healthKey)
			cancel()
		}
		if err == nil {
			m.mu.Lock()
			m.mu.id = resp.Header.MemberId
			m.mu.Unlock()
			return nil
		}
		if ferr := failed(); ferr != nil {
			return ferr
		}
		if time.Now().After(deadline) { // real time: a deadline for a real etcd process
			return m.errorf("no linearizable read succeeded: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // an early answer (no leader yet) must not spin
	}
}

// exitedError returns an error if p has exited, wrapping errPortTaken if
// the log says that a listen failed because its address was in use.
func (m *member) exitedError(p *proc) error {
	select {
	case <-p.exited:
	default:
		return nil
	}
	tail := m.logTail()
	msg := fmt.Sprintf("member %d (%s) exited: %v; last lines of %s:\n%s", m.index, m.clientURL, p.err, m.logPath(), tail)
	if strings.Contains(tail, "address already in use") {
		return fmt.Errorf("%w: %s", errPortTaken, msg)
	}
	return errors.New("etcdtest: " + msg)
}

func (m *member) errorf(format string, args ...any) error {
	return fmt.Errorf("etcdtest: member %d (%s): %s; last lines of %s:\n%s",
		m.index, m.clientURL, fmt.Sprintf(format, args...), m.logPath(), m.logTail())
}

// leaderID asks the member which member leads the cluster.
func (m *member) leaderID(ctx context.Context) (uint64, error) {
	cli, err := clientv3.New(clientConfig([]string{m.clientURL}, zap.NewNop(), m.acc))
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second) // a paused member answers nothing
	defer cancel()
	st, err := cli.Status(ctx, m.clientURL)
	if err != nil {
		return 0, err
	}
	if st.Leader == 0 {
		return 0, errors.New("it knows no leader")
	}
	return st.Leader, nil
}

// logTail returns the last lines of the member's log, each cut to a
// readable length.
func (m *member) logTail() string {
	const lines, width = 30, 600
	b, err := os.ReadFile(m.logPath())
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	all := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	all = all[max(0, len(all)-lines):]
	var sb strings.Builder
	for _, l := range all {
		if len(l) > width {
			l = append(l[:width:width], "..."...)
		}
		sb.WriteString("\t")
		sb.Write(l)
		sb.WriteString("\n")
	}
	return sb.String()
}
