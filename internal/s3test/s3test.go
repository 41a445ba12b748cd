// Package s3test runs a real S3 server for tests: Versity's S3 gateway
// (versitygw, Apache-2.0), on 127.0.0.1 with a temporary root, so that the
// object-store paths are exercised over HTTP and not only through file://
// and mem://. `make test` installs the gateway (go install
// github.com/versity/versitygw/cmd/versitygw@v1.8.0).
package s3test

import (
	"context"
	"fmt"
	"go/build"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/s3blob" // the s3:// scheme
)

// Version is the versitygw release the tests use.
const Version = "v1.8.0"

// The root credentials of every test server. The AWS SDK reads them from
// the environment, which Start sets.
const (
	AccessKey = "disklesstest"
	SecretKey = "disklesstestsecret"
)

// Server is a running versitygw with a posix backend in a temporary
// folder; every sub-folder of it is a bucket.
type Server struct {
	// Endpoint is the server's address, http://127.0.0.1:PORT.
	Endpoint string
	root     string
	cmd      *exec.Cmd
}

var envOnce sync.Once

// binary finds versitygw on the PATH or in GOPATH/bin.
func binary() (string, error) {
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		gopath = build.Default.GOPATH
	}
	p := filepath.Join(gopath, "bin", "versitygw")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("versitygw is not installed: run `make test`, or go install github.com/versity/versitygw/cmd/versitygw@%s", Version)
	}
	return p, nil
}

// Start starts a server for the test and stops it when the test ends. It
// fails the test if the server cannot start.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin, err := binary()
	if err != nil {
		tb.Fatal(err)
	}
	envOnce.Do(func() {
		os.Setenv("AWS_ACCESS_KEY_ID", AccessKey)
		os.Setenv("AWS_SECRET_ACCESS_KEY", SecretKey)
		os.Setenv("AWS_REGION", "us-east-1")
	})
	root := tb.TempDir()
	for attempt := 0; ; attempt++ {
		port, err := freePort()
		if err != nil {
			tb.Fatal(err)
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		cmd := exec.Command(bin, "--port", addr, "--quiet", "posix", root)
		cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+AccessKey, "ROOT_SECRET_KEY="+SecretKey)
		if err := cmd.Start(); err != nil {
			tb.Fatalf("starting versitygw: %v", err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		if err := waitListening(addr, exited); err != nil {
			cmd.Process.Kill()
			if attempt < 3 {
				continue // the port was taken meanwhile
			}
			tb.Fatalf("versitygw did not start: %v", err)
		}
		s := &Server{Endpoint: "http://" + addr, root: root, cmd: cmd}
		tb.Cleanup(func() {
			cmd.Process.Kill()
			<-exited
		})
		return s
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitListening waits until addr accepts connections, the process exits,
// or 30 seconds pass.
func waitListening(addr string, exited <-chan error) error {
	// real time: a deadline for a real S3 server, in this loop too
	deadline := time.Now().Add(30 * time.Second)
	for delay := time.Millisecond; time.Now().Before(deadline); delay = min(2*delay, 100*time.Millisecond) {
		select {
		case err := <-exited:
			return fmt.Errorf("it exited: %v", err)
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(delay) // polling a port: there is nothing to wait on
	}
	return fmt.Errorf("nothing listens on %s after 30s", addr)
}

// URL returns the gocloud URL of bucket name on the server.
func (s *Server) URL(name string) string {
	return fmt.Sprintf("s3://%s?endpoint=%s&use_path_style=true&region=us-east-1&disable_https=true", name, s.Endpoint)
}

// Bucket creates bucket name (a folder of the server's root) and opens it;
// the test closes it when it ends.
func (s *Server) Bucket(tb testing.TB, name string) *blob.Bucket {
	tb.Helper()
	if err := os.MkdirAll(filepath.Join(s.root, name), 0o755); err != nil {
		tb.Fatal(err)
	}
	b, err := blob.OpenBucket(context.Background(), s.URL(name))
	if err != nil {
		tb.Fatalf("opening %s: %v", s.URL(name), err)
	}
	tb.Cleanup(func() { b.Close() })
	return b
}
