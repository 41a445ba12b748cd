package coordinator

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/diskless-go/diskless/coordinator/store"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"

	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/internal/fakeclock"
	"github.com/diskless-go/diskless/wal"
)

// testPrefix is the bucket prefix of the shards tests.
const testPrefix = "p/"

// shardsFixture is Coordinator over MemLogs, a settable clock and a bucket,
// with background workers off: tests drive them (RunLifecycle,
// CollectOrphans).
type shardsFixture struct {
	t      testing.TB
	logs   []metalog.Log
	dir    string
	clock  *fakeclock.Clock
	bucket *blob.Bucket
	opts   Options
	s      *Coordinator
}

func newShardsFixture(t testing.TB, n int, bucket *blob.Bucket, opts *Options) *shardsFixture {
	f := &shardsFixture{t: t, dir: t.TempDir(), clock: newTestClock(), bucket: bucket}
	for range n {
		f.logs = append(f.logs, newTestLog())
	}
	if opts != nil {
		f.opts = *opts
	}
	f.opts.Dir = f.dir
	f.opts.Clock = f.clock
	f.opts.Prefix = testPrefix
	if f.opts.ApplyInterval == 0 {
		f.opts.ApplyInterval = -1 // the tests read the read pool right after
	}
	if f.opts.SnapshotEvery == 0 {
		f.opts.SnapshotEvery = -1
	}
	f.opts.Bucket = bucket
	if f.opts.Lifecycle.Interval == 0 {
		f.opts.Lifecycle.Interval = -1
	}
	if f.opts.OrphanInterval == 0 {
		f.opts.OrphanInterval = -1
	}
	f.open()
	t.Cleanup(func() {
		if f.s != nil {
			f.s.Close()
		}
	})
	return f
}

func (f *shardsFixture) open() {
	f.t.Helper()
	s, err := Open(context.Background(), f.logs, &f.opts)
	require.NoError(f.t, err)
	f.s = s
}

// restart closes every shard and opens them again over the same logs and
// databases.
func (f *shardsFixture) restart() {
	f.t.Helper()
	require.NoError(f.t, f.s.Close())
	f.open()
}

// upload puts an object named at time at into the bucket and returns its
// key.
func (f *shardsFixture) upload(at time.Time, size int) string {
	f.t.Helper()
	key := wal.NewObjectKey(testPrefix, at)
	data := bytes.Repeat([]byte{0xd1}, size)
	require.NoError(f.t, f.bucket.WriteAll(context.Background(), key, data, nil))
	return key
}

// exists lists the WAL objects in the bucket.
func (f *shardsFixture) existing() map[string]bool {
	f.t.Helper()
	out := map[string]bool{}
	it := f.bucket.List(&blob.ListOptions{Prefix: testPrefix + "wal/"})
	for {
		o, err := it.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(f.t, err)
		out[o.Key] = true
	}
}

// coordsFor makes coordinates of one batch of one record per partition,
// contiguous in an object from byte 1.
func coordsFor(tps ...wal.TopicPartition) []wal.Coordinate {
	var out []wal.Coordinate
	pos := int64(1)
	for _, tp := range tps {
		c := coord(tp, pos, 1, -1, -1, -1, 1_764_500_000_000)
		out = append(out, c)
		pos += int64(c.Size)
	}
	return out
}

// objectRow reads shard c's row of an object: found, live rows, owners,
// received.
func shardObject(t testing.TB, c *leader, key string) (found bool, live int64, owners []int32, received bool) {
	t.Helper()
	var ob []byte
	err := c.store.Rdb.QueryRow("SELECT live_rows, owners, received FROM objects WHERE key = ?", key).Scan(&live, &ob, &received)
	if err != nil {
		return false, 0, nil, false
	}
	owners, err = store.DecodeInt32s(ob)
	require.NoError(t, err)
	return true, live, owners, received
}
