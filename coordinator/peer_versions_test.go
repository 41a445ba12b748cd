package coordinator

import (
	"context"
	"encoding"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/wal"
)

// gobSchema writes t as gob sees it on the wire: exported fields by name
// and type, pointers as what they point to, types with a binary or gob
// encoding of their own by name.
func gobSchema(sb *strings.Builder, t reflect.Type, seen map[reflect.Type]bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Implements(reflect.TypeFor[encoding.BinaryMarshaler]()) || reflect.PointerTo(t).Implements(reflect.TypeFor[encoding.BinaryMarshaler]()) {
		fmt.Fprintf(sb, "binary(%s)", t)
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if seen[t] {
			fmt.Fprintf(sb, "%s", t.Name())
			return
		}
		seen[t] = true
		defer delete(seen, t)
		sb.WriteString("{")
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			if f.Anonymous {
				sb.WriteString(f.Name + ":")
			} else {
				sb.WriteString(f.Name + " ")
			}
			gobSchema(sb, f.Type, seen)
			sb.WriteString("; ")
		}
		sb.WriteString("}")
	case reflect.Slice:
		sb.WriteString("[]")
		gobSchema(sb, t.Elem(), seen)
	case reflect.Array:
		fmt.Fprintf(sb, "[%d]", t.Len())
		gobSchema(sb, t.Elem(), seen)
	case reflect.Map:
		sb.WriteString("map[")
		gobSchema(sb, t.Key(), seen)
		sb.WriteString("]")
		gobSchema(sb, t.Elem(), seen)
	case reflect.Interface:
		fmt.Fprintf(sb, "interface(%s)", t)
	default:
		sb.WriteString(t.Kind().String())
	}
}

// TestPeerMessagesPinned: the gob types of every version of every call
// between brokers are those testdata/peer-messages.txt lists. A change to
// one (a field added, renamed or retyped) fails here: it is a new version
// of the method (see peer_versions.go), not an edit of an old one. Run
// with -update only to add a new version's lines.
func TestPeerMessagesPinned(t *testing.T) {
	var lines []string
	for wire, m := range serveFuncs {
		for _, side := range []struct {
			name string
			t    reflect.Type
		}{{"request", m.req}, {"answer", m.ans}} {
			var sb strings.Builder
			if side.t == nil {
				sb.WriteString("(its own encoding: see " + m.own + ")")
			} else {
				gobSchema(&sb, side.t, map[reflect.Type]bool{})
			}
			lines = append(lines, fmt.Sprintf("%s %s %s", wire, side.name, sb.String()))
		}
	}
	slices.Sort(lines)
	got := strings.Join(lines, "\n") + "\n"
	path := filepath.Join("testdata", "peer-messages.txt")
	if *updateGolden {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), got, "a call between brokers changed its wire types: give it a new version (peer_versions.go)")
}

func TestParseWireMethod(t *testing.T) {
	for _, tc := range []struct {
		wire string
		name string
		v    int
		ok   bool
	}{
		{"commit", "commit", 1, true},
		{"commit.v2", "commit", 2, true},
		{"commit.v12", "commit", 12, true},
		{"commit.v1", "", 0, false}, // version 1 has no suffix
		{"commit.v0", "", 0, false},
		{"commit.v02", "", 0, false},
		{"commit.v+2", "", 0, false},
		{"commit.v-2", "", 0, false},
		{"commit.v", "", 0, false},
		{".v2", "", 0, false},
		{"", "", 0, false},
	} {
		name, v, ok := parseWireMethod(tc.wire)
		require.Equal(t, tc.ok, ok, tc.wire)
		if ok {
			require.Equal(t, tc.name, name, tc.wire)
			require.Equal(t, tc.v, v, tc.wire)
			require.Equal(t, tc.wire, wireMethod(name, v))
		}
	}
	for wire := range serveFuncs {
		_, _, ok := parseWireMethod(wire)
		require.True(t, ok, wire)
	}
}

func TestCheckPeerVersions(t *testing.T) {
	require.NoError(t, CheckPeerVersions(nil))
	require.NoError(t, CheckPeerVersions(map[string]int{fwCommit: 1}))
	require.NoError(t, CheckPeerVersions(map[string]int{fwCommit: 2}))
	require.NoError(t, CheckPeerVersions(map[string]int{fwCommit: 3}))
	require.ErrorIs(t, CheckPeerVersions(map[string]int{fwCommit: 4}), ErrInvalidOptions)
	require.ErrorIs(t, CheckPeerVersions(map[string]int{fwCommit: 0}), ErrInvalidOptions)
	require.ErrorIs(t, CheckPeerVersions(map[string]int{"nope": 1}), ErrInvalidOptions)
	require.Equal(t, 1, PeerVersions(map[string]int{fwCommit: 1})[fwCommit])
	require.Equal(t, 3, PeerVersions(nil)[fwCommit])
	require.Equal(t, 2, PeerVersions(nil)[fwTopics])
	_, err := Open(context.Background(), []metalog.Log{newTestLog()}, &Options{PeerVersions: map[string]int{fwCommit: 9}})
	require.ErrorIs(t, err, ErrInvalidOptions)
}

