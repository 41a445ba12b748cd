package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/segment"
)

// classicLeader is the classic baseline: a Kafka partition leader without
// replication, one segment.Log per partition in a local folder. A produce
// is validated as a leader validates it, queued for its partition, and
// appended by the partition's appender (one append at a time, as under
// Kafka's partition lock): the appender checks an idempotent producer's
// sequence, assigns the offsets (SetBaseOffset), stamps the leader epoch
// and appends. Nothing is fsynced (Kafka's default flush policy). acks=0
// answers once queued; acks=1 and acks=all once appended, which are the
// same thing for a leader with no followers.
type classicLeader struct {
	dir    string
	acks   acksLevel
	parts  []*classicPartition
	nextID atomic.Int64
	stop   chan struct{}
	wg     sync.WaitGroup
}

type classicPartition struct {
	log   *segment.Log
	queue chan *classicRequest
	next  int64
	seqs  map[int64]int32 // producer id -> next sequence
}

type classicRequest struct {
	batch kbatch.Batch
	done  chan error // nil for acks=0
}

// classicSegmentBytes and classicRetainBytes bound the disk a long run
// uses: segments of 64 MiB, of which the newest 256 MiB per partition are
// kept (retention checked every second).
const (
	classicSegmentBytes = 64 << 20
	classicRetainBytes  = 256 << 20
)

func openClassic(ctx context.Context, dir string, partitions int, acks acksLevel) (*classicLeader, error) {
	l := &classicLeader{dir: dir, acks: acks, stop: make(chan struct{})}
	for p := range partitions {
		log, err := segment.OpenLog(ctx, filepath.Join(dir, fmt.Sprintf("bench-%d", p)), &segment.LogOptions{
			SegmentBytes: classicSegmentBytes, RetentionBytes: classicRetainBytes,
		})
		if err != nil {
			l.close()
			return nil, err
		}
		part := &classicPartition{log: log, queue: make(chan *classicRequest, 256), seqs: map[int64]int32{}}
		l.parts = append(l.parts, part)
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			part.appender()
		}()
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		l.retention()
	}()
	return l, nil
}

// appender appends its partition's requests in order until the queue
// closes.
func (p *classicPartition) appender() {
	ctx := context.Background()
	for r := range p.queue {
		err := p.append(ctx, r.batch)
		if r.done != nil {
			r.done <- err
		}
	}
}

func (p *classicPartition) append(ctx context.Context, b kbatch.Batch) error {
	if b.HasProducerID() {
		if want, ok := p.seqs[b.ProducerID()]; ok && b.BaseSequence() != want {
			return fmt.Errorf("OUT_OF_ORDER_SEQUENCE_NUMBER: producer %d sent %d, expected %d", b.ProducerID(), b.BaseSequence(), want)
		}
	}
	b.SetBaseOffset(p.next)
	b.SetPartitionLeaderEpoch(0)
	info, err := p.log.Append(ctx, b)
	if err != nil {
		return err
	}
	p.next = info.LastOffset + 1
	if b.HasProducerID() {
		p.seqs[b.ProducerID()] = kbatch.IncrementSequence(b.BaseSequence(), b.LastOffsetDelta()+1)
	}
	return nil
}

// retention deletes old segments every second, so that the disk a run
// uses stays bounded.
func (l *classicLeader) retention() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			for _, p := range l.parts {
				p.log.DeleteOldSegments(context.Background())
			}
		}
	}
}

func (l *classicLeader) initProducer(context.Context) (int64, int16, error) {
	return l.nextID.Add(1), 0, nil
}

func (l *classicLeader) send(ctx context.Context, partition int32, batch []byte) error {
	res, err := kbatch.Validate(batch, &kbatch.ValidateOptions{TimestampType: kbatch.CreateTime, Now: time.Now()})
	if err != nil {
		return err
	}
	r := &classicRequest{batch: res.Batch}
	if l.acks != 0 {
		r.done = make(chan error, 1)
	}
	select {
	case l.parts[partition].queue <- r:
	case <-ctx.Done():
		return ctx.Err()
	}
	if r.done == nil {
		return nil
	}
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close appends what is queued, closes the logs and removes the folder.
func (l *classicLeader) close() error {
	close(l.stop)
	for _, p := range l.parts {
		close(p.queue)
	}
	l.wg.Wait()
	var errs []error
	for _, p := range l.parts {
		errs = append(errs, p.log.Close())
	}
	errs = append(errs, os.RemoveAll(l.dir))
	return errors.Join(errs...)
}
