package diskless

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless/faultbucket"
	"github.com/diskless-go/diskless/internal/s3test"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

// The parallel commit's cases (docs/parallel-commit.md, "The cases"), on
// the Broker with its metadata log in the bucket (CommitAuto: in
// parallel). The coordinator's own tests (coordinator/pending_test.go)
// check the queue, the voids and the resolve in detail.

// parallelProduce sends one idempotent batch of producer pid at sequence
// seq to partition 0 of "t" and returns its answer.
func parallelProduce(t *testing.T, b *Broker, pid int64, first int, seq int32) (int64, error) {
	t.Helper()
	resp, err := b.Produce(context.Background(), ProduceRequest{Acks: -1, Partitions: []ProducePartition{
		{Topic: "t", Partition: 0, Records: batch(t, kbatch.CodecNone, first, 2, pid, seq)}}})
	if err != nil {
		return -1, err
	}
	return resp.Partitions[0].BaseOffset, resp.Partitions[0].Err
}

// fetchAll returns the records of partition 0 of "t" and its high
// watermark.
func fetchT(t *testing.T, b *Broker) (map[int64]string, int64) {
	t.Helper()
	resp, err := b.Fetch(t.Context(), FetchRequest{Partitions: []FetchPartition{{Topic: "t"}}, MaxWait: time.Millisecond})
	require.NoError(t, err)
	p := resp.Partitions[0]
	require.NoError(t, p.Err)
	return records(t, p.Records), p.HighWatermark
}

// parallelBuckets are the stores the parallel commit's tests run on:
// memory, a folder with one writer at a time (gocloud's file:// makes a
// conditional create a check then a rename), and a real S3 server.
func parallelBuckets() map[string]func(t *testing.T) *blob.Bucket {
	return map[string]func(t *testing.T) *blob.Bucket{
		"mem": func(t *testing.T) *blob.Bucket {
			b := memblob.OpenBucket(nil)
			t.Cleanup(func() { b.Close() })
			return b
		},
		"file": func(t *testing.T) *blob.Bucket {
			b, err := blob.OpenBucket(t.Context(), "file://"+t.TempDir())
			require.NoError(t, err)
			t.Cleanup(func() { b.Close() })
			return b
		},
		"s3": func(t *testing.T) *blob.Bucket { return s3test.Start(t).Bucket(t, "parallel") },
	}
}

// TestParallelCommitLostAnswer: a WAL PUT that lands but whose answer is
// lost fails its producer, whose retry of the same batch is appended
// once, at the offsets the first attempt was given (no one saw them).
func TestParallelCommitLostAnswer(t *testing.T) {
	for name, open := range parallelBuckets() {
		t.Run(name, func(t *testing.T) { testParallelCommitLostAnswer(t, open(t)) })
	}
}

func testParallelCommitLostAnswer(t *testing.T, inner *blob.Bucket) {
	var lose atomic.Bool
	bucket, faults, err := faultbucket.Wrap(inner, nil)
	require.NoError(t, err)
	defer bucket.Close()
	var lost atomic.Value // the key whose answer was lost
	faults.SetHook(func(op faultbucket.Op, key string) *faultbucket.Error {
		if op == faultbucket.Put && strings.Contains(key, "wal/") && lose.CompareAndSwap(true, false) {
			lost.Store(key)
			return &faultbucket.Error{AfterEffect: true}
		}
		return nil
	})
	b := openTest(t, &Config{Bucket: bucket, DeletionGrace: time.Millisecond, HedgeMaxDelay: -1})
	require.True(t, b.parallel)
	_, err = b.CreateTopic(t.Context(), "t", TopicConfig{})
	require.NoError(t, err)
	pid, _, err := b.InitProducerID(t.Context())
	require.NoError(t, err)

	off, err := parallelProduce(t, b, pid, 0, 0)
	require.NoError(t, err)
	require.Zero(t, off)
	lose.Store(true)
	_, err = parallelProduce(t, b, pid, 2, 2)
	require.Equal(t, kafkaerr.KafkaStorageError, kafkaerr.CodeOf(err), "the producer is failed: %v", err)
	key := lost.Load().(string)
	ok, err := inner.Exists(t.Context(), key)
	require.NoError(t, err)
	require.True(t, ok, "the object landed all the same")

	off, err = parallelProduce(t, b, pid, 2, 2)
	require.NoError(t, err, "the retry is appended")
	require.Equal(t, int64(2), off, "at the offsets the voided commit gave back")
	recs, hw := fetchT(t, b)
	require.Equal(t, int64(4), hw)
	require.Equal(t, map[int64]string{0: "value-0", 1: "value-1", 2: "value-2", 3: "value-3"}, recs)

	// The landed object of the voided commit holds no batch: the
	// lifecycle deletes it.
	require.Eventually(t, func() bool {
		_, _ = b.coord.RunLifecycle(t.Context())
		ok, err := inner.Exists(t.Context(), key)
		return err == nil && !ok
	}, 10*time.Second, 20*time.Millisecond)
}

