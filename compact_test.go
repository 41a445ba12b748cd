package diskless

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/replica"
	"github.com/diskless-go/diskless/segment"
	"github.com/diskless-go/diskless/wal"
)

// keyed is one record as read back: offset, key, value (nil: a
// tombstone).
type keyed struct {
	Offset     int64
	Key, Value string
	Tombstone  bool
}

func keyedRecords(t testing.TB, data []byte) []keyed {
	t.Helper()
	var out []keyed
	it := kbatch.NewBatchIter(data)
	var rr kbatch.RecordReader
	for it.Next() {
		require.NoError(t, it.Batch().CheckCRC())
		if it.Batch().Control() {
			continue
		}
		require.NoError(t, rr.Reset(it.Batch()))
		for rr.Next() {
			r := rr.Record()
			out = append(out, keyed{Offset: r.Offset, Key: string(r.Key), Value: string(r.Value), Tombstone: r.Value == nil})
		}
		require.NoError(t, rr.Err())
	}
	require.NoError(t, it.Err())
	return out
}

// classicCompacted returns what segment's classic cleaner keeps of
// batches (a consumer's read of a partition from offset 0), in a log
// rolled after them and compacted once with deleteRetention, and the log's
// end offset.
func classicCompacted(t *testing.T, batches []byte, deleteRetention time.Duration, clock func() time.Time) (kept []byte, end int64) {
	t.Helper()
	ctx := t.Context()
	classic, err := segment.OpenLog(ctx, t.TempDir(), &segment.LogOptions{CleanupPolicy: segment.CleanupCompact, DeleteRetention: deleteRetention, Clock: clock})
	require.NoError(t, err)
	defer classic.Close()
	_, err = classic.Append(ctx, batches)
	require.NoError(t, err)
	require.NoError(t, classic.Roll(ctx))
	res, err := classic.Compact(ctx)
	require.NoError(t, err)
	require.True(t, res.Cleaned)
	for off := classic.EarliestOffset(); off < classic.LatestOffset(); {
		r, err := classic.Read(ctx, off, 1<<20)
		require.NoError(t, err)
		if len(r.Records) == 0 {
			break
		}
		kept = append(kept, r.Records...)
		off = kbatch.LastOffset(r.Records) + 1
	}
	return kept, classic.LatestOffset()
}

// TestCompactDifferential: a compacted topic's partition written with
// random keys, values and tombstones, compacted by replica.CompactPartition,
// reads back (keys, values, offsets) exactly what segment's classic
// cleaner keeps of the same batches with the same settings; the objects
// the range held lose their rows, and the consumer reads fewer bytes.
func TestCompactDifferential(t *testing.T) {
	ctx := t.Context()
	now := time.Now()
	clock := func() time.Time { return now }
	b := openTest(t, &Config{})
	_, err := b.CreateTopic(ctx, "c", TopicConfig{Partitions: 1, Compact: true, Retention: -1})
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range 60 {
		bld := kbatch.NewBuilder(kbatch.CodecNone)
		for j := range 1 + rng.IntN(8) {
			key := []byte(fmt.Sprintf("k%d", rng.IntN(20)))
			var val []byte
			if rng.IntN(6) != 0 {
				val = []byte(fmt.Sprintf("v%d-%d", i, j))
			}
			bld.Append(now.Add(-time.Hour).UnixMilli(), key, val)
		}
		data, err := bld.Build(nil)
		require.NoError(t, err)
		require.Equal(t, 0, int(produceOne(t, b, "c", 0, data).ErrorCode))
	}
	before := fetchAllFrom(t, b, "c", 0, 0)

	// The classic cleaner over the same batches.
	opts := &replica.CompactOptions{DeleteRetention: time.Hour, Clock: clock, TempDir: t.TempDir()}
	want, end := classicCompacted(t, before, time.Hour, clock)

	_, tp, err := b.partition(ctx, "c", 0)
	require.NoError(t, err)
	st, err := replica.CompactPartition(ctx, b.coord, b.cache, b.bucket, tp, opts)
	require.NoError(t, err)
	require.True(t, st.Cleaned)
	require.Less(t, st.BytesWritten, st.BytesRead)
	after := fetchAllFrom(t, b, "c", 0, 0)
	require.Equal(t, keyedRecords(t, want), keyedRecords(t, after), "the records the classic cleaner keeps, at their offsets")
	require.Less(t, len(after), len(before), "a consumer from the start reads less")
	t.Logf("compacted %d to %d bytes (%d records to %d)", st.BytesRead, st.BytesWritten, len(keyedRecords(t, before)), len(keyedRecords(t, after)))
	lo, err := b.ListOffsets(ctx, "c", 0, LatestTimestamp)
	require.NoError(t, err)
	require.Equal(t, end, lo.Offset, "the high watermark is kept")

	// Produce goes on after it, at the next offset.
	r := produceOne(t, b, "c", 0, batch(t, kbatch.CodecNone, 0, 1, -1, -1))
	require.Equal(t, lo.Offset, r.BaseOffset)
}

