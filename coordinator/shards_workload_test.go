package coordinator

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"

	"github.com/diskless-go/diskless/internal/testbucket"
	"github.com/diskless-go/diskless/wal"
)

// TestShardsWorkload runs a random workload over 4 shards: topics created
// and deleted, objects spanning shards committed, DeleteRecords,
// retention, and restarts of one shard or all (some rebuilding their
// databases from the logs). After every step, with one run of the
// lifecycle workers:
//
//   - no object is deleted while any batch in it is live (every object
//     that FindBatches names on any shard is in the bucket);
//   - every object whose batches are all gone is deleted once the grace
//     period has passed since the last went, and not before.
//
// It runs over memory, file:// and a real S3 server.
func TestShardsWorkload(t *testing.T) {
	for i, kind := range []string{"mem", "file", "s3"} {
		t.Run(kind, func(t *testing.T) {
			runShardsWorkload(t, testbucket.New(t, kind), uint64(i+1), 250)
		})
	}
}

type workloadTopic struct {
	id    uuid.UUID
	parts int32
}

func runShardsWorkload(t *testing.T, bucket *blob.Bucket, seed uint64, steps int) {
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(seed, 99))
	f := newShardsFixture(t, 4, bucket, nil)
	var topics []workloadTopic
	goneAt := map[string]time.Time{} // committed objects: zero while live
	anyTP := func() wal.TopicPartition {
		tp := topics[rng.IntN(len(topics))]
		return wal.TopicPartition{TopicID: tp.id, Partition: int32(rng.IntN(int(tp.parts)))}
	}
	// live returns the objects FindBatches names, on every partition.
	live := func() map[string]bool {
		out := map[string]bool{}
		for _, tp := range topics {
			for p := range tp.parts {
				part := wal.TopicPartition{TopicID: tp.id, Partition: p}
				lo, err := f.s.ListOffsets(ctx, part, EarliestTimestamp)
				require.NoError(t, err)
				res, err := f.s.FindBatches(ctx, part, lo.Offset, 1<<40)
				require.NoError(t, err)
				for _, l := range res.Batches {
					out[l.ObjectKey] = true
				}
			}
		}
		return out
	}
	var ops [8]int
	for step := 0; step < steps; step++ {
		f.clock.Advance(time.Duration(rng.IntN(25_000)) * time.Millisecond)
		switch k := rng.IntN(100); {
		case k < 8 || len(topics) == 0:
			ops[0]++
			cfg := TopicConfig{Retention: -1, RetentionBytes: -1}
			if rng.IntN(2) == 0 {
				cfg.Retention = time.Duration(int64(30_000+rng.IntN(90_000))) * time.Millisecond
			}
			if rng.IntN(3) == 0 {
				cfg.RetentionBytes = int64(300 + rng.IntN(1200))
			}
			parts := int32(rng.IntN(6) + 1)
			id, err := f.s.CreatePartitions(ctx, CreatePartitionsRequest{Name: fmt.Sprintf("t%d", step), Partitions: parts, Config: cfg})
			require.NoError(t, err)
			topics = append(topics, workloadTopic{id, parts})
		case k < 55:
			ops[1]++
			var coords []wal.Coordinate
			pos := int64(1)
			for j := rng.IntN(8) + 1; j > 0; j-- {
				c := coord(anyTP(), pos, int32(rng.IntN(4)+1), -1, -1, -1, f.clock.Now().UnixMilli()-int64(rng.IntN(60_000)))
				c.Size = int32(61 + rng.IntN(200))
				coords = append(coords, c)
				pos += int64(c.Size)
			}
			key := f.upload(f.clock.Now().Add(-time.Duration(rng.IntN(2000))*time.Millisecond), int(pos))
			res, err := f.s.CommitFile(ctx, CommitFileRequest{ObjectKey: key, Size: pos, Uploader: 1, Coordinates: coords})
			require.NoError(t, err)
			for _, r := range res {
				require.NoError(t, r.Err)
			}
			goneAt[key] = time.Time{}
		case k < 70:
			ops[2]++
			tp := anyTP()
			hw, err := f.s.ListOffsets(ctx, tp, LatestTimestamp)
			require.NoError(t, err)
			lo, err := f.s.ListOffsets(ctx, tp, EarliestTimestamp)
			require.NoError(t, err)
			off := int64(-1)
			if rng.IntN(2) == 0 {
				off = lo.Offset + rng.Int64N(hw.Offset-lo.Offset+1)
			}
			_, err = f.s.DeleteRecords(ctx, tp, off)
			require.NoError(t, err)
		case k < 80:
			ops[3]++
			_, err := f.s.EnforceRetention(ctx)
			require.NoError(t, err)
		case k < 85:
			ops[4]++
			i := rng.IntN(len(topics))
			require.NoError(t, f.s.DeleteTopic(ctx, topics[i].id))
			topics = append(topics[:i], topics[i+1:]...)
		case k < 91:
			ops[5]++
			i := rng.IntN(len(f.logs))
			require.NoError(t, f.s.Shards().ReopenShard(ctx, i, f.logs[i]))
		case k < 94:
			ops[6]++
			require.NoError(t, f.s.Close())
			if rng.IntN(2) == 0 {
				// The databases are caches: rebuild them from the logs.
				for i := range f.logs {
					for _, suffix := range []string{"", "-wal", "-shm"} {
						require.NoError(t, removeIfExists(filepath.Join(f.dir, fmt.Sprintf("shard-%d.db%s", i, suffix))))
					}
				}
			}
			f.open()
		default:
			ops[7]++ // time passes
		}

		now := f.clock.Now()
		l := live()
		for key, at := range goneAt {
			if at.IsZero() && !l[key] {
				goneAt[key] = now
			}
		}
		run, err := f.s.RunLifecycle(ctx)
		require.NoError(t, err, "step %d", step)
		require.Zero(t, run.Failed)
		exist := f.existing()
		for key := range l {
			require.True(t, exist[key], "step %d: %s was deleted while a batch in it is live", step, key)
		}
		for key, at := range goneAt {
			if at.IsZero() {
				continue
			}
			if now.Before(at.Add(testGrace)) {
				require.True(t, exist[key], "step %d: %s was deleted %v after its last batch went, within the grace", step, key, now.Sub(at))
			} else {
				require.False(t, exist[key], "step %d: %s is still there %v after its last batch went", step, key, now.Sub(at))
			}
		}
	}
	t.Logf("ops (create, commit, delete records, retention, delete topic, restart one, restart all, wait): %v; objects %d; %+v",
		ops, len(goneAt), f.s.Stats().CommitCalls)

	// In the end every topic goes; every object is deleted, and once past
	// the commit deadline every shard forgets it.
	for _, tp := range topics {
		require.NoError(t, f.s.DeleteTopic(ctx, tp.id))
	}
	f.clock.Advance(testGrace)
	_, err := f.s.RunLifecycle(ctx)
	require.NoError(t, err)
	f.clock.Advance(5 * time.Minute)
	_, err = f.s.RunLifecycle(ctx)
	require.NoError(t, err)
	require.Empty(t, f.existing())
	var deleted, handed int64
	for i, st := range f.s.Stats().Shards {
		c, err := f.s.local(i)
		require.NoError(t, err)
		var n int
		require.NoError(t, c.store.Rdb.QueryRow("SELECT COUNT(*) FROM objects").Scan(&n))
		require.Zero(t, n, "shard %d forgot every object", i)
		deleted += st.Deleted
		handed += st.HandedOff
	}
	t.Logf("since the last restart: %d deleted, %d handed off", deleted, handed)
}
