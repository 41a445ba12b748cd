package kafkaserver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless/internal/kafkatest"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

// txnDriver drives one transactional ID by hand with kmsg requests, each
// at the version asked (a client pinned to it per key and version).
type txnDriver struct {
	t       *testing.T
	p       *testBroker
	id      string
	topic   string
	pid     int64
	epoch   int16
	seq     map[int32]int32 // the next sequence by partition
	clients map[[2]int16]*kgo.Client
}

// newTxnDriver makes a topic of two partitions and initializes a
// producer of a transactional ID.
func newTxnDriver(t *testing.T, p *testBroker, id, topic string) *txnDriver {
	d := &txnDriver{t: t, p: p, id: id, topic: topic, seq: map[int32]int32{}, clients: map[[2]int16]*kgo.Client{}}
	kafkatest.CreateTopic(t, p.client(t), topic, 2, nil)
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID, req.TransactionTimeoutMillis = &d.id, 60_000
	resp, err := req.RequestWith(t.Context(), p.client(t))
	require.NoError(t, err)
	require.Zero(t, resp.ErrorCode)
	d.pid, d.epoch = resp.ProducerID, resp.ProducerEpoch
	return d
}

// at returns a client that sends key at version.
func (d *txnDriver) at(key, version int16) *kgo.Client {
	k := [2]int16{key, version}
	if d.clients[k] == nil {
		d.clients[k] = pinnedClient(d.t, d.p, key, version)
	}
	return d.clients[k]
}

// produce sends one transactional record to partition at epoch with
// Produce of version, and returns the partition's error code. A new
// epoch starts the partition's sequence at 0.
func (d *txnDriver) produce(version int16, partition int32, epoch int16, value string) int16 {
	d.t.Helper()
	b := kbatch.NewBuilder(kbatch.CodecNone)
	b.SetProducer(d.pid, epoch, d.seq[partition])
	b.SetTransactional(true)
	b.Append(time.Now().UnixMilli(), nil, []byte(value))
	records, err := b.Build(nil)
	require.NoError(d.t, err)
	req := kmsg.NewPtrProduceRequest()
	req.TransactionID, req.Acks, req.TimeoutMillis = &d.id, -1, 10_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = d.topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(d.t.Context(), d.at(0, version))
	require.NoError(d.t, err)
	require.Equal(d.t, version, resp.Version)
	code := resp.Topics[0].Partitions[0].ErrorCode
	if code == 0 {
		d.seq[partition]++
	}
	return code
}

// addPartitions is AddPartitionsToTxn (version 3) of the partitions.
func (d *txnDriver) addPartitions(epoch int16, partitions ...int32) int16 {
	d.t.Helper()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = d.id, d.pid, epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = d.topic, partitions
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(d.t.Context(), d.at(24, 3))
	require.NoError(d.t, err)
	return resp.Topics[0].Partitions[0].ErrorCode
}

// end is EndTxn of version at epoch.
func (d *txnDriver) end(version, epoch int16, commit bool) *kmsg.EndTxnResponse {
	d.t.Helper()
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = d.id, d.pid, epoch, commit
	resp, err := req.RequestWith(d.t.Context(), d.at(26, version))
	require.NoError(d.t, err)
	require.Equal(d.t, version, resp.Version)
	return resp
}

// describe returns the transaction's state.
func (d *txnDriver) describe() kmsg.DescribeTransactionsResponseTransactionState {
	d.t.Helper()
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{d.id}
	resp, err := req.RequestWith(d.t.Context(), d.p.client(d.t))
	require.NoError(d.t, err)
	require.Zero(d.t, resp.TransactionStates[0].ErrorCode)
	return resp.TransactionStates[0]
}

