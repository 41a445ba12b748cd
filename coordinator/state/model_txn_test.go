package state

import (
	"bytes"
	"cmp"
	"slices"
	"sort"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal"
)

// The model of transactions, as Kafka's transaction coordinator and its
// partitions' producer state manage them: each transactional ID's state
// (a map), and each partition's open transactions.

var txnIDs = []string{"x", "y", ""}

func preparing(s TxnState) bool { return s == TxnPrepareCommit || s == TxnPrepareAbort }

func cloneTxn(t *Transaction) *Transaction {
	c := *t
	c.Partitions, c.Groups, c.Offsets = slices.Clone(t.Partitions), slices.Clone(t.Groups), slices.Clone(t.Offsets)
	return &c
}

func byTopicPartition(a, b wal.TopicPartition) int {
	return cmp.Or(bytes.Compare(a.TopicID[:], b.TopicID[:]), cmp.Compare(a.Partition, b.Partition))
}

// beginErr decides opening a producer's transaction in p: open says it
// opens (false: open already at that epoch).
func beginErr(p *mPart, producer int64, epoch int16) (kafkaerr.Code, bool) {
	if st := p.producers[producer]; st != nil && st.epoch > epoch {
		return kafkaerr.ProducerFenced, false
	}
	j := p.openOf(producer)
	switch {
	case j < 0:
		return kafkaerr.NoError, true
	case p.open[j].epoch == epoch:
		return kafkaerr.NoError, false
	case p.open[j].epoch > epoch:
		return kafkaerr.ProducerFenced, false
	}
	return kafkaerr.ConcurrentTransactions, false // an older transaction's marker is on its way
}

// marker writes a producer's transaction marker in p, unless its
// transaction is open there under a newer epoch, or not open and p
// knows the marker's epoch already: at the high watermark, raising the
// producer's epoch.
func marker(p *mPart, producer int64, epoch int16) {
	j := p.openOf(producer)
	switch {
	case j >= 0 && p.open[j].epoch > epoch:
		return
	case j >= 0:
		p.open = slices.Delete(p.open, j, j+1)
	default:
		if st := p.producers[producer]; st != nil && st.epoch >= epoch {
			return
		}
	}
	p.hw++
	if st := p.producers[producer]; st == nil || st.epoch < epoch {
		p.producers[producer] = &mProducer{epoch: epoch}
	}
}

