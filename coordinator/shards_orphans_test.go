package coordinator

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/internal/objstats"
	"github.com/diskless-go/diskless/internal/testbucket"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal"
)

var orphanBucketKinds = []string{"mem", "file", "s3"}

// TestOrphans: objects uploaded and never committed are deleted once they
// were named more than the grace ago, however old the objects that stay
// are; committed objects and recent uploads are not. LIST stops at the
// first key that is too new, and each call is counted.
func TestOrphans(t *testing.T) {
	for _, kind := range orphanBucketKinds {
		t.Run(kind, func(t *testing.T) {
			ctx := t.Context()
			bucket, counter := objstats.Wrap(testbucket.New(t, kind))
			defer bucket.Close()
			f := newShardsFixture(t, 3, bucket, nil)
			f.s.listPageSize = 2
			old, err := f.s.CreatePartitions(ctx, CreatePartitionsRequest{Name: "old", Partitions: 3})
			require.NoError(t, err)
			young, err := f.s.CreatePartitions(ctx, CreatePartitionsRequest{Name: "young", Partitions: 3})
			require.NoError(t, err)
			commit := func(key string, topic wal.TopicPartition) {
				t.Helper()
				res, err := f.s.CommitFile(ctx, CommitFileRequest{ObjectKey: key, Coordinates: coordsFor(topic,
					wal.TopicPartition{TopicID: topic.TopicID, Partition: 1}, wal.TopicPartition{TopicID: topic.TopicID, Partition: 2})})
				require.NoError(t, err)
				for _, r := range res {
					require.NoError(t, r.Err)
				}
			}

			start := f.clock.Now()
			ancient := f.upload(start.Add(-time.Hour), 10) // a broker died after this upload
			a := f.upload(start, 10)
			commit(a, wal.TopicPartition{TopicID: old})
			b := f.upload(start, 10) // never committed
			f.clock.Advance(30 * time.Minute)
			var fresh []string // uploads still in flight: not committed yet
			for range 5 {
				fresh = append(fresh, f.upload(f.clock.Now(), 10))
			}
			e := f.upload(f.clock.Now(), 10)
			commit(e, wal.TopicPartition{TopicID: young})

			lists := counter.Snapshot().Calls[objstats.List]
			run, err := f.s.CollectOrphans(ctx)
			require.NoError(t, err)
			require.Equal(t, f.clock.Now().Add(-10*time.Minute), run.Threshold, "now minus the grace")
			require.Equal(t, 3, run.Candidates, "ancient, a and b")
			require.Equal(t, 2, run.Deleted)
			require.Equal(t, 3, run.Lists, "two pages of wal/, the second holding a key newer than the threshold: stop; then tiered/, empty")
			require.Equal(t, lists+3, counter.Snapshot().Calls[objstats.List])
			exist := f.existing()
			require.False(t, exist[ancient])
			require.True(t, exist[a])
			require.False(t, exist[b], "known by no shard and named more than the grace ago: an orphan, though a, as old, is live")
			for _, k := range fresh {
				require.True(t, exist[k], "an upload newer than the threshold may still be committed")
			}
			require.True(t, exist[e])

			// The uploads still in flight were never committed: once
			// they are older than the grace, they go; a and e stay.
			f.clock.Advance(20 * time.Minute)
			lists = counter.Snapshot().Calls[objstats.List]
			run, err = f.s.CollectOrphans(ctx)
			require.NoError(t, err)
			require.Equal(t, 7, run.Candidates)
			require.Equal(t, 5, run.Deleted)
			require.Equal(t, 5, run.Lists, "seven keys in pages of two, then tiered/")
			require.Equal(t, lists+5, counter.Snapshot().Calls[objstats.List])
			exist = f.existing()
			for _, k := range fresh {
				require.False(t, exist[k])
			}
			require.True(t, exist[a])
			require.True(t, exist[e])

			// Nothing else is left: a run lists everything in one page
			// once the page is large, and deletes nothing.
			f.s.listPageSize = 0
			run, err = f.s.CollectOrphans(ctx)
			require.NoError(t, err)
			require.Equal(t, OrphanRun{Threshold: run.Threshold, Lists: 2, Listed: 2, Candidates: 2}, run)
			st := f.s.Stats()
			require.Equal(t, int64(3), st.OrphanRuns)
			require.Equal(t, int64(10), st.OrphanLists)
			require.Equal(t, int64(7), st.OrphansDeleted)
			require.Equal(t, run, st.LastOrphanRun)
		})
	}
}

