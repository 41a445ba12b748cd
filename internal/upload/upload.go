// Package upload writes the immutable objects of the library (WAL objects,
// tiered segments) to a bucket once each, with their integrity checked by
// the store rather than hashed twice on the way.
//
// blob.Bucket.WriteAll without ContentMD5 computes the MD5 of the whole
// object, and the blob.Writer it opens hashes every byte again to compare
// (and once more for each wrapping bucket): up to a third of a broker's CPU
// on a bulk produce run, for a check of the bytes against themselves, since
// s3blob (gocloud.dev v0.47) does not send Content-MD5. Instead, Options
// computes the object's CRC32C (hardware speed; WAL batches carry CRC32C
// already) and, through WriterOptions.BeforeWrite, gives it to the S3
// transfer manager's UploadObjectInput: S3 recomputes it over the bytes it
// received and refuses the PUT (400 BadDigest) when they differ, and the
// SDK, finding the checksum header set, computes no checksum itself.
//
// SigV4 signing: over TLS the SDK then signs the request with
// UNSIGNED-PAYLOAD, hashing nothing. Over plain HTTP it insists on the
// SHA-256 of the body, the only protection of the body against tampering
// on the way there; Options keeps that, except for an endpoint on the
// loopback interface (a local S3 server, as in tests and benchmarks), where
// nothing can tamper with the bytes on the way and the SHA-256 is a third
// of the upload's CPU. Other stores ignore the hook: the object is written
// with no extra hashing.
package upload

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	"io"
	"net"
	"net/url"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	tmtypes "github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
)

// ContentType is the content type of the objects Put writes.
const ContentType = "application/octet-stream"

// MaxSinglePut is the largest object whose CRC32C Options hands to S3
// precomputed: the S3 transfer manager (v0.4) sends objects below its
// multipart threshold, 16 MiB by default, in one PutObject. A larger
// object goes in parts, and the SDK computes each part's CRC32C itself
// as it sends it (one pass, no second hash).
const MaxSinglePut = 16<<20 - 1

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC32C returns the CRC32C (Castagnoli) of data.
func CRC32C(data []byte) uint32 { return crc32.Checksum(data, castagnoli) }

// Options returns the options to write data, an immutable object, to
// bucket with its integrity checked by the store (see the package doc): an
// opaque content type, no content-type detection, no MD5, and a
// BeforeWrite that sets the CRC32C of data on an S3 upload. The options
// are for data only: writing other bytes with them makes S3 refuse the
// write.
func Options(bucket *blob.Bucket, data []byte) *blob.WriterOptions {
	return OptionsCRC32C(bucket, CRC32C(data), len(data))
}

// OptionsCRC32C is Options for an object of size bytes whose CRC32C the
// caller already has.
func OptionsCRC32C(bucket *blob.Bucket, crc uint32, size int) *blob.WriterOptions {
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], crc)
	b64 := base64.StdEncoding.EncodeToString(sum[:])
	unsigned := loopbackUploader(bucket)
	return &blob.WriterOptions{
		ContentType:                 ContentType,
		DisableContentTypeDetection: true,
		BeforeWrite: func(as func(any) bool) error {
			var in *transfermanager.UploadObjectInput
			if !as(&in) {
				return nil // not S3
			}
			in.ChecksumAlgorithm = tmtypes.ChecksumAlgorithmCrc32c
			if size <= MaxSinglePut {
				in.ChecksumCRC32C = &b64
			}
			var tm *transfermanager.Client
			if unsigned != nil && as(&tm) {
				*tm = *unsigned
			}
			return nil
		},
	}
}

// loopbackUploaders caches, by S3 client, the transfer manager of
// loopbackUploader.
var loopbackUploaders sync.Map // *s3.Client -> *transfermanager.Client

// loopbackUploader returns, for a bucket on an S3 endpoint on the loopback
// interface, a transfer manager whose PUTs are signed with
// UNSIGNED-PAYLOAD; nil for any other bucket.
func loopbackUploader(bucket *blob.Bucket) *transfermanager.Client {
	var c *s3.Client
	if bucket == nil || !bucket.As(&c) || c == nil || !isLoopback(endpointOf(c)) {
		return nil
	}
	if tm, ok := loopbackUploaders.Load(c); ok {
		return tm.(*transfermanager.Client)
	}
	tm := transfermanager.New(unsignedPayload{c}, func(o *transfermanager.Options) {
		// The checksum is on the input; no default one besides.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
	})
	actual, _ := loopbackUploaders.LoadOrStore(c, tm)
	return actual.(*transfermanager.Client)
}

// endpointOf returns the endpoint URL an S3 client was configured with,
// or "" for the AWS default: BaseEndpoint, or what a custom (v1) endpoint
// resolver gives, as gocloud.dev's "endpoint" URL parameter sets one.
func endpointOf(c *s3.Client) string {
	o := c.Options()
	if o.BaseEndpoint != nil {
		return *o.BaseEndpoint
	}
	if o.EndpointResolver != nil {
		if e, err := o.EndpointResolver.ResolveEndpoint(o.Region, s3.EndpointResolverOptions{}); err == nil {
			return e.URL
		}
	}
	return ""
}

// isLoopback reports whether endpoint, a URL, names a loopback host.
func isLoopback(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// unsignedPayload is an S3 client whose uploads (PutObject, UploadPart)
// are signed with UNSIGNED-PAYLOAD instead of the SHA-256 of their body.
type unsignedPayload struct{ *s3.Client }

func withUnsignedPayload(opts []func(*s3.Options)) []func(*s3.Options) {
	return append(opts, func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)
	})
}

func (c unsignedPayload) PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	return c.Client.PutObject(ctx, in, withUnsignedPayload(opts)...)
}

func (c unsignedPayload) UploadPart(ctx context.Context, in *s3.UploadPartInput, opts ...func(*s3.Options)) (*s3.UploadPartOutput, error) {
	return c.Client.UploadPart(ctx, in, withUnsignedPayload(opts)...)
}

var _ transfermanager.S3APIClient = unsignedPayload{}

// Put writes data under key with opts, nil meaning Options(data): one PUT,
// no MD5. The bucket hands the bytes to its driver as they are
// (Bucket.Upload), so that an S3 upload reads them without going through a
// pipe. A caller that writes the same object more than once (a retry, a
// hedge) computes Options once and passes it each time.
func Put(ctx context.Context, bucket *blob.Bucket, key string, data []byte, opts *blob.WriterOptions) error {
	if opts == nil {
		opts = Options(bucket, data)
	}
	return bucket.Upload(ctx, key, bytes.NewReader(data), opts)
}

// Checksummer passes writes on to W and keeps the CRC32C of the bytes W
// took: an encoder writing an object through it gets the object's CRC32C
// while the bytes are still in the cache, for OptionsCRC32C. It is not
// safe for concurrent use.
type Checksummer struct {
	W   io.Writer
	crc uint32
}

// Write writes p to W.
func (c *Checksummer) Write(p []byte) (int, error) {
	n, err := c.W.Write(p)
	c.crc = crc32.Update(c.crc, castagnoli, p[:n])
	return n, err
}

// CRC32C returns the CRC32C of the bytes written so far.
func (c *Checksummer) CRC32C() uint32 { return c.crc }