// TestCompactConcurrent: with the broker compacting every 20 ms, a
// producer and a consumer run throughout: within every pass of the
// consumer from offset 0 the offsets increase, every record is the one
// produced at its offset, and afterwards the latest record of every key
// is there.
func TestCompactConcurrent(t *testing.T) {
	ctx := t.Context()
	b := openTest(t, &Config{CompactInterval: 20 * time.Millisecond, Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))})
	_, err := b.CreateTopic(ctx, "c", TopicConfig{Partitions: 1, Compact: true, Retention: -1})
	require.NoError(t, err)
	var mu sync.Mutex
	produced := map[int64]string{} // offset -> value
	latest := map[string]int64{}   // key -> offset of its latest record
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			key := fmt.Sprintf("k%d", i%10)
			bld := kbatch.NewBuilder(kbatch.CodecNone)
			bld.Append(time.Now().UnixMilli(), []byte(key), []byte(fmt.Sprintf("v%d", i)))
			data, err := bld.Build(nil)
			if !assertNoError(t, err) {
				return
			}
			r := produceOne(t, b, "c", 0, data)
			if r.ErrorCode != 0 {
				t.Errorf("produce: %v", r.Err)
				return
			}
			mu.Lock()
			produced[r.BaseOffset], latest[key] = fmt.Sprintf("v%d", i), r.BaseOffset
			mu.Unlock()
		}
	})
	passes := 0
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			prev := int64(-1)
			for off := int64(0); ; {
				f := fetchOne(t, b, "c", 0, off, false)
				if len(f.Records) == 0 {
					break
				}
				for _, r := range keyedRecords(t, f.Records) {
					if r.Offset <= prev {
						t.Errorf("offset %d after %d in one pass", r.Offset, prev)
						return
					}
					prev = r.Offset
					mu.Lock()
					v, ok := produced[r.Offset]
					mu.Unlock()
					if ok && v != r.Value {
						t.Errorf("offset %d holds %q, produced %q", r.Offset, r.Value, v)
						return
					}
				}
				off = kbatch.LastOffset(f.Records) + 1
			}
			passes++
		}
	})
	require.Eventually(t, func() bool {
		mu.Lock()
		n := len(produced)
		mu.Unlock()
		return b.Stats().Compactions >= 5 && n >= 300
	}, 60*time.Second, 10*time.Millisecond)
	close(stop)
	wg.Wait()
	got := map[int64]string{}
	for _, r := range keyedRecords(t, fetchAllFrom(t, b, "c", 0, 0)) {
		got[r.Offset] = r.Value
	}
	for key, off := range latest {
		require.Equal(t, produced[off], got[off], "the latest record of %s, at %d", key, off)
	}
	s := b.Stats()
	require.Positive(t, s.CompactBytesRead)
	t.Logf("%d compactions (%d bytes read, %d written), %d consumer passes, %d records produced, %d left", s.Compactions, s.CompactBytesRead, s.CompactBytesWritten, passes, len(produced), len(got))
}