// txn is the model's answer to a TxnRequest; newPID gives a new producer
// ID (the one the op answered, checked).
func (s *modelRun) txn(r TxnRequest, newPID func() int64) (kafkaerr.Code, *Transaction) {
	m := s.m
	if r.ID == "" {
		return kafkaerr.InvalidRequest, nil
	}
	cur := m.txns[r.ID]
	if r.Op == TxnInit {
		switch {
		case r.TimeoutMs <= 0 || r.TimeoutMs > MaxTxnTimeoutMs:
			return kafkaerr.InvalidTransactionTimeout, nil
		case cur != nil && preparing(cur.State):
			return kafkaerr.NoError, cloneTxn(cur) // to finish first
		case cur != nil && r.ProducerID >= 0 && (r.ProducerID != cur.ProducerID || r.Epoch != cur.Epoch):
			return kafkaerr.ProducerFenced, nil
		}
		var t *Transaction
		if cur == nil {
			t = &Transaction{ID: r.ID, ProducerID: newPID(), State: TxnEmpty}
		} else {
			t = cloneTxn(cur)
			t.Epoch++
			if cur.State == TxnOngoing {
				t.State = TxnPrepareAbort // aborted, under the new epoch
			} else {
				t.State, t.StartTime, t.Partitions, t.Groups, t.Offsets = TxnEmpty, 0, nil, nil, nil
			}
		}
		t.TimeoutMs, t.UpdateTime = r.TimeoutMs, m.now
		m.txns[r.ID] = t
		return kafkaerr.NoError, cloneTxn(t)
	}
	switch {
	case cur == nil || cur.ProducerID != r.ProducerID:
		return kafkaerr.InvalidProducerIDMapping, nil
	case r.Epoch != cur.Epoch:
		return kafkaerr.ProducerFenced, nil
	}
	t := cloneTxn(cur)
	t.UpdateTime = m.now
	want, done := TxnPrepareAbort, TxnCompleteAbort
	if r.Commit {
		want, done = TxnPrepareCommit, TxnCompleteCommit
	}
	switch r.Op {
	case TxnAddPartitions, TxnAddGroup:
		if preparing(cur.State) {
			return kafkaerr.ConcurrentTransactions, nil
		}
		if cur.State != TxnOngoing {
			t.State, t.StartTime, t.Partitions, t.Groups, t.Offsets = TxnOngoing, m.now, nil, nil, nil
		}
		added := false
		for _, tp := range r.Partitions {
			if !slices.Contains(t.Partitions, tp) {
				t.Partitions, added = append(t.Partitions, tp), true
			}
		}
		slices.SortFunc(t.Partitions, byTopicPartition)
		if r.Op == TxnAddGroup {
			if r.Group == "" {
				return kafkaerr.InvalidGroupID, nil
			}
			if !slices.Contains(t.Groups, r.Group) {
				t.Groups, added = append(t.Groups, r.Group), true
				sort.Strings(t.Groups)
			}
		}
		// With Shards set, the partitions this shard serves open here.
		var opens []*mPart
		for _, tp := range r.Partitions {
			p := m.part(tp)
			if r.Shards <= 0 || p == nil {
				continue
			}
			code, open := beginErr(p, cur.ProducerID, cur.Epoch)
			if code != kafkaerr.NoError {
				return code, nil
			}
			if open && !slices.Contains(opens, p) {
				opens = append(opens, p)
			}
		}
		for _, p := range opens {
			p.open = append(p.open, mOpen{producer: cur.ProducerID, epoch: cur.Epoch, first: -1})
		}
		if !added && cur.State == TxnOngoing {
			return kafkaerr.NoError, cloneTxn(cur)
		}
	case TxnCommitOffsets:
		if cur.State != TxnOngoing || !slices.Contains(cur.Groups, r.Group) {
			return kafkaerr.InvalidTxnState, nil
		}
		for _, off := range r.Offsets {
			if len(off.Metadata) > MaxGroupOffsetMetadata {
				return kafkaerr.OffsetMetadataTooLarge, nil
			}
			off.CommitTime = m.now
			i := slices.IndexFunc(t.Offsets, func(x TxnOffset) bool {
				return x.Group == r.Group && x.Topic == off.Topic && x.Partition == off.Partition
			})
			if i >= 0 {
				t.Offsets[i].GroupOffset = off
			} else {
				t.Offsets = append(t.Offsets, TxnOffset{Group: r.Group, GroupOffset: off})
			}
		}
	case TxnEnd:
		allHere := r.Shards > 0
		for _, tp := range cur.Partitions {
			allHere = allHere && m.part(tp) != nil
		}
		for _, g := range cur.Groups {
			allHere = allHere && ShardOfGroup(g, r.Shards) == mShard
		}
		switch {
		case cur.State == TxnOngoing && allHere:
			// Ended in one entry: its markers, its offsets, done.
			for _, tp := range cur.Partitions {
				marker(m.part(tp), cur.ProducerID, cur.Epoch)
			}
			if r.Commit {
				for _, off := range cur.Offsets {
					if m.offsets[off.Group] == nil {
						m.offsets[off.Group] = map[GroupPartition]GroupOffset{}
					}
					o := off.GroupOffset
					o.CommitTime = m.now
					m.offsets[off.Group][GroupPartition{o.Topic, o.Partition}] = o
				}
			}
			t.State, t.Partitions, t.Groups, t.Offsets = done, nil, nil, nil
		case cur.State == TxnOngoing:
			t.State = want
		case cur.State == want || cur.State == done:
			return kafkaerr.NoError, cloneTxn(cur) // a retry
		default:
			return kafkaerr.InvalidTxnState, nil
		}
	case TxnComplete:
		if cur.State != want {
			return kafkaerr.NoError, cloneTxn(cur)
		}
		t.State, t.Partitions, t.Groups, t.Offsets = done, nil, nil, nil
	}
	m.txns[r.ID] = t
	return kafkaerr.NoError, cloneTxn(t)
}

