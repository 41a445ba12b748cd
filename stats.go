package diskless

import (
	"maps"
	"time"

	"github.com/diskless-go/diskless/clock"
	"github.com/diskless-go/diskless/wal"

	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/internal/histogram"
	"github.com/diskless-go/diskless/internal/objstats"
)

// Latency is a latency distribution of the Broker's Stats, as the
// Broker's histograms summarize it: Count, how many were measured; Mean,
// their mean; P50, P90, P99 and P999, their quantiles (each within 0.8%
// of the true value, never above Max); Max, the greatest. It is the
// histograms' own snapshot type (internal/histogram/histogram.go), not a
// copy of it.
type Latency = histogram.Summary

// StoreCalls counts calls to the object store, and the bytes they moved.
type StoreCalls struct {
	Calls, Bytes int64
}

// Stats is a snapshot of a Broker's counters.
type Stats struct {
	// Uptime is how long the broker has been open.
	Uptime time.Duration
	// BufferWait is how long produce requests waited in the buffer for
	// their object to close; Upload, the PUT of each object; Commit, each
	// object's commit; Total, each produce request (acks 1 or -1) from
	// the call to its answer.
	BufferWait, Upload, Commit, Total Latency
	// Objects is the objects committed; ObjectsPerSecond, over Uptime.
	Objects          int64
	ObjectsPerSecond float64
	// Coordinates is the batch coordinates committed.
	Coordinates int64
	// UploadErrors and CommitErrors count objects that failed.
	UploadErrors, CommitErrors int64
	// Hedges counts the WAL uploads that sent a second PUT because the
	// first had not finished after the hedge delay (Config.HedgeMinDelay);
	// each is a PUT, in Store too. HedgeWins counts those the second PUT
	// won.
	Hedges, HedgeWins int64
	// MetadataLogHedges counts the metadata-log puts sent again because
	// the first had not answered after the log's hedge delay (with
	// MetadataInBucket: metalog.BucketStats); each is a PUT, in
	// MetadataStore (or Store) too. MetadataLogHedgeWins counts those the
	// second put won.
	MetadataLogHedges, MetadataLogHedgeWins int64
	// ShardReopens counts the coordinator shards reopened after their
	// metadata log or database failed (see Broker's recovery in doc.go).
	ShardReopens int64
	// ObjectsDeleted counts the objects deleted once no batch needed them;
	// OrphansDeleted, those deleted because none was ever committed.
	ObjectsDeleted, OrphansDeleted int64
	// Shards is the number of coordinator shards; ShardCommits the commit
	// calls made to them (an object holding partitions of two shards takes
	// two).
	Shards       int
	ShardCommits int64
	// Store counts object-store calls by kind: PUT, GET, LIST, DELETE,
	// HEAD.
	Store map[string]StoreCalls
	// MetadataStore counts the calls to Config.MetadataBucket the same
	// way, when it is a bucket of its own (else nil: they are in Store).
	MetadataStore map[string]StoreCalls
	// CacheHitRate is the share of blocks the object cache served without
	// a GET.
	CacheHitRate float64
	// ReadsLocal, ReadsDiskless and ReadsTiered count the partition reads
	// of Fetch served from a materialised local log, from WAL objects and
	// from tiered segments.
	ReadsLocal, ReadsDiskless, ReadsTiered int64
	// FetchStorageErrors counts the partition reads of Fetch that failed
	// on an object that could not be read or did not hold what the
	// coordinator placed there (truncated, empty, overwritten): each was
	// answered KAFKA_STORAGE_ERROR (retriable), and each object is logged
	// at warn, with its key and the partition, once a minute.
	FetchStorageErrors int64
	// TxnsExpired counts the transactions this broker aborted because
	// they were open past their timeout, or finished for a broker that
	// left them half ended.
	TxnsExpired int64
	// Compactions counts the partition ranges this broker compacted
	// (Config.CompactInterval), CompactBytesRead the bytes of the
	// batches they replaced and CompactBytesWritten those of the
	// compacted ones.
	Compactions, CompactBytesRead, CompactBytesWritten int64
	// DirtyRatios is, for each partition of a compacted topic this
	// broker compacts (those whose shard it leads), the cleaner's dirty
	// ratio as its last pass found it (Kafka's cleanable ratio: the
	// bytes past the cleaner checkpoint over all diskless bytes): 0 right
	// after a pass that cleaned it, and the ratio that kept a pass from
	// cleaning (under min.cleanable.dirty.ratio) otherwise. A partition
	// no pass has looked at yet is absent.
	DirtyRatios map[wal.TopicPartition]float64
	// Revalidations counts the compressed produce batches that inflated
	// past their first share of Config.ValidationMemoryBytes and were
	// validated again with the whole decompression bound (decompression
	// bombs among them).
	Revalidations int64
	// Offloaded counts the segments this broker offloaded, and
	// OffloadedBytes their bytes (Config.Offload).
	Offloaded, OffloadedBytes int64
	// ShardLeaders is the ID of each coordinator shard's leader (-1: none
	// now), and Leading how many of them this broker leads; without
	// Config.Cluster, this broker leads every shard.
	ShardLeaders []int32
	Leading      int
	// Forwarded counts the coordinator calls this broker sent to another
	// broker's shard leader (commits of its objects, reads, admin),
	// ForwardRetries those sent again (no leader, connection lost, a
	// change of leader), and ForwardLatency their time from sending to
	// answer, on average.
	Forwarded, ForwardRetries int64
	ForwardLatency            time.Duration
	// FollowerReads counts the reads of partitions whose shard another
	// broker leads that this broker's followers answered, with no call to
	// the leader.
	FollowerReads int64
}

