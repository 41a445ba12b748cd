package diskless

import (
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"

	"github.com/diskless-go/diskless/kbatch"
)

// keys lists a bucket's keys.
func keys(t *testing.T, b *blob.Bucket) []string {
	t.Helper()
	var out []string
	it := b.List(nil)
	for {
		o, err := it.Next(t.Context())
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		out = append(out, o.Key)
	}
}

// TestMetadataBucket: with Config.MetadataBucket the metadata log and the
// snapshots go to it and the WAL objects to the main bucket; a broker with
// no local state rebuilds from the two.
func TestMetadataBucket(t *testing.T) {
	ctx := t.Context()
	mainDir, metaDir := t.TempDir(), t.TempDir()
	main, err := blob.OpenBucket(ctx, "file://"+mainDir)
	require.NoError(t, err)
	defer main.Close()
	cfg := &Config{Bucket: main, MetadataBucketURL: "file://" + metaDir, DataDir: t.TempDir(), Linger: 5 * time.Millisecond}
	b, err := Open(ctx, cfg)
	require.NoError(t, err)
	_, err = b.CreateTopic(ctx, "t", TopicConfig{Partitions: 1})
	require.NoError(t, err)
	for i := range 4 {
		resp, err := b.Produce(ctx, ProduceRequest{Acks: -1, Partitions: []ProducePartition{
			{Topic: "t", Partition: 0, Records: batch(t, kbatch.CodecNone, i*3, 3, -1, 0)},
		}})
		require.NoError(t, err)
		require.NoError(t, resp.Partitions[0].Err)
	}
	s := b.Stats()
	require.NotNil(t, s.MetadataStore)
	require.Positive(t, s.MetadataStore["PUT"].Calls, "log entries")
	require.Positive(t, s.Store["PUT"].Calls, "WAL objects")
	require.NoError(t, b.Close())

	meta, err := blob.OpenBucket(ctx, "file://"+metaDir)
	require.NoError(t, err)
	defer meta.Close()
	mainKeys, metaKeys := keys(t, main), keys(t, meta)
	require.NotEmpty(t, mainKeys)
	require.NotEmpty(t, metaKeys)
	for _, k := range mainKeys {
		require.True(t, strings.HasPrefix(k, "wal/"), "main bucket: %s", k)
	}
	for _, k := range metaKeys {
		require.True(t, strings.HasPrefix(k, "meta/"), "metadata bucket: %s", k)
	}

	// No local state: everything comes back from the two buckets. An open
	// *blob.Bucket this time.
	require.NoError(t, os.RemoveAll(cfg.DataDir))
	cfg.MetadataBucketURL, cfg.MetadataBucket = "", meta
	b2, err := Open(ctx, cfg)
	require.NoError(t, err)
	defer b2.Close()
	f, err := b2.Fetch(ctx, FetchRequest{Partitions: []FetchPartition{{Topic: "t", Partition: 0}}})
	require.NoError(t, err)
	require.Equal(t, int64(12), f.Partitions[0].HighWatermark)
	require.Len(t, records(t, f.Partitions[0].Records), 12)
	require.Nil(t, openTest(t, nil).Stats().MetadataStore, "no metadata bucket of its own")
}
