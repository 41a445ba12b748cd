// Package s3fast is the S3 fast path of the library's uploads (WAL
// objects, tiered segments), in a package of its own so that a program
// that does not write to S3 does not link the AWS SDK. A program that
// opens an s3:// bucket imports it for its side effect, as it would
// gocloud's s3blob (which it imports, so s3:// URLs open with it alone):
//
//	import _ "github.com/diskless-go/diskless/s3fast"
//
// Without it, an s3:// bucket (s3blob imported by the program) works
// all the same, through s3blob's plain path: the SDK computes a CRC32 of
// each object as it sends it and, over plain HTTP, the SHA-256 of the
// body for SigV4. With it, each object is sent in one PUT carrying the
// CRC32C the library computed (hardware speed; WAL batches carry CRC32C
// already), which S3 recomputes over the bytes it received, refusing the
// PUT (400 BadDigest) when they differ; finding the checksum header set,
// the SDK computes no checksum itself.
//
// The import registers a hook with the library's uploads (package
// internal/upload), as gocloud's drivers register their URL schemes: the
// fast path has no options, and applies to every bucket whose driver is
// s3blob (found with As), whoever opened it; the others ignore it.
//
// SigV4 signing: over TLS the SDK signs the request with
// UNSIGNED-PAYLOAD, hashing nothing. Over plain HTTP it insists on the
// SHA-256 of the body, the only protection of the body against tampering
// on the way there; the fast path keeps that, except for an endpoint on
// the loopback interface (a local S3 server, as in tests and benchmarks),
// where nothing can tamper with the bytes on the way and the SHA-256 is a
// third of the upload's CPU.
package s3fast

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"net"
	"net/url"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	tmtypes "github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/s3blob" // the s3:// scheme, and the driver the hook serves

	"github.com/diskless-go/diskless/internal/upload"
)

func init() { upload.Register(beforeWrite) }

// maxSinglePut is the largest object whose CRC32C the fast path hands to
// S3 precomputed: the S3 transfer manager (v0.4) sends objects below its
// multipart threshold, 16 MiB by default, in one PutObject. A larger
// object goes in parts, and the SDK computes each part's CRC32C itself as
// it sends it (one pass, no second hash).
const maxSinglePut = 16<<20 - 1

// beforeWrite is the upload.Hook of S3: a BeforeWrite that sets the
// CRC32C of the object on an S3 upload, and for a bucket on a loopback
// endpoint signs it with UNSIGNED-PAYLOAD. Other drivers ignore it.
func beforeWrite(bucket *blob.Bucket, crc uint32, size int) func(as func(any) bool) error {
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], crc)
	b64 := base64.StdEncoding.EncodeToString(sum[:])
	unsigned := loopbackUploader(bucket)
	return func(as func(any) bool) error {
		var in *transfermanager.UploadObjectInput
		if !as(&in) {
			return nil // not S3
		}
		in.ChecksumAlgorithm = tmtypes.ChecksumAlgorithmCrc32c
		if size <= maxSinglePut {
			in.ChecksumCRC32C = &b64
		}
		var tm *transfermanager.Client
		if unsigned != nil && as(&tm) {
			*tm = *unsigned
		}
		return nil
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

var (
	_ transfermanager.S3APIClient = unsignedPayload{}
	_ upload.Hook                 = beforeWrite
)
