package coordinator

// Fuzz targets for the coordinator's decoders other than the log entry
// (FuzzEntry): the BLOB columns of the SQLite store, the remote segment
// files it finds in a bucket, and a snapshot as a restore reads it (the
// metadata logs' own decoders are fuzzed in package metalog). Their seeds run under plain `go test`; `make fuzz` fuzzes
// them.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/diskless-go/diskless/coordinator/store"

	"github.com/diskless-go/diskless/coordinator/state"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless/wal"
)

// FuzzStoreBlobs: decodeInt32s (owners, assigned partitions),
// decodeProducerBatches (a producer's last batches) and
// state.DecodePendingCommit (the pending queue's rows) never panic, fail
// only with ErrCorruptEntry, allocate no more than the input can hold,
// and what they decode re-encodes to the input: every value has one
// encoding.
func FuzzStoreBlobs(f *testing.F) {
	f.Add(state.AppendInt32s(nil, []int32{0, 3, 7}))
	f.Add(state.AppendInt32s(nil, []int32{2147483647}))
	f.Add(store.AppendProducerBatches(nil, []state.BatchMeta{
		{FirstSeq: 0, LastSeq: 9, LastOffset: 9, Count: 10, Timestamp: 1_764_500_000_000},
		{FirstSeq: 10, LastSeq: 2147483647, LastOffset: 1 << 40, Count: 1, Timestamp: -1},
	}))
	f.Add(store.AppendProducerBatches(nil, nil))
	f.Add(state.AppendPendingCommit(nil, state.PendingCommit{ObjectID: 9, Key: "wal/k",
		Held: []state.HeldRange{{PID: 3, From: 10, To: 20}},
		Undo: []state.ProducerUndo{{Key: state.ProducerKey{PID: 3, ProducerID: 7}, Before: state.ProducerState{Epoch: -1},
			After: state.ProducerState{Epoch: 0, Batches: []state.BatchMeta{{FirstSeq: 0, LastSeq: 9, LastOffset: 19, Count: 10, Timestamp: 5}}}}}}))
	f.Add([]byte{})
	f.Add([]byte{0x80, 0x00})       // a count that is not minimal
	f.Add([]byte{0xff, 0xff, 0x03}) // a count larger than the bytes
	f.Fuzz(func(t *testing.T, b []byte) {
		orig := bytes.Clone(b)
		vs, err := store.DecodeInt32s(b)
		require.Equal(t, orig, b)
		if err != nil {
			require.ErrorIs(t, err, ErrCorruptEntry)
		} else {
			require.NotEmpty(t, vs, "a non-NULL blob decodes to a non-empty list")
			require.LessOrEqual(t, len(vs), len(b))
			for _, v := range vs {
				require.GreaterOrEqual(t, v, int32(0))
			}
			require.Equal(t, b, store.Int32sBlob(vs))
		}

		pc, err := state.DecodePendingCommit(b)
		require.Equal(t, orig, b)
		if err != nil {
			require.ErrorIs(t, err, ErrCorruptEntry)
		} else {
			require.Equal(t, b, state.AppendPendingCommit(nil, pc), "a pending commit as the store keeps it")
		}

		batches, err := store.DecodeProducerBatches(b)
		require.Equal(t, orig, b)
		if err != nil {
			require.ErrorIs(t, err, ErrCorruptEntry)
			return
		}
		require.LessOrEqual(t, 5*len(batches), len(b))
		require.Equal(t, b, store.AppendProducerBatches(nil, batches))
	})
}

// FuzzKeyNames: the parser of the remote segment names the coordinator
// lists never panics, and accepts a name only when it is exactly a remote
// segment's key or one of its files'. Anything else in the bucket is
// ignored, never taken for one. (The metadata logs' names are fuzzed in
// package metalog.)
func FuzzKeyNames(f *testing.F) {
	seg := uuid.MustParse("01936b2e-1f00-7000-8000-000000000003")
	topic := uuid.MustParse("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
	remote := RemoteSegmentKey("p/", wal.TopicPartition{TopicID: topic, Partition: 3}, 100, seg)
	for _, s := range []string{
		"p/meta/0/log/00000000000000000042", "p/meta/0/log/0000000000000000042", "p/meta/0/log/-0000000000000000042",
		"p/meta/0/log/09223372036854775807", "p/meta/0/log/09223372036854775808", "p/meta/0/log/0000000000000000004x",
		"00000000000000000007.log", "00000000000000000007.log.tmp", "+0000000000000000007.log",
		remote, remote + ".log", remote + ".metadata", remote + ".snapshot.log", strings.ToUpper(remote),
		strings.Replace(remote, "-3/", "-03/", 1), strings.Replace(remote, "-3/", "--3/", 1),
		strings.Replace(remote, "01936b2e-1f00-7", "01936b2e-1f00-4", 1), "p/tiered/", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		segKey, id, ts, ok := ParseRemoteSegmentKey("p/", name)
		if !ok {
			require.Empty(t, segKey)
			return
		}
		require.True(t, state.IsUUIDv7(id))
		require.Equal(t, state.UUIDV7Time(id), ts)
		ext, found := strings.CutPrefix(name, segKey)
		require.True(t, found, "the segment key is a prefix of the file's")
		require.True(t, ext == "" || slices.Contains(RemoteSegmentExts, ext), "extension %q", ext)
		// The segment key parses to itself; its fields rebuild it.
		again, id2, _, ok := ParseRemoteSegmentKey("p/", segKey)
		require.True(t, ok)
		require.Equal(t, segKey, again)
		require.Equal(t, id, id2)
		require.True(t, strings.HasSuffix(segKey, "-"+id.String()))
	})
}

