package main

import (
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless/internal/kafkatest"
)

// produceHook counts the Produce requests a franz-go client wrote.
type produceHook struct{ n atomic.Int64 }

// OnBrokerWrite implements kgo.HookBrokerWrite.
func (h *produceHook) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err == nil && key == int16(kmsg.Produce) {
		h.n.Add(1)
	}
}

// TestMetricsEndpoint starts the broker with -metrics-addr, produces
// twenty records one request at a time, and scrapes /metrics: it parses
// as Prometheus text, its produce latency histogram counts the produce
// requests sent, and the PUT counter counts at least the WAL objects
// committed (each is a PUT; the metadata log's appends are PUTs too).
func TestMetricsEndpoint(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	metricsAddr := ln.Addr().String()
	require.NoError(t, ln.Close()) // the broker listens there
	p := startBroker(t, "-metrics-addr", metricsAddr)

	var hook produceHook
	cl := p.client(t, kgo.WithHooks(&hook), kgo.DefaultProduceTopic("m"))
	kafkatest.CreateTopic(t, cl, "m", 1, nil)
	for i := range 20 {
		require.NoError(t, cl.ProduceSync(t.Context(), &kgo.Record{Value: []byte{byte(i)}}).FirstErr())
	}

	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)

	h := families["diskless_produce_duration_seconds"]
	require.NotNil(t, h, "the produce latency histogram")
	require.Equal(t, dto.MetricType_HISTOGRAM, h.GetType())
	require.EqualValues(t, hook.n.Load(), h.GetMetric()[0].GetHistogram().GetSampleCount(), "one sample a produce request")
	require.Positive(t, h.GetMetric()[0].GetHistogram().GetSampleSum())

	value := func(name string, labels map[string]string) float64 {
		t.Helper()
		f := families[name]
		require.NotNil(t, f, name)
	next:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
					continue next
				}
			}
			return m.GetCounter().GetValue()
		}
		t.Fatalf("%s has no series %v", name, labels)
		return 0
	}
	objects := value("diskless_wal_objects_total", nil)
	require.Positive(t, objects)
	require.GreaterOrEqual(t, value("diskless_store_calls_total", map[string]string{"op": "PUT", "bucket": "data"}), objects)
	require.NotNil(t, families["diskless_cache_size_bytes"], "a gauge")
}
