package diskless

import (
	"bytes"
	"context"

	"github.com/diskless-go/diskless/internal/upload"
	"github.com/diskless-go/diskless/wal"
)

// uploadObject encodes obj and uploads it under its key, within
// Config.UploadTimeout: one PUT, its integrity checked by the store with
// the object's CRC32C (computed while encoding, package internal/upload).
// It returns the object's bytes and its batches' coordinates.
func (b *Broker) uploadObject(ctx context.Context, obj *wal.Object) ([]byte, []wal.Coordinate, error) {
	var buf bytes.Buffer
	buf.Grow(int(obj.Size()))
	sum := &upload.Checksummer{W: &buf}
	coords, err := obj.Encode(sum, nil)
	if err != nil {
		return nil, nil, err
	}
	data := buf.Bytes()
	opts := upload.OptionsCRC32C(b.bucket, sum.CRC32C(), len(data))
	ctx, cancel := context.WithTimeout(ctx, b.cfg.UploadTimeout)
	defer cancel()
	if err := upload.Put(ctx, b.bucket, obj.Key(), data, opts); err != nil {
		return nil, nil, err
	}
	return data, coords, nil
}
