package diskless

import (
	"context"
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/internal/etcdtest"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

// txnBatch builds a transactional batch of n records "value-i" of a
// producer.
func txnBatch(t testing.TB, first, n int, producer int64, epoch int16, seq int32) []byte {
	b := kbatch.NewBuilder(kbatch.CodecNone)
	b.SetProducer(producer, epoch, seq)
	b.SetTransactional(true)
	for i := first; i < first+n; i++ {
		b.Append(time.Now().UnixMilli(), []byte(fmt.Sprintf("key-%d", i)), []byte(fmt.Sprintf("value-%d", i)))
	}
	out, err := b.Build(nil)
	require.NoError(t, err)
	return out
}

func produceOne(t testing.TB, b *Broker, topic string, part int32, data []byte) PartitionProduceResponse {
	t.Helper()
	resp, err := b.Produce(context.Background(), ProduceRequest{Acks: -1, Partitions: []ProducePartition{{Topic: topic, Partition: part, Records: data}}})
	require.NoError(t, err)
	return resp.Partitions[0]
}

func fetchOne(t testing.TB, b *Broker, topic string, part int32, offset int64, committed bool) PartitionFetchResponse {
	t.Helper()
	resp, err := b.Fetch(context.Background(), FetchRequest{ReadCommitted: committed, Partitions: []FetchPartition{{Topic: topic, Partition: part, Offset: offset}}})
	require.NoError(t, err)
	require.NoError(t, resp.Partitions[0].Err)
	return resp.Partitions[0]
}

// controlBatches counts the control batches of fetched data, by type.
func controlBatches(t testing.TB, data []byte) map[kbatch.ControlType]int {
	out := map[kbatch.ControlType]int{}
	it := kbatch.NewBatchIter(data)
	var rr kbatch.RecordReader
	for it.Next() {
		bt := it.Batch()
		require.NoError(t, bt.CheckCRC())
		if !bt.Control() {
			continue
		}
		require.NoError(t, rr.Reset(bt))
		require.True(t, rr.Next())
		r := rr.Record()
		cr, err := kbatch.ParseControlRecord(r)
		require.NoError(t, err)
		out[cr.Type]++
	}
	require.NoError(t, it.Err())
	return out
}

// TestTransactions: through the facade, a transactional producer's
// records are hidden from read_committed until their commit, an aborted
// transaction's are listed for the consumer to drop, markers are control
// batches at real offsets, and a transaction left open past its timeout
// is aborted by the broker.
func TestTransactions(t *testing.T) {
	for name, cfg := range bucketKinds(t) {
		t.Run(name, func(t *testing.T) {
			c := cfg(t)
			c.TxnCheckInterval = 20 * time.Millisecond
			testTransactions(t, openTest(t, c))
		})
	}
}

func testTransactions(t *testing.T, b *Broker) {
	ctx := t.Context()
	_, err := b.CreateTopic(ctx, "t", TopicConfig{Partitions: 2})
	require.NoError(t, err)
	_, _, err = b.InitTxnProducer(ctx, "tx", 20*time.Minute, -1, -1)
	require.Equal(t, kafkaerr.InvalidTransactionTimeout, kafkaerr.CodeOf(err))
	pid, epoch, err := b.InitTxnProducer(ctx, "tx", time.Minute, -1, -1)
	require.NoError(t, err)

	r := produceOne(t, b, "t", 0, txnBatch(t, 0, 2, pid, epoch, 0))
	require.Equal(t, kafkaerr.InvalidTxnState, r.ErrorCode, "the partition is not in the transaction")
	errs, err := b.AddTxnPartitions(ctx, "tx", pid, epoch, []TxnPartition{{"t", 0}, {"nope", 0}})
	require.NoError(t, err)
	require.Equal(t, kafkaerr.UnknownTopicOrPartition, kafkaerr.CodeOf(errs[1]))
	require.Equal(t, kafkaerr.OperationNotAttempted, kafkaerr.CodeOf(errs[0]))
	errs, err = b.AddTxnPartitions(ctx, "tx", pid, epoch, []TxnPartition{{"t", 0}})
	require.NoError(t, err)
	require.NoError(t, errs[0])

	// Aborted: offsets 0-1, marker 2.
	require.Equal(t, kafkaerr.NoError, produceOne(t, b, "t", 0, txnBatch(t, 0, 2, pid, epoch, 0)).ErrorCode)
	require.Equal(t, kafkaerr.NoError, produceOne(t, b, "t", 0, batch(t, kbatch.CodecNone, 100, 1, -1, -1)).ErrorCode) // 2
	f := fetchOne(t, b, "t", 0, 0, true)
	require.Empty(t, f.Records, "nothing is stable yet")
	require.Equal(t, []int64{0, 3}, []int64{f.LastStableOffset, f.HighWatermark})
	f = fetchOne(t, b, "t", 0, 0, false)
	require.Len(t, records(t, f.Records), 3, "read_uncommitted sees it all")
	require.NoError(t, b.EndTxn(ctx, "tx", pid, epoch, false))

	f = fetchOne(t, b, "t", 0, 0, true)
	require.Equal(t, []int64{4, 4}, []int64{f.LastStableOffset, f.HighWatermark})
	require.Equal(t, []AbortedTxn{{ProducerID: pid, FirstOffset: 0, LastOffset: 3, LastStable: 4}}, f.AbortedTransactions)
	require.Equal(t, map[kbatch.ControlType]int{kbatch.ControlAbort: 1}, controlBatches(t, f.Records))
	require.Contains(t, records(t, f.Records), int64(3), "the marker is at offset 3")

	// Committed: 4, marker 5.
	_, err = b.AddTxnPartitions(ctx, "tx", pid, epoch, []TxnPartition{{"t", 0}})
	require.NoError(t, err)
	require.Equal(t, kafkaerr.NoError, produceOne(t, b, "t", 0, txnBatch(t, 10, 1, pid, epoch, 2)).ErrorCode)
	require.NoError(t, b.EndTxn(ctx, "tx", pid, epoch, true))
	f = fetchOne(t, b, "t", 0, 4, true)
	require.Empty(t, f.AbortedTransactions)
	require.Equal(t, "value-10", records(t, f.Records)[4])
	require.Equal(t, map[kbatch.ControlType]int{kbatch.ControlCommit: 1}, controlBatches(t, f.Records))
	lo, err := b.ListOffsets(ctx, "t", 0, LatestTimestamp)
	require.NoError(t, err)
	require.Equal(t, []int64{6, 6}, []int64{lo.Offset, lo.LastStable})

	// Left open past its timeout: the broker aborts it.
	pid2, epoch2, err := b.InitTxnProducer(ctx, "slow", 50*time.Millisecond, -1, -1)
	require.NoError(t, err)
	_, err = b.AddTxnPartitions(ctx, "slow", pid2, epoch2, []TxnPartition{{"t", 1}})
	require.NoError(t, err)
	require.Equal(t, kafkaerr.NoError, produceOne(t, b, "t", 1, txnBatch(t, 0, 1, pid2, epoch2, 0)).ErrorCode)
	require.Eventually(t, func() bool {
		f := fetchOne(t, b, "t", 1, 0, true)
		return f.LastStableOffset == 2 && len(f.AbortedTransactions) == 1
	}, 10*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return b.Stats().TxnsExpired > 0 }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, kafkaerr.ProducerFenced, kafkaerr.CodeOf(b.EndTxn(ctx, "slow", pid2, epoch2, true)))
	ts, err := b.Transactions(ctx, nil)
	require.NoError(t, err)
	require.Len(t, ts, 2)
	require.Equal(t, "CompleteAbort", ts[0].State.String())
	require.Equal(t, "slow", ts[0].ID)
}

