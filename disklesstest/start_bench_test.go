package disklesstest_test

import (
	"testing"

	"github.com/diskless-go/diskless/disklesstest"
)

// BenchmarkNewBroker measures how long NewBroker takes to open a Broker
// with the defaults (mem://, a temporary data folder). The Brokers are
// closed when the benchmark ends.
func BenchmarkNewBroker(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		disklesstest.NewBroker(b, nil)
	}
}

// BenchmarkNewKafka measures how long NewKafka takes to start a Kafka
// server, a Broker under it, and one topic.
func BenchmarkNewKafka(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		disklesstest.NewKafka(b, &disklesstest.KafkaConfig{Topics: []disklesstest.Topic{{Name: "t", Partitions: 3}}})
	}
}
