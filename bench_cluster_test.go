package diskless

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless/cluster/etcdcluster"
	"github.com/diskless-go/diskless/faultbucket"
	"github.com/diskless-go/diskless/internal/etcdtest"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

var benchClusterRuns atomic.Int64

// BenchmarkCluster produces through 1 and 3 brokers of a cluster on one
// bucket with the s3-standard latency profile, the metadata logs in a
// real three-member etcd on the local disk, linger 100 ms, acks=all: 16
// producers per broker, each sending one 16 KiB batch at a time to a
// random partition of 12. It reports each produce's latency (p50, p99),
// the commit's (Stats.Commit of the brokers: forwarded to the shard's
// leader or not), and the throughput.
//
//	go test -run '^$' -bench BenchmarkCluster -benchtime 400x .
func BenchmarkCluster(b *testing.B) {
	etcd := etcdtest.Start(b, nil)
	prof, err := faultbucket.NamedProfile("s3-standard")
	if err != nil {
		b.Fatal(err)
	}
	value := make([]byte, 16<<10)
	for i := range value {
		value[i] = byte(rand.Uint32())
	}
	type shape struct {
		name                  string
		partitions, producers int // producers in all, spread over the brokers; 0: 16 a broker
		size                  int
		linger                time.Duration
	}
	shapes := []shape{
		{name: "bulk", partitions: 12, size: 16 << 10, linger: 100 * time.Millisecond},
		// examples/bench's S2: 6 partitions, 6 producers, 1 KiB, the default linger.
		{name: "S2", partitions: 6, producers: 6, size: 1 << 10},
	}
	run := 0
	for _, sh := range shapes {
		for _, n := range []int{1, 3} {
			run++
			b.Run(fmt.Sprintf("%s/brokers=%d", sh.name, n), func(b *testing.B) {
				value := value[:sh.size]
				inner := memblob.OpenBucket(nil)
				defer inner.Close()
				bucket, _, err := faultbucket.Wrap(inner, &faultbucket.Options{Profile: prof, Seed: uint64(run)})
				if err != nil {
					b.Fatal(err)
				}
				defer bucket.Close()
				var brokers []*Broker
				prefix := fmt.Sprintf("bench-%d-%d/", run, benchClusterRuns.Add(1))
				for i := range n {
					br, err := Open(b.Context(), &Config{
						Bucket: bucket, BrokerID: int32(i), Shards: 3, Linger: sh.linger, DataDir: b.TempDir(),
						Cluster: &ClusterConfig{Backend: &etcdcluster.Backend{Endpoints: etcd.Endpoints()}, Prefix: prefix, LeaseTTL: 2 * time.Second},
					})
					if err != nil {
						b.Fatal(err)
					}
					defer br.Close()
					brokers = append(brokers, br)
				}
				deadline := time.Now().Add(60 * time.Second)
				for ; time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
					_, err = brokers[0].CreateTopic(b.Context(), "bench", TopicConfig{Partitions: int32(sh.partitions)})
					if err == nil || kafkaerr.CodeOf(err) == kafkaerr.TopicAlreadyExists {
						err = nil
						break
					}
				}
				if err != nil {
					b.Fatal(err)
				}
				bb := kbatch.NewBuilder(kbatch.CodecNone)
				bb.Append(time.Now().UnixMilli(), nil, value)
				records, err := bb.Build(nil)
				if err != nil {
					b.Fatal(err)
				}
				var mu sync.Mutex
				var lat []time.Duration
				var left atomic.Int64
				left.Store(int64(b.N))
				b.ResetTimer()
				start := time.Now()
				var wg sync.WaitGroup
				for bi, br := range brokers {
					producers := 16
					if sh.producers > 0 {
						producers = sh.producers / n
						if bi < sh.producers%n {
							producers++
						}
					}
					for range producers {
						wg.Go(func() {
							for left.Add(-1) >= 0 {
								t0 := time.Now()
								resp, err := br.Produce(b.Context(), ProduceRequest{Acks: -1, Partitions: []ProducePartition{{Topic: "bench", Partition: rand.Int32N(int32(sh.partitions)), Records: records}}})
								if err == nil {
									err = resp.Partitions[0].Err
								}
								if err != nil {
									b.Error(err)
									return
								}
								mu.Lock()
								lat = append(lat, time.Since(t0))
								mu.Unlock()
							}
						})
					}
				}
				wg.Wait()
				elapsed := time.Since(start)
				b.StopTimer()
				slices.Sort(lat)
				if len(lat) == 0 {
					return
				}
				q := func(f float64) float64 {
					return float64(lat[min(len(lat)-1, int(f*float64(len(lat))))].Microseconds()) / 1000
				}
				b.ReportMetric(q(0.5), "p50-ms")
				b.ReportMetric(q(0.99), "p99-ms")
				b.ReportMetric(float64(len(lat))*float64(len(value))/(1<<20)/elapsed.Seconds(), "MiB/s")
				var commitP50, commitP99 time.Duration
				for _, br := range brokers {
					s := br.Stats()
					commitP50, commitP99 = max(commitP50, s.Commit.P50), max(commitP99, s.Commit.P99)
				}
				b.ReportMetric(float64(commitP50.Microseconds())/1000, "commit-p50-ms")
				b.ReportMetric(float64(commitP99.Microseconds())/1000, "commit-p99-ms")
			})
		}
	}
}
