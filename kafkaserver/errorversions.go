package kafkaserver

import (
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless/kafkaerr"
)

// Errors each client version understands. A Kafka error code is added to
// a response at some version of a request; a client of an older version
// does not know it (kafkajs 2.2 reports PRODUCER_FENCED on
// AddPartitionsToTxn v1 as "Unknown error code 90"). Kafka answers those
// versions with the code they were defined with, and so does this server:
// the handlers write the newest code, and downgradeErrors, one step after
// every handler (answerForVersion, called where every response passes in
// conn.serve, Produce and Fetch too), rewrites it for the request's
// version by the table below.

// everyVersion is the below of a row that applies at every version: a
// code Kafka never puts in that API's response, though the call behind it
// can fail with it.
const everyVersion = math.MaxInt16

// errorDowngrade is one row of the table: a response to a request of API
// key at a version below below carries older where the handler wrote
// newer.
type errorDowngrade struct {
	key          int16
	below        int16
	newer, older kafkaerr.Code
}

// errorDowngrades is the table, in key order. Each row is what Apache
// Kafka 4's broker does (its request handlers, transaction coordinator
// and the comments of its message specifications, which name the version
// that added each code):
//
//   - PRODUCER_FENCED was added to InitProducerId at version 4, and to
//     AddPartitionsToTxn, AddOffsetsToTxn and EndTxn at version 2; older
//     versions get INVALID_PRODUCER_EPOCH, which their clients handle the
//     same way (the producer is fenced). Produce and TxnOffsetCommit never
//     carry it: a write of a fenced epoch is INVALID_PRODUCER_EPOCH there
//     at every version.
//   - TRANSACTION_ABORTABLE was added to Produce at version 11 and to
//     TxnOffsetCommit at version 4; older versions get INVALID_TXN_STATE.
//   - A Produce whose transaction could not be checked with the
//     transaction coordinator (CONCURRENT_TRANSACTIONS, or the coordinator
//     not available, loading, or elsewhere) gets NOT_ENOUGH_REPLICAS at
//     every version: a code producers retry without a metadata refresh,
//     where some would not retry a coordinator's code on Produce.
//   - TxnOffsetCommit below version 2 gets COORDINATOR_NOT_AVAILABLE for
//     COORDINATOR_LOAD_IN_PROGRESS, which producers of that age did not
//     retry.
//   - Fetch below version 6 gets NOT_LEADER_OR_FOLLOWER for
//     KAFKA_STORAGE_ERROR, so that the consumer refreshes its metadata and
//     retries instead of failing.
//   - ListOffsets below version 5 gets LEADER_NOT_AVAILABLE for
//     OFFSET_NOT_AVAILABLE.
//   - Metadata below version 12 cannot ask by topic ID: a topic named by
//     ID only is INVALID_REQUEST there, not UNKNOWN_TOPIC_ID. Below
//     version 6, LISTENER_NOT_FOUND is LEADER_NOT_AVAILABLE.
//   - OffsetCommit below version 9 gets ILLEGAL_GENERATION for a group
//     that does not exist (GROUP_ID_NOT_FOUND from 9), and
//     UNSUPPORTED_VERSION for a member of a consumer group (KIP-848),
//     whose epochs (STALE_MEMBER_EPOCH, FENCED_MEMBER_EPOCH) only version
//     9 on may commit under.
//   - DeleteTopics below version 3 gets INVALID_REQUEST for
//     TOPIC_DELETION_DISABLED.
//
// Transactions v2's versions (Produce 12, EndTxn 5, TxnOffsetCommit 5,
// producetxn.go) add no row: the codes only they carry (the implicit
// add's INVALID_PRODUCER_ID_MAPPING on Produce, UNSUPPORTED_VERSION while
// the cluster's transaction.version is below 2) never reach an older
// version, and the rows above that apply at every version give their
// implicit adds Kafka's codes (PRODUCER_FENCED is INVALID_PRODUCER_EPOCH
// on Produce and TxnOffsetCommit; CONCURRENT_TRANSACTIONS and an
// unavailable coordinator are NOT_ENOUGH_REPLICAS on Produce).
//
// Not rows, because Kafka answers them otherwise than with another code:
// THROTTLING_QUOTA_EXCEEDED (CreateTopics from 6, CreatePartitions from 3,
// DeleteTopics from 5; older versions are served and throttled after,
// and this server does not enforce controller_mutation_rate); codes that
// need a field only newer versions have (UNSTABLE_OFFSET_COMMIT needs
// OffsetFetch's require_stable, MEMBER_ID_REQUIRED JoinGroup 4's member
// ID protocol, FENCED_LEADER_EPOCH a current leader epoch, the handlers
// check the version); codes of versions this server does not serve
// (UNKNOWN_TOPIC_ID of Fetch 13, OFFSET_MOVED_TO_TIERED_STORAGE of
// Fetch 14, TRANSACTION_ABORTABLE of the transaction coordinator's
// versions 4 and 5).
var errorDowngrades = []errorDowngrade{
	{0, everyVersion, kafkaerr.ProducerFenced, kafkaerr.InvalidProducerEpoch}, // Produce
	{0, 11, kafkaerr.TransactionAbortable, kafkaerr.InvalidTxnState},
	{0, everyVersion, kafkaerr.ConcurrentTransactions, kafkaerr.NotEnoughReplicas},
	{0, everyVersion, kafkaerr.CoordinatorNotAvailable, kafkaerr.NotEnoughReplicas},
	{0, everyVersion, kafkaerr.CoordinatorLoadInProgress, kafkaerr.NotEnoughReplicas},
	{0, everyVersion, kafkaerr.NotCoordinator, kafkaerr.NotEnoughReplicas},
	{1, 6, kafkaerr.KafkaStorageError, kafkaerr.NotLeaderOrFollower}, // Fetch
	{2, 5, kafkaerr.OffsetNotAvailable, kafkaerr.LeaderNotAvailable}, // ListOffsets
	{3, 12, kafkaerr.UnknownTopicID, kafkaerr.InvalidRequest},        // Metadata
	{3, 6, kafkaerr.ListenerNotFound, kafkaerr.LeaderNotAvailable},
	{8, 9, kafkaerr.GroupIDNotFound, kafkaerr.IllegalGeneration}, // OffsetCommit
	{8, 9, kafkaerr.StaleMemberEpoch, kafkaerr.UnsupportedVersion},
	{8, 9, kafkaerr.FencedMemberEpoch, kafkaerr.UnsupportedVersion},
	{20, 3, kafkaerr.TopicDeletionDisabled, kafkaerr.InvalidRequest},           // DeleteTopics
	{22, 4, kafkaerr.ProducerFenced, kafkaerr.InvalidProducerEpoch},            // InitProducerId
	{24, 2, kafkaerr.ProducerFenced, kafkaerr.InvalidProducerEpoch},            // AddPartitionsToTxn
	{25, 2, kafkaerr.ProducerFenced, kafkaerr.InvalidProducerEpoch},            // AddOffsetsToTxn
	{26, 2, kafkaerr.ProducerFenced, kafkaerr.InvalidProducerEpoch},            // EndTxn
	{28, everyVersion, kafkaerr.ProducerFenced, kafkaerr.InvalidProducerEpoch}, // TxnOffsetCommit
	{28, 4, kafkaerr.TransactionAbortable, kafkaerr.InvalidTxnState},
	{28, 2, kafkaerr.CoordinatorLoadInProgress, kafkaerr.CoordinatorNotAvailable},
}

