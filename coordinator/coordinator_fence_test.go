package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/internal/s3test"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal"
)

// fenceBuckets are the buckets the fencing tests run over; concurrent says
// whether the bucket's conditional put is atomic under concurrent writers
// (gocloud's fileblob is not: see metalog.Bucket).
func fenceBuckets(t *testing.T) []struct {
	name       string
	bucket     *blob.Bucket
	concurrent bool
} {
	fb, err := fileblob.OpenBucket(t.TempDir(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { fb.Close() })
	mb := memblob.OpenBucket(nil)
	t.Cleanup(func() { mb.Close() })
	s3 := s3test.Start(t).Bucket(t, "fence")
	return []struct {
		name       string
		bucket     *blob.Bucket
		concurrent bool
	}{{"mem", mb, true}, {"file", fb, false}, {"s3", s3, true}}
}

func openBucketLog(t *testing.T, b *blob.Bucket) *metalog.Bucket {
	l, err := metalog.OpenBucket(context.Background(), b, "p/meta/0/", nil)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

// TestFencing: a second coordinator that opens the same metalog.Bucket claims
// it; the first one's next request fails with NOT_LEADER_OR_FOLLOWER, and
// the second continues after everything the first acknowledged.
func TestFencing(t *testing.T) {
	for _, fb := range fenceBuckets(t) {
		t.Run(fb.name, func(t *testing.T) {
			ctx := t.Context()
			a := openTest(t, openBucketLog(t, fb.bucket), "", &leaderOptions{Name: "a"})
			id := mustCreate(t, a, "fenced", 1, TopicConfig{})
			tp := wal.TopicPartition{TopicID: id}
			res, err := a.CommitFile(ctx, CommitFileRequest{ObjectKey: "wal/a1", Coordinates: []wal.Coordinate{coord(tp, 1, 10, -1, -1, -1, 1)}})
			require.NoError(t, err)
			require.Equal(t, int64(0), res[0].BaseOffset)

			b := openTest(t, openBucketLog(t, fb.bucket), "", &leaderOptions{Name: "b"})
			_, err = a.CommitFile(ctx, CommitFileRequest{ObjectKey: "wal/a2", Coordinates: []wal.Coordinate{coord(tp, 1, 5, -1, -1, -1, 1)}})
			require.Equal(t, kafkaerr.NotLeaderOrFollower, code(err), "%v", err)
			require.True(t, code(err).Retriable())
			_, err = a.CommitFile(ctx, CommitFileRequest{ObjectKey: "wal/a3", Coordinates: []wal.Coordinate{coord(tp, 1, 5, -1, -1, -1, 1)}})
			require.Equal(t, kafkaerr.NotLeaderOrFollower, code(err), "a fenced leader stays fenced")

			res, err = b.CommitFile(ctx, CommitFileRequest{ObjectKey: "wal/b1", Coordinates: []wal.Coordinate{coord(tp, 1, 3, -1, -1, -1, 1)}})
			require.NoError(t, err)
			require.Equal(t, int64(10), res[0].BaseOffset, "after everything the first leader acknowledged")
			found, err := b.FindBatches(ctx, tp, 0, 1<<20)
			require.NoError(t, err)
			require.Equal(t, int64(13), found.HighWatermark)
		})
	}
}

// TestFencingConcurrent: two leaders commit at full speed while the second
// claims the log in the middle: never two answers for one offset, and
// every acknowledged batch is where its answer says.
func TestFencingConcurrent(t *testing.T) {
	for _, fb := range fenceBuckets(t) {
		if !fb.concurrent {
			continue // see fenceBuckets
		}
		t.Run(fb.name, func(t *testing.T) {
			ctx := t.Context()
			a := openTest(t, openBucketLog(t, fb.bucket), "", &leaderOptions{Name: "a"})
			id := mustCreate(t, a, "race", 2, TopicConfig{})
			var mu sync.Mutex
			owner := map[[2]int64]string{} // (partition, offset) -> key
			acked := 0
			commit := func(c *leader, key string) error {
				var coords []wal.Coordinate
				for p := int32(0); p < 2; p++ {
					coords = append(coords, coord(wal.TopicPartition{TopicID: id, Partition: p}, 1+int64(p)*100, 3, -1, -1, -1, 1))
				}
				res, err := c.CommitFile(ctx, CommitFileRequest{ObjectKey: key, Coordinates: coords})
				if err != nil {
					return err
				}
				mu.Lock()
				defer mu.Unlock()
				acked++
				for i, r := range res {
					require.NoError(t, r.Err)
					for o := r.BaseOffset; o < r.BaseOffset+3; o++ {
						k := [2]int64{int64(i), o}
						require.Empty(t, owner[k], "offset %v answered to %s and %s", k, owner[k], key)
						owner[k] = key
					}
				}
				return nil
			}
			var wg sync.WaitGroup
			stopA := make(chan struct{})
			for w := 0; w < 4; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; ; i++ {
						select {
						case <-stopA:
							return
						default:
						}
						if err := commit(a, fmt.Sprintf("wal/a-%d-%d", w, i)); err != nil {
							require.True(t, errors.Is(err, ErrNotLeader) || code(err) == kafkaerr.NotLeaderOrFollower, "%v", err)
							return
						}
					}
				}()
			}
			b := openTest(t, openBucketLog(t, fb.bucket), "", &leaderOptions{Name: "b"})
			for i := 0; i < 20; i++ {
				require.NoError(t, commit(b, fmt.Sprintf("wal/b-%d", i)))
			}
			close(stopA)
			wg.Wait()

			// Every acknowledged batch is where its answer says.
			for p := int32(0); p < 2; p++ {
				found, err := b.FindBatches(ctx, wal.TopicPartition{TopicID: id, Partition: p}, 0, 1<<40)
				require.NoError(t, err)
				at := map[int64]string{}
				for _, l := range found.Batches {
					for o := l.BaseOffset; o <= l.LastOffset; o++ {
						at[o] = l.ObjectKey
					}
				}
				for k, key := range owner {
					if k[0] == int64(p) {
						require.Equal(t, key, at[k[1]], "partition %d offset %d", p, k[1])
					}
				}
			}
			t.Logf("%d commits acknowledged across both leaders", acked)
		})
	}
}
