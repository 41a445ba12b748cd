package kafkaserver

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless/internal/kafkatest"
)

// values returns the records' values.
func values(rs []*kgo.Record) []string {
	var out []string
	for _, r := range rs {
		out = append(out, string(r.Value))
	}
	return out
}

// consumeUntil reads topic from the start at the isolation level until
// the high watermark has been reached on every partition (so that
// nothing more can come), within 30 s.
func consumeUntil(t *testing.T, addr, topic string, committed bool, n int) []*kgo.Record {
	t.Helper()
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	rs := kafkatest.ConsumeAll(t, addr, topic, n, kgo.FetchIsolationLevel(iso))
	// Nothing more: a second consumer from the start, given a moment,
	// gets the same count.
	cl := kafkatest.Client(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(iso), kgo.FetchMaxWait(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	got := 0
	for ctx.Err() == nil {
		got += len(cl.PollFetches(ctx).Records())
	}
	require.Equal(t, n, got, "records of %s at read_committed=%v", topic, committed)
	return rs
}

// TestTransactionalProducer: franz-go's transactional producer commits
// and aborts; read_committed sees only what committed, read_uncommitted
// sees both; the markers take offsets; a second producer of the same
// transactional ID fences the first; the admin APIs describe and list the
// transaction.
func TestTransactionalProducer(t *testing.T) {
	p := startBroker(t, nil)
	ctx := t.Context()
	kafkatest.CreateTopic(t, p.client(t), "out", 2, nil)
	prod := p.client(t, kgo.TransactionalID("tx-1"), kgo.DefaultProduceTopic("out"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	send := func(cl *kgo.Client, commit bool, vals ...string) error {
		if err := cl.BeginTransaction(); err != nil {
			return err
		}
		for i, v := range vals {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v), Partition: int32(i % 2)}).FirstErr(); err != nil {
				return err
			}
		}
		return cl.EndTransaction(ctx, kgo.TransactionEndTry(commit))
	}
	require.NoError(t, send(prod, true, "c1", "c2"))
	require.NoError(t, send(prod, false, "a1", "a2", "a3"))
	require.NoError(t, send(prod, true, "c3"))

	got := values(consumeUntil(t, p.addr, "out", true, 3))
	require.ElementsMatch(t, []string{"c1", "c2", "c3"}, got)
	require.ElementsMatch(t, []string{"c1", "c2", "a1", "a2", "a3", "c3"}, values(consumeUntil(t, p.addr, "out", false, 6)))

	adm := kadm.NewClient(p.client(t))
	ends, err := adm.ListEndOffsets(ctx, "out")
	require.NoError(t, err)
	total := int64(0)
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	require.Equal(t, int64(6+5), total, "six records and five markers (partition 0 and 1 in each of the three)")

	desc, err := adm.DescribeTransactions(ctx, "tx-1")
	require.NoError(t, err)
	d, ok := desc["tx-1"]
	require.True(t, ok)
	require.NoError(t, d.Err)
	require.Equal(t, "CompleteCommit", d.State)
	listed, err := adm.ListTransactions(ctx, nil, nil)
	require.NoError(t, err)
	require.Contains(t, listed.TransactionalIDs(), "tx-1")

	// A zombie: a second producer of the ID fences the first.
	zombie := p.client(t, kgo.TransactionalID("tx-1"), kgo.DefaultProduceTopic("out"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, zombie.BeginTransaction())
	require.NoError(t, zombie.ProduceSync(ctx, &kgo.Record{Value: []byte("z1")}).FirstErr())
	fresh := p.client(t, kgo.TransactionalID("tx-1"), kgo.DefaultProduceTopic("out"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, send(fresh, true, "c4"))
	err = zombie.EndTransaction(ctx, kgo.TryCommit)
	require.Error(t, err)
	require.True(t, kerr.IsRetriable(err) == false, "the zombie is fenced: %v", err)
	got = values(consumeUntil(t, p.addr, "out", true, 4))
	require.ElementsMatch(t, []string{"c1", "c2", "c3", "c4"}, got, "the zombie's record is never visible")
}

// TestSaramaTransactions: sarama's transactional producer, an independent
// client, commits and aborts against the same broker.
func TestSaramaTransactions(t *testing.T) {
	p := startBroker(t, nil)
	kafkatest.CreateTopic(t, p.client(t), "s", 1, nil)
	c := sarama.NewConfig()
	c.Version = sarama.V3_6_0_0
	c.Producer.Idempotent = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Return.Successes = true
	c.Producer.Transaction.ID = "sarama-tx"
	c.Producer.Retry.Backoff = 50 * time.Millisecond
	c.Net.MaxOpenRequests = 1
	prod, err := sarama.NewSyncProducer([]string{p.addr}, c)
	require.NoError(t, err)
	defer prod.Close()
	for round, commit := range []bool{true, false, true} {
		require.NoError(t, prod.BeginTxn())
		for i := range 3 {
			_, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: "s", Value: sarama.StringEncoder(fmt.Sprintf("%d-%d", round, i))})
			require.NoError(t, err)
		}
		if commit {
			require.NoError(t, prod.CommitTxn())
		} else {
			require.NoError(t, prod.AbortTxn())
		}
	}
	got := values(consumeUntil(t, p.addr, "s", true, 6))
	for _, v := range got {
		round, _ := strconv.Atoi(v[:1])
		require.NotEqual(t, 1, round, "aborted round %s seen at read_committed", v)
	}
	consumeUntil(t, p.addr, "s", false, 9)
}

// TestDescribeProducersOpenTxn: DescribeProducers names the first offset
// of a producer's open transaction, and -1 once it ended.
func TestDescribeProducersOpenTxn(t *testing.T) {
	p := startBroker(t, nil)
	ctx := t.Context()
	kafkatest.CreateTopic(t, p.client(t), "dp", 1, nil)
	prod := p.client(t, kgo.TransactionalID("tx-dp"), kgo.DefaultProduceTopic("dp"))
	require.NoError(t, prod.BeginTransaction())
	require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Value: []byte("before")}).FirstErr())
	require.NoError(t, prod.EndTransaction(ctx, kgo.TryCommit))
	require.NoError(t, prod.BeginTransaction())
	require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Value: []byte("in")}).FirstErr())
	adm := kadm.NewClient(p.client(t))
	start := func() int64 {
		ds, err := adm.DescribeProducers(ctx, kadm.TopicsSet{"dp": {0: {}}})
		require.NoError(t, err)
		var got int64 = -2
		ds.EachProducer(func(dp kadm.DescribedProducer) { got = dp.CurrentTxnStartOffset })
		return got
	}
	require.Equal(t, int64(2), start(), "offset 0 the first transaction's record, 1 its marker, 2 this one's")
	require.NoError(t, prod.EndTransaction(ctx, kgo.TryCommit))
	require.Equal(t, int64(-1), start())
}

