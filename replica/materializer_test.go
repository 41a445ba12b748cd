package replica

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob" // the file:// scheme
	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless/cache"
	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/internal/s3test"
	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/segment"
	"github.com/diskless-go/diskless/wal"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is a coordinator, a bucket and a cache, and a way to commit objects
// to them as a broker does.
type env struct {
	coord   *coordinator.Coordinator
	bucket  *blob.Bucket
	cache   *cache.Cache
	objects int
}

// bucketKinds are the buckets the tests that read objects through the
// cache and upload segments run over: memory, a folder, and a real S3
// server over HTTP. Each bucket is closed when the test ends.
func bucketKinds() map[string]func(t testing.TB) *blob.Bucket {
	return map[string]func(t testing.TB) *blob.Bucket{
		"mem": newMemBucket,
		"file": func(t testing.TB) *blob.Bucket {
			b, err := blob.OpenBucket(t.Context(), "file://"+t.TempDir())
			require.NoError(t, err)
			t.Cleanup(func() { b.Close() })
			return b
		},
		"s3": func(t testing.TB) *blob.Bucket { return s3test.Start(t).Bucket(t, "replica") },
	}
}

// newMemBucket returns a memory bucket that is closed when the test ends.
func newMemBucket(t testing.TB) *blob.Bucket {
	b := memblob.OpenBucket(nil)
	t.Cleanup(func() { b.Close() })
	return b
}

// newEnv returns an env over a memory bucket.
func newEnv(t testing.TB) *env { return newBucketEnv(t, newMemBucket(t)) }

// newBucketEnv returns an env over b, which the caller closes.
func newBucketEnv(t testing.TB, b *blob.Bucket) *env {
	ctx := context.Background()
	e := &env{bucket: b}
	var err error
	log := metalog.NewMem(nil)
	e.coord, err = coordinator.Open(ctx, []metalog.Log{log}, &coordinator.Options{Dir: t.TempDir(), ApplyInterval: -1})
	require.NoError(t, err)
	t.Cleanup(func() { e.coord.Close() })
	e.cache, err = cache.New(e.bucket, nil)
	require.NoError(t, err)
	t.Cleanup(func() { e.cache.Close() })
	return e
}

// commit uploads one object holding the batches and commits it.
func (e *env) commit(t testing.TB, batches map[wal.TopicPartition][][]byte) {
	ctx := context.Background()
	e.objects++
	obj := wal.NewObject(fmt.Sprintf("wal/%06d", e.objects))
	for tp, bs := range batches {
		for _, b := range bs {
			obj.Add(&wal.Request{Batches: []wal.Batch{{TopicPartition: tp, Data: kbatch.Batch(b)}}})
		}
	}
	var buf bytes.Buffer
	coords, err := obj.Encode(&buf, nil)
	require.NoError(t, err)
	require.NoError(t, e.bucket.WriteAll(ctx, obj.Key(), buf.Bytes(), nil))
	res, err := e.coord.CommitFile(ctx, coordinator.CommitFileRequest{ObjectKey: obj.Key(), Size: obj.Size(), Coordinates: coords})
	require.NoError(t, err)
	for _, r := range res {
		require.NoError(t, r.Err)
	}
}

func mkBatch(t testing.TB, codec kbatch.Codec, first, n int) []byte {
	b := kbatch.NewBuilder(codec)
	for i := first; i < first+n; i++ {
		b.Append(1_764_500_000_000+int64(i), []byte(fmt.Sprintf("k%d", i)), bytes.Repeat([]byte{byte(i)}, 200))
	}
	raw, err := b.Build(nil)
	require.NoError(t, err)
	return raw
}

// fetchAll reads tp from the coordinator the way a broker's fetch does.
func (e *env) fetchAll(t *testing.T, tp wal.TopicPartition, from int64) []byte {
	ctx := context.Background()
	var out []byte
	for {
		found, err := e.coord.FindBatches(ctx, tp, from, 1<<20)
		require.NoError(t, err)
		if len(found.Batches) == 0 {
			return out
		}
		out, err = ReadRuns(ctx, e.cache, found.Batches, from, 1<<40, 0, out)
		require.NoError(t, err)
		from = found.Batches[len(found.Batches)-1].LastOffset + 1
	}
}

