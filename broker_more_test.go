package diskless

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/internal/fakeclock"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

// TestStatelessBroker: close a broker, delete its data folder, open
// another on the same bucket: every committed record is fetched at the
// same offset, and the idempotent producer is still deduplicated.
func TestStatelessBroker(t *testing.T) {
	for name, cfg := range bucketKinds(t) {
		if name == "mem" {
			continue // a mem:// bucket dies with its broker
		}
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			c := cfg(t)
			c.DataDir = t.TempDir()
			c.Linger = 5 * time.Millisecond
			b, err := Open(ctx, c)
			require.NoError(t, err)
			_, err = b.CreateTopic(ctx, "t", TopicConfig{Partitions: 2})
			require.NoError(t, err)
			pid, _, err := b.InitProducerID(ctx)
			require.NoError(t, err)
			var last []byte
			for i := 0; i < 6; i++ {
				last = batch(t, kbatch.CodecSnappy, i*5, 5, pid, int32(i*5))
				resp, err := b.Produce(ctx, ProduceRequest{Acks: -1, Partitions: []ProducePartition{{Topic: "t", Partition: 1, Records: last}}})
				require.NoError(t, err)
				require.NoError(t, resp.Partitions[0].Err)
			}
			before, err := b.Fetch(ctx, FetchRequest{Partitions: []FetchPartition{{Topic: "t", Partition: 1}}})
			require.NoError(t, err)
			require.NoError(t, b.Close())
			require.NoError(t, os.RemoveAll(c.DataDir))

			b2, err := Open(ctx, c)
			require.NoError(t, err)
			defer b2.Close()
			after, err := b2.Fetch(ctx, FetchRequest{Partitions: []FetchPartition{{Topic: "t", Partition: 1}}})
			require.NoError(t, err)
			require.Equal(t, before.Partitions[0].Records, after.Partitions[0].Records, "the same bytes at the same offsets")
			require.Equal(t, int64(30), after.Partitions[0].HighWatermark)
			resp, err := b2.Produce(ctx, ProduceRequest{Acks: -1, Partitions: []ProducePartition{{Topic: "t", Partition: 1, Records: last}}})
			require.NoError(t, err)
			require.NoError(t, resp.Partitions[0].Err)
			require.Equal(t, int64(25), resp.Partitions[0].BaseOffset, "a retry after the restart is deduplicated")
			lo, err := b2.ListOffsets(ctx, "t", 1, LatestTimestamp)
			require.NoError(t, err)
			require.Equal(t, int64(30), lo.Offset)
		})
	}
}

func TestAcks(t *testing.T) {
	ctx := t.Context()
	// Acks 0 answers once buffered, before the linger: on a clock that
	// never moves, the linger never ends, and the answer comes all the
	// same.
	{
		stopped := fakeclock.New(time.Unix(1_700_000_000, 0))
		b := openTest(t, &Config{Linger: 50 * time.Millisecond, Clock: stopped})
		_, err := b.CreateTopic(ctx, "t", TopicConfig{})
		require.NoError(t, err)
		resp, err := b.Produce(ctx, ProduceRequest{Acks: 0, Partitions: []ProducePartition{{Topic: "t", Records: batch(t, kbatch.CodecNone, 0, 3, -1, -1)}}})
		require.NoError(t, err)
		require.Equal(t, int64(-1), resp.Partitions[0].BaseOffset)
		require.Equal(t, time.Unix(1_700_000_000, 0), stopped.Now())
	}
	b := openTest(t, &Config{Linger: 50 * time.Millisecond})
	_, err := b.CreateTopic(ctx, "t", TopicConfig{})
	require.NoError(t, err)
	resp, err := b.Produce(ctx, ProduceRequest{Acks: 0, Partitions: []ProducePartition{{Topic: "t", Records: batch(t, kbatch.CodecNone, 0, 3, -1, -1)}}})
	require.NoError(t, err)
	require.Equal(t, int64(-1), resp.Partitions[0].BaseOffset)
	for _, acks := range []int16{1, -1} {
		resp, err := b.Produce(ctx, ProduceRequest{Acks: acks, Partitions: []ProducePartition{{Topic: "t", Records: batch(t, kbatch.CodecNone, 0, 3, -1, -1)}}})
		require.NoError(t, err)
		require.NoError(t, resp.Partitions[0].Err)
		require.GreaterOrEqual(t, resp.Partitions[0].BaseOffset, int64(3), "committed after the acks=0 batch")
	}
	f, err := b.Fetch(ctx, FetchRequest{Partitions: []FetchPartition{{Topic: "t"}}})
	require.NoError(t, err)
	require.Len(t, records(t, f.Partitions[0].Records), 9, "the acks=0 batch was committed too")
}

