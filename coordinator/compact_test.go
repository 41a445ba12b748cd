package coordinator

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/diskless-go/diskless/coordinator/state"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal"
)

// TestCompactReplacesRange: a compaction's replacement of a range is one
// record: FindBatches then returns the new object's runs at the offsets
// the batches had (with the hole of a batch removed whole), the objects
// of the old rows lose them (and die when left with none), and it holds
// over a restart. A replacement of a range that changed since it was
// read (a second one with the same fingerprint, a stale fingerprint) is
// ErrRangeChanged; bad runs are INVALID_REQUEST; nothing changes then.
func TestCompactReplacesRange(t *testing.T) {
	ctx := t.Context()
	f := newShardsFixture(t, 1, memblob.OpenBucket(nil), nil)
	id, err := f.s.CreatePartitions(ctx, CreatePartitionsRequest{Name: "c", Partitions: 1, Config: TopicConfig{Compact: true}})
	require.NoError(t, err)
	tp := wal.TopicPartition{TopicID: id}
	var keys []string
	for range 3 { // objects of offsets 0-1, 2-3, 4
		key := f.upload(f.clock.Now(), 300)
		keys = append(keys, key)
		n := int32(2)
		if len(keys) == 3 {
			n = 1
		}
		res, err := f.s.CommitFile(ctx, CommitFileRequest{ObjectKey: key, Size: 300, Coordinates: []wal.Coordinate{coord(tp, 1, n, -1, -1, -1, 1_764_500_000_000)}})
		require.NoError(t, err)
		require.NoError(t, res[0].Err)
	}
	read, err := f.s.FindBatches(ctx, tp, 0, 200) // the runs of 0-1 and 2-3
	require.NoError(t, err)
	require.Len(t, read.Batches, 2)
	print := RangeFingerprint(read.Batches)
	newKey := f.upload(f.clock.Now(), 90)
	req := CompactRequest{TopicPartition: tp, From: 0, To: 3, Fingerprint: print, ObjectKey: newKey, Size: 90, Runs: []CompactedRun{
		{BaseOffset: 0, LastOffset: 1, BytePos: 0, ByteSize: 50, MaxTimestamp: 1_764_500_000_000},
		{BaseOffset: 3, LastOffset: 3, BytePos: 50, ByteSize: 40, MaxTimestamp: 1_764_500_000_000},
	}}

	// Refused, changing nothing.
	bad := req
	bad.Runs = []CompactedRun{{BaseOffset: 3, LastOffset: 3, BytePos: 0, ByteSize: 40}, {BaseOffset: 0, LastOffset: 1, BytePos: 40, ByteSize: 40}}
	require.Equal(t, kafkaerr.InvalidRequest, code(f.s.Compact(ctx, bad)), "runs out of order")
	bad = req
	bad.Runs = []CompactedRun{{BaseOffset: 0, LastOffset: 1, BytePos: 60, ByteSize: 40}}
	require.Equal(t, kafkaerr.InvalidRequest, code(f.s.Compact(ctx, bad)), "past the object's end")
	bad = req
	bad.Fingerprint++
	require.ErrorIs(t, f.s.Compact(ctx, bad), ErrRangeChanged)
	bad = req
	bad.To = 7
	require.ErrorIs(t, f.s.Compact(ctx, bad), ErrRangeChanged, "past the high watermark")
	bad = req
	bad.From, bad.Runs = 1, req.Runs[1:]
	require.ErrorIs(t, f.s.Compact(ctx, bad), ErrRangeChanged, "a run straddles the start")

	require.NoError(t, f.s.Compact(ctx, req))
	check := func() {
		t.Helper()
		got, err := f.s.FindBatches(ctx, tp, 0, 1<<20)
		require.NoError(t, err)
		require.Len(t, got.Batches, 3)
		want := []struct {
			key        string
			base, last int64
			pos, size  int64
		}{{newKey, 0, 1, 0, 50}, {newKey, 3, 3, 50, 40}, {keys[2], 4, 4, 1, 100}}
		for i, w := range want {
			l := got.Batches[i]
			require.Equal(t, w.key, l.ObjectKey, "run %d", i)
			require.Equal(t, []int64{w.base, w.last, w.pos, w.size}, []int64{l.BaseOffset, l.LastOffset, l.BytePos, l.ByteSize}, "run %d", i)
		}
		require.Equal(t, int64(5), got.HighWatermark)
		require.Equal(t, int64(4), got.CleanedTo, "the cleaner's checkpoint: after the range")
		hole, err := f.s.FindBatches(ctx, tp, 2, 1)
		require.NoError(t, err)
		require.Equal(t, int64(3), hole.Batches[0].BaseOffset, "offset 2 is a hole: the next batch")
		c, err := f.s.local(0)
		require.NoError(t, err)
		for i, k := range keys[:2] {
			found, live, _, _ := shardObject(t, c, k)
			require.True(t, found)
			require.Zero(t, live, "object %d has no rows left", i)
		}
		_, live, _, _ := shardObject(t, c, newKey)
		require.Equal(t, int64(2), live)
	}
	check()
	require.Equal(t, kafkaerr.InvalidRequest, code(f.s.Compact(ctx, req)), "the object is committed already")
	again := req
	again.ObjectKey = f.upload(f.clock.Now(), 90)
	require.ErrorIs(t, f.s.Compact(ctx, again), ErrRangeChanged, "the range again, from the rows read before: they are not there any more")
	f.restart()
	check()
}

