package kafkaserver

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless/kafkaerr"
)

// versionRange is the request versions the broker serves for one API key,
// and the lowest it advertises.
type versionRange struct {
	key      int16
	min, max int16
	// advertised is the lower bound ApiVersions advertises: min, or 0
	// for an API whose versions below min Kafka 4 removed (KIP-896).
	advertised int16
}

// supported is what the broker serves, in key order: exactly the keys and
// versions the handlers implement.
//
// The lower bounds are Apache Kafka 4's, which removed the versions older
// than Kafka 2.1 (KIP-896): Produce 3 (RecordBatch v2 only), Fetch 4,
// ListOffsets 1, OffsetCommit 2, OffsetFetch 1, CreateTopics 2,
// DeleteTopics 1, OffsetForLeaderEpoch 2, DescribeConfigs 1,
// DescribeLogDirs 1. ApiVersions still advertises these APIs from version
// 0, and a request of a removed version closes the connection. Kafka 4
// does this for Produce (librdkafka reads whether the broker
// takes gzip, snappy and lz4 from the advertised Produce range, and
// without version 0 in it silently sends uncompressed batches); this
// broker does it for every API whose lower bound was raised, so that a
// client reading features from any advertised range sees what it saw
// before Kafka 4. Clients use the highest version both sides have, never
// the lowest, so none sends a removed version.
//
// The upper bounds are Kafka 4's where the handlers implement every
// version up to them, and stop before versions that need what the facade does not have for the
// others: Produce 13 (topic IDs), Fetch 13 (topic IDs in fetch,
// served by name up to 12), ListOffsets 11 (-6, the earliest offset
// pending upload to tiered storage; up to 10 served, -4 and -5 answered
// as Kafka answers them with no tiered storage), FindCoordinator 4
// (batched keys), InitProducerId 5 and AddPartitionsToTxn 4 (the
// brokers' side of KIP-890). Transactions v2's versions (Produce 12,
// EndTxn 5, TxnOffsetCommit 5) are advertised whatever the cluster's
// transaction.version, as Kafka's ApiVersions does: clients choose v2 by
// the finalized level, and the server refuses a v2 request while that
// level is below 2 (producetxn.go).
var supported = []versionRange{
	{0, 3, 12, 0}, // Produce
	{1, 4, 12, 0}, // Fetch
	{2, 1, 10, 0}, // ListOffsets
	{3, 0, 12, 0}, // Metadata
	{8, 2, 9, 0},  // OffsetCommit
	{9, 1, 9, 0},  // OffsetFetch
	{10, 0, 3, 0}, // FindCoordinator
	{11, 0, 9, 0}, // JoinGroup
	{12, 0, 4, 0}, // Heartbeat
	{13, 0, 5, 0}, // LeaveGroup
	{14, 0, 5, 0}, // SyncGroup
	{15, 0, 6, 0}, // DescribeGroups
	{16, 0, 5, 0}, // ListGroups
	{17, 0, 1, 0}, // SaslHandshake
	{18, 0, 4, 0}, // ApiVersions
	{19, 2, 7, 0}, // CreateTopics
	{20, 1, 6, 0}, // DeleteTopics
	{21, 0, 2, 0}, // DeleteRecords
	{22, 0, 4, 0}, // InitProducerId
	{23, 2, 4, 0}, // OffsetForLeaderEpoch
	{24, 0, 3, 0}, // AddPartitionsToTxn
	{25, 0, 3, 0}, // AddOffsetsToTxn
	{26, 0, 5, 0}, // EndTxn
	{28, 0, 5, 0}, // TxnOffsetCommit
	{29, 0, 3, 0}, // DescribeAcls
	{30, 0, 3, 0}, // CreateAcls
	{31, 0, 3, 0}, // DeleteAcls
	{32, 1, 4, 0}, // DescribeConfigs
	{33, 0, 2, 0}, // AlterConfigs
	{35, 1, 4, 0}, // DescribeLogDirs
	{36, 0, 2, 0}, // SaslAuthenticate
	{37, 0, 3, 0}, // CreatePartitions
	{42, 0, 2, 0}, // DeleteGroups
	{44, 0, 1, 0}, // IncrementalAlterConfigs
	{47, 0, 0, 0}, // OffsetDelete
	{48, 0, 1, 0}, // DescribeClientQuotas
	{49, 0, 1, 0}, // AlterClientQuotas
	{50, 0, 0, 0}, // DescribeUserScramCredentials
	{51, 0, 0, 0}, // AlterUserScramCredentials
	{57, 0, 2, 0}, // UpdateFeatures
	{60, 0, 2, 0}, // DescribeCluster
	{61, 0, 0, 0}, // DescribeProducers
	{65, 0, 0, 0}, // DescribeTransactions
	{66, 0, 1, 0}, // ListTransactions
	{68, 0, 1, 0}, // ConsumerGroupHeartbeat
	{69, 0, 1, 0}, // ConsumerGroupDescribe
}

// versionsOf returns the versions served for key, and whether it is served.
func versionsOf(key int16) (versionRange, bool) {
	i, ok := slices.BinarySearchFunc(supported, key, func(v versionRange, k int16) int { return int(v.key) - int(k) })
	if !ok {
		return versionRange{}, false
	}
	return supported[i], true
}

// serves reports whether the broker serves version of key.
func serves(key, version int16) bool {
	v, ok := versionsOf(key)
	return ok && version >= v.min && version <= v.max
}

// apiVersions answers ApiVersions. A version the broker does not serve
// gets UNSUPPORTED_VERSION and the key list in a version 0 response, as
// Kafka answers (the client then retries with a version from the list).
func apiVersions(req *kmsg.ApiVersionsRequest) *kmsg.ApiVersionsResponse {
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	if !serves(req.Key(), req.Version) {
		resp.SetVersion(0)
		resp.ErrorCode = int16(kafkaerr.UnsupportedVersion)
	}
	for _, v := range supported {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = v.key, v.advertised, v.max
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	return resp
}
