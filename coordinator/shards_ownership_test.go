package coordinator

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob/memblob"
	"gocloud.dev/gcerrors"

	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/internal/testbucket"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal"
)

const testGrace = time.Minute

// spanFixture is three shards and a topic with one partition on each:
// partition i is shard i's.
func spanFixture(t *testing.T) (*shardsFixture, func(shard int) wal.TopicPartition) {
	f := newShardsFixture(t, 3, memblob.OpenBucket(nil), nil)
	id, err := f.s.CreatePartitions(t.Context(), CreatePartitionsRequest{Name: "t", Partitions: 3, Config: TopicConfig{Retention: -1}})
	require.NoError(t, err)
	require.Equal(t, []int{0, 1, 2}, shardsOf(t, f.s, id, 3))
	return f, func(shard int) wal.TopicPartition { return wal.TopicPartition{TopicID: id, Partition: int32(shard)} }
}

// commitSpanning uploads and commits an object with a batch on every
// shard and returns its key and owners list.
func (f *shardsFixture) commitSpanning(tp func(int) wal.TopicPartition) (string, []int32) {
	f.t.Helper()
	key := f.upload(f.clock.Now(), 400)
	res, err := f.s.CommitFile(context.Background(), CommitFileRequest{ObjectKey: key, Size: 400, Coordinates: coordsFor(tp(0), tp(1), tp(2))})
	require.NoError(f.t, err)
	for _, r := range res {
		require.NoError(f.t, r.Err)
	}
	c, err := f.s.local(0)
	require.NoError(f.t, err)
	_, _, owners, _ := shardObject(f.t, c, key)
	require.Len(f.t, owners, 3)
	return key, owners
}

// release drops shard's batches (all of them) by DeleteRecords.
func (f *shardsFixture) release(tp func(int) wal.TopicPartition, shard int32) {
	f.t.Helper()
	_, err := f.s.DeleteRecords(context.Background(), tp(int(shard)), -1)
	require.NoError(f.t, err)
}

func (f *shardsFixture) run() LifecycleRun {
	f.t.Helper()
	run, err := f.s.RunLifecycle(context.Background())
	require.NoError(f.t, err)
	return run
}

// knownBy returns the shards that know key.
func (f *shardsFixture) knownBy(key string) []int {
	f.t.Helper()
	var out []int
	for i := range f.s.Shards().NumShards() {
		c, err := f.s.local(i)
		require.NoError(f.t, err)
		k, err := c.KnownKeys(context.Background(), []string{key})
		require.NoError(f.t, err)
		if k[key] {
			out = append(out, i)
		}
	}
	return out
}

// TestLifecycleChain: the first owner hands the object to the next that
// holds batches in it, passing over one that holds none; the last owner
// deletes it a grace period after its last batch went, and every owner
// forgets it once its commit deadline has passed.
func TestLifecycleChain(t *testing.T) {
	f, tp := spanFixture(t)
	key, owners := f.commitSpanning(tp)
	a, b, c := owners[0], owners[1], owners[2]

	f.release(tp, a)
	run := f.run()
	require.Equal(t, 1, run.HandedOff)
	require.Equal(t, int64(1), f.s.Stats().Shards[a].HandedOff)
	require.Equal(t, int64(1), f.s.Stats().Shards[b].Received, "b logged receiving it")
	require.Zero(t, f.s.Stats().Shards[c].Received)
	require.Zero(t, f.run().HandedOff, "handed on once")

	f.clock.Advance(time.Second)
	f.release(tp, c) // not the owner: nothing happens
	require.Equal(t, LifecycleRun{}, f.run())
	f.restart() // what the workers knew is gone; the logs know the rest

	f.clock.Advance(time.Second)
	lastBatch := f.clock.Now()
	f.release(tp, b)
	run = f.run()
	require.Equal(t, 1, run.Waiting, "b is the last owner (c declines) and waits for the grace")
	require.True(t, f.existing()[key])
	f.clock.Advance(testGrace - time.Millisecond)
	require.Equal(t, 1, f.run().Waiting)
	require.True(t, f.existing()[key])
	f.clock.Advance(time.Millisecond)
	require.Equal(t, lastBatch.Add(testGrace), f.clock.Now())
	run = f.run()
	require.Equal(t, 1, run.Deleted)
	require.False(t, f.existing()[key])
	require.Equal(t, int64(1), f.s.Stats().Shards[b].Deleted)
	require.Equal(t, []int{0, 1, 2}, f.knownBy(key), "forgotten only past the commit deadline")

	f.clock.Advance(5*time.Minute - testGrace - 2*time.Second)
	require.Equal(t, 0, f.run().Deleted, "deleted once")
	require.Equal(t, []int{0, 1, 2}, f.knownBy(key))
	f.clock.Advance(time.Millisecond)
	f.run()
	require.Empty(t, f.knownBy(key))
	for i := range 3 {
		require.Equal(t, int64(1), f.s.Stats().Shards[i].Forgotten, "shard %d", i)
	}
	require.Equal(t, LifecycleRun{}, f.run())
}