// TestEndTxnV5: Produce 12 adds its partitions to the transaction
// itself, starting it; EndTxn 5 commits it under the next epoch and
// answers the producer ID and that epoch; its retry at the old epoch gets
// the same answer; the next transaction at the new epoch starts its
// sequences at 0; an abort with no transaction bumps the epoch again; an
// EndTxn of version 4 (a v1 client of the same cluster) never bumps.
func TestEndTxnV5(t *testing.T) {
	p := startBroker(t, nil)
	d := newTxnDriver(t, p, "tx-v5", "v5")
	e0 := d.epoch

	require.Zero(t, d.produce(12, 0, e0, "a"))
	require.Zero(t, d.produce(12, 1, e0, "b"))
	st := d.describe()
	require.Equal(t, "Ongoing", st.State, "Produce 12 started the transaction")
	require.Len(t, st.Topics, 1)
	require.ElementsMatch(t, []int32{0, 1}, st.Topics[0].Partitions)

	resp := d.end(5, e0, true)
	require.Zero(t, resp.ErrorCode)
	require.Equal(t, d.pid, resp.ProducerID)
	require.Equal(t, e0+1, resp.ProducerEpoch, "the end bumps the epoch")
	st = d.describe()
	require.Equal(t, "CompleteCommit", st.State)
	require.Equal(t, e0+1, st.ProducerEpoch)

	retry := d.end(5, e0, true)
	require.Zero(t, retry.ErrorCode, "a retry at the old epoch")
	require.Equal(t, resp.ProducerID, retry.ProducerID)
	require.Equal(t, resp.ProducerEpoch, retry.ProducerEpoch)
	wrong := d.end(5, e0, false)
	require.Equal(t, int16(kafkaerr.InvalidTxnState), wrong.ErrorCode, "the retry of the other result")
	require.Equal(t, int64(-1), wrong.ProducerID)
	require.Equal(t, int16(-1), wrong.ProducerEpoch)

	e1 := e0 + 1
	d.seq = map[int32]int32{}
	require.Zero(t, d.produce(12, 0, e1, "d"), "the next transaction, from sequence 0")
	resp = d.end(5, e1, false)
	require.Zero(t, resp.ErrorCode)
	require.Equal(t, e1+1, resp.ProducerEpoch)

	e2 := e1 + 1
	resp = d.end(5, e2, false)
	require.Zero(t, resp.ErrorCode, "an abort of nothing, under v2")
	require.Equal(t, e2+1, resp.ProducerEpoch)
	require.Equal(t, int16(kafkaerr.InvalidTxnState), d.end(5, e2+1, true).ErrorCode, "a commit of nothing")

	// A v1 client of the same transactional ID: EndTxn 4 keeps the epoch.
	e3 := e2 + 1
	require.Zero(t, d.addPartitions(e3, 1))
	d.seq = map[int32]int32{}
	require.Zero(t, d.produce(11, 1, e3, "e"))
	require.Zero(t, d.end(4, e3, true).ErrorCode)
	st = d.describe()
	require.Equal(t, "CompleteCommit", st.State)
	require.Equal(t, e3, st.ProducerEpoch, "a v1 end never bumps")
	require.Equal(t, int16(kafkaerr.ProducerFenced), d.end(5, e2, true).ErrorCode, "after a v1 end, the epoch before is no retry")

	got := values(consumeUntil(t, p.addr, "v5", true, 3))
	require.ElementsMatch(t, []string{"a", "b", "e"}, got)
}

