package coordinator

import (
	"bytes"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/diskless-go/diskless/coordinator/state"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/wal"
)

func sampleEntries() [][]byte {
	id := uuid.MustParse("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
	seg1 := uuid.MustParse("01936b2e-1f00-7000-8000-000000000003")
	seg2 := uuid.MustParse("01936b2e-2000-7000-8000-000000000004")
	return [][]byte{
		state.AppendEntry(nil, state.Entry{Epoch: 1, Records: []state.Record{state.EpochRecord{Epoch: 1, Leader: "broker-1"}}}),
		state.AppendEntry(nil, state.Entry{Epoch: 3, Prev: 0x8a5c0b1d, Records: []state.Record{
			state.CreateTopicRecord{TopicID: id, Name: "orders", Partitions: 6, FirstPID: 10, Config: TopicConfig{Retention: 1000 * time.Millisecond, RetentionBytes: -1, Delete: true, LogAppendTime: true, MaxMessageBytes: 1 << 20}},
			state.CommitFileRecord{ObjectID: 4, Key: "wal/0190", Size: 5000, Uploader: 2, CommitTime: 1_764_500_000_000,
				Rows:      []state.CommitRow{{PID: 10, BaseOffset: 0, LastOffset: 9, BytePos: 1, ByteSize: 900, MaxTimestamp: 1_764_499_999_000}},
				Producers: []state.ProducerBatch{{PID: 10, ProducerID: 7, Epoch: 1, FirstSeq: 0, LastSeq: 9, LastOffset: 9, Count: 10, Timestamp: 1_764_499_999_000}}},
			state.TrimRecord{PID: 10, LogStart: 5, Time: 1_764_500_000_001},
			state.InitProducerIDRecord{ProducerID: 8},
			state.ObjectsDeletedRecord{ObjectIDs: []int64{1, 2, 3}},
			state.DeleteTopicRecord{TopicID: id, Time: 1_764_500_000_002},
		}}),
		state.AppendEntry(nil, state.Entry{Epoch: 0}),
		// Coordinator: a topic of which this shard serves some partitions, an
		// object committed to several shards, an ownership received.
		state.AppendEntry(nil, state.Entry{Epoch: 4, Records: []state.Record{
			state.CreateTopicRecord{TopicID: id, Name: "spread", Partitions: 8, FirstPID: 16, Config: TopicConfig{Retention: -1, RetentionBytes: -1, Delete: true}, Assigned: []int32{1, 5}},
			state.CommitFileRecord{ObjectID: 5, Key: "p/wal/01936b2e-1f00-7000-8000-000000000001", Size: 300, Uploader: 1, CommitTime: 1_764_500_000_100,
				Rows:   []state.CommitRow{{PID: 17, BaseOffset: 0, LastOffset: 2, BytePos: 1, ByteSize: 200, MaxTimestamp: 1_764_500_000_000}},
				Owners: []int32{3, 0, 2}},
			state.OwnershipRecord{ObjectID: 6, Key: "p/wal/01936b2e-1f00-7000-8000-000000000002", Owners: []int32{2, 0}, Time: 1_764_500_000_200},
		}}),
		// segment.bytes and segment.ms other than the defaults.
		state.AppendEntry(nil, state.Entry{Epoch: 5, Records: []state.Record{
			state.CreateTopicRecord{TopicID: id, Name: "tiered", Partitions: 2, FirstPID: 24, Config: TopicConfig{Retention: -1, RetentionBytes: -1, Delete: true,
				MaxMessageBytes: 1 << 20, SegmentBytes: 64 << 20, SegmentTime: state.MsDuration(3600_000)}},
		}}),
		// Remote segments registered, one with a .txnindex; then a trim
		// that drops the first.
		state.AppendEntry(nil, state.Entry{Epoch: 6, Records: []state.Record{
			state.RemoteSegmentRecord{ID: seg1, PID: 24, ObjectID: 7, Key: RemoteSegmentKey("p/", wal.TopicPartition{TopicID: id}, 0, seg1),
				BaseOffset: 0, EndOffset: 99, MaxTimestamp: 1_764_500_000_300, Size: 1 << 20, IndexSize: 160, TimeIndexSize: 240,
				Uploader: 2, Time: 1_764_500_000_400},
			state.RemoteSegmentRecord{ID: seg2, PID: 24, ObjectID: 8, Key: RemoteSegmentKey("p/", wal.TopicPartition{TopicID: id}, 100, seg2),
				BaseOffset: 100, EndOffset: 250, MaxTimestamp: 1_764_500_000_350, Size: 3 << 20, IndexSize: 800, TimeIndexSize: 1200, TxnIndexSize: 48,
				Uploader: 0, Time: 1_764_500_000_500},
			state.TrimRecord{PID: 24, LogStart: 100, Time: 1_764_500_000_600},
		}}),
		// Committed offsets: a commit of two partitions, a delete of one,
		// a delete of a whole group.
		state.AppendEntry(nil, state.Entry{Epoch: 7, Records: []state.Record{
			state.OffsetCommitRecord{Group: "readers", Time: 1_764_500_000_700, Offsets: []GroupOffset{
				{Topic: "orders", TopicID: id, Partition: 0, Offset: 42, LeaderEpoch: -1, Metadata: "", CommitTime: 1_764_500_000_700},
				{Topic: "orders", TopicID: id, Partition: 3, Offset: 1 << 40, LeaderEpoch: 7, Metadata: "host-a", CommitTime: 1_764_500_000_700},
			}},
			state.OffsetDeleteRecord{Group: "readers", Partitions: []GroupPartition{{Topic: "orders", Partition: 3}}},
			state.OffsetDeleteRecord{Group: "writers"},
		}}),
		// Group claims.
		state.AppendEntry(nil, state.Entry{Epoch: 8, Records: []state.Record{
			state.GroupClaimRecord{Group: "readers", Epoch: 1},
			state.GroupClaimRecord{Group: "readers", Epoch: 1 << 33},
		}}),
		// Group metadata stored, then deleted.
		state.AppendEntry(nil, state.Entry{Epoch: 9, Records: []state.Record{
			state.GroupMetadataRecord{Group: "readers", Generation: 3, Value: []byte("\x00\x03consumer"), Time: 1_764_500_000_800},
			state.GroupMetadataRecord{Group: "readers", Generation: 4, Time: 1_764_500_000_900},
		}}),
		// Partitions added: all of them served here, some, none; then
		// one more served of those there.
		state.AppendEntry(nil, state.Entry{Epoch: 10, Records: []state.Record{
			state.AddPartitionsRecord{TopicID: id, Partitions: 4, FirstPID: 40},
			state.AddPartitionsRecord{TopicID: id, Partitions: 6, FirstPID: 44, Assigned: []int32{5}},
			state.AddPartitionsRecord{TopicID: id, Partitions: 8, FirstPID: 46, Assigned: []int32{}},
			state.AddPartitionsRecord{TopicID: id, Partitions: 8, Assigned: []int32{4}},
		}}),
	}
}

// TestEntryGolden: the entries of sampleEntries, byte for byte, are in
// testdata/entries-v0.golden (one hex line each); -update rewrites it.
// Those written before shards (the first three) must never change.
func TestEntryGolden(t *testing.T) {
	path := filepath.Join("testdata", "entries-v1.golden")
	var lines []string
	for _, b := range sampleEntries() {
		lines = append(lines, hex.EncodeToString(b))
	}
	got := strings.Join(lines, "\n") + "\n"
	if *updateGolden {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), got)
	// Version 0 entries (no prev) still decode, to what they were.
	v0, err := os.ReadFile(filepath.Join("testdata", "entries-v0.golden"))
	require.NoError(t, err)
	v0lines, v1lines := strings.Fields(string(v0)), strings.Fields(string(want))
	require.Len(t, v0lines, len(v1lines))
	for i := range v1lines {
		b1, err := hex.DecodeString(v1lines[i])
		require.NoError(t, err)
		e1, err := state.DecodeEntry(b1)
		require.NoError(t, err, "golden entry %d", i)
		require.True(t, e1.Chained)
		b0, err := hex.DecodeString(v0lines[i])
		require.NoError(t, err)
		e0, err := state.DecodeEntry(b0)
		require.NoError(t, err, "version 0 entry %d", i)
		require.False(t, e0.Chained)
		e1.Prev, e1.Chained = 0, false
		require.Equal(t, e1, e0, "entry %d decodes as it did in version 0", i)
	}
}

