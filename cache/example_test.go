package cache_test

import (
	"context"
	"fmt"

	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless/cache"
)

func Example() {
	ctx := context.Background()
	bucket := memblob.OpenBucket(nil)
	defer bucket.Close()
	_ = bucket.WriteAll(ctx, "wal/old", []byte("an object uploaded long ago"), nil)

	c, err := cache.New(bucket, &cache.Options{BlockSize: 8})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	// The broker Puts what it has just uploaded: reads of it never GET.
	_ = c.Put(ctx, "wal/new", []byte("the tail of the log"))
	tail, _ := c.ReadRange(ctx, "wal/new", 4, 4)

	// A lagging consumer's read: one GET for the blocks it needs.
	dst := make([]byte, 8)
	_ = c.ReadRangeInto(ctx, "wal/old", 3, dst, &cache.ReadOptions{Class: cache.ClassCold})

	// Past the end.
	_, err = c.ReadRange(ctx, "wal/new", 10, 100)

	st := c.Stats()
	fmt.Printf("%s | %s | %v\n", tail, dst, err)
	fmt.Printf("hits=%d misses=%d gets=%d\n", st.Hits, st.Misses, st.GETs)
	// Output:
	// tail | object u | cache: range past the end of the object: "wal/new" [10, 110) of an object of 19 bytes
	// hits=2 misses=2 gets=1
}
