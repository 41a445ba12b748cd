package segment

// Kafka error codes that the coordinator and the broker return, beside the
// ones the batch codec returns (errors.go). The values and names are
// Kafka's (clients/.../common/protocol/Errors.java).
const (
	NotLeaderOrFollower      ErrorCode = 6
	RequestTimedOut          ErrorCode = 7
	UnknownTopicOrPartition  ErrorCode = 3
	TopicAlreadyExists       ErrorCode = 36
	InvalidPartitions        ErrorCode = 37
	InvalidRequest           ErrorCode = 42
	OutOfOrderSequenceNumber ErrorCode = 45
	DuplicateSequenceNumber  ErrorCode = 46
	InvalidProducerEpoch     ErrorCode = 47
	InvalidTxnState          ErrorCode = 48
	KafkaStorageError        ErrorCode = 56
	UnknownProducerID        ErrorCode = 59
	InvalidTopicException    ErrorCode = 17
	InvalidConfig            ErrorCode = 40
	UnknownTopicID           ErrorCode = 100
	ProducerFenced           ErrorCode = 90
	TransactionCoordFenced   ErrorCode = 52
	CoordinatorNotAvailable  ErrorCode = 15
	NotEnoughReplicas        ErrorCode = 19
	PolicyViolation          ErrorCode = 44
	InvalidReplicationFactor ErrorCode = 38
	OffsetNotAvailable       ErrorCode = 78
	LeaderNotAvailable       ErrorCode = 5
	FencedLeaderEpoch        ErrorCode = 74
	UnsupportedVersion       ErrorCode = 35
	ThrottlingQuotaExceeded  ErrorCode = 89
)

// codeInfo holds each known code's name and whether Kafka marks it
// retriable (its exception extends RetriableException).
var codeInfo = map[ErrorCode]struct {
	name      string
	retriable bool
}{
	UnknownServerError:         {"UNKNOWN_SERVER_ERROR", false},
	NoError:                    {"NONE", false},
	OffsetOutOfRange:           {"OFFSET_OUT_OF_RANGE", false},
	CorruptMessage:             {"CORRUPT_MESSAGE", true},
	UnknownTopicOrPartition:    {"UNKNOWN_TOPIC_OR_PARTITION", true},
	LeaderNotAvailable:         {"LEADER_NOT_AVAILABLE", true},
	NotLeaderOrFollower:        {"NOT_LEADER_OR_FOLLOWER", true},
	RequestTimedOut:            {"REQUEST_TIMED_OUT", true},
	MessageTooLarge:            {"MESSAGE_TOO_LARGE", false},
	CoordinatorNotAvailable:    {"COORDINATOR_NOT_AVAILABLE", true},
	InvalidTopicException:      {"INVALID_TOPIC_EXCEPTION", false},
	RecordListTooLarge:         {"RECORD_LIST_TOO_LARGE", false},
	NotEnoughReplicas:          {"NOT_ENOUGH_REPLICAS", true},
	InvalidTimestamp:           {"INVALID_TIMESTAMP", false},
	UnsupportedVersion:         {"UNSUPPORTED_VERSION", false},
	TopicAlreadyExists:         {"TOPIC_ALREADY_EXISTS", false},
	InvalidPartitions:          {"INVALID_PARTITIONS", false},
	InvalidReplicationFactor:   {"INVALID_REPLICATION_FACTOR", false},
	InvalidConfig:              {"INVALID_CONFIG", false},
	InvalidRequest:             {"INVALID_REQUEST", false},
	PolicyViolation:            {"POLICY_VIOLATION", false},
	OutOfOrderSequenceNumber:   {"OUT_OF_ORDER_SEQUENCE_NUMBER", false},
	DuplicateSequenceNumber:    {"DUPLICATE_SEQUENCE_NUMBER", false},
	InvalidProducerEpoch:       {"INVALID_PRODUCER_EPOCH", false},
	InvalidTxnState:            {"INVALID_TXN_STATE", false},
	TransactionCoordFenced:     {"TRANSACTION_COORDINATOR_FENCED", false},
	KafkaStorageError:          {"KAFKA_STORAGE_ERROR", true},
	UnknownProducerID:          {"UNKNOWN_PRODUCER_ID", false},
	FencedLeaderEpoch:          {"FENCED_LEADER_EPOCH", true},
	UnsupportedCompressionType: {"UNSUPPORTED_COMPRESSION_TYPE", false},
	OffsetNotAvailable:         {"OFFSET_NOT_AVAILABLE", true},
	InvalidRecord:              {"INVALID_RECORD", false},
	ThrottlingQuotaExceeded:    {"THROTTLING_QUOTA_EXCEEDED", true},
	ProducerFenced:             {"PRODUCER_FENCED", false},
	UnknownTopicID:             {"UNKNOWN_TOPIC_ID", true},
}