// TestHangingTransactionV1V2: a Produce of a transaction that ended,
// arriving late at the epoch the transaction ran under. After a v1 end
// (EndTxn 4) the epoch is still current, so the late Produce 12 opens a
// new transaction that its producer never ends: a hanging transaction
// that holds read_committed consumers back. After a v2 end (EndTxn 5)
// the epoch moved on and the markers carry it, so the late Produce is
// refused with INVALID_PRODUCER_EPOCH, as Kafka refuses it, and nothing
// opens.
func TestHangingTransactionV1V2(t *testing.T) {
	p := startBroker(t, nil)

	v1 := newTxnDriver(t, p, "tx-hang-v1", "hang-v1")
	require.Zero(t, v1.addPartitions(v1.epoch, 0))
	require.Zero(t, v1.produce(11, 0, v1.epoch, "committed"))
	require.Zero(t, v1.end(4, v1.epoch, true).ErrorCode)
	require.Equal(t, "CompleteCommit", v1.describe().State)
	require.Zero(t, v1.produce(12, 0, v1.epoch, "late"), "the late write is taken")
	st := v1.describe()
	require.Equal(t, "Ongoing", st.State, "and opened a transaction no one will end")
	require.Equal(t, v1.epoch, st.ProducerEpoch)

	v2 := newTxnDriver(t, p, "tx-hang-v2", "hang-v2")
	require.Zero(t, v2.produce(12, 0, v2.epoch, "committed"))
	resp := v2.end(5, v2.epoch, true)
	require.Zero(t, resp.ErrorCode)
	require.Equal(t, int16(kafkaerr.InvalidProducerEpoch), v2.produce(12, 0, v2.epoch, "late"), "the late write is fenced")
	require.Equal(t, int16(kafkaerr.InvalidProducerEpoch), v2.produce(12, 1, v2.epoch, "late"), "in a partition the transaction never had too")
	st = v2.describe()
	require.Equal(t, "CompleteCommit", st.State, "nothing opened")
	require.Empty(t, st.Topics)
	require.Equal(t, resp.ProducerEpoch, st.ProducerEpoch)

	require.Equal(t, []string{"committed"}, values(consumeUntil(t, p.addr, "hang-v2", true, 1)))
}

// TestTxnOffsetCommitV5: TxnOffsetCommit 5 adds its group to the
// transaction itself (no AddOffsetsToTxn), and the offsets are the
// group's once EndTxn 5 commits; version 4 still needs the group added.
func TestTxnOffsetCommitV5(t *testing.T) {
	p := startBroker(t, nil)
	d := newTxnDriver(t, p, "tx-offsets", "offsets")
	commit := func(version int16, group string, offset int64) int16 {
		t.Helper()
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = d.id, d.pid, d.epoch, group
		req.Generation = -1
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = d.topic
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = 0, offset, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(t.Context(), d.at(28, version))
		require.NoError(t, err)
		require.Equal(t, version, resp.Version)
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	require.Equal(t, int16(kafkaerr.InvalidTxnState), commit(4, "g4", 3), "version 4 needs AddOffsetsToTxn")
	require.Zero(t, commit(5, "g5", 7))
	require.Equal(t, "Ongoing", d.describe().State, "the commit started the transaction")
	resp := d.end(5, d.epoch, true)
	require.Zero(t, resp.ErrorCode)

	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = "g5"
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = d.topic, []int32{0}
	req.Topics = append(req.Topics, rt)
	fetched, err := req.RequestWith(t.Context(), p.client(t))
	require.NoError(t, err)
	require.Equal(t, int64(7), fetched.Topics[0].Partitions[0].Offset)

	// At the old epoch, after the v2 end: fenced (INVALID_PRODUCER_EPOCH at
	// every version of TxnOffsetCommit, errorversions.go).
	require.Equal(t, int16(kafkaerr.InvalidProducerEpoch), commit(5, "g5", 9))
}

// TestTxnV2Errors: the codes of transactions v2's failures, per Kafka:
// Produce 12 of a fenced producer is INVALID_PRODUCER_EPOCH (the
// coordinator's PRODUCER_FENCED, as AddPartitionsToTxnManager turns it),
// of a producer ID the transactional ID does not have
// INVALID_PRODUCER_ID_MAPPING; EndTxn 5 of a fenced producer is
// PRODUCER_FENCED with no producer ID or epoch in the answer, and EndTxn
// 1 of the same INVALID_PRODUCER_EPOCH (errorversions.go).
func TestTxnV2Errors(t *testing.T) {
	p := startBroker(t, nil)
	d := newTxnDriver(t, p, "tx-errors", "errors")
	old := d.epoch
	again := newTxnDriver(t, p, "tx-errors", "errors2") // a second producer of the ID fences the first
	require.Equal(t, d.pid, again.pid)
	require.Greater(t, again.epoch, old)

	require.Equal(t, int16(kafkaerr.InvalidProducerEpoch), d.produce(12, 0, old, "zombie"))
	resp := d.end(5, old, true)
	require.Equal(t, int16(kafkaerr.ProducerFenced), resp.ErrorCode)
	require.Equal(t, int64(-1), resp.ProducerID)
	require.Equal(t, int16(-1), resp.ProducerEpoch)
	require.Equal(t, int16(kafkaerr.InvalidProducerEpoch), d.end(1, old, true).ErrorCode)

	d.pid++
	require.Equal(t, int16(kafkaerr.InvalidProducerIDMapping), d.produce(12, 0, again.epoch, "other"))
}

// TestFranzGoTxnV2: franz-go reads the finalized transaction.version (2
// on a new cluster) and speaks transactions v2: no AddPartitionsToTxn,
// and each EndTransaction bumps the epoch, which DescribeTransactions
// shows; read_committed sees what committed.
func TestFranzGoTxnV2(t *testing.T) {
	p := startBroker(t, nil)
	ctx := t.Context()
	kafkatest.CreateTopic(t, p.client(t), "kgo-v2", 1, nil)
	prod := p.client(t, kgo.TransactionalID("tx-kgo"), kgo.DefaultProduceTopic("kgo-v2"))
	for i, commit := range []bool{true, false, true} {
		require.NoError(t, prod.BeginTransaction())
		require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Value: []byte{'0' + byte(i)}}).FirstErr())
		require.NoError(t, prod.EndTransaction(ctx, kgo.TransactionEndTry(commit)))
	}
	d := &txnDriver{t: t, p: p, id: "tx-kgo"}
	st := d.describe()
	require.Equal(t, "CompleteCommit", st.State)
	require.Equal(t, int16(3), st.ProducerEpoch, "three ends, three bumps from epoch 0")
	require.Equal(t, []string{"0", "2"}, values(consumeUntil(t, p.addr, "kgo-v2", true, 2)))
}