// TestBadInput: every class of bad input reaches the caller with the code
// Kafka gives, and changes nothing.
func TestBadInput(t *testing.T) {
	ctx := t.Context()
	b := openTest(t, nil)
	_, err := b.CreateTopic(ctx, "t", TopicConfig{})
	require.NoError(t, err)
	_, err = b.CreateTopic(ctx, "compacted", TopicConfig{Compact: true})
	require.NoError(t, err)
	pid, _, err := b.InitProducerID(ctx)
	require.NoError(t, err)
	resp, err := b.Produce(ctx, ProduceRequest{Acks: -1, Partitions: []ProducePartition{{Topic: "t", Records: batch(t, kbatch.CodecNone, 0, 2, pid, 0)}}})
	require.NoError(t, err)
	require.NoError(t, resp.Partitions[0].Err)

	good := batch(t, kbatch.CodecNone, 0, 2, -1, -1)
	edit := func(f func(b []byte)) []byte {
		c := bytes.Clone(good)
		f(c)
		return c
	}
	fixCRC := func(c []byte) { binary.BigEndian.PutUint32(c[17:], kbatch.Batch(c).ComputeCRC()) }
	nullKey := kbatch.NewBuilder(kbatch.CodecNone)
	nullKey.Append(time.Now().UnixMilli(), nil, []byte("v"))
	nullKeyBatch, _ := nullKey.Build(nil)
	future := kbatch.NewBuilder(kbatch.CodecNone)
	future.Append(time.Now().Add(2*time.Hour).UnixMilli(), []byte("k"), []byte("v"))
	futureBatch, _ := future.Build(nil)
	marker := kbatch.AppendEndTxnMarker(nil, kbatch.EndTxnMarker{Commit: true, ProducerID: 1, Timestamp: time.Now().UnixMilli()})
	big := kbatch.NewBuilder(kbatch.CodecNone)
	big.Append(time.Now().UnixMilli(), []byte("k"), make([]byte, 2<<20))
	bigBatch, _ := big.Build(nil)

	cases := []struct {
		name    string
		topic   string
		records []byte
		version int16
		code    kafkaerr.Code
	}{
		{"bad CRC", "t", edit(func(c []byte) { c[len(c)-1] ^= 1 }), 0, kafkaerr.CorruptMessage},
		{"base offset not 0", "t", edit(func(c []byte) { kbatch.Batch(c).SetBaseOffset(7) }), 0, kafkaerr.InvalidRecord},
		{"count not lastOffsetDelta+1", "t", edit(func(c []byte) { binary.BigEndian.PutUint32(c[57:], 5); fixCRC(c) }), 0, kafkaerr.InvalidRecord},
		{"larger than max.message.bytes", "t", bigBatch, 0, kafkaerr.MessageTooLarge},
		{"null key on a compacted topic", "compacted", nullKeyBatch, 0, kafkaerr.InvalidRecord},
		{"timestamp too far ahead", "t", futureBatch, 0, kafkaerr.InvalidTimestamp},
		{"control batch from a client", "t", marker, 0, kafkaerr.InvalidRecord},
		{"zstd below produce v7", "t", batch(t, kbatch.CodecZstd, 0, 1, -1, -1), 6, kafkaerr.UnsupportedCompressionType},
		{"unknown topic", "nope", good, 0, kafkaerr.UnknownTopicOrPartition},
		{"sequence gap", "t", batch(t, kbatch.CodecNone, 0, 1, pid, 9), 0, kafkaerr.OutOfOrderSequenceNumber},
		{"empty records", "t", nil, 0, kafkaerr.InvalidRecord},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before, err := b.ListOffsets(ctx, "t", 0, LatestTimestamp)
			require.NoError(t, err)
			resp, err := b.Produce(ctx, ProduceRequest{Acks: -1, Version: c.version, Partitions: []ProducePartition{{Topic: c.topic, Records: c.records}}})
			require.NoError(t, err)
			r := resp.Partitions[0]
			require.Equal(t, c.code, r.ErrorCode, "%v", r.Err)
			require.Error(t, r.Err)
			require.Equal(t, int64(-1), r.BaseOffset)
			after, err := b.ListOffsets(ctx, "t", 0, LatestTimestamp)
			require.NoError(t, err)
			require.Equal(t, before, after, "nothing changed")
		})
	}
	// Per-record errors carry their index.
	resp, err = b.Produce(ctx, ProduceRequest{Acks: -1, Partitions: []ProducePartition{{Topic: "compacted", Records: nullKeyBatch}}})
	require.NoError(t, err)
	require.Len(t, resp.Partitions[0].RecordErrors, 1)
	require.Equal(t, 0, resp.Partitions[0].RecordErrors[0].BatchIndex)
	// An epoch older than the producer's last is INVALID_PRODUCER_EPOCH.
	withEpoch := func(epoch int16, seq int32) []byte {
		bld := kbatch.NewBuilder(kbatch.CodecNone)
		bld.SetProducer(pid, epoch, seq)
		bld.Append(time.Now().UnixMilli(), []byte("k"), []byte("v"))
		raw, err := bld.Build(nil)
		require.NoError(t, err)
		return raw
	}
	resp, err = b.Produce(ctx, ProduceRequest{Acks: -1, Partitions: []ProducePartition{{Topic: "t", Records: withEpoch(1, 0)}}})
	require.NoError(t, err)
	require.NoError(t, resp.Partitions[0].Err)
	resp, err = b.Produce(ctx, ProduceRequest{Acks: -1, Partitions: []ProducePartition{{Topic: "t", Records: withEpoch(0, 2)}}})
	require.NoError(t, err)
	require.Equal(t, kafkaerr.InvalidProducerEpoch, resp.Partitions[0].ErrorCode)
}

