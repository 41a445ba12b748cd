package diskless

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"gocloud.dev/blob"

	"github.com/diskless-go/diskless/clock"
	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/kbatch"
)

// MetadataLog says where the coordinator's metadata log lives.
type MetadataLog int

// Where the metadata log can live.
const (
	// MetadataInBucket keeps the log in the bucket, one object per entry,
	// fenced with conditional writes: brokers keep no state that matters,
	// and a broker whose data folder is gone rebuilds from the bucket. The
	// default.
	MetadataInBucket MetadataLog = iota
	// MetadataInFile keeps the log in DataDir, fsynced: the lowest commit
	// latency, one machine.
	MetadataInFile
	// MetadataInMemory keeps the log in memory: nothing survives Close.
	// For tests.
	MetadataInMemory
)

// CommitMode says how a WAL object and the metadata log entry that
// commits it are written: one after the other, or at once (the parallel
// commit, docs/parallel-commit.md).
type CommitMode int

// The commit modes.
const (
	// CommitAuto commits in parallel with MetadataInBucket on a broker
	// that leads its shards alone (no Cluster, no OpenMetadataLog), where
	// the log entry is a PUT as slow as the object's; in series
	// otherwise. The default.
	CommitAuto CommitMode = iota
	// CommitInSeries writes the WAL object, then commits it.
	CommitInSeries
	// CommitInParallel writes the WAL object (with a conditional create)
	// and its pending commit at once, and answers the producers when both
	// are durable. Not with a Cluster.
	CommitInParallel
)

