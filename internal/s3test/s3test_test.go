package s3test

import (
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// TestServer checks what the project relies on: writes, range reads,
// listing, deletes and conditional writes (IfNotExist answers a
// precondition failure).
func TestServer(t *testing.T) {
	s := Start(t)
	b := s.Bucket(t, "test")
	ctx := context.Background()
	require.NoError(t, b.WriteAll(ctx, "a/1", []byte("hello world"), nil))
	got, err := b.ReadAll(ctx, "a/1")
	require.NoError(t, err)
	require.Equal(t, "hello world", string(got))

	r, err := b.NewRangeReader(ctx, "a/1", 6, 5, nil)
	require.NoError(t, err)
	buf := make([]byte, 5)
	_, err = io.ReadFull(r, buf)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	require.Equal(t, "world", string(buf))

	err = b.WriteAll(ctx, "a/1", []byte("again"), &blob.WriterOptions{IfNotExist: true})
	require.Error(t, err)
	require.Equal(t, gcerrors.FailedPrecondition, gcerrors.Code(err))
	require.NoError(t, b.WriteAll(ctx, "a/2", []byte("x"), &blob.WriterOptions{IfNotExist: true}))

	it := b.List(&blob.ListOptions{Prefix: "a/"})
	var keys []string
	for {
		o, err := it.Next(ctx)
		if err != nil {
			break
		}
		keys = append(keys, o.Key)
	}
	require.Equal(t, []string{"a/1", "a/2"}, keys)
	require.NoError(t, b.Delete(ctx, "a/1"))
	_, err = b.ReadAll(ctx, "a/1")
	require.Equal(t, gcerrors.NotFound, gcerrors.Code(err))
}
