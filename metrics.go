package diskless

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Metrics through OpenTelemetry (Config.MeterProvider): every figure of
// Stats, under the meter "github.com/diskless-go/diskless", named after
// OTel's conventions (dotted lower-case names, durations in seconds as
// histograms named *.duration, counts as counters with a {unit}, bytes
// in By), in the diskless namespace, since neither OTel nor Kafka names
// these stages. Exported through Prometheus (examples/kafka-broker's
// -metrics-addr), dots become underscores and units suffixes:
// diskless.produce.duration is diskless_produce_duration_seconds, a
// counter gains _total.
//
// Histograms, recorded as each happens (nothing at all without a
// provider):
//
//	diskless.produce.duration             s   a produce request (acks 1 or -1), call to answer (Stats.Total)
//	diskless.produce.buffer_wait.duration s   a produce request's wait for its WAL object to close (Stats.BufferWait)
//	diskless.wal.upload.duration          s   the PUT of a WAL object (Stats.Upload)
//	diskless.wal.commit.duration          s   the commit of a WAL object (Stats.Commit)
//
// Counters and gauges, read from Stats when the metrics are collected
// (observable: they cost nothing between collections):
//
//	diskless.wal.objects              {object}     WAL objects committed (Stats.Objects)
//	diskless.wal.coordinates          {batch}      batch coordinates committed (Stats.Coordinates)
//	diskless.wal.errors               {object}     objects that failed; stage=upload|commit (UploadErrors, CommitErrors)
//	diskless.wal.hedges               {put}        second PUTs of WAL uploads (Hedges); diskless.wal.hedge_wins those that won (HedgeWins)
//	diskless.store.calls              {call}       object-store calls; op=PUT|GET|LIST|DELETE|HEAD, bucket=data|metadata (Store, MetadataStore)
//	diskless.store.bytes              By           their bytes, the same way
//	diskless.metadata_log.hedges      {put}        metadata-log puts sent again (MetadataLogHedges); .hedge_wins (MetadataLogHedgeWins)
//	diskless.coordinator.commits      {call}       commit calls to the coordinator shards (ShardCommits)
//	diskless.coordinator.reopens      {reopen}     shards reopened after a failure (ShardReopens)
//	diskless.objects.deleted          {object}     objects deleted; reason=unused|orphan (ObjectsDeleted, OrphansDeleted)
//	diskless.fetch.reads              {read}       partition reads of Fetch; source=local|diskless|tiered (ReadsLocal, ...)
//	diskless.fetch.storage_errors     {read}       reads answered KAFKA_STORAGE_ERROR (FetchStorageErrors)
//	diskless.produce.revalidations    {batch}      batches validated again with the whole bound (Revalidations)
//	diskless.txns.expired             {txn}        transactions aborted at their timeout or finished for another broker (TxnsExpired)
//	diskless.compactions              {range}      partition ranges compacted (Compactions); diskless.compaction.bytes By, direction=read|written (CompactBytesRead, CompactBytesWritten)
//	diskless.compaction.dirty_ratio.max 1          gauge: the greatest of DirtyRatios (Kafka's max-dirty-percent, as a ratio)
//	diskless.offload.segments         {segment}    segments offloaded (Offloaded); diskless.offload.bytes By (OffloadedBytes)
//	diskless.forward.calls            {call}       coordinator calls sent to another broker (Forwarded); .retries (ForwardRetries)
//	diskless.follower.reads           {read}       reads answered by this broker's followers (FollowerReads)
//	diskless.shards                   {shard}      gauge: coordinator shards (Shards); diskless.shards.leading, those this broker leads (Leading)
//	diskless.cache.hit_ratio          1            gauge: share of blocks served without a GET (CacheHitRate)
//	diskless.cache.size               By           gauge: bytes in the object cache; tier=memory|disk
//	diskless.buffer.size              By           gauge: bytes in the produce buffer, waiting for their object
//	diskless.uptime                   s            gauge: how long the broker has been open (Uptime)
type brokerMetrics struct {
	produce, bufferWait, upload, commit metric.Float64Histogram
	reg                                 metric.Registration
}

// meterName is the instrumentation scope of the Broker's metrics.
const meterName = "github.com/diskless-go/diskless"

// latencyBuckets are the histogram boundaries, in seconds: 1 ms to 30 s,
// about three to a decade, enough to see a p99 move between S3 Express
// (ms), S3 Standard (hundreds of ms) and an outage (s).
var latencyBuckets = []float64{0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30}

