package coordinator

// Feature levels.
//
// What the brokers of a cluster write where every broker reads it (the
// records of the shards' metadata logs) cannot be negotiated call by call
// as the calls between brokers are (peer_versions.go): a leader writes a
// record every follower must read. Such changes are gated by a feature
// level, as Kafka gates them by metadata.version (its features, KIP-584):
// each broker supports a range of levels of each feature and advertises
// the highest with its membership; the cluster has one finalized level
// of each, raised (UpdateFeatures) only when every live broker supports
// it, never lowered, and a broker that does not support the finalized
// level is refused when it joins. A new kind of record is written only
// once the finalized level that introduced it is reached; until then
// the call that would write it is refused with UNSUPPORTED_VERSION.
//
// A new cluster starts at the highest level every broker there supports;
// a cluster upgraded from a release before features starts at level 1
// and is raised with UpdateFeatures (kafka-features.sh upgrade, or
// kadm's UpdateFeatures) once every broker runs the new release.

// FeatureDisklessVersion is the feature that gates the records of the
// coordinator's metadata logs. Its levels:
//
//	1  the records of the releases before feature levels
//	2  client quotas: the records of AlterClientQuotas
const FeatureDisklessVersion = "diskless.version"

// FeatureTransactionVersion is Kafka's feature of the same name
// (TransactionVersion): the version of the transaction protocol clients
// may use. Clients read its finalized level from ApiVersions and use
// transactions v2 only once it is 2 or more. Its levels:
//
//	1  transactions v1: AddPartitionsToTxn and AddOffsetsToTxn add to a
//	   transaction, EndTxn keeps the producer's epoch (Kafka's levels 0
//	   and 1, which differ only in the format of Kafka's own log)
//	2  transactions v2 (KIP-890 part 2): Produce 12 and TxnOffsetCommit 5
//	   add their partition or group themselves, EndTxn 5 bumps the epoch
//	   and its markers carry the new one (state/txn_v2.go)
//
// Level 2 changes what the records of a transaction's state mean (the
// fields of a v2 end, state.Transaction.V2), so it is gated as every
// such level: until the cluster's finalized level is 2 the broker
// refuses the requests of v2 (EndTxn 5, a transactional Produce 12,
// TxnOffsetCommit 5) with UNSUPPORTED_VERSION, and writes none of its
// records. Kafka serves them by version alone; clients never send them
// before the level is finalized, so the difference shows only to a
// client that ignores the finalized level. Clients of v1 and of v2 may
// use one cluster at once: a request is v2 by its version, and a v1
// EndTxn never bumps the epoch.
const FeatureTransactionVersion = "transaction.version"

// TxnV2Level is the level of FeatureTransactionVersion that brings
// transactions v2.
const TxnV2Level = 2

// features are the highest levels of each feature this release
// supports; every feature's lowest level is 1.
var features = map[string]int{
	FeatureDisklessVersion:    2,
	FeatureTransactionVersion: TxnV2Level,
}

// Features returns the highest level of each feature this release
// supports, lowered to limit's (a feature limit names at 0 or less, or
// does not know, is left as it is). A broker advertises it with its
// membership (cluster.Member.Features).
func Features(limit map[string]int) map[string]int { return lowered(features, limit) }

// CheckFeatures says whether limit names only features this release
// supports, at levels it supports.
func CheckFeatures(limit map[string]int) error {
	return checkLevels(features, limit, "Features", "a feature")
}
