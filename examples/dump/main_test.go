package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/segment"
	"github.com/diskless-go/diskless/wal"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// dump runs the command and returns what it printed and its error.
func dump(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(t.Context(), args, &out, &errOut)
	t.Logf("dump %s\n%s%s", strings.Join(args, " "), out.String(), errOut.String())
	return out.String(), err
}

// requireLines checks that out has a line matching each pattern.
func requireLines(t *testing.T, out string, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		require.Regexp(t, regexp.MustCompile(`(?m)^`+p+`$`), out)
	}
}

// brokerFiles opens a Broker over a file:// bucket, creates two topics,
// produces one request holding three partitions' batches (one WAL object,
// three regions), closes it, and returns the bucket folder, the
// coordinator database and the object's path.
func brokerFiles(t *testing.T) (bucket, db, object string) {
	ctx := t.Context()
	dir := t.TempDir()
	bucket, data := filepath.Join(dir, "bucket"), filepath.Join(dir, "data")
	require.NoError(t, os.MkdirAll(bucket, 0o755))
	b, err := diskless.Open(ctx, &diskless.Config{BucketURL: "file://" + bucket, DataDir: data, Linger: time.Millisecond})
	require.NoError(t, err)
	defer func() { require.NoError(t, b.Close()) }()
	_, err = b.CreateTopic(ctx, "orders", diskless.TopicConfig{Partitions: 3})
	require.NoError(t, err)
	_, err = b.CreateTopic(ctx, "audit", diskless.TopicConfig{LogAppendTime: true})
	require.NoError(t, err)
	pid, epoch, err := b.InitProducerID(ctx)
	require.NoError(t, err)
	batch := func(codec kbatch.Codec, n int, idempotent bool) []byte {
		bld := kbatch.NewBuilder(codec)
		if idempotent {
			bld.SetProducer(pid, epoch, 0)
		}
		for i := range n {
			bld.Append(time.Now().UnixMilli(), fmt.Appendf(nil, "k%d", i), fmt.Appendf(nil, "value %d", i), kbatch.Header{Key: "h", Value: []byte("x")})
		}
		out, err := bld.Build(nil)
		require.NoError(t, err)
		return out
	}
	resp, err := b.Produce(ctx, diskless.ProduceRequest{Acks: -1, Partitions: []diskless.ProducePartition{
		{Topic: "orders", Partition: 0, Records: batch(kbatch.CodecZstd, 5, true)},
		{Topic: "orders", Partition: 2, Records: batch(kbatch.CodecNone, 3, false)},
		{Topic: "audit", Partition: 0, Records: batch(kbatch.CodecGzip, 2, false)},
	}})
	require.NoError(t, err)
	for _, p := range resp.Partitions {
		require.NoError(t, p.Err)
	}
	objects, err := filepath.Glob(filepath.Join(bucket, "wal", "*"))
	require.NoError(t, err)
	objects = slicesFilter(objects, func(s string) bool { return !strings.HasSuffix(s, ".attrs") })
	require.Len(t, objects, 1)
	return bucket, filepath.Join(data, "coordinator", "shard-0.db"), objects[0]
}

func slicesFilter(s []string, keep func(string) bool) []string {
	var out []string
	for _, v := range s {
		if keep(v) {
			out = append(out, v)
		}
	}
	return out
}

