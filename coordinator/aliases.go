package coordinator

import (
	"time"

	"github.com/diskless-go/diskless/coordinator/lifecycle"

	"github.com/diskless-go/diskless/coordinator/state"
	"github.com/diskless-go/diskless/coordinator/store"
	"github.com/diskless-go/diskless/wal"
	"github.com/google/uuid"
)

// The names below were declared here before the pure core moved to
// package coordinator/state, the SQLite store to coordinator/store and
// the object lifecycle to coordinator/lifecycle;
// they stay so that a user of the coordinator needs only this package.

// AbortedTxn is [store.AbortedTxn].
type AbortedTxn = store.AbortedTxn

// AddPartitionsRequest is [state.AddPartitionsRequest].
type AddPartitionsRequest = state.AddPartitionsRequest

// ClientQuotasState is [store.QuotasState].
type ClientQuotasState = store.QuotasState

// CommitFileRequest is [state.CommitFileRequest].
type CommitFileRequest = state.CommitFileRequest

// CompactRequest is [state.CompactRequest].
type CompactRequest = state.CompactRequest

// CompactedRun is [state.CompactedRun].
type CompactedRun = state.CompactedRun

// CreatePartitionsRequest is [state.CreatePartitionsRequest].
type CreatePartitionsRequest = state.CreatePartitionsRequest

// EarliestTimestamp is [store.EarliestTimestamp].
const EarliestTimestamp = store.EarliestTimestamp

// ErrCorruptEntry is [state.ErrCorruptEntry].
var ErrCorruptEntry = state.ErrCorruptEntry

// ErrRangeChanged is [state.ErrRangeChanged].
var ErrRangeChanged = state.ErrRangeChanged

// FindResult is [store.FindResult].
type FindResult = store.FindResult

// GroupOffset is [state.GroupOffset].
type GroupOffset = state.GroupOffset

// GroupPartition is [state.GroupPartition].
type GroupPartition = state.GroupPartition

// LatestTimestamp is [store.LatestTimestamp].
const LatestTimestamp = store.LatestTimestamp

// ListOffsetsResult is [store.ListOffsetsResult].
type ListOffsetsResult = store.ListOffsetsResult

// Location is [store.Location].
type Location = store.Location

// MaxGroupMetadata is [state.MaxGroupMetadata].
const MaxGroupMetadata = state.MaxGroupMetadata

// MaxGroupOffsetMetadata is [state.MaxGroupOffsetMetadata].
const MaxGroupOffsetMetadata = state.MaxGroupOffsetMetadata

// MaxTimestamp is [store.MaxTimestamp].
const MaxTimestamp = store.MaxTimestamp

// MaxTxnTimeoutMs is [state.MaxTxnTimeoutMs].
const MaxTxnTimeoutMs = state.MaxTxnTimeoutMs

// OwnershipRequest is [state.OwnershipRequest].
type OwnershipRequest = state.OwnershipRequest

// OwnershipResult is [state.OwnershipResult].
type OwnershipResult = state.OwnershipResult

// PartitionTxn is [state.PartitionTxn].
type PartitionTxn = state.PartitionTxn

// RemoteSegment is [state.RemoteSegment].
type RemoteSegment = state.RemoteSegment

// RemoteSegmentKey is [state.RemoteSegmentKey].
func RemoteSegmentKey(prefix string, tp wal.TopicPartition, base int64, id uuid.UUID) string {
	return state.RemoteSegmentKey(prefix, tp, base, id)
}

// RetentionChange is [state.RetentionChange].
type RetentionChange = state.RetentionChange

// ScramDeletion is [state.ScramDeletion].
type ScramDeletion = state.ScramDeletion

// SecurityState is [store.SecurityState].
type SecurityState = store.SecurityState

// ShardOfGroup is [state.ShardOfGroup].
func ShardOfGroup(group string, n int) int { return state.ShardOfGroup(group, n) }

// TopicConfig is [state.TopicConfig].
type TopicConfig = state.TopicConfig

// TopicInfo is [store.TopicInfo].
type TopicInfo = store.TopicInfo

// Transaction is [state.Transaction].
type Transaction = state.Transaction

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

// TxnDead is [state.TxnDead].
const TxnDead = state.TxnDead

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

// TxnOp is [state.TxnOp].
type TxnOp = state.TxnOp

// TxnPrepareAbort is [state.TxnPrepareAbort].
const TxnPrepareAbort = state.TxnPrepareAbort

// TxnPrepareCommit is [state.TxnPrepareCommit].
const TxnPrepareCommit = state.TxnPrepareCommit

// TxnRequest is [state.TxnRequest].
type TxnRequest = state.TxnRequest

// TxnState is [state.TxnState].
type TxnState = state.TxnState

// RemoteSegmentExts is [state.RemoteSegmentExts].
var RemoteSegmentExts = state.RemoteSegmentExts

// ParseRemoteSegmentKey is [state.ParseRemoteSegmentKey].
func ParseRemoteSegmentKey(prefix, fileKey string) (segKey string, id uuid.UUID, t time.Time, ok bool) {
	return state.ParseRemoteSegmentKey(prefix, fileKey)
}

// LifecycleOptions is [lifecycle.Options].
type LifecycleOptions = lifecycle.Options

// LifecycleRun is [lifecycle.Run].
type LifecycleRun = lifecycle.Run

// Peer is [lifecycle.Peer].
type Peer = lifecycle.Peer
