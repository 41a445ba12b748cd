package coordinator

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/diskless-go/diskless/coordinator/state"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/internal/fakeclock"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal"
)

// segmentID makes a UUIDv7 named at t.
func segmentID(t time.Time) uuid.UUID {
	var id uuid.UUID
	_, _ = rand.Read(id[:])
	ms := uint64(t.UnixMilli())
	for i := range 6 {
		id[i] = byte(ms >> (40 - 8*i))
	}
	id[6] = 0x70 | id[6]&0x0f
	id[8] = 0x80 | id[8]&0x3f
	return id
}

// remoteSeg describes a remote segment of tp, offsets base to end, named
// at named, under prefix.
func remoteSeg(prefix string, tp wal.TopicPartition, base, end int64, named time.Time, maxTs int64) RemoteSegment {
	id := segmentID(named)
	return RemoteSegment{ID: id, TopicPartition: tp, Key: RemoteSegmentKey(prefix, tp, base, id),
		BaseOffset: base, EndOffset: end, MaxTimestamp: maxTs, Size: 1000, IndexSize: 16, TimeIndexSize: 24, Uploader: 3}
}

// remoteFixture is one coordinator, on a settable clock, with prefix "p/"
// and a topic whose partition 0 holds runs of 10 offsets, one object each.
type remoteFixture struct {
	t     *testing.T
	log   *metalog.Mem
	dir   string
	clock *fakeclock.Clock
	opts  *leaderOptions
	c     *leader
	tp    wal.TopicPartition
	keys  []string // the objects of the runs, in offset order
}

func newRemoteFixture(t *testing.T, cfg TopicConfig, opts *leaderOptions) *remoteFixture {
	f := &remoteFixture{t: t, log: newTestLog(), dir: t.TempDir(), clock: newTestClock()}
	f.opts = &leaderOptions{}
	if opts != nil {
		*f.opts = *opts
	}
	f.opts.Prefix, f.opts.Clock, f.opts.SnapshotEvery = "p/", f.clock, -1
	f.c = openTest(t, f.log, f.dir, f.opts)
	f.tp = wal.TopicPartition{TopicID: mustCreate(t, f.c, "t", 2, cfg)}
	return f
}

// commitRun commits one batch of 10 records (100 bytes) with timestamp ts
// in a new object, and returns its base offset.
func (f *remoteFixture) commitRun(ts int64) int64 {
	f.t.Helper()
	key := wal.NewObjectKey("p/", f.clock.Now())
	res, err := f.c.CommitFile(f.t.Context(), CommitFileRequest{ObjectKey: key, Size: 101, Coordinates: []wal.Coordinate{coord(f.tp, 1, 10, -1, -1, -1, ts)}})
	require.NoError(f.t, err)
	require.NoError(f.t, res[0].Err)
	f.keys = append(f.keys, key)
	return res[0].BaseOffset
}

func (f *remoteFixture) register(s RemoteSegment) error {
	return f.c.RegisterRemoteSegment(f.t.Context(), s)
}

func (f *remoteFixture) seg(base, end int64, maxTs int64) RemoteSegment {
	return remoteSeg("p/", f.tp, base, end, f.clock.Now(), maxTs)
}

func (f *remoteFixture) find(offset int64) FindResult {
	f.t.Helper()
	res, err := f.c.FindBatches(f.t.Context(), f.tp, offset, 1<<20)
	require.NoError(f.t, err)
	return res
}

func (f *remoteFixture) remote() []RemoteSegment {
	f.t.Helper()
	segs, err := f.c.RemoteSegments(f.t.Context(), f.tp)
	require.NoError(f.t, err)
	return segs
}

func (f *remoteFixture) dead() []string {
	f.t.Helper()
	dead, err := f.c.DeadObjects(f.t.Context(), 100)
	require.NoError(f.t, err)
	var out []string
	for _, d := range dead {
		out = append(out, d.Key)
	}
	return out
}

// registered is s as RemoteSegments returns it, registered at at.
func registered(s RemoteSegment, at time.Time) RemoteSegment {
	s.RegisteredAt = at.UnixMilli()
	return s
}

func runsOf(res FindResult) [][2]int64 {
	var out [][2]int64
	for _, l := range res.Batches {
		out = append(out, [2]int64{l.BaseOffset, l.LastOffset})
	}
	return out
}

