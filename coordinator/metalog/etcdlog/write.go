package etcdlog

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"gocloud.dev/blob"

	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/coordinator/metalog/internal/pipeline"
)

// retry calls f until it succeeds, fails with an error that is not
// transient, or has failed MaxAttempts times, each attempt bounded by
// RequestTimeout.
func (l *Log) retry(ctx context.Context, what string, f func(context.Context) error) error {
	return l.retrier.Do(ctx, what, f)
}

// value returns the etcd value of p's entry: inline, or a reference to the
// object it spills to (which it puts).
func (l *Log) value(ctx context.Context, p *pipeline.Put) ([]byte, error) {
	if len(p.Entry) <= l.spillBytes {
		return append([]byte{etcdInline}, p.Entry...), nil
	}
	if l.spill == nil {
		return nil, fmt.Errorf("etcdlog: an entry of %d bytes is larger than SpillBytes %d, and there is no Spill bucket", len(p.Entry), l.spillBytes)
	}
	key := fmt.Sprintf("%s%020d-%s", l.spillDir, p.Offset, uuid.NewString())
	err := l.retry(ctx, "put "+key, func(ctx context.Context) error {
		return l.spill.WriteAll(ctx, key, p.Entry, &blob.WriterOptions{ContentType: "application/octet-stream", DisableContentTypeDetection: true})
	})
	if err != nil {
		return nil, fmt.Errorf("etcdlog: spilling entry %d: %w", p.Offset, err)
	}
	v := []byte{etcdSpill}
	v = binary.AppendUvarint(v, uint64(len(p.Entry)))
	v = binary.BigEndian.AppendUint32(v, crc32.Checksum(p.Entry, crcTable))
	return append(v, key...), nil
}

// crcTable is CRC-32C, the checksum of a spilled entry.
var crcTable = crc32.MakeTable(crc32.Castagnoli)

// put writes p's key in a transaction conditional on it not existing, the
// one before it existing, and the fence. It retries transient failures;
// after one that may have landed, a key found holding p's value is p's. A
// put that overtook the one before it (pipelined) waits for that one and
// tries again. It gives up when pctx ends (Close, or a put before it
// failed).
func (l *Log) put(pctx context.Context, p *pipeline.Put) error {
	v, err := l.value(pctx, p)
	if err != nil {
		return err
	}
	key := l.key(p.Offset)
	conds := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)}
	elses := []clientv3.Op{clientv3.OpGet(key)}
	var prev string
	if p.Offset > 0 {
		prev = l.key(p.Offset - 1)
		conds = append(conds, clientv3.Compare(clientv3.CreateRevision(prev), ">", 0))
		elses = append(elses, clientv3.OpGet(prev, clientv3.WithKeysOnly()))
	}
	if l.fence != nil {
		conds = append(conds, clientv3.Compare(clientv3.CreateRevision(l.fence.Key), "=", l.fence.Revision))
	}
	ambiguous := false
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(pctx, l.timeout)
		resp, err := l.client.Txn(ctx).If(conds...).Then(clientv3.OpPut(key, string(v))).Else(elses...).Commit()
		cancel()
		switch {
		case pctx.Err() != nil:
			return fmt.Errorf("%w: put of offset %d abandoned (it may still be in the log)", metalog.ErrClosed, p.Offset)
		case err != nil:
			if attempt >= l.maxAttempts {
				return fmt.Errorf("etcdlog: put of offset %d failed (attempt %d): %w", p.Offset, attempt, err)
			}
			ambiguous = true
			l.log.Warn("etcdlog: put failed, retrying", zap.String("key", key), zap.Int("attempt", attempt), zap.Error(err))
			continue
		case resp.Succeeded:
			return nil
		}
		got := resp.Responses[0].GetResponseRange().Kvs
		if len(got) > 0 {
			if ambiguous && bytes.Equal(got[0].Value, v) {
				return nil // an earlier attempt wrote it
			}
			l.log.Info("etcdlog: fenced", zap.Int64("offset", p.Offset), zap.String("key", key))
			return fmt.Errorf("%w: offset %d (%s) was written by another writer", metalog.ErrFenced, p.Offset, key)
		}
		if prev != "" && len(resp.Responses[1].GetResponseRange().Kvs) == 0 {
			// The put of the offset before has not landed yet: wait for
			// it, then try again (it failing fails this one).
			if err := l.pipe.WaitEarlier(pctx, p); err != nil {
				return fmt.Errorf("etcdlog: offset %d: the append before it failed: %w", p.Offset, err)
			}
			attempt--
			continue
		}
		l.log.Info("etcdlog: fenced: leadership lost", zap.Int64("offset", p.Offset))
		return fmt.Errorf("%w: the writer's leadership (%s) has ended", metalog.ErrFenced, l.fence.Key)
	}
}
