// Package testbatch builds the record batches that tests and benchmarks of
// several packages share.
package testbatch

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/diskless-go/diskless/kbatch"
)

// Timestamp is the first record's timestamp in Text batches.
const Timestamp int64 = 1700000000000

// Text returns a batch of about size bytes (uncompressed) of 1 KiB records
// with 16-byte keys and values of English-like words, compressed with
// codec: compressible as real payloads are. It is the same for the same
// arguments.
func Text(tb testing.TB, codec kbatch.Codec, size int) []byte {
	tb.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"}
	b := kbatch.NewBuilder(codec)
	key := make([]byte, 16)
	value := make([]byte, 0, 1008)
	for i := 0; ; i++ {
		if b.UncompressedSize()+1024+16 > size {
			break
		}
		copy(key, fmt.Sprintf("key-%012d", i))
		value = value[:0]
		for len(value) < 1008 {
			value = append(value, words[rng.IntN(len(words))]...)
			value = append(value, ' ')
		}
		b.Append(Timestamp+int64(i), key, value[:1008])
	}
	out, err := b.Build(nil)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}
