package kafkaserver

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/internal/kafkatest"
)

// listOffsets asks ListOffsets for one partition, and returns its
// answer.
func listOffsets(t *testing.T, cl *kgo.Client, topic string, partition int32, ts int64) kmsg.ListOffsetsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = partition, ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(t.Context(), cl.SeedBrokers()[0]) // not split by the client's metadata
	require.NoError(t, err)
	require.Len(t, resp.Topics, 1)
	require.Len(t, resp.Topics[0].Partitions, 1)
	return resp.Topics[0].Partitions[0]
}

// deleteRecords asks DeleteRecords for one partition, and returns its
// answer.
func deleteRecords(t *testing.T, cl *kgo.Client, topic string, partition int32, offset int64) kmsg.DeleteRecordsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrDeleteRecordsRequest()
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = partition, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10_000
	resp, err := req.RequestWith(t.Context(), cl.SeedBrokers()[0])
	require.NoError(t, err)
	return resp.Topics[0].Partitions[0]
}

// TestListOffsetsAndDeleteRecords checks ListOffsets by timestamp and the
// special timestamps, and DeleteRecords: the log start offset moves,
// fetching below it is OFFSET_OUT_OF_RANGE, and a consumer that asks for
// an offset below it is reset to it.
func TestListOffsetsAndDeleteRecords(t *testing.T) {
	p := startBroker(t, nil)
	cl := p.client(t, kgo.DefaultProduceTopic("metrics"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	kafkatest.CreateTopic(t, cl, "metrics", 1, map[string]string{"retention.ms": "-1"})
	t0 := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for i := range 10 { // one batch each: timestamps t0, t0+1s, ...
		r := &kgo.Record{Value: []byte{byte(i)}, Timestamp: t0.Add(time.Duration(i) * time.Second)}
		require.NoError(t, cl.ProduceSync(t.Context(), r).FirstErr())
		require.Equal(t, int64(i), r.Offset)
	}
	ms := t0.UnixMilli()
	for _, tc := range []struct {
		name   string
		ts     int64
		offset int64
		at     int64 // the timestamp answered
	}{
		{"earliest", -2, 0, -1},
		{"latest", -1, 10, -1},
		{"max timestamp", -3, 9, ms + 9000},
		{"exact", ms + 4000, 4, ms + 4000},
		{"between", ms + 2500, 3, ms + 3000},
		{"before all", ms - 60_000, 0, ms},
		{"after all", ms + 60_000, -1, -1},
	} {
		got := listOffsets(t, cl, "metrics", 0, tc.ts)
		require.NoError(t, kerr.ErrorForCode(got.ErrorCode), tc.name)
		require.Equal(t, tc.offset, got.Offset, tc.name)
		require.Equal(t, tc.at, got.Timestamp, tc.name)
	}
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, listOffsets(t, cl, "nope", 0, -1).ErrorCode)

	// DeleteRecords moves the log start offset; past the high watermark
	// is OFFSET_OUT_OF_RANGE.
	require.Equal(t, kerr.OffsetOutOfRange.Code, deleteRecords(t, cl, "metrics", 0, 11).ErrorCode)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, deleteRecords(t, cl, "metrics", 7, 1).ErrorCode)
	dr := deleteRecords(t, cl, "metrics", 0, 4)
	require.NoError(t, kerr.ErrorForCode(dr.ErrorCode))
	require.Equal(t, int64(4), dr.LowWatermark)
	require.Equal(t, int64(4), listOffsets(t, cl, "metrics", 0, -2).Offset)
	require.Equal(t, int64(10), listOffsets(t, cl, "metrics", 0, -1).Offset)
	require.Equal(t, int64(4), listOffsets(t, cl, "metrics", 0, ms).Offset, "the first record at or after t0 still there")

	// A fetch below the log start offset is OFFSET_OUT_OF_RANGE, with the
	// new log start offset.
	freq := kmsg.NewPtrFetchRequest()
	freq.MaxWaitMillis, freq.MaxBytes = 0, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "metrics"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.FetchOffset, fp.PartitionMaxBytes = 2, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	freq.Topics = append(freq.Topics, ft)
	fresp, err := freq.RequestWith(t.Context(), cl)
	require.NoError(t, err)
	fr := fresp.Topics[0].Partitions[0]
	require.Equal(t, kerr.OffsetOutOfRange.Code, fr.ErrorCode)
	require.Equal(t, int64(4), fr.LogStartOffset)
	require.Empty(t, fr.RecordBatches)

	// A consumer asking for offset 2 is reset to the start: offset 4.
	c := p.client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"metrics": {0: kgo.NewOffset().At(2)}}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var offsets []int64
	for len(offsets) < 6 {
		fs := c.PollFetches(t.Context())
		require.NoError(t, fs.Err())
		for _, r := range fs.Records() {
			offsets = append(offsets, r.Offset)
			require.Equal(t, []byte{byte(r.Offset)}, r.Value)
		}
	}
	require.Equal(t, []int64{4, 5, 6, 7, 8, 9}, offsets)

	// DeleteRecords to -1 empties the partition.
	dr = deleteRecords(t, cl, "metrics", 0, -1)
	require.NoError(t, kerr.ErrorForCode(dr.ErrorCode))
	require.Equal(t, int64(10), dr.LowWatermark)
}

