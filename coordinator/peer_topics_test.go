package coordinator

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/kafkaerr"
)

func sampleTopics() []TopicInfo {
	return []TopicInfo{
		{ID: uuid.New(), Name: "orders", Partitions: 12, Assigned: []int32{0, 3, 11}, Config: TopicConfig{
			Partitions: 12, Retention: -1, RetentionBytes: 1 << 40, Compact: true, Delete: true, LogAppendTime: true,
			MaxMessageBytes: 1 << 20, SegmentBytes: 1 << 30, SegmentTime: 7 * 24 * time.Hour,
			DeleteRetention: time.Hour, MinCompactionLag: time.Second, MaxCompactionLag: time.Minute, MinCleanableDirtyRatio: 0.5}},
		{ID: uuid.New(), Name: "", Partitions: 1, Config: TopicConfig{MinCleanableDirtyRatio: -1}},
		{ID: uuid.New(), Name: "none-here", Partitions: 3, Assigned: []int32{}},
	}
}

// TestTopicsV2RoundTrip: version 2's topics answer reads back as written,
// nil and empty assignments kept apart, and a damaged one does not
// decode (INVALID_REQUEST).
func TestTopicsV2RoundTrip(t *testing.T) {
	ts := sampleTopics()
	b := appendTopicsV2(nil, ts)
	got, err := readTopicsV2(b)
	require.NoError(t, err)
	require.Equal(t, ts, got)
	require.Nil(t, got[1].Assigned)
	require.NotNil(t, got[2].Assigned)
	got, err = readTopicsV2(appendTopicsV2(nil, nil))
	require.NoError(t, err)
	require.Empty(t, got)

	bad := map[string][]byte{
		"cut short":      b[:len(b)-1],
		"trailing bytes": append(slices.Clone(b), 0),
		"empty":          nil,
		"huge count":     {0xff, 0xff, 0xff, 0xff, 0x0f},
		"huge assigned":  append(appendTopicsV2(nil, ts[1:2])[:len(appendTopicsV2(nil, ts[1:2]))-1], 0x7f),
	}
	flags := appendTopicsV2(nil, ts[1:2])
	flags[1+16+1+1+1+1+1] = 8 // the flags byte of the second sample topic
	bad["unknown flag"] = flags
	for name, body := range bad {
		_, err := readTopicsV2(body)
		require.Equal(t, kafkaerr.InvalidRequest, kafkaerr.CodeOf(err), name)
	}
}

// TestOwnAnswerHead: an error answer of its own encoding reads back as
// written; a gob head reads as before; a damaged own head does not
// decode.
func TestOwnAnswerHead(t *testing.T) {
	w := &wireErr{Code: kafkaerr.NotLeaderOrFollower, Msg: "not here", Kind: errKindNotServed}
	_, own, got, err := decodeHead(appendOwnError(nil, w))
	require.NoError(t, err)
	require.True(t, own)
	require.Equal(t, w, got)

	_, own, got, err = decodeHead(encodeGob(answerHead{Err: w}))
	require.NoError(t, err)
	require.False(t, own)
	require.Equal(t, w, got)

	value, own, got, err := decodeHead([]byte{ownValue, 1, 2})
	require.NoError(t, err)
	require.True(t, own)
	require.Nil(t, got)
	require.Equal(t, []byte{1, 2}, value)

	for name, b := range map[string][]byte{
		"unknown kind": appendOwnError(nil, &wireErr{Kind: errKindVersion + 1}),
		"cut short":    appendOwnError(nil, w)[:4],
		"trailing":     append(appendOwnError(nil, w), 0),
	} {
		_, _, _, err := decodeHead(b)
		require.Equal(t, kafkaerr.InvalidRequest, kafkaerr.CodeOf(err), name)
	}
}

