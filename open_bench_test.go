package diskless

import (
	"context"
	"testing"
)

// BenchmarkOpenClose opens and closes a broker over an in-memory bucket,
// as a test harness does for each test.
func BenchmarkOpenClose(b *testing.B) {
	for b.Loop() {
		br, err := Open(context.Background(), nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := br.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
