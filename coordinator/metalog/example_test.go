package metalog_test

import (
	"context"
	"fmt"
	"os"

	"github.com/diskless-go/diskless/coordinator/metalog"
)

// A metadata log in a local folder: appends are reported once fsynced, in
// order; a reopen finds them.
func Example() {
	dir, err := os.MkdirTemp("", "metalog-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	l, err := metalog.OpenFile(dir, nil)
	if err != nil {
		panic(err)
	}
	first, second := l.Append([]byte("one")), l.Append([]byte("two")) // pipelined
	fmt.Println((<-first).Offset, (<-second).Offset)
	if err := l.Close(); err != nil {
		panic(err)
	}

	l, err = metalog.OpenFile(dir, nil)
	if err != nil {
		panic(err)
	}
	defer l.Close()
	err = l.Read(context.Background(), 0, func(off int64, entry []byte) error {
		fmt.Printf("%d: %s\n", off, entry)
		return nil
	})
	if err != nil {
		panic(err)
	}
	// Output:
	// 0 1
	// 0: one
	// 1: two
}
