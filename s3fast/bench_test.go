package s3fast

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"gocloud.dev/blob"

	"github.com/diskless-go/diskless/internal/objstats"
	"github.com/diskless-go/diskless/internal/s3test"
	"github.com/diskless-go/diskless/internal/upload"
)

// cpuTime is this process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPutS3 uploads 8 MiB objects to a real S3 server on loopback
// (versitygw, plain HTTP) through the broker's counting wrapper, the way
// the broker wrote WAL objects before (WriteAll: MD5 twice, then the
// SDK's CRC32 and SigV4 SHA-256), with Put but the SDK's signing (the
// CRC32C computed once and handed to S3; the SHA-256 of the body for SigV4
// over plain HTTP), and with Put (UNSIGNED-PAYLOAD on loopback).
// cpu-ms/MiB is this process's CPU (the client's, not the server's) per
// MiB sent.
func BenchmarkPutS3(b *testing.B) {
	srv := s3test.Start(b)
	raw := srv.Bucket(b, "bench")
	bucket, _ := objstats.Wrap(raw)
	b.Cleanup(func() { bucket.Close() })
	ctx := context.Background()
	data := payload(8 << 20)
	for _, v := range []struct {
		name string
		put  func(key string) error
	}{
		{"WriteAll", func(key string) error {
			return bucket.WriteAll(ctx, key, data, &blob.WriterOptions{ContentType: upload.ContentType, DisableContentTypeDetection: true})
		}},
		{"Put-sigv4-sha256", func(key string) error {
			// No bucket for OptionsCRC32C: the SDK's own signing, which
			// hashes the body over plain HTTP.
			return upload.Put(ctx, bucket, key, data, upload.OptionsCRC32C(nil, upload.CRC32C(data), len(data)))
		}},
		{"Put", func(key string) error { return upload.Put(ctx, bucket, key, data, nil) }},
	} {
		b.Run(v.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			start := cpuTime()
			i := 0
			for b.Loop() {
				if err := v.put(fmt.Sprintf("%s/%d", v.name, i%4)); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(cpuTime()-start)/1e6/float64(i)/8, "cpu-ms/MiB")
		})
	}
}
