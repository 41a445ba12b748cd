package diskless

import (
	"cmp"
	"encoding/base64"
	"encoding/binary"
	"os/exec"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/internal/s3test"
	"github.com/diskless-go/diskless/internal/upload"
	"github.com/diskless-go/diskless/kbatch"
	_ "github.com/diskless-go/diskless/s3fast" // the tests over S3 upload as a program importing it does
)

// TestLightImports: what only one backend needs (the AWS SDK of the S3
// fast path, the etcd client) stays out of the packages a user imports
// alone, and the libraries only tests use stay out of every package's
// non-test code. It runs `go list -deps` (without -test, so test files are
// left out).
func TestLightImports(t *testing.T) {
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on the PATH")
	}
	deps := func(t *testing.T, pkgs ...string) []string {
		t.Helper()
		out, err := exec.Command(gotool, append([]string{"list", "-deps"}, pkgs...)...).CombinedOutput()
		require.NoError(t, err, "go list -deps %v: %s", pkgs, out)
		return strings.Fields(string(out))
	}
	const mod = "github.com/diskless-go/diskless"
	for _, pkg := range []string{mod, mod + "/kafkaserver", mod + "/disklesstest", mod + "/coordinator", mod + "/coordinator/metalog", mod + "/cluster", mod + "/replica"} {
		t.Run(cmp.Or(strings.TrimPrefix(pkg, mod+"/"), "root"), func(t *testing.T) {
			var heavy []string
			for _, dep := range deps(t, pkg) {
				if strings.Contains(dep, "aws-sdk-go") || strings.Contains(dep, "go.etcd.io") {
					heavy = append(heavy, dep)
				}
			}
			require.Empty(t, heavy, "%s links a backend's SDK: it belongs in a package the user imports for that backend (s3fast, cluster/etcdcluster, coordinator/metalog/etcdlog)", pkg)
		})
	}
	t.Run("coordinator/state", func(t *testing.T) {
		// The coordinator's pure core: no SQLite, no bucket, no logger,
		// and no network of its own. google/uuid (topic IDs, in the
		// public API since the start) links package net for its node
		// IDs: that is the one way net may come in.
		const state = mod + "/coordinator/state"
		for _, dep := range deps(t, state) {
			for _, bad := range []string{"github.com/mattn/go-sqlite3", "gocloud.dev", "go.uber.org/zap"} {
				require.False(t, strings.HasPrefix(dep, bad), "coordinator/state links %s", dep)
			}
			// database/sql/driver comes with google/uuid (its Scan and
			// Value): the database itself may not.
			require.NotContains(t, []string{"database/sql", "os/exec", mod + "/coordinator/store", mod + "/wal"}, dep, "coordinator/state links %s", dep)
		}
		// Which packages import net directly: only google/uuid's own.
		uuidDeps := map[string]bool{}
		for _, dep := range deps(t, "github.com/google/uuid") {
			uuidDeps[dep] = true
		}
		out, err := exec.Command(gotool, "list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", state).Output()
		require.NoError(t, err)
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Fields(line)
			if uuidDeps[f[0]] {
				continue
			}
			for _, imp := range f[1:] {
				require.False(t, imp == "net" || strings.HasPrefix(imp, "net/"), "%s, linked by coordinator/state, imports %s", f[0], imp)
			}
		}
	})
	t.Run("test-only", func(t *testing.T) {
		// The packages for tests (suites such as metalogtest, helpers
		// such as internal/s3test: named ...test) may use them.
		var pkgs []string
		out, err := exec.Command(gotool, "list", "./...").Output()
		require.NoError(t, err)
		for _, pkg := range strings.Fields(string(out)) {
			if !strings.HasSuffix(pkg, "test") {
				pkgs = append(pkgs, pkg)
			}
		}
		var linked []string
		for _, dep := range deps(t, pkgs...) {
			for _, lib := range []string{"github.com/stretchr/testify", "pgregory.net/rapid", "github.com/IBM/sarama", "github.com/segmentio/kafka-go", "go.uber.org/goleak"} {
				if strings.HasPrefix(dep, lib) {
					linked = append(linked, dep)
				}
			}
		}
		require.Empty(t, linked, "linked into packages that are not for tests: only tests may import them")
	})
}

// TestS3FastPath: over an S3 bucket, with package s3fast imported (as
// this test binary does), the broker's WAL objects go up with the CRC32C
// the broker computed, which the store checked and kept; without the
// import they would carry the SDK's CRC32 (upload's TestPutS3Plain).
func TestS3FastPath(t *testing.T) {
	bucket := s3test.Start(t).Bucket(t, "fast")
	var client *s3.Client
	require.True(t, bucket.As(&client))
	b := openTest(t, &Config{Bucket: bucket})
	ctx := t.Context()
	_, err := b.CreateTopic(ctx, "t", TopicConfig{Partitions: 1})
	require.NoError(t, err)
	r := produceOne(t, b, "t", 0, batch(t, kbatch.CodecNone, 0, 10, -1, 0))
	require.NoError(t, r.Err)
	objects := 0
	for _, key := range keys(t, bucket) {
		if !strings.HasPrefix(key, "wal/") {
			continue
		}
		data, err := bucket.ReadAll(ctx, key)
		require.NoError(t, err)
		head, err := client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("fast"), Key: aws.String(key), ChecksumMode: types.ChecksumModeEnabled})
		require.NoError(t, err)
		require.Equal(t, b64CRC32C(upload.CRC32C(data)), aws.ToString(head.ChecksumCRC32C), "the store checked and kept the broker's CRC32C of %s", key)
		objects++
	}
	require.Positive(t, objects, "a WAL object was uploaded")
}

func b64CRC32C(crc uint32) string {
	var s [4]byte
	binary.BigEndian.PutUint32(s[:], crc)
	return base64.StdEncoding.EncodeToString(s[:])
}
