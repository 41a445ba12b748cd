package kafkaserver

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/diskless-go/diskless/internal/kafkatest"
	"github.com/diskless-go/diskless/kbatch"
)

// The conformance suite: three independent Go client families against
// the real broker process. Each checks that what was consumed equals what
// was acknowledged, that the codec a client asked for is the codec
// stored (the batch attributes read back with a raw Fetch), and that a
// consumer reading to the end stops there (an empty tail is an empty
// record set, not an error). franz-go's own checks are in produce_test.go
// (every codec, idempotent), group_test.go, admin_test.go and
// configs_test.go (every admin call).

// storedCodecs reads a partition with raw Fetch requests and returns the
// codec of the batch that holds each offset.
func storedCodecs(t *testing.T, cl *kgo.Client, topic string, partition int32) map[int64]kbatch.Codec {
	t.Helper()
	out := map[int64]kbatch.Codec{}
	for next := int64(0); ; {
		req := fetchReq(topic, next, 0, 0, -1, partition)
		resp, err := req.RequestWith(t.Context(), cl.Broker(0))
		require.NoError(t, err)
		p := resp.Topics[0].Partitions[0]
		require.NoError(t, kerr.ErrorForCode(p.ErrorCode))
		require.NotNil(t, p.RecordBatches, "never a null record set")
		if next >= p.HighWatermark {
			require.Empty(t, p.RecordBatches)
			return out
		}
		it := kbatch.NewBatchIter(p.RecordBatches)
		for it.Next() {
			b := it.Batch()
			for o := b.BaseOffset(); o <= b.LastOffset(); o++ {
				out[o] = b.Codec()
			}
			next = b.NextOffset()
		}
		require.NoError(t, it.Err())
	}
}

// record is a record as acknowledged or consumed.
type record struct {
	partition int32
	offset    int64
	value     string
}

func sortRecords(rs []record) []record {
	sort.Slice(rs, func(i, j int) bool {
		if rs[i].partition != rs[j].partition {
			return rs[i].partition < rs[j].partition
		}
		return rs[i].offset < rs[j].offset
	})
	return rs
}

var saramaCodecs = []struct {
	name  string
	codec sarama.CompressionCodec
	want  kbatch.Codec
}{
	{"none", sarama.CompressionNone, kbatch.CodecNone},
	{"gzip", sarama.CompressionGZIP, kbatch.CodecGzip},
	{"snappy", sarama.CompressionSnappy, kbatch.CodecSnappy},
	{"lz4", sarama.CompressionLZ4, kbatch.CodecLZ4},
	{"zstd", sarama.CompressionZSTD, kbatch.CodecZstd},
}

func saramaConfig() *sarama.Config {
	c := sarama.NewConfig()
	c.Version = sarama.V3_6_0_0
	c.ClientID = "conformance"
	c.Metadata.Retry.Backoff = 50 * time.Millisecond
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Return.Successes = true
	c.Producer.Partitioner = sarama.NewManualPartitioner
	return c
}

