package coordinator

import (
	"context"

	"github.com/diskless-go/diskless/coordinator/state"
)

func newBaseOp(ctx context.Context) state.BaseOp {
	return state.BaseOp{Ctx: ctx, Done: make(chan error, 1)}
}

// --- CreatePartitions ---------------------------------------------------

// --- DeleteTopic --------------------------------------------------------

// --- CommitFile ---------------------------------------------------------

// --- DeleteRecords ------------------------------------------------------

// --- InitProducerID -----------------------------------------------------

// --- EnforceRetention ---------------------------------------------------

// --- ObjectsDeleted -----------------------------------------------------
