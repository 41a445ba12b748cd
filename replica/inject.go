package replica

import (
	"context"

	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

// leaderEpoch is the partition leader epoch written into materialised
// batches: diskless partitions have no leader elections, so it stays 0.
const leaderEpoch = 0

// ObjectReader reads byte ranges of immutable objects: the object cache.
type ObjectReader interface {
	// ReadRange returns exactly length bytes of key from offset, in a
	// slice the caller owns.
	ReadRange(ctx context.Context, key string, offset, length int64) ([]byte, error)
}

// Inject writes into the batches of a run what the coordinator decided for
// them: each batch's base offset (the run's base offset, then each batch's
// after the one before), the partition leader epoch, and on LogAppendTime
// topics the commit time as max timestamp (with the attribute bit and a
// new CRC). data must hold exactly the run's batches; they are changed in
// place. It returns the offset after the run's last batch, which must be
// the run's LastOffset+1.
func Inject(data []byte, loc coordinator.Location, leaderEpoch int32) (int64, error) {
	next := loc.BaseOffset
	it := kbatch.NewBatchIter(data)
	for it.Next() {
		b := it.Batch()
		b.SetBaseOffset(next)
		b.SetPartitionLeaderEpoch(leaderEpoch)
		if loc.LogAppendTime >= 0 {
			// SetLogAppendTime writes a new CRC: check the old one first,
			// or damage to the object would get a valid CRC.
			if err := b.CheckCRC(); err != nil {
				return next, &kafkaerr.Error{Code: kafkaerr.CorruptMessage, Message: "object " + loc.ObjectKey + ": " + err.Error()}
			}
			b.SetLogAppendTime(loc.LogAppendTime)
		}
		next += int64(b.LastOffsetDelta()) + 1
	}
	if err := it.Err(); err != nil {
		return next, err
	}
	if it.Partial() || next != loc.LastOffset+1 {
		return next, &kafkaerr.Error{Code: kafkaerr.CorruptMessage, Message: "object " + loc.ObjectKey + " does not hold the batches the coordinator placed there"}
	}
	return next, nil
}

// ReadRuns reads the runs at locs through objects (a transaction marker's
// batch is built from its Location), injects them (Inject),
// and appends to dst the batches from the one holding offset on, stopping
// before a batch that would take dst past limit bytes (after one batch at
// least). It returns the extended dst.
func ReadRuns(ctx context.Context, objects ObjectReader, locs []coordinator.Location, offset, limit int64, leaderEpoch int32, dst []byte) ([]byte, error) {
	start := len(dst)
	for _, l := range locs {
		var data []byte
		var err error
		if l.Marker != nil {
			data = kbatch.AppendEndTxnMarker(nil, *l.Marker) // no object holds it
		} else if data, err = objects.ReadRange(ctx, l.ObjectKey, l.BytePos, l.ByteSize); err != nil {
			return dst, err
		}
		if _, err := Inject(data, l, leaderEpoch); err != nil {
			return dst, err
		}
		it := kbatch.NewBatchIter(data)
		for it.Next() {
			b := it.Batch()
			if b.LastOffset() < offset {
				continue // wholly before the offset asked for
			}
			if len(dst) > start && int64(len(dst)-start+len(b)) > limit {
				return dst, nil
			}
			dst = append(dst, b...)
		}
	}
	return dst, nil
}
