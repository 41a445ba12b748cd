package diskless

import (
	"context"
	"fmt"
	"io"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/wal"
)

// walKeys lists the WAL object keys in the bucket under prefix.
func walKeys(t *testing.T, bucket *blob.Bucket, prefix string) []string {
	t.Helper()
	var err error
	for range 20 {
		var keys []string
		it := bucket.List(&blob.ListOptions{Prefix: prefix + "wal/"})
		for {
			var o *blob.ListObject
			if o, err = it.Next(t.Context()); err != nil {
				break
			}
			keys = append(keys, o.Key)
		}
		if err == io.EOF {
			return keys
		}
		// fileblob's listing fails when a file goes between the read of
		// the folder and its stat (the lifecycle deletes beside it): list
		// again.
	}
	require.NoError(t, err, "listing the bucket")
	return nil
}

// produceAll sends one request with a batch of n records for every
// partition of topics (each of parts partitions) and checks every answer.
func produceAll(t *testing.T, b *Broker, topics []string, parts int32, first, n int) {
	t.Helper()
	var req ProduceRequest
	req.Acks = -1
	for _, name := range topics {
		for p := range parts {
			req.Partitions = append(req.Partitions, ProducePartition{Topic: name, Partition: p, Records: batch(t, kbatch.CodecLZ4, first, n, -1, 0)})
		}
	}
	resp, err := b.Produce(t.Context(), req)
	require.NoError(t, err)
	for _, r := range resp.Partitions {
		require.NoError(t, r.Err, "%s-%d", r.Topic, r.Partition)
		require.Equal(t, int64(first), r.BaseOffset)
	}
}

// checkAll fetches every partition from offset 0 and checks it holds the
// records first..first+n-1 (values value-i).
func checkAll(t *testing.T, b *Broker, topics []string, parts int32, n int) {
	t.Helper()
	for _, name := range topics {
		for p := range parts {
			f, err := b.Fetch(t.Context(), FetchRequest{Partitions: []FetchPartition{{Topic: name, Partition: p, MaxBytes: 1 << 20}}})
			require.NoError(t, err)
			r := f.Partitions[0]
			require.NoError(t, r.Err)
			require.Equal(t, int64(n), r.HighWatermark, "%s-%d", name, p)
			got := records(t, r.Records)
			require.Len(t, got, n)
			for o := range int64(n) {
				require.Equal(t, fmt.Sprintf("value-%d", o), got[o])
			}
		}
	}
}

// TestShardedBroker: with three coordinator shards, one produce request
// spanning every shard is committed to each, reads back, survives a
// restart without the data folder, and the shard count can grow.
func TestShardedBroker(t *testing.T) {
	for name, cfg := range bucketKinds(t) {
		if name == "mem" {
			continue // a mem:// bucket dies with its broker
		}
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			c := cfg(t)
			c.DataDir, c.Shards, c.Linger = t.TempDir(), 3, 5*time.Millisecond
			b, err := Open(ctx, c)
			require.NoError(t, err)
			topics := []string{"a", "b", "c", "d"}
			for _, name := range topics {
				_, err := b.CreateTopic(ctx, name, TopicConfig{Partitions: 3})
				require.NoError(t, err)
			}
			produceAll(t, b, topics, 3, 0, 5)
			produceAll(t, b, topics, 3, 5, 5)
			checkAll(t, b, topics, 3, 10)
			s := b.Stats()
			require.Equal(t, 3, s.Shards)
			require.Greater(t, s.ShardCommits, s.Objects, "objects spanning shards commit to each")
			require.NoError(t, b.Close())
			require.NoError(t, os.RemoveAll(c.DataDir))

			b, err = Open(ctx, c)
			require.NoError(t, err)
			checkAll(t, b, topics, 3, 10)
			require.NoError(t, b.Close())

			c.Shards = 4
			b, err = Open(ctx, c)
			require.NoError(t, err)
			defer b.Close()
			checkAll(t, b, topics, 3, 10)
			_, err = b.CreateTopic(ctx, "e", TopicConfig{Partitions: 4})
			require.NoError(t, err)
			produceAll(t, b, []string{"e"}, 4, 0, 3)
			checkAll(t, b, []string{"e"}, 4, 3)
			require.Equal(t, 4, b.Stats().Shards)
		})
	}
}

