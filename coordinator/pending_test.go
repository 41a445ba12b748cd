package coordinator

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless/coordinator/state"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal"
)

// pendingFixture is a leader over a memory log and bucket, with a topic
// of one partition and an idempotent producer.
type pendingFixture struct {
	t      *testing.T
	bucket *blob.Bucket
	c      *leader
	tp     wal.TopicPartition
	pid    int64
	epoch  int16
}

func newPendingFixture(t *testing.T) *pendingFixture {
	f := &pendingFixture{t: t, bucket: memblob.OpenBucket(nil)}
	t.Cleanup(func() { f.bucket.Close() })
	log := newTestLog()
	t.Cleanup(func() { log.Close() })
	f.c = openTest(t, log, "", &leaderOptions{WALBucket: f.bucket})
	id := mustCreate(t, f.c, "orders", 1, TopicConfig{})
	f.tp = wal.TopicPartition{TopicID: id, Partition: 0}
	var err error
	f.pid, f.epoch, err = f.c.InitProducerID(t.Context())
	require.NoError(t, err)
	return f
}

// commit commits a batch of 2 records at sequence seq in object key,
// pending or not, and returns its base offset.
func (f *pendingFixture) commit(key string, seq int32, pending bool) int64 {
	wait, err := f.c.CommitFileAsync(f.t.Context(), CommitFileRequest{ObjectKey: key, Size: 100,
		Coordinates: []wal.Coordinate{coord(f.tp, 0, 2, f.pid, f.epoch, seq, 1)}}, pending)
	require.NoError(f.t, err)
	res, err := wait()
	require.NoError(f.t, err)
	require.NoError(f.t, res[0].Err)
	return res[0].BaseOffset
}

// read returns the high watermark readers see and the offsets of the
// batches from offset on.
func (f *pendingFixture) read(offset int64) (hw int64, bases []int64) {
	r, err := f.c.FindBatches(f.t.Context(), f.tp, offset, 1<<20)
	require.NoError(f.t, err)
	for _, b := range r.Batches {
		bases = append(bases, b.BaseOffset)
	}
	return r.HighWatermark, bases
}

// TestPendingCommitConfirm: a pending commit's offsets are assigned but
// not read until its object is settled as landed, and then at once.
func TestPendingCommitConfirm(t *testing.T) {
	f := newPendingFixture(t)
	require.Equal(t, int64(0), f.commit("wal/1", 0, true))
	require.Equal(t, int64(2), f.commit("wal/2", 2, true))
	hw, _ := f.read(0)
	require.Zero(t, hw, "nothing readable before its object is known to have landed")
	for _, ts := range []int64{MaxTimestamp, 0} {
		lo, err := f.c.ListOffsets(t.Context(), f.tp, ts)
		require.NoError(t, err)
		require.Equal(t, int64(-1), lo.Offset, "no batch found by time either")
	}

	require.NoError(t, f.c.Settle(t.Context(), "wal/1", true))
	hw, bases := f.read(0)
	require.Equal(t, int64(2), hw, "the first commit readable, the second not")
	require.Equal(t, []int64{0}, bases)

	require.NoError(t, f.c.Settle(t.Context(), "wal/2", true))
	hw, bases = f.read(0)
	require.Equal(t, int64(4), hw)
	require.Equal(t, []int64{0, 2}, bases)

	lo, err := f.c.ListOffsets(t.Context(), f.tp, -1)
	require.NoError(t, err)
	require.Equal(t, int64(4), lo.Offset)
	require.NoError(t, f.c.Settle(t.Context(), "wal/2", true), "settled twice: as it was")
}

// TestPendingCommitVoid: a commit whose object did not land is voided,
// with every pending commit after it: their offsets are given back, the
// producer's retry of the same batches is accepted after it, and a
// landed commit voided with them is an error to its settle.
func TestPendingCommitVoid(t *testing.T) {
	f := newPendingFixture(t)
	f.commit("wal/1", 0, true)
	f.commit("wal/2", 2, true)
	f.commit("wal/3", 4, true)
	require.NoError(t, f.c.Settle(t.Context(), "wal/1", true))

	landed := make(chan error, 1)
	go func() { landed <- f.c.Settle(context.Background(), "wal/3", true) }()
	time.Sleep(10 * time.Millisecond) // the settle of wal/3 waits behind wal/2
	select {
	case err := <-landed:
		t.Fatalf("wal/3 settled before wal/2: %v", err)
	default:
	}
	require.NoError(t, f.c.Settle(t.Context(), "wal/2", false))
	err := <-landed
	require.Equal(t, kafkaerr.KafkaStorageError, code(err), "voided with wal/2: %v", err)
	require.Equal(t, kafkaerr.KafkaStorageError, code(f.c.Settle(t.Context(), "wal/3", true)), "and so again")

	hw, bases := f.read(0)
	require.Equal(t, int64(2), hw, "offsets 2 to 5, seen by no one, are given back")
	require.Equal(t, []int64{0}, bases)
	require.Equal(t, int64(2), f.commit("wal/4", 2, false), "the retry of sequence 2 follows sequence 1")
	hw, bases = f.read(0)
	require.Equal(t, int64(4), hw)
	require.Equal(t, []int64{0, 2}, bases)
}

