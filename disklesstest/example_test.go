package disklesstest_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/diskless-go/diskless/disklesstest"
	"github.com/diskless-go/diskless/faultbucket"
)

// TestExactlyOnce: franz-go produces 1,000 records with acks=all and an
// idempotent producer through a Kafka server of disklesstest, and
// consumes them back, over a mem:// bucket and over one whose PUTs fail
// one time in ten: every acknowledged record is read back once.
func TestExactlyOnce(t *testing.T) {
	for _, putErrors := range []float64{0, 0.1} {
		t.Run(fmt.Sprintf("%v of PUTs fail", putErrors), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()

			// A store whose PUTs fail at that rate (the Broker retries;
			// producers see KAFKA_STORAGE_ERROR and retry).
			k := disklesstest.NewKafka(t, &disklesstest.KafkaConfig{
				Faults: &faultbucket.Options{Profile: faultbucket.Profile{}.WithErrorRate(putErrors, faultbucket.Put)},
				Topics: []disklesstest.Topic{{Name: "orders", Partitions: 3}},
			})

			// Produce, ten records a request: acks=all and idempotent
			// (franz-go's defaults, said out loud), each request
			// retried until acknowledged. A failed request makes
			// franz-go refresh its metadata before it retries, and it
			// waits MetadataMinAge (5 s) between refreshes: a test
			// over a failing store shortens that.
			producer, err := kgo.NewClient(kgo.SeedBrokers(k.Addr()), kgo.DefaultProduceTopic("orders"),
				kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MetadataMinAge(10*time.Millisecond))
			require.NoError(t, err)
			defer producer.Close()
			const n = 1000
			for i := 0; i < n; i += 10 {
				var batch []*kgo.Record
				for j := i; j < i+10; j++ {
					batch = append(batch, &kgo.Record{Key: []byte(strconv.Itoa(j % 7)), Value: []byte(strconv.Itoa(j))})
				}
				require.NoError(t, producer.ProduceSync(ctx, batch...).FirstErr())
			}
			if putErrors > 0 {
				require.Positive(t, k.Faults().Stats().Failed[faultbucket.Put], "some PUTs failed")
			}

			// Consume from the start until every acknowledged record has
			// come.
			consumer, err := kgo.NewClient(kgo.SeedBrokers(k.Addr()), kgo.ConsumeTopics("orders"),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			require.NoError(t, err)
			defer consumer.Close()
			seen := map[string]int{}
			for len(seen) < n {
				fetches := consumer.PollFetches(ctx)
				require.NoError(t, fetches.Err())
				fetches.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
			}
			for i := range n {
				require.Equal(t, 1, seen[strconv.Itoa(i)], "record %d", i)
			}

			// And the log holds nothing more: n records in all.
			ends, err := kadm.NewClient(consumer).ListEndOffsets(ctx, "orders")
			require.NoError(t, err)
			var stored int64
			ends.Each(func(o kadm.ListedOffset) { stored += o.Offset })
			require.Equal(t, int64(n), stored, "each record stored once")
		})
	}
}