// newMetrics creates the Broker's instruments on mp and registers the
// callback that reads Stats; nil mp means none.
func newMetrics(b *Broker, mp metric.MeterProvider) (*brokerMetrics, error) {
	if mp == nil {
		return nil, nil
	}
	m := mp.Meter(meterName)
	var bm brokerMetrics
	var err error
	hist := func(dst *metric.Float64Histogram, name, desc string) {
		if err == nil {
			*dst, err = m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(latencyBuckets...))
		}
	}
	hist(&bm.produce, "diskless.produce.duration", "Produce requests (acks 1 or -1), from the call to the answer.")
	hist(&bm.bufferWait, "diskless.produce.buffer_wait.duration", "The wait of produce requests for their WAL object to close.")
	hist(&bm.upload, "diskless.wal.upload.duration", "The PUT of each WAL object.")
	hist(&bm.commit, "diskless.wal.commit.duration", "The commit of each WAL object to the coordinator.")

	var obs []metric.Observable
	counter := func(name, unit, desc string) metric.Int64ObservableCounter {
		if err != nil {
			return nil
		}
		var c metric.Int64ObservableCounter
		c, err = m.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		obs = append(obs, c)
		return c
	}
	gauge := func(name, unit, desc string) metric.Float64ObservableGauge {
		if err != nil {
			return nil
		}
		var g metric.Float64ObservableGauge
		g, err = m.Float64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		obs = append(obs, g)
		return g
	}
	objects := counter("diskless.wal.objects", "{object}", "WAL objects committed.")
	coords := counter("diskless.wal.coordinates", "{batch}", "Batch coordinates committed.")
	walErrors := counter("diskless.wal.errors", "{object}", "WAL objects that failed, by stage (upload, commit).")
	hedges := counter("diskless.wal.hedges", "{put}", "Second PUTs of WAL uploads sent after the hedge delay.")
	hedgeWins := counter("diskless.wal.hedge_wins", "{put}", "Second PUTs of WAL uploads that finished first.")
	storeCalls := counter("diskless.store.calls", "{call}", "Object-store calls, by op and bucket.")
	storeBytes := counter("diskless.store.bytes", "By", "Bytes of object-store calls, by op and bucket.")
	logHedges := counter("diskless.metadata_log.hedges", "{put}", "Metadata-log puts sent again after the hedge delay.")
	logHedgeWins := counter("diskless.metadata_log.hedge_wins", "{put}", "Metadata-log puts sent again that finished first.")
	commits := counter("diskless.coordinator.commits", "{call}", "Commit calls to the coordinator shards.")
	reopens := counter("diskless.coordinator.reopens", "{reopen}", "Coordinator shards reopened after their log or database failed.")
	deleted := counter("diskless.objects.deleted", "{object}", "Objects deleted, by reason (unused, orphan).")
	reads := counter("diskless.fetch.reads", "{read}", "Partition reads of Fetch, by source (local, diskless, tiered).")
	storageErrors := counter("diskless.fetch.storage_errors", "{read}", "Partition reads of Fetch answered KAFKA_STORAGE_ERROR.")
	revalidations := counter("diskless.produce.revalidations", "{batch}", "Compressed batches validated again with the whole decompression bound.")
	txnsExpired := counter("diskless.txns.expired", "{txn}", "Transactions aborted at their timeout, or finished for a broker that left them half ended.")
	compactions := counter("diskless.compactions", "{range}", "Partition ranges compacted.")
	compactBytes := counter("diskless.compaction.bytes", "By", "Bytes of the batches compaction replaced (read) and of those it wrote.")
	offloaded := counter("diskless.offload.segments", "{segment}", "Segments offloaded.")
	offloadedBytes := counter("diskless.offload.bytes", "By", "Bytes of the segments offloaded.")
	forwarded := counter("diskless.forward.calls", "{call}", "Coordinator calls sent to another broker's shard leader.")
	forwardRetries := counter("diskless.forward.retries", "{call}", "Coordinator calls sent to another broker again.")
	followerReads := counter("diskless.follower.reads", "{read}", "Reads of partitions another broker leads answered by this broker's followers.")
	shards := gauge("diskless.shards", "{shard}", "Coordinator shards.")
	leading := gauge("diskless.shards.leading", "{shard}", "Coordinator shards this broker leads.")
	hitRatio := gauge("diskless.cache.hit_ratio", "1", "Share of blocks the object cache served without a GET.")
	cacheSize := gauge("diskless.cache.size", "By", "Bytes in the object cache, by tier (memory, disk).")
	bufferSize := gauge("diskless.buffer.size", "By", "Bytes in the produce buffer, waiting for their WAL object.")
	dirtyRatio := gauge("diskless.compaction.dirty_ratio.max", "1", "The greatest dirty ratio of the compacted partitions this broker compacts, as their last passes found them.")
	uptime := gauge("diskless.uptime", "s", "How long the broker has been open.")
	if err != nil {
		return nil, err
	}
	kv := func(k, v string) metric.ObserveOption { return metric.WithAttributes(attribute.String(k, v)) }
	bm.reg, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := b.Stats()
		o.ObserveInt64(objects, s.Objects)
		o.ObserveInt64(coords, s.Coordinates)
		o.ObserveInt64(walErrors, s.UploadErrors, kv("stage", "upload"))
		o.ObserveInt64(walErrors, s.CommitErrors, kv("stage", "commit"))
		o.ObserveInt64(hedges, s.Hedges)
		o.ObserveInt64(hedgeWins, s.HedgeWins)
		for _, st := range []struct {
			bucket string
			calls  map[string]StoreCalls
		}{{"data", s.Store}, {"metadata", s.MetadataStore}} {
			for op, c := range st.calls {
				attrs := metric.WithAttributes(attribute.String("op", op), attribute.String("bucket", st.bucket))
				o.ObserveInt64(storeCalls, c.Calls, attrs)
				o.ObserveInt64(storeBytes, c.Bytes, attrs)
			}
		}
		o.ObserveInt64(logHedges, s.MetadataLogHedges)
		o.ObserveInt64(logHedgeWins, s.MetadataLogHedgeWins)
		o.ObserveInt64(commits, s.ShardCommits)
		o.ObserveInt64(reopens, s.ShardReopens)
		o.ObserveInt64(deleted, s.ObjectsDeleted, kv("reason", "unused"))
		o.ObserveInt64(deleted, s.OrphansDeleted, kv("reason", "orphan"))
		o.ObserveInt64(reads, s.ReadsLocal, kv("source", "local"))
		o.ObserveInt64(reads, s.ReadsDiskless, kv("source", "diskless"))
		o.ObserveInt64(reads, s.ReadsTiered, kv("source", "tiered"))
		o.ObserveInt64(storageErrors, s.FetchStorageErrors)
		o.ObserveInt64(revalidations, s.Revalidations)
		o.ObserveInt64(txnsExpired, s.TxnsExpired)
		o.ObserveInt64(compactions, s.Compactions)
		o.ObserveInt64(compactBytes, s.CompactBytesRead, kv("direction", "read"))
		o.ObserveInt64(compactBytes, s.CompactBytesWritten, kv("direction", "written"))
		maxDirty := 0.0
		for _, r := range s.DirtyRatios {
			maxDirty = max(maxDirty, r)
		}
		o.ObserveFloat64(dirtyRatio, maxDirty)
		o.ObserveInt64(offloaded, s.Offloaded)
		o.ObserveInt64(offloadedBytes, s.OffloadedBytes)
		o.ObserveInt64(forwarded, s.Forwarded)
		o.ObserveInt64(forwardRetries, s.ForwardRetries)
		o.ObserveInt64(followerReads, s.FollowerReads)
		o.ObserveFloat64(shards, float64(s.Shards))
		o.ObserveFloat64(leading, float64(s.Leading))
		o.ObserveFloat64(hitRatio, s.CacheHitRate)
		cs := b.cache.Stats()
		o.ObserveFloat64(cacheSize, float64(cs.MemoryBytes), kv("tier", "memory"))
		o.ObserveFloat64(cacheSize, float64(cs.DiskBytes), kv("tier", "disk"))
		o.ObserveFloat64(bufferSize, float64(b.buffer.Buffered()))
		o.ObserveFloat64(uptime, s.Uptime.Seconds())
		return nil
	}, obs...)
	if err != nil {
		return nil, err
	}
	return &bm, nil
}

// unregister stops the Stats callback (at Close).
func (m *brokerMetrics) unregister() error {
	if m == nil || m.reg == nil {
		return nil
	}
	return m.reg.Unregister()
}