// TestCompactTopicSettings: the compactor takes a topic's settings: with
// min.compaction.lag.ms an hour, records a minute old are not compacted;
// the topic's config says so.
func TestCompactTopicSettings(t *testing.T) {
	ctx := t.Context()
	b := openTest(t, &Config{CompactInterval: -1})
	_, err := b.CreateTopic(ctx, "lag", TopicConfig{Partitions: 1, Compact: true, MinCompactionLag: time.Hour})
	require.NoError(t, err)
	for range 5 {
		bld := kbatch.NewBuilder(kbatch.CodecNone)
		bld.Append(time.Now().Add(-time.Minute).UnixMilli(), []byte("k"), []byte("v"))
		data, err := bld.Build(nil)
		require.NoError(t, err)
		require.Equal(t, 0, int(produceOne(t, b, "lag", 0, data).ErrorCode))
	}
	ts, err := b.DescribeTopics(ctx)
	require.NoError(t, err)
	require.Equal(t, time.Hour, ts[0].Config.MinCompactionLag)
	_, tp, err := b.partition(ctx, "lag", 0)
	require.NoError(t, err)
	st, err := b.CompactPartition(ctx, tp)
	require.NoError(t, err)
	require.False(t, st.Cleaned, "younger than min.compaction.lag.ms")
	require.Len(t, keyedRecords(t, fetchAllFrom(t, b, "lag", 0, 0)), 5)
}

// TestCompactDirtyRatios: Stats.DirtyRatios holds each partition's dirty
// ratio as its last pass found it: 0 after a pass that cleaned it, the
// ratio under min.cleanable.dirty.ratio that kept a pass from cleaning.
func TestCompactDirtyRatios(t *testing.T) {
	ctx := t.Context()
	b := openTest(t, &Config{CompactInterval: -1})
	_, err := b.CreateTopic(ctx, "dirt", TopicConfig{Partitions: 1, Compact: true, MinCleanableDirtyRatio: 0.9})
	require.NoError(t, err)
	update := func() {
		bld := kbatch.NewBuilder(kbatch.CodecNone)
		bld.Append(time.Now().UnixMilli(), []byte("k"), bytes.Repeat([]byte("v"), 100))
		data, err := bld.Build(nil)
		require.NoError(t, err)
		require.Equal(t, 0, int(produceOne(t, b, "dirt", 0, data).ErrorCode))
	}
	_, tp, err := b.partition(ctx, "dirt", 0)
	require.NoError(t, err)
	require.NotContains(t, b.Stats().DirtyRatios, tp)
	for range 5 {
		update()
	}
	st, err := b.CompactPartition(ctx, tp)
	require.NoError(t, err)
	require.True(t, st.Cleaned, "all dirty")
	require.Equal(t, map[wal.TopicPartition]float64{tp: 0}, b.Stats().DirtyRatios)
	update()
	st, err = b.CompactPartition(ctx, tp)
	require.NoError(t, err)
	require.False(t, st.Cleaned, "half dirty, under 0.9")
	got := b.Stats().DirtyRatios[tp]
	require.InDelta(t, 0.5, got, 0.1)
	require.Equal(t, st.DirtyRatio, got)
}

// TestCompactKafkaZeros: delete.retention.ms 0 and
// min.cleanable.dirty.ratio 0 (negative in TopicConfig): a tombstone
// goes at the clean after the one that first keeps it, and a pass cleans
// whatever share of the partition is dirty.
func TestCompactKafkaZeros(t *testing.T) {
	ctx := t.Context()
	b := openTest(t, &Config{CompactInterval: -1})
	_, err := b.CreateTopic(ctx, "zeros", TopicConfig{Partitions: 1, Compact: true, DeleteRetention: -1, MinCleanableDirtyRatio: -1})
	require.NoError(t, err)
	produce := func(key string, value []byte) {
		bld := kbatch.NewBuilder(kbatch.CodecNone)
		bld.Append(time.Now().UnixMilli(), []byte(key), value)
		data, err := bld.Build(nil)
		require.NoError(t, err)
		require.Equal(t, 0, int(produceOne(t, b, "zeros", 0, data).ErrorCode))
	}
	for i := range 20 {
		produce(fmt.Sprintf("k%d", i), bytes.Repeat([]byte("v"), 100))
	}
	produce("k0", nil) // a tombstone
	_, tp, err := b.partition(ctx, "zeros", 0)
	require.NoError(t, err)
	st, err := b.CompactPartition(ctx, tp)
	require.NoError(t, err)
	require.True(t, st.Cleaned)
	keys := func() map[string]bool {
		out := map[string]bool{}
		for _, r := range keyedRecords(t, fetchAllFrom(t, b, "zeros", 0, 0)) {
			out[r.Key] = r.Tombstone
		}
		return out
	}
	got := keys()
	require.Len(t, got, 20)
	require.True(t, got["k0"], "the first clean keeps the tombstone")

	produce("k1", []byte("new")) // one update in 20: 5% dirty
	st, err = b.CompactPartition(ctx, tp)
	require.NoError(t, err)
	require.True(t, st.Cleaned, "a ratio of 0 cleans at 5%% dirty (ratio %v)", st.DirtyRatio)
	got = keys()
	require.Len(t, got, 19)
	require.NotContains(t, got, "k0", "delete.retention.ms 0: the tombstone is gone at the next clean")
}

