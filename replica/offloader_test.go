package replica

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
	"gocloud.dev/blob"

	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/internal/fakeclock"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/segment"
	"github.com/diskless-go/diskless/wal"
)

// fetchTiered reads tp from offset to the high watermark as a broker's
// fetch does: diskless batches through the cache with offsets injected,
// tiered segments by range reads.
func (e *env) fetchTiered(t *testing.T, tp wal.TopicPartition, from int64) []byte {
	t.Helper()
	ctx := context.Background()
	var out []byte
	for {
		data, found, err := Read(ctx, e.coord, e.cache, tp, from, 1<<20)
		require.NoError(t, err)
		if len(data) == 0 {
			require.GreaterOrEqual(t, from, found.HighWatermark, "nothing read at %d below the high watermark", from)
			return out
		}
		out = append(out, data...)
		from = kbatch.LastOffset(data) + 1
	}
}

// tieredEnv is an env over bucket with a topic of one partition whose
// segments are small, and n objects of 5 batches committed to it.
func tieredEnv(t *testing.T, bucket *blob.Bucket, cfg coordinator.TopicConfig, n int) (*env, wal.TopicPartition) {
	e := newBucketEnv(t, bucket)
	id, err := e.coord.CreatePartitions(t.Context(), coordinator.CreatePartitionsRequest{Name: "tiered", Partitions: 1, Config: cfg})
	require.NoError(t, err)
	tp := wal.TopicPartition{TopicID: id}
	off := 0
	for i := range n {
		codec := kbatch.Codecs[i%len(kbatch.Codecs)]
		var bs [][]byte
		for range 5 {
			bs = append(bs, mkBatch(t, codec, off, 4))
			off += 4
		}
		e.commit(t, map[wal.TopicPartition][][]byte{tp: bs})
	}
	return e, tp
}

func newOffloader(t *testing.T, e *env, dir string) (*Materializer, *Offloader) {
	t.Helper()
	m, err := NewMaterializer(e.coord, e.cache, dir, &MaterializerOptions{Poll: time.Hour})
	require.NoError(t, err)
	o, err := NewOffloader(e.coord, m, e.bucket, &OffloaderOptions{Interval: -1, Uploader: 7})
	require.NoError(t, err)
	t.Cleanup(func() {
		o.Close()
		m.Close()
	})
	return m, o
}

func topicConfig(t *testing.T, e *env, tp wal.TopicPartition) coordinator.TopicConfig {
	ts, err := e.coord.Topics(t.Context())
	require.NoError(t, err)
	for _, ti := range ts {
		if ti.ID == tp.TopicID {
			return ti.Config
		}
	}
	t.Fatalf("no topic %s", tp.TopicID)
	return coordinator.TopicConfig{}
}

// TestOffloadRoundTrip: after offload, a consumer reading from offset 0
// gets exactly the bytes it got before, the coordinator serves the old
// offsets from tiered segments, and the segment files are Kafka's; over
// each of bucketKinds.
func TestOffloadRoundTrip(t *testing.T) {
	for name, bucket := range bucketKinds() {
		t.Run(name, func(t *testing.T) { testOffloadRoundTrip(t, bucket(t)) })
	}
}

func testOffloadRoundTrip(t *testing.T, bucket *blob.Bucket) {
	ctx := t.Context()
	e, tp := tieredEnv(t, bucket, coordinator.TopicConfig{Retention: -1, SegmentBytes: 16 << 10}, 40)
	before := e.fetchTiered(t, tp, 0)
	require.Equal(t, int64(800), kbatch.LastOffset(before)+1)

	_, o := newOffloader(t, e, t.TempDir())
	require.NoError(t, o.Assign(ctx, tp, topicConfig(t, e, tp)))
	run, err := o.Offload(ctx, tp)
	require.NoError(t, err)
	require.Greater(t, run.Segments, 2, "%+v", run)
	require.Greater(t, run.DisklessStart, int64(0))
	require.Less(t, run.DisklessStart, int64(800), "the active segment stays diskless")

	found, err := e.coord.FindBatches(ctx, tp, 0, 1<<20)
	require.NoError(t, err)
	require.NotNil(t, found.Remote, "offset 0 is tiered")
	require.Empty(t, found.Batches)
	require.Equal(t, run.DisklessStart, found.DisklessStart)
	require.Equal(t, before, e.fetchTiered(t, tp, 0), "the same bytes, byte for byte")
	for _, from := range []int64{1, 37, run.DisklessStart - 1, run.DisklessStart, 799} {
		got := e.fetchTiered(t, tp, from)
		require.Equal(t, from, firstRecordOffsetAtOrAfter(t, got, from), "a read from %d", from)
	}

	segs, err := e.coord.RemoteSegments(ctx, tp)
	require.NoError(t, err)
	require.Len(t, segs, run.Segments)
	for i, s := range segs {
		if i > 0 {
			require.Equal(t, segs[i-1].EndOffset+1, s.BaseOffset, "contiguous")
		}
		checkRemoteFiles(t, e, s)
	}
	require.Equal(t, o.Stats().Segments, int64(run.Segments))

	// A second pass has nothing to do until more is produced.
	again, err := o.Offload(ctx, tp)
	require.NoError(t, err)
	require.Zero(t, again.Segments)
}