// FuzzSnapshotRestore: a follower that must start from a snapshot (the log
// is trimmed) and finds a damaged snapshot under the snapshot's key
// either fails to open, or opens with exactly the state of the good
// snapshot plus the log after it: a damaged snapshot is never served. The
// snapshot is a zstd stream (with its checksum) of a SQLite database.
// Under plain `go test` a seed runs in the test FuzzSnapshotRestore/seed#N,
// so the follower's folder holds a '#' (which the SQLite URI once cut the
// path at).
//
// The damage is relative to the good snapshot, which each fuzzing process
// makes anew (topic IDs and times differ from one to the next): cut it to
// cut bytes (0: keep it whole), flip the bits of flip at at, and append
// tail. With cut 1 and flip 0 the snapshot is tail alone: any bytes.
func FuzzSnapshotRestore(f *testing.F) {
	ctx := context.Background()
	bucket := memblob.OpenBucket(nil)
	defer bucket.Close()
	log := newTestLog()
	c := openTest(f, log, f.TempDir(), &leaderOptions{Bucket: bucket, Prefix: "p/", SnapshotEvery: -1})
	rng := rand.New(rand.NewPCG(12, 12))
	var topics []uuid.UUID
	objects := 0
	workload(f, c, rng, 40, &topics, &objects)
	_, err := c.Snapshot(ctx)
	require.NoError(f, err)
	workload(f, c, rng, 10, &topics, &objects)
	want := checksum(f, c)
	require.NoError(f, c.Close())
	require.Positive(f, log.Start(), "the log is trimmed: a reader needs the snapshot")

	var key string
	var good []byte
	it := bucket.List(&blob.ListOptions{Prefix: "p/meta/0/snapshots/"})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(f, err)
		key = obj.Key
		good, err = bucket.ReadAll(ctx, key)
		require.NoError(f, err)
	}
	require.NotEmpty(f, good)
	f.Add(uint32(0), uint32(0), byte(0), []byte{})           // the good snapshot
	f.Add(uint32(len(good)/2), uint32(0), byte(0), []byte{}) // cut in half
	f.Add(uint32(len(good)-4), uint32(0), byte(0), []byte{}) // no checksum
	f.Add(uint32(0), uint32(0), byte(0), []byte{0, 0, 0, 0}) // bytes after the frame
	f.Add(uint32(0), uint32(len(good)-2), byte(1), []byte{}) // the checksum
	f.Add(uint32(1), uint32(0), byte(0), []byte("SQLite format 3\x00"))
	for _, at := range []int{0, 4, 6, 12, len(good) / 3, len(good) / 2} {
		f.Add(uint32(0), uint32(at), byte(0x20), []byte{})
	}
	f.Fuzz(func(t *testing.T, cut, at uint32, flip byte, tail []byte) {
		data := bytes.Clone(good)
		if cut > 0 {
			data = data[:int(cut)%len(good)]
		}
		if len(data) > 0 {
			data[int(at)%len(data)] ^= flip
		}
		data = append(data, tail...)
		damaged := !bytes.Equal(data, good)

		b := memblob.OpenBucket(nil)
		defer b.Close()
		require.NoError(t, b.WriteAll(t.Context(), key, data, nil))
		tctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		fl, err := OpenFollower(tctx, log.Writer(), &FollowerOptions{Options: Options{Dir: t.TempDir(), Bucket: b, Prefix: "p/"}})
		if err != nil {
			require.NotErrorIs(t, err, context.DeadlineExceeded)
			require.True(t, damaged, "the good snapshot does not open: %v", err)
			return
		}
		defer fl.Close()
		require.Equal(t, want, checksum(t, fl.c), "a follower opened on a damaged snapshot (damaged: %v)", damaged)
	})
}
