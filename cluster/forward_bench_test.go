package cluster_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/cluster"
	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/wal"
)

// tcpForwarder forwards every call to one address over a Transport: a
// broker whose shards are all led by one other broker.
type tcpForwarder struct {
	tr   cluster.Transport
	addr string
	ctx  func(context.Context) context.Context
}

func (f *tcpForwarder) Forward(ctx context.Context, shard int, method string, body []byte) func() ([]byte, error) {
	return f.tr.Call(f.ctx(ctx), f.addr, shard, method, body)
}

// BenchmarkForwardedCommit: a commit of an object of 16 batches made on
// a broker that does not lead the shard, forwarded over TCP to the
// leader's Coordinator (memory log) and answered, plaintext and with
// mutual TLS; one call at a time, so ns/op is the latency, and p50 and
// p99 are reported.
func BenchmarkForwardedCommit(b *testing.B) {
	ca := newTestCA(b, "cluster")
	for _, mode := range []string{"plaintext", "mtls"} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			lead, err := coordinator.Open(ctx, []metalog.Log{metalog.NewMem(nil)}, &coordinator.Options{Dir: b.TempDir(), SnapshotEvery: -1})
			require.NoError(b, err)
			b.Cleanup(func() { lead.Close() })
			id, err := lead.CreatePartitions(ctx, coordinator.CreatePartitionsRequest{Name: "t", Partitions: 16})
			require.NoError(b, err)

			var serveOpts, callOpts cluster.TCPOptions
			withCallee := func(ctx context.Context) context.Context { return ctx }
			if mode == "mtls" {
				serveOpts.TLS, callOpts.TLS = ca.node(b, 1), ca.node(b, 2)
				withCallee = func(ctx context.Context) context.Context { return cluster.WithCallee(ctx, 1) }
			}
			serveTr, err := cluster.NewTCP(&serveOpts)
			require.NoError(b, err)
			b.Cleanup(func() { serveTr.Close() })
			srv, err := serveTr.Listen("127.0.0.1:0", lead.Shards().Serve)
			require.NoError(b, err)
			b.Cleanup(func() { srv.Close() })
			callTr, err := cluster.NewTCP(&callOpts)
			require.NoError(b, err)
			b.Cleanup(func() { callTr.Close() })
			other, err := coordinator.Open(ctx, []metalog.Log{nil}, &coordinator.Options{Dir: b.TempDir(), SnapshotEvery: -1,
				Forwarder: &tcpForwarder{tr: callTr, addr: srv.Addr(), ctx: withCallee}})
			require.NoError(b, err)
			b.Cleanup(func() { other.Close() })
			other.Shards().RefreshTopics(ctx)

			req := func() coordinator.CommitFileRequest {
				r := coordinator.CommitFileRequest{ObjectKey: "wal/" + uuid.NewString(), Size: 16 << 14, Uploader: 2}
				for p := range 16 {
					r.Coordinates = append(r.Coordinates, wal.Coordinate{TopicPartition: wal.TopicPartition{TopicID: id, Partition: int32(p)},
						Offset: int64(p) << 14, Size: 1 << 14, NumRecords: 10, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1})
				}
				return r
			}
			var lat []time.Duration
			for b.Loop() {
				r := req()
				start := time.Now()
				rs, err := other.CommitFile(ctx, r)
				lat = append(lat, time.Since(start))
				if err != nil || rs[0].Err != nil {
					b.Fatal(err, rs)
				}
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}
