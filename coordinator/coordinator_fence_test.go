package coordinator

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/diskless-go/diskless/coordinator/state"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/memblob"
	"gocloud.dev/gcerrors"

	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/internal/s3test"
	"github.com/diskless-go/diskless/internal/testbucket"
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

// fenceAnswers records the offsets each acknowledged commit of the
// fencing tests was given, and fails the test if one is given twice.
type fenceAnswers struct {
	mu    sync.Mutex
	owner map[[2]int64]string // (partition, offset) -> object key
	acked int
}

// commit commits key to partitions 0 and 1 of topic id through c, three
// records each, and records the answers.
func (a *fenceAnswers) commit(t *testing.T, c *leader, id uuid.UUID, key string) error {
	var coords []wal.Coordinate
	for p := int32(0); p < 2; p++ {
		coords = append(coords, coord(wal.TopicPartition{TopicID: id, Partition: p}, 1+int64(p)*100, 3, -1, -1, -1, 1))
	}
	res, err := c.CommitFile(t.Context(), CommitFileRequest{ObjectKey: key, Coordinates: coords})
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.acked++
	for i, r := range res {
		require.NoError(t, r.Err)
		for o := r.BaseOffset; o < r.BaseOffset+3; o++ {
			k := [2]int64{int64(i), o}
			require.Empty(t, a.owner[k], "offset %v answered to %s and %s", k, a.owner[k], key)
			a.owner[k] = key
		}
	}
	return nil
}

// requireFound checks, through c, that every acknowledged batch is where
// its answer says, and that partitions 0 and 1 of topic id have no gap.
func (a *fenceAnswers) requireFound(t *testing.T, c *leader, id uuid.UUID) {
	for p := int32(0); p < 2; p++ {
		found, err := c.FindBatches(t.Context(), wal.TopicPartition{TopicID: id, Partition: p}, 0, 1<<40)
		require.NoError(t, err)
		at := map[int64]string{}
		next := int64(0)
		for _, l := range found.Batches {
			require.Equal(t, next, l.BaseOffset, "partition %d: no gap", p)
			next = l.LastOffset + 1
			for o := l.BaseOffset; o <= l.LastOffset; o++ {
				at[o] = l.ObjectKey
			}
		}
		for k, key := range a.owner {
			if k[0] == int64(p) {
				require.Equal(t, key, at[k[1]], "partition %d offset %d", p, k[1])
			}
		}
	}
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
			a := openTest(t, openBucketLog(t, fb.bucket), "", &leaderOptions{Name: "a"})
			id := mustCreate(t, a, "race", 2, TopicConfig{})
			ans := &fenceAnswers{owner: map[[2]int64]string{}}
			commit := func(c *leader, key string) error { return ans.commit(t, c, id, key) }
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

			ans.requireFound(t, b, id)
			t.Logf("%d commits acknowledged across both leaders", ans.acked)
		})
	}
}

// TestFencingPipelined: as TestFencingConcurrent, on a metalog.Bucket
// that keeps four puts in flight (BucketOptions.MaxInFlight), with one
// put in ten failing transiently, one in ten failing after it landed
// (an ambiguous answer) and one in ten slower than the hedge delay (so a
// second put of the same bytes races it), and puts slowed so that
// several are in flight when the second leader claims the log. A put that fails leaves the
// ones sent behind it to land after the other leader's entries or after
// a gap: every answered offset is still answered once, and a follower
// that replays the log from the start (skipping those entries) reaches
// the same partitions, without gaps, as the leaders acknowledged them.
func TestFencingPipelined(t *testing.T) {
	for _, fb := range fenceBuckets(t) {
		if !fb.concurrent {
			continue // see fenceBuckets
		}
		t.Run(fb.name, func(t *testing.T) {
			ctx := t.Context()
			bucket, faults := testbucket.Wrap(t, fb.bucket)
			var n atomic.Int64
			faults.Set(func(op, key string) testbucket.Fault {
				if op != "put" || !strings.Contains(key, "/log/") {
					return testbucket.Fault{}
				}
				time.Sleep(time.Duration(rand.N(3)) * time.Millisecond) // puts overlap and finish out of order
				switch n.Add(1) % 10 {
				case 3:
					return testbucket.Fault{Err: &testbucket.Error{Code: gcerrors.Internal, Msg: "transient"}}
				case 7:
					return testbucket.Fault{Err: &testbucket.Error{Code: gcerrors.Internal, Msg: "ambiguous"}, After: true}
				case 5:
					// Past the hedge delay: a second put of the same bytes.
					slow := make(chan struct{})
					time.AfterFunc(60*time.Millisecond, func() { close(slow) })
					return testbucket.Fault{Wait: slow}
				}
				return testbucket.Fault{}
			})
			var logs []*metalog.Bucket
			open := func() *metalog.Bucket {
				l, err := metalog.OpenBucket(ctx, bucket, "p/meta/0/", &metalog.BucketOptions{MaxInFlight: 4, RetryBackoff: time.Millisecond})
				require.NoError(t, err)
				t.Cleanup(func() { l.Close() })
				logs = append(logs, l)
				return l
			}
			a := openTest(t, open(), "", &leaderOptions{Name: "a"})
			id := mustCreate(t, a, "race", 2, TopicConfig{})
			ans := &fenceAnswers{owner: map[[2]int64]string{}}
			commit := func(c *leader, key string) error { return ans.commit(t, c, id, key) }
			// Four goroutines commit through a until it is fenced (or its
			// log fails), or until stop.
			var wg sync.WaitGroup
			stop := make(chan struct{})
			for w := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 25; i++ { // a bounded log: the follower below replays it all
						select {
						case <-stop:
							return
						default:
						}
						if err := commit(a, fmt.Sprintf("wal/a-%d-%d", w, i)); err != nil {
							return // fenced, or its log failed
						}
					}
				}()
			}
			// takeOver opens a leader on a new database, again while its
			// claim's put fails.
			takeOver := func(name string) *leader {
				for attempt := 0; ; attempt++ {
					require.Less(t, attempt, 20)
					c, err := openLeader(ctx, open(), &leaderOptions{Name: name, Dir: t.TempDir()})
					if err == nil {
						t.Cleanup(func() { c.Close() })
						return c
					}
				}
			}
			b := takeOver("b")
			for i := range 40 {
				if err := commit(b, fmt.Sprintf("wal/b-%d", i)); err != nil {
					// b's log failed (an injected failure): b stops, and a
					// new leader takes over.
					b = takeOver(fmt.Sprintf("b%d", i))
				}
			}
			close(stop)
			wg.Wait()

			// A follower that replays the whole log (a new database) finds
			// every acknowledged batch where its answer says, and no gap.
			faults.Set(nil)
			f, err := openLeader(ctx, open(), &leaderOptions{Name: "check", Dir: t.TempDir()})
			require.NoError(t, err)
			t.Cleanup(func() { f.Close() })
			ans.requireFound(t, f, id)
			var hedges int64
			for _, l := range logs {
				hedges += l.Stats().Hedges
			}
			t.Logf("%d offsets acknowledged; %d log puts, %d hedged; %d entries skipped on replay", len(ans.owner), n.Load(), hedges, f.Stats().Skipped)
		})
	}
}

