package coordinator

import (
	"github.com/diskless-go/diskless/coordinator/state"
	"github.com/diskless-go/diskless/wal"
	"github.com/google/uuid"
)

// AddPartitionsRequest is [state.AddPartitionsRequest].
type AddPartitionsRequest = state.AddPartitionsRequest

// CommitFileRequest is [state.CommitFileRequest].
type CommitFileRequest = state.CommitFileRequest

// CompactedRun is [state.CompactedRun].
type CompactedRun = state.CompactedRun

// CreatePartitionsRequest is [state.CreatePartitionsRequest].
type CreatePartitionsRequest = state.CreatePartitionsRequest

// ErrCorruptEntry is [state.ErrCorruptEntry].
var ErrCorruptEntry = state.ErrCorruptEntry

// ErrRangeChanged is [state.ErrRangeChanged].
var ErrRangeChanged = state.ErrRangeChanged

// MaxGroupMetadata is [state.MaxGroupMetadata].
const MaxGroupMetadata = state.MaxGroupMetadata

// MaxGroupOffsetMetadata is [state.MaxGroupOffsetMetadata].
const MaxGroupOffsetMetadata = state.MaxGroupOffsetMetadata

// MaxTxnTimeoutMs is [state.MaxTxnTimeoutMs].
const MaxTxnTimeoutMs = state.MaxTxnTimeoutMs

// OwnershipRequest is [state.OwnershipRequest].
type OwnershipRequest = state.OwnershipRequest

// OwnershipResult is [state.OwnershipResult].
type OwnershipResult = state.OwnershipResult

// PartitionTxn is [state.PartitionTxn].
type PartitionTxn = state.PartitionTxn

// RemoteSegmentKey is [state.RemoteSegmentKey].
func RemoteSegmentKey(prefix string, tp wal.TopicPartition, base int64, id uuid.UUID) string {
	return state.RemoteSegmentKey(prefix, tp, base, id)
}

// RetentionChange is [state.RetentionChange].
type RetentionChange = state.RetentionChange

// ScramDeletion is [state.ScramDeletion].
type ScramDeletion = state.ScramDeletion

// ShardOfGroup is [state.ShardOfGroup].
func ShardOfGroup(group string, n int) int { return state.ShardOfGroup(group, n) }

// TxnAddGroup is [state.TxnAddGroup].
const TxnAddGroup = state.TxnAddGroup

// TxnAddPartitions is [state.TxnAddPartitions].
const TxnAddPartitions = state.TxnAddPartitions

// TxnCommitOffsets is [state.TxnCommitOffsets].
const TxnCommitOffsets = state.TxnCommitOffsets

// TxnComplete is [state.TxnComplete].
const TxnComplete = state.TxnComplete

// TxnCompleteAbort is [state.TxnCompleteAbort].
const TxnCompleteAbort = state.TxnCompleteAbort

// TxnCompleteCommit is [state.TxnCompleteCommit].
const TxnCompleteCommit = state.TxnCompleteCommit

// TxnEmpty is [state.TxnEmpty].
const TxnEmpty = state.TxnEmpty

// TxnEnd is [state.TxnEnd].
const TxnEnd = state.TxnEnd

// TxnInit is [state.TxnInit].
const TxnInit = state.TxnInit

// TxnOffset is [state.TxnOffset].
type TxnOffset = state.TxnOffset

// TxnOngoing is [state.TxnOngoing].
const TxnOngoing = state.TxnOngoing

// TxnPrepareCommit is [state.TxnPrepareCommit].
const TxnPrepareCommit = state.TxnPrepareCommit

// TxnRequest is [state.TxnRequest].
type TxnRequest = state.TxnRequest

// TxnOp is [state.TxnOp].
type TxnOp = state.TxnOp

// TxnState is [state.TxnState].
type TxnState = state.TxnState

// TxnPrepareAbort is [state.TxnPrepareAbort].
const TxnPrepareAbort = state.TxnPrepareAbort
