package diskless

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"

	"github.com/diskless-go/diskless/kafkaerr"
)

// TestGroupOffsets: the facade commits only offsets of partitions that
// exist (all or none), reads them back across a restart, leaves out those
// of a topic deleted (and created again) since, and deletes them.
func TestGroupOffsets(t *testing.T) {
	ctx := t.Context()
	bucket, data := t.TempDir(), t.TempDir()
	cfg := func() *Config { return &Config{BucketURL: "file://" + bucket, DataDir: data} }
	b := openTest(t, cfg())
	_, err := b.CreateTopic(ctx, "orders", TopicConfig{Partitions: 2})
	require.NoError(t, err)
	_, err = b.CreateTopic(ctx, "audit", TopicConfig{Partitions: 1})
	require.NoError(t, err)

	err = b.CommitOffsets(ctx, "readers", 0, []GroupOffset{{Topic: "orders", Partition: 0, Offset: 5}, {Topic: "orders", Partition: 2, Offset: 1}})
	require.Equal(t, kafkaerr.UnknownTopicOrPartition, kafkaerr.CodeOf(err))
	err = b.CommitOffsets(ctx, "readers", 0, []GroupOffset{{Topic: "missing", Partition: 0, Offset: 5}})
	require.Equal(t, kafkaerr.UnknownTopicOrPartition, kafkaerr.CodeOf(err))
	got, err := b.FetchOffsets(ctx, "readers", nil)
	require.NoError(t, err)
	require.Empty(t, got, "nothing of a refused commit")

	require.NoError(t, b.CommitOffsets(ctx, "readers", 0, []GroupOffset{
		{Topic: "orders", Partition: 1, Offset: 7, LeaderEpoch: 2, Metadata: "m"},
		{Topic: "audit", Partition: 0, Offset: 3, LeaderEpoch: -1},
	}))
	require.NoError(t, b.Close())
	b = openTest(t, cfg())
	got, err = b.FetchOffsets(ctx, "readers", nil)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, "audit", got[0].Topic)
	require.Equal(t, GroupOffset{Topic: "orders", Partition: 1, Offset: 7, LeaderEpoch: 2, Metadata: "m", CommitTime: got[1].CommitTime}, got[1])
	require.False(t, got[1].CommitTime.IsZero())
	got, err = b.FetchOffsets(ctx, "readers", []GroupPartition{{Topic: "audit", Partition: 0}})
	require.NoError(t, err)
	require.Len(t, got, 1)

	// A topic deleted and created again: its old offsets are not its.
	require.NoError(t, b.DeleteTopic(ctx, "audit"))
	_, err = b.CreateTopic(ctx, "audit", TopicConfig{Partitions: 1})
	require.NoError(t, err)
	got, err = b.FetchOffsets(ctx, "readers", nil)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, "orders", got[0].Topic)

	groups, err := b.OffsetGroups(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"readers"}, groups)
	require.NoError(t, b.DeleteOffsets(ctx, "readers", 0, nil))
	groups, err = b.OffsetGroups(ctx)
	require.NoError(t, err)
	require.Empty(t, groups)
	require.NoError(t, b.Close())
	require.ErrorIs(t, b.CommitOffsets(ctx, "readers", 0, nil), ErrClosed)
	_, err = b.FetchOffsets(ctx, "readers", nil)
	require.ErrorIs(t, err, ErrClosed)
}

// TestGroupStateBounded: one million offset commits from 10 groups (10
// groups each committing 100 partitions 1,000 times, with metadata, and
// storing their membership every 100 rounds) leave the group state as
// large as the number of groups and partitions says, not the number of
// commits: the coordinator's database and the metadata in the bucket
// (the log, trimmed after each snapshot, and the snapshots) after 1M
// commits are no larger than a few MiB, and not much larger than after
// the first 100,000. (The offsets and the group's membership are
// coordinator rows, upserted; no compacted topic holds them.)
func TestGroupStateBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("a million commits")
	}
	ctx := t.Context()
	data := t.TempDir()
	b := openTest(t, &Config{DataDir: data, Linger: time.Millisecond})
	const groups, partitions, rounds = 10, 100, 1000
	_, err := b.CreateTopic(ctx, "events", TopicConfig{Partitions: partitions})
	require.NoError(t, err)
	// size returns the bytes of the coordinator's database file (its
	// SQLite WAL, bounded by wal_autocheckpoint, aside) and of what a
	// restore reads from the bucket: the newest snapshot and the log
	// entries after it (Trim keeps older entries for TrimGrace, 5
	// minutes, which all this test's are; total counts those too).
	size := func() (db, meta, total int64) {
		fi, err := os.Stat(filepath.Join(data, "coordinator", "shard-0.db"))
		require.NoError(t, err)
		db = fi.Size()
		var snapAt int64 = -1
		var snapSize int64
		logs := map[int64]int64{}
		it := b.metaBucket.List(&blob.ListOptions{Prefix: "meta/0/"})
		for {
			o, err := it.Next(ctx)
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
			total += o.Size
			var off int64
			if _, err := fmt.Sscanf(o.Key, "meta/0/snapshots/%d.db.zst", &off); err == nil {
				if off > snapAt {
					snapAt, snapSize = off, o.Size
				}
			} else if _, err := fmt.Sscanf(o.Key, "meta/0/log/%d", &off); err == nil {
				logs[off] = o.Size
			}
		}
		meta = snapSize
		for off, n := range logs {
			if off > snapAt {
				meta += n
			}
		}
		return db, meta, total
	}
	run := func(from, to int) {
		var wg sync.WaitGroup
		errs := make([]error, groups)
		for gi := range groups {
			wg.Go(func() {
				errs[gi] = func() error {
					group := fmt.Sprintf("group-%d", gi)
					offsets := make([]GroupOffset, partitions)
					for r := from; r < to; r++ {
						for p := range offsets {
							offsets[p] = GroupOffset{Topic: "events", Partition: int32(p), Offset: int64(r), LeaderEpoch: 0, Metadata: "consumer-1"}
						}
						if err := b.CommitOffsets(ctx, group, 0, offsets); err != nil {
							return err
						}
						if r%100 == 0 {
							if err := b.PutGroupMetadata(ctx, group, 0, int64(r/100+1), bytes.Repeat([]byte{byte(r)}, 2000)); err != nil {
								return err
							}
						}
					}
					return nil
				}()
			})
		}
		wg.Wait()
		require.NoError(t, errors.Join(errs...))
	}
	run(0, rounds/10)
	db1, meta1, total1 := size()
	run(rounds/10, rounds)
	db2, meta2, total2 := size()
	t.Logf("after %d commits: database %d bytes, metadata to restore %d bytes (%d in the bucket); after %d: %d, %d (%d)",
		groups*partitions*rounds/10, db1, meta1, total1, groups*partitions*rounds, db2, meta2, total2)
	for gi := range groups {
		got, err := b.FetchOffsets(ctx, fmt.Sprintf("group-%d", gi), nil)
		require.NoError(t, err)
		require.Len(t, got, partitions)
		for _, o := range got {
			require.Equal(t, int64(rounds-1), o.Offset)
		}
	}
	const bound = 8 << 20
	require.Less(t, db2+meta2, int64(bound), "group state bounded by groups and partitions")
	require.Less(t, db2+meta2, 3*(db1+meta1), "not growing with the commits")
}
