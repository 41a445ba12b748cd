package coordinator

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/wal"
)

// TestFollower: a follower tailing the leader's log answers FindBatches
// and ListOffsets as the leader does once it has caught up, and can start
// from a snapshot when the log is trimmed.
func TestFollower(t *testing.T) {
	ctx := t.Context()
	bucket := memblob.OpenBucket(nil)
	defer bucket.Close()
	log := newTestLog()
	leader := openTest(t, log, "", &leaderOptions{Bucket: bucket, SnapshotEvery: -1})
	id := mustCreate(t, leader, "f", 2, TopicConfig{})
	tp := wal.TopicPartition{TopicID: id, Partition: 1}
	commit := func(key string) {
		_, err := leader.CommitFile(ctx, CommitFileRequest{ObjectKey: key, Coordinates: []wal.Coordinate{coord(tp, 1, 4, -1, -1, -1, 1)}})
		require.NoError(t, err)
	}
	commit("wal/1")

	f, err := OpenFollower(ctx, log.Writer(), &FollowerOptions{Options: Options{Dir: t.TempDir(), Bucket: bucket}})
	require.NoError(t, err)
	defer f.Close()
	got, err := f.FindBatches(ctx, tp, 0, 1<<20)
	require.NoError(t, err)
	require.Equal(t, int64(4), got.HighWatermark)

	commit("wal/2")
	got, err = f.FindBatches(ctx, tp, 0, 1<<20)
	require.NoError(t, err)
	require.Equal(t, int64(4), got.HighWatermark, "a follower is behind until it catches up")
	require.NoError(t, f.CatchUp(ctx))
	want, err := leader.FindBatches(ctx, tp, 0, 1<<20)
	require.NoError(t, err)
	got, err = f.FindBatches(ctx, tp, 0, 1<<20)
	require.NoError(t, err)
	require.Equal(t, want, got)
	lo, err := f.ListOffsets(ctx, tp, LatestTimestamp)
	require.NoError(t, err)
	require.Equal(t, int64(8), lo.Offset)
	require.Equal(t, leader.applied.Load(), f.Applied())

	// A new follower after a snapshot and trim starts from the snapshot.
	_, err = leader.Snapshot(ctx)
	require.NoError(t, err)
	commit("wal/3")
	f2, err := OpenFollower(ctx, log.Writer(), &FollowerOptions{Options: Options{Dir: t.TempDir(), Bucket: bucket}})
	require.NoError(t, err)
	defer f2.Close()
	got, err = f2.FindBatches(ctx, tp, 0, 1<<20)
	require.NoError(t, err)
	require.Equal(t, int64(12), got.HighWatermark)
}

// TestFollowerTails: a follower with Tail applies the leader's commits by
// itself, woken by the log's Wait, over a Mem and over a Bucket log.
func TestFollowerTails(t *testing.T) {
	for _, kind := range []string{"mem", "bucket"} {
		t.Run("log="+kind, func(t *testing.T) {
			ctx := t.Context()
			bucket := memblob.OpenBucket(nil)
			defer bucket.Close()
			open := func() metalog.Log {
				if kind == "mem" {
					return nil
				}
				l, err := metalog.OpenBucket(ctx, bucket, "meta/0/", &metalog.BucketOptions{PollInterval: time.Millisecond})
				require.NoError(t, err)
				t.Cleanup(func() { l.Close() })
				return l
			}
			var leaderLog, followerLog metalog.Log
			if kind == "mem" {
				m := newTestLog()
				leaderLog, followerLog = m, m.Writer()
			} else {
				leaderLog = open()
			}
			leader := openTest(t, leaderLog, "", &leaderOptions{Bucket: bucket, SnapshotEvery: -1})
			id := mustCreate(t, leader, "f", 1, TopicConfig{})
			tp := wal.TopicPartition{TopicID: id, Partition: 0}
			if followerLog == nil {
				followerLog = open()
			}
			f, err := OpenFollower(ctx, followerLog, &FollowerOptions{Options: Options{Dir: t.TempDir(), Bucket: bucket}, Tail: true})
			require.NoError(t, err)
			defer f.Close()
			for i := range 5 {
				_, err := leader.CommitFile(ctx, CommitFileRequest{ObjectKey: fmt.Sprintf("wal/%d", i), Coordinates: []wal.Coordinate{coord(tp, 1, 4, -1, -1, -1, 1)}})
				require.NoError(t, err)
			}
			want := leader.applied.Load()
			require.Eventually(t, func() bool { return f.Applied() == want }, 10*time.Second, time.Millisecond)
			lo, err := f.ListOffsets(ctx, tp, LatestTimestamp)
			require.NoError(t, err)
			require.Equal(t, int64(20), lo.Offset)
		})
	}
}