// errorCodeWalkers visits every error code field of a response, for each
// API key the table names: walk calls fix on each, with the rows of the
// key and the request's version. Plain loops, no reflection: Produce's
// rows apply at every version, so its walk is on the hot path.
var errorCodeWalkers = map[int16]func(resp kmsg.Response, version int16, rows []errorDowngrade){
	0: func(resp kmsg.Response, v int16, rows []errorDowngrade) {
		r := resp.(*kmsg.ProduceResponse)
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				fix(&r.Topics[i].Partitions[j].ErrorCode, v, rows)
			}
		}
	},
	1: func(resp kmsg.Response, v int16, rows []errorDowngrade) {
		r := resp.(*kmsg.FetchResponse)
		fix(&r.ErrorCode, v, rows)
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				fix(&r.Topics[i].Partitions[j].ErrorCode, v, rows)
			}
		}
	},
	2: func(resp kmsg.Response, v int16, rows []errorDowngrade) {
		r := resp.(*kmsg.ListOffsetsResponse)
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				fix(&r.Topics[i].Partitions[j].ErrorCode, v, rows)
			}
		}
	},
	3: func(resp kmsg.Response, v int16, rows []errorDowngrade) {
		r := resp.(*kmsg.MetadataResponse)
		fix(&r.ErrorCode, v, rows)
		for i := range r.Topics {
			fix(&r.Topics[i].ErrorCode, v, rows)
			for j := range r.Topics[i].Partitions {
				fix(&r.Topics[i].Partitions[j].ErrorCode, v, rows)
			}
		}
	},
	8: func(resp kmsg.Response, v int16, rows []errorDowngrade) {
		r := resp.(*kmsg.OffsetCommitResponse)
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				fix(&r.Topics[i].Partitions[j].ErrorCode, v, rows)
			}
		}
	},
	20: func(resp kmsg.Response, v int16, rows []errorDowngrade) {
		r := resp.(*kmsg.DeleteTopicsResponse)
		for i := range r.Topics {
			fix(&r.Topics[i].ErrorCode, v, rows)
		}
	},
	22: func(resp kmsg.Response, v int16, rows []errorDowngrade) {
		fix(&resp.(*kmsg.InitProducerIDResponse).ErrorCode, v, rows)
	},
	24: func(resp kmsg.Response, v int16, rows []errorDowngrade) {
		r := resp.(*kmsg.AddPartitionsToTxnResponse)
		fix(&r.ErrorCode, v, rows)
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				fix(&r.Topics[i].Partitions[j].ErrorCode, v, rows)
			}
		}
		for i := range r.Transactions {
			for j := range r.Transactions[i].Topics {
				for k := range r.Transactions[i].Topics[j].Partitions {
					fix(&r.Transactions[i].Topics[j].Partitions[k].ErrorCode, v, rows)
				}
			}
		}
	},
	25: func(resp kmsg.Response, v int16, rows []errorDowngrade) {
		fix(&resp.(*kmsg.AddOffsetsToTxnResponse).ErrorCode, v, rows)
	},
	26: func(resp kmsg.Response, v int16, rows []errorDowngrade) {
		fix(&resp.(*kmsg.EndTxnResponse).ErrorCode, v, rows)
	},
	28: func(resp kmsg.Response, v int16, rows []errorDowngrade) {
		r := resp.(*kmsg.TxnOffsetCommitResponse)
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				fix(&r.Topics[i].Partitions[j].ErrorCode, v, rows)
			}
		}
	},
}