// TestLifecycleLatestDeath: the grace counts from the last batch of any
// owner, including owners that declined.
func TestLifecycleLatestDeath(t *testing.T) {
	f, tp := spanFixture(t)
	key, owners := f.commitSpanning(tp)
	f.release(tp, owners[0]) // no run yet
	f.clock.Advance(30 * time.Second)
	last := f.clock.Now()
	f.release(tp, owners[1])
	f.release(tp, owners[2])
	f.clock.Advance(35 * time.Second)
	run := f.run()
	require.Equal(t, LifecycleRun{Waiting: 1}, run, "the first owner is the last: both others decline")
	f.clock.Advance(last.Add(testGrace).Sub(f.clock.Now()) - time.Millisecond)
	require.Equal(t, 1, f.run().Waiting)
	f.clock.Advance(time.Millisecond)
	require.Equal(t, 1, f.run().Deleted)
	require.False(t, f.existing()[key])
}

// TestLifecycleTopicDeletion: a deleted topic's batches are gone too; an
// object committed to one shard alone has that shard as its only owner.
func TestLifecycleTopicDeletion(t *testing.T) {
	ctx := t.Context()
	f, tp := spanFixture(t)
	key, _ := f.commitSpanning(tp)
	single := f.upload(f.clock.Now(), 100)
	_, err := f.s.CommitFile(ctx, CommitFileRequest{ObjectKey: single, Coordinates: coordsFor(tp(1))})
	require.NoError(t, err)
	require.NoError(t, f.s.DeleteTopic(ctx, tp(0).TopicID))
	require.Equal(t, 2, f.run().Waiting)
	f.clock.Advance(testGrace)
	require.Equal(t, 2, f.run().Deleted)
	require.False(t, f.existing()[key])
	require.False(t, f.existing()[single])
}

// TestLifecycleStall: the first owner never had the commit. The shard that
// had it, once its batches have been gone for StallAfter, makes the first
// owner take it, and the object goes the usual way. Until every owner
// forgets it, and after (the deadline), its commit is refused.
func TestLifecycleStall(t *testing.T) {
	ctx := t.Context()
	f, tp := spanFixture(t)
	key := f.upload(f.clock.Now(), 100)
	c1, err := f.s.local(1)
	require.NoError(t, err)
	_, err = c1.CommitFile(ctx, CommitFileRequest{ObjectKey: key, Owners: []int{0, 1}, Coordinates: coordsFor(tp(1))})
	require.NoError(t, err)
	f.release(tp, 1)
	require.Equal(t, LifecycleRun{}, f.run(), "shard 1 is not the owner")
	f.clock.Advance(10*testGrace - time.Millisecond)
	require.Equal(t, LifecycleRun{}, f.run())
	f.clock.Advance(time.Millisecond)
	run := f.run()
	require.Equal(t, 1, run.StallChecks)
	require.Equal(t, 1, run.Waiting, "shard 0 owns it now, dead since now, and waits")
	require.Equal(t, []int{0, 1}, f.knownBy(key))
	c0, err := f.s.local(0)
	require.NoError(t, err)
	_, err = c0.CommitFile(ctx, CommitFileRequest{ObjectKey: key, Owners: []int{0, 1}, Coordinates: coordsFor(tp(0))})
	require.Equal(t, kafkaerr.KafkaStorageError, code(err), "the late commit finds the key received, and is refused retriably")
	f.clock.Advance(testGrace)
	run = f.run()
	require.Equal(t, 1, run.Deleted)
	require.False(t, f.existing()[key])
	require.Empty(t, f.knownBy(key), "11 minutes: past the 5 minute deadline")
	_, err = c0.CommitFile(ctx, CommitFileRequest{ObjectKey: key, Owners: []int{0, 1}, Coordinates: coordsFor(tp(0))})
	require.Equal(t, kafkaerr.RequestTimedOut, code(err), "forgotten, but past its deadline")
}