// gatedLog holds a follower's Reads and Waits while the gate is shut, so a
// test can let the leader run ahead of it.
type gatedLog struct {
	metalog.Log
	mu   sync.Mutex
	open chan struct{} // closed while the gate is open
}

func newGatedLog(l metalog.Log) *gatedLog {
	g := &gatedLog{Log: l, open: make(chan struct{})}
	close(g.open)
	return g
}

func (g *gatedLog) shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = make(chan struct{})
}

func (g *gatedLog) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.open)
}

func (g *gatedLog) pass(ctx context.Context) error {
	g.mu.Lock()
	ch := g.open
	g.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gatedLog) Read(ctx context.Context, from int64, fn func(int64, []byte) error) error {
	if err := g.pass(ctx); err != nil {
		return err
	}
	return g.Log.Read(ctx, from, fn)
}

func (g *gatedLog) Wait(ctx context.Context, offset int64) (int64, error) {
	end, err := g.Log.Wait(ctx, offset)
	if err != nil {
		return end, err
	}
	return end, g.pass(ctx)
}

// TestFollowerBehindTrim: a tailing follower held back while the leader
// commits, takes a snapshot and trims the log past what the follower has
// applied cannot catch up. WaitApplied says so at once, with an error
// wrapping metalog.ErrTrimmed (rather than waiting for its deadline, and
// a broker's reads waiting on it every time); opened again on the same
// folder, the follower loads the newest snapshot and has every commit.
func TestFollowerBehindTrim(t *testing.T) {
	ctx := t.Context()
	bucket := memblob.OpenBucket(nil)
	defer bucket.Close()
	m := newTestLog()
	leader := openTest(t, m, "", &leaderOptions{Bucket: bucket, SnapshotEvery: -1})
	id := mustCreate(t, leader, "f", 1, TopicConfig{})
	tp := wal.TopicPartition{TopicID: id, Partition: 0}
	commit := func(i int) {
		_, err := leader.CommitFile(ctx, CommitFileRequest{ObjectKey: fmt.Sprintf("wal/%d", i), Coordinates: []wal.Coordinate{coord(tp, 1, 4, -1, -1, -1, 1)}})
		require.NoError(t, err)
	}
	commit(0)

	dir := t.TempDir()
	gate := newGatedLog(m.Writer())
	f, err := OpenFollower(ctx, gate, &FollowerOptions{Options: Options{Dir: dir, Bucket: bucket}, Tail: true})
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.WaitApplied(ctx, leader.applied.Load()))
	behind := f.Applied()

	gate.shut()
	for i := 1; i <= 5; i++ {
		commit(i)
	}
	_, err = leader.Snapshot(ctx)
	require.NoError(t, err)
	require.Greater(t, m.Start(), behind+1, "the snapshot trimmed the log past the follower")
	gate.release()

	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err = f.WaitApplied(wctx, leader.applied.Load())
	require.ErrorIs(t, err, metalog.ErrTrimmed)
	require.NoError(t, wctx.Err(), "WaitApplied reported the trim before its deadline")
	require.ErrorIs(t, f.WaitApplied(ctx, leader.applied.Load()), metalog.ErrTrimmed, "and goes on reporting it")
	require.NoError(t, f.Close())

	f2, err := OpenFollower(ctx, m.Writer(), &FollowerOptions{Options: Options{Dir: dir, Bucket: bucket}, Tail: true})
	require.NoError(t, err)
	defer f2.Close()
	require.NoError(t, f2.WaitApplied(ctx, leader.applied.Load()))
	got, err := f2.FindBatches(ctx, tp, 0, 1<<20)
	require.NoError(t, err)
	require.Equal(t, int64(24), got.HighWatermark)
	commit(6)
	require.NoError(t, f2.WaitApplied(ctx, leader.applied.Load()), "and tails the log again")
	lo, err := f2.ListOffsets(ctx, tp, LatestTimestamp)
	require.NoError(t, err)
	require.Equal(t, int64(28), lo.Offset)
}
