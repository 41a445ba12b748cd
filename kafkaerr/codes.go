package kafkaerr

// The Kafka protocol's error codes, with Kafka's names and whether Kafka
// marks each retriable (clients/src/main/java/org/apache/kafka/common/
// protocol/Errors.java). Part of the protocol: the values never change.
const (
	// UnknownServerError: The server experienced an unexpected error when processing the request.
	UnknownServerError Code = -1
	// NoError: No error.
	NoError Code = 0
	// OffsetOutOfRange: The requested offset is not within the range of offsets maintained by the server.
	OffsetOutOfRange Code = 1
	// CorruptMessage: This message has failed its CRC checksum, exceeds the valid size, has a null key for a compacted topic, or is otherwise corrupt.
	CorruptMessage Code = 2
	// UnknownTopicOrPartition: This server does not host this topic-partition.
	UnknownTopicOrPartition Code = 3
	// InvalidFetchSize: The requested fetch size is invalid.
	InvalidFetchSize Code = 4
	// LeaderNotAvailable: There is no leader for this topic-partition as we are in the middle of a leadership election.
	LeaderNotAvailable Code = 5
	// NotLeaderOrFollower: This server is not the leader for that topic-partition.
	NotLeaderOrFollower Code = 6
	// RequestTimedOut: The request timed out.
	RequestTimedOut Code = 7
	// BrokerNotAvailable: The broker is not available.
	BrokerNotAvailable Code = 8
	// ReplicaNotAvailable: The replica is not available for the requested topic-partition.
	ReplicaNotAvailable Code = 9
	// MessageTooLarge: The request included a message larger than the max message size the server will accept
	MessageTooLarge Code = 10
	// StaleControllerEpoch: The controller moved to another broker.
	StaleControllerEpoch Code = 11
	// OffsetMetadataTooLarge: The metadata field of the offset request was too large.
	OffsetMetadataTooLarge Code = 12
	// NetworkException: The server disconnected before a response was received.
	NetworkException Code = 13
	// CoordinatorLoadInProgress: The coordinator is loading and hence can't process requests.
	CoordinatorLoadInProgress Code = 14
	// CoordinatorNotAvailable: The coordinator is not available.
	CoordinatorNotAvailable Code = 15
	// NotCoordinator: This is not the correct coordinator.
	NotCoordinator Code = 16
	// InvalidTopicException: The request attempted to perform an operation on an invalid topic.
	InvalidTopicException Code = 17
	// RecordListTooLarge: The request included message batch larger than the configured segment size on the server.
	RecordListTooLarge Code = 18
	// NotEnoughReplicas: Messages are rejected since there are fewer in-sync replicas than required.
	NotEnoughReplicas Code = 19
	// NotEnoughReplicasAfterAppend: Messages are written to the log, but to fewer in-sync replicas than required.
	NotEnoughReplicasAfterAppend Code = 20
	// InvalidRequiredAcks: Produce request specified an invalid value for required acks.
	InvalidRequiredAcks Code = 21
	// IllegalGeneration: Specified group generation id is not valid.
	IllegalGeneration Code = 22
	// InconsistentGroupProtocol: The group member's supported protocols are incompatible with those of existing members or first group member tried to join with empty protocol type or empty protocol list.
	InconsistentGroupProtocol Code = 23
	// InvalidGroupID: The configured groupID is invalid.
	InvalidGroupID Code = 24
	// UnknownMemberID: The coordinator is not aware of this member.
	UnknownMemberID Code = 25
	// InvalidSessionTimeout: The session timeout is not within the range allowed by the broker (as configured by group.min.session.timeout.ms and group.max.session.timeout.ms).
	InvalidSessionTimeout Code = 26
	// RebalanceInProgress: The group is rebalancing, so a rejoin is needed.
	RebalanceInProgress Code = 27
	// InvalidCommitOffsetSize: The committing offset data size is not valid.
	InvalidCommitOffsetSize Code = 28
	// TopicAuthorizationFailed: Not authorized to access topics: [Topic authorization failed.]
	TopicAuthorizationFailed Code = 29
	// GroupAuthorizationFailed: Not authorized to access group: Group authorization failed.
	GroupAuthorizationFailed Code = 30
	// ClusterAuthorizationFailed: Cluster authorization failed.
	ClusterAuthorizationFailed Code = 31
	// InvalidTimestamp: The timestamp of the message is out of acceptable range.
	InvalidTimestamp Code = 32
	// UnsupportedSaslMechanism: The broker does not support the requested SASL mechanism.
	UnsupportedSaslMechanism Code = 33
	// IllegalSaslState: Request is not valid given the current SASL state.
	IllegalSaslState Code = 34
	// UnsupportedVersion: The version of API is not supported.
	UnsupportedVersion Code = 35
	// TopicAlreadyExists: Topic with this name already exists.
	TopicAlreadyExists Code = 36
	// InvalidPartitions: Number of partitions is below 1.
	InvalidPartitions Code = 37
	// InvalidReplicationFactor: Replication factor is below 1 or larger than the number of available brokers.
	InvalidReplicationFactor Code = 38
	// InvalidReplicaAssignment: Replica assignment is invalid.
	InvalidReplicaAssignment Code = 39
	// InvalidConfig: Configuration is invalid.
	InvalidConfig Code = 40
	// NotController: This is not the correct controller for this cluster.
	NotController Code = 41
	// InvalidRequest: This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker. See the broker logs for more details.
	InvalidRequest Code = 42
	// UnsupportedForMessageFormat: The message format version on the broker does not support the request.
	UnsupportedForMessageFormat Code = 43
	// PolicyViolation: Request parameters do not satisfy the configured policy.
	PolicyViolation Code = 44
	// OutOfOrderSequenceNumber: The broker received an out of order sequence number.
	OutOfOrderSequenceNumber Code = 45
	// DuplicateSequenceNumber: The broker received a duplicate sequence number.
	DuplicateSequenceNumber Code = 46
	// InvalidProducerEpoch: Producer attempted an operation with an old epoch.
	InvalidProducerEpoch Code = 47
	// InvalidTxnState: The producer attempted a transactional operation in an invalid state.
	InvalidTxnState Code = 48
	// InvalidProducerIDMapping: The producer attempted to use a producer id which is not currently assigned to its transactional id.
	InvalidProducerIDMapping Code = 49
	// InvalidTransactionTimeout: The transaction timeout is larger than the maximum value allowed by the broker (as configured by transaction.max.timeout.ms).
	InvalidTransactionTimeout Code = 50
	// ConcurrentTransactions: The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing.
	ConcurrentTransactions Code = 51
	// TransactionCoordinatorFenced: Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the current coordinator for a given producer.
	TransactionCoordinatorFenced Code = 52
	// TransactionalIDAuthorizationFailed: Transactional ID authorization failed.
	TransactionalIDAuthorizationFailed Code = 53
	// SecurityDisabled: Security features are disabled.
	SecurityDisabled Code = 54
	// OperationNotAttempted: The broker did not attempt to execute this operation. This may happen for batched RPCs where some operations in the batch failed, causing the broker to respond without trying the rest.
	OperationNotAttempted Code = 55
	// KafkaStorageError: Disk error when trying to access log file on the disk.
	KafkaStorageError Code = 56
	// LogDirNotFound: The user-specified log directory is not found in the broker config.
	LogDirNotFound Code = 57
	// SaslAuthenticationFailed: SASL Authentication failed.
	SaslAuthenticationFailed Code = 58
	// UnknownProducerID: This exception is raised by the broker if it could not locate the producer metadata associated with the producerID in question. This could happen if, for instance, the producer's records were deleted because their retention time had elapsed. Once the last records of the producerID are removed, the producer's metadata is removed from the broker, and future appends by the producer will return this exception.
	UnknownProducerID Code = 59
	// ReassignmentInProgress: A partition reassignment is in progress.
	ReassignmentInProgress Code = 60
	// DelegationTokenAuthDisabled: Delegation Token feature is not enabled.
	DelegationTokenAuthDisabled Code = 61
	// DelegationTokenNotFound: Delegation Token is not found on server.
	DelegationTokenNotFound Code = 62
	// DelegationTokenOwnerMismatch: Specified Principal is not valid Owner/Renewer.
	DelegationTokenOwnerMismatch Code = 63
	// DelegationTokenRequestNotAllowed: Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on delegation token authenticated channels.
	DelegationTokenRequestNotAllowed Code = 64
	// DelegationTokenAuthorizationFailed: Delegation Token authorization failed.
	DelegationTokenAuthorizationFailed Code = 65
	// DelegationTokenExpired: Delegation Token is expired.
	DelegationTokenExpired Code = 66
	// InvalidPrincipalType: Supplied principalType is not supported.
	InvalidPrincipalType Code = 67
	// NonEmptyGroup: The group is not empty.
	NonEmptyGroup Code = 68
	// GroupIDNotFound: The group id does not exist.
	GroupIDNotFound Code = 69
	// FetchSessionIDNotFound: The fetch session ID was not found.
	FetchSessionIDNotFound Code = 70
	// InvalidFetchSessionEpoch: The fetch session epoch is invalid.
	InvalidFetchSessionEpoch Code = 71
	// ListenerNotFound: There is no listener on the leader broker that matches the listener on which metadata request was processed.
	ListenerNotFound Code = 72
	// TopicDeletionDisabled: Topic deletion is disabled.
	TopicDeletionDisabled Code = 73
	// FencedLeaderEpoch: The leader epoch in the request is older than the epoch on the broker
	FencedLeaderEpoch Code = 74
	// UnknownLeaderEpoch: The leader epoch in the request is newer than the epoch on the broker
	UnknownLeaderEpoch Code = 75
	// UnsupportedCompressionType: The requesting client does not support the compression type of given partition.
	UnsupportedCompressionType Code = 76
	// StaleBrokerEpoch: Broker epoch has changed
	StaleBrokerEpoch Code = 77
	// OffsetNotAvailable: The leader high watermark has not caught up from a recent leader election so the offsets cannot be guaranteed to be monotonically increasing
	OffsetNotAvailable Code = 78
	// MemberIDRequired: The group member needs to have a valid member id before actually entering a consumer group
	MemberIDRequired Code = 79
	// PreferredLeaderNotAvailable: The preferred leader was not available
	PreferredLeaderNotAvailable Code = 80
	// GroupMaxSizeReached: The consumer group has reached its max size
	GroupMaxSizeReached Code = 81
	// FencedInstanceID: The broker rejected this static consumer since another consumer with the same group.instance.id has registered with a different member.id.
	FencedInstanceID Code = 82
	// EligibleLeadersNotAvailable: Eligible topic partition leaders are not available
	EligibleLeadersNotAvailable Code = 83
	// ElectionNotNeeded: Leader election not needed for topic partition
	ElectionNotNeeded Code = 84
	// NoReassignmentInProgress: No partition reassignment is in progress.
	NoReassignmentInProgress Code = 85
	// GroupSubscribedToTopic: Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to it.
	GroupSubscribedToTopic Code = 86
	// InvalidRecord: This record has failed the validation on the broker and hence been rejected.
	InvalidRecord Code = 87
	// UnstableOffsetCommit: There are unstable offsets that need to be cleared.
	UnstableOffsetCommit Code = 88
	// ThrottlingQuotaExceeded: The throttling quota has been exceeded.
	ThrottlingQuotaExceeded Code = 89
	// ProducerFenced: There is a newer producer with the same transactionalId which fences the current one.
	ProducerFenced Code = 90
	// ResourceNotFound: A request illegally referred to a resource that does not exist.
	ResourceNotFound Code = 91
	// DuplicateResource: A request illegally referred to the same resource twice.
	DuplicateResource Code = 92
	// UnacceptableCredential: Requested credential would not meet criteria for acceptability.
	UnacceptableCredential Code = 93
	// InconsistentVoterSet: Indicates that either the sender or recipient of a voter-only request is not one of the expected voters.
	InconsistentVoterSet Code = 94
	// InvalidUpdateVersion: The given update version was invalid.
	InvalidUpdateVersion Code = 95
	// FeatureUpdateFailed: Unable to update finalized features due to an unexpected server error.
	FeatureUpdateFailed Code = 96
	// PrincipalDeserializationFailure: Request principal deserialization failed during forwarding. This indicates an internal error on the broker cluster security setup.
	PrincipalDeserializationFailure Code = 97
	// SnapshotNotFound: Requested snapshot was not found.
	SnapshotNotFound Code = 98
	// PositionOutOfRange: Requested position is not greater than or equal to zero, and less than the size of the snapshot.
	PositionOutOfRange Code = 99
	// UnknownTopicID: This server does not host this topic ID.
	UnknownTopicID Code = 100
	// DuplicateBrokerRegistration: This broker ID is already in use.
	DuplicateBrokerRegistration Code = 101
	// BrokerIDNotRegistered: The given broker ID was not registered.
	BrokerIDNotRegistered Code = 102
	// InconsistentTopicID: The log's topic ID did not match the topic ID in the request.
	InconsistentTopicID Code = 103
	// InconsistentClusterID: The clusterId in the request does not match that found on the server.
	InconsistentClusterID Code = 104
	// TransactionalIDNotFound: The transactionalId could not be found.
	TransactionalIDNotFound Code = 105
	// FetchSessionTopicIDError: The fetch session encountered inconsistent topic ID usage.
	FetchSessionTopicIDError Code = 106
	// IneligibleReplica: The new ISR contains at least one ineligible replica.
	IneligibleReplica Code = 107
	// NewLeaderElected: The AlterPartition request successfully updated the partition state but the leader has changed.
	NewLeaderElected Code = 108
	// OffsetMovedToTieredStorage: The requested offset is moved to tiered storage.
	OffsetMovedToTieredStorage Code = 109
	// FencedMemberEpoch: The member epoch is fenced by the group coordinator. The member must abandon all its partitions and rejoin.
	FencedMemberEpoch Code = 110
	// UnreleasedInstanceID: The instance ID is still used by another member in the consumer group. That member must leave first.
	UnreleasedInstanceID Code = 111
	// UnsupportedAssignor: The assignor or its version range is not supported by the consumer group.
	UnsupportedAssignor Code = 112
	// StaleMemberEpoch: The member epoch is stale. The member must retry after receiving its updated member epoch via the ConsumerGroupHeartbeat API.
	StaleMemberEpoch Code = 113
	// MismatchedEndpointType: The request was sent to an endpoint of the wrong type.
	MismatchedEndpointType Code = 114
	// UnsupportedEndpointType: This endpoint type is not supported yet.
	UnsupportedEndpointType Code = 115
	// UnknownControllerID: This controller ID is not known
	UnknownControllerID Code = 116
	// UnknownSubscriptionID: Client sent a push telemetry request with an invalid or outdated subscription ID.
	UnknownSubscriptionID Code = 117
	// TelemetryTooLarge: Client sent a push telemetry request larger than the maximum size the broker will accept.
	TelemetryTooLarge Code = 118
	// InvalidRegistration: The controller has considered the broker registration to be invalid.
	InvalidRegistration Code = 119
	// TransactionAbortable: The server encountered an error with the transaction. The client can abort the transaction to continue using this transactional ID.
	TransactionAbortable Code = 120
	// InvalidRecordState: The record state is invalid. The acknowledgement of delivery could not be completed.
	InvalidRecordState Code = 121
	// ShareSessionNotFound: The share session was not found.
	ShareSessionNotFound Code = 122
	// InvalidShareSessionEpoch: The share session epoch is invalid.
	InvalidShareSessionEpoch Code = 123
	// FencedStateEpoch: The coordinator rejected the request because the state epoch did not match.
	FencedStateEpoch Code = 124
	// InvalidVoterKey: The voter key doesn't match the receiving replica's key.
	InvalidVoterKey Code = 125
	// DuplicateVoter: The voter is already part of the set of voters.
	DuplicateVoter Code = 126
	// VoterNotFound: The voter is not part of the set of voters.
	VoterNotFound Code = 127
	// InvalidRegularExpression: The regular expression is not valid.
	InvalidRegularExpression Code = 128
	// RebootstrapRequired: Client metadata is stale. The client should rebootstrap to obtain new metadata.
	RebootstrapRequired Code = 129
	// StreamsInvalidTopology: The supplied topology is invalid.
	StreamsInvalidTopology Code = 130
	// StreamsInvalidTopologyEpoch: The supplied topology epoch is invalid.
	StreamsInvalidTopologyEpoch Code = 131
	// StreamsTopologyFenced: The supplied topology epoch is outdated.
	StreamsTopologyFenced Code = 132
	// ShareSessionLimitReached: The limit of share sessions has been reached.
	ShareSessionLimitReached Code = 133
	// GroupDeletionFailed: DeleteGroups could not complete; see the error message on the per-group result for details.
	GroupDeletionFailed Code = 134
	// StreamsTopologyDescriptionUpdateFailed: The broker could not process the topology description update; see the error message for details.
	StreamsTopologyDescriptionUpdateFailed Code = 135
	// ControllerIDNotRegistered: The given controller ID was not registered.
	ControllerIDNotRegistered Code = 136
)