// firstRecordOffsetAtOrAfter checks that batches decode with franz-go and
// returns the first record offset at or after from.
func firstRecordOffsetAtOrAfter(t *testing.T, batches []byte, from int64) int64 {
	it := kbatch.NewBatchIter(batches)
	for it.Next() {
		var kb kmsg.RecordBatch
		require.NoError(t, kb.ReadFrom(it.Batch()))
		if last := kb.FirstOffset + int64(kb.LastOffsetDelta); last >= from {
			return max(kb.FirstOffset, from)
		}
	}
	require.NoError(t, it.Err())
	return -1
}

// checkRemoteFiles reads a tiered segment's files back: the .log decodes
// batch by batch within the segment's offsets, and the producer snapshot,
// leader-epoch checkpoint and metadata parse and agree.
func checkRemoteFiles(t *testing.T, e *env, s coordinator.RemoteSegment) {
	ctx := t.Context()
	read := func(ext string) []byte {
		b, err := e.bucket.ReadAll(ctx, s.Key+ext)
		require.NoError(t, err, s.Key+ext)
		return b
	}
	log := read(".log")
	require.Len(t, log, int(s.Size))
	it := kbatch.NewBatchIter(log)
	first, last := int64(-1), int64(-1)
	for it.Next() {
		require.NoError(t, it.Batch().CheckCRC())
		if first < 0 {
			first = it.Batch().BaseOffset()
		}
		last = it.Batch().LastOffset()
	}
	require.NoError(t, it.Err())
	require.False(t, it.Partial())
	require.Equal(t, s.BaseOffset, first)
	require.LessOrEqual(t, last, s.EndOffset)
	require.Len(t, read(".index"), int(s.IndexSize))
	require.Len(t, read(".timeindex"), int(s.TimeIndexSize))
	_, err := segment.ParseProducerSnapshot(read(".snapshot"))
	require.NoError(t, err)
	epochs, err := segment.ParseLeaderEpochCheckpoint(read(".leader_epoch_checkpoint"))
	require.NoError(t, err)
	require.NotEmpty(t, epochs)
	var meta segment.RemoteLogSegmentMetadata
	require.NoError(t, meta.Unmarshal(read(".metadata")))
	require.Equal(t, s.ID, meta.SegmentID)
	require.Equal(t, s.BaseOffset, meta.StartOffset)
	require.Equal(t, s.EndOffset, meta.EndOffset)
	require.Equal(t, int32(7), meta.BrokerID)
	require.Equal(t, int32(s.Size), meta.SegmentSizeInBytes)
}

// TestOffloadRestart: delete every local file and start again: the
// partition rebuilds from the diskless start offset, offloading goes on
// where it was, and every offset reads the same bytes.
func TestOffloadRestart(t *testing.T) {
	ctx := t.Context()
	e, tp := tieredEnv(t, newMemBucket(t), coordinator.TopicConfig{Retention: -1, SegmentBytes: 16 << 10}, 30)
	before := e.fetchTiered(t, tp, 0)
	dir := t.TempDir()
	m, o := newOffloader(t, e, dir)
	require.NoError(t, o.Assign(ctx, tp, topicConfig(t, e, tp)))
	first, err := o.Offload(ctx, tp)
	require.NoError(t, err)
	require.NoError(t, o.Close())
	require.NoError(t, m.Close())
	require.NoError(t, os.RemoveAll(dir))

	off := 600
	for i := range 20 {
		e.commit(t, map[wal.TopicPartition][][]byte{tp: {mkBatch(t, kbatch.Codecs[i%len(kbatch.Codecs)], off, 4)}})
		off += 4
	}
	before = append(before, e.fetchTiered(t, tp, 600)...)

	m2, o2 := newOffloader(t, e, dir)
	require.NoError(t, o2.Assign(ctx, tp, topicConfig(t, e, tp)))
	log, err := m2.Log(tp)
	require.NoError(t, err)
	second, err := o2.Offload(ctx, tp)
	require.NoError(t, err)
	require.Greater(t, second.DisklessStart, first.DisklessStart)
	log, err = m2.Log(tp)
	require.NoError(t, err)
	require.LessOrEqual(t, log.EarliestOffset(), second.DisklessStart, "rebuilt from the diskless start")
	require.Equal(t, before, e.fetchTiered(t, tp, 0))
}

