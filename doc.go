// Package diskless puts the storage layer of Kafka "diskless topics"
// (KIP-1150, KIP-1163, KIP-1164) into any Go program.
//
// Produced record batches are packed into shared, immutable WAL objects in
// an object store (any gocloud.dev/blob bucket: S3, GCS, Azure, a local
// folder, memory). A batch coordinator, a SQLite materialisation of a
// replicated metadata log, decides the order: it assigns every batch its
// offsets. Local disks hold only caches. Consumers see plain Kafka batches,
// byte for byte what a classic broker would serve.
//
// The one idea: the data plane is unordered, the control plane ordered. A
// WAL object holds batches of many partitions with no offsets in it; the
// coordinator's log holds the order, and offsets (and LogAppendTime
// timestamps) are written into the batches on the way out.
//
// The packages, each importable on its own, from the leaves up: each
// imports only those above it, and helpers of internal/ (docs/architecture.md,
// "Packages and their direction"). What only one backend needs is in a
// package the program imports for that backend, as gocloud's drivers are:
// this package links neither the AWS SDK nor an etcd client. A program
// that opens an s3:// bucket imports s3fast (which brings s3blob); one
// with Config.Cluster gives it an etcdcluster.Backend.
//
//   - clock: the one time source (Now, AfterFunc), so tests drive time.
//   - kafkaerr: Kafka's error codes and Error, returned by every layer.
//   - acl and scram: Kafka's ACL bindings and filters, and SCRAM
//     credentials.
//   - quota: Kafka's client quotas: entities, keys, their validation,
//     DescribeClientQuotas filters, and the resolution of a connection's
//     limit.
//   - kbatch: Kafka's record format. RecordBatch v2 (parse, validate,
//     build, compress, rewrite offsets and timestamps), records, markers.
//   - segment: the classic Kafka log (segment files, indexes, recovery,
//     retention, compaction) and the tiered segment files.
//   - wal: the WAL object format, the produce buffer that packs many
//     partitions into one object, and the batch coordinates an object
//     yields; wal/walmeta, the names the WAL shares with the coordinator.
//   - cache: a byte-range cache for immutable objects, in memory and on
//     disk.
//   - coordinator/metalog: the metadata log under the coordinator (file,
//     bucket, memory), and metalogtest, the suite any Log passes;
//     etcdlog, the Log in etcd.
//   - coordinator/state: the coordinator's pure core (records, their
//     format, the view, every operation's check and apply); no cgo, no
//     I/O.
//   - coordinator/store: the coordinator's SQLite database.
//   - coordinator/lifecycle: the worker that hands WAL objects on between
//     shards and deletes them.
//   - coordinator: the batch coordinator: the drivers of state and store
//     over a replicated metadata log, speculative pipelined execution,
//     snapshots, shards and the router, inter-broker forwarding.
//   - cluster: many brokers on one bucket (the Backend they meet through,
//     the Transport between brokers), clustertest, the suite any
//     Transport passes, and etcdcluster, the Backend over etcd.
//   - replica: the materialiser that turns WAL objects into classic local
//     segments, and the tiered offloader.
//   - this package, the facade (below).
//   - s3fast: the S3 fast path of uploads, imported for its side effect.
//   - faultbucket: a bucket wrapper that injects latency and failures.
//   - kafkaserver: the Kafka protocol over a Broker.
//   - disklesstest: diskless in a test, as net/http/httptest.
//
// Beside them: examples/ (programs), internal/ (helpers that are not
// API) and tools/etcd (the etcd server the tests run). The byte formats
// are in docs/formats.md.
//
// This package, the module root, is the Broker facade that wires them over
// a bucket: Open, CreateTopic, AddPartitions, DeleteTopic, DescribeTopics,
// Produce, Fetch, ListOffsets, DeleteRecords, InitProducerID, consumer
// groups' offsets and state (CommitOffsets, FetchOffsets, ClaimGroup,
// PutGroupMetadata, ...), Stats, Close.
//
// Produce validates each partition's batch (kbatch.Validate), puts the
// good ones in the produce buffer (wal.Buffer), and, unless acks is 0,
// waits for the object they go into: it is encoded, uploaded (several at
// once), put in the object cache (in memory at once, so the tail never
// costs a GET; on disk only once memory evicts it), and committed to the coordinator in order, which answers each
// batch with its offset. Fetch asks the coordinator where the batches are,
// reads them through the cache, and writes the coordinator's offsets (and
// LogAppendTime) into each. Background work enforces retention; the
// coordinator's shards delete the objects no batch needs once their grace
// period has passed, and collect the orphans of failed commits. With
// Config.Offload, the broker also materialises every partition into a
// local log and offloads its closed segments as tiered segments: Fetch
// then reads from the local log when it holds the offset, and from tiered
// segments below the diskless start offset.
//
// When the object store fails, every error Produce and Fetch answer is one
// a Kafka client retries (KAFKA_STORAGE_ERROR, NOT_LEADER_OR_FOLLOWER,
// REQUEST_TIMED_OUT), and nothing is acknowledged before it is durable: a
// failed upload fails its object's requests; an upload that may have
// reached the store leaves an orphan that the collector deletes; a failed
// commit fails its requests (an idempotent producer's retry of a batch
// that was committed after all is answered with its first offsets). A
// shard whose metadata log failed for good (an outage longer than the
// log's retries) is reopened in the background, with backoff, until the
// store answers again: the broker recovers by itself.
package diskless
