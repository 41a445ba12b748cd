package upload

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"
	"gocloud.dev/gcerrors"

	"github.com/diskless-go/diskless/internal/objstats"
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

// TestPutS3 writes objects to a real S3 server (versitygw) through the
// bucket wrappers the broker uses: the store keeps the CRC32C that Put
// computed, and a PUT whose bytes do not match it is refused and leaves
// nothing behind.
func TestPutS3(t *testing.T) {
	srv := s3test.Start(t)
	raw := srv.Bucket(t, "upload")
	var client *s3.Client
	require.True(t, raw.As(&client))
	counted, counter := objstats.Wrap(raw) // the root package's wrapper
	t.Cleanup(func() { counted.Close() })
	ctx := context.Background()

	for _, tc := range []struct {
		name string
		b    *blob.Bucket
	}{{"s3", raw}, {"objstats over s3", counted}} {
		t.Run(tc.name, func(t *testing.T) {
			for _, n := range []int{0, 1, 100 << 10, 8 << 20} {
				key := fmt.Sprintf("%s/%d", tc.name, n)
				data := payload(n)
				require.NoError(t, Put(ctx, tc.b, key, data, nil))
				got, err := raw.ReadAll(ctx, key)
				require.NoError(t, err)
				require.Equal(t, data, got)
				if n == 0 {
					continue
				}
				head, err := client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("upload"), Key: aws.String(key), ChecksumMode: types.ChecksumModeEnabled})
				require.NoError(t, err)
				require.Equal(t, b64(CRC32C(data)), aws.ToString(head.ChecksumCRC32C), "the store checked and kept our CRC32C")
			}

			// The options of one object, the bytes of another (one bit
			// flipped on the way): refused, nothing written.
			data := payload(64 << 10)
			bad := bytes.Clone(data)
			bad[1000] ^= 1
			key := tc.name + "/corrupt"
			err := Put(ctx, tc.b, key, bad, Options(tc.b, data))
			require.ErrorContains(t, err, "BadDigest", "the store refuses bytes that do not match the CRC32C")
			_, err = raw.Attributes(ctx, key)
			require.Equal(t, gcerrors.NotFound, gcerrors.Code(err), "a refused PUT leaves nothing")
		})
	}
	require.Positive(t, counter.Snapshot().Calls[objstats.Put])
	require.NotNil(t, loopbackUploader(counted), "a server on 127.0.0.1: PUTs signed with UNSIGNED-PAYLOAD")

	// Above MaxSinglePut the SDK sends parts and computes their CRC32C.
	big := payload(MaxSinglePut + 1<<20)
	require.NoError(t, Put(ctx, counted, "big", big, nil))
	got, err := raw.ReadAll(ctx, "big")
	require.NoError(t, err)
	require.True(t, bytes.Equal(big, got))
}

func TestIsLoopback(t *testing.T) {
	for endpoint, want := range map[string]bool{
		"http://127.0.0.1:9000": true, "http://localhost:1234": true, "http://[::1]:80": true, "https://127.3.4.5": true,
		"http://10.0.0.1:9000": false, "https://s3.us-east-1.amazonaws.com": false, "": false, "::": false,
	} {
		require.Equal(t, want, isLoopback(endpoint), endpoint)
	}
}

// TestPutOtherStores: stores other than S3 ignore the hook.
func TestPutOtherStores(t *testing.T) {
	b := memblob.OpenBucket(nil)
	defer b.Close()
	ctx := context.Background()
	data := payload(3000)
	require.NoError(t, Put(ctx, b, "k", data, nil))
	got, err := b.ReadAll(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, data, got)
	require.Nil(t, loopbackUploader(b))
	a, err := b.Attributes(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, ContentType, a.ContentType)
}

func b64(crc uint32) string {
	var s [4]byte
	binary.BigEndian.PutUint32(s[:], crc)
	return base64.StdEncoding.EncodeToString(s[:])
}
