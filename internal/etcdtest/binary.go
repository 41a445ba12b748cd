package etcdtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// EnvBinary is the environment variable that names the etcd server binary
// to run instead of the one this package finds or builds. It is used as it
// is, whatever version it reports.
const EnvBinary = "DISKLESS_ETCD"

// binaryName is the name of the server that `make deps` builds into
// $GOPATH/bin, and that this package builds there when it is missing.
const binaryName = "diskless-etcd"

var server struct {
	once sync.Once
	path string
	err  error
}

// serverBinary returns the path of the etcd server, found or built once
// per test process; logf tells what it does.
func serverBinary(logf func(format string, args ...any)) (string, error) {
	server.once.Do(func() { server.path, server.err = findServer(logf) })
	return server.path, server.err
}

// findServer looks for the server in the order the package doc gives,
// and builds it when none of the right version is found.
func findServer(logf func(format string, args ...any)) (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		path, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("$%s=%s: %w", EnvBinary, p, err)
		}
		if v, err := serverVersion(path); err != nil || v != Version {
			logf("etcdtest: $%s=%s reports version %q (%v), not %s; using it anyway", EnvBinary, p, v, err, Version)
		}
		return path, nil
	}
	dst := filepath.Join(gopath(), "bin", binaryName)
	v, err := serverVersion(dst)
	if err == nil && v == Version {
		return dst, nil
	}
	if p, err := exec.LookPath(binaryName); err == nil && p != dst {
		if v, err := serverVersion(p); err == nil && v == Version {
			return p, nil
		}
	}
	if err == nil {
		logf("etcdtest: %s is etcd %s, not %s: rebuilding it", dst, v, Version)
	}
	return buildServer(dst, logf)
}

// gopath returns the first element of `go env GOPATH`, which also reads
// the go command's own configuration file, or else the default GOPATH.
func gopath() string {
	out, err := exec.Command("go", "env", "GOPATH").Output()
	list := strings.TrimSpace(string(out))
	if err != nil || list == "" {
		list = build.Default.GOPATH
	}
	return filepath.SplitList(list)[0]
}

// serverVersion runs `path --version` and returns the etcd version it
// reports.
func serverVersion(path string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(string(out)) {
		if v, ok := strings.CutPrefix(line, "etcd Version:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("%s --version says no version: %q", path, out)
}

// buildServer builds tools/etcd into dst. A lock file makes the test
// processes of one machine (go test ./... runs packages in parallel) build
// it once: the others wait and find it built.
func buildServer(dst string, logf func(format string, args ...any)) (string, error) {
	src, err := toolsDir()
	if err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "diskless-etcd-build.lock"), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("locking %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if v, err := serverVersion(dst); err == nil && v == Version {
		return dst, nil // another process built it while this one waited
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", err
	}
	logf("etcdtest: building the etcd %s server from %s into %s (`make deps` does this; about two minutes the first time)", Version, src, dst)
	start := time.Now() // real time: reports a real build
	tmp := fmt.Sprintf("%s.tmp%d", dst, os.Getpid())
	cmd := exec.Command("go", "build", "-buildvcs=false", "-o", tmp, ".")
	cmd.Dir = src
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("building the etcd server in %s: %v\n%s", src, err, out.Bytes())
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return "", err
	}
	logf("etcdtest: built %s in %v", dst, time.Since(start).Round(time.Second)) // real time: reports a real build
	if v, err := serverVersion(dst); err != nil || v != Version {
		return "", fmt.Errorf("%s was built from %s but reports version %q (%v), not %s: tools/etcd/go.mod and etcdtest.Version disagree", dst, src, v, err, Version)
	}
	return dst, nil
}

// toolsDir finds tools/etcd in the repository that holds the working
// directory (a test runs in its package's folder).
func toolsDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		src := filepath.Join(dir, "tools", "etcd")
		if b, err := os.ReadFile(filepath.Join(src, "go.mod")); err == nil &&
			bytes.HasPrefix(b, []byte("module github.com/diskless-go/diskless/tools/etcd\n")) {
			return src, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("the etcd server is not installed (run `make deps`, or set $" + EnvBinary +
				") and tools/etcd, to build it from, is in no folder above the working directory")
		}
		dir = parent
	}
}