// TestCompactLarge: a partition larger than what a compaction reads at
// once (16 MiB) is compacted a chunk at a time, the dirty part starting
// inside a chunk: what it keeps is what the classic cleaner keeps, and
// the new object's runs are at most 8 MiB, so a later pass reads it a run
// at a time too.
func TestCompactLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("56 MiB of batches")
	}
	ctx := t.Context()
	b := openTest(t, &Config{CompactInterval: -1})
	_, err := b.CreateTopic(ctx, "big", TopicConfig{Partitions: 1, Compact: true, MinCleanableDirtyRatio: -1})
	require.NoError(t, err)
	value := bytes.Repeat([]byte("v"), 1000)
	produce := func(from, n int) {
		for i := from; i < from+n; i++ {
			bld := kbatch.NewBuilder(kbatch.CodecNone)
			for j := range 1000 {
				bld.Append(time.Now().UnixMilli(), fmt.Appendf(nil, "k%d", (i*1000+j)%40_000), value)
			}
			data, err := bld.Build(nil)
			require.NoError(t, err)
			require.Zero(t, produceOne(t, b, "big", 0, data).ErrorCode)
		}
	}
	produce(0, 40) // 40,000 keys
	_, tp, err := b.partition(ctx, "big", 0)
	require.NoError(t, err)
	all := fetchAllFrom(t, b, "big", 0, 0)
	st, err := b.CompactPartition(ctx, tp)
	require.NoError(t, err)
	require.True(t, st.Cleaned)
	produce(40, 16) // 16,000 updates: the dirty part
	all = append(all, fetchAllFrom(t, b, "big", 0, 40_000)...)
	st, err = b.CompactPartition(ctx, tp)
	require.NoError(t, err)
	require.True(t, st.Cleaned, "dirty ratio %v", st.DirtyRatio)
	require.Greater(t, st.BytesRead, int64(32<<20), "more than two reads' worth")

	want, _ := classicCompacted(t, all, 0, nil)
	require.Equal(t, keyedRecords(t, want), keyedRecords(t, fetchAllFrom(t, b, "big", 0, 0)))
	runs := 0
	for off := int64(0); ; {
		res, err := b.coord.FindBatches(ctx, tp, off, 1<<20)
		require.NoError(t, err)
		if len(res.Batches) == 0 {
			break
		}
		for _, l := range res.Batches {
			require.LessOrEqual(t, l.ByteSize, int64(8<<20), "a run of the compacted object at %d", l.BaseOffset)
			runs++
		}
		off = res.Batches[len(res.Batches)-1].LastOffset + 1
		if off >= res.HighWatermark {
			break
		}
	}
	require.Greater(t, runs, 4)
	t.Logf("read %d bytes, wrote %d, in %d runs", st.BytesRead, st.BytesWritten, runs)
}