// txnRequest decides a TxnRequest and checks its answer against the
// model's.
func (s *modelRun) txnRequest(t *rapid.T, r TxnRequest) kafkaerr.Code {
	o := &TxnRequestOp{BaseOp: s.base(), Req: r}
	s.decide(o)
	err := <-o.Done
	code, want := s.txn(r, func() int64 {
		s.newProducerID(t, o.Out.ProducerID)
		return o.Out.ProducerID
	})
	require.Equal(t, code, errCode(err), "%s %+v: %v", txnOpNames[r.Op], r, err)
	if code == kafkaerr.NoError {
		require.Equal(t, normTxn(*want), normTxn(o.Out), "%s %+v", txnOpNames[r.Op], r)
	}
	return code
}

// txnPartitions draws partitions for a transaction: of its own, of any
// topic, of none.
func (s *modelRun) txnPartitions(t *rapid.T, cur *Transaction) []wal.TopicPartition {
	var out []wal.TopicPartition
	for range rapid.IntRange(0, 2).Draw(t, "partitions") {
		if cur != nil && len(cur.Partitions) > 0 && rapid.IntRange(0, 3).Draw(t, "own") == 0 {
			out = append(out, rapid.SampledFrom(cur.Partitions).Draw(t, "ownPartition"))
			continue
		}
		out = append(out, s.anyTP(t))
	}
	return out
}