// TestTxnOffsetCommitChecksMember: TxnOffsetCommit (version 3, KIP-447)
// is checked against the group as Kafka's coordinator checks it: a
// member the group does not have is UNKNOWN_MEMBER_ID, a generation it
// is not at ILLEGAL_GENERATION, and neither commits anything; a producer
// outside the group (no member, generation -1) commits.
func TestTxnOffsetCommitChecksMember(t *testing.T) {
	p := startBroker(t, nil)
	ctx := t.Context()
	cl := p.client(t)
	kafkatest.CreateTopic(t, cl, "in", 1, nil)
	init := kmsg.NewPtrInitProducerIDRequest()
	txid := "tx-members"
	init.TransactionalID, init.TransactionTimeoutMillis = &txid, 60_000
	ir, err := init.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Zero(t, ir.ErrorCode)
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = txid, ir.ProducerID, ir.ProducerEpoch, "readers"
	ar, err := add.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Zero(t, ar.ErrorCode)
	commit := func(member string, generation int32) int16 {
		t.Helper()
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.Version = 3
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = txid, ir.ProducerID, ir.ProducerEpoch, "readers"
		req.MemberID, req.Generation = member, generation
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = "in"
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = 0, 7, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		require.NoError(t, err)
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	require.Equal(t, kerr.UnknownMemberID.Code, commit("nobody", 1))
	require.Equal(t, kerr.UnknownMemberID.Code, commit("", 5), "a generation needs a member")
	require.Zero(t, commit("", -1), "a producer outside the group")

	// A member of the group, at its generation and at another.
	member := p.client(t, kgo.ConsumerGroup("readers"), kgo.ConsumeTopics("in"))
	var id string
	var gen int32
	require.Eventually(t, func() bool {
		pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		member.PollFetches(pctx)
		id, gen = member.GroupMetadata()
		return gen > 0
	}, 30*time.Second, 10*time.Millisecond, "the member joins")
	require.Equal(t, kerr.IllegalGeneration.Code, commit(id, gen+1))
	require.Zero(t, commit(id, gen))
}
