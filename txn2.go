package diskless

import (
	"context"

	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/kafkaerr"
)

// Transactions v2 (KIP-890 part 2): EndTxn bumps the producer's epoch,
// and Produce and TxnOffsetCommit add their partition or group to the
// transaction themselves (a front end calls AddTxnPartitions or
// AddTxnOffsets for them). It is gated by the cluster's finalized level
// of the feature transaction.version (coordinator/features.go): the
// front end calls CheckTxnV2 before serving a request of v2, and
// EndTxnV2 checks it itself.

// CheckTxnV2 says whether the cluster's finalized transaction.version
// allows transactions v2: nil if so, else UNSUPPORTED_VERSION. A
// transaction.version never finalized (a cluster upgraded from a release
// before it) is level 1.
func (b *Broker) CheckTxnV2() error {
	if level := b.Features().Finalized[coordinator.FeatureTransactionVersion]; level < coordinator.TxnV2Level {
		return kafkaerr.New(kafkaerr.UnsupportedVersion, "transactions v2 need the cluster's feature %s at level %d, and it is finalized at %d: raise it with UpdateFeatures once every broker supports it",
			coordinator.FeatureTransactionVersion, coordinator.TxnV2Level, max(level, 1))
	}
	return nil
}

// EndTxnV2 is EndTxn of transactions v2 (Kafka's EndTxn version 5): it
// commits or aborts the producer's transaction under the next epoch,
// whose markers fence a late write of the old epoch, and returns the
// producer ID and epoch the producer goes on with (a new producer ID at
// epoch 0 once the epoch is exhausted). A retry of an end done, at the
// epoch before, gets the same answer; an abort with no transaction
// ongoing bumps the epoch. UNSUPPORTED_VERSION while CheckTxnV2 refuses.
func (b *Broker) EndTxnV2(ctx context.Context, txnID string, producerID int64, epoch int16, commit bool) (int64, int16, error) {
	if b.closed.Load() {
		return -1, -1, ErrClosed
	}
	if err := b.CheckTxnV2(); err != nil {
		return -1, -1, err
	}
	id, e, err := b.coord.EndTxnV2(ctx, txnID, producerID, epoch, commit)
	return id, e, b.closedErr(err)
}
