package diskless

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

// TestFetchDamagedObject: a WAL object that is truncated, emptied,
// overwritten by another or gone is KAFKA_STORAGE_ERROR to fetchers (the
// partition's Err says so too, wrapping the cause), counted in
// Stats.FetchStorageErrors at each fetch, and logged at warn with its key
// and partition once (per minute), not at every fetch.
func TestFetchDamagedObject(t *testing.T) {
	damage := map[string]func(t *testing.T, path, other string){
		"truncated": func(t *testing.T, path, _ string) {
			fi, err := os.Stat(path)
			require.NoError(t, err)
			require.NoError(t, os.Truncate(path, fi.Size()/2))
		},
		"empty": func(t *testing.T, path, _ string) { require.NoError(t, os.Truncate(path, 0)) },
		"gone":  func(t *testing.T, path, _ string) { require.NoError(t, os.Remove(path)) },
		"swapped": func(t *testing.T, path, other string) {
			b, err := os.ReadFile(other)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(path, b, 0o644))
		},
	}
	for name, f := range damage {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			dir := t.TempDir()
			cfg := &Config{BucketURL: "file://" + dir}
			b := openTest(t, cfg)
			_, err := b.CreateTopic(ctx, "t", TopicConfig{Partitions: 2})
			require.NoError(t, err)
			// Two objects, with batches of different sizes.
			for p, n := range []int{3, 5} {
				resp, err := b.Produce(ctx, ProduceRequest{Acks: -1, Partitions: []ProducePartition{{Topic: "t", Partition: int32(p), Records: batch(t, kbatch.CodecNone, 0, n, -1, -1)}}})
				require.NoError(t, err)
				require.NoError(t, resp.Partitions[0].Err)
			}
			require.NoError(t, b.Close())
			var objects []string // by name: the first object first
			require.NoError(t, filepath.WalkDir(filepath.Join(dir, "wal"), func(path string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() && !strings.HasSuffix(path, ".attrs") {
					objects = append(objects, path)
				}
				return err
			}))
			require.Len(t, objects, 2)
			f(t, objects[0], objects[1])

			core, logs := observer.New(zap.WarnLevel)
			b2 := openTest(t, &Config{BucketURL: cfg.BucketURL, Logger: zap.New(core)}) // a cold cache
			var p int32 = -1
			for i := range 3 {
				for q := range int32(2) {
					resp, err := b2.Fetch(ctx, FetchRequest{Partitions: []FetchPartition{{Topic: "t", Partition: q}}, MaxWait: time.Millisecond})
					require.NoError(t, err)
					if code := resp.Partitions[0].ErrorCode; code != kafkaerr.NoError {
						require.Equal(t, kafkaerr.KafkaStorageError, code, "%v", resp.Partitions[0].Err)
						require.Equal(t, code, kafkaerr.CodeOf(resp.Partitions[0].Err), "Err says what ErrorCode says")
						require.True(t, p == -1 || p == q, "one partition is damaged")
						p = q
					}
				}
				require.NotEqual(t, int32(-1), p, "a damaged partition")
				require.Equal(t, int64(i+1), b2.Stats().FetchStorageErrors, "counted at every fetch")
			}
			warned := logs.FilterMessageSnippet("damaged or unreadable object").All()
			require.Len(t, warned, 1, "logged once: %v", logs.All())
			fields := warned[0].ContextMap()
			require.Equal(t, "t", fields["topic"])
			require.Equal(t, p, fields["partition"])
			key, _ := fields["key"].(string)
			require.True(t, strings.HasSuffix(filepath.ToSlash(objects[0]), key), "key %q names the damaged object %s", key, objects[0])
		})
	}
}

// TestOnceEvery: a key is let through once per storageLogInterval.
func TestOnceEvery(t *testing.T) {
	var o onceEvery
	t0 := time.Unix(1000, 0)
	require.True(t, o.allow("a", t0))
	require.False(t, o.allow("a", t0.Add(storageLogInterval-1)))
	require.True(t, o.allow("b", t0.Add(time.Second)), "each key on its own")
	require.True(t, o.allow("a", t0.Add(storageLogInterval)))
	for i := range 3000 {
		o.allow(strings.Repeat("k", i%7)+string(rune('a'+i%26))+time.Duration(i).String(), t0.Add(time.Duration(i)*time.Minute))
	}
	require.LessOrEqual(t, len(o.last), 1025, "old keys are forgotten")
}
