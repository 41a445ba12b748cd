package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/diskless-go/diskless/acl"
	"github.com/diskless-go/diskless/coordinator/state"
	"github.com/diskless-go/diskless/scram"
	"github.com/google/uuid"
)

// LoadObjects reads every object, for the published map.
func (s *DB) LoadObjects(ctx context.Context) ([]state.ObjectRow, error) {
	rows, err := s.W.QueryContext(ctx, sqlLoadObjects)
	if err != nil {
		return nil, fmt.Errorf("coordinator: reading objects: %w", err)
	}
	defer rows.Close()
	var out []state.ObjectRow
	for rows.Next() {
		var o state.ObjectRow
		if err := rows.Scan(&o.ID, &o.Key, &o.CommittedAt, &o.Compacted); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// LoadView reads the committed view and the applied offset (-1 for an
// empty database). The producer states are as of s.producersAt, which may
// be behind: see replayProducers.
func (s *DB) LoadView(ctx context.Context) (*state.View, int64, error) {
	v := state.NewView(nil)
	m := loadedMeta{applied: -1, chainCRC: -2, producersChainCRC: -2}
	s.ProducersAt = -2
	clear(s.bytes)
	var segs, segBytes int64
	for _, q := range append([]loader{{"meta", sqlLoadMeta, func(rows *sql.Rows) error { return m.scan(rows, s, v) }}}, s.loaders(v, &segs, &segBytes)...) {
		if err := s.scanEach(ctx, q.query, q.row); err != nil {
			return nil, 0, fmt.Errorf("coordinator: reading %s: %w", q.what, err)
		}
	}
	if err := s.loadTxns(ctx, v); err != nil {
		return nil, 0, fmt.Errorf("coordinator: reading transactions: %w", err)
	}
	var queue []state.PendingCommit
	if err := s.scanEach(ctx, sqlLoadPending, func(rows *sql.Rows) error {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return err
		}
		pc, err := state.DecodePendingCommit(b)
		queue = append(queue, pc)
		return err
	}); err != nil {
		return nil, 0, fmt.Errorf("coordinator: reading the pending commits: %w", err)
	}
	v.LoadPending(queue)
	s.RemoteSegments.Store(segs)
	s.RemoteBytes.Store(segBytes)
	if s.ProducersAt == -2 {
		s.ProducersAt = m.applied
	}
	s.setChains(v, m)
	clear(s.dirtyProducers)
	s.sinceFlush = 0
	return v, m.applied, nil
}

// loader reads the rows of one query into the view being loaded.
type loader struct {
	what, query string
	row         func(rows *sql.Rows) error
}

// loadedMeta is what the meta table says of the database: the entry
// applied last, and the chains' checksums (-2: not recorded).
type loadedMeta struct {
	applied, chainCRC, producersChainCRC, producersEpoch int64
}

// scan reads one meta row into m, s and v.
func (m *loadedMeta) scan(rows *sql.Rows, s *DB, v *state.View) error {
	var k string
	var x int64
	if err := rows.Scan(&k, &x); err != nil {
		return err
	}
	switch k {
	case MetaApplied:
		m.applied = x
	case metaAppliedCRC:
		s.AppliedCRC = uint32(x)
	case MetaProducersAt:
		s.ProducersAt = x
	case metaChainCRC:
		m.chainCRC = x
	case MetaProducersChainCRC:
		m.producersChainCRC = x
	case MetaProducersEpoch:
		m.producersEpoch = x
	case metaEpoch:
		v.Epoch = int32(x)
	case metaNextPID:
		v.NextPID = x
	case metaNextObjectID:
		v.NextObjectID = x
	case metaNextProducerID:
		v.NextProducerID = x
	case metaSecurityVersion:
		v.SecurityVersion = x
	case metaQuotaVersion:
		v.QuotaVersion = x
	}
	return nil
}

// setChains sets the chain states the meta table recorded. A database
// from before the chain: the entry at applied is the chain's (nothing
// was skipped then), and the producers' chain is known from the next
// claim on.
func (s *DB) setChains(v *state.View, m loadedMeta) {
	switch {
	case m.chainCRC >= 0:
		s.Chain = state.ChainState{Epoch: v.Epoch, CRC: uint32(m.chainCRC), Known: true}
	case m.chainCRC == -2 && (m.applied < 0 || s.AppliedCRC != 0):
		s.Chain = state.ChainState{Epoch: v.Epoch, CRC: s.AppliedCRC, Known: true}
	default:
		s.Chain = state.ChainState{Epoch: v.Epoch}
	}
	s.ProducersChain = state.ChainState{Epoch: int32(m.producersEpoch)}
	switch {
	case m.producersChainCRC >= 0:
		s.ProducersChain.CRC, s.ProducersChain.Known = uint32(m.producersChainCRC), true
	case s.ProducersAt == m.applied:
		s.ProducersChain = s.Chain
	}
}

// loaders returns the loaders of every table but meta and the
// transactions' into v; segs and segBytes count the remote segments.
func (s *DB) loaders(v *state.View, segs, segBytes *int64) []loader {
	return []loader{
		{"topics", sqlLoadTopics, func(rows *sql.Rows) error { return loadTopic(rows, v) }},
		{"topic extents", sqlLoadExtents, func(rows *sql.Rows) error {
			var id []byte
			var e state.PIDExtent
			if err := rows.Scan(&id, &e.From, &e.FirstPID); err != nil {
				return err
			}
			if t := v.Topics[uuid.UUID(id)]; t != nil {
				t.Extents = append(t.Extents, e)
			}
			return nil
		}},
		{"partitions", sqlLoadPartitions, func(rows *sql.Rows) error {
			p := state.PartState{RemoteEnd: -1}
			var id []byte
			var b partBytes
			if err := rows.Scan(&p.PID, &id, &p.Partition, &p.LogStart, &p.HW, &b.batches, &p.DisklessStart, &b.remote, &p.CleanedTo); err != nil {
				return err
			}
			p.TopicID = uuid.UUID(id)
			v.Parts[p.PID] = &p
			s.bytes[p.PID] = &b
			return nil
		}},
		{"remote segments", sqlLoadRemoteEnds, func(rows *sql.Rows) error {
			var pid, end, n, size int64
			if err := rows.Scan(&pid, &end, &n, &size); err != nil {
				return err
			}
			if p := v.Parts[pid]; p != nil {
				p.RemoteEnd = end
			}
			*segs, *segBytes = *segs+n, *segBytes+size
			return nil
		}},
		{"producers", sqlLoadProducers, func(rows *sql.Rows) error {
			var k state.ProducerKey
			var epoch int16
			var blob []byte
			if err := rows.Scan(&k.PID, &k.ProducerID, &epoch, &blob); err != nil {
				return err
			}
			batches, err := DecodeProducerBatches(blob)
			if err != nil {
				return err
			}
			v.Producers[k] = &state.ProducerState{Epoch: epoch, Batches: batches}
			return nil
		}},
		{"SCRAM credentials", sqlLoadScram, func(rows *sql.Rows) error {
			var c scram.Credential
			if err := rows.Scan(&c.User, &c.Mechanism, &c.Salt, &c.Iterations, &c.StoredKey, &c.ServerKey); err != nil {
				return err
			}
			v.Creds[state.ScramKey{User: c.User, Mechanism: c.Mechanism}] = &c
			return nil
		}},
		{"ACLs", sqlLoadACLs, func(rows *sql.Rows) error {
			var b acl.Binding
			if err := rows.Scan(&b.ResourceType, &b.ResourceName, &b.PatternType, &b.Principal, &b.Host, &b.Operation, &b.Permission); err != nil {
				return err
			}
			v.ACLs[b] = true
			return nil
		}},
		{"client quotas", sqlLoadQuotas, func(rows *sql.Rows) error { return loadQuota(rows, v) }},
		{"group claims", sqlLoadClaims, func(rows *sql.Rows) error {
			var g string
			var epoch int64
			if err := rows.Scan(&g, &epoch); err != nil {
				return err
			}
			v.Claims[g] = epoch
			return nil
		}},
	}
}

// loadTopic reads a topics row into v.
func loadTopic(rows *sql.Rows, v *state.View) error {
	var t state.TopicState
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
	if t.Assigned, err = DecodeInt32s(assigned); err != nil {
		return fmt.Errorf("topic %s: %w", t.Name, err)
	}
	t.ID = uuid.UUID(id)
	t.Config.Partitions, t.Config.Retention, t.Config.SegmentTime = t.Partitions, state.MsDuration(retentionMs), state.MsDuration(segmentMs)
	t.Config.Compact, t.Config.Delete, t.Config.LogAppendTime = flags&1 != 0, flags&2 != 0, flags&4 != 0
	v.Topics[t.ID] = &t
	v.Names[t.Name] = &t
	return nil
}

// scanEach runs query on the writer connection and calls row for each
// row.
func (s *DB) scanEach(ctx context.Context, query string, row func(rows *sql.Rows) error) error {
	rows, err := s.W.QueryContext(ctx, query)
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

func AppendProducerBatches(b []byte, batches []state.BatchMeta) []byte {
	return state.AppendBatchMetas(b, batches)
}

func DecodeProducerBatches(b []byte) ([]state.BatchMeta, error) {
	d := state.Decoder{B: b}
	out := d.BatchMetas()
	if d.Err == nil && len(d.B) != 0 {
		d.Fail("bytes after the producer batches")
	}
	return out, d.Err
}
