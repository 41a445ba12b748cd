package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/internal/kafkatest"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

// TestTxnV2FeatureGate: a cluster whose node supports transaction.version
// 1 only (-features) finalizes it at 1 and says so in ApiVersions;
// franz-go then speaks transactions v1 (its commits keep the epoch), and
// the requests of v2, sent by hand, are UNSUPPORTED_VERSION: EndTxn 5, a
// transactional Produce 12 and TxnOffsetCommit 5, changing nothing.
func TestTxnV2FeatureGate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, an S3 server and a broker process")
	}
	c := startCluster(t, 1, nil, "-features", coordinator.FeatureTransactionVersion+"=1")
	p := c.procs[0]
	ctx := t.Context()
	admin := p.client(t)
	kafkatest.CreateTopic(t, admin, "gated", 1, nil)

	av := kmsg.NewPtrApiVersionsRequest()
	resp, err := av.RequestWith(ctx, admin)
	require.NoError(t, err)
	level := int16(-1)
	for _, f := range resp.FinalizedFeatures {
		if f.Name == coordinator.FeatureTransactionVersion {
			level = f.MaxVersionLevel
		}
	}
	require.Equal(t, int16(1), level)

	prod := p.client(t, kgo.TransactionalID("gated-tx"), kgo.DefaultProduceTopic("gated"))
	for range 2 {
		require.NoError(t, prod.BeginTransaction())
		require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Value: []byte("v1")}).FirstErr())
		require.NoError(t, prod.EndTransaction(ctx, kgo.TryCommit))
	}
	txs, err := kadm.NewClient(admin).DescribeTransactions(ctx, "gated-tx")
	require.NoError(t, err)
	d := txs["gated-tx"]
	require.NoError(t, d.Err)
	require.Equal(t, "CompleteCommit", d.State)
	require.Equal(t, int16(0), d.ProducerEpoch, "v1 commits keep the epoch")

	pinned := func(key, version int16) *kgo.Client {
		vs := kversion.Stable()
		vs.SetMaxKeyVersion(key, version)
		return p.client(t, kgo.MaxVersions(vs))
	}
	id := "gated-tx"
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id, d.ProducerID, d.ProducerEpoch, false
	endResp, err := end.RequestWith(ctx, pinned(26, 5))
	require.NoError(t, err)
	require.Equal(t, int16(5), endResp.Version)
	require.Equal(t, int16(kafkaerr.UnsupportedVersion), endResp.ErrorCode)

	b := kbatch.NewBuilder(kbatch.CodecNone)
	b.SetProducer(d.ProducerID, d.ProducerEpoch, 100)
	b.SetTransactional(true)
	b.Append(time.Now().UnixMilli(), nil, []byte("v2"))
	records, err := b.Build(nil)
	require.NoError(t, err)
	pr := kmsg.NewPtrProduceRequest()
	pr.TransactionID, pr.Acks, pr.TimeoutMillis = &id, -1, 10_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "gated"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	pr.Topics = append(pr.Topics, rt)
	prResp, err := pr.RequestWith(ctx, pinned(0, 12))
	require.NoError(t, err)
	require.Equal(t, int16(12), prResp.Version)
	require.Equal(t, int16(kafkaerr.UnsupportedVersion), prResp.Topics[0].Partitions[0].ErrorCode)

	oc := kmsg.NewPtrTxnOffsetCommitRequest()
	oc.TransactionalID, oc.ProducerID, oc.ProducerEpoch, oc.Group, oc.Generation = id, d.ProducerID, d.ProducerEpoch, "gated-group", -1
	ot := kmsg.NewTxnOffsetCommitRequestTopic()
	ot.Topic = "gated"
	op := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	op.Offset, op.LeaderEpoch = 1, -1
	ot.Partitions = append(ot.Partitions, op)
	oc.Topics = append(oc.Topics, ot)
	ocResp, err := oc.RequestWith(ctx, pinned(28, 5))
	require.NoError(t, err)
	require.Equal(t, int16(5), ocResp.Version)
	require.Equal(t, int16(kafkaerr.UnsupportedVersion), ocResp.Topics[0].Partitions[0].ErrorCode)

	txs, err = kadm.NewClient(admin).DescribeTransactions(ctx, "gated-tx")
	require.NoError(t, err)
	require.Equal(t, "CompleteCommit", txs["gated-tx"].State, "nothing changed")
	require.Equal(t, int16(0), txs["gated-tx"].ProducerEpoch)
}
