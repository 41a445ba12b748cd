package objstats

import (
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"
	"gocloud.dev/gcerrors"
)

func TestCounts(t *testing.T) {
	ctx := context.Background()
	inner := memblob.OpenBucket(nil)
	defer inner.Close()
	b, c := Wrap(inner)
	defer b.Close()

	require.NoError(t, b.WriteAll(ctx, "a", []byte("hello"), nil))
	require.NoError(t, b.WriteAll(ctx, "b", []byte("xy"), &blob.WriterOptions{IfNotExist: true}))
	err := b.WriteAll(ctx, "b", []byte("z"), &blob.WriterOptions{IfNotExist: true})
	require.Equal(t, gcerrors.FailedPrecondition, gcerrors.Code(err), "error codes pass through")
	got, err := b.ReadAll(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, "hello", string(got))
	r, err := b.NewRangeReader(ctx, "a", 1, 2, nil)
	require.NoError(t, err)
	part, _ := io.ReadAll(r)
	r.Close()
	require.Equal(t, "el", string(part))
	_, err = b.ReadAll(ctx, "missing")
	require.Equal(t, gcerrors.NotFound, gcerrors.Code(err))
	it := b.List(&blob.ListOptions{Prefix: ""})
	n := 0
	for {
		if _, err := it.Next(ctx); err != nil {
			break
		}
		n++
	}
	require.Equal(t, 2, n)
	_, err = b.Attributes(ctx, "a")
	require.NoError(t, err)
	require.NoError(t, b.Delete(ctx, "a"))

	s := c.Snapshot()
	require.Equal(t, int64(3), s.Calls[Put])
	require.Equal(t, int64(7), s.Bytes[Put], "only puts that succeed count their bytes")
	require.Equal(t, int64(3), s.Calls[Get])
	require.Equal(t, int64(7), s.Bytes[Get])
	require.Equal(t, int64(1), s.Calls[List])
	require.Equal(t, int64(1), s.Calls[Head])
	require.Equal(t, int64(1), s.Calls[Delete])
	require.Equal(t, "PUT", Put.String())
}