// TestSarama: sarama's sync producer, idempotent, in each codec, and its
// async producer; then a sarama consumer group reads every partition to
// its end and commits.
func TestSarama(t *testing.T) {
	p := startBroker(t, &Config{GroupInitialRebalanceDelay: -1})
	cl := p.client(t)
	const topic, partitions, per = "sarama", 3, 40
	kafkatest.CreateTopic(t, cl, topic, partitions, nil)
	var acked []record
	wantCodec := map[[2]int64]kbatch.Codec{}

	for _, tc := range saramaCodecs {
		c := saramaConfig()
		c.Producer.Idempotent, c.Net.MaxOpenRequests = true, 1
		c.Producer.Compression = tc.codec
		prod, err := sarama.NewSyncProducer([]string{p.addr}, c)
		require.NoError(t, err, tc.name)
		var msgs []*sarama.ProducerMessage
		for i := range per {
			msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Partition: int32(i % partitions), Value: sarama.StringEncoder(fmt.Sprintf("sync %s %d", tc.name, i))})
		}
		require.NoError(t, prod.SendMessages(msgs), tc.name)
		for _, m := range msgs {
			v, _ := m.Value.Encode()
			acked = append(acked, record{m.Partition, m.Offset, string(v)})
			wantCodec[[2]int64{int64(m.Partition), m.Offset}] = tc.want
		}
		require.NoError(t, prod.Close())
	}

	// The async producer: several requests in flight, gzip.
	c := saramaConfig()
	c.Producer.Compression = sarama.CompressionGZIP
	c.Producer.Flush.Messages = 10
	async, err := sarama.NewAsyncProducer([]string{p.addr}, c)
	require.NoError(t, err)
	go func() {
		for i := range 5 * per {
			async.Input() <- &sarama.ProducerMessage{Topic: topic, Partition: int32(i % partitions), Value: sarama.StringEncoder("async " + strconv.Itoa(i))}
		}
	}()
	for range 5 * per {
		select {
		case m := <-async.Successes():
			v, _ := m.Value.Encode()
			acked = append(acked, record{m.Partition, m.Offset, string(v)})
			wantCodec[[2]int64{int64(m.Partition), m.Offset}] = kbatch.CodecGzip
		case err := <-async.Errors():
			t.Fatalf("async produce: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatal("the async producer was not acknowledged within 30 s")
		}
	}
	require.NoError(t, async.Close())

	for part := range int32(partitions) {
		for o, codec := range storedCodecs(t, cl, topic, part) {
			require.Equal(t, wantCodec[[2]int64{int64(part), o}], codec, "partition %d offset %d", part, o)
		}
	}

	// A consumer group reads to the end of every partition and commits.
	gc := saramaConfig()
	gc.Consumer.Offsets.Initial = sarama.OffsetOldest
	gc.Consumer.Offsets.AutoCommit.Enable = false
	gc.Consumer.MaxWaitTime = 100 * time.Millisecond
	group, err := sarama.NewConsumerGroup([]string{p.addr}, "sarama-group", gc)
	require.NoError(t, err)
	h := &saramaHandler{want: len(acked), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(t.Context())
	consumed := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			if err := group.Consume(ctx, []string{topic}, h); err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
				consumed <- err
				return
			}
		}
		consumed <- nil
	}()
	select {
	case <-h.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("the group consumed %d of %d records in 60 s", h.count(), len(acked))
	}
	// At the end it stays there: the empty tail is no error, and
	// nothing more comes.
	time.Sleep(300 * time.Millisecond) // a few long polls at the end (MaxWaitTime 100 ms)
	cancel()
	require.NoError(t, <-consumed)
	require.NoError(t, group.Close())
	require.Equal(t, sortRecords(acked), sortRecords(h.records()), "consumed what was acknowledged, once")
	ends := map[int32]int64{}
	for _, r := range acked {
		ends[r.partition] = max(ends[r.partition], r.offset+1)
	}
	committed, err := kadm.NewClient(cl).FetchOffsets(t.Context(), "sarama-group")
	require.NoError(t, err)
	for part, end := range ends {
		c, ok := committed.Lookup(topic, part)
		require.True(t, ok, "partition %d", part)
		require.Equal(t, end, c.At, "partition %d committed to its end", part)
	}
}

// saramaHandler collects what a sarama consumer group consumes and marks
// and commits each message.
type saramaHandler struct {
	want int
	done chan struct{}
	mu   sync.Mutex
	recs []record
}

func (h *saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		h.mu.Lock()
		h.recs = append(h.recs, record{m.Partition, m.Offset, string(m.Value)})
		if len(h.recs) == h.want {
			close(h.done)
		}
		h.mu.Unlock()
		sess.MarkMessage(m, "")
		sess.Commit()
	}
	return nil
}

func (h *saramaHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.recs)
}

func (h *saramaHandler) records() []record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]record(nil), h.recs...)
}

