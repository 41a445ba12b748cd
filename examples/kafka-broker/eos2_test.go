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
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/diskless-go/diskless/internal/kafkatest"
)

// eosLoop is franz-go's GroupTransactSession copying an input topic to an
// output topic in transactions that commit the group's offsets too.
type eosLoop struct {
	sess      *kgo.GroupTransactSession
	records   atomic.Int64 // records committed
	commits   atomic.Int64 // transactions committed
	aborted   atomic.Int64
	done      chan struct{}
	addr, out string
}

// startEOSLoop starts a loop of transactional ID id from in to out; opts
// are the session's further options.
func startEOSLoop(t *testing.T, ctx context.Context, addr, id, in, out string, opts ...kgo.Opt) *eosLoop {
	all := append([]kgo.Opt{
		kgo.SeedBrokers(addr), kgo.TransactionalID(id), kgo.ConsumerGroup(id + "-group"), kgo.ConsumeTopics(in),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(),
		kgo.DefaultProduceTopic(out), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionTimeout(10 * time.Second), kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.MetadataMinAge(50 * time.Millisecond), kgo.AlwaysRetryEOF(), kgo.RetryTimeout(60 * time.Second),
		kgo.SessionTimeout(6 * time.Second), kgo.HeartbeatInterval(500 * time.Millisecond),
	}, opts...)
	sess, err := kgo.NewGroupTransactSession(all...)
	require.NoError(t, err)
	l := &eosLoop{sess: sess, done: make(chan struct{}), addr: addr, out: out}
	go func() {
		defer close(l.done)
		for ctx.Err() == nil {
			fs := sess.PollRecords(ctx, 20)
			if ctx.Err() != nil {
				return
			}
			if err := sess.Begin(); err != nil {
				t.Errorf("%s: beginning a transaction: %v", id, err)
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
				l.records.Add(n)
				if n > 0 {
					l.commits.Add(1)
				}
			case err != nil && !errors.Is(err, context.Canceled):
				t.Logf("%s: ending a transaction: %v", id, err)
				l.aborted.Add(1)
			default:
				l.aborted.Add(1)
			}
		}
	}()
	return l
}

// seedTopic creates topic with parts partitions and writes the numbers
// 0 to total-1 to it, round robin.
func seedTopic(t *testing.T, p *brokerProc, topic string, parts, total int) {
	kafkatest.CreateTopic(t, p.client(t), topic, int32(parts), nil)
	seed := p.client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range total {
		seed.Produce(t.Context(), &kgo.Record{Partition: int32(i % parts), Value: []byte(strconv.Itoa(i))}, nil)
	}
	require.NoError(t, seed.Flush(t.Context()))
}

// requireExactlyOnce reads out at read_committed and requires each of
// the numbers 0 to total-1 exactly once.
func requireExactlyOnce(t *testing.T, addr, out string, total int) {
	rs := kafkatest.ConsumeAll(t, addr, out, total, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	seen := map[string]int{}
	for _, r := range rs {
		seen[string(r.Value)]++
	}
	for i := range total {
		require.Equal(t, 1, seen[strconv.Itoa(i)], "%s: input record %d in the committed output", out, i)
	}
	extra := kafkatest.Client(t, addr, kgo.ConsumeTopics(out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	wait, stop := context.WithTimeout(t.Context(), 2*time.Second)
	defer stop()
	n := 0
	for wait.Err() == nil {
		n += len(extra.PollFetches(wait).Records())
	}
	require.Equal(t, total, n, "%s: nothing more at read_committed", out)
}

// TestExactlyOnceKillsTxnV2: TestExactlyOnceKills with transactions v2
// and v1 at once. franz-go 1.22 speaks v2 when the cluster's
// transaction.version is finalized at 2 (a new cluster is): its Produce
// 12 and TxnOffsetCommit 5 add the partitions and the group themselves
// and each EndTxn 5 bumps the epoch. A second session, capped at the
// versions before (Produce 11, EndTxn 4, TxnOffsetCommit 4), is a v1
// client of the same broker. Both copy their input while the broker
// process is killed with SIGKILL twice and started again on the same
// data folder and bucket; read at read_committed, each output holds
// every input record exactly once. The v2 transactional ID's epoch has
// grown by at least one per committed transaction; the v1 one's only by
// its producer's restarts.
func TestExactlyOnceKillsTxnV2(t *testing.T) {
	data, bucket := brokerDirs(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0") // a port kept across restarts
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	p := startBrokerAt(t, addr, data, bucket)
	const parts, total = 3, 600
	seedTopic(t, p, "v2-in", parts, total)
	seedTopic(t, p, "v1-in", parts, total)
	kafkatest.CreateTopic(t, p.client(t), "v2-out", parts, nil)
	kafkatest.CreateTopic(t, p.client(t), "v1-out", parts, nil)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	v1Versions := kversion.Stable()
	v1Versions.SetMaxKeyVersion(0, 11) // Produce
	v1Versions.SetMaxKeyVersion(26, 4) // EndTxn
	v1Versions.SetMaxKeyVersion(28, 4) // TxnOffsetCommit
	v2 := startEOSLoop(t, ctx, addr, "eos-v2", "v2-in", "v2-out")
	v1 := startEOSLoop(t, ctx, addr, "eos-v1", "v1-in", "v1-out", kgo.MaxVersions(v1Versions))
	defer v2.sess.Close()
	defer v1.sess.Close()

	for k := 1; k <= 2; k++ {
		deadline := time.Now().Add(60 * time.Second)
		for v2.records.Load() < int64(k*total/3) || v1.records.Load() < int64(k*total/3) {
			require.True(t, time.Now().Before(deadline), "only %d and %d records processed in 60 s", v2.records.Load(), v1.records.Load())
			time.Sleep(5 * time.Millisecond)
		}
		p.kill()
		t.Logf("kill %d: %d (v2) and %d (v1) records committed", k, v2.records.Load(), v1.records.Load())
		p = p.restart()
	}
	requireExactlyOnce(t, addr, "v2-out", total)
	requireExactlyOnce(t, addr, "v1-out", total)
	cancel()
	<-v2.done
	<-v1.done

	adm := kadm.NewClient(kafkatest.Client(t, addr))
	txs, err := adm.DescribeTransactions(t.Context(), "eos-v2", "eos-v1")
	require.NoError(t, err)
	d2, d1 := txs["eos-v2"], txs["eos-v1"]
	require.NoError(t, d2.Err)
	require.NoError(t, d1.Err)
	t.Logf("v2: %d transactions committed, epoch %d; v1: %d committed, epoch %d; %d and %d aborted",
		v2.commits.Load(), d2.ProducerEpoch, v1.commits.Load(), d1.ProducerEpoch, v2.aborted.Load(), v1.aborted.Load())
	require.GreaterOrEqual(t, int64(d2.ProducerEpoch), v2.commits.Load(), "each v2 end bumps the epoch")
	require.Less(t, int64(d1.ProducerEpoch), v1.commits.Load(), "v1 ends keep it")
}