// versionedForwarder carries calls to a Coordinator in this process and
// says the leader speaks advertised (nil: a release before versions); it
// records the methods as sent.
type versionedForwarder struct {
	to *Coordinator

	mu sync.Mutex
	// advertised, once armed, answers the first question, the second the
	// next, and so on, the last one from then on; the last one before.
	advertised []map[string]int
	armed      bool
	sent       []string
}

func (f *versionedForwarder) Forward(ctx context.Context, shard int, method string, body []byte) func() ([]byte, error) {
	f.mu.Lock()
	f.sent = append(f.sent, method)
	f.mu.Unlock()
	answer := f.to.Shards().Serve(ctx, shard, method, body)
	return func() ([]byte, error) { return answer(), nil }
}

func (f *versionedForwarder) LeaderVersions(int) map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.armed {
		return f.advertised[len(f.advertised)-1]
	}
	m := f.advertised[0]
	if len(f.advertised) > 1 {
		f.advertised = f.advertised[1:]
	}
	return m
}

func (f *versionedForwarder) methods() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.sent
	f.sent, f.armed = nil, true
	return out
}

// openKeptTo opens a leader of one shard kept to the versions limit
// names (nil: this release's), closed when the test ends.
func openKeptTo(t *testing.T, limit map[string]int) *Coordinator {
	c, err := Open(context.Background(), []metalog.Log{newTestLog()}, &Options{Dir: t.TempDir(), ApplyInterval: -1, SnapshotEvery: -1, PeerVersions: limit})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// TestPeerVersionNegotiation: a broker sends a commit in the highest
// version both it and the leader speak: version 3 to a leader of this
// release, version 2 to one kept to it, version 1 to one kept to it or of
// a release before versions; the leader's answer is the same. A stale picture of the leader costs
// one refused attempt (UNSUPPORTED_VERSION, nothing applied), then the
// call goes in a version chosen anew; a call the leader's release lacks
// fails at once, sending nothing.
func TestPeerVersionNegotiation(t *testing.T) {
	ctx := context.Background()
	newLead, oldLead, v2Lead := openKeptTo(t, nil), openKeptTo(t, map[string]int{fwCommit: 1}), openKeptTo(t, map[string]int{fwCommit: 2})
	commitVia := func(lead *Coordinator, advertised ...map[string]int) (*versionedForwarder, []wal.Result, error) {
		id, err := lead.CreatePartitions(ctx, CreatePartitionsRequest{Name: "t-" + uuid.NewString(), Partitions: 1})
		require.NoError(t, err)
		fw := &versionedForwarder{to: lead, advertised: advertised}
		other, err := Open(ctx, []metalog.Log{nil}, &Options{Dir: t.TempDir(), Forwarder: fw, ApplyInterval: -1, SnapshotEvery: -1})
		require.NoError(t, err)
		defer other.Close()
		other.Shards().RefreshTopics(ctx)
		fw.methods() // the catalog's reads
		rs, err := other.CommitFile(ctx, CommitFileRequest{ObjectKey: "wal/" + uuid.NewString(), Size: 100, Uploader: 1,
			Coordinates: []wal.Coordinate{{TopicPartition: wal.TopicPartition{TopicID: id}, Size: 100, NumRecords: 3,
				BaseTimestamp: 5, MaxTimestamp: 7, TimestampType: kbatch.LogAppendTime, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}}})
		return fw, rs, err
	}

	fw, rs, err := commitVia(newLead, PeerVersions(nil))
	require.NoError(t, err)
	require.NoError(t, rs[0].Err)
	require.Equal(t, int64(0), rs[0].BaseOffset)
	require.Equal(t, []string{"commit.v3"}, fw.methods())

	fw, rs, err = commitVia(v2Lead, PeerVersions(map[string]int{fwCommit: 2}))
	require.NoError(t, err)
	require.NoError(t, rs[0].Err)
	require.Equal(t, int64(0), rs[0].BaseOffset)
	require.Equal(t, []string{"commit.v2"}, fw.methods(), "a gob answer, read as before")

	for _, adv := range []map[string]int{PeerVersions(map[string]int{fwCommit: 1}), nil} {
		fw, rs, err = commitVia(oldLead, adv)
		require.NoError(t, err)
		require.Equal(t, int64(0), rs[0].BaseOffset)
		require.Equal(t, []string{"commit"}, fw.methods())
	}

	// Stale: the leader is said to speak version 3; it refuses it, and
	// the retry, asking again, sends version 1, committed once.
	fw, rs, err = commitVia(oldLead, PeerVersions(nil), PeerVersions(map[string]int{fwCommit: 1}))
	require.NoError(t, err)
	require.Equal(t, int64(0), rs[0].BaseOffset, "committed once")
	require.Equal(t, []string{"commit.v3", "commit"}, fw.methods())

	// A leader whose release has no commit call at all.
	fw, _, err = commitVia(newLead, map[string]int{fwTopics: 1})
	require.Equal(t, kafkaerr.UnsupportedVersion, kafkaerr.CodeOf(err), "%v", err)
	require.Empty(t, fw.methods())
}

// TestServeUnknownVersion: a method, or a version, the broker does not
// speak is answered UNSUPPORTED_VERSION, its body unread, nothing done.
func TestServeUnknownVersion(t *testing.T) {
	ctx := context.Background()
	lead, err := Open(ctx, []metalog.Log{newTestLog()}, &Options{Dir: t.TempDir(), ApplyInterval: -1, SnapshotEvery: -1, PeerVersions: map[string]int{fwCommit: 1}})
	require.NoError(t, err)
	defer lead.Close()
	id, err := lead.CreatePartitions(ctx, CreatePartitionsRequest{Name: "t", Partitions: 1})
	require.NoError(t, err)
	req := CommitFileRequest{ObjectKey: "wal/x", Size: 10, Coordinates: []wal.Coordinate{{TopicPartition: wal.TopicPartition{TopicID: id}, Size: 10, NumRecords: 1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}}}
	for _, wire := range []string{"nope", "commit.v3", "commit.v2", "commit.v1", ""} {
		var head answerHead
		require.NoError(t, decodeGob(lead.Shards().Serve(ctx, 0, wire, appendCommitV2(nil, &req))(), &head))
		require.NotNil(t, head.Err, wire)
		require.Equal(t, errKindVersion, head.Err.Kind, wire)
		require.Equal(t, kafkaerr.UnsupportedVersion, head.Err.Code, wire)
	}
	end, err := lead.ListOffsets(ctx, wal.TopicPartition{TopicID: id}, -1)
	require.NoError(t, err)
	require.Equal(t, int64(0), end.Offset, "nothing committed")
}

func TestCommitV2RoundTrip(t *testing.T) {
	req := CommitFileRequest{ObjectKey: "wal/0193", Size: 1 << 40, Uploader: -1, Owners: []int{2, 0, 1},
		Coordinates: []wal.Coordinate{
			{TopicPartition: wal.TopicPartition{TopicID: uuid.New(), Partition: 7}, Offset: 12, Size: 300, NumRecords: 4,
				BaseTimestamp: -1, MaxTimestamp: 1 << 50, TimestampType: kbatch.LogAppendTime, ProducerID: 1 << 40, ProducerEpoch: 3, BaseSequence: 9, Transactional: true},
			{Offset: 312, Size: 61, NumRecords: 1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Control: true},
		}}
	b := appendCommitV2(nil, &req)
	got, err := readCommitV2(b)
	require.NoError(t, err)
	require.Equal(t, req, got)
	got, err = readCommitV2(appendCommitV2(nil, &CommitFileRequest{}))
	require.NoError(t, err)
	require.Equal(t, CommitFileRequest{}, got)

	bad := map[string][]byte{
		"cut short":      b[:len(b)-1],
		"trailing bytes": append(slices.Clone(b), 0),
		"empty":          nil,
		"huge count":     {0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f},
	}
	flags := slices.Clone(b)
	flags[len(flags)-1] = 4
	bad["unknown flag"] = flags
	for name, body := range bad {
		_, err := readCommitV2(body)
		require.Equal(t, kafkaerr.InvalidRequest, kafkaerr.CodeOf(err), name)
	}
}

// TestCommitAnswerV3RoundTrip: version 3's answer carries the results
// (a batch refused alone with its code, kind and message) and the
// leader's applied position as version 2's gob did; what does not decode
// is refused INVALID_REQUEST.
func TestCommitAnswerV3RoundTrip(t *testing.T) {
	a := commitAnswer{Applied: 1 << 40, Results: []wireResult{
		{BaseOffset: 12, LogAppendTime: -1, LogStartOffset: 0},
		{BaseOffset: -1, LogAppendTime: -1, LogStartOffset: -1, Err: &wireErr{Code: kafkaerr.OutOfOrderSequenceNumber, Msg: "sequence 9, expected 4", Kind: errKindOther}},
		{BaseOffset: 1 << 50, LogAppendTime: 1_764_500_000_000, LogStartOffset: 1 << 49},
	}}
	b := appendCommitAnswerV3(nil, &a)
	got, err := readCommitAnswerV3(b)
	require.NoError(t, err)
	require.Equal(t, a, got)
	require.Equal(t, resultsFromWire(a.Results), resultsFromWire(got.Results))
	got, err = readCommitAnswerV3(appendCommitAnswerV3(nil, &commitAnswer{}))
	require.NoError(t, err)
	require.Equal(t, commitAnswer{}, got)

	bad := map[string][]byte{
		"cut short":      b[:len(b)-1],
		"trailing bytes": append(slices.Clone(b), 0),
		"empty":          nil,
		"huge count":     {0, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"error byte 2":   {0, 1, 0, 0, 0, 2},
		"error kind 9":   {0, 1, 0, 0, 0, 1, 0, 9, 0},
	}
	for name, body := range bad {
		_, err := readCommitAnswerV3(body)
		require.Equal(t, kafkaerr.InvalidRequest, kafkaerr.CodeOf(err), name)
	}
}

// FuzzCommitAnswerV3: the version 3 commit answer decoder never panics,
// and what it accepts encodes back to an answer it reads the same.
func FuzzCommitAnswerV3(f *testing.F) {
	f.Add(appendCommitAnswerV3(nil, &commitAnswer{Applied: 7, Results: []wireResult{{BaseOffset: 3}, {BaseOffset: -1, Err: &wireErr{Code: 45, Msg: "m"}}}}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		a, err := readCommitAnswerV3(body)
		if err != nil {
			require.Equal(t, kafkaerr.InvalidRequest, kafkaerr.CodeOf(err))
			return
		}
		again, err := readCommitAnswerV3(appendCommitAnswerV3(nil, &a))
		require.NoError(t, err)
		require.Equal(t, a, again)
	})
}

// FuzzCommitV2: the version 2 commit decoder never panics, and what it
// accepts encodes back to a request it reads the same.
func FuzzCommitV2(f *testing.F) {
	f.Add(appendCommitV2(nil, &CommitFileRequest{ObjectKey: "wal/k", Size: 9, Owners: []int{1},
		Coordinates: []wal.Coordinate{{NumRecords: 1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}}}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := readCommitV2(body)
		if err != nil {
			require.Equal(t, kafkaerr.InvalidRequest, kafkaerr.CodeOf(err))
			return
		}
		again, err := readCommitV2(appendCommitV2(nil, &req))
		require.NoError(t, err)
		require.Equal(t, req, again)
	})
}

// FuzzServe: a call from another broker with any method and body never
// panics the broker it reaches, and is answered with a head that
// decodes.
func FuzzServe(f *testing.F) {
	lead, err := Open(context.Background(), []metalog.Log{newTestLog()}, &Options{Dir: f.TempDir(), ApplyInterval: -1, SnapshotEvery: -1})
	require.NoError(f, err)
	f.Cleanup(func() { lead.Close() })
	for wire := range serveFuncs {
		f.Add(wire, []byte{})
	}
	f.Add("commit", encodeGob(CommitFileRequest{ObjectKey: "wal/k"}))
	f.Add("commit.v2", appendCommitV2(nil, &CommitFileRequest{ObjectKey: "wal/k"}))
	f.Add("commit.v3", appendCommitV2(nil, &CommitFileRequest{ObjectKey: "wal/k"}))
	f.Add("topics", encodeGob(true))
	f.Add("topics.v2", []byte{})
	f.Fuzz(func(t *testing.T, method string, body []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 5e9)
		defer cancel()
		_, _, _, err := decodeHead(lead.Shards().Serve(ctx, 0, method, body)())
		require.NoError(t, err)
	})
}

// BenchmarkCommitAnswer: a forwarded commit's answer for 64 batches,
// encoded and read as the caller reads it, in versions 1 and 2 (gob: the
// head, then the whole answer) and version 3.
func BenchmarkCommitAnswer(b *testing.B) {
	a := commitAnswer{Applied: 123_456}
	for i := range 64 {
		a.Results = append(a.Results, wireResult{BaseOffset: int64(i) << 20, LogAppendTime: -1, LogStartOffset: 1 << 19})
	}
	b.Run("v2-gob", func(b *testing.B) {
		var n int
		for b.Loop() {
			out := encodeGob(answer[commitAnswer]{Val: a})
			n = len(out)
			if _, _, _, err := decodeHead(out); err != nil {
				b.Fatal(err)
			}
			var got answer[commitAnswer]
			if err := decodeGob(out, &got); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n), "bytes")
	})
	b.Run("v3", func(b *testing.B) {
		var n int
		for b.Loop() {
			out := appendCommitAnswerV3([]byte{ownValue}, &a)
			n = len(out)
			value, _, _, err := decodeHead(out)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := readCommitAnswerV3(value); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n), "bytes")
	})
}