// codeInfo holds each code's name and whether it is retriable.
var codeInfo = map[Code]struct {
	name      string
	retriable bool
}{
	UnknownServerError:                     {"UNKNOWN_SERVER_ERROR", false},
	NoError:                                {"NONE", false},
	OffsetOutOfRange:                       {"OFFSET_OUT_OF_RANGE", false},
	CorruptMessage:                         {"CORRUPT_MESSAGE", true},
	UnknownTopicOrPartition:                {"UNKNOWN_TOPIC_OR_PARTITION", true},
	InvalidFetchSize:                       {"INVALID_FETCH_SIZE", false},
	LeaderNotAvailable:                     {"LEADER_NOT_AVAILABLE", true},
	NotLeaderOrFollower:                    {"NOT_LEADER_OR_FOLLOWER", true},
	RequestTimedOut:                        {"REQUEST_TIMED_OUT", true},
	BrokerNotAvailable:                     {"BROKER_NOT_AVAILABLE", true},
	ReplicaNotAvailable:                    {"REPLICA_NOT_AVAILABLE", true},
	MessageTooLarge:                        {"MESSAGE_TOO_LARGE", false},
	StaleControllerEpoch:                   {"STALE_CONTROLLER_EPOCH", false},
	OffsetMetadataTooLarge:                 {"OFFSET_METADATA_TOO_LARGE", false},
	NetworkException:                       {"NETWORK_EXCEPTION", true},
	CoordinatorLoadInProgress:              {"COORDINATOR_LOAD_IN_PROGRESS", true},
	CoordinatorNotAvailable:                {"COORDINATOR_NOT_AVAILABLE", true},
	NotCoordinator:                         {"NOT_COORDINATOR", true},
	InvalidTopicException:                  {"INVALID_TOPIC_EXCEPTION", false},
	RecordListTooLarge:                     {"RECORD_LIST_TOO_LARGE", false},
	NotEnoughReplicas:                      {"NOT_ENOUGH_REPLICAS", true},
	NotEnoughReplicasAfterAppend:           {"NOT_ENOUGH_REPLICAS_AFTER_APPEND", true},
	InvalidRequiredAcks:                    {"INVALID_REQUIRED_ACKS", false},
	IllegalGeneration:                      {"ILLEGAL_GENERATION", false},
	InconsistentGroupProtocol:              {"INCONSISTENT_GROUP_PROTOCOL", false},
	InvalidGroupID:                         {"INVALID_GROUP_ID", false},
	UnknownMemberID:                        {"UNKNOWN_MEMBER_ID", false},
	InvalidSessionTimeout:                  {"INVALID_SESSION_TIMEOUT", false},
	RebalanceInProgress:                    {"REBALANCE_IN_PROGRESS", false},
	InvalidCommitOffsetSize:                {"INVALID_COMMIT_OFFSET_SIZE", false},
	TopicAuthorizationFailed:               {"TOPIC_AUTHORIZATION_FAILED", false},
	GroupAuthorizationFailed:               {"GROUP_AUTHORIZATION_FAILED", false},
	ClusterAuthorizationFailed:             {"CLUSTER_AUTHORIZATION_FAILED", false},
	InvalidTimestamp:                       {"INVALID_TIMESTAMP", false},
	UnsupportedSaslMechanism:               {"UNSUPPORTED_SASL_MECHANISM", false},
	IllegalSaslState:                       {"ILLEGAL_SASL_STATE", false},
	UnsupportedVersion:                     {"UNSUPPORTED_VERSION", false},
	TopicAlreadyExists:                     {"TOPIC_ALREADY_EXISTS", false},
	InvalidPartitions:                      {"INVALID_PARTITIONS", false},
	InvalidReplicationFactor:               {"INVALID_REPLICATION_FACTOR", false},
	InvalidReplicaAssignment:               {"INVALID_REPLICA_ASSIGNMENT", false},
	InvalidConfig:                          {"INVALID_CONFIG", false},
	NotController:                          {"NOT_CONTROLLER", true},
	InvalidRequest:                         {"INVALID_REQUEST", false},
	UnsupportedForMessageFormat:            {"UNSUPPORTED_FOR_MESSAGE_FORMAT", false},
	PolicyViolation:                        {"POLICY_VIOLATION", false},
	OutOfOrderSequenceNumber:               {"OUT_OF_ORDER_SEQUENCE_NUMBER", false},
	DuplicateSequenceNumber:                {"DUPLICATE_SEQUENCE_NUMBER", false},
	InvalidProducerEpoch:                   {"INVALID_PRODUCER_EPOCH", false},
	InvalidTxnState:                        {"INVALID_TXN_STATE", false},
	InvalidProducerIDMapping:               {"INVALID_PRODUCER_ID_MAPPING", false},
	InvalidTransactionTimeout:              {"INVALID_TRANSACTION_TIMEOUT", false},
	ConcurrentTransactions:                 {"CONCURRENT_TRANSACTIONS", false},
	TransactionCoordinatorFenced:           {"TRANSACTION_COORDINATOR_FENCED", false},
	TransactionalIDAuthorizationFailed:     {"TRANSACTIONAL_ID_AUTHORIZATION_FAILED", false},
	SecurityDisabled:                       {"SECURITY_DISABLED", false},
	OperationNotAttempted:                  {"OPERATION_NOT_ATTEMPTED", false},
	KafkaStorageError:                      {"KAFKA_STORAGE_ERROR", true},
	LogDirNotFound:                         {"LOG_DIR_NOT_FOUND", false},
	SaslAuthenticationFailed:               {"SASL_AUTHENTICATION_FAILED", false},
	UnknownProducerID:                      {"UNKNOWN_PRODUCER_ID", false},
	ReassignmentInProgress:                 {"REASSIGNMENT_IN_PROGRESS", false},
	DelegationTokenAuthDisabled:            {"DELEGATION_TOKEN_AUTH_DISABLED", false},
	DelegationTokenNotFound:                {"DELEGATION_TOKEN_NOT_FOUND", false},
	DelegationTokenOwnerMismatch:           {"DELEGATION_TOKEN_OWNER_MISMATCH", false},
	DelegationTokenRequestNotAllowed:       {"DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", false},
	DelegationTokenAuthorizationFailed:     {"DELEGATION_TOKEN_AUTHORIZATION_FAILED", false},
	DelegationTokenExpired:                 {"DELEGATION_TOKEN_EXPIRED", false},
	InvalidPrincipalType:                   {"INVALID_PRINCIPAL_TYPE", false},
	NonEmptyGroup:                          {"NON_EMPTY_GROUP", false},
	GroupIDNotFound:                        {"GROUP_ID_NOT_FOUND", false},
	FetchSessionIDNotFound:                 {"FETCH_SESSION_ID_NOT_FOUND", true},
	InvalidFetchSessionEpoch:               {"INVALID_FETCH_SESSION_EPOCH", true},
	ListenerNotFound:                       {"LISTENER_NOT_FOUND", true},
	TopicDeletionDisabled:                  {"TOPIC_DELETION_DISABLED", false},
	FencedLeaderEpoch:                      {"FENCED_LEADER_EPOCH", true},
	UnknownLeaderEpoch:                     {"UNKNOWN_LEADER_EPOCH", true},
	UnsupportedCompressionType:             {"UNSUPPORTED_COMPRESSION_TYPE", false},
	StaleBrokerEpoch:                       {"STALE_BROKER_EPOCH", false},
	OffsetNotAvailable:                     {"OFFSET_NOT_AVAILABLE", true},
	MemberIDRequired:                       {"MEMBER_ID_REQUIRED", false},
	PreferredLeaderNotAvailable:            {"PREFERRED_LEADER_NOT_AVAILABLE", true},
	GroupMaxSizeReached:                    {"GROUP_MAX_SIZE_REACHED", false},
	FencedInstanceID:                       {"FENCED_INSTANCE_ID", false},
	EligibleLeadersNotAvailable:            {"ELIGIBLE_LEADERS_NOT_AVAILABLE", true},
	ElectionNotNeeded:                      {"ELECTION_NOT_NEEDED", true},
	NoReassignmentInProgress:               {"NO_REASSIGNMENT_IN_PROGRESS", false},
	GroupSubscribedToTopic:                 {"GROUP_SUBSCRIBED_TO_TOPIC", false},
	InvalidRecord:                          {"INVALID_RECORD", false},
	UnstableOffsetCommit:                   {"UNSTABLE_OFFSET_COMMIT", true},
	ThrottlingQuotaExceeded:                {"THROTTLING_QUOTA_EXCEEDED", true},
	ProducerFenced:                         {"PRODUCER_FENCED", false},
	ResourceNotFound:                       {"RESOURCE_NOT_FOUND", false},
	DuplicateResource:                      {"DUPLICATE_RESOURCE", false},
	UnacceptableCredential:                 {"UNACCEPTABLE_CREDENTIAL", false},
	InconsistentVoterSet:                   {"INCONSISTENT_VOTER_SET", false},
	InvalidUpdateVersion:                   {"INVALID_UPDATE_VERSION", false},
	FeatureUpdateFailed:                    {"FEATURE_UPDATE_FAILED", false},
	PrincipalDeserializationFailure:        {"PRINCIPAL_DESERIALIZATION_FAILURE", false},
	SnapshotNotFound:                       {"SNAPSHOT_NOT_FOUND", false},
	PositionOutOfRange:                     {"POSITION_OUT_OF_RANGE", false},
	UnknownTopicID:                         {"UNKNOWN_TOPIC_ID", true},
	DuplicateBrokerRegistration:            {"DUPLICATE_BROKER_REGISTRATION", false},
	BrokerIDNotRegistered:                  {"BROKER_ID_NOT_REGISTERED", false},
	InconsistentTopicID:                    {"INCONSISTENT_TOPIC_ID", true},
	InconsistentClusterID:                  {"INCONSISTENT_CLUSTER_ID", false},
	TransactionalIDNotFound:                {"TRANSACTIONAL_ID_NOT_FOUND", false},
	FetchSessionTopicIDError:               {"FETCH_SESSION_TOPIC_ID_ERROR", true},
	IneligibleReplica:                      {"INELIGIBLE_REPLICA", false},
	NewLeaderElected:                       {"NEW_LEADER_ELECTED", false},
	OffsetMovedToTieredStorage:             {"OFFSET_MOVED_TO_TIERED_STORAGE", false},
	FencedMemberEpoch:                      {"FENCED_MEMBER_EPOCH", false},
	UnreleasedInstanceID:                   {"UNRELEASED_INSTANCE_ID", false},
	UnsupportedAssignor:                    {"UNSUPPORTED_ASSIGNOR", false},
	StaleMemberEpoch:                       {"STALE_MEMBER_EPOCH", false},
	MismatchedEndpointType:                 {"MISMATCHED_ENDPOINT_TYPE", false},
	UnsupportedEndpointType:                {"UNSUPPORTED_ENDPOINT_TYPE", false},
	UnknownControllerID:                    {"UNKNOWN_CONTROLLER_ID", false},
	UnknownSubscriptionID:                  {"UNKNOWN_SUBSCRIPTION_ID", false},
	TelemetryTooLarge:                      {"TELEMETRY_TOO_LARGE", false},
	InvalidRegistration:                    {"INVALID_REGISTRATION", false},
	TransactionAbortable:                   {"TRANSACTION_ABORTABLE", false},
	InvalidRecordState:                     {"INVALID_RECORD_STATE", false},
	ShareSessionNotFound:                   {"SHARE_SESSION_NOT_FOUND", false},
	InvalidShareSessionEpoch:               {"INVALID_SHARE_SESSION_EPOCH", false},
	FencedStateEpoch:                       {"FENCED_STATE_EPOCH", false},
	InvalidVoterKey:                        {"INVALID_VOTER_KEY", false},
	DuplicateVoter:                         {"DUPLICATE_VOTER", false},
	VoterNotFound:                          {"VOTER_NOT_FOUND", false},
	InvalidRegularExpression:               {"INVALID_REGULAR_EXPRESSION", false},
	RebootstrapRequired:                    {"REBOOTSTRAP_REQUIRED", false},
	StreamsInvalidTopology:                 {"STREAMS_INVALID_TOPOLOGY", false},
	StreamsInvalidTopologyEpoch:            {"STREAMS_INVALID_TOPOLOGY_EPOCH", false},
	StreamsTopologyFenced:                  {"STREAMS_TOPOLOGY_FENCED", false},
	ShareSessionLimitReached:               {"SHARE_SESSION_LIMIT_REACHED", true},
	GroupDeletionFailed:                    {"GROUP_DELETION_FAILED", false},
	StreamsTopologyDescriptionUpdateFailed: {"STREAMS_TOPOLOGY_DESCRIPTION_UPDATE_FAILED", false},
	ControllerIDNotRegistered:              {"CONTROLLER_ID_NOT_REGISTERED", false},
}