// TestParallelCommitZombie: a broker whose commit is logged while its
// object's PUT is held is replaced; the new broker resolves the commit
// before serving (a tombstone takes the key: void), and the held PUT,
// released, finds the key taken and fails: its producer is never told
// the batch was appended, and its retry at the new broker is.
func TestParallelCommitZombie(t *testing.T) {
	for name, open := range parallelBuckets() {
		t.Run(name, func(t *testing.T) { testParallelCommitZombie(t, open(t)) })
	}
}

func testParallelCommitZombie(t *testing.T, inner *blob.Bucket) {
	var hold atomic.Bool
	release := make(chan struct{})
	held := make(chan string, 1)
	bucket, faults, err := faultbucket.Wrap(inner, nil)
	require.NoError(t, err)
	defer bucket.Close()
	faults.SetHook(func(op faultbucket.Op, key string) *faultbucket.Error {
		if op == faultbucket.Put && strings.Contains(key, "wal/") && hold.CompareAndSwap(true, false) {
			held <- key
			<-release
		}
		return nil
	})
	a := openTest(t, &Config{Bucket: bucket, DataDir: t.TempDir(), HedgeMaxDelay: -1})
	_, err = a.CreateTopic(t.Context(), "t", TopicConfig{})
	require.NoError(t, err)
	pid, _, err := a.InitProducerID(t.Context())
	require.NoError(t, err)
	_, err = parallelProduce(t, a, pid, 0, 0)
	require.NoError(t, err)

	logged := countKeys(t, inner, "meta/0/log/")
	hold.Store(true)
	var wg sync.WaitGroup
	var zombieErr error
	wg.Go(func() { _, zombieErr = parallelProduce(t, a, pid, 2, 2) })
	key := <-held
	require.Eventually(t, func() bool { return countKeys(t, inner, "meta/0/log/") > logged }, 10*time.Second, 5*time.Millisecond,
		"the pending commit is logged while its object's PUT is held")

	b := openTest(t, &Config{Bucket: inner, DataDir: t.TempDir()})
	a2, err := inner.Attributes(t.Context(), key)
	require.NoError(t, err)
	require.Zero(t, a2.Size, "the new broker's tombstone holds the key")
	recs, hw := fetchT(t, b)
	require.Equal(t, int64(2), hw, "the void gave its offsets back")
	require.Len(t, recs, 2)

	close(release)
	wg.Wait()
	require.Error(t, zombieErr, "the zombie's producer is not told its batch was appended")
	a3, err := inner.Attributes(t.Context(), key)
	require.NoError(t, err)
	require.Zero(t, a3.Size, "the held PUT did not overwrite the tombstone")

	off, err := parallelProduce(t, b, pid, 2, 2)
	require.NoError(t, err)
	require.Equal(t, int64(2), off)
	recs, hw = fetchT(t, b)
	require.Equal(t, int64(4), hw)
	require.Equal(t, "value-3", recs[3])
}

// TestParallelCommitCrashAfterConfirm: a broker that answered its
// producer (the commit confirmed in its memory, no entry saying so yet)
// and then stopped without closing is replaced: the new broker finds the
// object there and confirms the commit; the record stays readable at the
// same offset.
func TestParallelCommitCrashAfterConfirm(t *testing.T) {
	for name, open := range parallelBuckets() {
		t.Run(name, func(t *testing.T) { testParallelCommitCrashAfterConfirm(t, open(t)) })
	}
}

func testParallelCommitCrashAfterConfirm(t *testing.T, inner *blob.Bucket) {
	a, err := Open(t.Context(), &Config{Bucket: inner, DataDir: t.TempDir(), Linger: 5 * time.Millisecond})
	require.NoError(t, err)
	_, err = a.CreateTopic(t.Context(), "t", TopicConfig{})
	require.NoError(t, err)
	pid, _, err := a.InitProducerID(t.Context())
	require.NoError(t, err)
	for i := range 3 {
		_, err = parallelProduce(t, a, pid, 2*i, int32(2*i))
		require.NoError(t, err)
	}
	before, hw := fetchT(t, a)
	require.Equal(t, int64(6), hw)
	// A crash: the new broker claims the log with a running one still
	// there (its later appends are fenced); it never closes cleanly.
	b := openTest(t, &Config{Bucket: inner, DataDir: t.TempDir()})
	after, hw := fetchT(t, b)
	require.Equal(t, int64(6), hw, "no high watermark goes back")
	require.Equal(t, before, after)
	t.Cleanup(func() { a.Close() })
}

// countKeys counts the objects under prefix.
func countKeys(t *testing.T, bucket *blob.Bucket, prefix string) int {
	n := 0
	it := bucket.List(&blob.ListOptions{Prefix: prefix})
	for {
		_, err := it.Next(t.Context())
		if err != nil {
			return n
		}
		n++
	}
}