// TestRemoteSegmentKey: keys are what the contract says, and parse back
// from each file's key; anything not written by RemoteSegmentKey does not.
func TestRemoteSegmentKey(t *testing.T) {
	tp := wal.TopicPartition{TopicID: uuid.MustParse("6ba7b810-9dad-11d1-80b4-00c04fd430c8"), Partition: 12}
	named := time.UnixMilli(1_764_500_000_123)
	id := segmentID(named)
	key := RemoteSegmentKey("pre/", tp, 4567, id)
	require.Equal(t, "pre/tiered/6ba7b810-9dad-11d1-80b4-00c04fd430c8-12/00000000000000004567-"+id.String(), key)
	for _, file := range append([]string{key}, func() (out []string) {
		for _, ext := range RemoteSegmentExts {
			out = append(out, key+ext)
		}
		return out
	}()...) {
		seg, gotID, at, ok := ParseRemoteSegmentKey("pre/", file)
		require.True(t, ok, file)
		require.Equal(t, key, seg)
		require.Equal(t, id, gotID)
		require.Equal(t, named, at)
	}
	v4 := uuid.New()
	for _, bad := range []string{
		RemoteSegmentKey("other/", tp, 4567, id) + ".log",
		key + ".json",
		key + ".log.log",
		strings.ToUpper(key[len("pre/"):]),
		"pre/tiered/" + strings.ToUpper(key[len("pre/tiered/"):]),
		RemoteSegmentKey("pre/", tp, 4567, v4) + ".log",
		RemoteSegmentKey("pre/", wal.TopicPartition{TopicID: tp.TopicID, Partition: -1}, 4567, id),
		RemoteSegmentKey("pre/", tp, -1, id),
		strings.Replace(key, "-12/", "-012/", 1),
		strings.Replace(key, "/00000000000000004567-", "/4567-", 1),
		"pre/tiered/x",
		"pre/wal/" + id.String(),
	} {
		_, _, _, ok := ParseRemoteSegmentKey("pre/", bad)
		require.False(t, ok, bad)
	}
}