// sampleCompactEntries are entries of the compaction record, for the
// golden file, the round trip and the fuzzer's seeds.
func sampleCompactEntries() [][]byte {
	return [][]byte{
		state.AppendEntry(nil, state.Entry{Epoch: 12, Prev: 0x4321, Records: []state.Record{
			state.CompactRecord{PID: 10, From: 100, To: 199, ObjectID: 9, Key: "p/wal/01936b2e-1f00-7000-8000-000000000009", Size: 4000, Uploader: 2,
				CommitTime: 1_764_500_002_000, Rows: []state.CommitRow{
					{PID: 10, BaseOffset: 100, LastOffset: 109, BytePos: 0, ByteSize: 1000, MaxTimestamp: 1_764_500_001_000},
					{PID: 10, BaseOffset: 150, LastOffset: 199, BytePos: 1000, ByteSize: 3000, MaxTimestamp: 1_764_500_001_500},
				}},
			state.CompactRecord{PID: 11, From: 0, To: 5, ObjectID: 10, Key: "p/wal/01936b2e-1f00-7000-8000-00000000000a", CommitTime: 1_764_500_002_100},
		}}),
		// A compacted topic with its compaction settings.
		state.AppendEntry(nil, state.Entry{Epoch: 12, Records: []state.Record{
			state.CreateTopicRecord{TopicID: uuid.MustParse("6ba7b810-9dad-11d1-80b4-00c04fd430c8"), Name: "table", Partitions: 3, FirstPID: 50,
				Config: TopicConfig{Retention: -1, RetentionBytes: -1, Compact: true, MaxMessageBytes: 1 << 20,
					DeleteRetention: time.Hour, MinCompactionLag: time.Minute, MaxCompactionLag: 24 * time.Hour, MinCleanableDirtyRatio: 0.25}},
		}}),
		// Its config altered: Kafka's zeros, then the defaults again.
		state.AppendEntry(nil, state.Entry{Epoch: 13, Records: []state.Record{
			state.AlterTopicRecord{TopicID: uuid.MustParse("6ba7b810-9dad-11d1-80b4-00c04fd430c8"),
				Config: TopicConfig{Retention: time.Hour, RetentionBytes: 1 << 30, Compact: true, Delete: true, MaxMessageBytes: 1 << 20,
					DeleteRetention: -time.Millisecond, MinCleanableDirtyRatio: -1}},
			state.AlterTopicRecord{TopicID: uuid.MustParse("6ba7b810-9dad-11d1-80b4-00c04fd430c8"),
				Config: TopicConfig{Retention: -1, RetentionBytes: -1, Compact: true, MaxMessageBytes: 1048588}},
		}}),
	}
}

// TestCompactEntryGolden: the compaction record, byte for byte, is in
// testdata/entries-compact.golden; -update rewrites it. It round-trips;
// runs out of order or past the object do not decode.
func TestCompactEntryGolden(t *testing.T) {
	checkGolden(t, "entries-compact.golden", sampleCompactEntries())
	for _, r := range []state.Record{
		state.CompactRecord{PID: 1, From: 0, To: 9, Size: 10, Rows: []state.CommitRow{{BaseOffset: 5, LastOffset: 6, ByteSize: 1}, {BaseOffset: 2, LastOffset: 3, ByteSize: 1}}},
		state.CompactRecord{PID: 1, From: 0, To: 9, Size: 10, Rows: []state.CommitRow{{BaseOffset: 0, LastOffset: 1, BytePos: 5, ByteSize: 6}}},
		state.CompactRecord{PID: 1, From: 0, To: 9, Size: 10, Rows: []state.CommitRow{{BaseOffset: 8, LastOffset: 10, ByteSize: 1}}},
		state.CreateTopicRecord{Name: "x", Partitions: 1, Config: TopicConfig{MinCleanableDirtyRatio: 1.5}},
		state.CreateTopicRecord{Name: "x", Partitions: 1, Config: TopicConfig{MinCompactionLag: -time.Second}},
		state.AlterTopicRecord{Config: TopicConfig{DeleteRetention: -time.Hour}},
		state.AlterTopicRecord{Config: TopicConfig{MinCleanableDirtyRatio: -0.5}},
	} {
		_, err := state.DecodeEntry(state.AppendEntry(nil, state.Entry{Records: []state.Record{r}}))
		require.ErrorIs(t, err, ErrCorruptEntry, "%+v", r)
	}
}