// TestKafkaGo: segmentio/kafka-go's writer in each codec (acks all), then
// a reader in a group that commits each message, to the end.
func TestKafkaGo(t *testing.T) {
	p := startBroker(t, &Config{GroupInitialRebalanceDelay: -1})
	cl := p.client(t)
	const topic, partitions, per = "kafka-go", 2, 30
	kafkatest.CreateTopic(t, cl, topic, partitions, nil)
	codecs := []struct {
		name  string
		codec compress.Compression
		want  kbatch.Codec
	}{
		{"none", 0, kbatch.CodecNone},
		{"gzip", compress.Gzip, kbatch.CodecGzip},
		{"snappy", compress.Snappy, kbatch.CodecSnappy},
		{"lz4", compress.Lz4, kbatch.CodecLZ4},
		{"zstd", compress.Zstd, kbatch.CodecZstd},
	}
	wantCodec := map[string]kbatch.Codec{} // by value
	var written []string
	transport := &kafka.Transport{} // its own, so that its connections close (goleak)
	defer transport.CloseIdleConnections()
	for _, tc := range codecs {
		w := &kafka.Writer{
			Addr: kafka.TCP(p.addr), Topic: topic, RequiredAcks: kafka.RequireAll, Compression: tc.codec, Transport: transport,
			Balancer: &kafka.RoundRobin{}, BatchTimeout: 5 * time.Millisecond, BatchSize: 10,
		}
		var msgs []kafka.Message
		for i := range per {
			v := fmt.Sprintf("kafka-go %s %d", tc.name, i)
			msgs = append(msgs, kafka.Message{Value: []byte(v)})
			wantCodec[v] = tc.want
			written = append(written, v)
		}
		require.NoError(t, w.WriteMessages(t.Context(), msgs...), tc.name)
		require.NoError(t, w.Close())
	}

	// The reader commits each message as it goes (CommitMessages,
	// synchronous), and reads to the end.
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: []string{p.addr}, GroupID: "kafka-go-group", Topic: topic, MaxWait: 100 * time.Millisecond,
		StartOffset: kafka.FirstOffset, HeartbeatInterval: 250 * time.Millisecond, CommitInterval: 0,
	})
	var consumed []string
	byValue := map[string]record{}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	for len(consumed) < len(written) {
		m, err := r.FetchMessage(ctx)
		require.NoError(t, err, "after %d of %d", len(consumed), len(written))
		consumed = append(consumed, string(m.Value))
		byValue[string(m.Value)] = record{int32(m.Partition), m.Offset, string(m.Value)}
		require.NoError(t, r.CommitMessages(ctx, m))
	}
	// At the end: nothing more, no error but the wait's end.
	end, cancelEnd := context.WithTimeout(t.Context(), 500*time.Millisecond)
	_, err := r.FetchMessage(end)
	cancelEnd()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, r.Close())
	require.ElementsMatch(t, written, consumed, "consumed what was written, once")

	for part := range int32(partitions) {
		codecs := storedCodecs(t, cl, topic, part)
		for _, rec := range byValue {
			if rec.partition == part {
				require.Equal(t, wantCodec[rec.value], codecs[rec.offset], "%q", rec.value)
			}
		}
	}
	committed, err := kadm.NewClient(cl).FetchOffsets(t.Context(), "kafka-go-group")
	require.NoError(t, err)
	ends, err := kadm.NewClient(cl).ListEndOffsets(t.Context(), topic)
	require.NoError(t, err)
	ends.Each(func(o kadm.ListedOffset) {
		c, ok := committed.Lookup(topic, o.Partition)
		require.True(t, ok)
		require.Equal(t, o.Offset, c.At, "partition %d committed to its end", o.Partition)
	})
}

// TestFranzGoToTheEnd: a franz-go consumer reads a topic to its end and
// stays there: a poll at the end returns nothing and no error.
func TestFranzGoToTheEnd(t *testing.T) {
	p := startBroker(t, nil)
	cl := p.client(t, kgo.DefaultProduceTopic("end"), kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	kafkatest.CreateTopic(t, cl, "end", 1, nil)
	var rs []*kgo.Record
	for i := range 50 {
		rs = append(rs, &kgo.Record{Value: []byte(strings.Repeat(strconv.Itoa(i), 50))}) // compressible: franz-go sends a batch compressed only if that is smaller
	}
	require.NoError(t, cl.ProduceSync(t.Context(), rs...).FirstErr())
	got := kafkatest.ConsumeAll(t, p.addr, "end", 50)
	for i, r := range got {
		require.Equal(t, rs[i].Offset, r.Offset)
		require.Equal(t, rs[i].Value, r.Value)
	}
	for o, codec := range storedCodecs(t, cl, "end", 0) {
		require.Equal(t, kbatch.CodecLZ4, codec, "offset %d", o)
	}
	c := p.client(t, kgo.ConsumeTopics("end"), kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()), kgo.FetchMaxWait(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	fs := c.PollFetches(ctx)
	fs.EachError(func(topic string, p int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("at the end of %s-%d: %v", topic, p, err)
		}
	})
	require.Empty(t, fs.Records())
}
