package diskless

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/diskless-go/diskless/kbatch"
)

// collected is one collection of a ManualReader, by instrument name.
type collected map[string]metricdata.Metrics

func collect(t testing.TB, r *sdkmetric.ManualReader) collected {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	out := collected{}
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, meterName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// histCount returns a histogram's count.
func (c collected) histCount(t testing.TB, name string) uint64 {
	t.Helper()
	h, ok := c[name].Data.(metricdata.Histogram[float64])
	require.True(t, ok, "%s is a float64 histogram", name)
	require.Len(t, h.DataPoints, 1)
	return h.DataPoints[0].Count
}

// sum returns a counter's value at the attributes kv (pairs).
func (c collected) sum(t testing.TB, name string, kv ...string) int64 {
	t.Helper()
	s, ok := c[name].Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s is an int64 sum", name)
	require.True(t, s.IsMonotonic)
	var want []attribute.KeyValue
	for i := 0; i < len(kv); i += 2 {
		want = append(want, attribute.String(kv[i], kv[i+1]))
	}
	set := attribute.NewSet(want...)
	for _, dp := range s.DataPoints {
		if dp.Attributes.Equals(&set) {
			return dp.Value
		}
	}
	t.Fatalf("%s has no point at %v", name, kv)
	return 0
}

// TestMetrics: with a MeterProvider, the Broker's instruments report what
// Stats does: the latency histograms count what Stats counts, the
// counters equal its figures, the gauges are there; Close unregisters
// the callback.
func TestMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	b := openTest(t, &Config{MeterProvider: mp})
	ctx := t.Context()
	_, err := b.CreateTopic(ctx, "orders", TopicConfig{Partitions: 2})
	require.NoError(t, err)
	for i := range 5 {
		resp, err := b.Produce(ctx, ProduceRequest{Acks: -1, Partitions: []ProducePartition{
			{Topic: "orders", Partition: int32(i % 2), Records: batch(t, kbatch.CodecNone, i*10, 10, -1, 0)},
		}})
		require.NoError(t, err)
		require.NoError(t, resp.Partitions[0].Err)
	}
	_, err = b.Fetch(ctx, FetchRequest{Partitions: []FetchPartition{{Topic: "orders", Partition: 0}}})
	require.NoError(t, err)

	c := collect(t, reader)
	s := b.Stats()
	require.EqualValues(t, 5, c.histCount(t, "diskless.produce.duration"))
	require.EqualValues(t, s.Total.Count, c.histCount(t, "diskless.produce.duration"))
	require.EqualValues(t, s.BufferWait.Count, c.histCount(t, "diskless.produce.buffer_wait.duration"))
	require.EqualValues(t, s.Upload.Count, c.histCount(t, "diskless.wal.upload.duration"))
	require.EqualValues(t, s.Commit.Count, c.histCount(t, "diskless.wal.commit.duration"))
	require.Equal(t, "s", c["diskless.produce.duration"].Unit)

	require.Positive(t, s.Objects)
	require.Equal(t, s.Objects, c.sum(t, "diskless.wal.objects"))
	require.Equal(t, s.Coordinates, c.sum(t, "diskless.wal.coordinates"))
	require.Equal(t, s.Store["PUT"].Calls, c.sum(t, "diskless.store.calls", "op", "PUT", "bucket", "data"))
	require.Equal(t, s.Store["PUT"].Bytes, c.sum(t, "diskless.store.bytes", "op", "PUT", "bucket", "data"))
	require.Equal(t, s.ReadsLocal+s.ReadsDiskless+s.ReadsTiered, c.sum(t, "diskless.fetch.reads", "source", "local")+
		c.sum(t, "diskless.fetch.reads", "source", "diskless")+c.sum(t, "diskless.fetch.reads", "source", "tiered"))
	require.Equal(t, s.ShardCommits, c.sum(t, "diskless.coordinator.commits"))
	require.Zero(t, c.sum(t, "diskless.wal.errors", "stage", "upload"))
	for _, g := range []string{"diskless.shards", "diskless.shards.leading", "diskless.cache.hit_ratio", "diskless.cache.size", "diskless.buffer.size", "diskless.uptime"} {
		_, ok := c[g].Data.(metricdata.Gauge[float64])
		require.True(t, ok, "%s is a gauge", g)
	}

	require.NoError(t, b.Close())
	after := collect(t, reader)
	_, ok := after["diskless.wal.objects"].Data.(metricdata.Sum[int64])
	require.False(t, ok && len(after["diskless.wal.objects"].Data.(metricdata.Sum[int64]).DataPoints) > 0, "no Stats read after Close")
}

// TestNoMetrics: without a MeterProvider the Broker has no instruments.
func TestNoMetrics(t *testing.T) {
	b := openTest(t, nil)
	require.Nil(t, b.metrics)
}

// BenchmarkProduceMetrics measures the produce path (a batch of ten
// records, acks -1, 64 producers at once, mem://, 5 ms linger) without a
// MeterProvider and with the OTel SDK's (a ManualReader, never
// collected: the cost is the recording).
func BenchmarkProduceMetrics(b *testing.B) {
	for _, name := range []string{"none", "otel-sdk"} {
		b.Run(name, func(b *testing.B) {
			cfg := &Config{}
			if name == "otel-sdk" {
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
				defer mp.Shutdown(context.Background())
				cfg.MeterProvider = mp
			}
			br := openTest(b, cfg)
			_, err := br.CreateTopic(context.Background(), "orders", TopicConfig{Partitions: 8})
			require.NoError(b, err)
			data := batch(b, kbatch.CodecNone, 0, 10, -1, 0)
			b.SetParallelism(32) // 64 producers on 2 cores
			b.ReportAllocs()
			b.ResetTimer()
			var part atomic.Int32
			b.RunParallel(func(pb *testing.PB) {
				p := part.Add(1) % 8
				for pb.Next() {
					resp, err := br.Produce(context.Background(), ProduceRequest{Acks: -1, Partitions: []ProducePartition{
						{Topic: "orders", Partition: p, Records: bytes.Clone(data)},
					}})
					if err != nil || resp.Partitions[0].Err != nil {
						b.Fatal(err, resp.Partitions[0].Err)
					}
				}
			})
		})
	}
}

// BenchmarkMetricsRecord measures what the metrics add to one produce
// request on the produce path with the OTel SDK's provider: the four
// histogram records (produce, buffer wait, upload, commit; the last two
// are once an object, shared by its requests, so this is the most).
func BenchmarkMetricsRecord(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(context.Background())
	br := openTest(b, &Config{MeterProvider: mp})
	m := br.metrics
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		d := float64(i%100) / 1000
		m.produce.Record(ctx, d)
		m.bufferWait.Record(ctx, d)
		m.upload.Record(ctx, d)
		m.commit.Record(ctx, d)
	}
}
