package diskless

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless/faultbucket"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

var (
	faultPhase  = flag.Duration("fault.phase", 3*time.Second, "how long TestFaultInjection produces in each phase")
	faultOutage = flag.Duration("fault.outage", 30*time.Second, "how long TestFaultInjection's object store is down")
)

const faultPartitions = 4

// faultAck is one batch a producer of TestFaultInjection had
// acknowledged.
type faultAck struct {
	p      int32
	seq, n int32
	base   int64
}

// faultValue is the value of record seq of partition p.
func faultValue(p, seq int32) []byte {
	v := make([]byte, 8)
	binary.BigEndian.PutUint32(v, uint32(p))
	binary.BigEndian.PutUint32(v[4:], uint32(seq))
	return v
}

// TestFaultInjection runs idempotent producers against a broker whose
// object store fails 10% of PUTs and GETs, then stalls every call past
// the upload timeout, then is down for -fault.outage (30 s), then comes
// back. Produce may only answer retriable errors; afterwards a broker
// with an empty data folder, reading through a store that still fails 10%
// of GETs, finds every acknowledged record exactly once at its
// acknowledged offset, and no record twice.
func TestFaultInjection(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the outage alone takes -fault.outage")
	}
	ctx := t.Context()
	inner := memblob.OpenBucket(nil)
	defer inner.Close()
	var injected atomic.Int64
	bucket, faults, err := faultbucket.Wrap(inner, &faultbucket.Options{
		Seed: 7,
		Observe: func(c faultbucket.Call) {
			if errors.Is(c.Err, faultbucket.ErrInjected) {
				injected.Add(1)
			}
		},
	})
	require.NoError(t, err)
	defer bucket.Close()
	setRates := func(put, get float64) {
		require.NoError(t, faults.SetErrorRate(faultbucket.Put, put))
		require.NoError(t, faults.SetErrorRate(faultbucket.Get, get))
	}

	cfg := func(dir string) *Config {
		return &Config{
			Bucket: bucket, DataDir: dir, Shards: 2, Linger: 5 * time.Millisecond,
			UploadTimeout: 500 * time.Millisecond, CacheMemoryBytes: 8 << 20,
			OrphanInterval: -1, OrphanGrace: 2 * time.Second, DeletionGrace: 100 * time.Millisecond,
		}
	}
	b, err := Open(ctx, cfg(t.TempDir()))
	require.NoError(t, err)
	defer func() { b.Close() }()
	_, err = b.CreateTopic(ctx, "faults", TopicConfig{Partitions: faultPartitions})
	require.NoError(t, err)

	// The producers: one idempotent producer per partition, one request
	// in flight, each batch sent again until it is acknowledged, as a
	// Kafka producer does.
	var (
		mu       sync.Mutex
		acks     []faultAck
		retries  = map[kafkaerr.Code]int{}
		lastAck  [faultPartitions]atomic.Int64 // unix nanos
		stop     = make(chan struct{})
		wg       sync.WaitGroup
		produced atomic.Int64
	)
	for p := range int32(faultPartitions) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var pid int64
			var epoch int16
			for {
				var err error
				if pid, epoch, err = b.InitProducerID(ctx); err == nil {
					break
				}
				require.True(t, kafkaerr.CodeOf(err).Retriable(), "InitProducerID: %v", err)
				time.Sleep(20 * time.Millisecond)
			}
			for seq := int32(0); ; {
				select {
				case <-stop:
					return
				default:
				}
				n := int32(1 + seq%7)
				bld := kbatch.NewBuilder(kbatch.CodecNone)
				bld.SetProducer(pid, epoch, seq)
				for i := range n {
					bld.Append(time.Now().UnixMilli(), nil, faultValue(p, seq+i))
				}
				raw, err := bld.Build(nil)
				require.NoError(t, err)
				rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				resp, err := b.Produce(rctx, ProduceRequest{Acks: -1, Partitions: []ProducePartition{{Topic: "faults", Partition: p, Records: raw}}})
				cancel()
				code := kafkaerr.CodeOf(err)
				if err == nil {
					code = resp.Partitions[0].ErrorCode
				}
				if code != kafkaerr.NoError {
					require.True(t, code.Retriable(), "partition %d: a produce error a client does not retry: %v %v", p, err, resp)
					mu.Lock()
					retries[code]++
					mu.Unlock()
					time.Sleep(10 * time.Millisecond) // retry.backoff.ms
					continue
				}
				mu.Lock()
				acks = append(acks, faultAck{p: p, seq: seq, n: n, base: resp.Partitions[0].BaseOffset})
				mu.Unlock()
				lastAck[p].Store(time.Now().UnixNano())
				produced.Add(int64(n))
				seq += n
			}
		}()
	}
	waitAcks := func(what string, within time.Duration) {
		since := time.Now().UnixNano()
		require.Eventually(t, func() bool {
			for p := range faultPartitions {
				if lastAck[p].Load() <= since {
					return false
				}
			}
			return true
		}, within, 10*time.Millisecond, "%s: every partition acknowledges again within %v", what, within)
	}

	// Phase 1: 10% of PUTs and GETs fail, and 5% of WAL uploads fail
	// after they reached the store (an answer lost: the object is left
	// uncommitted, an orphan).
	var (
		hookMu   sync.Mutex
		hookRand = rand.New(rand.NewPCG(7, 7))
		metaDown atomic.Bool
		ambig    atomic.Int64
	)
	faults.SetHook(func(op faultbucket.Op, key string) *faultbucket.Error {
		if metaDown.Load() && strings.Contains(key, "meta/") {
			return &faultbucket.Error{}
		}
		if op == faultbucket.Put && strings.Contains(key, "wal/") {
			hookMu.Lock()
			defer hookMu.Unlock()
			if hookRand.Float64() < 0.05 {
				ambig.Add(1)
				return &faultbucket.Error{AfterEffect: true}
			}
		}
		return nil
	})
	setRates(0.1, 0.1)
	waitAcks("10% failures", 30*time.Second)
	time.Sleep(*faultPhase)
	// Phase 2: every call hangs for twice the upload timeout.
	faults.Stall(time.Second)
	time.Sleep(time.Second)
	waitAcks("after a stall", 30*time.Second)
	// Phase 3: the metadata log is down for longer than its retries
	// (about 6 s), uploads are not: commits fail, the shards stop, and
	// are reopened once the log answers.
	metaDown.Store(true)
	time.Sleep(10 * time.Second)
	metaDown.Store(false)
	waitAcks("after the metadata log's outage", 30*time.Second)
	// Phase 4: the store is down for -fault.outage, then back (still
	// failing 10% of calls); the broker recovers by itself.
	faults.Outage(*faultOutage)
	outageStart := time.Now()
	time.Sleep(*faultOutage)
	waitAcks("after the outage", 60*time.Second)
	recovered := time.Since(outageStart) - *faultOutage
	time.Sleep(*faultPhase)
	close(stop)
	wg.Wait()
	s := b.Stats()
	require.NoError(t, b.Close())
	mu.Lock()
	t.Logf("%d records in %d batches acknowledged; retried: %v; %d calls failed by injection (%d of them WAL uploads that took effect); %d upload and %d commit failures; %d shard reopens; produce recovered %v after the outage ended",
		produced.Load(), len(acks), retries, injected.Load(), ambig.Load(), s.UploadErrors, s.CommitErrors, s.ShardReopens, recovered.Round(time.Millisecond))
	mu.Unlock()
	require.Positive(t, s.ShardReopens, "the shards the metadata log's outage stopped were reopened")
	require.Positive(t, s.CommitErrors)

	// A broker with an empty data folder, through a store that still
	// fails 10% of GETs, reads everything back.
	setRates(0, 0.1)
	var b2 *Broker
	require.Eventually(t, func() bool {
		b2, err = Open(ctx, cfg(t.TempDir()))
		return err == nil
	}, 30*time.Second, 50*time.Millisecond)
	defer b2.Close()
	type rec struct{ p, seq int32 }
	seen := map[rec]int64{}
	records := 0
	for p := range int32(faultPartitions) {
		at := map[int64]rec{}
		for o, v := range readValues(t, b2, "faults", p, 30*time.Second) {
			got := rec{int32(binary.BigEndian.Uint32(v)), int32(binary.BigEndian.Uint32(v[4:]))}
			require.Equal(t, p, got.p, "offset %d holds partition %d's record", o, got.p)
			first, dup := seen[got]
			require.False(t, dup, "partition %d: record %d at offsets %d and %d", p, got.seq, first, o)
			seen[got], at[int64(o)] = int64(o), got
			records++
		}
		for _, a := range acks {
			if a.p != p {
				continue
			}
			for i := range a.n {
				got, ok := at[a.base+int64(i)]
				require.True(t, ok, "partition %d: acknowledged offset %d is lost", p, a.base+int64(i))
				require.Equal(t, rec{p, a.seq + i}, got, "partition %d offset %d", p, a.base+int64(i))
			}
		}
	}
	require.GreaterOrEqual(t, int64(records), produced.Load())
	t.Logf("%d records read back through %d%% failing GETs: every acknowledged one at its offset, none twice, none lost", records, 10)

	// Objects the failures left uncommitted are orphans. Once every
	// record is deleted, the lifecycle deletes the committed objects and
	// the collector the orphans, through the failing store: the bucket
	// ends empty.
	for p := range int32(faultPartitions) {
		require.Eventually(t, func() bool {
			_, err := b2.DeleteRecords(ctx, "faults", p, -1)
			return err == nil
		}, 30*time.Second, 10*time.Millisecond)
	}
	before := len(walKeys(t, inner, ""))
	require.Eventually(t, func() bool {
		b2.CollectOrphans(ctx) // failing calls are retried on the next run
		return len(walKeys(t, inner, "")) == 0
	}, 60*time.Second, 100*time.Millisecond)
	s2 := b2.Stats()
	require.Positive(t, s2.OrphansDeleted)
	t.Logf("%d WAL objects in the bucket: %d deleted by the lifecycle, %d orphans collected", before, s2.ObjectsDeleted, s2.OrphansDeleted)
}
