package upload

import (
	"bytes"
	"context"
	"hash/crc32"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless/internal/s3test"
)

func payload(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7 + i>>9)
	}
	return p
}

func TestCRC32C(t *testing.T) {
	data := payload(1 << 20)
	require.Equal(t, crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)), CRC32C(data))
	var buf bytes.Buffer
	c := &Checksummer{W: &buf}
	for i := 0; i < len(data); i += 1000 {
		_, err := c.Write(data[i:min(i+1000, len(data))])
		require.NoError(t, err)
	}
	require.Equal(t, CRC32C(data), c.CRC32C())
	require.Equal(t, data, buf.Bytes())
	o := Options(nil, data)
	require.Equal(t, ContentType, o.ContentType)
	require.True(t, o.DisableContentTypeDetection)
	require.Empty(t, o.ContentMD5, "no MD5")
}

// TestPutS3Plain writes to a real S3 server (versitygw) with no Hook
// registered (this test binary does not import s3fast): the plain s3blob
// path, which works, without the store checking our CRC32C. s3fast's
// TestPutS3 is the same with the fast path.
func TestPutS3Plain(t *testing.T) {
	srv := s3test.Start(t)
	b := srv.Bucket(t, "plain")
	var client *s3.Client
	require.True(t, b.As(&client))
	ctx := t.Context()
	data := payload(100 << 10)
	opts := Options(b, data)
	require.Nil(t, opts.BeforeWrite, "no hook: s3fast is not imported")
	require.NoError(t, Put(ctx, b, "k", data, opts))
	got, err := b.ReadAll(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, data, got)
	head, err := client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("plain"), Key: aws.String("k"), ChecksumMode: types.ChecksumModeEnabled})
	require.NoError(t, err)
	require.Empty(t, aws.ToString(head.ChecksumCRC32C), "no CRC32C of ours")
}

// TestRegister: a registered Hook gives the BeforeWrite of the buckets it
// knows, with the object's CRC32C and size, and none to the others.
func TestRegister(t *testing.T) {
	mine := memblob.OpenBucket(nil)
	defer mine.Close()
	type seen struct {
		crc  uint32
		size int
	}
	var got []seen
	Register(func(bucket *blob.Bucket, crc uint32, size int) func(func(any) bool) error {
		if bucket != mine {
			return nil
		}
		return func(func(any) bool) error {
			got = append(got, seen{crc, size})
			return nil
		}
	})
	data := payload(3000)
	other := memblob.OpenBucket(nil)
	defer other.Close()
	require.Nil(t, Options(other, data).BeforeWrite)
	require.NoError(t, Put(t.Context(), mine, "k", data, nil))
	require.Equal(t, []seen{{CRC32C(data), len(data)}}, got)
}

// TestPutOtherStores: stores other than S3 write the object with its
// content type.
func TestPutOtherStores(t *testing.T) {
	b := memblob.OpenBucket(nil)
	defer b.Close()
	ctx := context.Background()
	data := payload(3000)
	require.NoError(t, Put(ctx, b, "k", data, nil))
	got, err := b.ReadAll(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, data, got)
	a, err := b.Attributes(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, ContentType, a.ContentType)
}