// TestTieredRetention: DeleteRecords and retention.bytes across tiered
// and diskless data drop whole tiered segments below the new log start,
// and reads from it serve the same bytes as before.
func TestTieredRetention(t *testing.T) {
	ctx := t.Context()
	e, tp := tieredEnv(t, newMemBucket(t), coordinator.TopicConfig{Retention: -1, SegmentBytes: 16 << 10}, 40)
	before := e.fetchTiered(t, tp, 0)
	_, o := newOffloader(t, e, t.TempDir())
	require.NoError(t, o.Assign(ctx, tp, topicConfig(t, e, tp)))
	run, err := o.Offload(ctx, tp)
	require.NoError(t, err)
	segs, err := e.coord.RemoteSegments(ctx, tp)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(segs), 3)

	// Into the second tiered segment: the first goes.
	cut := segs[1].BaseOffset + 3
	_, err = e.coord.DeleteRecords(ctx, tp, cut)
	require.NoError(t, err)
	_, err = e.coord.FindBatches(ctx, tp, 0, 1<<20)
	require.Equal(t, kafkaerr.OffsetOutOfRange, kafkaerr.CodeOf(err))
	left, err := e.coord.RemoteSegments(ctx, tp)
	require.NoError(t, err)
	require.Len(t, left, len(segs)-1)
	require.Equal(t, segs[1].ID, left[0].ID, "the segment holding the cut stays")
	got := e.fetchTiered(t, tp, cut)
	require.Equal(t, before[len(before)-len(got):], got, "the same bytes from the batch holding the cut")

	// Past the diskless start: every tiered segment goes.
	cut = run.DisklessStart + 2
	_, err = e.coord.DeleteRecords(ctx, tp, cut)
	require.NoError(t, err)
	left, err = e.coord.RemoteSegments(ctx, tp)
	require.NoError(t, err)
	require.Empty(t, left)
	found, err := e.coord.FindBatches(ctx, tp, cut, 1<<20)
	require.NoError(t, err)
	require.Nil(t, found.Remote)
	require.Equal(t, cut, found.DisklessStart)
	got = e.fetchTiered(t, tp, cut)
	require.Equal(t, before[len(before)-len(got):], got)

	// The local log follows the log start at its next catch-up.
	m := o.m
	_, err = m.Sync(ctx, tp)
	require.NoError(t, err)
	log, err := m.Log(tp)
	require.NoError(t, err)
	require.GreaterOrEqual(t, log.EarliestOffset(), cut)
}

// TestOffloadCompacted: a compacted topic's segments are cleaned before
// they are offloaded: the tiered data holds the latest value of each key
// among the closed segments.
func TestOffloadCompacted(t *testing.T) {
	ctx := t.Context()
	e := newEnv(t)
	id, err := e.coord.CreatePartitions(ctx, coordinator.CreatePartitionsRequest{Name: "c", Partitions: 1,
		Config: coordinator.TopicConfig{Compact: true, Retention: -1, SegmentBytes: 4 << 10}})
	require.NoError(t, err)
	tp := wal.TopicPartition{TopicID: id}
	for i := range 60 {
		b := kbatch.NewBuilder(kbatch.CodecNone)
		for k := range 5 {
			b.Append(1_764_500_000_000+int64(i), []byte(fmt.Sprintf("key-%d", k)), []byte(fmt.Sprintf("v%d-%d", i, k)))
		}
		raw, err := b.Build(nil)
		require.NoError(t, err)
		e.commit(t, map[wal.TopicPartition][][]byte{tp: {raw}})
	}
	_, o := newOffloader(t, e, t.TempDir())
	require.NoError(t, o.Assign(ctx, tp, topicConfig(t, e, tp)))
	run, err := o.Offload(ctx, tp)
	require.NoError(t, err)
	require.Positive(t, run.Segments)
	records := 0
	data := e.fetchTiered(t, tp, 0)
	it := kbatch.NewBatchIter(data)
	var rr kbatch.RecordReader
	for it.Next() {
		require.NoError(t, rr.Reset(it.Batch()))
		for rr.Next() {
			records++
		}
	}
	require.Less(t, records, 300, "compaction dropped superseded values")
	require.GreaterOrEqual(t, records, 5)
}