// TestOrphansCommittedDuringRun: an object older than the threshold that
// is committed while the collector runs is never deleted. Committed before
// the collector asks the shards again about the candidates, a shard knows
// it (that is why they are asked again); after, the commit deadline
// refuses it, so nothing committed is deleted either way.
func TestOrphansCommittedDuringRun(t *testing.T) {
	for _, kind := range orphanBucketKinds {
		t.Run(kind, func(t *testing.T) {
			ctx := t.Context()
			bucket := testbucket.New(t, kind)

			// Without a deadline, the second question is what saves it.
			f := newShardsFixture(t, 2, bucket, &Options{CommitDeadline: -1})
			id, err := f.s.CreatePartitions(ctx, CreatePartitionsRequest{Name: "t", Partitions: 2})
			require.NoError(t, err)
			tps := []wal.TopicPartition{{TopicID: id}, {TopicID: id, Partition: 1}}
			orphan := f.upload(f.clock.Now().Add(-time.Hour), 10)
			late := f.upload(f.clock.Now().Add(-time.Hour), 10)
			f.s.orphanHook = func(stage string) {
				if stage != "listed" {
					return
				}
				res, err := f.s.CommitFile(ctx, CommitFileRequest{ObjectKey: late, Coordinates: coordsFor(tps...)})
				require.NoError(t, err)
				for _, r := range res {
					require.NoError(t, r.Err)
				}
			}
			run, err := f.s.CollectOrphans(ctx)
			require.NoError(t, err)
			require.Equal(t, 2, run.Candidates, "both were unknown when listed")
			require.Equal(t, 1, run.Deleted)
			exist := f.existing()
			require.False(t, exist[orphan])
			require.True(t, exist[late], "committed during the run")
			found, err := f.s.FindBatches(ctx, tps[1], 0, 1<<20)
			require.NoError(t, err)
			require.Equal(t, late, found.Batches[0].ObjectKey)
			require.NoError(t, f.s.Close())

			// With the deadline (the default), a commit after the second
			// question is refused: the object is an orphan, and deleted.
			g := newShardsFixture(t, 2, testbucket.New(t, kind), nil)
			id, err = g.s.CreatePartitions(ctx, CreatePartitionsRequest{Name: "t", Partitions: 2})
			require.NoError(t, err)
			tps = []wal.TopicPartition{{TopicID: id}, {TopicID: id, Partition: 1}}
			tooLate := g.upload(g.clock.Now().Add(-time.Hour), 10)
			var commitErr error
			g.s.orphanHook = func(stage string) {
				if stage == "checked" {
					_, commitErr = g.s.CommitFile(ctx, CommitFileRequest{ObjectKey: tooLate, Coordinates: coordsFor(tps...)})
				}
			}
			run, err = g.s.CollectOrphans(ctx)
			require.NoError(t, err)
			require.Equal(t, kafkaerr.RequestTimedOut, code(commitErr))
			require.Equal(t, 1, run.Deleted)
			require.False(t, g.existing()[tooLate])
			require.Empty(t, g.knownBy(tooLate), "no batch points into it")
		})
	}
}

// TestOrphansOptions: a collector without a commit deadline is refused;
// one needs a bucket.
func TestOrphansOptions(t *testing.T) {
	ctx := t.Context()
	bucket := memblob.OpenBucket(nil)
	defer bucket.Close()
	_, err := Open(ctx, []metalog.Log{newTestLog()}, &Options{Bucket: bucket, CommitDeadline: -1})
	require.ErrorIs(t, err, ErrInvalidOptions)
	_, err = Open(ctx, []metalog.Log{newTestLog()}, &Options{Bucket: bucket, CommitDeadline: time.Hour})
	require.ErrorIs(t, err, ErrInvalidOptions, "the deadline must be shorter than the grace")
	_, err = Open(ctx, nil, nil)
	require.ErrorIs(t, err, ErrInvalidOptions)
	s, err := Open(ctx, []metalog.Log{newTestLog()}, nil)
	require.NoError(t, err)
	defer s.Close()
	_, err = s.CollectOrphans(ctx)
	require.ErrorIs(t, err, ErrInvalidOptions)
}

// TestOrphansBackground: with an interval, the collector runs by itself
// (system clock) and stops with Close.
func TestOrphansBackground(t *testing.T) {
	ctx := t.Context()
	bucket := memblob.OpenBucket(nil)
	defer bucket.Close()
	s, err := Open(ctx, []metalog.Log{newTestLog(), newTestLog()}, &Options{
		Prefix: testPrefix, ApplyInterval: -1,
		Bucket:         bucket,
		OrphanInterval: 10 * time.Millisecond,
		OrphanGrace:    time.Minute,
	})
	require.NoError(t, err)
	defer s.Close()
	id, err := s.CreatePartitions(ctx, CreatePartitionsRequest{Name: "t", Partitions: 1})
	require.NoError(t, err)
	put := func(at time.Time) string {
		key := wal.NewObjectKey(testPrefix, at)
		require.NoError(t, bucket.WriteAll(ctx, key, []byte{1}, nil))
		return key
	}
	orphan := put(time.Now().Add(-time.Hour))
	committed := put(time.Now())
	_, err = s.CommitFile(ctx, CommitFileRequest{ObjectKey: committed, Coordinates: coordsFor(wal.TopicPartition{TopicID: id})})
	require.NoError(t, err)
	recent := put(time.Now())
	require.Eventually(t, func() bool {
		ok, _ := bucket.Exists(ctx, orphan)
		return !ok
	}, 10*time.Second, 5*time.Millisecond)
	for _, k := range []string{committed, recent} {
		ok, err := bucket.Exists(ctx, k)
		require.NoError(t, err)
		require.True(t, ok)
	}
	// The run that deleted it is counted once it ends.
	require.Eventually(t, func() bool { return s.Stats().OrphanRuns > 0 }, 10*time.Second, 5*time.Millisecond)
}
