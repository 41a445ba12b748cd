package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// source reads the files named on the command line, and the files beside
// them (a segment's indexes).
type source interface {
	// Read returns a file's bytes.
	Read(ctx context.Context, name string) ([]byte, error)
	// Exists reports whether a file is there.
	Exists(ctx context.Context, name string) bool
}

var (
	_ source = dirSource{}
	_ source = (*bucketSource)(nil)
)

// dirSource reads the local file system.
type dirSource struct{}

// Read implements source.
func (dirSource) Read(_ context.Context, name string) ([]byte, error) { return os.ReadFile(name) }

// Exists implements source.
func (dirSource) Exists(_ context.Context, name string) bool {
	_, err := os.Stat(name)
	return err == nil
}

// bucketSource reads keys of a bucket.
type bucketSource struct{ b *blob.Bucket }

func openBucket(ctx context.Context, url string) (*bucketSource, error) {
	b, err := blob.OpenBucket(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("opening bucket %s: %w", url, err)
	}
	return &bucketSource{b}, nil
}

// Read implements source.
func (s *bucketSource) Read(ctx context.Context, key string) ([]byte, error) {
	data, err := s.b.ReadAll(ctx, key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, errors.New("no such key")
	}
	return data, err
}

// Exists implements source.
func (s *bucketSource) Exists(ctx context.Context, key string) bool {
	ok, err := s.b.Exists(ctx, key)
	return err == nil && ok
}

// Close closes the bucket.
func (s *bucketSource) Close() error { return s.b.Close() }