// Config configures a Broker. The zero value is a working broker over an
// in-memory bucket; a nil *Config means the zero value.
type Config struct {
	// BucketURL opens the bucket: any gocloud.dev/blob URL (s3://, gs://,
	// azblob://, file://, mem://), its driver imported by the program.
	// "" means "mem://". A file:// folder that does not exist is created
	// (add create_dir= to the URL to refuse that). Ignored when Bucket is
	// set.
	BucketURL string
	// Bucket is an open bucket to use instead of BucketURL. Close does not
	// close it.
	Bucket *blob.Bucket
	// MetadataBucketURL opens a bucket of its own for the metadata log
	// (with MetadataInBucket) and the coordinator's snapshots, under the
	// same Prefix: a store with low latency and atomic conditional puts
	// (S3 Express One Zone, say), while WAL objects and tiered segments
	// stay in the main bucket. "" (with a nil MetadataBucket) means the
	// main bucket. Ignored when MetadataBucket is set.
	MetadataBucketURL string
	// MetadataBucket is an open bucket to use instead of
	// MetadataBucketURL. Close does not close it.
	MetadataBucket *blob.Bucket
	// Prefix goes before every key the broker writes: wal/, meta/.
	Prefix string
	// DataDir holds the broker's caches and the coordinator's SQLite
	// database, which may be deleted whenever the broker is closed. ""
	// means a temporary folder removed by Close, and no disk cache. Open
	// takes an exclusive lock (flock) on DataDir/.lock, held until Close,
	// as Kafka locks each log directory: a second Broker on the folder
	// fails with ErrDataDirInUse.
	DataDir string
	// BrokerID and Rack identify the broker (the uploader of its objects).
	BrokerID int32
	Rack     string
	// Cluster, when set, makes this broker one of many on the bucket,
	// coordinated through a cluster.Backend such as etcd's (see
	// ClusterConfig); BrokerID must then be unique among them. Nil: this broker alone serves the bucket.
	Cluster *ClusterConfig
	// Shards is the number of coordinator shards, each with its own
	// metadata log (<Prefix>meta/<n>/ in the bucket, DataDir/meta/<n> in a
	// file) and database; partitions are spread over them as they are
	// created. 0 means 1. It may grow between runs (new shards take new
	// partitions), never shrink.
	Shards int
	// MetadataLog says where the metadata log lives.
	MetadataLog MetadataLog
	// MetadataPutsInFlight is, with MetadataInBucket, how many puts of
	// the metadata log may be in flight at once
	// (metalog.BucketOptions.MaxInFlight): a commit then does not wait
	// behind a full put of the commits before it. The entries of a put
	// that failed behind others may land later; the coordinator skips
	// them as it replays (see the coordinator package's "Log entries").
	// 0 means DefaultMetadataPutsInFlight; 1 puts one entry at a time; at
	// most metalog.MaxBucketMaxInFlight.
	MetadataPutsInFlight int
	// OpenMetadataLog, if set, opens the metadata log of shard i instead
	// of MetadataLog: a log elsewhere, such as an etcd one
	// (etcdlog.Open). Close closes the logs it returned.
	OpenMetadataLog func(ctx context.Context, shard int) (metalog.Log, error)
	// Commit says whether a WAL object's PUT and its commit go in series
	// or at once (CommitAuto: at once with MetadataInBucket on a broker
	// alone).
	Commit CommitMode
	// BufferMaxBytes closes a WAL object at this size; 0 means 8 MiB.
	BufferMaxBytes int64
	// BufferFullBytes is the size at which a WAL object is full: it closes
	// at once, outside the PUT budget (ObjectsPerSecond), since at that
	// size a PUT costs little beside the bytes' storage. 0 means
	// wal.DefaultFullBytes (4.5 MiB: a PUT is then under 5% of a month of
	// S3 Standard storage of the object), or BufferMaxBytes if less; it
	// may not pass BufferMaxBytes.
	BufferFullBytes int64
	// Linger is the longest a produce request waits for its WAL object to
	// close (see wal.Options.Linger); 0 means 250 ms.
	Linger time.Duration
	// ObjectsPerSecond is the broker's PUT budget for WAL objects that
	// are not full: within it an object closes as soon as the budget
	// allows and an upload slot is free, so that a lone request on an
	// idle broker is uploaded at once, and under load objects close every
	// 1/ObjectsPerSecond (see wal.Options.ObjectsPerSecond). Full objects
	// (BufferFullBytes) are not budgeted. 0 means 1/Linger, the PUT rate of one object per
	// Linger (4 a second at the default); it may not be less than that.
	ObjectsPerSecond float64
	// MaxBufferedBytes bounds the produce bytes buffered and in flight;
	// past it Produce waits. 0 means 64 MiB.
	MaxBufferedBytes int64
	// UploadTimeout bounds one WAL object's upload; one that takes longer
	// fails, and its producers get KAFKA_STORAGE_ERROR and retry. 0 means
	// 30 s.
	UploadTimeout time.Duration
	// UploadConcurrency is how many objects upload at once (they commit
	// in order). 0 means 4.
	UploadConcurrency int
	// HedgeMinDelay and HedgeMaxDelay bound the hedge delay of WAL
	// uploads: a PUT that has not finished after it is sent again (the
	// same immutable key and bytes), the first to finish is taken and
	// the other cancelled. The delay is the HedgeQuantile of the recent
	// PUTs' durations (the last 128; none is hedged until 16 are known),
	// at least HedgeMinDelay, so that about 1 - HedgeQuantile of uploads
	// take a second PUT and the PUT tail is cut. When that quantile is
	// above HedgeMaxDelay, PUTs are not hedged: the store is slow for all
	// of them (a saturated link), and a second PUT would compete with the
	// first. 0 means 20 ms and 2 s; a negative HedgeMaxDelay turns hedging
	// off.
	HedgeMinDelay, HedgeMaxDelay time.Duration
	// HedgeQuantile is the quantile of recent PUT durations after which a
	// PUT is hedged, in (0, 1). 0 means 0.8: about one WAL upload in five
	// sends a second PUT; against 0.9 that took 3 to 5% off the p99 of a
	// produce on S3 Standard for 1 to 5% more PUTs (BENCHMARKS.md, "The
	// tails of the fast profiles").
	HedgeQuantile float64
	// CacheMemoryBytes bounds the object cache in memory; 0 means 256 MiB.
	CacheMemoryBytes int64
	// CacheDiskBytes bounds the object cache in DataDir; 0 means 8 GiB.
	CacheDiskBytes int64
	// DeletionGrace is how long an object that no batch needs waits
	// before it is deleted, so that reads under way finish. 0 means 60 s.
	DeletionGrace time.Duration
	// OrphanInterval is how often the orphan collector lists the bucket
	// for objects uploaded but never committed (a broker crashed between
	// its PUT and its commit, or the commit failed). 0 means 1 hour;
	// negative means never (call Broker.CollectOrphans).
	OrphanInterval time.Duration
	// OrphanGrace is how long ago an object must have been named (the
	// time in its key) to count as an orphan if no shard knows it. 0
	// means 10 minutes.
	OrphanGrace time.Duration
	// CommitDeadline refuses to commit an object named longer ago than
	// this (its producers get KAFKA_STORAGE_ERROR and retry), so that the
	// orphan collector never deletes an object committed late. It must be
	// less than OrphanGrace by more than the brokers' clocks may differ. 0
	// means OrphanGrace / 2.
	CommitDeadline time.Duration
	// Offload makes this broker the tiered offloader of every partition
	// (package replica): it materialises each into a local log under
	// DataDir (offsets injected, rolled at the topic's segment.bytes and
	// segment.ms), uploads each closed segment to <Prefix>tiered/ and
	// registers it, which releases the diskless batches below it. Fetch
	// then reads from the local log when it holds the offset, and from
	// tiered segments below the diskless start offset. One broker per
	// bucket should set it.
	Offload bool
	// LocalRetention and LocalRetentionBytes are local.retention.ms and
	// local.retention.bytes: how much of an offloaded local log stays (a
	// cache; what is not yet offloaded always stays). 0 means 1 hour and
	// no size bound; a negative LocalRetention keeps it all.
	LocalRetention      time.Duration
	LocalRetentionBytes int64
	// OffloadInterval is how often each partition's closed segments are
	// offloaded; 0 means 1 s.
	OffloadInterval time.Duration
	// RetentionInterval is how often retention.ms and retention.bytes are
	// enforced. 0 means 5 minutes.
	RetentionInterval time.Duration
	// TxnCheckInterval is how often the transactions of the shards this
	// broker leads are checked: those open past their timeout are
	// aborted, and ends left half done by a broker that died finished.
	// 0 means 10 s (Kafka's
	// transaction.abort.timed.out.transaction.cleanup.interval.ms).
	TxnCheckInterval time.Duration
	// TransactionalIDExpiration is Kafka's transactional.id.expiration.ms:
	// a transactional ID whose last transaction ended this long ago (or
	// that never began one) is removed at a check, so that clients naming
	// new IDs do not grow the coordinator's state without bound. 0 means 7
	// days; negative never.
	TransactionalIDExpiration time.Duration
	// CompactInterval is how often the partitions of compacted topics
	// (cleanup.policy compact) whose shard this broker leads are
	// compacted (replica.CompactPartition: segment's cleaner, Kafka's
	// rules, the result in a new object); 0 means 15 s (Kafka's
	// log.cleaner.backoff.ms), negative never.
	CompactInterval time.Duration
	// ApplyInterval is the coordinator's database commit interval: one
	// commit for the entries of this long. A fetch that follows a produce
	// still reads it at once (it has the commit made). 0 means 10 ms.
	ApplyInterval time.Duration
	// MaxPartitionsPerTopic bounds the partitions of one topic:
	// CreateTopic with more is INVALID_PARTITIONS, before anything is
	// written or allocated. 0 means DefaultMaxPartitionsPerTopic;
	// negative means no bound.
	MaxPartitionsPerTopic int32
	// MaxPartitions bounds the partitions of every topic together, as this
	// broker counts them: a CreateTopic that would go past it is
	// POLICY_VIOLATION (as Kafka's CreateTopicPolicy answers). Brokers
	// creating topics at the same moment on one bucket may together pass
	// it by one topic each. 0 means DefaultMaxPartitions; negative means
	// no bound.
	MaxPartitions int64
	// ValidationMemoryBytes bounds the memory that the produce batches
	// being validated may decompress into, over every request together
	// (a golang.org/x/sync/semaphore.Weighted). Validation streams the records out of
	// the decompressor and holds none of them, so what a batch costs is
	// its decoder's state (kbatch.DecompressionBytes): 256 KiB for gzip,
	// about 4 MiB for lz4, 8 MiB and more for zstd (its window), and for
	// snappy its largest block (up to the decompressed bound). gzip and
	// lz4 batches, whose cost does not grow with the bound, are validated
	// once at it. A zstd or snappy batch first takes what decompressing
	// it to a small share may cost (8 times its size, at least 1 MiB);
	// only one that inflates
	// past that share (a decompression bomb, or a batch that compressed
	// very well) takes what its whole bound of 64 MiB of records
	// (kbatch.DefaultMaxUncompressedBytes) may cost, and is decompressed
	// again; past the bound it is MESSAGE_TOO_LARGE. A request whose share is not free waits for it,
	// with its context: REQUEST_TIMED_OUT when that ends. 0 means
	// DefaultValidationMemoryBytes; it may not be less than one batch at
	// its whole bound may cost.
	ValidationMemoryBytes int64
	// Logger logs; nil means none.
	Logger *zap.Logger
	// MeterProvider, if not nil, gets the Broker's metrics: every figure
	// of Stats as OpenTelemetry instruments (metrics.go lists them), the
	// latency stages as histograms. nil means none, at no cost.
	MeterProvider metric.MeterProvider
	// Clock is the time source of linger, commit and append times,
	// timestamp validation, retention and grace periods, Fetch's MaxWait,
	// the background loops and hedging; nil means clock.System. (The
	// latencies of produce, upload and commit in Stats are measured in
	// real time.)
	Clock clock.Clock
}

