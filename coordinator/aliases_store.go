package coordinator

import (
	"github.com/diskless-go/diskless/coordinator/state"
	"github.com/diskless-go/diskless/coordinator/store"
)

// AbortedTxn is [store.AbortedTxn].
type AbortedTxn = store.AbortedTxn

// CompactRequest is [state.CompactRequest].
type CompactRequest = state.CompactRequest

// EarliestTimestamp is [store.EarliestTimestamp].
const EarliestTimestamp = store.EarliestTimestamp

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

// MaxTimestamp is [store.MaxTimestamp].
const MaxTimestamp = store.MaxTimestamp

// RemoteSegment is [state.RemoteSegment].
type RemoteSegment = state.RemoteSegment

// SecurityState is [store.SecurityState].
type SecurityState = store.SecurityState

// TopicConfig is [state.TopicConfig].
type TopicConfig = state.TopicConfig

// TopicInfo is [store.TopicInfo].
type TopicInfo = store.TopicInfo

// Transaction is [state.Transaction].
type Transaction = state.Transaction

// TxnDead is [state.TxnDead].
const TxnDead = state.TxnDead