// TestOffloadersRace: two offloaders of one partition (a mistake the
// caller should not make) upload the same segments; the coordinator takes
// one of each, refuses the other, and the data is whole.
func TestOffloadersRace(t *testing.T) {
	ctx := t.Context()
	e, tp := tieredEnv(t, newMemBucket(t), coordinator.TopicConfig{Retention: -1, SegmentBytes: 16 << 10}, 30)
	before := e.fetchTiered(t, tp, 0)
	_, a := newOffloader(t, e, t.TempDir())
	_, b := newOffloader(t, e, t.TempDir())
	cfg := topicConfig(t, e, tp)
	require.NoError(t, a.Assign(ctx, tp, cfg))
	require.NoError(t, b.Assign(ctx, tp, cfg))
	var wg sync.WaitGroup
	for _, o := range []*Offloader{a, b} {
		wg.Go(func() {
			for range 3 {
				o.Offload(ctx, tp) // errors expected: refusals
			}
		})
	}
	wg.Wait()
	segs, err := e.coord.RemoteSegments(ctx, tp)
	require.NoError(t, err)
	for i := 1; i < len(segs); i++ {
		require.Greater(t, segs[i].BaseOffset, segs[i-1].EndOffset)
	}
	require.Equal(t, before, e.fetchTiered(t, tp, 0))
	require.Equal(t, int64(len(segs)), a.Stats().Segments+b.Stats().Segments)
}

// TestLocalRetentionKeepsUnoffloaded: the local log's retention deletes
// offloaded segments only.
func TestLocalRetentionKeepsUnoffloaded(t *testing.T) {
	ctx := t.Context()
	e, tp := tieredEnv(t, newMemBucket(t), coordinator.TopicConfig{Retention: -1, SegmentBytes: 16 << 10}, 30)
	m, err := NewMaterializer(e.coord, e.cache, t.TempDir(), &MaterializerOptions{Poll: time.Hour, Log: segment.LogOptions{RetentionTime: time.Nanosecond}})
	require.NoError(t, err)
	defer m.Close()
	o, err := NewOffloader(e.coord, m, e.bucket, &OffloaderOptions{Interval: -1})
	require.NoError(t, err)
	defer o.Close()
	require.NoError(t, o.Assign(ctx, tp, topicConfig(t, e, tp)))
	_, err = m.Sync(ctx, tp)
	require.NoError(t, err)
	log, _ := m.Log(tp)
	require.Equal(t, int64(0), log.EarliestOffset(), "nothing offloaded: every segment stays")
	run, err := o.Offload(ctx, tp)
	require.NoError(t, err)
	_, err = m.Sync(ctx, tp)
	require.NoError(t, err)
	log, _ = m.Log(tp)
	require.Equal(t, run.DisklessStart, log.EarliestOffset(), "offloaded segments went, the rest stayed")
}

// TestAssignConflicting: assigning a partition again with the same topic
// config is a no-op; with another it is an error.
func TestAssignConflicting(t *testing.T) {
	ctx := t.Context()
	e, tp := tieredEnv(t, newMemBucket(t), coordinator.TopicConfig{Retention: -1, SegmentBytes: 16 << 10}, 1)
	_, o := newOffloader(t, e, t.TempDir())
	cfg := topicConfig(t, e, tp)
	require.NoError(t, o.Assign(ctx, tp, cfg))
	require.NoError(t, o.Assign(ctx, tp, cfg), "the same config again")
	other := cfg
	other.SegmentBytes = 32 << 10
	require.ErrorIs(t, o.Assign(ctx, tp, other), ErrConflictingOptions)
}

// TestOffloadInBackground: with an Interval, the Materializer's workers
// offload each assigned partition every Interval (on a fake clock).
func TestOffloadInBackground(t *testing.T) {
	ctx := t.Context()
	e, tp := tieredEnv(t, newMemBucket(t), coordinator.TopicConfig{Retention: -1, SegmentBytes: 16 << 10}, 40)
	clk := fakeclock.New(time.Unix(1_764_500_000, 0))
	m, err := NewMaterializer(e.coord, e.cache, t.TempDir(), &MaterializerOptions{Poll: time.Hour, Workers: 2, Clock: clk})
	require.NoError(t, err)
	defer m.Close()
	o, err := NewOffloader(e.coord, m, e.bucket, &OffloaderOptions{Interval: time.Minute})
	require.NoError(t, err)
	defer o.Close()
	require.NoError(t, o.Assign(ctx, tp, topicConfig(t, e, tp)))
	require.Zero(t, o.Stats().Segments, "nothing before the first Interval")
	for o.Stats().Segments == 0 {
		clk.Advance(time.Minute)
		runtime.Gosched()
	}
	found, err := e.coord.FindBatches(ctx, tp, 0, 1)
	require.NoError(t, err)
	require.Positive(t, found.DisklessStart, "segments offloaded in the background")
	require.NoError(t, o.Unassign(tp))
	_, err = o.Offload(ctx, tp)
	require.ErrorIs(t, err, ErrNotMaterialized)
}