// TestLifecycleHandOffToStranger: the next owner never had the commit: it
// receives the object (a row with no batches) and goes on at once, in the
// same RunLifecycle.
func TestLifecycleHandOffToStranger(t *testing.T) {
	ctx := t.Context()
	f, tp := spanFixture(t)
	key := f.upload(f.clock.Now(), 100)
	c2, err := f.s.local(2)
	require.NoError(t, err)
	_, err = c2.CommitFile(ctx, CommitFileRequest{ObjectKey: key, Owners: []int{2, 0, 1}, Coordinates: coordsFor(tp(2))})
	require.NoError(t, err)
	c1, err := f.s.local(1)
	require.NoError(t, err)
	_, err = c1.CommitFile(ctx, CommitFileRequest{ObjectKey: key, Owners: []int{2, 0, 1}, Coordinates: coordsFor(tp(1))})
	require.NoError(t, err)
	f.release(tp, 1)
	f.release(tp, 2)
	run := f.run()
	require.Equal(t, 1, run.HandedOff, "2 to 0, which never had it: it takes it")
	require.Equal(t, 1, run.Waiting, "0 asks 1, which declines: 0 is the last owner")
	require.Equal(t, int64(1), f.s.Stats().Shards[0].Received)
	require.Equal(t, []int{0, 1, 2}, f.knownBy(key))
	f.clock.Advance(testGrace)
	require.Equal(t, 1, f.run().Deleted)
}

// TestLifecycleRetry: a failing bucket, or an unreachable shard, fails a
// step; it is retried after a growing backoff until it succeeds.
func TestLifecycleRetry(t *testing.T) {
	ctx := t.Context()
	bucket, faults := testbucket.Wrap(t, memblob.OpenBucket(nil))
	f := newShardsFixture(t, 2, bucket, &Options{Lifecycle: LifecycleOptions{Backoff: time.Second, MaxBackoff: 4 * time.Second}})
	id, err := f.s.CreatePartitions(ctx, CreatePartitionsRequest{Name: "t", Partitions: 2})
	require.NoError(t, err)
	tp := func(i int) wal.TopicPartition { return wal.TopicPartition{TopicID: id, Partition: int32(i)} }
	key := f.upload(f.clock.Now(), 100)
	_, err = f.s.CommitFile(ctx, CommitFileRequest{ObjectKey: key, Coordinates: coordsFor(tp(0), tp(1))})
	require.NoError(t, err)
	f.release(tp, 0)
	f.release(tp, 1)
	f.clock.Advance(testGrace)

	failing := true
	faults.Set(func(op, k string) testbucket.Fault {
		if op == "delete" && failing {
			return testbucket.Fault{Err: &testbucket.Error{Code: gcerrors.Internal, Msg: "delete"}}
		}
		return testbucket.Fault{}
	})
	_, err = f.s.RunLifecycle(ctx)
	require.Error(t, err)
	require.Equal(t, 1, faults.Count("delete"))
	for i, wait := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second} {
		run, err := f.s.RunLifecycle(ctx)
		require.NoError(t, err, "within the backoff: not tried")
		require.Equal(t, 1, run.Deferred)
		f.clock.Advance(wait) // the backoff is jittered in [wait/2, wait]
		_, err = f.s.RunLifecycle(ctx)
		require.Error(t, err)
		require.Equal(t, i+2, faults.Count("delete"))
	}
	require.Positive(t, f.s.Stats().Shards[0].LifecycleErrors+f.s.Stats().Shards[1].LifecycleErrors)

	// The bucket heals, a shard goes away: the deletion succeeds, the
	// forgetting waits for the shard.
	failing = false
	f.clock.Advance(5 * time.Minute)
	f.s.mu.Lock()
	downShard := 1
	down := f.s.mu.coords[downShard]
	f.s.mu.coords[downShard] = nil
	f.s.mu.Unlock()
	run, _ := f.s.RunLifecycle(ctx) // the owner may be the shard that is down
	f.s.mu.Lock()
	f.s.mu.coords[downShard] = down
	f.s.mu.Unlock()
	f.clock.Advance(5 * time.Second)
	run2 := f.run()
	require.Equal(t, 1, run.Deleted+run2.Deleted)
	require.False(t, f.existing()[key])
	require.Empty(t, f.knownBy(key))
}