func TestLongPollAndOffsets(t *testing.T) {
	ctx := t.Context()
	b := openTest(t, nil)
	_, err := b.CreateTopic(ctx, "t", TopicConfig{LogAppendTime: true})
	require.NoError(t, err)
	got := make(chan FetchResponse, 1)
	go func() {
		// MaxWait outlasts the test: only a commit can answer it.
		f, _ := b.Fetch(ctx, FetchRequest{Partitions: []FetchPartition{{Topic: "t"}}, MinBytes: 1, MaxWait: time.Hour})
		got <- f
	}()
	resp, err := b.Produce(ctx, ProduceRequest{Acks: -1, Partitions: []ProducePartition{{Topic: "t", Records: batch(t, kbatch.CodecGzip, 0, 4, -1, -1)}}})
	require.NoError(t, err)
	lat := resp.Partitions[0].LogAppendTime
	require.Positive(t, lat, "LogAppendTime topics answer the append time")
	f := <-got // a commit wakes the long poll
	data := f.Partitions[0].Records
	batchView, err := kbatch.ParseBatch(data)
	require.NoError(t, err)
	require.Equal(t, kbatch.LogAppendTime, batchView.TimestampType())
	require.Equal(t, lat, batchView.MaxTimestamp())
	require.NoError(t, batchView.CheckCRC())

	// Timestamps: a second batch later.
	time.Sleep(5 * time.Millisecond)
	_, err = b.CreateTopic(ctx, "ts", TopicConfig{})
	require.NoError(t, err)
	mk := func(ts ...int64) []byte {
		bld := kbatch.NewBuilder(kbatch.CodecNone)
		for i, x := range ts {
			bld.Append(x, []byte{byte(i)}, []byte("v"))
		}
		raw, _ := bld.Build(nil)
		return raw
	}
	now := time.Now().UnixMilli()
	for _, raw := range [][]byte{mk(now-5000, now-4000, now-3000), mk(now-2000, now-1000)} {
		resp, err := b.Produce(ctx, ProduceRequest{Acks: -1, Partitions: []ProducePartition{{Topic: "ts", Records: raw}}})
		require.NoError(t, err)
		require.NoError(t, resp.Partitions[0].Err)
	}
	for _, c := range []struct{ ts, offset, at int64 }{
		{now - 3500, 2, now - 3000},
		{now - 1500, 4, now - 1000},
		{now - 6000, 0, now - 5000},
		{MaxTimestamp, 4, now - 1000},
		{EarliestTimestamp, 0, -1},
		{LatestTimestamp, 5, -1},
		{now + 1000, -1, -1},
	} {
		lo, err := b.ListOffsets(ctx, "ts", 0, c.ts)
		require.NoError(t, err)
		want := ListOffsetsResult{Offset: c.offset, Timestamp: c.at}
		if c.ts == LatestTimestamp {
			want.LastStable = c.offset // no transaction: the high watermark
		}
		require.Equal(t, want, lo, "timestamp %d", c.ts)
	}
	low, err := b.DeleteRecords(ctx, "ts", 0, 3)
	require.NoError(t, err)
	require.Equal(t, int64(3), low)
	f, err = b.Fetch(ctx, FetchRequest{Partitions: []FetchPartition{{Topic: "ts", Offset: 1}}})
	require.NoError(t, err)
	require.Equal(t, kafkaerr.OffsetOutOfRange, f.Partitions[0].ErrorCode)
	topics, err := b.DescribeTopics(ctx)
	require.NoError(t, err)
	require.Len(t, topics, 2)
	require.NoError(t, b.DeleteTopic(ctx, "ts"))
	_, err = b.ListOffsets(ctx, "ts", 0, LatestTimestamp)
	require.Equal(t, kafkaerr.UnknownTopicOrPartition, kafkaerr.CodeOf(err))
}