// BenchmarkCommitEncoding: a forwarded commit's request of 64 batches,
// encoded and decoded, in version 1 (gob) and version 2.
func BenchmarkCommitEncoding(b *testing.B) {
	req := CommitFileRequest{ObjectKey: "wal/" + uuid.NewString(), Size: 8 << 20, Uploader: 2, Owners: []int{1, 0}}
	for i := range 64 {
		req.Coordinates = append(req.Coordinates, wal.Coordinate{TopicPartition: wal.TopicPartition{TopicID: uuid.New(), Partition: int32(i)},
			Offset: int64(i) << 17, Size: 1 << 17, NumRecords: 100, BaseTimestamp: 1_700_000_000_000, MaxTimestamp: 1_700_000_000_100,
			ProducerID: 1000 + int64(i), ProducerEpoch: 0, BaseSequence: int32(i) * 100})
	}
	b.Run("v1-gob", func(b *testing.B) {
		var n int
		for b.Loop() {
			body := encodeGob(req)
			n = len(body)
			var got CommitFileRequest
			if err := decodeGob(body, &got); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n), "bytes")
	})
	b.Run("v2", func(b *testing.B) {
		var n int
		for b.Loop() {
			body := appendCommitV2(nil, &req)
			n = len(body)
			if _, err := readCommitV2(body); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n), "bytes")
	})
}

