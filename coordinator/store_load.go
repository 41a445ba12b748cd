package coordinator

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/diskless-go/diskless/acl"
	"github.com/diskless-go/diskless/scram"
)

// objectRow is an object's ID, key and commit time.
type objectRow struct {
	id          int64
	key         string
	committedAt int64
	compacted   bool // written by a compaction
}

// loadObjects reads every object, for the published map.
func (s *store) loadObjects(ctx context.Context) ([]objectRow, error) {
	rows, err := s.w.QueryContext(ctx, sqlLoadObjects)
	if err != nil {
		return nil, fmt.Errorf("coordinator: reading objects: %w", err)
	}
	defer rows.Close()
	var out []objectRow
	for rows.Next() {
		var o objectRow
		if err := rows.Scan(&o.id, &o.key, &o.committedAt, &o.compacted); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// loadView reads the committed view and the applied offset (-1 for an
// empty database). The producer states are as of s.producersAt, which may
// be behind: see replayProducers.
func (s *store) loadView(ctx context.Context) (*view, int64, error) {
	v := newView(nil)
	applied := int64(-1)
	s.producersAt = -2
	chainCRC, producersChainCRC, producersEpoch := int64(-2), int64(-2), int64(0)
	clear(s.bytes)
	var segs, segBytes int64
	for _, q := range []struct {
		what, query string
		row         func(rows *sql.Rows) error
	}{
		{"meta", sqlLoadMeta, func(rows *sql.Rows) error {
			var k string
			var x int64
			if err := rows.Scan(&k, &x); err != nil {
				return err
			}
			switch k {
			case metaApplied:
				applied = x
			case metaAppliedCRC:
				s.appliedCRC = uint32(x)
			case metaProducersAt:
				s.producersAt = x
			case metaChainCRC:
				chainCRC = x
			case metaProducersChainCRC:
				producersChainCRC = x
			case metaProducersEpoch:
				producersEpoch = x
			case metaEpoch:
				v.epoch = int32(x)
			case metaNextPID:
				v.nextPID = x
			case metaNextObjectID:
				v.nextObjectID = x
			case metaNextProducerID:
				v.nextProducerID = x
			case metaSecurityVersion:
				v.securityVersion = x
			}
			return nil
		}},
		{"topics", sqlLoadTopics, func(rows *sql.Rows) error { return loadTopic(rows, v) }},
		{"topic extents", sqlLoadExtents, func(rows *sql.Rows) error {
			var id []byte
			var e pidExtent
			if err := rows.Scan(&id, &e.From, &e.FirstPID); err != nil {
				return err
			}
			if t := v.topics[uuid.UUID(id)]; t != nil {
				t.Extents = append(t.Extents, e)
			}
			return nil
		}},
		{"partitions", sqlLoadPartitions, func(rows *sql.Rows) error {
			p := partState{RemoteEnd: -1}
			var id []byte
			var b partBytes
			if err := rows.Scan(&p.PID, &id, &p.Partition, &p.LogStart, &p.HW, &b.batches, &p.DisklessStart, &b.remote, &p.CleanedTo); err != nil {
				return err
			}
			p.TopicID = uuid.UUID(id)
			v.parts[p.PID] = &p
			s.bytes[p.PID] = &b
			return nil
		}},
		{"remote segments", sqlLoadRemoteEnds, func(rows *sql.Rows) error {
			var pid, end, n, size int64
			if err := rows.Scan(&pid, &end, &n, &size); err != nil {
				return err
			}
			if p := v.parts[pid]; p != nil {
				p.RemoteEnd = end
			}
			segs, segBytes = segs+n, segBytes+size
			return nil
		}},
		{"producers", sqlLoadProducers, func(rows *sql.Rows) error {
			var k producerKey
			var epoch int16
			var blob []byte
			if err := rows.Scan(&k.PID, &k.ProducerID, &epoch, &blob); err != nil {
				return err
			}
			batches, err := decodeProducerBatches(blob)
			if err != nil {
				return err
			}
			v.producers[k] = &producerState{Epoch: epoch, Batches: batches}
			return nil
		}},
		{"SCRAM credentials", sqlLoadScram, func(rows *sql.Rows) error {
			var c scram.Credential
			if err := rows.Scan(&c.User, &c.Mechanism, &c.Salt, &c.Iterations, &c.StoredKey, &c.ServerKey); err != nil {
				return err
			}
			v.creds[scramKey{c.User, c.Mechanism}] = &c
			return nil
		}},
		{"ACLs", sqlLoadACLs, func(rows *sql.Rows) error {
			var b acl.Binding
			if err := rows.Scan(&b.ResourceType, &b.ResourceName, &b.PatternType, &b.Principal, &b.Host, &b.Operation, &b.Permission); err != nil {
				return err
			}
			v.acls[b] = true
			return nil
		}},
		{"group claims", sqlLoadClaims, func(rows *sql.Rows) error {
			var g string
			var epoch int64
			if err := rows.Scan(&g, &epoch); err != nil {
				return err
			}
			v.claims[g] = epoch
			return nil
		}},
	} {
		if err := s.scanEach(ctx, q.query, q.row); err != nil {
			return nil, 0, fmt.Errorf("coordinator: reading %s: %w", q.what, err)
		}
	}
	if err := s.loadTxns(ctx, v); err != nil {
		return nil, 0, fmt.Errorf("coordinator: reading transactions: %w", err)
	}
	s.remoteSegments.Store(segs)
	s.remoteBytes.Store(segBytes)
	if s.producersAt == -2 {
		s.producersAt = applied
	}
	// A database from before the chain: the entry at applied is the
	// chain's (nothing was skipped then), and the producers' chain is
	// known from the next claim on.
	switch {
	case chainCRC >= 0:
		s.chain = chainState{epoch: v.epoch, crc: uint32(chainCRC), known: true}
	case chainCRC == -2 && (applied < 0 || s.appliedCRC != 0):
		s.chain = chainState{epoch: v.epoch, crc: s.appliedCRC, known: true}
	default:
		s.chain = chainState{epoch: v.epoch}
	}
	s.producersChain = chainState{epoch: int32(producersEpoch)}
	switch {
	case producersChainCRC >= 0:
		s.producersChain.crc, s.producersChain.known = uint32(producersChainCRC), true
	case s.producersAt == applied:
		s.producersChain = s.chain
	}
	clear(s.dirtyProducers)
	s.sinceFlush = 0
	return v, applied, nil
}

// loadTopic reads a topics row into v.
func loadTopic(rows *sql.Rows, v *view) error {
	var t topicState
	var id, assigned []byte
	var flags, retentionMs, segmentMs, deleteRetentionMs, minLagMs, maxLagMs int64
	if err := rows.Scan(&id, &t.Name, &t.Partitions, &t.FirstPID, &retentionMs, &t.Config.RetentionBytes, &flags,
		&t.Config.MaxMessageBytes, &assigned, &t.Config.SegmentBytes, &segmentMs,
		&deleteRetentionMs, &minLagMs, &maxLagMs, &t.Config.MinCleanableDirtyRatio); err != nil {
		return err
	}
	t.Config.DeleteRetention = time.Duration(deleteRetentionMs) * time.Millisecond
	t.Config.MinCompactionLag = time.Duration(minLagMs) * time.Millisecond
	t.Config.MaxCompactionLag = time.Duration(maxLagMs) * time.Millisecond
	var err error
	if t.Assigned, err = decodeInt32s(assigned); err != nil {
		return fmt.Errorf("topic %s: %w", t.Name, err)
	}
	t.ID = uuid.UUID(id)
	t.Config.Partitions, t.Config.Retention, t.Config.SegmentTime = t.Partitions, msDuration(retentionMs), msDuration(segmentMs)
	t.Config.Compact, t.Config.Delete, t.Config.LogAppendTime = flags&1 != 0, flags&2 != 0, flags&4 != 0
	v.topics[t.ID] = &t
	v.names[t.Name] = &t
	return nil
}

// scanEach runs query on the writer connection and calls row for each
// row.
func (s *store) scanEach(ctx context.Context, query string, row func(rows *sql.Rows) error) error {
	rows, err := s.w.QueryContext(ctx, query)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := row(rows); err != nil {
			return err
		}
	}
	return rows.Close()
}

func appendProducerBatches(b []byte, batches []batchMeta) []byte {
	b = binary.AppendUvarint(b, uint64(len(batches)))
	for _, m := range batches {
		b = binary.AppendVarint(b, int64(m.FirstSeq))
		b = binary.AppendVarint(b, int64(m.LastSeq))
		b = binary.AppendVarint(b, m.LastOffset)
		b = binary.AppendVarint(b, int64(m.Count))
		b = binary.AppendVarint(b, m.Timestamp)
	}
	return b
}

func decodeProducerBatches(b []byte) ([]batchMeta, error) {
	d := decoder{b: b}
	n := d.count(5)
	out := make([]batchMeta, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, batchMeta{FirstSeq: d.int32(), LastSeq: d.int32(), LastOffset: d.varint(), Count: d.int32(), Timestamp: d.varint()})
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("bytes after the producer batches")
	}
	return out, d.err
}