func (s *modelRun) txnActions(actions map[string]func(*rapid.T)) {
	m := s.m
	request := func(t *rapid.T, op TxnOp) TxnRequest {
		r := TxnRequest{Op: op, ID: rapid.SampledFrom(txnIDs).Draw(t, "txnID"), ProducerID: -1, Epoch: -1,
			Shards: rapid.IntRange(0, 2).Draw(t, "shards"), Commit: rapid.Bool().Draw(t, "commit")}
		cur := m.txns[r.ID]
		switch {
		case cur != nil && rapid.IntRange(0, 5).Draw(t, "own") > 0:
			r.ProducerID, r.Epoch = cur.ProducerID, cur.Epoch
		case op != TxnInit || rapid.Bool().Draw(t, "someProducer"):
			if len(m.producerIDs) > 0 {
				r.ProducerID = rapid.SampledFrom(m.producerIDs).Draw(t, "producer")
			}
			r.Epoch = rapid.Int16Range(0, 2).Draw(t, "epoch")
		}
		switch op {
		case TxnInit:
			r.TimeoutMs = rapid.SampledFrom([]int32{1000, 60000, 60000, 0, MaxTxnTimeoutMs + 1}).Draw(t, "timeout")
		case TxnAddPartitions:
			r.Partitions = s.txnPartitions(t, cur)
		case TxnAddGroup:
			r.Group = rapid.SampledFrom(groupNames).Draw(t, "group")
		case TxnCommitOffsets:
			r.Group = rapid.SampledFrom(groupNames).Draw(t, "group")
			if cur != nil && len(cur.Groups) > 0 && rapid.Bool().Draw(t, "ownGroup") {
				r.Group = rapid.SampledFrom(cur.Groups).Draw(t, "group")
			}
			for range rapid.IntRange(0, 2).Draw(t, "offsets") {
				r.Offsets = append(r.Offsets, GroupOffset{Topic: rapid.SampledFrom(offsetTopic[:2]).Draw(t, "topic"), Partition: rapid.Int32Range(0, 1).Draw(t, "partition"),
					Offset: rapid.Int64Range(0, 50).Draw(t, "offset"), LeaderEpoch: -1, Metadata: rapid.SampledFrom([]string{"", "x", "", hugeMeta}).Draw(t, "metadata")})
			}
		case TxnComplete:
			if cur != nil && preparing(cur.State) && rapid.IntRange(0, 3).Draw(t, "matching") > 0 {
				r.Commit = cur.State == TxnPrepareCommit
			}
		}
		return r
	}
	for op, name := range txnOpNames {
		actions[name] = func(t *rapid.T) { s.txnRequest(t, request(t, op)) }
	}
	actions["txnWhole"] = func(t *rapid.T) {
		// A whole transaction, each step as a client makes it: its
		// partitions opened here (Shards set), its batches, its group's
		// offsets, its end (in one entry when everything is here).
		id := rapid.SampledFrom(txnIDs[:2]).Draw(t, "txnID")
		cur := m.txns[id]
		if cur != nil && preparing(cur.State) {
			s.txnRequest(t, TxnRequest{Op: TxnComplete, ID: id, ProducerID: cur.ProducerID, Epoch: cur.Epoch, Commit: cur.State == TxnPrepareCommit})
		}
		r := TxnRequest{Op: TxnInit, ID: id, ProducerID: -1, Epoch: -1, TimeoutMs: 60000}
		if cur = m.txns[id]; cur != nil {
			r.ProducerID, r.Epoch = cur.ProducerID, cur.Epoch
		}
		if s.txnRequest(t, r) != kafkaerr.NoError || preparing(m.txns[id].State) {
			return
		}
		cur = m.txns[id]
		shards := rapid.IntRange(0, 2).Draw(t, "shards")
		tps := s.txnPartitions(t, nil)
		s.txnRequest(t, TxnRequest{Op: TxnAddPartitions, ID: id, ProducerID: cur.ProducerID, Epoch: cur.Epoch, Partitions: tps, Shards: shards})
		var coords []wal.Coordinate
		for i, tp := range tps {
			coords = append(coords, wal.Coordinate{TopicPartition: tp, Offset: int64(1 + 100*i), Size: 100, NumRecords: 2,
				MaxTimestamp: m.now, ProducerID: cur.ProducerID, ProducerEpoch: cur.Epoch, BaseSequence: 0, Transactional: true})
		}
		if len(coords) > 0 {
			s.commit(t, coords)
		}
		group := rapid.SampledFrom(groupNames[:2]).Draw(t, "group")
		s.txnRequest(t, TxnRequest{Op: TxnAddGroup, ID: id, ProducerID: cur.ProducerID, Epoch: cur.Epoch, Group: group})
		s.txnRequest(t, TxnRequest{Op: TxnCommitOffsets, ID: id, ProducerID: cur.ProducerID, Epoch: cur.Epoch, Group: group,
			Offsets: []GroupOffset{{Topic: "t0", Partition: 0, Offset: rapid.Int64Range(0, 50).Draw(t, "offset"), LeaderEpoch: -1}}})
		s.txnRequest(t, TxnRequest{Op: TxnEnd, ID: id, ProducerID: cur.ProducerID, Epoch: cur.Epoch, Commit: rapid.Bool().Draw(t, "commit"), Shards: shards})
	}
	actions["partitionTxns"] = func(t *rapid.T) {
		var producers []int64
		var txns []*Transaction
		for _, id := range txnIDs {
			if tx := m.txns[id]; tx != nil {
				txns = append(txns, tx)
				producers = append(producers, tx.ProducerID)
			}
		}
		if len(producers) == 0 {
			t.Skip("no transactional producer")
		}
		var ops []PartitionTxn
		for range rapid.IntRange(1, 3).Draw(t, "ops") {
			tx := rapid.SampledFrom(txns).Draw(t, "txn")
			x := PartitionTxn{TopicPartition: s.anyTP(t), ProducerID: tx.ProducerID, Epoch: tx.Epoch + rapid.Int16Range(-1, 1).Draw(t, "epochDelta"),
				Begin: rapid.Bool().Draw(t, "begin"), Commit: rapid.Bool().Draw(t, "commit"), CoordinatorEpoch: rapid.Int32Range(0, 2).Draw(t, "coordinatorEpoch")}
			if len(tx.Partitions) > 0 && rapid.Bool().Draw(t, "ofTxn") {
				x.TopicPartition = rapid.SampledFrom(tx.Partitions).Draw(t, "partition")
			}
			if rapid.IntRange(0, 3).Draw(t, "sameEpoch") > 0 {
				x.Epoch = tx.Epoch
			}
			ops = append(ops, x)
		}
		o := &PartitionTxnsOp{BaseOp: s.base(), Ops: ops}
		s.decide(o)
		require.NoError(t, <-o.Done)
		require.Len(t, o.Errs, len(ops))
		for i, x := range ops {
			p := m.part(x.TopicPartition)
			code := kafkaerr.NoError
			switch {
			case p == nil:
				code = kafkaerr.UnknownTopicOrPartition
			case x.Begin:
				var open bool
				if code, open = beginErr(p, x.ProducerID, x.Epoch); open {
					p.open = append(p.open, mOpen{producer: x.ProducerID, epoch: x.Epoch, first: -1})
				}
			default:
				marker(p, x.ProducerID, x.Epoch)
			}
			require.Equal(t, code, errCode(o.Errs[i]), "op %d of %+v", i, ops)
		}
	}
	actions["txnExpire"] = func(t *rapid.T) {
		stale := rapid.SampledFrom([]int64{0, 5000}).Draw(t, "stale")
		idExpiry := rapid.SampledFrom([]int64{0, 1000, 10000}).Draw(t, "idExpiry")
		o := &TxnExpireOp{BaseOp: s.base(), Stale: stale, IDExpiry: idExpiry}
		s.decide(o)
		require.NoError(t, <-o.Done)
		var ids []string
		for id := range m.txns {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		var want []Transaction
		for _, id := range ids {
			tx := m.txns[id]
			switch {
			case tx.State == TxnOngoing && m.now-tx.StartTime > int64(tx.TimeoutMs):
				// Timed out: aborted under a new epoch, which fences the
				// producer.
				a := cloneTxn(tx)
				a.State, a.UpdateTime, a.Epoch = TxnPrepareAbort, m.now, a.Epoch+1
				m.txns[id] = a
				want = append(want, normTxn(*a))
			case preparing(tx.State) && m.now-tx.UpdateTime >= stale:
				want = append(want, normTxn(*tx)) // for the caller to finish
			case !preparing(tx.State) && tx.State != TxnOngoing && idExpiry > 0 && m.now-tx.UpdateTime > idExpiry:
				delete(m.txns, id)
			}
		}
		var got []Transaction
		for _, tx := range o.Out {
			got = append(got, normTxn(tx))
		}
		require.Equal(t, want, got)
	}
	actions["txnList"] = func(t *rapid.T) {
		var ids []string
		if rapid.Bool().Draw(t, "some") {
			ids = []string{}
			for range rapid.IntRange(0, 3).Draw(t, "ids") {
				ids = append(ids, rapid.SampledFrom(txnIDs).Draw(t, "id"))
			}
		}
		o := &TxnListOp{BaseOp: s.base(), IDs: ids}
		s.decide(o)
		require.NoError(t, <-o.Done)
		var want []Transaction
		if ids == nil {
			for _, id := range txnIDs {
				if tx := m.txns[id]; tx != nil {
					want = append(want, normTxn(*tx))
				}
			}
			sort.Slice(want, func(i, j int) bool { return want[i].ID < want[j].ID })
		}
		for _, id := range ids {
			if tx := m.txns[id]; tx != nil {
				want = append(want, normTxn(*tx))
			}
		}
		var got []Transaction
		for _, tx := range o.Out {
			got = append(got, normTxn(tx))
		}
		require.Equal(t, want, got)
	}
}
