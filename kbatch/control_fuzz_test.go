package kbatch_test

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

// FuzzControlRecord: ParseControlRecord never panics nor writes to the
// record, fails only with INVALID_RECORD, and what it reads of a
// transaction marker is what AppendEndTxnMarker writes for it: the marker
// it builds parses back the same, and its key and value are the input's
// when the input is a version 0 marker with nothing after it. The same
// bytes framed as a control batch read the same way.
func FuzzControlRecord(f *testing.F) {
	for _, commit := range []bool{true, false} {
		m := kbatch.AppendEndTxnMarker(nil, kbatch.EndTxnMarker{Commit: commit, ProducerID: 9, ProducerEpoch: 1, CoordinatorEpoch: 77, Timestamp: kmT0})
		var rr kbatch.RecordReader
		require.NoError(f, rr.Reset(kbatch.Batch(m)))
		require.True(f, rr.Next())
		r := rr.Record()
		f.Add(slices.Clone(r.Key), slices.Clone(r.Value))
	}
	f.Add([]byte{0, 0, 0, 2}, []byte{})                       // LEADER_CHANGE: the value is not read
	f.Add([]byte{0, 1, 0, 9}, []byte(nil))                    // an unknown type, version 1
	f.Add([]byte{0xff, 0xff, 0, 1}, []byte{0, 0, 0, 0, 0, 1}) // a negative version
	f.Add([]byte{0, 0, 0, 1}, []byte{0, 0, 0, 0, 0})          // a short value
	f.Add([]byte{0, 0, 0}, []byte{})                          // a short key
	f.Add([]byte{0, 0, 0, 0, 9, 9}, []byte{0, 3, 0, 0, 0, 1, 7})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		ko, vo := slices.Clone(key), slices.Clone(value)
		cr, err := kbatch.ParseControlRecord(&kbatch.Record{Key: key, Value: value})
		require.Equal(t, ko, key, "ParseControlRecord wrote to the key")
		require.Equal(t, vo, value, "ParseControlRecord wrote to the value")
		fzControlBatch(t, key, value, cr, err)
		if err != nil {
			require.Equal(t, kafkaerr.InvalidRecord, fzRequireError(t, err))
			return
		}
		require.GreaterOrEqual(t, cr.Version, int16(0))
		require.Equal(t, int16(binary.BigEndian.Uint16(key)), cr.Version)
		switch cr.Type {
		case kbatch.ControlAbort, kbatch.ControlCommit:
			marker := kbatch.AppendEndTxnMarker(nil, kbatch.EndTxnMarker{Commit: cr.Type == kbatch.ControlCommit, CoordinatorEpoch: cr.CoordinatorEpoch, Timestamp: kmT0})
			var rr kbatch.RecordReader
			require.NoError(t, rr.Reset(kbatch.Batch(marker)))
			require.True(t, rr.Next())
			r := rr.Record()
			back, err := kbatch.ParseControlRecord(r)
			require.NoError(t, err)
			require.Equal(t, kbatch.ControlRecord{Type: cr.Type, CoordinatorEpoch: cr.CoordinatorEpoch}, back)
			if len(key) == 4 && len(value) == 6 && cr.Version == 0 && binary.BigEndian.Uint16(value) == 0 {
				require.Equal(t, key, []byte(r.Key))
				require.Equal(t, value, []byte(r.Value))
			}
		case kbatch.ControlUnknown:
			require.Zero(t, cr.CoordinatorEpoch)
			typ := int16(binary.BigEndian.Uint16(key[2:]))
			require.True(t, typ < int16(kbatch.ControlAbort) || typ > int16(kbatch.ControlKRaftVoters), "type %d is known", typ)
		default:
			require.Zero(t, cr.CoordinatorEpoch)
			require.Equal(t, kbatch.ControlType(binary.BigEndian.Uint16(key[2:])), cr.Type)
		}
	})
}

// fzControlBatch puts key and value in a control batch and requires the
// record read from it to parse as the bare record did.
func fzControlBatch(t *testing.T, key, value []byte, want kbatch.ControlRecord, wantErr error) {
	t.Helper()
	b := kbatch.NewBuilder(kbatch.CodecNone)
	b.SetProducer(5, 0, -1)
	b.SetTransactional(true)
	b.Append(kmT0, key, value)
	raw, err := b.Build(nil)
	require.NoError(t, err)
	raw[22] |= 0x20 // the control bit of the attributes' low byte
	raw = fzFrame(raw)
	batch, err := kbatch.ParseBatch(raw)
	require.NoError(t, err)
	require.True(t, batch.Control())
	var rr kbatch.RecordReader
	require.NoError(t, rr.Reset(batch))
	require.True(t, rr.Next(), "%v", rr.Err())
	got, err := kbatch.ParseControlRecord(rr.Record())
	if wantErr != nil {
		require.Error(t, err)
		require.Equal(t, kafkaerr.CodeOf(wantErr), kafkaerr.CodeOf(err))
		return
	}
	require.NoError(t, err)
	require.Equal(t, want, got)
}