// TestDumpBrokerFiles dumps what a Broker wrote: a WAL object (alone, with
// the coordinator database naming its regions, and from the bucket), the
// database, and a WAL object with a damaged record.
func TestDumpBrokerFiles(t *testing.T) {
	bucket, db, object := brokerFiles(t)
	key := "wal/" + filepath.Base(object)

	out, err := dump(t, object)
	require.NoError(t, err)
	requireLines(t, out,
		`WAL object `+key+`: \d+ bytes, named at \S+`,
		`version: 0`,
		`regions: unknown: .*`,
		`offsets: unknown \(lastOffsetDelta 4\) count: 5 baseSequence: 0 lastSequence: 4 producerId: \d+ producerEpoch: 0 .* position: \d+ CreateTime: \d+ size: \d+ magic: 2 compresscodec: zstd crc: \d+ isvalid: true`,
		`batches: 3, every CRC checks`,
		`object: valid`,
	)

	out, err = dump(t, "-db", db, "-records", object)
	require.NoError(t, err)
	requireLines(t, out,
		`region: topic orders partition 0 \(topic ID \S+\): bytes \[\d+, \d+\), offsets 0-4`,
		`region: topic orders partition 2 \(topic ID \S+\): bytes \[\d+, \d+\), offsets 0-2`,
		`region: topic audit partition 0 \(topic ID \S+\): bytes \[\d+, \d+\), offsets 0-1`,
		`  baseOffset: 0 lastOffset: 4 count: 5 .* compresscodec: zstd .* isvalid: true`,
		`  \| offset: 4 CreateTime: \d+ keySize: 2 valueSize: 7 sequence: 4 headers: \["h"="x"\] key: "k4" payload: "value 4"`,
		`batches: 3 in 3 regions, every CRC checks`,
	)

	out, err = dump(t, "-bucket", "file://"+bucket, "-max-bytes", "3", "-records", key)
	require.NoError(t, err)
	requireLines(t, out, `WAL object `+key+`: .*`, `\| offsetDelta: 1 .* key: "k1" payload: "val"\.\.\.\(7 bytes\)`, `object: valid`)

	out, err = dump(t, db)
	require.NoError(t, err)
	requireLines(t, out,
		`coordinator database .*shard-0.db`,
		`meta: .*applied=\d+.*`,
		`topics: 2`,
		`  audit: id \S+, 1 partitions \(1 in this shard\), cleanup.policy delete, retention.ms 604800000, retention.bytes -1, message.timestamp.type LogAppendTime, .*`,
		`  orders: id \S+, 3 partitions \(3 in this shard\), cleanup.policy delete, .* message.timestamp.type CreateTime, .*`,
		`partitions: 4`,
		`  orders-0: log start offset 0, high watermark 5, 5 records, \d+ bytes in 1 batch rows, diskless start offset 0, 0 remote segments \(0 bytes\)`,
		`  orders-1: log start offset 0, high watermark 0, 0 records, 0 bytes in 0 batch rows, .*`,
		`objects: 1 \(1 live, 0 dead, waiting for deletion; 0 written by compaction\), \d+ bytes`,
		`  `+key+`: \d+ bytes, uploader 0, committed \S+, 3 batch rows`,
		`producers: 1`,
		`  orders-0: producer id \d+, epoch 0`,
		`remote segments: 0`,
	)

	// A damaged record: the CRC of its batch fails, the rest check.
	data, err := os.ReadFile(object)
	require.NoError(t, err)
	it := kbatch.NewBatchIter(data[1:])
	for it.Next() {
		if b := it.Batch(); b.Codec() == kbatch.CodecNone {
			b[len(b)-1] ^= 0xff // the last record's last byte
		}
	}
	damaged := filepath.Join(t.TempDir(), "object.bin") // told apart by its first bytes
	require.NoError(t, os.WriteFile(damaged, data, 0o644))
	out, err = dump(t, damaged)
	require.ErrorIs(t, err, errBad)
	requireLines(t, out, `WAL object .*`, `offsets: unknown .* compresscodec: none .* isvalid: false`, `batches: 3, 1 do not check`, `object: .*corrupt.*`)

	_, err = dump(t, "-kind", "nope", object)
	require.ErrorIs(t, err, errUsage)
	_, err = dump(t)
	require.ErrorIs(t, err, errUsage)
}

