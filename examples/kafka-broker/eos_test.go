package main

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/diskless-go/diskless/internal/kafkatest"
)

// TestExactlyOnceKills: franz-go's GroupTransactSession reads an input
// topic and writes each record to an output topic in transactions that
// also commit the group's offsets (consume-transform-produce), while the
// broker process is killed with SIGKILL three times and started again on
// the same data folder and bucket. Read at read_committed, the output
// then holds every input record exactly once; read_uncommitted may see
// more (the attempts the kills aborted), never less.
func TestExactlyOnceKills(t *testing.T) {
	data, bucket := brokerDirs(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0") // a port kept across restarts
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	p := startBrokerAt(t, addr, data, bucket)
	const in, out, parts, total = "eos-in", "eos-out", 3, 1200
	kafkatest.CreateTopic(t, p.client(t), in, parts, nil)
	kafkatest.CreateTopic(t, p.client(t), out, parts, nil)
	seed := p.client(t, kgo.DefaultProduceTopic(in), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range total {
		seed.Produce(t.Context(), &kgo.Record{Partition: int32(i % parts), Value: []byte(strconv.Itoa(i))}, nil)
	}
	require.NoError(t, seed.Flush(t.Context()))
	seed.Close()

	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(addr), kgo.TransactionalID("eos"), kgo.ConsumerGroup("eos-group"), kgo.ConsumeTopics(in),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(),
		kgo.DefaultProduceTopic(out), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionTimeout(10*time.Second), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.MetadataMinAge(50*time.Millisecond), kgo.AlwaysRetryEOF(), kgo.RetryTimeout(60*time.Second),
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond),
	)
	require.NoError(t, err)
	defer sess.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var committed, aborted atomic.Int64
	loop := make(chan struct{})
	go func() {
		defer close(loop)
		for ctx.Err() == nil {
			fs := sess.PollRecords(ctx, 20)
			if ctx.Err() != nil {
				return
			}
			if err := sess.Begin(); err != nil {
				t.Errorf("beginning a transaction: %v", err)
				return
			}
			n := int64(0)
			fs.EachRecord(func(r *kgo.Record) {
				n++
				sess.Produce(ctx, &kgo.Record{Partition: r.Partition, Value: r.Value}, nil)
			})
			ok, err := sess.End(ctx, kgo.TryCommit)
			switch {
			case ok:
				committed.Add(n)
			case err != nil && !errors.Is(err, context.Canceled):
				t.Logf("ending a transaction: %v", err)
				aborted.Add(1)
			default:
				aborted.Add(1)
			}
		}
	}()

	for k := 1; k <= 3; k++ {
		deadline := time.Now().Add(60 * time.Second)
		for committed.Load() < int64(k*total/4) {
			require.True(t, time.Now().Before(deadline), "only %d records processed in 60 s", committed.Load())
			time.Sleep(5 * time.Millisecond)
		}
		p.kill()
		t.Logf("kill %d: %d records committed", k, committed.Load())
		p = p.restart()
	}
	t.Cleanup(func() { // what a failure needs explained
		if !t.Failed() {
			return
		}
		adm := kadm.NewClient(kafkatest.Client(t, addr))
		ctx := context.Background()
		ends, _ := adm.ListEndOffsets(ctx, out)
		stable, _ := adm.ListCommittedOffsets(ctx, out)
		ends.Each(func(o kadm.ListedOffset) { t.Logf("end %s-%d %d", o.Topic, o.Partition, o.Offset) })
		stable.Each(func(o kadm.ListedOffset) { t.Logf("stable %s-%d %d", o.Topic, o.Partition, o.Offset) })
		ds, _ := adm.DescribeProducers(ctx, kadm.TopicsSet{out: {0: {}, 1: {}, 2: {}}})
		ds.EachProducer(func(dp kadm.DescribedProducer) {
			t.Logf("producer %s-%d %d epoch %d txn start %d", dp.Topic, dp.Partition, dp.ProducerID, dp.ProducerEpoch, dp.CurrentTxnStartOffset)
		})
		txs, _ := adm.DescribeTransactions(ctx, "eos")
		for _, d := range txs {
			t.Logf("txn %+v", d)
		}
	})
	rs := kafkatest.ConsumeAll(t, addr, out, total, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	cancel()
	<-loop
	seen := map[string]int{}
	for _, r := range rs {
		seen[string(r.Value)]++
	}
	for i := range total {
		require.Equal(t, 1, seen[strconv.Itoa(i)], "input record %d in the committed output", i)
	}
	// Nothing else comes at read_committed; read_uncommitted sees at least
	// as much.
	extra := kafkatest.Client(t, addr, kgo.ConsumeTopics(out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	uncommitted := kafkatest.Client(t, addr, kgo.ConsumeTopics(out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond))
	wait, stop := context.WithTimeout(t.Context(), 3*time.Second)
	defer stop()
	nc, nu := 0, 0
	for wait.Err() == nil {
		nc += len(extra.PollFetches(wait).Records())
		nu += len(uncommitted.PollFetches(wait).Records())
	}
	require.Equal(t, total, nc)
	require.GreaterOrEqual(t, nu, total)
	t.Logf("%d transactions aborted; read_uncommitted sees %d records for %d", aborted.Load(), nu, total)
}