// TestCompactLiveBytesBounded: one million updates of 10,000 keys (100-byte
// values, 1,000 records a batch) to a compacted topic whose broker
// compacts as it goes (every 20 ms): throughout, the partition holds
// less than 8 MiB (what a consumer reads from the start: the latest
// record of each key, about 1.2 MiB, and what the dirty ratio and the
// compactor's lag leave), and once the last pass and the deletion grace
// are over the bucket holds less than 4 MiB, not the 113 MiB produced.
// (Between, the bucket also holds the replaced objects until the
// lifecycle deletes them: the produce rate times DeletionGrace and the
// lifecycle's interval.)
func TestCompactLiveBytesBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("a million updates")
	}
	ctx := t.Context()
	bucket := memBucket(t)
	b := openTest(t, &Config{Bucket: bucket, Linger: time.Millisecond, CompactInterval: 20 * time.Millisecond, DeletionGrace: 50 * time.Millisecond})
	_, err := b.CreateTopic(ctx, "c", TopicConfig{Partitions: 1, Compact: true, Retention: -1})
	require.NoError(t, err)
	const updates, keys, perBatch = 1_000_000, 10_000, 1_000
	value := make([]byte, 100)
	live := func() (n int64) {
		it := bucket.List(nil)
		for {
			o, err := it.Next(ctx)
			if err == io.EOF {
				return n
			}
			require.NoError(t, err)
			if strings.HasPrefix(o.Key, "wal/") {
				n += o.Size
			}
		}
	}
	var most int64
	for i := 0; i < updates; i += perBatch {
		require.Zero(t, produceOne(t, b, "c", 0, updateBatch(t, i, perBatch, keys, value)).ErrorCode)
		if i%(50*perBatch) == 0 {
			// What the partition holds while the updates go on: the
			// compactor keeps up.
			held := int64(len(fetchAllFrom(t, b, "c", 0, 0)))
			require.Less(t, held, int64(8<<20), "after %d updates", i)
			most = max(most, held)
		}
	}
	const bound = 4 << 20
	var n int64
	require.Eventually(t, func() bool {
		n = live()
		return n < bound
	}, 60*time.Second, 50*time.Millisecond, "live bytes stay above %d", bound)
	consumed := int64(len(fetchAllFrom(t, b, "c", 0, 0)))
	require.Less(t, consumed, int64(bound))
	s := b.Stats()
	t.Logf("after %d updates: %d live bytes in the bucket, %d read from the start (at most %d while producing); %d compactions", updates, n, consumed, most, s.Compactions)
}

// answerLost is a Compacter whose Compact reaches the coordinator and then
// fails, as one whose answer was lost (or whose leader was fenced after
// its record landed); refuse, if set, refuses without reaching it.
type answerLost struct {
	replica.Compacter
	refuse error
}

func (a answerLost) Compact(ctx context.Context, req coordinator.CompactRequest) error {
	if a.refuse != nil {
		return a.refuse
	}
	if err := a.Compacter.Compact(ctx, req); err != nil {
		return err
	}
	return errors.New("the answer was lost")
}

// TestCompactAnswerLost: a compaction whose commit may have landed (its
// error is not a refusal) leaves its object, which may serve the range:
// here it does, and the partition reads back compacted from it. One
// refused (the range changed) deletes its object at once.
func TestCompactAnswerLost(t *testing.T) {
	ctx := t.Context()
	b := openTest(t, &Config{CompactInterval: -1})
	_, err := b.CreateTopic(ctx, "c", TopicConfig{Partitions: 1, Compact: true})
	require.NoError(t, err)
	for i := range 10 {
		bld := kbatch.NewBuilder(kbatch.CodecNone)
		bld.Append(time.Now().UnixMilli(), []byte("k"), fmt.Appendf(nil, "v%d", i))
		data, err := bld.Build(nil)
		require.NoError(t, err)
		require.Zero(t, produceOne(t, b, "c", 0, data).ErrorCode)
	}
	_, tp, err := b.partition(ctx, "c", 0)
	require.NoError(t, err)
	opts := &replica.CompactOptions{TempDir: t.TempDir()}

	st, err := replica.CompactPartition(ctx, answerLost{Compacter: b.coord, refuse: coordinator.ErrRangeChanged}, b.cache, b.bucket, tp, opts)
	require.ErrorIs(t, err, coordinator.ErrRangeChanged)
	exists, err := b.bucket.Exists(ctx, st.Key)
	require.NoError(t, err)
	require.False(t, exists, "refused: deleted at once")

	st, err = replica.CompactPartition(ctx, answerLost{Compacter: b.coord}, b.cache, b.bucket, tp, opts)
	require.Error(t, err)
	exists, err = b.bucket.Exists(ctx, st.Key)
	require.NoError(t, err)
	require.True(t, exists, "the commit may have landed: the object stays")
	got := keyedRecords(t, fetchAllFrom(t, b, "c", 0, 0))
	require.Equal(t, []keyed{{Offset: 9, Key: "k", Value: "v9"}}, got, "served from it")
}

