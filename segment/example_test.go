package segment_test

import (
	"context"
	"fmt"
	"os"

	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/segment"
)

// A partition's classic Kafka log in a folder: append batches that carry
// their offsets, read from an offset as a fetch does, look up by time.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "segment-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	log, err := segment.OpenLog(ctx, dir, nil) // Kafka's defaults: 1 GiB segments, ...
	if err != nil {
		panic(err)
	}
	defer log.Close()

	for i := range int64(3) {
		b := kbatch.NewBuilder(kbatch.CodecNone)
		b.Append(1_700_000_000_000+i*1000, []byte("key"), []byte(fmt.Sprintf("value-%d", i)))
		b.SetBaseOffset(log.LatestOffset())
		batch, err := b.Batch()
		if err != nil {
			panic(err)
		}
		if _, err := log.Append(ctx, batch); err != nil {
			panic(err)
		}
	}
	res, err := log.Read(ctx, 1, 1<<20)
	if err != nil {
		panic(err)
	}
	fmt.Println("read from offset 1 up to", kbatch.LastOffset(res.Records))
	found, ok, err := log.OffsetForTimestamp(ctx, 1_700_000_001_500)
	if err != nil {
		panic(err)
	}
	fmt.Println("first record at or after 1.5 s:", found.Offset, ok)
	fmt.Println("log end offset:", log.LatestOffset())
	// Output:
	// read from offset 1 up to 2
	// first record at or after 1.5 s: 2 true
	// log end offset: 3
}