// TestProduceV12Adds: the partitions of one Produce 12 are added
// together; a partition that does not exist is answered
// UNKNOWN_TOPIC_OR_PARTITION and the others are still added and written;
// batches of two producers in one request are
// INVALID_PRODUCER_ID_MAPPING and add nothing.
func TestProduceV12Adds(t *testing.T) {
	p := startBroker(t, nil)
	d := newTxnDriver(t, p, "tx-adds", "adds")
	batch := func(pid int64, seq int32) []byte {
		b := kbatch.NewBuilder(kbatch.CodecNone)
		b.SetProducer(pid, d.epoch, seq)
		b.SetTransactional(true)
		b.Append(time.Now().UnixMilli(), nil, []byte("x"))
		records, err := b.Build(nil)
		require.NoError(t, err)
		return records
	}
	send := func(parts map[int32]int64) map[int32]int16 {
		req := kmsg.NewPtrProduceRequest()
		req.TransactionID, req.Acks, req.TimeoutMillis = &d.id, -1, 10_000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = d.topic
		for part, pid := range parts {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = part, batch(pid, 0)
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(t.Context(), d.at(0, 12))
		require.NoError(t, err)
		out := map[int32]int16{}
		for _, rp := range resp.Topics[0].Partitions {
			out[rp.Partition] = rp.ErrorCode
		}
		return out
	}
	mixed := send(map[int32]int64{0: d.pid, 1: d.pid + 1})
	require.Equal(t, map[int32]int16{0: int16(kafkaerr.InvalidProducerIDMapping), 1: int16(kafkaerr.InvalidProducerIDMapping)}, mixed)
	require.Equal(t, "Empty", d.describe().State, "nothing added")

	got := send(map[int32]int64{0: d.pid, 7: d.pid})
	require.Equal(t, map[int32]int16{0: 0, 7: int16(kafkaerr.UnknownTopicOrPartition)}, got)
	st := d.describe()
	require.Equal(t, "Ongoing", st.State)
	require.Equal(t, []int32{0}, st.Topics[0].Partitions)
	require.Zero(t, d.end(5, d.epoch, true).ErrorCode)
	require.Equal(t, []string{"x"}, values(consumeUntil(t, p.addr, d.topic, true, 1)))
}