// TestCompactLogAppendTime: a LogAppendTime topic is compacted too, and
// keeps its records' times: each kept record has the time it was
// appended with (its original object's commit time), not the
// compaction's, after one pass and after a second over the compacted
// object, in Fetch and in ListOffsets by time, and after a restart.
func TestCompactLogAppendTime(t *testing.T) {
	ctx := t.Context()
	bucket, data := memBucket(t), t.TempDir()
	b := openTest(t, &Config{Bucket: bucket, DataDir: data, CompactInterval: -1})
	_, err := b.CreateTopic(ctx, "lat", TopicConfig{Partitions: 1, Compact: true, LogAppendTime: true, MinCleanableDirtyRatio: -1})
	require.NoError(t, err)
	produce := func(key, value string) {
		bld := kbatch.NewBuilder(kbatch.CodecNone)
		bld.Append(1, []byte(key), []byte(value)) // the producer's time: replaced
		data, err := bld.Build(nil)
		require.NoError(t, err)
		require.Zero(t, produceOne(t, b, "lat", 0, data).ErrorCode)
		time.Sleep(3 * time.Millisecond) // distinct commit times
	}
	// times returns each record's offset and time, and checks that every
	// batch says LogAppendTime.
	times := func() map[int64]int64 {
		out := map[int64]int64{}
		it := kbatch.NewBatchIter(fetchAllFrom(t, b, "lat", 0, 0))
		var rr kbatch.RecordReader
		for it.Next() {
			require.Equal(t, kbatch.LogAppendTime, it.Batch().TimestampType())
			require.NoError(t, rr.Reset(it.Batch()))
			for rr.Next() {
				out[rr.Record().Offset] = rr.Record().Timestamp
			}
		}
		require.NoError(t, it.Err())
		return out
	}
	for i := range 6 {
		produce(fmt.Sprintf("k%d", i%3), fmt.Sprintf("v%d", i))
	}
	before := times()
	require.Len(t, before, 6)
	for _, ts := range before {
		require.Greater(t, ts, int64(1), "stamped with the commit time")
	}
	_, tp, err := b.partition(ctx, "lat", 0)
	require.NoError(t, err)
	time.Sleep(5 * time.Millisecond)
	st, err := b.CompactPartition(ctx, tp)
	require.NoError(t, err)
	require.True(t, st.Cleaned)
	after := times()
	require.Len(t, after, 3)
	for off, ts := range after {
		require.Equal(t, before[off], ts, "offset %d keeps its time", off)
	}
	produce("k0", "v6")
	produce("k9", "v7")
	time.Sleep(5 * time.Millisecond)
	st, err = b.CompactPartition(ctx, tp)
	require.NoError(t, err)
	require.True(t, st.Cleaned)
	again := times()
	require.Len(t, again, 4)
	for off, ts := range again {
		if off < 6 {
			require.Equal(t, before[off], ts, "offset %d keeps its time through a second pass", off)
		}
	}
	lo, err := b.ListOffsets(ctx, "lat", 0, before[4])
	require.NoError(t, err)
	require.Equal(t, int64(4), lo.Offset, "ListOffsets by time finds the record appended then")

	// A restart reads which objects a compaction wrote from the database.
	require.NoError(t, b.Close())
	b = openTest(t, &Config{Bucket: bucket, DataDir: data, CompactInterval: -1})
	require.Equal(t, again, times(), "after a restart")
}
