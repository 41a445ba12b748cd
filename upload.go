package diskless

import (
	"context"
	"errors"
	"fmt"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/diskless-go/diskless/internal/hedge"
	"github.com/diskless-go/diskless/internal/upload"
	"github.com/diskless-go/diskless/wal"
)

// encodeObject encodes obj: its bytes and its batches' coordinates.
//
// The object is encoded with AppendEncode, which copies each batch once
// in the order the batches came (the order they lie in memory) to its
// place in the object: cheaper than Encode's copies in object order into
// a buffer, which jump about the heap when the object has many
// partitions.
func (b *Broker) encodeObject(obj *wal.Object) ([]byte, []wal.Coordinate) {
	return obj.AppendEncode(make([]byte, 0, obj.Size()), nil)
}

// uploadObject uploads an encoded object under its key, within
// Config.UploadTimeout: its integrity checked by the store with the
// object's CRC32C (package internal/upload; one pass over the bytes, at
// hardware speed), and hedged (see put). With the parallel commit it is a
// conditional create (docs/parallel-commit.md): a key taken by a new
// leader's tombstone is never overwritten.
func (b *Broker) uploadObject(ctx context.Context, obj *wal.Object, data []byte) error {
	opts := upload.OptionsCRC32C(b.bucket, upload.CRC32C(data), len(data))
	opts.IfNotExist = b.parallel
	ctx, cancel := context.WithTimeout(ctx, b.cfg.UploadTimeout)
	defer cancel()
	return b.put(ctx, obj.Key(), data, opts)
}

// errKeyTaken fails a conditional PUT that found another object at its
// key: a tombstone.
var errKeyTaken = errors.New("diskless: the WAL object's key holds another object (a new leader's tombstone): the object was not written")

// put writes an immutable object. When the PUT has not finished after the
// hedge delay it sends a second PUT of the same key and bytes, takes the
// first to succeed and cancels the other (which, if it lands anyway,
// writes the same bytes: one object either way). A first PUT that fails
// before the delay fails the upload, as without hedging; once hedged, the
// upload fails only if both do. The PUT that lost goes on in the
// background until its cancellation ends it; Close waits for it.
//
// A conditional PUT (opts.IfNotExist) that finds its key taken reads the
// size there: its twin's or an earlier attempt's bytes (the same size) are
// success; anything else (an empty tombstone) is errKeyTaken.
func (b *Broker) put(ctx context.Context, key string, data []byte, opts *blob.WriterOptions) error {
	r := b.hedge.Do(ctx, &b.attempts, func(ctx context.Context) error {
		err := upload.Put(ctx, b.bucket, key, data, opts)
		if err == nil || !opts.IfNotExist || gcerrors.Code(err) != gcerrors.FailedPrecondition {
			return err
		}
		a, aerr := b.bucket.Attributes(ctx, key)
		switch {
		case aerr != nil:
			return fmt.Errorf("%w (and reading what is at the key: %w)", err, aerr)
		case a.Size != int64(len(data)):
			return errKeyTaken
		}
		return nil
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
