package membudget

import (
	"context"
	"testing"

	"golang.org/x/sync/semaphore"
)

// BenchmarkBudget sets Budget beside golang.org/x/sync/semaphore.Weighted,
// the reference, acquiring and releasing 1 KiB of a 1 MiB budget alone
// (uncontended) and from every P at once (contended).
func BenchmarkBudget(b *testing.B) {
	const size, n = 1 << 20, 1 << 10
	ctx := context.Background()
	type sem interface {
		Acquire(context.Context, int64) error
		Release(int64)
	}
	for _, c := range []struct {
		name string
		new  func() sem
	}{
		{"membudget", func() sem { return New(size) }},
		{"semaphore", func() sem { return semaphore.NewWeighted(size) }},
	} {
		b.Run(c.name+"/uncontended", func(b *testing.B) {
			s := c.new()
			b.ReportAllocs()
			for b.Loop() {
				if err := s.Acquire(ctx, n); err != nil {
					b.Fatal(err)
				}
				s.Release(n)
			}
		})
		b.Run(c.name+"/contended", func(b *testing.B) {
			s := c.new()
			b.ReportAllocs()
			b.SetParallelism(64) // 64 takers a P; 1 MiB holds 1024 of them
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := s.Acquire(ctx, n); err != nil {
						b.Fatal(err)
					}
					s.Release(n)
				}
			})
		})
		b.Run(c.name+"/saturated", func(b *testing.B) {
			s := c.new()
			b.ReportAllocs()
			b.SetParallelism(64) // each takes a quarter: takers queue
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := s.Acquire(ctx, size/4); err != nil {
						b.Fatal(err)
					}
					s.Release(size / 4)
				}
			})
		})
	}
}