// TestPeerVersionsTxn: the txn call goes in version 2 to a leader that
// speaks it and in version 1, its form before transactions v2, to one
// kept to version 1, both served alike; a call of transactions v2 is
// never sent in version 1 (it would drop the field): it fails at once,
// UNSUPPORTED_VERSION, sending nothing.
func TestPeerVersionsTxn(t *testing.T) {
	ctx := context.Background()
	lead, err := Open(ctx, []metalog.Log{newTestLog()}, &Options{Dir: t.TempDir(), ApplyInterval: -1, SnapshotEvery: -1})
	require.NoError(t, err)
	defer lead.Close()
	via := func(advertised map[string]int) (*Coordinator, *versionedForwarder) {
		fw := &versionedForwarder{to: lead, advertised: []map[string]int{advertised}}
		other, err := Open(ctx, []metalog.Log{nil}, &Options{Dir: t.TempDir(), Forwarder: fw, ApplyInterval: -1, SnapshotEvery: -1})
		require.NoError(t, err)
		t.Cleanup(func() { other.Close() })
		return other, fw
	}
	txnCalls := func(fw *versionedForwarder) (out []string) {
		for _, m := range fw.methods() {
			if strings.HasPrefix(m, fwTxn) {
				out = append(out, m)
			}
		}
		return out
	}

	other, fw := via(PeerVersions(nil))
	pid, epoch, err := other.InitTxnProducer(ctx, "t2", 60000, -1, -1)
	require.NoError(t, err)
	pid2, epoch2, err := other.EndTxnV2(ctx, "t2", pid, epoch, false)
	require.NoError(t, err)
	require.Equal(t, pid, pid2)
	require.Equal(t, epoch+1, epoch2, "a v2 end bumps the epoch")
	require.Equal(t, []string{"txn.v2", "txn.v2"}, txnCalls(fw))

	old, fw := via(PeerVersions(map[string]int{fwTxn: 1}))
	pid, epoch, err = old.InitTxnProducer(ctx, "t1", 60000, -1, -1)
	require.NoError(t, err)
	require.Equal(t, []string{"txn"}, txnCalls(fw))
	_, _, err = old.EndTxnV2(ctx, "t1", pid, epoch, false)
	require.Equal(t, kafkaerr.UnsupportedVersion, kafkaerr.CodeOf(err), "%v", err)
	require.Empty(t, txnCalls(fw), "nothing sent")
	ts, err := lead.Transactions(ctx, []string{"t1"})
	require.NoError(t, err)
	require.Equal(t, epoch, ts[0].Epoch, "nothing done")
}