func readLocal(t *testing.T, log *segment.Log, from int64) []byte {
	var out []byte
	for from < log.LatestOffset() {
		r, err := log.Read(context.Background(), from, 1<<20)
		require.NoError(t, err)
		out = append(out, r.Records...)
		it := kbatch.NewBatchIter(r.Records)
		for it.Next() {
			from = it.Batch().NextOffset()
		}
	}
	return out
}

func TestMaterialize(t *testing.T) {
	for name, bucket := range bucketKinds() {
		t.Run(name, func(t *testing.T) { testMaterialize(t, newBucketEnv(t, bucket(t))) })
	}
}

func testMaterialize(t *testing.T, e *env) {
	ctx := t.Context()
	id, err := e.coord.CreatePartitions(ctx, coordinator.CreatePartitionsRequest{Name: "m", Partitions: 2, Config: coordinator.TopicConfig{LogAppendTime: true}})
	require.NoError(t, err)
	tp := wal.TopicPartition{TopicID: id, Partition: 1}
	other := wal.TopicPartition{TopicID: id, Partition: 0}
	off := 0
	for i := 0; i < 20; i++ {
		codec := kbatch.Codecs[i%len(kbatch.Codecs)]
		e.commit(t, map[wal.TopicPartition][][]byte{tp: {mkBatch(t, codec, off, 3), mkBatch(t, codec, off+3, 2)}, other: {mkBatch(t, codec, 0, 1)}})
		off += 5
	}
	dir := t.TempDir()
	m, err := NewMaterializer(e.coord, e.cache, dir, &MaterializerOptions{Start: StartEarliest, Poll: time.Hour, Log: segment.LogOptions{SegmentBytes: 8 << 10}})
	require.NoError(t, err)
	require.NoError(t, m.Add(ctx, tp, nil))
	end, err := m.Sync(ctx, tp)
	require.NoError(t, err)
	require.Equal(t, int64(100), end)
	log, err := m.Log(tp)
	require.NoError(t, err)
	want := e.fetchAll(t, tp, 0)
	require.Equal(t, want, readLocal(t, log, 0), "the local log holds the bytes a fetch serves")
	require.Greater(t, len(log.Segments()), 1, "rolled")

	// Every batch decodes with franz-go and carries the injected offsets.
	next := int64(0)
	it := kbatch.NewBatchIter(want)
	for it.Next() {
		var kb kmsg.RecordBatch
		require.NoError(t, kb.ReadFrom(it.Batch()))
		require.Equal(t, next, kb.FirstOffset)
		require.Equal(t, int16(0x08), kb.Attributes&0x08, "LogAppendTime written in")
		next += int64(kb.LastOffsetDelta) + 1
	}

	// More commits; the local log follows.
	e.commit(t, map[wal.TopicPartition][][]byte{tp: {mkBatch(t, kbatch.CodecNone, 100, 4)}})
	end, err = m.Sync(ctx, tp)
	require.NoError(t, err)
	require.Equal(t, int64(104), end)
	require.NoError(t, m.Close())

	// The local files pass the segment package's own recovery.
	rec, err := segment.OpenLog(ctx, filepath.Join(dir, fmt.Sprintf("%s-%d", tp.TopicID, tp.Partition)), nil)
	require.NoError(t, err)
	require.Equal(t, int64(104), rec.LatestOffset())
	require.NoError(t, rec.Close())

	// Delete the local data: a new replica rebuilds the same bytes.
	require.NoError(t, os.RemoveAll(dir))
	m2, err := NewMaterializer(e.coord, e.cache, dir, &MaterializerOptions{Start: StartEarliest, Poll: time.Hour})
	require.NoError(t, err)
	defer m2.Close()
	require.NoError(t, m2.Add(ctx, tp, nil))
	_, err = m2.Sync(ctx, tp)
	require.NoError(t, err)
	log2, _ := m2.Log(tp)
	require.Equal(t, e.fetchAll(t, tp, 0), readLocal(t, log2, 0))
}