// TestRegisterRemoteSegment: each rule of registration, with its Kafka
// error code; a registration moves the diskless start, releases the batch
// runs wholly below it (their objects die) and keeps one that straddles
// it; registering again changes nothing.
func TestRegisterRemoteSegment(t *testing.T) {
	ctx := t.Context()
	f := newRemoteFixture(t, TopicConfig{Retention: -1}, &leaderOptions{CommitDeadline: time.Minute})
	for range 3 {
		f.commitRun(f.clock.Now().UnixMilli())
	}
	// Runs [0,9] [10,19] [20,29]; HW 30.
	res := f.find(0)
	require.Equal(t, int64(30), res.HighWatermark)
	require.Zero(t, res.DisklessStart)
	require.Nil(t, res.Remote)

	codeOf := func(s RemoteSegment) (kafkaerr.Code, string) {
		err := f.register(s)
		var se *kafkaerr.Error
		if errors.As(err, &se) {
			return se.Code, se.Message
		}
		require.NoError(t, err)
		return kafkaerr.NoError, ""
	}
	expect := func(s RemoteSegment, want kafkaerr.Code, msg string) {
		t.Helper()
		got, m := codeOf(s)
		require.Equal(t, want, got, m)
		require.Contains(t, m, msg)
	}

	// Unknown partitions.
	s := remoteSeg("p/", wal.TopicPartition{TopicID: uuid.New()}, 0, 9, f.clock.Now(), 1)
	expect(s, kafkaerr.UnknownTopicOrPartition, "no partition")
	s = remoteSeg("p/", wal.TopicPartition{TopicID: f.tp.TopicID, Partition: 2}, 0, 9, f.clock.Now(), 1)
	expect(s, kafkaerr.UnknownTopicOrPartition, "no partition")

	// Bad IDs, keys, sizes.
	s = f.seg(0, 14, 1)
	s.ID = uuid.New()
	s.Key = RemoteSegmentKey("p/", f.tp, 0, s.ID)
	expect(s, kafkaerr.InvalidRequest, "not a UUIDv7")
	s = f.seg(0, 14, 1)
	s.Key = RemoteSegmentKey("", f.tp, 0, s.ID)
	expect(s, kafkaerr.InvalidRequest, "is not")
	s = f.seg(0, 14, 1)
	s.Key = RemoteSegmentKey("p/", f.tp, 1, s.ID)
	expect(s, kafkaerr.InvalidRequest, "is not")
	s = f.seg(0, 14, 1)
	s.TimeIndexSize = -1
	expect(s, kafkaerr.InvalidRequest, "negative")

	// The commit deadline: named more than a minute ago.
	s = remoteSeg("p/", f.tp, 0, 14, f.clock.Now().Add(-time.Minute-time.Millisecond), 1)
	expect(s, kafkaerr.RequestTimedOut, "past the commit deadline")

	// Bounds.
	expect(f.seg(1, 14, 1), kafkaerr.OffsetOutOfRange, "base offset 1 is above the diskless start offset 0")
	expect(f.seg(0, 30, 1), kafkaerr.OffsetOutOfRange, "end offset 30 is not below the high watermark 30")
	expect(f.seg(-1, 14, 1), kafkaerr.OffsetOutOfRange, "negative")
	require.Empty(t, f.remote(), "nothing refused was registered")
	require.Equal(t, int64(0), f.find(0).DisklessStart)

	// Accepted: [0,14]. Run [0,9] goes (its object dies), [10,19]
	// straddles and stays.
	seg1 := f.seg(0, 14, 1)
	seg1.Size, seg1.TxnIndexSize = 5000, 8
	at1 := f.clock.Now()
	require.NoError(t, f.register(seg1))
	require.Equal(t, []RemoteSegment{registered(seg1, at1)}, f.remote())
	for _, off := range []int64{0, 9, 14} {
		res := f.find(off)
		require.Equal(t, int64(15), res.DisklessStart)
		require.NotNil(t, res.Remote, "offset %d", off)
		require.Equal(t, registered(seg1, at1), *res.Remote)
		require.Empty(t, res.Batches)
	}
	res = f.find(15)
	require.Nil(t, res.Remote)
	require.Equal(t, [][2]int64{{10, 19}, {20, 29}}, runsOf(res), "the straddling run stays")
	require.Empty(t, f.find(30).Batches)
	require.Equal(t, []string{f.keys[0]}, f.dead())
	st := f.c.Stats()
	require.Equal(t, int64(1), st.RemoteSegments)
	require.Equal(t, int64(5000), st.RemoteBytes)
	known, err := f.c.KnownKeys(ctx, []string{seg1.Key})
	require.NoError(t, err)
	require.True(t, known[seg1.Key], "the segment's key is known while it is")

	// Again: nothing changes, whatever the offsets say now.
	f.clock.Advance(time.Second)
	require.NoError(t, f.register(seg1))
	again := seg1
	again.EndOffset = 29
	require.NoError(t, f.register(again), "the same ID, partition and base offset")
	require.Equal(t, []RemoteSegment{registered(seg1, at1)}, f.remote())
	require.Equal(t, int64(1), f.c.Stats().RemoteSegments)

	// The next must start at the diskless start, above the last one.
	expect(f.seg(14, 20, 1), kafkaerr.OffsetOutOfRange, "base offset 14 is not above the end offset 14 of the last remote segment")
	expect(f.seg(16, 20, 1), kafkaerr.OffsetOutOfRange, "base offset 16 is above the diskless start offset 15")
	expect(f.seg(10, 12, 1), kafkaerr.OffsetOutOfRange, "end offset 12 is below the diskless start offset 15")
	seg2 := f.seg(15, 24, 1)
	at2 := f.clock.Now()
	require.NoError(t, f.register(seg2))
	require.Equal(t, []RemoteSegment{registered(seg1, at1), registered(seg2, at2)}, f.remote())
	require.Equal(t, registered(seg2, at2), *f.find(15).Remote)
	require.Equal(t, [][2]int64{{20, 29}}, runsOf(f.find(25)))
	require.ElementsMatch(t, []string{f.keys[0], f.keys[1]}, f.dead())
	require.Equal(t, int64(6000), f.c.Stats().RemoteBytes)
	// The diskless start reaches the high watermark.
	seg3 := f.seg(25, 29, 1)
	require.NoError(t, f.register(seg3))
	res = f.find(30)
	require.Equal(t, int64(30), res.DisklessStart)
	require.Empty(t, res.Batches)
	require.Equal(t, seg3.ID, f.find(29).Remote.ID)
	require.Len(t, f.dead(), 3)
	expect(f.seg(30, 30, 1), kafkaerr.OffsetOutOfRange, "end offset 30 is not below the high watermark 30")
}

// TestRegisterRemoteSegmentPending: a registration on its way to the log
// makes the next of the same segment a no-op, and the key known.
func TestRegisterRemoteSegmentPending(t *testing.T) {
	ctx := t.Context()
	root := state.NewView(nil)
	tp := wal.TopicPartition{TopicID: uuid.New()}
	root.Apply(state.CreateTopicRecord{TopicID: tp.TopicID, Name: "t", Partitions: 1, FirstPID: 0})
	spec := state.NewView(root)
	now := time.UnixMilli(1_764_500_000_000)
	spec.Apply(state.CommitFileRecord{ObjectID: 0, Key: "p/wal/a", CommitTime: now.UnixMilli(), Rows: []state.CommitRow{{PID: 0, BaseOffset: 0, LastOffset: 9, ByteSize: 100}}})
	g := &state.Group{Prefix: "p/", Spec: spec, Now: now.UnixMilli(), Facts: &state.Facts{}}
	s := remoteSeg("p/", tp, 0, 4, now, 1)
	for range 2 {
		o := &state.RegisterRemoteOp{BaseOp: state.NewBaseOp(ctx), Seg: s}
		o.Check(g)
		require.False(t, o.Finished && <-o.Done != nil)
	}
	require.Len(t, g.Records, 1, "registered once")
	require.Equal(t, int64(5), spec.Part(0).DisklessStart)
	known := &state.KnownKeysOp{BaseOp: state.NewBaseOp(ctx), Keys: []string{s.Key}}
	known.Check(g)
	require.True(t, known.Known[s.Key])
	next := &state.RegisterRemoteOp{BaseOp: state.NewBaseOp(ctx), Seg: remoteSeg("p/", tp, 3, 6, now, 1)}
	next.Check(g)
	require.Equal(t, kafkaerr.OffsetOutOfRange, code(<-next.Done), "checked against the pending registration")
}