// TestPendingResolvedOnTakeover: a new leader resolves the commits its
// predecessor left pending before it serves: one settled as landed in
// memory only and one whose object is in the bucket are confirmed; at the
// first whose object is missing, a tombstone takes its key, and it and
// every one after it are void.
func TestPendingResolvedOnTakeover(t *testing.T) {
	ctx := t.Context()
	bucket := memblob.OpenBucket(nil)
	t.Cleanup(func() { bucket.Close() })
	log := newTestLog()
	t.Cleanup(func() { log.Close() })
	c := openTest(t, log, "", &leaderOptions{WALBucket: bucket})
	id := mustCreate(t, c, "orders", 1, TopicConfig{})
	tp := wal.TopicPartition{TopicID: id, Partition: 0}
	pid, ep, err := c.InitProducerID(ctx)
	require.NoError(t, err)
	for i, key := range []string{"wal/1", "wal/2", "wal/3", "wal/4"} {
		wait, err := c.CommitFileAsync(ctx, CommitFileRequest{ObjectKey: key, Size: 100,
			Coordinates: []wal.Coordinate{coord(tp, 0, 2, pid, ep, int32(2*i), 1)}}, true)
		require.NoError(t, err)
		_, err = wait()
		require.NoError(t, err)
	}
	for _, key := range []string{"wal/1", "wal/2", "wal/4"} { // wal/3 never landed
		require.NoError(t, bucket.WriteAll(ctx, key, []byte("object"), nil))
	}
	require.NoError(t, c.Settle(ctx, "wal/1", true)) // in memory: no entry written since
	r, err := c.FindBatches(ctx, tp, 0, 1<<20)
	require.NoError(t, err)
	require.Equal(t, int64(2), r.HighWatermark)
	require.NoError(t, c.Close())

	c2 := openTest(t, log, "", &leaderOptions{WALBucket: bucket})
	r, err = c2.FindBatches(ctx, tp, 0, 1<<20)
	require.NoError(t, err)
	require.Equal(t, int64(4), r.HighWatermark, "resolved before serving: offsets 4 to 7, seen by no one, given back")
	require.Len(t, r.Batches, 2, "wal/1 and wal/2 confirmed; wal/3 and wal/4 void")
	a, err := bucket.Attributes(ctx, "wal/3")
	require.NoError(t, err)
	require.Zero(t, a.Size, "a tombstone holds the key of the object that never landed")
	require.Error(t, bucket.WriteAll(ctx, "wal/3", []byte("late"), &blob.WriterOptions{IfNotExist: true}), "a late PUT of it fails")
	require.Equal(t, kafkaerr.KafkaStorageError, code(c2.Settle(ctx, "wal/4", true)), "wal/4 voided, though it landed")

	// The log says so: a third leader, on a fresh database, agrees.
	require.NoError(t, c2.Close())
	c3 := openTest(t, log, "", &leaderOptions{WALBucket: bucket})
	r, err = c3.FindBatches(ctx, tp, 0, 1<<20)
	require.NoError(t, err)
	require.Equal(t, int64(4), r.HighWatermark)
	require.Len(t, r.Batches, 2)
	res, err := c3.CommitFile(ctx, CommitFileRequest{ObjectKey: "wal/5", Size: 100,
		Coordinates: []wal.Coordinate{coord(tp, 0, 2, pid, ep, 4, 1)}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err, "the producer's state went back to before wal/3")
	require.Equal(t, int64(4), res[0].BaseOffset)
}

// TestPendingFirstObjectVoid: the very first object of a shard (object ID
// 0) can be voided too.
func TestPendingFirstObjectVoid(t *testing.T) {
	f := newPendingFixture(t)
	f.commit("wal/1", 0, true)
	require.NoError(t, f.c.Settle(t.Context(), "wal/1", false))
	hw, _ := f.read(0)
	require.Zero(t, hw)
	require.Equal(t, int64(0), f.commit("wal/2", 0, false))
}

// samplePendingEntries are entries of the parallel commit's records: a
// pending commit, a confirm, a void.
func samplePendingEntries() [][]byte {
	return [][]byte{
		state.AppendEntry(nil, state.Entry{Epoch: 3, Prev: 0x7001, Records: []state.Record{
			state.CommitFileRecord{ObjectID: 12, Key: "wal/01936b2e-1f00-7000-8000-00000000000c", Size: 4096, Uploader: 2, CommitTime: 1_764_500_000_000, Pending: true,
				Rows:      []state.CommitRow{{PID: 3, BaseOffset: 100, LastOffset: 109, BytePos: 1, ByteSize: 900, MaxTimestamp: 1_764_500_000_001}},
				Producers: []state.ProducerBatch{{PID: 3, ProducerID: 7, Epoch: 1, FirstSeq: 40, LastSeq: 49, LastOffset: 109, Count: 10, Timestamp: 1_764_500_000_001}}},
			state.ConfirmRecord{Through: 11},
		}}),
		state.AppendEntry(nil, state.Entry{Epoch: 3, Records: []state.Record{
			state.ConfirmRecord{Through: 12},
			state.VoidRecord{From: 13, Time: 1_764_500_000_500},
		}}),
	}
}

// TestPendingEntryGolden: the parallel commit's records, byte for byte,
// are in testdata/entries-pending.golden; -update rewrites it.
func TestPendingEntryGolden(t *testing.T) {
	checkGolden(t, "entries-pending.golden", samplePendingEntries())
}