// TestDumpCompacted: an object written by a compaction is marked so in
// the database's summary and in the object's dump with -db.
func TestDumpCompacted(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	bucket, data := filepath.Join(dir, "bucket"), filepath.Join(dir, "data")
	require.NoError(t, os.MkdirAll(bucket, 0o755))
	b, err := diskless.Open(ctx, &diskless.Config{BucketURL: "file://" + bucket, DataDir: data, Linger: time.Millisecond, CompactInterval: -1})
	require.NoError(t, err)
	_, err = b.CreateTopic(ctx, "table", diskless.TopicConfig{Partitions: 1, Compact: true})
	require.NoError(t, err)
	for i := range 3 {
		bld := kbatch.NewBuilder(kbatch.CodecNone)
		bld.Append(time.Now().UnixMilli(), []byte("k"), fmt.Appendf(nil, "v%d", i))
		out, err := bld.Build(nil)
		require.NoError(t, err)
		resp, err := b.Produce(ctx, diskless.ProduceRequest{Acks: -1, Partitions: []diskless.ProducePartition{{Topic: "table", Records: out}}})
		require.NoError(t, err)
		require.NoError(t, resp.Partitions[0].Err)
	}
	ts, err := b.DescribeTopics(ctx)
	require.NoError(t, err)
	st, err := b.CompactPartition(ctx, wal.TopicPartition{TopicID: ts[0].ID})
	require.NoError(t, err)
	require.True(t, st.Cleaned)
	require.NoError(t, b.Close()) // the database written through
	db := filepath.Join(data, "coordinator", "shard-0.db")
	out, err := dump(t, db)
	require.NoError(t, err)
	requireLines(t, out,
		`objects: 4 \(1 live, 3 dead, waiting for deletion; 1 written by compaction\), \d+ bytes`,
		`  `+st.Key+`: \d+ bytes, uploader 0, committed \S+, 1 batch rows, compacted`,
	)
	out, err = dump(t, "-db", db, filepath.Join(bucket, st.Key))
	require.NoError(t, err)
	requireLines(t, out, `compacted: written by a compaction .*`, `region: topic table partition 0 \(topic ID \S+\): bytes \[\d+, \d+\), offsets 2-2`)
}