// Defaults of Config's limits on hostile input.
const (
	// DefaultMaxPartitionsPerTopic is Config.MaxPartitionsPerTopic's
	// default. (Kafka has no such bound: its CreateTopicPolicy may set
	// one.)
	DefaultMaxPartitionsPerTopic = 10_000
	// DefaultMetadataPutsInFlight is Config.MetadataPutsInFlight's
	// default.
	DefaultMetadataPutsInFlight = 4
	// DefaultMaxPartitions is Config.MaxPartitions's default.
	DefaultMaxPartitions = 100_000
	// DefaultValidationMemoryBytes is Config.ValidationMemoryBytes's
	// default: one batch at its whole decompression bound beside a few
	// small ones.
	DefaultValidationMemoryBytes = 256 << 20
)

// resolved applies the defaults and checks the values.
func (c *Config) resolved() (Config, error) {
	var o Config
	if c != nil {
		o = *c
	}
	o.BucketURL = cmp.Or(o.BucketURL, "mem://")
	o.Shards = cmp.Or(o.Shards, 1)
	o.UploadConcurrency = cmp.Or(o.UploadConcurrency, 4)
	o.MetadataPutsInFlight = cmp.Or(o.MetadataPutsInFlight, DefaultMetadataPutsInFlight)
	o.UploadTimeout = cmp.Or(o.UploadTimeout, 30*time.Second)
	o.HedgeMinDelay = cmp.Or(o.HedgeMinDelay, 20*time.Millisecond)
	o.HedgeMaxDelay = cmp.Or(o.HedgeMaxDelay, 2*time.Second)
	o.HedgeQuantile = cmp.Or(o.HedgeQuantile, 0.8)
	o.DeletionGrace = cmp.Or(o.DeletionGrace, 60*time.Second)
	o.RetentionInterval = cmp.Or(o.RetentionInterval, 5*time.Minute)
	o.TxnCheckInterval = cmp.Or(o.TxnCheckInterval, 10*time.Second)
	o.CompactInterval = cmp.Or(o.CompactInterval, 15*time.Second)
	o.LocalRetention = cmp.Or(o.LocalRetention, time.Hour)
	o.Logger = cmp.Or(o.Logger, zap.NewNop())
	o.MaxPartitionsPerTopic = cmp.Or(o.MaxPartitionsPerTopic, DefaultMaxPartitionsPerTopic)
	o.MaxPartitions = cmp.Or(o.MaxPartitions, DefaultMaxPartitions)
	o.ValidationMemoryBytes = cmp.Or(o.ValidationMemoryBytes, DefaultValidationMemoryBytes)
	switch {

	case o.Shards < 0:
		return o, fmt.Errorf("diskless: Config.Shards %d is negative", o.Shards)
	case o.MetadataPutsInFlight < 0 || o.MetadataPutsInFlight > metalog.MaxBucketMaxInFlight:
		return o, fmt.Errorf("diskless: Config.MetadataPutsInFlight %d is not in [0, %d]", o.MetadataPutsInFlight, metalog.MaxBucketMaxInFlight)
	case o.ObjectsPerSecond < 0:
		return o, fmt.Errorf("diskless: Config.ObjectsPerSecond %v is negative", o.ObjectsPerSecond)
	case o.UploadConcurrency < 0:
		return o, fmt.Errorf("diskless: Config.UploadConcurrency %d is negative", o.UploadConcurrency)
	case o.UploadTimeout < 0:
		return o, fmt.Errorf("diskless: Config.UploadTimeout %v is negative", o.UploadTimeout)
	case o.HedgeMinDelay < 0:
		return o, fmt.Errorf("diskless: Config.HedgeMinDelay %v is negative", o.HedgeMinDelay)
	case o.HedgeMaxDelay > 0 && o.HedgeMaxDelay < o.HedgeMinDelay:
		return o, fmt.Errorf("diskless: Config.HedgeMaxDelay %v is less than HedgeMinDelay %v", o.HedgeMaxDelay, o.HedgeMinDelay)
	case o.HedgeQuantile <= 0 || o.HedgeQuantile >= 1:
		return o, fmt.Errorf("diskless: Config.HedgeQuantile %v is not in (0, 1)", o.HedgeQuantile)
	case o.MetadataLog == MetadataInFile && o.DataDir == "":
		return o, fmt.Errorf("diskless: Config.MetadataLog is MetadataInFile but Config.DataDir is empty")
	case o.MetadataLog < MetadataInBucket || o.MetadataLog > MetadataInMemory:
		return o, fmt.Errorf("diskless: Config.MetadataLog %d is not one of the MetadataIn constants", o.MetadataLog)
	case o.Commit < CommitAuto || o.Commit > CommitInParallel:
		return o, fmt.Errorf("diskless: Config.Commit %d is not one of the Commit constants", o.Commit)
	case o.Commit == CommitInParallel && o.Cluster != nil:
		return o, fmt.Errorf("diskless: Config.Commit is CommitInParallel with a Cluster: the parallel commit is for a broker that leads its shards alone")
	case o.LocalRetentionBytes < 0 || o.OffloadInterval < 0:
		return o, fmt.Errorf("diskless: Config.LocalRetentionBytes and Config.OffloadInterval may not be negative")
	case o.Cluster != nil && o.Offload:
		return o, fmt.Errorf("diskless: Config.Offload is for one broker per bucket; it cannot be used with Config.Cluster yet")
	case o.Cluster != nil && o.OpenMetadataLog != nil:
		return o, fmt.Errorf("diskless: Config.OpenMetadataLog and Config.Cluster both say where the metadata logs are; set one")
	case o.Cluster != nil && coordinator.CheckFeatures(o.Cluster.Features) != nil:
		return o, fmt.Errorf("diskless: Config.Cluster.Features: %w", coordinator.CheckFeatures(o.Cluster.Features))
	case o.Cluster != nil && coordinator.CheckPeerVersions(o.Cluster.PeerVersions) != nil:
		return o, fmt.Errorf("diskless: Config.Cluster.PeerVersions: %w", coordinator.CheckPeerVersions(o.Cluster.PeerVersions))
	case o.DeletionGrace < 0 || o.RetentionInterval < 0 || o.TxnCheckInterval < 0:
		return o, fmt.Errorf("diskless: Config.DeletionGrace and Config.RetentionInterval may not be negative")
	}
	if o.Cluster != nil {
		if err := o.Cluster.check(o.BrokerID); err != nil {
			return o, err
		}
	}
	return o, nil
}

// zstdHeader is a batch header of codec zstd: the batch that may cost the
// most to validate (kbatch.DecompressionBytes).
var zstdHeader = func() []byte {
	h := make([]byte, kbatch.HeaderSize)
	h[22] = byte(kbatch.CodecZstd) // the attributes' low byte
	return h
}()