// TestRemoteSegmentListOffsets: lookups by time are answered by the first
// remote segment (in offset order) whose max timestamp is at or after the
// one asked, before the batches; MaxTimestamp by the remote segment or
// run of the greatest, a remote segment winning a tie.
func TestRemoteSegmentListOffsets(t *testing.T) {
	ctx := t.Context()
	f := newRemoteFixture(t, TopicConfig{Retention: -1}, nil)
	f.commitRun(1000) // [0,9]
	f.commitRun(2000) // [10,19]
	f.commitRun(3000) // [20,29]
	seg1, seg2 := f.seg(0, 9, 1000), f.seg(10, 19, 2000)
	require.NoError(t, f.register(seg1))
	require.NoError(t, f.register(seg2))
	at := f.clock.Now()

	list := func(ts int64) ListOffsetsResult {
		t.Helper()
		res, err := f.c.ListOffsets(ctx, f.tp, ts)
		require.NoError(t, err)
		return res
	}
	res := list(500)
	require.Equal(t, int64(0), res.Offset)
	require.Equal(t, int64(1000), res.Timestamp)
	require.Equal(t, registered(seg1, at), *res.Remote)
	require.Nil(t, res.Batch)
	res = list(1000)
	require.Equal(t, seg1.ID, res.Remote.ID, "at the timestamp")
	res = list(1500)
	require.Equal(t, int64(10), res.Offset)
	require.Equal(t, seg2.ID, res.Remote.ID)
	res = list(2500)
	require.Nil(t, res.Remote)
	require.Equal(t, int64(20), res.Offset)
	require.Equal(t, int64(3000), res.Timestamp)
	require.Equal(t, int64(20), res.Batch.BaseOffset)
	res = list(3500)
	require.Equal(t, ListOffsetsResult{Offset: -1, Timestamp: -1}, res)
	res = list(MaxTimestamp)
	require.Nil(t, res.Remote)
	require.Equal(t, int64(20), res.Offset, "the run holds the greatest")

	// The log start within a remote segment: it answers from there.
	_, err := f.c.DeleteRecords(ctx, f.tp, 15)
	require.NoError(t, err)
	res = list(0)
	require.Equal(t, int64(15), res.Offset)
	require.Equal(t, seg2.ID, res.Remote.ID)
	require.Equal(t, int64(15), list(EarliestTimestamp).Offset)
	require.Equal(t, int64(30), list(LatestTimestamp).Offset)

	// A remote segment with the greatest timestamp, or as great as a
	// run's: it answers MaxTimestamp.
	g := newRemoteFixture(t, TopicConfig{Retention: -1}, nil)
	g.commitRun(7000)
	g.commitRun(7000)
	s := g.seg(0, 9, 7000)
	require.NoError(t, g.register(s))
	res, err = g.c.ListOffsets(ctx, g.tp, MaxTimestamp)
	require.NoError(t, err)
	require.Equal(t, s.ID, res.Remote.ID, "a tie: the remote segment comes first")
	require.Equal(t, int64(0), res.Offset)
	require.Equal(t, int64(7000), res.Timestamp)
}

// TestRemoteSegmentDeleteRecords: a new log start drops the remote
// segments wholly below it (their object rows die), keeps one that
// straddles it, and raises the diskless start when it is below.
func TestRemoteSegmentDeleteRecords(t *testing.T) {
	ctx := t.Context()
	f := newRemoteFixture(t, TopicConfig{Retention: -1}, nil)
	for range 4 {
		f.commitRun(1)
	}
	seg1, seg2 := f.seg(0, 9, 1), f.seg(10, 19, 1)
	require.NoError(t, f.register(seg1))
	require.NoError(t, f.register(seg2))
	at := f.clock.Now()
	f.clock.Advance(time.Second)

	low, err := f.c.DeleteRecords(ctx, f.tp, 15)
	require.NoError(t, err)
	require.Equal(t, int64(15), low)
	require.Equal(t, []RemoteSegment{registered(seg2, at)}, f.remote(), "seg1 goes, seg2 straddles 15 and stays")
	res := f.find(15)
	require.Equal(t, int64(15), res.LogStart)
	require.Equal(t, int64(20), res.DisklessStart)
	require.Equal(t, seg2.ID, res.Remote.ID)
	_, err = f.c.FindBatches(ctx, f.tp, 14, 1<<20)
	require.Equal(t, kafkaerr.OffsetOutOfRange, code(err))
	dead, err := f.c.DeadObjects(ctx, 100)
	require.NoError(t, err)
	deadAt := map[string]time.Time{}
	for _, d := range dead {
		deadAt[d.Key] = d.DeadSince
	}
	require.Equal(t, f.clock.Now(), deadAt[seg1.Key], "the dropped segment's files are dead now")
	require.NotContains(t, deadAt, seg2.Key)
	require.Equal(t, int64(1000), f.c.Stats().RemoteBytes)

	// Past the diskless start: every remote segment goes, and the
	// diskless start follows the log start.
	_, err = f.c.DeleteRecords(ctx, f.tp, 25)
	require.NoError(t, err)
	require.Empty(t, f.remote())
	res = f.find(25)
	require.Equal(t, int64(25), res.DisklessStart)
	require.Nil(t, res.Remote)
	require.Equal(t, [][2]int64{{20, 29}, {30, 39}}, runsOf(res))
	require.Contains(t, f.dead(), seg2.Key)
	require.Zero(t, f.c.Stats().RemoteSegments)
	require.Zero(t, f.c.Stats().RemoteBytes)
	// The next segment starts at (or below) the diskless start again.
	seg3 := f.seg(20, 29, 1)
	require.NoError(t, f.register(seg3), "a segment that straddles the log start")
	require.Equal(t, seg3.ID, f.find(25).Remote.ID)
	require.Equal(t, int64(30), f.find(30).DisklessStart)
}

