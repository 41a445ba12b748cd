package state

import (
	"errors"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal"
)

// The model of objects: forgetting dead ones, the keys known, ownership
// received from another shard, remote segments, compaction.

// makeV7 returns a version 7 UUID of the time ms.
func makeV7(ms int64) uuid.UUID {
	id := uuid.New()
	id[0], id[1], id[2], id[3], id[4], id[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
	id[6] = 0x70 | id[6]&0x0f
	id[8] = 0x80 | id[8]&0x3f
	return id
}

// validRuns reports whether compacted runs fit a range and an object:
// in offset order within [from, to], each in the object's bytes.
func validRuns(from, to, size int64, runs []CompactedRun) bool {
	if from < 0 || to < from {
		return false
	}
	next := from
	for _, r := range runs {
		if r.BaseOffset < next || r.LastOffset < r.BaseOffset || r.LastOffset > to || r.BytePos < 0 || r.ByteSize <= 0 || r.BytePos+r.ByteSize > size {
			return false
		}
		next = r.LastOffset + 1
	}
	return true
}

func (s *modelRun) objectKeys(t *rapid.T, n int) []string {
	all := s.m.keyOrder
	var keys []string
	for range n {
		k := s.m.newKey(0) // one never committed
		if len(all) > 0 && rapid.IntRange(0, 5).Draw(t, "unknownKey") > 0 {
			k = rapid.SampledFrom(all).Draw(t, "key")
		}
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

func (s *modelRun) objectActions(actions map[string]func(*rapid.T)) {
	m := s.m
	actions["objectsDeleted"] = func(t *rapid.T) {
		// The lifecycle deleted objects it found dead in the committed
		// rows: decide with nothing pending.
		s.r.flush(t, m)
		keys := s.objectKeys(t, rapid.IntRange(1, 3).Draw(t, "keys"))
		o := &ObjectsDeletedOp{BaseOp: s.base(), Keys: keys}
		recs := s.decide(o)
		require.NoError(t, <-o.Done)
		live := m.live()
		var want []int64
		for _, k := range keys {
			if m.known(k) && live[k] == 0 {
				want = append(want, s.r.ids[k])
				m.objects[k].forgotten = s.r.decided
			}
		}
		if want == nil {
			require.Empty(t, recs)
		} else {
			require.Equal(t, []Record{ObjectsDeletedRecord{ObjectIDs: want}}, recs)
		}
	}
	actions["factsLost"] = func(t *rapid.T) {
		// The store could not be read: each op that reads it fails with
		// that error, and logs nothing.
		lost := errors.New("the store is gone")
		var o Op
		var done *BaseOp
		switch rapid.IntRange(0, 6).Draw(t, "op") {
		case 0:
			x := &RetentionOp{BaseOp: s.base()}
			o, done = x, &x.BaseOp
		case 1:
			x := &CommitOp{BaseOp: s.base(), Req: CommitFileRequest{ObjectKey: m.newKey(0), Size: 100,
				Coordinates: []wal.Coordinate{{TopicPartition: s.anyTP(t), Offset: 1, Size: 99, NumRecords: 1, ProducerID: -1}}}}
			o, done = x, &x.BaseOp
		case 2:
			x := &KnownKeysOp{BaseOp: s.base(), Keys: []string{m.newKey(0)}}
			o, done = x, &x.BaseOp
		case 3:
			x := &ObjectsDeletedOp{BaseOp: s.base(), Keys: []string{m.newKey(0)}}
			o, done = x, &x.BaseOp
		case 4:
			x := &ReceiveOp{BaseOp: s.base(), Req: OwnershipRequest{ObjectKey: m.newKey(0), Owners: []int{1, 0}, From: 1}}
			o, done = x, &x.BaseOp
		case 5:
			tp, p := s.livePart(t)
			id := makeV7(m.now)
			x := &RegisterRemoteOp{BaseOp: s.base(), Seg: RemoteSegment{ID: id, TopicPartition: tp, Key: RemoteSegmentKey(mPrefix, tp, p.disklessStart, id),
				BaseOffset: p.disklessStart, EndOffset: p.disklessStart, Size: 10}}
			o, done = x, &x.BaseOp
		case 6:
			tp, _ := s.livePart(t)
			x := &CompactOp{BaseOp: s.base(), Req: CompactRequest{TopicPartition: tp, From: 0, To: 0, ObjectKey: m.newKey(0)}}
			o, done = x, &x.BaseOp
		}
		s.r.factsErr = lost
		defer func() { s.r.factsErr = nil }()
		recs := s.decide(o)
		require.ErrorIs(t, <-done.Done, lost)
		require.Empty(t, recs)
	}
	actions["knownKeys"] = func(t *rapid.T) {
		keys := s.objectKeys(t, rapid.IntRange(1, 4).Draw(t, "keys"))
		o := &KnownKeysOp{BaseOp: s.base(), Keys: keys}
		s.decide(o)
		require.NoError(t, <-o.Done)
		for _, k := range keys {
			require.Equal(t, m.known(k), o.Known[k], "key %s known", k)
		}
	}
	actions["receive"] = func(t *rapid.T) {
		key := s.objectKeys(t, 1)[0]
		owners := rapid.SampledFrom([][]int{{0}, {1, 0}, {1, 2, 0}, {1, 0}, {1}, {0, 0}}).Draw(t, "owners")
		var deadSince time.Time
		if d := rapid.IntRange(0, 2).Draw(t, "deadSince"); d > 0 {
			deadSince = time.UnixMilli(m.now + int64(d*10000-15000))
		}
		o := &ReceiveOp{BaseOp: s.base(), Req: OwnershipRequest{ObjectKey: key, Owners: owners, From: 1, DeadSince: deadSince}}
		row, found := s.r.objects[key] // the committed row: the store's facts
		recs := s.decide(o)
		err := <-o.Done
		if slices.Equal(owners, []int{1}) || slices.Equal(owners, []int{0, 0}) {
			require.Equal(t, kafkaerr.InvalidRequest, errCode(err), "owners %v", owners)
			return
		}
		require.NoError(t, err)
		obj, known := m.objects[key], m.known(key)
		pending := known && obj.group > s.r.done // its row is on its way
		switch {
		case known && obj.received:
			require.True(t, o.Res.Accepted, "a received object received again")
			require.Empty(t, recs)
			return
		case found && (row.Received || len(row.Owners) == 0 || row.Owners[0] == mShard):
			require.True(t, o.Res.Accepted, "an object this shard owns")
			require.Empty(t, recs)
			return
		case found && row.Live <= 0 && !pending:
			require.False(t, o.Res.Accepted, "a dead object is not received")
			require.Equal(t, row.DeadAt, o.Res.DeadSince.UnixMilli(), "declined: dead since its row says")
			require.Empty(t, recs)
			return
		}
		require.True(t, o.Res.Accepted)
		require.Len(t, recs, 1)
		var rec []int32
		for _, sh := range owners {
			rec = append(rec, int32(sh))
		}
		if !known {
			fresh := obj == nil // never committed: a commit of it is no retry
			dead := m.now
			if !deadSince.IsZero() {
				dead = max(dead, deadSince.UnixMilli())
			}
			m.addObject(key, &mObject{group: s.r.decided, owners: rec, received: true, deadAt: dead})
			if fresh && rapid.Bool().Draw(t, "commitReceived") {
				// A key received here takes no batch: its commit is
				// refused, retriably (the producer sends again).
				c := &CommitOp{BaseOp: s.base(), Req: CommitFileRequest{ObjectKey: key, Size: 100,
					Coordinates: []wal.Coordinate{{TopicPartition: s.anyTP(t), Offset: 1, Size: 99, NumRecords: 1, ProducerID: -1}}}}
				recs := s.decide(c)
				require.Equal(t, kafkaerr.KafkaStorageError, errCode(<-c.Done), "commit of a received object")
				require.Empty(t, recs)
			}
			return
		}
		obj.received, obj.owners = true, rec
	}
	var segs []RemoteSegment // segments registered, for retries
	actions["registerRemote"] = func(t *rapid.T) {
		var seg RemoteSegment
		if len(segs) > 0 && rapid.IntRange(0, 3).Draw(t, "again") == 0 {
			seg = rapid.SampledFrom(segs).Draw(t, "segment")
		} else {
			tp := s.anyTP(t)
			var ds int64
			var hw int64
			if p := m.part(tp); p != nil {
				ds, hw = p.disklessStart, p.hw
			}
			base := ds + rapid.Int64Range(-1, 1).Draw(t, "base")
			end := rapid.Int64Range(base-1, max(base, hw)).Draw(t, "end")
			age := rapid.SampledFrom([]int64{0, 1000, 30000, 61000}).Draw(t, "age")
			id := makeV7(m.now - age)
			if rapid.IntRange(0, 15).Draw(t, "v4") == 0 {
				id = uuid.New()
			}
			seg = RemoteSegment{ID: id, TopicPartition: tp, Key: RemoteSegmentKey(mPrefix, tp, base, id), BaseOffset: base, EndOffset: end,
				MaxTimestamp: m.now - rapid.Int64Range(0, 10000).Draw(t, "tsAge"), Size: rapid.Int64Range(50, 500).Draw(t, "size"),
				IndexSize: 10, TimeIndexSize: 12, Uploader: 1}
			switch rapid.IntRange(0, 15).Draw(t, "flaw") {
			case 0:
				seg.Key += "x"
			case 1:
				seg.IndexSize = -1
			}
		}
		o := &RegisterRemoteOp{BaseOp: s.base(), Seg: seg}
		recs := s.decide(o)
		err := <-o.Done
		p := m.part(seg.TopicPartition)
		want := RemoteSegmentKey(mPrefix, seg.TopicPartition, seg.BaseOffset, seg.ID)
		code := kafkaerr.NoError
		registered := false
		switch {
		case p == nil:
			code = kafkaerr.UnknownTopicOrPartition
		case m.known(want):
			// Registered already (a retry): done.
		case !IsUUIDv7(seg.ID) || seg.Key != want || seg.Size < 0 || seg.IndexSize < 0 || seg.TimeIndexSize < 0 || seg.TxnIndexSize < 0:
			code = kafkaerr.InvalidRequest
		case m.now-UUIDV7Time(seg.ID).UnixMilli() > mDeadline.Milliseconds():
			code = kafkaerr.RequestTimedOut
		case seg.BaseOffset < 0, seg.BaseOffset > p.disklessStart, seg.EndOffset < p.disklessStart, seg.EndOffset >= p.hw,
			len(p.segs) > 0 && seg.BaseOffset <= p.segs[len(p.segs)-1].end:
			code = kafkaerr.OffsetOutOfRange
		default:
			registered = true
		}
		require.Equal(t, code, errCode(err), "register %+v", seg)
		require.Equal(t, registered, len(recs) == 1, "a segment registered logs it")
		if !registered {
			return
		}
		segs = append(segs, seg)
		m.addObject(seg.Key, &mObject{group: s.r.decided})
		p.segs = append(p.segs, mSeg{base: seg.BaseOffset, end: seg.EndOffset, key: seg.Key, maxTs: seg.MaxTimestamp, size: seg.Size})
		p.disklessStart = seg.EndOffset + 1
		for len(p.runs) > 0 && p.runs[0].last <= seg.EndOffset {
			p.runs = p.runs[1:]
		}
		if rapid.Bool().Draw(t, "retryNow") {
			// The same segment again, its registration on its way: done.
			again := &RegisterRemoteOp{BaseOp: s.base(), Seg: seg}
			recs := s.decide(again)
			require.NoError(t, <-again.Done)
			require.Empty(t, recs)
		}
	}
	actions["compact"] = func(t *rapid.T) {
		// The compactor read the committed rows: decide with nothing
		// pending but what the action adds.
		s.r.flush(t, m)
		tp, p := s.livePart(t)
		if len(p.runs) == 0 {
			t.Skip("no batches")
		}
		i := rapid.IntRange(0, len(p.runs)-1).Draw(t, "first")
		j := rapid.IntRange(i, len(p.runs)-1).Draw(t, "last")
		from, to := p.runs[i].base, p.runs[j].last
		if rapid.IntRange(0, 10).Draw(t, "shiftFrom") == 0 {
			from++
		}
		pid := s.r.root.Partition(tp).PID
		print, ok := fingerprint(p, from, to)
		prints := map[[3]int64]uint64{}
		if ok {
			prints[[3]int64{pid, from, to}] = print
		}
		req := CompactRequest{TopicPartition: tp, From: from, To: to, Fingerprint: print, Uploader: 2}
		if rapid.IntRange(0, 10).Draw(t, "stale") == 0 {
			req.Fingerprint++
		}
		var newRuns []mRun
		key := m.newKey(rapid.SampledFrom([]int64{0, 0, 0, 61000}).Draw(t, "keyAge"))
		if rapid.IntRange(0, 15).Draw(t, "knownKey") == 0 && len(m.commits) > 0 {
			key = rapid.SampledFrom(m.commits).Draw(t, "commit").key
		}
		for _, r := range p.runs[i : j+1] {
			if rapid.IntRange(0, 3).Draw(t, "drop") == 0 {
				continue
			}
			req.Runs = append(req.Runs, CompactedRun{BaseOffset: r.base, LastOffset: r.last, BytePos: req.Size, ByteSize: r.size, MaxTimestamp: r.maxTs})
			newRuns = append(newRuns, mRun{base: r.base, last: r.last, key: key, pos: req.Size, size: r.size, maxTs: r.maxTs})
			req.Size += r.size
		}
		if rapid.IntRange(0, 15).Draw(t, "badRun") == 0 {
			req.Runs = append(req.Runs, CompactedRun{BaseOffset: to + 1, LastOffset: to + 1, BytePos: 0, ByteSize: 1})
		}
		req.ObjectKey = key
		// Sometimes a trim of the partition is on its way to the log.
		disturbed := false
		if p.hw > p.logStart && rapid.IntRange(0, 5).Draw(t, "disturb") == 0 {
			d := &DeleteRecordsOp{BaseOp: s.base(), TP: tp, Offset: p.logStart + 1}
			s.decide(d)
			require.NoError(t, <-d.Done)
			m.trim(p, p.logStart+1)
			disturbed = true
		}
		o := &CompactOp{BaseOp: s.base(), Req: req}
		recs := s.r.decide(m, nil, prints, o)
		err := <-o.Done
		_, named, _ := wal.ParseObjectKey(mPrefix, key)
		switch {
		case !validRuns(from, to, req.Size, req.Runs):
			require.Equal(t, kafkaerr.InvalidRequest, errCode(err), "runs %+v of %d to %d", req.Runs, from, to)
		case m.known(key):
			require.Equal(t, kafkaerr.InvalidRequest, errCode(err), "a compaction into a known object")
		case m.now-named.UnixMilli() > mDeadline.Milliseconds():
			require.Equal(t, kafkaerr.RequestTimedOut, errCode(err))
		case to >= p.hw || from < p.logStart || from < p.disklessStart, disturbed, !ok, req.Fingerprint != print:
			require.ErrorIs(t, err, ErrRangeChanged)
		default:
			require.NoError(t, err)
			require.Len(t, recs, 1)
			var runs []mRun
			for _, r := range p.runs {
				if r.base >= from && r.last <= to {
					continue
				}
				runs = append(runs, r)
			}
			runs = append(runs, newRuns...)
			slices.SortFunc(runs, func(a, b mRun) int { return int(a.base - b.base) })
			p.runs = runs
			p.compactions++
			p.cleanedTo = max(p.cleanedTo, to+1)
			m.addObject(key, &mObject{group: s.r.decided})
			return
		}
		require.Empty(t, recs)
	}
}
