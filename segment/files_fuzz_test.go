package segment

// Fuzz targets for the small decoders inside the package that no other
// target reaches directly: the .index and .timeindex checks that
// decide whether a clean shutdown's indexes are trusted, the checkpoint
// files, and segment file names. Their seeds run under plain `go test`;
// `make fuzz` fuzzes them.

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kbatch"
)

// FuzzIndexFiles: checkOffsetIndex and checkTimeIndex never panic on any
// bytes and base; what they accept is entries in the order Kafka writes
// them (offsets and positions strictly ascending within the segment and
// the log; timestamps and offsets never going back, offsets within the
// segment), the last of which they return, and those entries re-encode to
// the input.
func FuzzIndexFiles(f *testing.F) {
	var off, tim []byte
	for i := range int32(6) {
		off = encodeOffsetEntry(off, 7*i+2, 1000*i)
		tim = encodeTimeEntry(tim, 1_700_000_000_000+int64(50*i), 7*i+2)
	}
	f.Add(off, tim, int64(0), int64(6000), int64(40))
	f.Add(off, tim, int64(1<<40), int64(5001), int64(1<<40+37))
	f.Add(off[:12], tim[:18], int64(0), int64(6000), int64(40))
	f.Add([]byte{}, []byte{}, int64(0), int64(0), int64(0))
	f.Add(off, tim, int64(math.MaxInt64-10), int64(math.MaxInt64), int64(math.MaxInt64))
	f.Add(off, tim, int64(-5), int64(-1), int64(-5))
	f.Fuzz(func(t *testing.T, off, tim []byte, base, logSize, maxOffset int64) {
		last, err := checkOffsetIndex(off, base, logSize)
		if err == nil {
			require.Zero(t, len(off)%offsetIndexEntrySize)
			again := []byte{}
			prev := offsetPosition{offset: base}
			for i := 0; i < len(off); i += offsetIndexEntrySize {
				e := decodeOffsetEntry(off[i:], base)
				require.GreaterOrEqual(t, e.offset, base)
				require.GreaterOrEqual(t, e.position, int64(0))
				require.Less(t, e.position, logSize)
				if prev.found {
					require.Greater(t, e.offset, prev.offset)
					require.Greater(t, e.position, prev.position)
				}
				again = encodeOffsetEntry(again, int32(e.offset-base), int32(e.position))
				prev = e
			}
			require.Equal(t, prev, last)
			require.Equal(t, append([]byte{}, off...), again, "accepted entries re-encode to other bytes")
		} else {
			require.NotEmpty(t, err.Error())
		}

		tlast, err := checkTimeIndex(tim, base, maxOffset)
		if err == nil {
			require.Zero(t, len(tim)%timeIndexEntrySize)
			again := []byte{}
			prev := timestampOffset{timestamp: kbatch.NoTimestamp, offset: base}
			for i := 0; i < len(tim); i += timeIndexEntrySize {
				e := decodeTimeEntry(tim[i:], base)
				require.GreaterOrEqual(t, e.offset, base)
				require.LessOrEqual(t, e.offset, maxOffset)
				if i > 0 {
					require.GreaterOrEqual(t, e.timestamp, prev.timestamp)
					require.GreaterOrEqual(t, e.offset, prev.offset)
				}
				again = encodeTimeEntry(again, e.timestamp, int32(e.offset-base))
				prev = e
			}
			require.Equal(t, prev, tlast)
			require.Equal(t, append([]byte{}, tim...), again, "accepted entries re-encode to other bytes")
		}
	})
}

// FuzzCheckpoint: parseCheckpoint never panics; what it accepts is three
// lines (version 0, one entry, the entry), the entry a non-negative offset
// that writeCheckpoint's layout writes back to bytes read the same.
func FuzzCheckpoint(f *testing.F) {
	for _, s := range []string{
		"0\n1\n0\n", "0\n1\n42\n", "0\n1\n42", "0\n1\n42\n\n\n", "0\n1\n-1\n", "1\n1\n5\n",
		"0\n2\n5\n6\n", "0\n1\n9223372036854775807\n", "0\n1\n9223372036854775808\n",
		"0\n1\n+5\n", "0\n1\n05\n", "0\r\n1\r\n5\r\n", "", "\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		off, ok := parseCheckpoint(b)
		if !ok {
			require.Zero(t, off)
			return
		}
		require.GreaterOrEqual(t, off, int64(0))
		canonical := fmt.Appendf(nil, "%d\n1\n%d\n", checkpointVersion, off)
		back, ok := parseCheckpoint(canonical)
		require.True(t, ok)
		require.Equal(t, off, back)
		lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
		require.Len(t, lines, 3, "accepted with other than three lines")
		require.Equal(t, "0", string(lines[0]))
		require.Equal(t, "1", string(lines[1]))
	})
}

// FuzzSegmentName: parseSegmentName never panics; a name it accepts is
// exactly the name segmentPath gives its base offset, extension and
// suffix, so a file is never taken for another segment's.
func FuzzSegmentName(f *testing.F) {
	for _, s := range []string{
		"00000000000000000000.log", "00000000000000000042.index", "00000000000000000042.timeindex",
		"00000000000000000042.txnindex", "00000000000000000042.log.cleaned", "00000000000000000042.log.swap",
		"00000000000000000042.index.deleted", "09223372036854775807.log", "09223372036854775808.log",
		"0000000000000000042.log", "000000000000000000042.log", "-0000000000000000042.log",
		"+0000000000000000042.log", "00000000000000000042.snapshot", "00000000000000000042.log.swap.swap",
		"leader-epoch-checkpoint", ".kafka_cleanshutdown", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		base, ext, suffix, ok := parseSegmentName(name)
		if !ok {
			require.Zero(t, base)
			require.Empty(t, ext)
			require.Empty(t, suffix)
			return
		}
		require.GreaterOrEqual(t, base, int64(0))
		require.Contains(t, []string{logFileExt, indexFileExt, timeIndexFileExt, txnIndexFileExt}, ext)
		require.Contains(t, []string{"", cleanedSuffix, swapSuffix, deletedSuffix}, suffix)
		require.Equal(t, name, filepath.Base(segmentPath("/d", base, ext, suffix)))
	})
}
