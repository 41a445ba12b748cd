package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/diskless-go/diskless/internal/kafkatest"
)

// brokerBin is the broker binary that TestMain builds.
var brokerBin string

// TestMain builds the broker once (with -race when the tests run with
// it), runs the tests, which start it as child processes, and checks that
// nothing leaked once every process and client is gone.
func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "kafka-broker-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	brokerBin = filepath.Join(dir, "kafka-broker")
	args := []string{"build", "-o", brokerBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	build := exec.Command(goBin, append(args, ".")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the broker:", err)
		return 1
	}
	code := m.Run()
	if code == 0 {
		// sarama's metrics library starts one process-wide ticker on
		// first use, and never stops it.
		if err := goleak.Find(goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick")); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}

// brokerProc is a broker running as a child process.
type brokerProc struct {
	t          testing.TB
	addr       string
	data       string
	bucket     string
	extra      []string
	cmd        *exec.Cmd
	log        string        // its stderr
	exited     chan struct{} // closed when it has exited
	stdoutDone chan struct{}
	waitErr    error
}

// brokerDirs returns a fresh data folder and a file:// bucket for a
// broker.
func brokerDirs(t testing.TB) (data, bucket string) {
	dir := t.TempDir()
	data, b := filepath.Join(dir, "data"), filepath.Join(dir, "bucket")
	require.NoError(t, os.MkdirAll(b, 0o755))
	return data, "file://" + b
}

// startBroker starts a broker on a fresh data folder and bucket, on a
// port of its choosing, and waits until it listens.
func startBroker(t testing.TB, extra ...string) *brokerProc {
	data, bucket := brokerDirs(t)
	return startBrokerAt(t, "127.0.0.1:0", data, bucket, extra...)
}

// restart starts the broker again on the same address, data folder and
// bucket; the old process must have exited.
func (p *brokerProc) restart() *brokerProc {
	return startBrokerAt(p.t, p.addr, p.data, p.bucket, p.extra...)
}

func startBrokerAt(t testing.TB, addr, data, bucket string, extra ...string) *brokerProc {
	t.Helper()
	return startBrokerWrapped(t, nil, addr, data, bucket, extra...)
}

// startBrokerWrapped starts the broker as startBrokerAt does, its command
// line after wrap (a shell that lowers a limit first, say).
func startBrokerWrapped(t testing.TB, wrap []string, addr, data, bucket string, extra ...string) *brokerProc {
	t.Helper()
	p := &brokerProc{t: t, data: data, bucket: bucket, extra: extra, exited: make(chan struct{}), stdoutDone: make(chan struct{})}
	logs := filepath.Join(filepath.Dir(data), "logs")
	require.NoError(t, os.MkdirAll(logs, 0o755))
	stderr, err := os.CreateTemp(logs, "broker-*.log")
	require.NoError(t, err)
	defer stderr.Close()
	p.log = stderr.Name()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	args := append([]string{"-addr", addr, "-data", data, "-bucket", bucket, "-linger", "5ms", "-log-level", "debug"}, extra...)
	args = append(append(wrap[:len(wrap):len(wrap)], brokerBin), args...)
	p.cmd = exec.Command(args[0], args[1:]...)
	p.cmd.Stdout, p.cmd.Stderr = w, stderr
	// Temporary files (a file:// bucket writes each object to one, then
	// renames it) stay in the test's folder, also when the broker is
	// killed mid-write.
	tmp := filepath.Join(filepath.Dir(data), "tmp")
	require.NoError(t, os.MkdirAll(tmp, 0o755))
	// The race detector waits a second at exit for late reports; a
	// twentieth is enough here, and saves a second a stop.
	p.cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=50"))
	err = p.cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		require.NoError(t, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	lines := make(chan string, 1)
	go func() { // the first line, then drain until the process exits
		defer close(p.stdoutDone)
		defer r.Close()
		sc := bufio.NewScanner(r)
		first := true
		for sc.Scan() {
			if first {
				lines <- sc.Text()
				first = false
			}
		}
		if first {
			close(lines)
		}
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited: // killed or stopped by the test
		default:
			p.stop() // a graceful shutdown, checked
		}
		b, err := os.ReadFile(p.log)
		if err != nil {
			t.Error(err)
			return
		}
		if bytes.Contains(b, []byte("WARNING: DATA RACE")) {
			t.Errorf("the broker raced: see %s", p.log)
		}
		if t.Failed() {
			t.Logf("broker log %s (last 8 KiB):\n%s", p.log, tail(string(b), 8<<10))
			// DISKLESS_KEEP_LOGS names a directory to keep a failed
			// test's whole broker logs in (the temporary one goes).
			if dir := os.Getenv("DISKLESS_KEEP_LOGS"); dir != "" {
				keep := filepath.Join(dir, t.Name(), filepath.Base(filepath.Dir(filepath.Dir(p.log)))+"-"+filepath.Base(p.log))
				if err := os.MkdirAll(filepath.Dir(keep), 0o755); err == nil {
					_ = os.WriteFile(keep, b, 0o644)
				}
			}
		}
	})
	select {
	case line, ok := <-lines:
		require.True(t, ok, "the broker exited before it listened; see %s", p.log)
		a, ok := strings.CutPrefix(line, "listening on ")
		require.True(t, ok, "first line %q", line)
		p.addr = a
	case <-time.After(60 * time.Second):
		t.Fatalf("the broker did not listen within 60 s; see %s", p.log)
	}
	return p
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// stop shuts the broker down with SIGTERM and checks that it exits
// cleanly.
func (p *brokerProc) stop() {
	p.t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(60 * time.Second):
		p.t.Errorf("the broker did not stop within 60 s of SIGTERM")
		p.kill()
	}
	<-p.stdoutDone
	if p.waitErr != nil {
		p.t.Errorf("the broker's exit: %v; see %s", p.waitErr, p.log)
	}
}

// kill kills the broker with SIGKILL, if it still runs, and waits for it.
func (p *brokerProc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	<-p.stdoutDone
}

// freeze stops the broker with SIGSTOP (it resumes at thaw, or at
// cleanup).
func (p *brokerProc) freeze() {
	p.t.Helper()
	require.NoError(p.t, p.cmd.Process.Signal(syscall.SIGSTOP))
	p.t.Cleanup(func() { _ = p.cmd.Process.Signal(syscall.SIGCONT) })
}

// thaw resumes a broker frozen with SIGSTOP.
func (p *brokerProc) thaw() {
	p.t.Helper()
	require.NoError(p.t, p.cmd.Process.Signal(syscall.SIGCONT))
}

// client returns a franz-go client of the broker, closed at cleanup.
func (p *brokerProc) client(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return kafkatest.Client(t, p.addr, opts...)
}