func TestStartStrategies(t *testing.T) {
	ctx := t.Context()
	e := newEnv(t)
	id, err := e.coord.CreatePartitions(ctx, coordinator.CreatePartitionsRequest{Name: "s", Partitions: 1})
	require.NoError(t, err)
	tp := wal.TopicPartition{TopicID: id}
	for i := 0; i < 10; i++ {
		e.commit(t, map[wal.TopicPartition][][]byte{tp: {mkBatch(t, kbatch.CodecNone, i*10, 10)}})
	}
	for _, c := range []struct {
		start     Start
		tail      int64
		wantFirst int64
	}{
		{StartEarliest, 0, 0},
		{StartLatest, 0, 100},
		{StartTailWindow, 3 * 10 * 230, 70}, // about three batches of 10 records of ~230 bytes
	} {
		m, err := NewMaterializer(e.coord, e.cache, t.TempDir(), &MaterializerOptions{Start: c.start, TailBytes: c.tail, Poll: time.Hour})
		require.NoError(t, err)
		require.NoError(t, m.Add(ctx, tp, nil))
		end, err := m.Sync(ctx, tp)
		require.NoError(t, err)
		require.Equal(t, int64(100), end)
		log, _ := m.Log(tp)
		first := int64(100)
		if segs := log.Segments(); len(segs) > 0 && log.Size() > 0 {
			r, err := log.Read(ctx, log.EarliestOffset(), 1)
			require.NoError(t, err)
			b, err := kbatch.ParseBatch(r.Records)
			require.NoError(t, err)
			first = b.BaseOffset()
		}
		require.InDelta(t, c.wantFirst, first, 10, "start %d", c.start)
		require.Equal(t, e.fetchAll(t, tp, first), readLocal(t, log, first), "start %d: the bytes a fetch serves", c.start)
		require.NoError(t, m.Close())
	}
}

// TestAddConflicting: adding a partition again with the same options is a
// no-op; with other options it is an error, and the first ones stay.
func TestAddConflicting(t *testing.T) {
	ctx := t.Context()
	e := newEnv(t)
	id, err := e.coord.CreatePartitions(ctx, coordinator.CreatePartitionsRequest{Name: "c", Partitions: 1})
	require.NoError(t, err)
	tp := wal.TopicPartition{TopicID: id}
	m, err := NewMaterializer(e.coord, e.cache, t.TempDir(), &MaterializerOptions{Poll: time.Hour})
	require.NoError(t, err)
	defer m.Close()
	earliest, latest := StartEarliest, StartLatest
	logOpts := segment.LogOptions{SegmentBytes: 8 << 10}
	require.NoError(t, m.Add(ctx, tp, &PartitionOptions{Start: &earliest, Log: &logOpts}))
	same := logOpts
	same.Logger = zap.NewNop() // the Logger and Clock are not options of the log's content
	require.NoError(t, m.Add(ctx, tp, &PartitionOptions{Start: &earliest, Log: &same}), "the same options again")
	err = m.Add(ctx, tp, &PartitionOptions{Start: &latest, Log: &logOpts})
	require.ErrorIs(t, err, ErrConflictingOptions)
	require.ErrorContains(t, err, "start")
	other := logOpts
	other.SegmentBytes = 16 << 10
	require.ErrorIs(t, m.Add(ctx, tp, &PartitionOptions{Start: &earliest, Log: &other}), ErrConflictingOptions)
	require.ErrorIs(t, m.Add(ctx, tp, nil), ErrConflictingOptions, "the defaults differ from the first options")
	e.commit(t, map[wal.TopicPartition][][]byte{tp: {mkBatch(t, kbatch.CodecNone, 0, 3)}})
	end, err := m.Sync(ctx, tp)
	require.NoError(t, err)
	require.Equal(t, int64(3), end, "the partition keeps its first options and works")
}