// TestFencedByLeftovers: the puts that the leader of a pipelined bucket
// log had in flight when another claimed the log land after the claim.
// The new leader's next append meets one and is fenced, but no other
// leader holds the log: the new leader stops without ErrNotLeader (so the
// Broker reopens it, where ErrNotLeader would leave it down), serves
// again once reopened, and a follower replays all of it, skipping the
// leftover. A later claim, by contrast, still stops it with ErrNotLeader.
func TestFencedByLeftovers(t *testing.T) {
	ctx := t.Context()
	bucket := memblob.OpenBucket(nil)
	t.Cleanup(func() { bucket.Close() })
	open := func() *metalog.Bucket {
		l, err := metalog.OpenBucket(ctx, bucket, "p/meta/0/", &metalog.BucketOptions{MaxInFlight: 4})
		require.NoError(t, err)
		t.Cleanup(func() { l.Close() })
		return l
	}
	a := openTest(t, open(), "", &leaderOptions{Name: "a"})
	id := mustCreate(t, a, "t", 2, TopicConfig{})
	ans := &fenceAnswers{owner: map[[2]int64]string{}}
	require.NoError(t, ans.commit(t, a, id, "wal/a-0"))

	lb, bdir := open(), t.TempDir()
	b := openTest(t, lb, bdir, &leaderOptions{Name: "b"})
	require.NoError(t, ans.commit(t, b, id, "wal/b-0"))
	// What a sent next, landed after b's claim and b's first entry.
	leftover := state.AppendEntry(nil, state.Entry{Epoch: a.epoch, Prev: a.store.Chain.CRC, Records: []state.Record{state.EpochRecord{Epoch: a.epoch, Leader: "a"}}})
	leftover = state.AppendEntry(nil, state.Entry{Epoch: a.epoch, Prev: entryCRC(leftover)})
	require.NoError(t, bucket.WriteAll(ctx, fmt.Sprintf("p/meta/0/log/%020d", b.applied.Load()+1), leftover, nil))
	require.Error(t, ans.commit(t, b, id, "wal/b-1"))
	require.Error(t, b.Err())
	require.NotErrorIs(t, b.Err(), ErrNotLeader, "fenced by an earlier leader's leftover")
	require.NoError(t, b.Close())

	b = openTest(t, lb, bdir, &leaderOptions{Name: "b"})
	for i := range 3 {
		require.NoError(t, ans.commit(t, b, id, fmt.Sprintf("wal/b-%d", 2+i)))
	}
	f := openTest(t, open(), "", &leaderOptions{Name: "check"})
	ans.requireFound(t, f, id)
	require.EqualValues(t, 1, f.Stats().Skipped)

	// A later leader's claim: b is fenced for good.
	c := openTest(t, open(), "", &leaderOptions{Name: "c"})
	require.NoError(t, ans.commit(t, c, id, "wal/c-0"))
	require.Error(t, ans.commit(t, b, id, "wal/b-5"))
	require.ErrorIs(t, b.Err(), ErrNotLeader)
}
