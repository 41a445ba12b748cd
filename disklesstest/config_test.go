package disklesstest_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/disklesstest"
	"github.com/diskless-go/diskless/faultbucket"
	"github.com/diskless-go/diskless/internal/kafkatest"
	"github.com/diskless-go/diskless/kafkaserver"
)

// TestKafkaConfig: the Broker's ID and rack are the server's node's, the
// Server config is the server's, and the configs given are not changed.
func TestKafkaConfig(t *testing.T) {
	bc := &diskless.Config{BrokerID: 5, Rack: "az-b"}
	sc := &kafkaserver.Config{DefaultPartitions: 4}
	k := disklesstest.NewKafka(t, &disklesstest.KafkaConfig{Broker: bc, Server: sc})
	require.Equal(t, diskless.Config{BrokerID: 5, Rack: "az-b"}, *bc)
	require.Equal(t, kafkaserver.Config{DefaultPartitions: 4}, *sc)

	cl := kafkatest.Client(t, k.Addr(), kgo.AllowAutoTopicCreation())
	require.NoError(t, cl.ProduceSync(t.Context(), &kgo.Record{Topic: "auto", Value: []byte("v")}).FirstErr())
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("auto")
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(t.Context(), cl)
	require.NoError(t, err)
	require.Len(t, resp.Brokers, 1)
	require.Equal(t, int32(5), resp.Brokers[0].NodeID)
	require.Equal(t, "az-b", *resp.Brokers[0].Rack)
	require.Len(t, resp.Topics[0].Partitions, 4, "Server.DefaultPartitions")
}

// TestNewBroker: a Broker with the defaults stores and reads records.
func TestNewBroker(t *testing.T) {
	b := disklesstest.NewBroker(t, nil)
	_, err := b.CreateTopic(t.Context(), "t", diskless.TopicConfig{Partitions: 1})
	require.NoError(t, err)
	ts, err := b.DescribeTopics(t.Context())
	require.NoError(t, err)
	require.Len(t, ts, 1)
	require.Equal(t, "t", ts[0].Name)
}

// TestFaults: KafkaConfig.Faults puts a faultbucket under the Broker,
// controlled through Kafka.Faults (an outage holds a produce back until
// it ends); FaultBucket gives one for NewBroker; without Faults there is
// none.
func TestFaults(t *testing.T) {
	require.Nil(t, disklesstest.NewKafka(t, nil).Faults())

	k := disklesstest.NewKafka(t, &disklesstest.KafkaConfig{
		Faults: &faultbucket.Options{Profile: faultbucket.S3Express()},
		Topics: []disklesstest.Topic{{Name: "t"}},
	})
	f := k.Faults()
	require.NotNil(t, f)
	require.Equal(t, "s3-express", f.Profile().Name)
	cl := kafkatest.Client(t, k.Addr())
	require.NoError(t, cl.ProduceSync(t.Context(), &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr())
	require.Positive(t, f.Stats().Calls[faultbucket.Put], "the Broker stores through it")

	bucket, bf := disklesstest.FaultBucket(t, nil)
	b := disklesstest.NewBroker(t, &diskless.Config{Bucket: bucket})
	_, err := b.CreateTopic(t.Context(), "t", diskless.TopicConfig{Partitions: 1})
	require.NoError(t, err)
	require.Positive(t, bf.Stats().Calls[faultbucket.Put], "the Broker stores through it")
}
