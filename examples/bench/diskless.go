package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/faultbucket"
	"github.com/diskless-go/diskless/internal/histogram"
)

// disklessTarget sends to a Broker over a mem:// bucket wrapped with the
// profile's faults.
type disklessTarget struct {
	broker *diskless.Broker
	inner  *blob.Bucket
	bucket *blob.Bucket
	faults *faultbucket.Faults
	acks   acksLevel
	// The metadata log's bucket of its own (-metadata-profile), or nil.
	metaInner, metaBucket *blob.Bucket
	metaFaults            *faultbucket.Faults
	// The etcd of -metadata etcd, or nil.
	etcd *etcdServer

	// Store-side PUT latencies, measured in the window: WAL objects and
	// metadata-log entries.
	win               atomic.Pointer[window]
	walPuts, metaPuts histogram.Histogram
	walPutDelays      histogram.Histogram // the latency injected into them
	walPutCount       atomic.Int64
	walPutBytes       atomic.Int64
}

const benchTopic = "bench"

// retainBytes is the topic's retention.bytes per partition: enough for
// the run, small enough that mem:// stays bounded in a 30-minute run.
const retainBytes = 64 << 20

// disklessConfig is what a diskless run changes from the Broker's
// defaults.
type disklessConfig struct {
	profile           faultbucket.Profile
	seed              uint64
	metadata          diskless.MetadataLog
	linger            time.Duration
	bufferMaxBytes    int64
	maxBufferedBytes  int64
	uploadConcurrency int
	objectsPerSecond  float64
	metaInFlight      int
	commit            diskless.CommitMode
	hedgeMax          time.Duration
	hedgeQuantile     float64
	partitions        int
	acks              acksLevel
	// metadataProfile, if set, gives the metadata log a bucket of its
	// own with these faults (Config.MetadataBucket).
	metadataProfile *faultbucket.Profile
	// etcd puts the metadata log in etcd (etcdlog.Log): diskless-etcd
	// started for the run, or etcdEndpoints.
	etcd          bool
	etcdEndpoints []string
}

func openDiskless(ctx context.Context, c disklessConfig) (*disklessTarget, error) {
	d := &disklessTarget{acks: c.acks, inner: memblob.OpenBucket(nil)}
	var err error
	d.bucket, d.faults, err = faultbucket.Wrap(d.inner, &faultbucket.Options{Profile: c.profile, Seed: c.seed, Observe: d.observe})
	if err != nil {
		d.inner.Close()
		return nil, err
	}
	if c.metadataProfile != nil {
		d.metaInner = memblob.OpenBucket(nil)
		d.metaBucket, d.metaFaults, err = faultbucket.Wrap(d.metaInner, &faultbucket.Options{Profile: *c.metadataProfile, Seed: c.seed ^ 0x6d657461, Observe: d.observe})
		if err != nil {
			d.metaInner.Close()
			d.bucket.Close()
			d.inner.Close()
			return nil, err
		}
	}
	var openLog func(ctx context.Context, shard int) (metalog.Log, error)
	if c.etcd {
		if d.etcd, err = startEtcd(ctx, c.etcdEndpoints); err != nil {
			d.closeBuckets()
			return nil, err
		}
		run := fmt.Sprintf("%d-%x", time.Now().UnixNano(), c.seed)
		openLog = func(ctx context.Context, shard int) (metalog.Log, error) { return d.etcd.openLog(ctx, run, shard) }
	}
	d.broker, err = diskless.Open(ctx, &diskless.Config{
		OpenMetadataLog:      openLog,
		Bucket:               d.bucket,
		MetadataBucket:       d.metaBucket,
		MetadataLog:          c.metadata,
		Linger:               c.linger,
		ObjectsPerSecond:     c.objectsPerSecond,
		HedgeMaxDelay:        c.hedgeMax,
		HedgeQuantile:        c.hedgeQuantile,
		MetadataPutsInFlight: c.metaInFlight,
		Commit:               c.commit,
		BufferMaxBytes:       c.bufferMaxBytes,
		MaxBufferedBytes:     c.maxBufferedBytes,
		UploadConcurrency:    c.uploadConcurrency,
		// Memory: mem:// keeps every object, so a run keeps 64 MiB a
		// partition and deletes the rest soon after.
		RetentionInterval: 15 * time.Second,
		DeletionGrace:     15 * time.Second,
	})
	if err != nil {
		d.closeBuckets()
		return nil, err
	}
	if _, err := d.broker.CreateTopic(ctx, benchTopic, diskless.TopicConfig{Partitions: int32(c.partitions), RetentionBytes: retainBytes}); err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

// observe records the PUTs that end inside the window.
func (d *disklessTarget) observe(c faultbucket.Call) {
	if c.Op != faultbucket.Put || c.Err != nil {
		return
	}
	w := d.win.Load()
	if w == nil || !w.contains(c.Start.Add(c.Duration)) {
		return
	}
	switch {
	case strings.HasPrefix(c.Key, "wal/"):
		d.walPuts.Record(c.Duration)
		d.walPutDelays.Record(c.Delay)
		d.walPutCount.Add(1)
		d.walPutBytes.Add(c.Bytes)
	case strings.HasPrefix(c.Key, "meta/"):
		d.metaPuts.Record(c.Duration)
	}
}

func (d *disklessTarget) send(ctx context.Context, partition int32, batch []byte) error {
	resp, err := d.broker.Produce(ctx, diskless.ProduceRequest{Acks: int16(d.acks), Partitions: []diskless.ProducePartition{
		{Topic: benchTopic, Partition: partition, Records: batch},
	}})
	if err != nil {
		return err
	}
	return resp.Partitions[0].Err
}

func (d *disklessTarget) initProducer(ctx context.Context) (int64, int16, error) {
	return d.broker.InitProducerID(ctx)
}

// stats returns the calls to the WAL objects' bucket and to the metadata
// log's own (zero without one).
func (d *disklessTarget) stats() (wal, meta faultbucket.Stats) {
	wal = d.faults.Stats()
	if d.metaFaults != nil {
		meta = d.metaFaults.Stats()
	}
	return wal, meta
}

func (d *disklessTarget) close() error {
	return errors.Join(d.broker.Close(), d.closeBuckets())
}

func (d *disklessTarget) closeBuckets() error {
	errs := []error{d.bucket.Close(), d.inner.Close()}
	if d.metaBucket != nil {
		errs = append(errs, d.metaBucket.Close(), d.metaInner.Close())
	}
	if d.etcd != nil {
		errs = append(errs, d.etcd.close())
	}
	return errors.Join(errs...)
}
