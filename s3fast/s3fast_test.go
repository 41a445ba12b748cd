package s3fast

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/diskless-go/diskless/internal/objstats"
	"github.com/diskless-go/diskless/internal/s3test"
	"github.com/diskless-go/diskless/internal/upload"
)

func payload(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7 + i>>9)
	}
	return p
}

// TestPutS3 writes objects to a real S3 server (versitygw) with
// upload.Put, this package imported, through the bucket wrappers the
// broker uses: the fast path applies. The store keeps the CRC32C that Put
// computed, and a PUT whose bytes do not match it is refused and leaves
// nothing behind (without the fast path the SDK would checksum the bytes
// it sends, and store them). upload's TestPutS3Plain is the same bucket
// without this package.
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
			require.NotNil(t, upload.Options(tc.b, nil).BeforeWrite, "the hook is registered")
			for _, n := range []int{0, 1, 100 << 10, 8 << 20} {
				key := fmt.Sprintf("%s/%d", tc.name, n)
				data := payload(n)
				require.NoError(t, upload.Put(ctx, tc.b, key, data, nil))
				got, err := raw.ReadAll(ctx, key)
				require.NoError(t, err)
				require.Equal(t, data, got)
				if n == 0 {
					continue
				}
				head, err := client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("upload"), Key: aws.String(key), ChecksumMode: types.ChecksumModeEnabled})
				require.NoError(t, err)
				require.Equal(t, b64(upload.CRC32C(data)), aws.ToString(head.ChecksumCRC32C), "the store checked and kept our CRC32C")
			}

			// The options of one object, the bytes of another (one bit
			// flipped on the way): refused, nothing written.
			data := payload(64 << 10)
			bad := bytes.Clone(data)
			bad[1000] ^= 1
			key := tc.name + "/corrupt"
			err := upload.Put(ctx, tc.b, key, bad, upload.Options(tc.b, data))
			require.ErrorContains(t, err, "BadDigest", "the store refuses bytes that do not match the CRC32C")
			_, err = raw.Attributes(ctx, key)
			require.Equal(t, gcerrors.NotFound, gcerrors.Code(err), "a refused PUT leaves nothing")
		})
	}
	require.Positive(t, counter.Snapshot().Calls[objstats.Put])
	require.NotNil(t, loopbackUploader(counted), "a server on 127.0.0.1: PUTs signed with UNSIGNED-PAYLOAD")

	// Above maxSinglePut the SDK sends parts and computes their CRC32C.
	big := payload(maxSinglePut + 1<<20)
	require.NoError(t, upload.Put(ctx, counted, "big", big, nil))
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
	require.Nil(t, loopbackUploader(nil))
}

func b64(crc uint32) string {
	var s [4]byte
	binary.BigEndian.PutUint32(s[:], crc)
	return base64.StdEncoding.EncodeToString(s[:])
}