// TestLifecycleBackground: with an Interval, the workers run by
// themselves (on the system clock) and stop with Close.
func TestLifecycleBackground(t *testing.T) {
	ctx := t.Context()
	bucket := memblob.OpenBucket(nil)
	s, err := Open(ctx, []metalog.Log{newTestLog(), newTestLog()}, &Options{
		Prefix: testPrefix, ApplyInterval: -1,
		Bucket:         bucket,
		Lifecycle:      LifecycleOptions{Grace: 50 * time.Millisecond, Interval: 20 * time.Millisecond},
		OrphanInterval: -1,
		OrphanGrace:    200 * time.Millisecond,
	})
	require.NoError(t, err)
	defer s.Close()
	id, err := s.CreatePartitions(ctx, CreatePartitionsRequest{Name: "t", Partitions: 2})
	require.NoError(t, err)
	key := wal.NewObjectKey(testPrefix, time.Now())
	require.NoError(t, bucket.WriteAll(ctx, key, []byte{0}, nil))
	_, err = s.CommitFile(ctx, CommitFileRequest{ObjectKey: key, Coordinates: coordsFor(wal.TopicPartition{TopicID: id}, wal.TopicPartition{TopicID: id, Partition: 1})})
	require.NoError(t, err)
	require.NoError(t, s.DeleteTopic(ctx, id))
	require.Eventually(t, func() bool {
		ok, _ := bucket.Exists(ctx, key)
		return !ok
	}, 10*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool {
		for i := range 2 {
			c, err := s.local(i)
			require.NoError(t, err)
			if k, err := c.KnownKeys(ctx, []string{key}); err != nil || k[key] {
				return false
			}
		}
		return true
	}, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
	_, err = s.CommitFile(ctx, CommitFileRequest{ObjectKey: "x", Coordinates: coordsFor(wal.TopicPartition{TopicID: id})})
	require.NoError(t, err, "no partition is served: nothing to do")
	_, _, err = s.InitProducerID(ctx)
	require.ErrorIs(t, err, ErrClosed)
}

// TestLifecycleDueAtGrace: with an Interval of an hour, an object is still
// deleted as its grace ends (the worker wakes for it rather than at the
// next tick), and OnDelete hears of it.
func TestLifecycleDueAtGrace(t *testing.T) {
	// In a synctest bubble time is virtual: the wait for the grace takes
	// no real time, and its length is exact.
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		bucket := memblob.OpenBucket(nil)
		deleted := make(chan string, 1)
		s, err := Open(ctx, []metalog.Log{newTestLog()}, &Options{
			Prefix: testPrefix, ApplyInterval: -1,
			Bucket: bucket,
			Lifecycle: LifecycleOptions{Grace: 300 * time.Millisecond, Interval: time.Hour,
				OnDelete: func(key string) { deleted <- key }},
			OrphanInterval: -1,
		})
		require.NoError(t, err)
		defer s.Close()
		id, err := s.CreatePartitions(ctx, CreatePartitionsRequest{Name: "t", Partitions: 1})
		require.NoError(t, err)
		key := wal.NewObjectKey(testPrefix, time.Now())
		require.NoError(t, bucket.WriteAll(ctx, key, []byte{0}, nil))
		_, err = s.CommitFile(ctx, CommitFileRequest{ObjectKey: key, Coordinates: coordsFor(wal.TopicPartition{TopicID: id})})
		require.NoError(t, err)
		start := time.Now()
		_, err = s.DeleteRecords(ctx, wal.TopicPartition{TopicID: id}, -1)
		require.NoError(t, err)
		select {
		case got := <-deleted:
			require.Equal(t, key, got)
		case <-time.After(time.Minute):
			t.Fatal("not deleted within a minute: the worker waited for its Interval")
		}
		// Passes run at most once a second (lifecycle.start), so the object
		// goes at the first pass after its grace: between the grace and the
		// next tick.
		took := time.Since(start)
		require.GreaterOrEqual(t, took, 300*time.Millisecond, "not before the grace")
		require.Less(t, took, time.Hour, "not at the next tick")
		ok, err := bucket.Exists(ctx, key)
		require.NoError(t, err)
		require.False(t, ok)
	})
}