// TestRemoteSegmentRetention: retention.ms drops whole remote segments,
// oldest first and only from the start, then runs; retention.bytes counts
// remote and diskless bytes, dropping whole remote segments first.
func TestRemoteSegmentRetention(t *testing.T) {
	ctx := t.Context()
	t.Run("ms", func(t *testing.T) {
		f := newRemoteFixture(t, TopicConfig{Retention: 60_000 * time.Millisecond, RetentionBytes: -1}, nil)
		now := f.clock.Now().UnixMilli()
		f.commitRun(now)           // [0,9]
		f.commitRun(now)           // [10,19]
		f.commitRun(now - 120_000) // [20,29]: old, but after one that stays
		f.commitRun(now + 60_000)  // [30,39]
		seg1, seg2 := f.seg(0, 9, now-61_000), f.seg(10, 19, now)
		require.NoError(t, f.register(seg1))
		require.NoError(t, f.register(seg2))
		changes, err := f.c.EnforceRetention(ctx)
		require.NoError(t, err)
		require.Equal(t, []RetentionChange{{TopicPartition: f.tp, LogStart: 10}}, changes)
		require.Len(t, f.remote(), 1)
		require.Equal(t, seg2.ID, f.remote()[0].ID)
		require.Equal(t, int64(10), f.find(10).LogStart)
		require.Equal(t, int64(20), f.find(10).DisklessStart)
		require.Contains(t, f.dead(), seg1.Key)

		f.clock.Advance(61 * time.Second) // seg2 and every run but [30,39] are old now
		changes, err = f.c.EnforceRetention(ctx)
		require.NoError(t, err)
		require.Equal(t, []RetentionChange{{TopicPartition: f.tp, LogStart: 30}}, changes)
		require.Empty(t, f.remote())
		res := f.find(30)
		require.Equal(t, int64(30), res.DisklessStart)
		require.Equal(t, [][2]int64{{30, 39}}, runsOf(res))
		require.Contains(t, f.dead(), seg2.Key)
	})
	t.Run("bytes", func(t *testing.T) {
		// Four runs of 100 bytes; two remote segments of 1000 over the
		// first two: 2200 bytes.
		for _, tc := range []struct {
			retention int64
			logStart  int64
			remote    int
		}{
			{2200, 0, 2},
			{1201, 0, 2},
			{1200, 10, 1}, // 2200-1000 >= 1200: the first segment goes
			{200, 20, 0},
			{101, 20, 0},
			{100, 30, 0}, // then a run
		} {
			f := newRemoteFixture(t, TopicConfig{Retention: -1, RetentionBytes: tc.retention}, nil)
			for range 4 {
				f.commitRun(f.clock.Now().UnixMilli())
			}
			require.NoError(t, f.register(f.seg(0, 9, 1)))
			require.NoError(t, f.register(f.seg(10, 19, 1)))
			_, err := f.c.EnforceRetention(ctx)
			require.NoError(t, err)
			res := f.find(tc.logStart)
			require.Equal(t, tc.logStart, res.LogStart, "retention.bytes %d", tc.retention)
			require.Equal(t, max(tc.logStart, 20), res.DisklessStart)
			require.Len(t, f.remote(), tc.remote)
			require.Equal(t, int64(tc.remote), f.c.Stats().RemoteSegments)
			require.Equal(t, int64(tc.remote*1000), f.c.Stats().RemoteBytes)
		}
	})
}