// TestFileBucketCreated: a file:// bucket folder that does not exist yet
// is created by Open, as Kafka creates its log directories; with
// create_dir= in the URL it is not, and Open fails.
func TestFileBucketCreated(t *testing.T) {
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "not", "yet")
	_, err := Open(ctx, &Config{BucketURL: "file://" + filepath.ToSlash(dir) + "?create_dir=", MetadataLog: MetadataInMemory})
	require.Error(t, err, "create_dir= refuses to create the folder")
	_, err = os.Stat(dir)
	require.ErrorIs(t, err, os.ErrNotExist)

	b, err := Open(ctx, &Config{BucketURL: "file://" + filepath.ToSlash(dir), Linger: 5 * time.Millisecond})
	require.NoError(t, err)
	_, err = b.CreateTopic(ctx, "t", TopicConfig{Partitions: 1})
	require.NoError(t, err)
	resp, err := b.Produce(ctx, ProduceRequest{Acks: -1, Partitions: []ProducePartition{{Topic: "t", Records: batch(t, kbatch.CodecNone, 0, 3, -1, -1)}}})
	require.NoError(t, err)
	require.NoError(t, resp.Partitions[0].Err)
	require.NoError(t, b.Close())
	entries, err := os.ReadDir(filepath.Join(dir, "wal"))
	require.NoError(t, err)
	require.NotEmpty(t, entries, "the WAL object is in the created folder")
}

// TestProducePipelined: an idempotent producer with many requests in
// flight, each started once the one before is buffered (Buffered), gets
// every batch committed in order, at consecutive offsets, whatever the
// object boundaries; started without that order, some would be refused
// as out of sequence.
func TestProducePipelined(t *testing.T) {
	ctx := t.Context()
	b := openTest(t, &Config{Linger: 5 * time.Millisecond, BufferMaxBytes: 4 << 10})
	_, err := b.CreateTopic(ctx, "t", TopicConfig{Partitions: 1})
	require.NoError(t, err)
	pid, _, err := b.InitProducerID(ctx)
	require.NoError(t, err)
	const requests, per = 40, 5
	resps := make([]ProduceResponse, requests)
	errs := make([]error, requests)
	var wg sync.WaitGroup
	for i := range requests {
		buffered := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			resps[i], errs[i] = b.Produce(ctx, ProduceRequest{Acks: -1, Buffered: func() { close(buffered) },
				Partitions: []ProducePartition{{Topic: "t", Records: batch(t, kbatch.CodecNone, i*per, per, pid, int32(i*per))}}})
		}()
		<-buffered
	}
	wg.Wait()
	for i := range requests {
		require.NoError(t, errs[i])
		require.NoError(t, resps[i].Partitions[0].Err, "request %d", i)
		require.Equal(t, int64(i*per), resps[i].Partitions[0].BaseOffset, "request %d", i)
	}
	called := 0 // Buffered is called once for a request refused at once, too
	resp, err := b.Produce(ctx, ProduceRequest{Acks: -1, Buffered: func() { called++ },
		Partitions: []ProducePartition{{Topic: "nope", Records: batch(t, kbatch.CodecNone, 0, 1, -1, -1)}}})
	require.NoError(t, err)
	require.Error(t, resp.Partitions[0].Err)
	require.Equal(t, 1, called)
}
