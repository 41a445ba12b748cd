package kafkaserver_test

import (
	"context"
	"fmt"
	"log"
	"net"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/kafkaserver"
)

// A Kafka server over a Broker on a mem:// bucket, on a free port of
// 127.0.0.1; franz-go produces a record to it, auto-creating the topic,
// and reads it back.
func ExampleNew() {
	ctx := context.Background()
	b, err := diskless.Open(ctx, &diskless.Config{BucketURL: "mem://"})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close() // after the server: it commits what is buffered
	srv, err := kafkaserver.New(ctx, b, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go srv.Serve(ln) //nolint:errcheck // nil after Close

	cl, err := kgo.NewClient(kgo.SeedBrokers(ln.Addr().String()), kgo.AllowAutoTopicCreation(),
		kgo.ConsumeTopics("greetings"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "greetings", Value: []byte("hello, diskless")}).FirstErr(); err != nil {
		log.Fatal(err)
	}
	fetches := cl.PollFetches(ctx)
	if err := fetches.Err(); err != nil {
		log.Fatal(err)
	}
	fetches.EachRecord(func(r *kgo.Record) {
		fmt.Printf("%s-%d@%d: %s\n", r.Topic, r.Partition, r.Offset, r.Value)
	})
	// Output: greetings-0@0: hello, diskless
}