// TestRemoteSegmentDeleteTopic: a deleted topic's remote segments are
// dropped with the rest: their object rows die.
func TestRemoteSegmentDeleteTopic(t *testing.T) {
	ctx := t.Context()
	f := newRemoteFixture(t, TopicConfig{Retention: -1}, nil)
	f.commitRun(1)
	f.commitRun(1)
	seg := f.seg(0, 9, 1)
	require.NoError(t, f.register(seg))
	other := wal.TopicPartition{TopicID: mustCreate(t, f.c, "other", 1, TopicConfig{})}
	_, err := f.c.CommitFile(ctx, CommitFileRequest{ObjectKey: "p/wal/x", Coordinates: []wal.Coordinate{coord(other, 1, 10, -1, -1, -1, 1)}})
	require.NoError(t, err)
	otherSeg := remoteSeg("p/", other, 0, 4, f.clock.Now(), 1)
	require.NoError(t, f.register(otherSeg))
	require.Equal(t, int64(2), f.c.Stats().RemoteSegments)

	require.NoError(t, f.c.DeleteTopic(ctx, f.tp.TopicID))
	require.ElementsMatch(t, []string{f.keys[0], f.keys[1], seg.Key}, f.dead())
	_, err = f.c.RemoteSegments(ctx, f.tp)
	require.Equal(t, kafkaerr.UnknownTopicOrPartition, code(err))
	st := f.c.Stats()
	require.Equal(t, int64(1), st.RemoteSegments, "the other topic's stays")
	require.Equal(t, int64(1000), st.RemoteBytes)
	segs, err := f.c.RemoteSegments(ctx, other)
	require.NoError(t, err)
	require.Len(t, segs, 1)
	require.Equal(t, kafkaerr.UnknownTopicOrPartition, code(f.register(f.seg(0, 9, 1))))
}

// TestRemoteSegmentRebuild: restarting over the same database, rebuilding
// from the log into an empty folder, restoring a snapshot and a follower
// all give the same remote segments, diskless start and tables.
func TestRemoteSegmentRebuild(t *testing.T) {
	ctx := t.Context()
	bucket := memblob.OpenBucket(nil)
	defer bucket.Close()
	f := newRemoteFixture(t, TopicConfig{Retention: -1}, &leaderOptions{Bucket: bucket})
	for range 5 {
		f.commitRun(f.clock.Now().UnixMilli())
	}
	require.NoError(t, f.register(f.seg(0, 14, 10)))
	f.clock.Advance(time.Second)
	require.NoError(t, f.register(f.seg(15, 29, 20)))
	f.clock.Advance(time.Second)
	_, err := f.c.DeleteRecords(ctx, f.tp, 20)
	require.NoError(t, err)
	require.NoError(t, f.register(f.seg(30, 34, 30)))

	type state struct {
		segs       []RemoteSegment
		low, mid   FindResult
		stats      ShardStats
		rows       []string
		listOffset ListOffsetsResult
	}
	get := func(c *leader) state {
		t.Helper()
		var s state
		var err error
		s.segs, err = c.RemoteSegments(ctx, f.tp)
		require.NoError(t, err)
		s.low, err = c.FindBatches(ctx, f.tp, 20, 1<<20)
		require.NoError(t, err)
		s.mid, err = c.FindBatches(ctx, f.tp, 35, 1<<20)
		require.NoError(t, err)
		s.listOffset, err = c.ListOffsets(ctx, f.tp, 15)
		require.NoError(t, err)
		st := c.Stats()
		s.stats = ShardStats{RemoteSegments: st.RemoteSegments, RemoteBytes: st.RemoteBytes}
		s.rows = tableRows(t, c)
		return s
	}
	want := get(f.c)
	require.Len(t, want.segs, 2)
	require.Equal(t, int64(35), want.low.DisklessStart)
	require.Equal(t, int64(15), want.low.Remote.BaseOffset)
	require.Equal(t, [][2]int64{{30, 39}, {40, 49}}, runsOf(want.mid))
	require.Equal(t, ShardStats{RemoteSegments: 2, RemoteBytes: 2000}, want.stats)

	// A follower.
	fl, err := OpenFollower(ctx, f.log.Writer(), &FollowerOptions{Options: Options{Dir: t.TempDir(), Prefix: "p/"}})
	require.NoError(t, err)
	defer fl.Close()
	fsegs, err := fl.RemoteSegments(ctx, f.tp)
	require.NoError(t, err)
	require.Equal(t, want.segs, fsegs)
	for _, off := range []int64{20, 35} {
		got, err := fl.FindBatches(ctx, f.tp, off, 1<<20)
		require.NoError(t, err)
		lead, err := f.c.FindBatches(ctx, f.tp, off, 1<<20)
		require.NoError(t, err)
		require.Equal(t, lead, got)
	}
	flo, err := fl.ListOffsets(ctx, f.tp, 15)
	require.NoError(t, err)
	require.Equal(t, want.listOffset, flo)

	// Restart over the same database.
	require.NoError(t, f.c.Close())
	f.c = openTest(t, f.log, f.dir, f.opts)
	require.Equal(t, want, get(f.c))

	// Rebuild from the log into an empty folder.
	require.NoError(t, f.c.Close())
	require.NoError(t, os.RemoveAll(f.dir))
	f.c = openTest(t, f.log, f.dir, f.opts)
	require.Equal(t, want, get(f.c))

	// From a snapshot, the log before it trimmed.
	_, err = f.c.Snapshot(ctx)
	require.NoError(t, err)
	require.Positive(t, f.log.Start())
	require.NoError(t, f.c.Close())
	require.NoError(t, os.RemoveAll(f.dir))
	f.c = openTest(t, f.log, f.dir, f.opts)
	require.Equal(t, want, get(f.c))
	// And it goes on from there.
	require.NoError(t, f.register(f.seg(35, 39, 40)))
	require.Equal(t, int64(40), f.find(40).DisklessStart)
}