// TestDumpSegment dumps a closed segment of a Kafka log with its offset
// and time indexes, a producer snapshot and a leader-epoch checkpoint.
func TestDumpSegment(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	log, err := segment.CreateLog(ctx, dir, 0, &segment.LogOptions{IndexIntervalBytes: 1})
	require.NoError(t, err)
	t0 := time.Now().Add(-time.Hour).UnixMilli()
	next := int64(0)
	for i := range 4 {
		bld := kbatch.NewBuilder(kbatch.CodecLZ4)
		bld.SetBaseOffset(next)
		for j := range 3 {
			bld.Append(t0+int64(3*i+j)*1000, fmt.Appendf(nil, "k%d", 3*i+j), fmt.Appendf(nil, "v%d", 3*i+j))
		}
		b, err := bld.Build(nil)
		require.NoError(t, err)
		_, err = log.Append(ctx, b)
		require.NoError(t, err)
		next += 3
	}
	require.NoError(t, log.Roll(ctx))
	require.NoError(t, log.Close())
	seg := filepath.Join(dir, "00000000000000000000.log")

	out, err := dump(t, "-records", seg)
	require.NoError(t, err)
	requireLines(t, out,
		`Dumping .*00000000000000000000.log`,
		`Log starting offset: 0`,
		`baseOffset: 3 lastOffset: 5 count: 3 baseSequence: -1 lastSequence: -1 producerId: -1 .* position: \d+ CreateTime: `+fmt.Sprint(t0+5000)+` size: \d+ magic: 2 compresscodec: lz4 crc: \d+ isvalid: true`,
		`\| offset: 4 CreateTime: `+fmt.Sprint(t0+4000)+` keySize: 2 valueSize: 2 sequence: -1 headers: \[\] key: "k4" payload: "v4"`,
		`batches: 4, records: 12, offsets 0-11, every CRC checks`,
		`Dumping .*00000000000000000000.index`,
		`offset: 5 position: \d+`,
		`entries: 3`,
		`Dumping .*00000000000000000000.timeindex`,
		`timestamp: `+fmt.Sprint(t0+11000)+` offset: 11`,
	)
	require.NotContains(t, out, "MISMATCH")

	// The same segment as a tiered segment in a bucket, with its
	// RemoteLogSegmentMetadata record.
	tid, sid := uuid.New(), uuid.New()
	bucket := t.TempDir()
	key := fmt.Sprintf("tiered/%s-0/00000000000000000000-%s", tid, sid)
	require.NoError(t, os.MkdirAll(filepath.Join(bucket, filepath.Dir(key)), 0o755))
	for _, ext := range []string{".log", ".index", ".timeindex"} {
		data, err := os.ReadFile(filepath.Join(dir, "00000000000000000000"+ext))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(bucket, key+ext), data, 0o644))
	}
	md := segment.RemoteLogSegmentMetadata{TopicID: tid, Topic: "t", SegmentID: sid, StartOffset: 0, EndOffset: 11, MaxTimestampMs: t0 + 11000,
		SegmentLeaderEpochs: []segment.EpochEntry{{Epoch: 0, StartOffset: 0}}, SegmentSizeInBytes: 448}
	mdBytes, err := md.Marshal()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(bucket, key+".metadata"), mdBytes, 0o644))
	out, err = dump(t, "-bucket", "file://"+bucket, key+".log", key+".metadata")
	require.NoError(t, err)
	requireLines(t, out,
		`Dumping `+key+`.log`,
		`Log starting offset: 0`,
		`batches: 4, records: 12, offsets 0-11, every CRC checks`,
		`Dumping `+key+`.index`,
		`Dumping `+key+`.timeindex`,
		`Dumping `+key+`.metadata`,
		`topic: t \(ID `+tid.String()+`\) partition: 0 segmentId: `+sid.String()+` startOffset: 0 endOffset: 11 .*`,
	)
	require.NotContains(t, out, "MISMATCH")

	// An index alone finds its .log to check against; a damaged entry
	// does not match it.
	idx, err := os.ReadFile(filepath.Join(dir, "00000000000000000000.index"))
	require.NoError(t, err)
	idx[len(idx)-1]++ // the last entry's position, one byte on
	require.NoError(t, os.WriteFile(filepath.Join(dir, "00000000000000000000.index"), idx, 0o644))
	out, err = dump(t, filepath.Join(dir, "00000000000000000000.index"))
	require.ErrorIs(t, err, errBad)
	requireLines(t, out, `offset: 11 position: \d+ MISMATCH: no batch starts at that position`, `entries: 3, 1 do not match the .log`)

	snap := filepath.Join(dir, "00000000000000000012.snapshot")
	require.NoError(t, os.WriteFile(snap, segment.AppendProducerSnapshot(nil, []segment.ProducerSnapshotEntry{
		{ProducerID: 7, ProducerEpoch: 1, LastSequence: 9, LastOffset: 11, OffsetDelta: 2, Timestamp: t0, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1},
	}), 0o644))
	ckpt := filepath.Join(dir, "leader-epoch-checkpoint")
	require.NoError(t, os.WriteFile(ckpt, segment.AppendLeaderEpochCheckpoint(nil, []segment.EpochEntry{{Epoch: 0, StartOffset: 0}, {Epoch: 3, StartOffset: 8}}), 0o644))
	out, err = dump(t, snap, ckpt)
	require.NoError(t, err)
	requireLines(t, out,
		`producerId: 7 producerEpoch: 1 lastSequence: 9 lastOffset: 11 offsetDelta: 2 timestamp: `+fmt.Sprint(t0)+` .*`,
		`producers: 1`,
		`epoch: 3 startOffset: 8`,
		`epochs: 2`,
	)
}
