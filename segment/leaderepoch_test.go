package segment

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

func TestLeaderEpochCheckpointFormat(t *testing.T) {
	// As LeaderEpochCheckpointFile's class comment draws it.
	entries := []EpochEntry{{Epoch: 0, StartOffset: 1}, {Epoch: 1, StartOffset: 2}}
	got := AppendLeaderEpochCheckpoint([]byte("x"), entries)
	require.Equal(t, "x0\n2\n0 1\n1 2\n", string(got))
	parsed, err := ParseLeaderEpochCheckpoint(got[1:])
	require.NoError(t, err)
	require.Equal(t, entries, parsed)

	require.Equal(t, "0\n0\n", string(AppendLeaderEpochCheckpoint(nil, nil)))
	extreme := []EpochEntry{{Epoch: -2147483648, StartOffset: -9223372036854775808}, {Epoch: 2147483647, StartOffset: 9223372036854775807}}
	parsed, err = ParseLeaderEpochCheckpoint(AppendLeaderEpochCheckpoint(nil, extreme))
	require.NoError(t, err)
	require.Equal(t, extreme, parsed)
}

// What CheckpointFile.CheckpointReadBuffer accepts and refuses.
func TestParseLeaderEpochCheckpoint(t *testing.T) {
	ok := map[string][]EpochEntry{
		"":                          nil,
		"0":                         nil, // a version and no count: no entries
		"0\n":                       nil,
		"0\n0\n":                    {},
		"0\n0":                      {},
		"+0\n1\n5 7\n":              {{5, 7}},
		"0\n1\n5 7":                 {{5, 7}}, // the last line needs no end
		"0\r\n2\r\n5 7\r\n6\t\t9\r": {{5, 7}, {6, 9}},
		"0\n1\n5  7 \t\n":           {{5, 7}}, // trailing white space is dropped
		"0\n1\n+5 -7\n":             {{5, -7}},
		"0\n1\n-1 0\n":              {{-1, 0}},
		"0\n1\n5\v7\f\n":            {{5, 7}},
	}
	for in, want := range ok {
		got, err := ParseLeaderEpochCheckpoint([]byte(in))
		require.NoError(t, err, "%q", in)
		require.Equal(t, len(want), len(got), "%q", in)
		for i := range want {
			require.Equal(t, want[i], got[i], "%q", in)
		}
	}
	bad := []string{
		"1\n0\n",               // unknown version
		" 0\n0\n",              // Integer.parseInt takes no white space
		"0 \n0\n",              //
		"x\n",                  //
		"0\nx\n",               // malformed count
		"0\n-1\n",              // negative count
		"0\n2\n5 7\n",          // fewer entries than the count
		"0\n0\n5 7\n",          // more
		"0\n1\n 5 7\n",         // a leading empty field
		"0\n1\n5\n",            // one field
		"0\n1\n5 7 9\n",        // three
		"0\n1\n5 7\n\n",        // an empty line is malformed
		"0\n1\n2147483648 7\n", // the epoch is an int32
		"0\n1\n5 9223372036854775808\n",
		"0\n1\n5 0x7\n",
		"0\n1\n5 7_0\n",
		"0\n1\n5 ٣\n", // Java would read this Arabic-Indic digit; we take ASCII only
		"0\n1\n5\u00a07\n",
		"0\n2147483648\n",
	}
	for _, in := range bad {
		_, err := ParseLeaderEpochCheckpoint([]byte(in))
		require.Error(t, err, "%q", in)
		require.Equal(t, kafkaerr.CorruptMessage, kafkaerr.CodeOf(err), "%q: %v", in, err)
	}
}

// leBatch is a one-record batch at base in a leader epoch.
func leBatch(t testing.TB, base int64, epoch int32) []byte {
	t.Helper()
	b := kbatch.NewBuilder(kbatch.CodecNone)
	b.SetBaseOffset(base)
	b.SetPartitionLeaderEpoch(epoch)
	b.Append(vectorTimestamp, nil, []byte("v"))
	out, err := b.Build(nil)
	require.NoError(t, err)
	return out
}

// LeaderEpochFileCache.assign's rules, as LeaderEpochFileCacheTest checks
// them, over batches.
func TestLeaderEpochsOfBatches(t *testing.T) {
	type be struct {
		base  int64
		epoch int32
	}
	cases := []struct {
		name    string
		batches []be
		want    []EpochEntry
	}{
		{"none", nil, nil},
		{"no epoch", []be{{0, -1}, {1, -1}}, nil},
		{"one epoch keeps its first offset", []be{{0, 2}, {5, 2}, {9, 2}}, []EpochEntry{{2, 0}}},
		{"epochs ascend", []be{{0, 1}, {3, 1}, {4, 3}, {10, 4}}, []EpochEntry{{1, 0}, {3, 4}, {4, 10}}},
		{"epoch -1 between is ignored", []be{{0, 1}, {3, -1}, {4, 1}, {5, 2}}, []EpochEntry{{1, 0}, {2, 5}}},
		{"same epoch at a lower offset replaces it", []be{{0, 2}, {10, 3}, {8, 3}}, []EpochEntry{{2, 0}, {3, 8}}},
		{"a lower epoch truncates the later ones", []be{{0, 2}, {10, 3}, {20, 1}}, []EpochEntry{{1, 20}}},
		{"a lower offset truncates the later epochs", []be{{0, 2}, {10, 3}, {20, 4}, {15, 5}}, []EpochEntry{{2, 0}, {3, 10}, {5, 15}}},
		{"an equal offset replaces", []be{{0, 2}, {10, 3}, {10, 4}}, []EpochEntry{{2, 0}, {4, 10}}},
		{"a lower epoch at a higher offset", []be{{0, 2}, {10, 5}, {20, 4}}, []EpochEntry{{2, 0}, {4, 20}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var log []byte
			for _, b := range c.batches {
				log = append(log, leBatch(t, b.base, b.epoch)...)
			}
			require.Equal(t, c.want, LeaderEpochsOfBatches(log))
		})
	}
	// The walk stops where the framing does.
	log := append(leBatch(t, 0, 1), leBatch(t, 5, 2)...)
	require.Equal(t, []EpochEntry{{1, 0}}, LeaderEpochsOfBatches(log[:len(log)-1]))
}