// TestCompactTopicSettings: a topic's compaction settings are kept (a
// restart reads them from the database) and refused out of range;
// negative ones that mean Kafka's 0 are kept as -1.
func TestCompactTopicSettings(t *testing.T) {
	ctx := t.Context()
	f := newShardsFixture(t, 1, memblob.OpenBucket(nil), nil)
	want := TopicConfig{Compact: true, DeleteRetention: time.Hour, MinCompactionLag: time.Minute, MaxCompactionLag: 24 * time.Hour, MinCleanableDirtyRatio: 0.25}
	_, err := f.s.CreatePartitions(ctx, CreatePartitionsRequest{Name: "table", Partitions: 1, Config: want})
	require.NoError(t, err)
	for _, bad := range []TopicConfig{{MinCleanableDirtyRatio: 2}, {MinCompactionLag: -1}, {MaxCompactionLag: -time.Hour}, {MinCompactionLag: time.Hour, MaxCompactionLag: time.Minute}} {
		_, err := f.s.CreatePartitions(ctx, CreatePartitionsRequest{Name: "bad", Partitions: 1, Config: bad})
		require.Equal(t, kafkaerr.InvalidConfig, code(err), "%+v", bad)
	}
	got := func() TopicConfig {
		ts, err := f.s.Topics(ctx)
		require.NoError(t, err)
		require.Len(t, ts, 1)
		return ts[0].Config
	}
	c := got()
	require.Equal(t, []any{want.DeleteRetention, want.MinCompactionLag, want.MaxCompactionLag, want.MinCleanableDirtyRatio},
		[]any{c.DeleteRetention, c.MinCompactionLag, c.MaxCompactionLag, c.MinCleanableDirtyRatio})
	f.restart()
	require.Equal(t, c, got())

	// Negative is Kafka's 0 for delete.retention.ms and
	// min.cleanable.dirty.ratio: kept as -1 ms and -1.
	_, err = f.s.CreatePartitions(ctx, CreatePartitionsRequest{Name: "zeros", Partitions: 1, Config: TopicConfig{Compact: true, DeleteRetention: -time.Hour, MinCleanableDirtyRatio: -0.5}})
	require.NoError(t, err)
	ts, err := f.s.Topics(ctx)
	require.NoError(t, err)
	require.Len(t, ts, 2)
	for _, ti := range ts {
		if ti.Name == "zeros" {
			require.Equal(t, -time.Millisecond, ti.Config.DeleteRetention)
			require.Equal(t, -1.0, ti.Config.MinCleanableDirtyRatio)
		}
	}
}

// TestCompactRefusedWhileInFlight: a compaction decided while another of
// its partition is on its way to the log is ErrRangeChanged, though the
// committed rows it is checked against still match (they are about to be
// replaced); the one in flight lands.
func TestCompactRefusedWhileInFlight(t *testing.T) {
	ctx := t.Context()
	mem := metalog.NewMem(&metalog.MemOptions{MaxInFlight: 2})
	t.Cleanup(func() { mem.Close() })
	log := &holdingLog{Log: mem}
	c := openTest(t, log, "", nil)
	id := mustCreate(t, c, "c", 1, TopicConfig{Compact: true})
	tp := wal.TopicPartition{TopicID: id}
	for i := range 2 {
		res, err := c.CommitFile(ctx, CommitFileRequest{ObjectKey: fmt.Sprintf("wal/%d", i), Size: 300, Coordinates: []wal.Coordinate{coord(tp, 1, 2, -1, -1, -1, 1)}})
		require.NoError(t, err)
		require.NoError(t, res[0].Err)
	}
	read, err := c.FindBatches(ctx, tp, 0, 1<<20)
	require.NoError(t, err)
	req := CompactRequest{TopicPartition: tp, From: 0, To: 3, Fingerprint: RangeFingerprint(read.Batches), ObjectKey: "wal/first", Size: 100,
		Runs: []CompactedRun{{BaseOffset: 3, LastOffset: 3, BytePos: 0, ByteSize: 100}}}

	gate := make(chan struct{})
	release := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(release)
	log.hold.Store(&gate)
	before := log.sends.Load()
	first := make(chan error, 1)
	go func() { first <- c.Compact(ctx, req) }()
	require.Eventually(t, func() bool { return log.sends.Load() == before+1 }, 10*time.Second, time.Millisecond)
	second := req
	second.ObjectKey = "wal/second"
	require.ErrorIs(t, c.Compact(ctx, second), ErrRangeChanged, "a compaction of the partition is on its way")
	log.hold.Store(nil)
	release()
	require.NoError(t, <-first)
	got, err := c.FindBatches(ctx, tp, 0, 1<<20)
	require.NoError(t, err)
	require.Len(t, got.Batches, 1)
	require.Equal(t, "wal/first", got.Batches[0].ObjectKey)
}
