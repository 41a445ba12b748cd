package main

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// versionRange is the request versions the broker serves for one API key.
type versionRange struct {
	key      int16
	min, max int16
}

// supported is what ApiVersions advertises: exactly the keys and versions
// the handlers serve, in key order. The lower bounds are those of Apache
// Kafka 4 where it dropped old versions (Produce 3: RecordBatch v2 only;
// Fetch 4; CreateTopics 2), else the first version whose semantics the
// handlers implement. The upper bounds stop before versions that need what
// the facade does not have: Produce 12 (transactions v2), Fetch 13
// (topic IDs in fetch, served by name up to 12), ListOffsets 8 (tiered
// offset specs), OffsetCommit 9 and OffsetFetch 8 (the new group protocol
// and batched groups), FindCoordinator 4 (batched keys), InitProducerId 5
// (transactions v2). Every client negotiates the highest version both
// sides have, so franz-go, librdkafka and the Java client all use flexible
// versions of every API.
var supported = []versionRange{
	{0, 3, 11}, // Produce
	{1, 4, 12}, // Fetch
	{2, 1, 7},  // ListOffsets
	{3, 1, 12}, // Metadata
	{8, 2, 8},  // OffsetCommit
	{9, 1, 7},  // OffsetFetch
	{10, 0, 3}, // FindCoordinator
	{11, 0, 9}, // JoinGroup
	{12, 0, 4}, // Heartbeat
	{13, 0, 5}, // LeaveGroup
	{14, 0, 5}, // SyncGroup
	{18, 0, 4}, // ApiVersions
	{19, 2, 7}, // CreateTopics
	{20, 1, 6}, // DeleteTopics
	{21, 0, 2}, // DeleteRecords
	{22, 0, 4}, // InitProducerId
	{32, 1, 4}, // DescribeConfigs
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
		resp.ErrorCode = kerr.UnsupportedVersion.Code
	}
	for _, v := range supported {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = v.key, v.min, v.max
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	return resp
}
