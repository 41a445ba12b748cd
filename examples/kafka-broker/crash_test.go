package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/diskless-go/diskless/internal/kafkatest"
)

// TestKillMidStream kills the broker process with SIGKILL, three times,
// while an idempotent producer keeps up to a thousand records in flight
// in several requests, and starts it again each time on the same data
// folder and bucket. The producer retries what was not acknowledged
// (some of it committed: a proxy drops the responses on the wire at each
// kill); afterwards every record is in the topic exactly once, in the
// order produced, and every acknowledgement's offset holds the record it
// acknowledged.
func TestKillMidStream(t *testing.T) {
	// The producer reaches the broker through a proxy that holds its
	// responses back for 50 ms: when the broker dies, the requests it
	// answered in its last 50 ms are committed and never acknowledged.
	data, bucket := brokerDirs(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0") // a free port for the broker, kept across restarts
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	proxy := startProxy(t, addr, 50*time.Millisecond)
	p := startBrokerAt(t, addr, data, bucket, "-advertised-addr", proxy.addr())
	p.addr = proxy.addr() // what clients dial
	const topic, partitions, total = "events", 3, 3000
	kafkatest.CreateTopic(t, p.client(t), topic, partitions, nil)
	// AlwaysRetryEOF: a connection cut before its first answer is the
	// kill, not a missing SASL configuration (franz-go's guess).
	prod := p.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(topic),
		kgo.MaxBufferedRecords(1000), kgo.ProducerBatchMaxBytes(2048), kgo.ProducerLinger(2*time.Millisecond), kgo.AlwaysRetryEOF())

	var a kafkatest.Acked
	const kills = 3
	killAt := make([]chan struct{}, kills) // closed when (k+1)/(kills+1) of the records are acknowledged
	for k := range killAt {
		killAt[k] = make(chan struct{})
	}
	var mu sync.Mutex
	next := 0
	done := func(r *kgo.Record, err error) {
		a.Done(r, err)
		mu.Lock()
		defer mu.Unlock()
		if next < kills && a.Count() >= (next+1)*total/(kills+1) {
			close(killAt[next])
			next++
		}
	}
	// killed[k] is closed once kill k is made. The producer goes no more
	// than slack records past where kill k is due before it is made, so
	// that records are still to come at every kill (a restart can take
	// longer than the rest of the stream).
	const slack = 300
	killed := make([]chan struct{}, kills)
	for k := range killed {
		killed[k] = make(chan struct{})
	}
	produced := make(chan struct{})
	go func() { // blocks while 1000 records are unacknowledged: through the kills too
		defer close(produced)
		k := 0
		for i := range total {
			if k < kills && i >= (k+1)*total/(kills+1)+slack {
				<-killed[k]
				k++
			}
			r := &kgo.Record{Partition: int32(i % partitions), Value: []byte(strconv.Itoa(i))}
			prod.Produce(context.Background(), r, done)
		}
	}()

	for k := range kills {
		select {
		case <-killAt[k]:
		case <-time.After(30 * time.Second):
			t.Fatalf("only %d records acknowledged in 30 s", a.Count())
		}
		// Kill while answers are on the wire, and not about to be
		// delivered: the requests in flight are answered together
		// (pipelined, in one object), so right after an acknowledgement
		// there may be none for a moment.
		for deadline := time.Now().Add(10 * time.Second); !proxy.fresh() && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond) // polls the proxy's counter
		}
		p.kill()
		close(killed[k])
		acks := a.Count()
		require.Less(t, acks, total, "the broker was killed mid-stream")
		t.Logf("kill %d: %d of %d records acknowledged", k+1, acks, total)
		p.addr = addr
		p = p.restart()
		p.addr = proxy.addr()
	}
	<-produced
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	require.NoError(t, prod.Flush(ctx))
	t.Logf("%d response bytes lost in the kills", proxy.lost.Load())
	require.Positive(t, proxy.lost.Load(), "some requests were answered and never acknowledged")

	require.Empty(t, a.Errors())
	require.Len(t, a.Records(), total)
	ackedAt := map[string]int64{}
	for _, r := range a.Records() {
		ackedAt[string(r.Value)] = r.Offset
	}

	rs := kafkatest.ConsumeAll(t, p.addr, topic, total)
	parts := kafkatest.ByPartition(rs)
	require.Len(t, parts, partitions)
	for part, prs := range parts {
		for j, r := range prs {
			i, err := strconv.Atoi(string(r.Value))
			require.NoError(t, err)
			require.Equal(t, j*partitions+int(part), i, "partition %d offset %d: records in produce order, none lost, none twice", part, r.Offset)
			require.Equal(t, int64(j), r.Offset)
			require.Equal(t, ackedAt[string(r.Value)], r.Offset, "record %d is where its acknowledgement said", i)
		}
	}
	require.Len(t, ackedAt, total, fmt.Sprintf("%d distinct records acknowledged", total))
}