// TestTopicsVersions: a broker reads a shard's topics in version 2 from a
// leader of this release and in version 1 from one kept to it or of a
// release before versions, and reads the same; version 2 with a body is
// refused (INVALID_REQUEST) in its own encoding.
func TestTopicsVersions(t *testing.T) {
	ctx := context.Background()
	newLead, oldLead := openKeptTo(t, nil), openKeptTo(t, map[string]int{fwTopics: 1})
	require.Equal(t, 2, PeerVersions(nil)[fwTopics])
	for _, lead := range []*Coordinator{newLead, oldLead} {
		_, err := lead.CreatePartitions(ctx, CreatePartitionsRequest{Name: "a", Partitions: 3})
		require.NoError(t, err)
		_, err = lead.CreatePartitions(ctx, CreatePartitionsRequest{Name: "b", Partitions: 1, Config: TopicConfig{Compact: true}})
		require.NoError(t, err)
	}
	read := func(lead *Coordinator, advertised map[string]int) ([]TopicInfo, []string) {
		fw := &versionedForwarder{to: lead, advertised: []map[string]int{advertised}}
		other, err := Open(ctx, []metalog.Log{nil}, &Options{Dir: t.TempDir(), Forwarder: fw, ApplyInterval: -1, SnapshotEvery: -1})
		require.NoError(t, err)
		defer other.Close()
		fw.methods() // what Open sent
		sh, err := other.shard(0)
		require.NoError(t, err)
		ts, err := sh.Topics(ctx)
		require.NoError(t, err)
		return ts, fw.methods()
	}
	want, err := newLead.Topics(ctx)
	require.NoError(t, err)
	require.Len(t, want, 2)

	got, sent := read(newLead, PeerVersions(nil))
	require.Equal(t, want, got)
	require.Equal(t, []string{"topics.v2"}, sent)
	got, sent = read(newLead, nil) // a leader of a release before versions
	require.Equal(t, want, got)
	require.Equal(t, []string{"topics"}, sent)

	want, err = oldLead.Topics(ctx)
	require.NoError(t, err)
	got, sent = read(oldLead, PeerVersions(map[string]int{fwTopics: 1}))
	require.Equal(t, want, got)
	require.Equal(t, []string{"topics"}, sent)

	_, own, werr, err := decodeHead(newLead.Shards().Serve(ctx, 0, "topics.v2", []byte{1})())
	require.NoError(t, err)
	require.True(t, own)
	require.Equal(t, kafkaerr.InvalidRequest, werr.Code)
	_, own, werr, err = decodeHead(oldLead.Shards().Serve(ctx, 0, "topics.v2", nil)())
	require.NoError(t, err)
	require.False(t, own, "a version not spoken is refused in gob, as any release does")
	require.Equal(t, errKindVersion, werr.Kind)
}

// FuzzTopicsV2: the version 2 topics decoder never panics, and what it
// accepts encodes back to topics it reads the same.
func FuzzTopicsV2(f *testing.F) {
	f.Add(appendTopicsV2(nil, sampleTopics()))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		ts, err := readTopicsV2(body)
		if err != nil {
			require.Equal(t, kafkaerr.InvalidRequest, kafkaerr.CodeOf(err))
			return
		}
		again, err := readTopicsV2(appendTopicsV2(nil, ts))
		require.NoError(t, err)
		require.Equal(t, ts, again)
	})
}

// FuzzAnswerHead: any answer's head decodes or fails with INVALID_REQUEST,
// never panicking; an error of its own encoding reads back as written.
func FuzzAnswerHead(f *testing.F) {
	f.Add(appendOwnError(nil, &wireErr{Code: kafkaerr.NotLeaderOrFollower, Msg: "x", Kind: errKindNotServed}))
	f.Add(encodeGob(answerHead{Err: &wireErr{Code: 1}}))
	f.Add([]byte{ownValue})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, own, w, err := decodeHead(b)
		if err != nil {
			require.Equal(t, kafkaerr.InvalidRequest, kafkaerr.CodeOf(err))
			return
		}
		if own && w != nil {
			_, _, again, err := decodeHead(appendOwnError(nil, w))
			require.NoError(t, err)
			require.Equal(t, w, again)
		}
	})
}

// BenchmarkTopicsAnswer: a topics answer of 20 topics (8 partitions each,
// this shard serving half), encoded and decoded as a caller reads it: in
// version 1 (gob: the head, then the whole answer) and version 2.
func BenchmarkTopicsAnswer(b *testing.B) {
	var ts []TopicInfo
	for i := range 20 {
		ts = append(ts, TopicInfo{ID: uuid.New(), Name: fmt.Sprintf("topic-%d", i), Partitions: 8, Assigned: []int32{0, 2, 4, 6},
			Config: TopicConfig{Partitions: 8, Retention: 7 * 24 * time.Hour, RetentionBytes: -1, Delete: true, MaxMessageBytes: 1 << 20,
				SegmentBytes: 1 << 30, SegmentTime: 7 * 24 * time.Hour, MinCleanableDirtyRatio: 0.5}})
	}
	b.Run("v1-gob", func(b *testing.B) {
		var n int
		for b.Loop() {
			out := encodeGob(answer[[]TopicInfo]{Val: ts})
			n = len(out)
			if _, _, _, err := decodeHead(out); err != nil {
				b.Fatal(err)
			}
			var a answer[[]TopicInfo]
			if err := decodeGob(out, &a); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n), "bytes")
	})
	b.Run("v2", func(b *testing.B) {
		var n int
		for b.Loop() {
			out := appendTopicsV2([]byte{ownValue}, ts)
			n = len(out)
			value, _, _, err := decodeHead(out)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := readTopicsV2(value); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n), "bytes")
	})
}
