package disklesstest_test

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/diskless-go/diskless/disklesstest"
	"github.com/diskless-go/diskless/internal/kafkatest"
)

// TestParallel starts 20 Kafka servers in parallel subtests, each
// producing to and consuming from its own topic, and checks that they
// share nothing: each has an address no other running server has, holds
// only its own topic (besides the internal ones) in its Broker, and reads
// back exactly what was produced to it. goleak (TestMain) checks that all
// of them stopped. How many run at once is -parallel's business
// (GOMAXPROCS by default): go test -parallel 20 runs them all together.
func TestParallel(t *testing.T) {
	var mu sync.Mutex
	addrs := map[string]int{}
	for i := range 20 {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			t.Parallel()
			topic := fmt.Sprintf("topic-%d", i)
			k := disklesstest.NewKafka(t, &disklesstest.KafkaConfig{Topics: []disklesstest.Topic{{Name: topic, Partitions: 2}}})
			mu.Lock()
			other, taken := addrs[k.Addr()]
			addrs[k.Addr()] = i
			mu.Unlock()
			require.False(t, taken, "server %d has the address %s of server %d, which runs", i, k.Addr(), other)
			t.Cleanup(func() { // before the server closes and its port is free again
				mu.Lock()
				defer mu.Unlock()
				delete(addrs, k.Addr())
			})

			cl := kafkatest.Client(t, k.Addr(), kgo.DefaultProduceTopic(topic))
			const n = 100
			var recs []*kgo.Record
			for j := range n {
				recs = append(recs, &kgo.Record{Key: []byte(strconv.Itoa(j)), Value: fmt.Appendf(nil, "%d/%d", i, j)})
			}
			require.NoError(t, cl.ProduceSync(t.Context(), recs...).FirstErr())
			got := kafkatest.ConsumeAll(t, k.Addr(), topic, n)
			seen := map[string]bool{}
			for _, r := range got {
				require.True(t, strings.HasPrefix(string(r.Value), strconv.Itoa(i)+"/"), "server %d read %q", i, r.Value)
				seen[string(r.Value)] = true
			}
			require.Len(t, seen, n)

			ts, err := k.Broker().DescribeTopics(t.Context())
			require.NoError(t, err)
			for _, d := range ts {
				require.True(t, d.Name == topic || strings.HasPrefix(d.Name, "__"), "server %d holds topic %q", i, d.Name)
			}
		})
	}
}
