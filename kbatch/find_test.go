package kbatch_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kbatch"
)

// TestFind: LastOffset, FindRecord and MaxTimestampRecord over a run of
// batches with their offsets written in.
func TestFind(t *testing.T) {
	var data []byte
	base := int64(10)
	for i, ts := range [][]int64{{100, 300, 200}, {150, 500}, {400}} {
		b := kbatch.NewBuilder(kbatch.Codecs[i%len(kbatch.Codecs)])
		for _, v := range ts {
			b.Append(v, []byte("k"), []byte("v"))
		}
		raw, err := b.Build(nil)
		require.NoError(t, err)
		batch, err := kbatch.ParseBatch(raw)
		require.NoError(t, err)
		batch.SetBaseOffset(base)
		base += int64(len(ts))
		data = append(data, raw...)
	}
	// Offsets 10..15, timestamps 100 300 200 | 150 500 | 400.
	require.Equal(t, int64(15), kbatch.LastOffset(data))
	require.Equal(t, int64(-1), kbatch.LastOffset(nil))
	require.Equal(t, int64(14), kbatch.LastOffset(data[:len(data)-1]), "a partial last batch does not count")

	for _, c := range []struct {
		offset, ts, wantOff, wantTs int64
		found                       bool
	}{
		{0, 0, 10, 100, true},
		{11, 0, 11, 300, true},
		{10, 250, 11, 300, true},
		{12, 250, 14, 500, true},
		{0, 450, 14, 500, true},
		{15, 0, 15, 400, true},
		{0, 501, -1, -1, false},
		{16, 0, -1, -1, false},
	} {
		off, ts, found, err := kbatch.FindRecord(data, c.offset, c.ts)
		require.NoError(t, err)
		require.Equal(t, []any{c.wantOff, c.wantTs, c.found}, []any{off, ts, found}, "FindRecord(%d, %d)", c.offset, c.ts)
	}
	for _, c := range []struct{ offset, wantOff, wantTs int64 }{{0, 14, 500}, {15, 15, 400}, {12, 14, 500}} {
		off, ts, found, err := kbatch.MaxTimestampRecord(data, c.offset)
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, [2]int64{c.wantOff, c.wantTs}, [2]int64{off, ts}, "MaxTimestampRecord(%d)", c.offset)
	}
	_, _, found, err := kbatch.MaxTimestampRecord(data, 16)
	require.NoError(t, err)
	require.False(t, found)
}
