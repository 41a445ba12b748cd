// Package kafkaserver serves the Kafka protocol over a diskless.Broker:
// unmodified Kafka clients (franz-go, librdkafka, the Java client, sarama)
// produce to it, consume from it, and run consumer groups on it, while
// every record lives in WAL objects in the Broker's gocloud.dev/blob
// bucket and its batch coordinator assigns the offsets.
//
//	b, err := diskless.Open(ctx, &diskless.Config{BucketURL: "s3://my-bucket", DataDir: "/var/lib/kb"})
//	...
//	srv, err := kafkaserver.New(ctx, b, nil) // nil: the defaults
//	...
//	ln, err := net.Listen("tcp", "127.0.0.1:9092")
//	...
//	go srv.Serve(ln)
//	...
//	srv.Close() // answers what it holds; then
//	b.Close()   // commits everything buffered
//
// The command examples/kafka-broker is a main over this package (flags,
// logging, signals); the package disklesstest starts a Server for a test
// in one call.
//
// # What it serves
//
// ApiVersions, Metadata, CreateTopics, DeleteTopics, Produce, Fetch (a long
// poll: the facade waits for MinBytes up to MaxWait, woken by commits;
// KIP-227 fetch sessions), ListOffsets, InitProducerId (idempotent and
// transactional producers: see Transactions below), DeleteRecords, DescribeConfigs,
// AlterConfigs, IncrementalAlterConfigs (every Kafka 4 topic config),
// CreatePartitions, OffsetForLeaderEpoch, DescribeProducers,
// DescribeLogDirs, DescribeCluster, FindCoordinator, the classic consumer
// group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
// OffsetCommit, OffsetFetch) and its admin calls (ListGroups,
// DescribeGroups, DeleteGroups, OffsetDelete), and the consumer group
// protocol of KIP-848 (ConsumerGroupHeartbeat, ConsumerGroupDescribe;
// the server assigns, with the uniform or range assignor:
// consumergroups.go), and the feature levels of KIP-584 (ApiVersions
// names them; UpdateFeatures raises them: features.go). versions.go lists the
// versions: ApiVersions advertises every API whose lower bound Kafka 4
// raised from version 0, as Kafka 4 does for Produce; a
// request of a version the server does not serve closes the connection,
// as Kafka does, except ApiVersions, which is answered with
// UNSUPPORTED_VERSION in version 0.
//
// # Error codes by version
//
// A response carries only error codes its request's version knows: an
// older client does not know a code added after it (a kafkajs 2.2
// producer reports PRODUCER_FENCED on AddPartitionsToTxn v1 as an unknown
// error 90). The handlers write the newest code, and one step after every
// handler rewrites it for the request's version by one table
// (errorDowngrades in errorversions.go), as Kafka answers those versions:
// PRODUCER_FENCED is INVALID_PRODUCER_EPOCH on InitProducerId before 4,
// AddPartitionsToTxn, AddOffsetsToTxn and EndTxn before 2, and on every
// TxnOffsetCommit and Produce (the implicit adds of Produce 12 and
// TxnOffsetCommit 5 too); TRANSACTION_ABORTABLE is INVALID_TXN_STATE
// on Produce before 11 and TxnOffsetCommit before 4; KAFKA_STORAGE_ERROR
// is NOT_LEADER_OR_FOLLOWER on Fetch before 6; UNKNOWN_TOPIC_ID is
// INVALID_REQUEST on Metadata before 12; and the others the table lists.
// Only responses of the APIs the table names are walked, by plain loops
// over their error code fields. OffsetFetch before 2, which has no
// group-level error code, gets a group's error on each partition asked
// for.
//
// Alone, the server is the only node: the leader of every partition
// (leader epoch 0), the group coordinator of every group, the controller.
// Replication is the bucket's business: CreateTopics accepts any
// replication factor and reports 1.
//
// # A cluster
//
// Over a Broker opened with diskless.Config.Cluster (Config.Clustered),
// the server is one of many stateless nodes on one bucket (nodes.go):
// Metadata lists the live nodes (Broker.Members), each partition led, as
// Metadata tells it, by one of them, spread evenly and preferring the
// client's rack (Fetch's rack_id, or diskless_rack=NAME in the client
// ID); but every node takes Produce and Fetch for every partition. A
// full Fetch (version 11 on) from a client of another rack than the
// node's, when a live node is in the client's, is answered with that
// node as each partition's preferred read replica and no records
// (KIP-392), so consumers read in their own zone from their first poll,
// not from their next Metadata refresh. Each
// group is coordinated by one live node (rendezvous hashing;
// NOT_COORDINATOR elsewhere); the committed offsets are in the library's
// coordinator, the same for every node. A node that takes a group over
// claims it in the coordinator (Broker.ClaimGroup) and loads the state
// the group's last coordinator stored there (Broker.PutGroupMetadata, at
// each completed generation): the members carry on at their generation,
// with no rebalance. What a node writes for a group (commits, deletes,
// the group's state) is written under its claim, so a node that lost the
// group without knowing it (frozen, cut off) has its writes refused
// (NOT_COORDINATOR) and drops the group.
//
// # Connections
//
// Requests on one connection are pipelined: read while earlier ones are
// handled and answered in request order, as Kafka clients require.
// Produce and Fetch run concurrently (a connection's produce requests
// reach the facade in the order they came, so an idempotent producer's
// sequence numbers are checked in order); any other request waits for
// those before it. A connection holds at most 500 requests read and not
// answered (Kafka's queued.max.requests), the server
// Config.QueuedMaxRequestBytes of request frames. An accept error (too
// many open files) never stops Serve: it logs it and accepts again after
// a pause. The example broker's README.md explains every limit.
//
// # Consumer groups
//
// The group coordinator (groups.go) keeps groups in memory: generations,
// member IDs (MEMBER_ID_REQUIRED from JoinGroup v4 on), a join barrier that
// waits for every member up to the rebalance timeout, a sync barrier that
// the leader's SyncGroup completes (the assignment is done by the client,
// as Kafka's classic protocol wants), heartbeats and session timeouts.
// Static membership (group.instance.id, groupstatic.go) is Kafka's: a
// static member that restarts within its session takes its old place
// with no rebalance, a duplicate instance is fenced (FENCED_INSTANCE_ID),
// and LeaveGroup removes members by instance ID. A group moves between
// the classic protocol and KIP-848's with its members, as Kafka 4's
// rolling upgrades and rollbacks move it (groupconvert.go): a member of
// the consumer protocol joining a classic group converts it, its classic
// members then assigned by the coordinator through their JoinGroup and
// SyncGroup (consumerclassic.go), and the group is classic again when
// the last member of the consumer protocol leaves. Committed offsets are records of the library's coordinator
// (Broker.CommitOffsets: one metadata-log append of the group's shard, no
// object upload), so they survive a restart and every node of a cluster
// reads the same ones. On a cluster node, groups' membership is stored
// there too, classic groups' (groupstore.go) and those of the consumer
// protocol (consumerstore.go), and survives a takeover; on a single
// node, groups do not survive a restart (members rejoin). A known member that joins again with the
// same metadata while the group is stable (not its leader) gets the
// current generation with no rebalance, as in Kafka. A pause of the
// process (SIGSTOP) does not count against members' sessions.
// Deleting a topic deletes its committed offsets. The compacted topic
// __consumer_offsets (one partition, created by New when missing) stays,
// empty, as clients and tools expect it: New imports into the
// coordinator the offsets an older version of this package kept there
// (Kafka's records: key OffsetCommitKey v1, value OffsetCommitValue v3)
// and deletes its records.
//
// # Security
//
// Config.TLS serves the listener over TLS (Kafka's SSL listener); with
// client certificates required, a connection's principal is "User:" and
// its certificate's subject in RFC 2253 form, as Kafka's default
// principal builder names it ("User:CN=alice,OU=eng,O=acme"; tls.go).
// Config.SASL requires SASL authentication (SASL_PLAINTEXT, or SASL_SSL
// with TLS; auth.go): SaslHandshake v0 (the tokens then unframed) and v1,
// SaslAuthenticate v0 to v2, with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512
// over one store of SCRAM credentials (PLAIN checks the password against
// the user's SCRAM credential), OAUTHBEARER over a token validator the
// embedder supplies, or an embedder's own Authenticator; the principal
// is then "User:" and the user's name. Until it has authenticated, a
// connection may send only ApiVersions, SaslHandshake and
// SaslAuthenticate, in frames of at most 512 KiB; anything else closes
// it, as Kafka closes it. A failed authentication is answered
// SASL_AUTHENTICATION_FAILED after a delay (100 ms by default), then the
// connection closes; failures are counted and logged at most once a
// second per user and reason. Sessions may be limited (KIP-368): a
// connection whose session has ended must authenticate again, as the
// same principal, before any other request. A connection with neither is
// User:ANONYMOUS.
//
// Config.ACL checks every request against Kafka's ACLs as the Broker keeps
// them (coordinator records: the same on every node of a cluster, a
// change seen by the others within a second), and serves CreateAcls,
// DescribeAcls, DeleteAcls; Config.Authorizer takes an embedder's own
// authorizer instead. Each API checks the operations and resources
// Kafka's request handlers check, and answers a denial with the error
// Kafka gives (the table in authz_apis.go): a request denied whole is
// answered at once, and the resources a principal may not touch are
// taken out of a request and answered with their error, or left out of
// a listing. DescribeUserScramCredentials and AlterUserScramCredentials
// (KIP-554) manage the users, and DescribeClientQuotas and
// AlterClientQuotas (KIP-546, with validate_only) the client quotas the
// Broker keeps likewise (quotaadmin.go). Denials are counted and logged
// at most once a second per principal and resource type; with
// Config.MeterProvider the counts are metrics (metrics.go).
//
// # Quotas
//
// Client quotas (producer_byte_rate, consumer_byte_rate,
// request_percentage; package quota) are enforced as Kafka enforces them,
// by each node on what it serves (quotas.go): the limit of a connection
// is resolved from its user and client ID (quota.Set.Resolve), rates are
// measured over Kafka's windows, and a client over its limit is answered
// at once with throttle_time_ms and its connection muted for that long
// (KIP-219), never closed. The quotas are the Broker's (set with
// AlterClientQuotas): read again at once on the node that changed them,
// and polled (Config.QuotaRefresh) on the others, as the ACLs are.
// Throttles are counted, logged at most once a second per user
// and client ID, and are metrics with Config.MeterProvider.
//
// # Limits
//
// Transactions are those of the facade (see txn.go): InitProducerId with
// a transactional ID, AddPartitionsToTxn (versions 0 to 3: transactions
// v1; the broker-side verification of KIP-890 part 1 is the facade's),
// AddOffsetsToTxn, TxnOffsetCommit (at the group's coordinator, the
// member and generation checked as KIP-447 says), EndTxn, DescribeTransactions, ListTransactions, and Fetch,
// ListOffsets and OffsetFetch (require_stable: UNSTABLE_OFFSET_COMMIT)
// at read_committed. Transactions v2 (KIP-890 part 2) is served once the
// cluster's transaction.version is finalized at 2 (a new cluster starts
// there; ApiVersions names it, and clients choose v2 by it): EndTxn 5
// bumps the producer's epoch and answers the new one, its markers carry
// it so that a late write of the ended transaction is fenced; a
// transactional Produce 12 and TxnOffsetCommit 5 add their partitions or
// group to the transaction themselves (producetxn.go). Before that level
// those versions are UNSUPPORTED_VERSION; clients of v1 and v2 share a
// cluster, and an EndTxn below 5 never bumps. No changing message.timestamp.type after creation
// (INVALID_CONFIG); the connection creation rate quota of IP entities
// and controller_mutation_rate are not enforced.
// CreatePartitions adds partitions (Broker.AddPartitions).
package kafkaserver
