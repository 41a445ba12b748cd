package main

import (
	"bytes"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/diskless-go/diskless/internal/kafkatest"
)

// TestAcceptErrors: a broker whose file descriptors run out keeps
// serving. It runs with RLIMIT_NOFILE lowered to 128 and no connection
// limit; connections are opened until its accept fails with "too many
// open files", then closed, and a real client is served.
func TestAcceptErrors(t *testing.T) {
	data, bucket := brokerDirs(t)
	p := startBrokerWrapped(t, []string{"/bin/sh", "-c", `ulimit -n 128 && exec "$@"`, "sh"}, "127.0.0.1:0", data, bucket, "-max-connections", "-1")
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	failed := func() bool {
		b, err := os.ReadFile(p.log)
		require.NoError(t, err)
		return bytes.Contains(b, []byte("accepting a connection failed"))
	}
	for !failed() {
		require.Less(t, len(conns), 1000, "accept never failed")
		nc, err := net.Dial("tcp", p.addr)
		require.NoError(t, err)
		conns = append(conns, nc)
		select {
		case <-p.exited:
			t.Fatalf("the broker exited: %v", p.waitErr)
		default:
		}
		if len(conns) > 128 {
			time.Sleep(10 * time.Millisecond) // let the broker reach its accept
		}
	}
	t.Logf("accept failed after %d connections", len(conns))
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	cl := p.client(t)
	kafkatest.CreateTopic(t, cl, "after", 1, nil)
	res := cl.ProduceSync(t.Context(), &kgo.Record{Topic: "after", Value: []byte("v")})
	require.NoError(t, res.FirstErr())
	select {
	case <-p.exited:
		t.Fatalf("the broker exited: %v", p.waitErr)
	default:
	}
}