// remoteFiles uploads a remote segment's files (all but .txnindex).
func remoteFiles(t *testing.T, f *shardsFixture, key string) []string {
	t.Helper()
	var out []string
	for _, ext := range RemoteSegmentExts {
		if ext == ".txnindex" {
			continue
		}
		require.NoError(t, f.bucket.WriteAll(context.Background(), key+ext, []byte(ext), nil))
		out = append(out, key+ext)
	}
	return out
}

func (f *shardsFixture) exists(key string) bool {
	f.t.Helper()
	ok, err := f.bucket.Exists(context.Background(), key)
	require.NoError(f.t, err)
	return ok
}

// TestRemoteSegmentLifecycle: a dropped remote segment's files are all
// deleted by the shard's lifecycle after the grace, OnDelete hears its key
// once, and the key is forgotten past the commit deadline; the WAL object
// the registration released goes the usual way.
func TestRemoteSegmentLifecycle(t *testing.T) {
	ctx := t.Context()
	var onDelete []string
	f := newShardsFixture(t, 2, memblob.OpenBucket(nil), &Options{Lifecycle: LifecycleOptions{OnDelete: func(key string) { onDelete = append(onDelete, key) }}})
	id, err := f.s.CreatePartitions(ctx, CreatePartitionsRequest{Name: "t", Partitions: 2, Config: TopicConfig{Retention: -1}})
	require.NoError(t, err)
	tp := wal.TopicPartition{TopicID: id, Partition: 1}
	obj := f.upload(f.clock.Now(), 100)
	_, err = f.s.CommitFile(ctx, CommitFileRequest{ObjectKey: obj, Coordinates: coordsFor(tp)})
	require.NoError(t, err)
	obj2 := f.upload(f.clock.Now(), 100)
	_, err = f.s.CommitFile(ctx, CommitFileRequest{ObjectKey: obj2, Coordinates: coordsFor(tp)})
	require.NoError(t, err)

	seg := remoteSeg(testPrefix, tp, 0, 0, f.clock.Now(), 1)
	files := remoteFiles(t, f, seg.Key)
	require.NoError(t, f.s.RegisterRemoteSegment(ctx, seg))
	segs, err := f.s.RemoteSegments(ctx, tp)
	require.NoError(t, err)
	require.Len(t, segs, 1)
	require.Equal(t, seg.ID, segs[0].ID)
	shard, err := f.s.Shards().ShardOf(tp)
	require.NoError(t, err)
	require.Equal(t, []int{shard}, f.knownBy(seg.Key))

	// The released object: deleted after the grace.
	require.Equal(t, 1, f.run().Waiting)
	f.clock.Advance(testGrace)
	require.Equal(t, 1, f.run().Deleted)
	require.False(t, f.exists(obj))
	require.Equal(t, []string{obj}, onDelete)
	for _, file := range files {
		require.True(t, f.exists(file), "a live segment's files stay")
	}

	// The segment dropped: its files go after the grace, all of them.
	f.clock.Advance(time.Second)
	_, err = f.s.DeleteRecords(ctx, tp, 1)
	require.NoError(t, err)
	require.Equal(t, 1, f.run().Waiting)
	f.clock.Advance(testGrace - time.Millisecond)
	require.Equal(t, 1, f.run().Waiting)
	for _, file := range files {
		require.True(t, f.exists(file), "not before the grace")
	}
	f.clock.Advance(time.Millisecond)
	require.Equal(t, 1, f.run().Deleted, "a segment is one object")
	for _, file := range files {
		require.False(t, f.exists(file), file)
	}
	require.Equal(t, []string{obj, seg.Key}, onDelete, "once, with the segment's key")
	require.True(t, f.exists(obj2))
	require.Equal(t, []int{shard}, f.knownBy(seg.Key), "known until its commit deadline has passed")
	f.clock.Advance(5 * time.Minute)
	require.Equal(t, 0, f.run().Deleted)
	require.Empty(t, f.knownBy(seg.Key))
	require.Equal(t, []string{obj, seg.Key}, onDelete)
	require.Equal(t, kafkaerr.RequestTimedOut, code(f.s.RegisterRemoteSegment(ctx, seg)), "forgotten, and past its deadline")
}