// keyDowngrades is the rows of one API key, and the walk of its
// responses.
type keyDowngrades struct {
	rows []errorDowngrade
	// below is the highest below of the rows: versions from it on have
	// nothing to rewrite, and are not walked.
	below int16
	walk  func(resp kmsg.Response, version int16, rows []errorDowngrade)
}

// downgradesByKey is errorDowngrades by API key, built once.
var downgradesByKey = func() map[int16]*keyDowngrades {
	out := map[int16]*keyDowngrades{}
	for _, d := range errorDowngrades {
		k := out[d.key]
		if k == nil {
			walk := errorCodeWalkers[d.key]
			if walk == nil {
				panic("kafkaserver: no error code walker for API key " + kmsg.NameForKey(d.key))
			}
			k = &keyDowngrades{walk: walk}
			out[d.key] = k
		}
		k.rows = append(k.rows, d)
		k.below = max(k.below, d.below)
	}
	return out
}()

// downgradeErrors rewrites the error codes of resp, the response to a
// request of key at version, that the version does not know to the codes
// Kafka answers it with (errorDowngrades). resp may be nil.
func downgradeErrors(key, version int16, resp kmsg.Response) {
	if resp == nil {
		return
	}
	k := downgradesByKey[key]
	if k == nil || version >= k.below {
		return
	}
	k.walk(resp, version, k.rows)
}

// answerForVersion makes resp, the response to req, one req's version
// reads as Kafka answers it: a group's error of an OffsetFetch before
// version 2 put on its partitions (spreadOffsetFetchError), and the codes
// the version does not know rewritten (downgradeErrors). resp may be nil.
func answerForVersion(req kmsg.Request, resp kmsg.Response) {
	if resp == nil {
		return
	}
	if r, ok := req.(*kmsg.OffsetFetchRequest); ok {
		spreadOffsetFetchError(r, resp.(*kmsg.OffsetFetchResponse))
	}
	downgradeErrors(req.Key(), req.GetVersion(), resp)
}

// spreadOffsetFetchError puts the group's error code of resp on each
// partition req asked for when req's version (0 and 1) has no field for
// it, as Kafka answers those versions (offset -1, no metadata): without
// it the client would read no error and no offsets.
func spreadOffsetFetchError(req *kmsg.OffsetFetchRequest, resp *kmsg.OffsetFetchResponse) {
	if req.Version >= 2 || resp.ErrorCode == 0 || len(resp.Topics) > 0 {
		return
	}
	for _, rt := range req.Topics {
		t := kmsg.NewOffsetFetchResponseTopic()
		t.Topic = rt.Topic
		for _, p := range rt.Partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			none := ""
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p, -1, -1, &none, resp.ErrorCode
			t.Partitions = append(t.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, t)
	}
}

// fix rewrites *code by the first of rows that names it at version.
func fix(code *int16, version int16, rows []errorDowngrade) {
	if *code == 0 {
		return
	}
	for _, d := range rows {
		if version < d.below && *code == int16(d.newer) {
			*code = int16(d.older)
			return
		}
	}
}