// TestTransactionsOffloaded: a partition with aborted and committed
// transactions, tiered: read_committed reads of the tiered range get the
// same records and aborted transactions as before, and the tiered
// segments' .txnindex files hold the aborts, as Kafka's would.
func TestTransactionsOffloaded(t *testing.T) {
	ctx := t.Context()
	bucketDir := t.TempDir()
	cfg := &Config{BucketURL: "file://" + bucketDir, Linger: 2 * time.Millisecond}
	b, err := Open(ctx, cfg)
	require.NoError(t, err)
	_, err = b.CreateTopic(ctx, "t", TopicConfig{Partitions: 1, Retention: -1, SegmentBytes: 1 << 10})
	require.NoError(t, err)
	pid, epoch, err := b.InitTxnProducer(ctx, "tx", time.Minute, -1, -1)
	require.NoError(t, err)
	seq := int32(0)
	var aborts []AbortedTxn
	for i := range 20 {
		_, err := b.AddTxnPartitions(ctx, "tx", pid, epoch, []TxnPartition{{"t", 0}})
		require.NoError(t, err)
		r := produceOne(t, b, "t", 0, txnBatch(t, i*5, 5, pid, epoch, seq))
		require.Equal(t, kafkaerr.NoError, r.ErrorCode)
		seq += 5
		commit := i%3 != 0
		require.NoError(t, b.EndTxn(ctx, "tx", pid, epoch, commit))
		if !commit {
			aborts = append(aborts, AbortedTxn{ProducerID: pid, FirstOffset: r.BaseOffset, LastOffset: r.BaseOffset + 5, LastStable: r.BaseOffset + 6})
		}
	}
	before := fetchOne(t, b, "t", 0, 0, true)
	require.Equal(t, aborts[:1], before.AbortedTransactions[:1])
	require.NoError(t, b.Close())

	cfg.Offload, cfg.OffloadInterval, cfg.DataDir, cfg.LocalRetention = true, 50*time.Millisecond, t.TempDir(), time.Nanosecond
	b, err = Open(ctx, cfg)
	require.NoError(t, err)
	defer b.Close()
	require.Eventually(t, func() bool { return b.Stats().Offloaded >= 3 }, 30*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool {
		fetchOne(t, b, "t", 0, 0, true)
		return b.Stats().ReadsTiered > 0
	}, 30*time.Second, 20*time.Millisecond)
	var got []AbortedTxn
	for off := int64(0); off < 120; {
		f := fetchOne(t, b, "t", 0, off, true)
		for _, a := range f.AbortedTransactions {
			if len(got) == 0 || got[len(got)-1] != a {
				got = append(got, a)
			}
		}
		if len(f.Records) == 0 {
			break
		}
		off = kbatch.LastOffset(f.Records) + 1
	}
	require.Equal(t, aborts, got, "the aborted transactions of the tiered range")

	// The .txnindex files: 34 bytes an abort, each in the segment of its
	// marker.
	var entries int
	require.NoError(t, filepath.WalkDir(bucketDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !strings.HasSuffix(path, ".txnindex") {
			return err
		}
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Zero(t, len(data)%34)
		for i := 0; i < len(data); i += 34 {
			require.Equal(t, pid, int64(binary.BigEndian.Uint64(data[i+2:])))
			entries++
		}
		return nil
	}))
	require.Positive(t, entries)
	require.LessOrEqual(t, entries, len(aborts))
}

