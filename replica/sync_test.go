package replica_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless/cache"
	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/replica"
	"github.com/diskless-go/diskless/wal"
)

// TestSyncReadsYourWrites: Sync right after an acknowledged commit returns
// the high watermark the commit made, on the memory, file and bucket logs,
// through the exported API only (the coordinator applies to its database
// on its own schedule: the default ApplyInterval).
func TestSyncReadsYourWrites(t *testing.T) {
	logs := map[string]func(t *testing.T) metalog.Log{
		"mem": func(t *testing.T) metalog.Log { return metalog.NewMem(nil) },
		"file": func(t *testing.T) metalog.Log {
			l, err := metalog.OpenFile(t.TempDir(), nil)
			require.NoError(t, err)
			return l
		},
		"bucket": func(t *testing.T) metalog.Log {
			b := memblob.OpenBucket(nil)
			t.Cleanup(func() { b.Close() })
			l, err := metalog.OpenBucket(t.Context(), b, "meta/0/", nil)
			require.NoError(t, err)
			return l
		},
	}
	for name, open := range logs {
		t.Run("log="+name, func(t *testing.T) {
			ctx := t.Context()
			log := open(t)
			t.Cleanup(func() { log.Close() })
			c, err := coordinator.Open(ctx, []metalog.Log{log}, &coordinator.Options{Dir: t.TempDir()})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, c.Close()) })
			bucket := memblob.OpenBucket(nil)
			t.Cleanup(func() { bucket.Close() })
			objects, err := cache.New(bucket, nil)
			require.NoError(t, err)
			t.Cleanup(func() { objects.Close() })
			id, err := c.CreatePartitions(ctx, coordinator.CreatePartitionsRequest{Name: "sync", Partitions: 1})
			require.NoError(t, err)
			tp := wal.TopicPartition{TopicID: id}
			m, err := replica.NewMaterializer(c, objects, t.TempDir(), &replica.MaterializerOptions{Start: replica.StartEarliest})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, m.Close()) })
			require.NoError(t, m.Add(ctx, tp, nil))

			const n = 30
			for i := range n {
				require.NoError(t, produce(ctx, c, bucket, fmt.Sprintf("wal/%d", i), tp, 1))
				end, err := m.Sync(ctx, tp)
				require.NoError(t, err)
				require.Equal(t, int64(i+1), end, "Sync right after commit %d", i)
			}
			// Once more after all of them, on a fresh Materializer.
			m2, err := replica.NewMaterializer(c, objects, t.TempDir(), &replica.MaterializerOptions{Start: replica.StartEarliest})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, m2.Close()) })
			require.NoError(t, m2.Add(ctx, tp, nil))
			end, err := m2.Sync(ctx, tp)
			require.NoError(t, err)
			require.Equal(t, int64(n), end)
		})
	}
}
