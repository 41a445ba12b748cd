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
// already) and hands it to the Hooks registered for the stores that can
// check it: package s3fast registers S3's, which gives it to the S3
// transfer manager through WriterOptions.BeforeWrite, so that S3 refuses
// bytes that do not match it. This package imports no store's SDK: a
// program that does not import s3fast writes to S3 through s3blob's plain
// path, and to every other store with no extra hashing.
package upload

import (
	"bytes"
	"context"
	"hash/crc32"
	"io"
	"sync"

	"gocloud.dev/blob"
)

// ContentType is the content type of the objects Put writes.
const ContentType = "application/octet-stream"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC32C returns the CRC32C (Castagnoli) of data.
func CRC32C(data []byte) uint32 { return crc32.Checksum(data, castagnoli) }

// A Hook hands the CRC32C of an object, size bytes long, to the store it
// is written to: it returns the WriterOptions.BeforeWrite of the object's
// upload to bucket (which may be nil: a bucket not known), or nil when it
// has nothing to do there. The BeforeWrite it returns must do nothing on
// a driver that is not its store's (as finds none of its types).
type Hook func(bucket *blob.Bucket, crc uint32, size int) (beforeWrite func(as func(any) bool) error)

// hooks are the registered Hooks (Register).
var hooks struct {
	sync.RWMutex
	list []Hook
}

// Register adds h to the Hooks of every later Options. Package s3fast
// calls it from its init, as gocloud's drivers register their URL
// schemes. It is safe for concurrent use.
func Register(h Hook) {
	hooks.Lock()
	defer hooks.Unlock()
	hooks.list = append(hooks.list, h)
}

// Options returns the options to write data, an immutable object, to
// bucket with its integrity checked by the store where a Hook can (see
// the package doc): an opaque content type, no content-type detection, no
// MD5, and the BeforeWrite of the registered Hooks. The options are for
// data only: writing other bytes with them makes such a store refuse the
// write.
func Options(bucket *blob.Bucket, data []byte) *blob.WriterOptions {
	return OptionsCRC32C(bucket, CRC32C(data), len(data))
}

// OptionsCRC32C is Options for an object of size bytes whose CRC32C the
// caller already has.
func OptionsCRC32C(bucket *blob.Bucket, crc uint32, size int) *blob.WriterOptions {
	opts := &blob.WriterOptions{ContentType: ContentType, DisableContentTypeDetection: true}
	hooks.RLock()
	var before []func(func(any) bool) error
	for _, h := range hooks.list {
		if f := h(bucket, crc, size); f != nil {
			before = append(before, f)
		}
	}
	hooks.RUnlock()
	switch len(before) {
	case 0:
	case 1:
		opts.BeforeWrite = before[0]
	default:
		opts.BeforeWrite = func(as func(any) bool) error {
			for _, f := range before {
				if err := f(as); err != nil {
					return err
				}
			}
			return nil
		}
	}
	return opts
}

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
