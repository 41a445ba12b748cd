package diskless

import (
	"context"

	"gocloud.dev/blob"

	"github.com/diskless-go/diskless/internal/hedge"
	"github.com/diskless-go/diskless/internal/upload"
	"github.com/diskless-go/diskless/wal"
)

// uploadObject encodes obj and uploads it under its key, within
// Config.UploadTimeout: its integrity checked by the store with the
// object's CRC32C (package internal/upload), and hedged (see put). It
// returns the object's bytes and its batches' coordinates.
//
// The object is encoded with AppendEncode, which copies each batch once
// in the order the batches came (the order they lie in memory) to its
// place in the object: cheaper than Encode's copies in object order into
// a buffer, which jump about the heap when the object has many
// partitions. The CRC32C is one pass over the result (hardware speed).
func (b *Broker) uploadObject(ctx context.Context, obj *wal.Object) ([]byte, []wal.Coordinate, error) {
	data, coords := obj.AppendEncode(make([]byte, 0, obj.Size()), nil)
	opts := upload.OptionsCRC32C(b.bucket, upload.CRC32C(data), len(data))
	ctx, cancel := context.WithTimeout(ctx, b.cfg.UploadTimeout)
	defer cancel()
	if err := b.put(ctx, obj.Key(), data, opts); err != nil {
		return nil, nil, err
	}
	return data, coords, nil
}

// put writes an immutable object. When the PUT has not finished after the
// hedge delay it sends a second PUT of the same key and bytes, takes the
// first to succeed and cancels the other (which, if it lands anyway,
// writes the same bytes: one object either way). A first PUT that fails
// before the delay fails the upload, as without hedging; once hedged, the
// upload fails only if both do. The PUT that lost goes on in the
// background until its cancellation ends it; Close waits for it.
func (b *Broker) put(ctx context.Context, key string, data []byte, opts *blob.WriterOptions) error {
	r := b.hedge.Do(ctx, &b.attempts, func(ctx context.Context) error {
		return upload.Put(ctx, b.bucket, key, data, opts)
	})
	if r.Hedged {
		b.stats.hedges.Add(1)
	}
	if r.HedgeWon {
		b.stats.hedgeWins.Add(1)
	}
	return r.Err()
}

// hedgeSamples is how many recent PUT durations the hedge delay is the
// quantile of, and hedgeMinSamples how many it needs before it is used
// (until then no PUT is hedged).
const (
	hedgeSamples    = 128
	hedgeMinSamples = 16
)

// newHedger returns what learns the hedge delay of WAL uploads from their
// PUTs' durations (package internal/hedge).
func newHedger(c *Config) *hedge.Hedger {
	return hedge.New(hedge.Options{MinDelay: c.HedgeMinDelay, MaxDelay: c.HedgeMaxDelay, Quantile: c.HedgeQuantile, Samples: hedgeSamples, MinSamples: hedgeMinSamples, Clock: c.Clock})
}