// TestOffsetsTopicImport: offsets that an earlier version kept in
// __consumer_offsets (Kafka's records, tombstones among them) are
// imported into the coordinator when the server starts, except those of
// a deleted topic; the topic is then emptied, so an offset deleted later
// does not come back at the next start.
func TestOffsetsTopicImport(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	data, bucket := filepath.Join(dir, "data"), filepath.Join(dir, "bucket")
	require.NoError(t, os.MkdirAll(bucket, 0o755))
	b, err := diskless.Open(ctx, &diskless.Config{BucketURL: "file://" + bucket, DataDir: data, Linger: 5 * time.Millisecond})
	require.NoError(t, err)
	for _, name := range []string{"orders", "gone"} {
		_, err := b.CreateTopic(ctx, name, diskless.TopicConfig{Partitions: 2})
		require.NoError(t, err)
	}
	require.NoError(t, ensureInternalTopic(ctx, b, offsetsTopic))
	var keys, values [][]byte
	put := func(group, topic string, partition int32, offset int64, del bool) {
		k := kmsg.OffsetCommitKey{Version: offsetKeyVersion, Group: group, Topic: topic, Partition: partition}
		keys = append(keys, k.AppendTo(nil))
		if del {
			values = append(values, nil)
			return
		}
		v := kmsg.NewOffsetCommitValue()
		v.Version, v.Offset, v.LeaderEpoch, v.Metadata = offsetValueVersion, offset, 4, "md"
		values = append(values, v.AppendTo(nil))
	}
	put("readers", "orders", 0, 10, false)
	put("readers", "orders", 0, 12, false) // the later wins
	put("readers", "orders", 1, 7, false)
	put("readers", "orders", 1, 0, true) // deleted
	put("readers", "gone", 0, 3, false)
	put("others", "orders", 1, 99, false)
	_, err = writeRecords(ctx, b, offsetsTopic, keys, values)
	require.NoError(t, err)
	require.NoError(t, b.DeleteTopic(ctx, "gone"))

	s, err := New(ctx, b, &Config{LogDir: bucket})
	require.NoError(t, err)
	got, err := b.FetchOffsets(ctx, "readers", nil)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, diskless.GroupOffset{Topic: "orders", Partition: 0, Offset: 12, LeaderEpoch: 4, Metadata: "md", CommitTime: got[0].CommitTime}, got[0])
	groups, err := b.OffsetGroups(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"others", "readers"}, groups)
	lo, err := b.ListOffsets(ctx, offsetsTopic, 0, diskless.EarliestTimestamp)
	require.NoError(t, err)
	hi, err := b.ListOffsets(ctx, offsetsTopic, 0, diskless.LatestTimestamp)
	require.NoError(t, err)
	require.Equal(t, hi.Offset, lo.Offset, "the offsets topic emptied")
	require.NoError(t, s.Close())

	// Deleted after the import, it stays deleted across a start.
	require.NoError(t, b.DeleteOffsets(ctx, "others", 0, nil))
	s, err = New(ctx, b, &Config{LogDir: bucket})
	require.NoError(t, err)
	groups, err = b.OffsetGroups(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"readers"}, groups)
	require.NoError(t, s.Close())
	require.NoError(t, b.Close())
}