// TestRemoteSegmentOrphans: the orphan collector deletes the files of
// remote segments named before the threshold that no shard knows, and
// keeps registered ones, recent ones and keys it cannot read.
func TestRemoteSegmentOrphans(t *testing.T) {
	ctx := t.Context()
	f := newShardsFixture(t, 2, memblob.OpenBucket(nil), nil)
	id, err := f.s.CreatePartitions(ctx, CreatePartitionsRequest{Name: "t", Partitions: 2, Config: TopicConfig{Retention: -1}})
	require.NoError(t, err)
	tp := func(i int) wal.TopicPartition { return wal.TopicPartition{TopicID: id, Partition: int32(i)} }
	_, err = f.s.CommitFile(ctx, CommitFileRequest{ObjectKey: "p/wal/not-a-uuid", Coordinates: coordsFor(tp(0), tp(1), tp(1))})
	require.NoError(t, err)

	reg := remoteSeg(testPrefix, tp(1), 0, 0, f.clock.Now(), 1)
	regFiles := remoteFiles(t, f, reg.Key)
	require.NoError(t, f.s.RegisterRemoteSegment(ctx, reg))
	orphan := remoteSeg(testPrefix, tp(0), 0, 0, f.clock.Now(), 1) // its registration failed
	orphanFiles := remoteFiles(t, f, orphan.Key)
	junk := testPrefix + state.TieredDir + "notes.txt"
	require.NoError(t, f.bucket.WriteAll(ctx, junk, []byte("x"), nil))

	// Within the grace: nothing is a candidate.
	run, err := f.s.CollectOrphans(ctx)
	require.NoError(t, err)
	require.Zero(t, run.Candidates)
	require.Equal(t, 13, run.Listed)

	f.clock.Advance(30 * time.Minute)
	fresh := remoteSeg(testPrefix, tp(0), 0, 0, f.clock.Now(), 1) // an upload in flight
	freshFiles := remoteFiles(t, f, fresh.Key)
	run, err = f.s.CollectOrphans(ctx)
	require.NoError(t, err)
	require.Equal(t, f.clock.Now().Add(-10*time.Minute), run.Threshold, "no WAL object key has a time: now minus the grace")
	require.Equal(t, 12, run.Candidates, "the files of both old segments")
	require.Equal(t, 6, run.Deleted)
	require.Equal(t, 19, run.Listed)
	for _, file := range orphanFiles {
		require.False(t, f.exists(file), file)
	}
	for _, file := range append(append(regFiles, freshFiles...), junk) {
		require.True(t, f.exists(file), file)
	}
	require.Equal(t, int64(6), f.s.Stats().OrphansDeleted)
}

// TestRemoteSegmentRecordDecode: a remote segment record round-trips, and
// one cut short, or with a byte more, does not decode (with a valid CRC,
// so that the record's own decoder is what refuses it).
func TestRemoteSegmentRecordDecode(t *testing.T) {
	named := time.UnixMilli(1_764_500_000_000)
	tp := wal.TopicPartition{TopicID: uuid.New(), Partition: 3}
	id := segmentID(named)
	r := state.RemoteSegmentRecord{ID: id, PID: 9, ObjectID: 4, Key: RemoteSegmentKey("p/", tp, 100, id), BaseOffset: 100, EndOffset: 199,
		MaxTimestamp: named.UnixMilli(), Size: 1 << 20, IndexSize: 80, TimeIndexSize: 120, TxnIndexSize: 12, Uploader: 1, Time: named.UnixMilli() + 5}
	e, err := state.DecodeEntry(state.AppendEntry(nil, state.Entry{Epoch: 2, Records: []state.Record{r}}))
	require.NoError(t, err)
	require.Equal(t, []state.Record{r}, e.Records)
	payload := r.AppendTo(nil)
	frame := func(p []byte) []byte {
		b := state.AppendEntry(nil, state.Entry{Epoch: 2})[:state.EntryHeaderSize]
		b = append(b, 1, byte(state.RecRemoteSegment))
		b = state.AppendString(b, string(p))
		return fixEntryCRC(b)
	}
	require.Equal(t, state.AppendEntry(nil, state.Entry{Epoch: 2, Records: []state.Record{r}}), frame(payload))
	for n := range len(payload) {
		_, err := state.DecodeEntry(frame(payload[:n]))
		require.ErrorIs(t, err, ErrCorruptEntry, "cut to %d bytes", n)
	}
	_, err = state.DecodeEntry(frame(append(payload, 0)))
	require.ErrorIs(t, err, ErrCorruptEntry)
}
