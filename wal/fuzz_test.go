package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kbatch"
)

// FuzzReader feeds arbitrary bytes to the reader as an object, and
// arbitrary coordinates derived from a second input: nothing panics, errors
// are *ObjectError values wrapping a known sentinel, the input is never
// changed, and whatever Scan accepts, CheckObject accepts with the
// coordinates Scan found.
func FuzzReader(f *testing.F) {
	golden, err := os.ReadFile(goldenObject)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(golden, []byte{})
	f.Add(golden[:len(golden)/2], []byte{1, 0, 0, 0, 100})
	f.Add([]byte{0}, []byte{})
	f.Add([]byte{1, 2, 3}, []byte{0, 0, 0, 1, 0, 0, 0, 70})
	f.Fuzz(func(t *testing.T, data, coordBytes []byte) {
		before := bytes.Clone(data)
		tp := TopicPartition{Partition: 1}
		var found []Coordinate
		scanErr := Scan(data, func(off int64, b kbatch.Batch) error {
			require.LessOrEqual(t, off+int64(len(b)), int64(len(data)))
			found = append(found, coordinateOf(tp, off, b))
			return nil
		})
		if scanErr != nil {
			requireObjectError(t, scanErr)
		} else {
			require.NoError(t, CheckObject(data, found))
		}

		// Coordinates from the second input: (offset, size) pairs, the
		// rest taken from whatever batch sits there.
		var coords []Coordinate
		for len(coordBytes) >= 8 {
			c := Coordinate{TopicPartition: tp, Offset: int64(binary.BigEndian.Uint32(coordBytes)), Size: int32(binary.BigEndian.Uint32(coordBytes[4:]))}
			coordBytes = coordBytes[8:]
			if c.Offset >= 0 && c.Size >= kbatch.HeaderSize && c.End() <= int64(len(data)) {
				if b, err := kbatch.ParseBatch(data[c.Offset:c.End()]); err == nil {
					c = coordinateOf(tp, c.Offset, b)
				}
			}
			coords = append(coords, c)
		}
		if err := CheckObject(data, coords); err != nil {
			requireObjectError(t, err)
		}
		for start := int64(0); start <= int64(len(data)); start += max(int64(len(data))/3, 1) {
			if err := CheckRange(data[start:], start, coords); err != nil {
				requireObjectError(t, err)
			}
			it := NewRegionIter(data[start:], start, coords)
			for it.Next() {
				require.LessOrEqual(t, it.Coordinate().End(), int64(len(data)))
			}
		}
		require.Equal(t, before, data)
	})
}

func requireObjectError(t *testing.T, err error) {
	t.Helper()
	var oe *ObjectError
	require.ErrorAs(t, err, &oe)
	known := false
	for _, s := range []error{ErrUnknownVersion, ErrTruncated, ErrCorrupt, ErrMismatch} {
		known = known || errors.Is(err, s)
	}
	require.True(t, known, "%v", err)
}