// Stats returns the broker's counters.
func (b *Broker) Stats() Stats {
	up := clock.Since(b.clk, b.started)
	s := Stats{
		Uptime:       up,
		BufferWait:   b.stats.bufferWait.Snapshot(),
		Upload:       b.stats.upload.Snapshot(),
		Commit:       b.stats.commit.Snapshot(),
		Total:        b.stats.total.Snapshot(),
		Objects:      b.stats.objects.Load(),
		Coordinates:  b.stats.coords.Load(),
		UploadErrors: b.stats.uploadErrors.Load(),
		CommitErrors: b.stats.commitErrors.Load(),
		Hedges:       b.stats.hedges.Load(),
		HedgeWins:    b.stats.hedgeWins.Load(),
		ShardReopens: b.stats.shardReopens.Load(),
	}
	for _, l := range b.logs {
		if bl, ok := l.(*metalog.Bucket); ok {
			ls := bl.Stats()
			s.MetadataLogHedges += ls.Hedges
			s.MetadataLogHedgeWins += ls.HedgeWins
		}
	}
	s.ReadsLocal, s.ReadsDiskless, s.ReadsTiered = b.stats.readLocal.Load(), b.stats.readDiskless.Load(), b.stats.readTiered.Load()
	s.FetchStorageErrors, s.Revalidations = b.stats.fetchStorageErrors.Load(), b.stats.revalidations.Load()
	s.TxnsExpired = b.stats.txnsExpired.Load()
	s.Compactions, s.CompactBytesRead, s.CompactBytesWritten = b.stats.compactions.Load(), b.stats.compactRead.Load(), b.stats.compactWritten.Load()
	b.stats.dirtyMu.Lock()
	s.DirtyRatios = maps.Clone(b.stats.dirty)
	b.stats.dirtyMu.Unlock()
	if b.off != nil {
		os := b.off.Stats()
		s.Offloaded, s.OffloadedBytes = os.Segments, os.Bytes
	}
	cs := b.coord.Stats()
	for _, sh := range cs.Shards {
		s.ObjectsDeleted += sh.Deleted
	}
	s.OrphansDeleted, s.Shards, s.ShardCommits = cs.OrphansDeleted, len(cs.Shards), cs.ShardCommits
	for i, leading := range cs.Leading {
		id := int32(-1)
		if m, ok := b.ShardLeader(i); ok {
			id = m.ID
		}
		if leading {
			s.Leading++
			id = b.cfg.BrokerID
		}
		s.ShardLeaders = append(s.ShardLeaders, id)
	}
	s.Forwarded, s.ForwardRetries, s.FollowerReads = cs.Forwarded, cs.ForwardRetries, cs.FollowerReads
	if cs.Forwarded > 0 {
		s.ForwardLatency = cs.ForwardTime / time.Duration(cs.Forwarded)
	}
	s.ObjectsPerSecond = float64(s.Objects) / max(up.Seconds(), 1e-9)
	s.Store = storeCalls(b.objects)
	if b.metaObjects != nil {
		s.MetadataStore = storeCalls(b.metaObjects)
	}
	c := b.cache.Stats()
	if n := c.Hits + c.DiskHits + c.Misses; n > 0 {
		s.CacheHitRate = float64(c.Hits+c.DiskHits) / float64(n)
	}
	return s
}

// storeCalls is a counter's snapshot by kind of call.
func storeCalls(c *objstats.Counter) map[string]StoreCalls {
	o := c.Snapshot()
	m := make(map[string]StoreCalls, 5)
	for k := objstats.Put; k <= objstats.Head; k++ {
		m[k.String()] = StoreCalls{Calls: o.Calls[k], Bytes: o.Bytes[k]}
	}
	return m
}