// TestObjectDeletion: objects whose batches all went (DeleteRecords,
// retention, a deleted topic) are deleted from the bucket once
// DeletionGrace has passed, and not before.
func TestObjectDeletion(t *testing.T) {
	// In a synctest bubble the grace passes in virtual time, and the
	// deletion's time can be asserted exactly.
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		bucket := memBucket(t)
		b := openTest(t, &Config{Bucket: bucket, Shards: 2, DeletionGrace: 500 * time.Millisecond})
		for _, name := range []string{"keep", "drop"} {
			_, err := b.CreateTopic(ctx, name, TopicConfig{Partitions: 2})
			require.NoError(t, err)
		}
		for i := range 3 {
			produceAll(t, b, []string{"keep", "drop"}, 2, i*4, 4)
		}
		objects := walKeys(t, bucket, "")
		require.Len(t, objects, 3)
		require.NoError(t, b.DeleteTopic(ctx, "drop"))
		time.Sleep(time.Second)
		require.Len(t, walKeys(t, bucket, ""), 3, "objects holding live batches stay")

		deleted := time.Now()
		for p := range int32(2) {
			_, err := b.DeleteRecords(ctx, "keep", p, -1)
			require.NoError(t, err)
		}
		require.Eventually(t, func() bool { return len(walKeys(t, bucket, "")) == 0 }, 30*time.Second, 10*time.Millisecond)
		require.GreaterOrEqual(t, time.Since(deleted), 500*time.Millisecond, "not before the grace")
		require.Equal(t, int64(3), b.Stats().ObjectsDeleted)
		f, err := b.Fetch(ctx, FetchRequest{Partitions: []FetchPartition{{Topic: "keep", Partition: 0, Offset: 12}}})
		require.NoError(t, err)
		require.NoError(t, f.Partitions[0].Err)
		require.Empty(t, f.Partitions[0].Records)
		require.Equal(t, int64(12), f.Partitions[0].HighWatermark)
		require.Equal(t, int64(12), f.Partitions[0].LogStartOffset)
	})
}

// TestCollectOrphans: an object uploaded and never committed (a broker
// that crashed between its PUT and its commit) is deleted by the orphan
// collector once it was named more than OrphanGrace ago; committed
// objects stay.
func TestCollectOrphans(t *testing.T) {
	ctx := t.Context()
	bucket := memBucket(t)
	b := openTest(t, &Config{Bucket: bucket, Prefix: "x/", OrphanInterval: -1, OrphanGrace: time.Minute})
	_, err := b.CreateTopic(ctx, "t", TopicConfig{Partitions: 1})
	require.NoError(t, err)
	produceAll(t, b, []string{"t"}, 1, 0, 5)
	committed := walKeys(t, bucket, "x/")
	require.Len(t, committed, 1)
	old := wal.NewObjectKey("x/", time.Now().Add(-2*time.Minute))
	young := wal.NewObjectKey("x/", time.Now().Add(-30*time.Second))
	foreign := "x/wal/not-a-wal-key"
	for _, k := range []string{old, young, foreign} {
		require.NoError(t, bucket.WriteAll(ctx, k, []byte("junk"), nil))
	}
	run, err := b.CollectOrphans(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, run.Deleted, "%+v", run)
	require.ElementsMatch(t, append([]string{young, foreign}, committed...), walKeys(t, bucket, "x/"))
	require.Equal(t, int64(1), b.Stats().OrphansDeleted)
	checkAll(t, b, []string{"t"}, 1, 5)

	require.NoError(t, b.Close())
	_, err = b.CollectOrphans(ctx)
	require.ErrorIs(t, err, ErrClosed)
}

func memBucket(t *testing.T) *blob.Bucket {
	bucket, err := blob.OpenBucket(context.Background(), "mem://")
	require.NoError(t, err)
	t.Cleanup(func() { bucket.Close() })
	return bucket
}

// TestDescribeTopics: every topic config round-trips, with Kafka's
// defaults for what was left zero, and survives a restart on a fresh data
// folder; a negative size is INVALID_CONFIG.
func TestDescribeTopics(t *testing.T) {
	ctx := t.Context()
	c := &Config{BucketURL: "file://" + t.TempDir(), Shards: 2}
	b, err := Open(ctx, c)
	require.NoError(t, err)
	full := TopicConfig{Partitions: 3, Retention: time.Hour, RetentionBytes: 1 << 30, Compact: true, Delete: true,
		LogAppendTime: true, MaxMessageBytes: 4096, SegmentBytes: 16 << 20, SegmentTime: 10 * time.Minute}
	_, err = b.CreateTopic(ctx, "full", full)
	require.NoError(t, err)
	_, err = b.CreateTopic(ctx, "defaults", TopicConfig{})
	require.NoError(t, err)
	want := map[string]TopicConfig{
		"full": full,
		"defaults": {Partitions: 1, Retention: 7 * 24 * time.Hour, RetentionBytes: -1, Delete: true, MaxMessageBytes: 1048588,
			SegmentBytes: 1 << 30, SegmentTime: 7 * 24 * time.Hour},
	}
	check := func(b *Broker) {
		t.Helper()
		ds, err := b.DescribeTopics(ctx)
		require.NoError(t, err)
		require.Len(t, ds, 2)
		for _, d := range ds {
			require.Equal(t, want[d.Name], d.Config, d.Name)
		}
	}
	check(b)
	for _, bad := range []TopicConfig{{SegmentBytes: -1}, {SegmentTime: -time.Second}, {MaxMessageBytes: -1}} {
		_, err := b.CreateTopic(ctx, "bad", bad)
		require.Equal(t, kafkaerr.InvalidConfig, kafkaerr.CodeOf(err), "%+v", bad)
	}
	require.NoError(t, b.Close())
	b, err = Open(ctx, c)
	require.NoError(t, err)
	defer b.Close()
	check(b)
}