// TestTransactionsCluster: three brokers on one bucket and etcd, four
// shards: a transaction begun on one broker, written through another and
// ended on the third spans shards (its markers go to each partition's
// leader); every broker reads the same committed records and aborted
// transactions at read_committed.
func TestTransactionsCluster(t *testing.T) {
	etcd := etcdtest.Start(t, nil)
	brokers, _ := clusterOf(t, etcd, 3, 4, nil)
	ctx := t.Context()
	_, err := brokers[0].CreateTopic(ctx, "t", TopicConfig{Partitions: 4})
	require.NoError(t, err)
	for _, b := range brokers {
		require.Eventually(t, func() bool { _, err := b.ListOffsets(ctx, "t", 3, LatestTimestamp); return err == nil }, 10*time.Second, 10*time.Millisecond)
	}
	pid, epoch, err := brokers[0].InitTxnProducer(ctx, "tx", time.Minute, -1, -1)
	require.NoError(t, err)
	all := []TxnPartition{{"t", 0}, {"t", 1}, {"t", 2}, {"t", 3}}
	for round, commit := range []bool{false, true} {
		errs, err := brokers[1].AddTxnPartitions(ctx, "tx", pid, epoch, all)
		require.NoError(t, err)
		for _, e := range errs {
			require.NoError(t, e)
		}
		for p := range int32(4) {
			r := produceOne(t, brokers[1], "t", p, txnBatch(t, round*10, 2, pid, epoch, int32(round*2)))
			require.Equal(t, kafkaerr.NoError, r.ErrorCode, "%v", r.Err)
		}
		require.NoError(t, brokers[2].EndTxn(ctx, "tx", pid, epoch, commit))
	}
	for bi, b := range brokers {
		for p := range int32(4) {
			// A broker that does not lead the partition's shard reads
			// its follower, which may be a moment behind.
			var f PartitionFetchResponse
			require.Eventually(t, func() bool {
				f = fetchOne(t, b, "t", p, 0, true)
				return f.LastStableOffset == 6
			}, 10*time.Second, 10*time.Millisecond, "broker %d partition %d", bi, p)
			require.Equal(t, []int64{6, 6}, []int64{f.HighWatermark, f.LastStableOffset}, "broker %d partition %d", bi, p)
			require.Equal(t, []AbortedTxn{{ProducerID: pid, FirstOffset: 0, LastOffset: 2, LastStable: 3}}, f.AbortedTransactions)
			recs := records(t, f.Records)
			require.Equal(t, "value-10", recs[3])
			require.Equal(t, map[kbatch.ControlType]int{kbatch.ControlAbort: 1, kbatch.ControlCommit: 1}, controlBatches(t, f.Records))
		}
	}
	ts, err := brokers[1].Transactions(ctx, []string{"tx"})
	require.NoError(t, err)
	require.Equal(t, TxnCompleteCommit, ts[0].State)
}
