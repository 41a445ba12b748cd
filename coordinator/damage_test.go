package coordinator

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/diskless-go/diskless/coordinator/state"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/wal"
)

// The damaged stores (RELIABILITY.md, "Hostile clients and
// damaged stores"): a database ahead of its log, a damaged database, and
// a log with a gap or a stray object.

// damageFixture is one shard over a bucket log, whose database folder
// outlives its coordinators.
type damageFixture struct {
	t      *testing.T
	bucket *blob.Bucket
	dir    string
}

func newDamageFixture(t *testing.T) *damageFixture {
	b := memblob.OpenBucket(nil)
	t.Cleanup(func() { b.Close() })
	return &damageFixture{t: t, bucket: b, dir: t.TempDir()}
}

// open opens the shard; it returns the error of a failed open.
func (f *damageFixture) open() (*leader, error) {
	log, err := metalog.OpenBucket(context.Background(), f.bucket, "meta/0/", nil)
	require.NoError(f.t, err)
	f.t.Cleanup(func() { log.Close() })
	c, err := openLeader(context.Background(), log, &leaderOptions{Dir: f.dir, SnapshotEvery: -1})
	if err == nil {
		f.t.Cleanup(func() { c.Close() })
	}
	return c, err
}

// commits creates a topic and commits n objects to it, then closes.
func (f *damageFixture) commits(n int) wal.TopicPartition {
	c, err := f.open()
	require.NoError(f.t, err)
	tp := wal.TopicPartition{TopicID: mustCreate(f.t, c, "d", 1, TopicConfig{})}
	for i := range n {
		_, err := c.CommitFile(context.Background(), CommitFileRequest{ObjectKey: fmt.Sprintf("wal/%d", i), Size: 100, Coordinates: []wal.Coordinate{coord(tp, 1, 2, -1, -1, -1, 1)}})
		require.NoError(f.t, err)
	}
	require.NoError(f.t, c.Close())
	return tp
}

func (f *damageFixture) logKey(off int64) string { return fmt.Sprintf("meta/0/log/%020d", off) }

// TestDatabaseAheadOfLog: the newest log object is lost while the
// database has applied it. Opening refuses, naming both positions, and
// leaves the database and the log as they were (before, it served the
// entry from SQLite, then wrote another at the vacated offset).
func TestDatabaseAheadOfLog(t *testing.T) {
	ctx := t.Context()
	f := newDamageFixture(t)
	f.commits(3) // entries: epoch 0, create 1, commits 2..4
	require.NoError(t, f.bucket.Delete(ctx, f.logKey(4)))
	_, err := f.open()
	require.ErrorIs(t, err, ErrDiverged)
	require.ErrorContains(t, err, "up to entry 4, but the log ends at entry 3")
	ok, err := f.bucket.Exists(ctx, f.logKey(4))
	require.NoError(t, err)
	require.False(t, ok, "nothing was appended at the vacated offset")

	// Another writer took the vacated offset: the entry is not the one the
	// database applied.
	require.NoError(t, f.bucket.WriteAll(ctx, f.logKey(4), state.AppendEntry(nil, state.Entry{Epoch: 1, Records: []state.Record{state.InitProducerIDRecord{ProducerID: 7}}}), nil))
	_, err = f.open()
	require.ErrorIs(t, err, ErrDiverged)
	require.ErrorContains(t, err, "entry 4 of the metadata log")

	// Deleting the database accepts the log as it is.
	require.NoError(t, os.RemoveAll(f.dir))
	c, err := f.open()
	require.NoError(t, err)
	require.Equal(t, int64(5), c.applied.Load(), "rebuilt from the log, then claimed it")
}

// TestDamagedDatabaseRebuilt: a database with bytes flipped in its pages
// (as a truncated or random one) is deleted, with a warning, and rebuilt
// from the log; the state is the same.
func TestDamagedDatabaseRebuilt(t *testing.T) {
	for _, damage := range []struct {
		name string
		do   func(b []byte) []byte
	}{
		{"flipped", func(b []byte) []byte {
			// Two bytes of the third page's b-tree header (the topics
			// table's): "database disk image is malformed" at startup.
			b[2*4096] ^= 0xff
			b[2*4096+1] ^= 0xff
			return b
		}},
		{"truncated", func(b []byte) []byte { return b[:len(b)/2] }},
		{"random", func(b []byte) []byte {
			for i := range b {
				b[i] = byte(i * 31)
			}
			return b
		}},
	} {
		t.Run(damage.name, func(t *testing.T) {
			f := newDamageFixture(t)
			tp := f.commits(40)
			path := f.dir + "/shard-0.db"
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Greater(t, len(b), 3*4096)
			require.NoError(t, os.WriteFile(path, damage.do(b), 0o644))
			c, err := f.open()
			require.NoError(t, err)
			found, err := c.FindBatches(t.Context(), tp, 0, 1<<30)
			require.NoError(t, err)
			require.Equal(t, int64(80), found.HighWatermark)
			require.Len(t, found.Batches, 40)
		})
	}
}

// TestLogGapExplained: a missing entry in the middle of the log, or one
// stray far-future key, is refused with what is wrong and what to do
// (before: "no snapshot holds entry N").
func TestLogGapExplained(t *testing.T) {
	ctx := t.Context()
	f := newDamageFixture(t)
	f.commits(6) // entries 0..7
	require.NoError(t, os.RemoveAll(f.dir))
	require.NoError(t, f.bucket.Delete(ctx, f.logKey(3)))
	_, err := f.open()
	require.ErrorContains(t, err, "hold entries 0 to 2 (3 objects), then a gap, then 4 to 7: entries 3 to 3 are missing")

	require.NoError(t, f.bucket.WriteAll(ctx, f.logKey(3), []byte("restored?"), nil))
	require.NoError(t, f.bucket.Delete(ctx, f.logKey(3)))
	f2 := newDamageFixture(t)
	f2.commits(2) // entries 0..3
	require.NoError(t, f2.bucket.WriteAll(ctx, f2.logKey(1_000_000), []byte("junk"), nil))
	require.NoError(t, os.RemoveAll(f2.dir))
	_, err = f2.open()
	require.ErrorContains(t, err, "a stray key")
	require.ErrorContains(t, err, "then a gap, then 1000000 to 1000000")
}