var updateGolden = flag.Bool("update", false, "rewrite golden files")

// checkGolden checks that entries round-trip and are, byte for byte, the
// lines of testdata/name (one hex line each); -update rewrites it.
func checkGolden(t *testing.T, name string, entries [][]byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	var lines []string
	for _, b := range entries {
		lines = append(lines, hex.EncodeToString(b))
		e, err := state.DecodeEntry(b)
		require.NoError(t, err)
		require.Equal(t, b, state.AppendEntry(nil, e))
	}
	got := strings.Join(lines, "\n") + "\n"
	if *updateGolden {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), got)
}

// TestOptionalFields: the optional fields are written only when present,
// so records without them are what they were; an empty list does not
// decode (it has the other encoding: none).
func TestOptionalFields(t *testing.T) {
	id := uuid.MustParse("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
	ct := state.CreateTopicRecord{TopicID: id, Name: "x", Partitions: 4, FirstPID: 1, Config: TopicConfig{MaxMessageBytes: 1}}
	withAll := ct
	withAll.Assigned = []int32{0, 1, 2, 3}
	require.Equal(t, ct.AppendTo(nil), withAll.AppendTo(nil)[:len(ct.AppendTo(nil))])
	for _, bad := range [][]int32{{}, {2, 1}, {1, 1}, {4}, {-1}} {
		r := ct
		r.Assigned = bad
		e := state.AppendEntry(nil, state.Entry{Records: []state.Record{r}})
		_, err := state.DecodeEntry(e)
		require.ErrorIs(t, err, ErrCorruptEntry, "assigned %v", bad)
	}
	cf := state.CommitFileRecord{ObjectID: 1, Key: "k", CommitTime: 5}
	e := state.AppendEntry(nil, state.Entry{Records: []state.Record{state.CommitFileRecord{ObjectID: 1, Key: "k", CommitTime: 5, Owners: []int32{}}}})
	_, err := state.DecodeEntry(e)
	require.ErrorIs(t, err, ErrCorruptEntry, "an empty owners list")
	got, err := state.DecodeEntry(state.AppendEntry(nil, state.Entry{Records: []state.Record{cf}}))
	require.NoError(t, err)
	require.Nil(t, got.Records[0].(state.CommitFileRecord).Owners)
}

func TestEntryRoundTrip(t *testing.T) {
	for _, b := range sampleEntries() {
		e, err := state.DecodeEntry(b)
		require.NoError(t, err)
		require.Equal(t, b, state.AppendEntry(nil, e))
	}
	b := sampleEntries()[1]
	for i := range b {
		bad := bytes.Clone(b)
		bad[i] ^= 0x10
		_, err := state.DecodeEntry(bad)
		require.ErrorIs(t, err, ErrCorruptEntry, "byte %d", i)
	}
	// A varint that is not minimal does not decode: every entry has one
	// encoding.
	nonMinimal := append(bytes.Clone(b[:state.EntryHeaderSize]), 0x87, 0x00) // count 7 in two bytes
	_, err := state.DecodeEntry(fixEntryCRC(nonMinimal))
	require.ErrorIs(t, err, ErrCorruptEntry)
	for n := 0; n < len(b); n++ {
		_, err := state.DecodeEntry(b[:n])
		require.ErrorIs(t, err, ErrCorruptEntry, "truncated to %d", n)
	}
}

// FuzzEntry: decoding never panics, never allocates beyond its input's
// means, and what decodes re-encodes to the same bytes.
func FuzzEntry(f *testing.F) {
	for _, b := range slices.Concat(sampleEntries(), sampleTxnEntries(), sampleCompactEntries(), sampleSecurityEntries(), sampleQuotaEntries(), samplePendingEntries()) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// Give the fuzzer a valid CRC half the time, so it reaches the
		// records.
		for _, in := range [][]byte{b, fixEntryCRC(b)} {
			e, err := state.DecodeEntry(in)
			if err != nil {
				require.ErrorIs(t, err, ErrCorruptEntry)
				continue
			}
			out := state.AppendEntry(nil, e)
			if !e.Chained {
				out = entryV0(out)
			}
			require.Equal(t, in, out)
		}
	})
}

// entryV0 rewrites an entry as version 0 wrote it: no prev.
func entryV0(b []byte) []byte {
	v0 := append([]byte{0, 0, 0, 0, 0}, b[5:9]...)
	return fixEntryCRC(append(v0, b[13:]...))
}

func fixEntryCRC(b []byte) []byte {
	if len(b) < 4 {
		return b
	}
	c := bytes.Clone(b)
	sum := crcOf(c[4:])
	c[0], c[1], c[2], c[3] = byte(sum>>24), byte(sum>>16), byte(sum>>8), byte(sum)
	return c
}
