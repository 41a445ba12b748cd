package coordinator

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless/wal"
)

// checksum hashes every row of every table, in key order; of meta, only
// what the log's content decides (not the applied offset, its entry's checksum or the epoch,
// which a reopening leader's epoch record moves).
func checksum(t testing.TB, c *leader) string {
	t.Helper()
	h := sha256.New()
	for _, q := range []string{
		"SELECT k, v FROM meta WHERE k NOT IN ('applied', 'applied_crc', 'epoch', 'chain_crc', 'producers_chain_crc', 'producers_epoch') ORDER BY k",
		"SELECT * FROM topics ORDER BY topic_id",
		"SELECT * FROM partitions ORDER BY pid",
		"SELECT * FROM objects ORDER BY object_id",
		"SELECT * FROM batches ORDER BY pid, last_offset",
		"SELECT * FROM producers ORDER BY pid, producer_id",
		"SELECT * FROM remote_segments ORDER BY pid, end_offset",
		"SELECT * FROM group_offsets ORDER BY grp, topic, partition",
		"SELECT * FROM group_claims ORDER BY grp",
		"SELECT * FROM topic_extents ORDER BY topic_id, from_partition",
		"SELECT * FROM group_metadata ORDER BY grp",
	} {
		rows, err := c.store.Rdb.Query(q)
		require.NoError(t, err)
		cols, err := rows.Columns()
		require.NoError(t, err)
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		n := 0
		for rows.Next() {
			require.NoError(t, rows.Scan(ptrs...))
			fmt.Fprintf(h, "%v\n", vals)
			n++
		}
		require.NoError(t, rows.Err())
		rows.Close()
		fmt.Fprintf(h, "%s: %d rows\n", q, n)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// workload runs n random mutating calls.
func workload(t testing.TB, c *leader, rng *rand.Rand, n int, topics *[]uuid.UUID, objects *int) {
	ctx := context.Background()
	for i := 0; i < n; i++ {
		switch k := rng.IntN(20); {
		case k == 0 || len(*topics) == 0:
			id, err := c.CreatePartitions(ctx, CreatePartitionsRequest{Name: fmt.Sprintf("t%d-%d", len(*topics), rng.IntN(1e9)), Partitions: int32(rng.IntN(4) + 1),
				Config: TopicConfig{RetentionBytes: int64(rng.IntN(3)-1) * 2000}})
			require.NoError(t, err)
			*topics = append(*topics, id)
		case k == 19 && rng.IntN(2) == 0:
			id := (*topics)[rng.IntN(len(*topics))]
			if info, ok := c.pub.Topic(id); ok {
				require.NoError(t, c.AddPartitions(ctx, AddPartitionsRequest{TopicID: id, Partitions: info.Partitions + int32(rng.IntN(2)+1)}))
			}
		case k == 1:
			_, err := c.DeleteRecords(ctx, wal.TopicPartition{TopicID: (*topics)[rng.IntN(len(*topics))]}, -1)
			_ = err // unknown partitions of deleted topics are fine
		case k == 2:
			_, err := c.EnforceRetention(ctx)
			require.NoError(t, err)
		case k == 3 && rng.IntN(5) == 0:
			_ = c.DeleteTopic(ctx, (*topics)[rng.IntN(len(*topics))])
		case k == 4:
			_, _, err := c.InitProducerID(ctx)
			require.NoError(t, err)
		case k == 5:
			group := fmt.Sprintf("g%d", rng.IntN(3))
			tp := GroupPartition{Topic: fmt.Sprintf("t%d", rng.IntN(3)), Partition: int32(rng.IntN(4))}
			switch rng.IntN(8) {
			case 0, 1:
				require.NoError(t, c.DeleteOffsets(ctx, group, 0, []GroupPartition{tp}))
				continue
			case 2:
				_, err := c.ClaimGroup(ctx, group)
				require.NoError(t, err)
				continue
			case 3, 4:
				var v []byte
				if rng.IntN(4) != 0 {
					v = fmt.Appendf(nil, "members of %s", group)
				}
				require.NoError(t, c.PutGroupMetadata(ctx, group, 0, int64(rng.IntN(5)), v))
				continue
			}
			require.NoError(t, c.CommitOffsets(ctx, group, 0, []GroupOffset{{Topic: tp.Topic, TopicID: (*topics)[rng.IntN(len(*topics))],
				Partition: tp.Partition, Offset: int64(rng.IntN(1000)), LeaderEpoch: -1, Metadata: "m"}}))
		default:
			*objects++
			var coords []wal.Coordinate
			pos := int64(1)
			for j := rng.IntN(8) + 1; j > 0; j-- {
				tp := wal.TopicPartition{TopicID: (*topics)[rng.IntN(len(*topics))], Partition: int32(rng.IntN(4))}
				pid, seq := int64(-1), int32(-1)
				if rng.IntN(2) == 0 {
					pid, seq = int64(rng.IntN(3)), int32(rng.IntN(3))
				}
				c := coord(tp, pos, int32(rng.IntN(5)+1), pid, 0, seq, 1_764_500_000_000+int64(rng.IntN(1000)))
				c.Size = int32(rng.IntN(500) + 61)
				coords = append(coords, c)
				pos += int64(c.Size)
			}
			_, err := c.CommitFile(ctx, CommitFileRequest{ObjectKey: fmt.Sprintf("wal/%06d", *objects), Size: pos, Coordinates: coords})
			require.NoError(t, err)
		}
	}
}

// TestRebuild deletes the SQLite files at random moments of a workload;
// reopening rebuilds them from the log, and every table's checksum equals
// the one before.
func TestRebuild(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	log := newTestLog()
	dir := t.TempDir()
	c := openTest(t, log, dir, nil)
	var topics []uuid.UUID
	objects := 0
	for round := 0; round < 8; round++ {
		workload(t, c, rng, rng.IntN(60)+1, &topics, &objects)
		before := checksum(t, c)
		for _, f := range []string{"shard-0.db", "shard-0.db-wal", "shard-0.db-shm"} {
			require.NoError(t, removeIfExists(filepath.Join(dir, f)))
		}
		require.NoError(t, c.Close())
		c = openTest(t, log, dir, nil)
		require.Equal(t, before, checksum(t, c), "round %d", round)
	}
}

// TestSnapshotRestore: after a snapshot the log is trimmed; a coordinator
// whose database is gone restores the snapshot and replays the rest.
func TestSnapshotRestore(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	bucket := memblob.OpenBucket(nil)
	defer bucket.Close()
	log := newTestLog()
	dir := t.TempDir()
	opts := &leaderOptions{Bucket: bucket, Prefix: "p/", SnapshotEvery: -1}
	c := openTest(t, log, dir, opts)
	var topics []uuid.UUID
	objects := 0
	workload(t, c, rng, 100, &topics, &objects)
	off, err := c.Snapshot(context.Background())
	require.NoError(t, err)
	require.LessOrEqual(t, log.Start(), off+1, "the log is trimmed before the snapshot, or before its producer states")
	require.Positive(t, log.Start())
	workload(t, c, rng, 50, &topics, &objects)
	before := checksum(t, c)
	require.NoError(t, c.Close())
	require.NoError(t, os.RemoveAll(dir))

	c = openTest(t, log, dir, opts)
	require.Equal(t, before, checksum(t, c))
	workload(t, c, rng, 20, &topics, &objects)

	// Automatic snapshots keep two, and trim the log.
	require.NoError(t, c.Close())
	opts.SnapshotEvery = 10
	c = openTest(t, log, dir, opts)
	workload(t, c, rng, 200, &topics, &objects)
	require.NoError(t, c.Close())
	offs, err := c.snapshots(context.Background())
	require.NoError(t, err)
	require.Len(t, offs, snapshotsToKeep)
	require.Greater(t, log.Start(), off+1)
}

// TestSnapshotBySize: a shard whose entries are few but large is
// snapshotted (and its log trimmed) once they hold SnapshotBytes; with
// SnapshotBytes negative it is not.
func TestSnapshotBySize(t *testing.T) {
	for _, tc := range []struct {
		bytes int64
		want  bool
	}{{4 << 10, true}, {-1, false}} {
		rng := rand.New(rand.NewPCG(9, 9))
		bucket := memblob.OpenBucket(nil)
		defer bucket.Close()
		log := newTestLog()
		c := openTest(t, log, t.TempDir(), &leaderOptions{Bucket: bucket, SnapshotEvery: 1 << 40, SnapshotBytes: tc.bytes})
		var topics []uuid.UUID
		objects := 0
		workload(t, c, rng, 200, &topics, &objects)
		require.NoError(t, c.Close())
		offs, err := c.snapshots(context.Background())
		require.NoError(t, err)
		if !tc.want {
			require.Empty(t, offs)
			require.Zero(t, log.Start())
			continue
		}
		require.NotEmpty(t, offs)
		require.Positive(t, log.Start(), "trimmed after the snapshot")
	}
}

func removeIfExists(p string) error {
	if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}
