package kafkaserver

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/internal/kafkatest"
)

// TestMain checks that nothing leaked once every server and client is
// gone.
func TestMain(m *testing.M) {
	// sarama's metrics library starts one process-wide ticker on first
	// use, and never stops it.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"))
}

// testBroker is a diskless Broker and a Server over it, in this process,
// on a data folder and a file:// bucket of the test's (so that restart
// finds what it stored), serving on 127.0.0.1. The Broker lingers 5 ms.
type testBroker struct {
	t            testing.TB
	cfg          *Config
	addr         string
	data, bucket string
	b            *diskless.Broker
	srv          *Server
	served       chan error // Serve's return
	stopped      bool
}

// startBroker starts a Broker and a Server configured by cfg (nil: the
// defaults) on a fresh data folder and bucket, on a free port.
func startBroker(t testing.TB, cfg *Config) *testBroker {
	t.Helper()
	dir := t.TempDir()
	data, bucket := filepath.Join(dir, "data"), filepath.Join(dir, "bucket")
	require.NoError(t, os.MkdirAll(bucket, 0o755))
	return startBrokerAt(t, cfg, "127.0.0.1:0", data, "file://"+bucket)
}

func startBrokerAt(t testing.TB, cfg *Config, addr, data, bucket string) *testBroker {
	t.Helper()
	return startBrokerSetup(t, cfg, addr, data, bucket, nil)
}

// startBrokerSetup is startBrokerAt, with setup (if not nil) called on
// the Server before it serves: for the knobs Config does not have.
func startBrokerSetup(t testing.TB, cfg *Config, addr, data, bucket string, setup func(*Server)) *testBroker {
	t.Helper()
	p := &testBroker{t: t, cfg: cfg, data: data, bucket: bucket, served: make(chan error, 1)}
	var err error
	p.b, err = diskless.Open(t.Context(), &diskless.Config{BucketURL: bucket, DataDir: data, Linger: 5 * time.Millisecond})
	require.NoError(t, err)
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.LogDir == "" {
		c.LogDir = bucket // as kafka-broker names it
	}
	p.srv, err = New(t.Context(), p.b, &c)
	if err != nil {
		require.NoError(t, p.b.Close())
		require.NoError(t, err)
	}
	if setup != nil {
		setup(p.srv)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		require.NoError(t, p.srv.Close())
		require.NoError(t, p.b.Close())
		require.NoError(t, err)
	}
	p.addr = ln.Addr().String()
	go func() { p.served <- p.srv.Serve(ln) }()
	t.Cleanup(p.stop)
	return p
}

// stop closes the Server, then the Broker (which commits what it holds),
// and fails the test if either reports an error. It is safe to call
// twice.
func (p *testBroker) stop() {
	p.t.Helper()
	if p.stopped {
		return
	}
	p.stopped = true
	if err := p.srv.Close(); err != nil {
		p.t.Errorf("closing the server: %v", err)
	}
	if err := <-p.served; err != nil {
		p.t.Errorf("serving: %v", err)
	}
	if err := p.b.Close(); err != nil {
		p.t.Errorf("closing the broker: %v", err)
	}
}

// restart starts the Broker and the Server again on the same address,
// data folder, bucket and Config; p must be stopped.
func (p *testBroker) restart() *testBroker {
	p.t.Helper()
	require.True(p.t, p.stopped, "restart of a running broker")
	return startBrokerAt(p.t, p.cfg, p.addr, p.data, p.bucket)
}

// client returns a franz-go client of the server, closed at cleanup.
func (p *testBroker) client(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return kafkatest.Client(t, p.addr, opts...)
}
