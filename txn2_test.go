package diskless

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless/cluster/etcdcluster"
	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/internal/etcdtest"
	"github.com/diskless-go/diskless/kafkaerr"
)

// TestTxnV2FeatureLevel: in a cluster whose transaction.version is
// finalized at 1 (its broker supported no more when it began), a v2 end
// is refused with UNSUPPORTED_VERSION and changes nothing, while a v1 end
// works; the level cannot be raised past what a broker supports; once
// the broker runs with level 2 and UpdateFeatures raises it, a v2 end
// bumps the epoch.
func TestTxnV2FeatureLevel(t *testing.T) {
	if testing.Short() {
		t.Skip("an etcd cluster")
	}
	etcd := etcdtest.Start(t, nil)
	bucket := memblob.OpenBucket(nil)
	t.Cleanup(func() { bucket.Close() })
	ctx := t.Context()
	dir := t.TempDir()
	open := func(features map[string]int) *Broker {
		b, err := Open(ctx, &Config{
			Bucket: bucket, BrokerID: 0, Shards: 1, Linger: 5 * time.Millisecond, DataDir: dir,
			Logger: zaptest.NewLogger(t),
			Cluster: &ClusterConfig{Backend: &etcdcluster.Backend{Endpoints: etcd.Endpoints()}, LeaseTTL: 2 * time.Second,
				Features: features},
		})
		require.NoError(t, err)
		t.Cleanup(func() { b.Close() })
		waitLeaders(t, []*Broker{b}, 1)
		return b
	}
	b := open(map[string]int{coordinator.FeatureTransactionVersion: 1})
	require.Equal(t, 1, b.Features().Finalized[coordinator.FeatureTransactionVersion])
	require.Equal(t, kafkaerr.UnsupportedVersion, kafkaerr.CodeOf(b.CheckTxnV2()))

	pid, epoch, err := b.InitTxnProducer(ctx, "tx", time.Minute, -1, -1)
	require.NoError(t, err)
	require.NoError(t, b.AddTxnOffsets(ctx, "tx", pid, epoch, "g"))
	_, _, err = b.EndTxnV2(ctx, "tx", pid, epoch, true)
	require.Equal(t, kafkaerr.UnsupportedVersion, kafkaerr.CodeOf(err), "%v", err)
	ts, err := b.Transactions(ctx, []string{"tx"})
	require.NoError(t, err)
	require.Equal(t, TxnOngoing, ts[0].State, "nothing changed")
	require.Equal(t, epoch, ts[0].Epoch)
	require.NoError(t, b.EndTxn(ctx, "tx", pid, epoch, true), "a v1 end")
	require.Equal(t, kafkaerr.InvalidUpdateVersion, kafkaerr.CodeOf(b.UpdateFeatures(ctx, map[string]int{coordinator.FeatureTransactionVersion: 2}, false)),
		"the broker supports only level 1")

	require.NoError(t, b.Close())
	b = open(nil)
	require.Equal(t, 1, b.Features().Finalized[coordinator.FeatureTransactionVersion], "a finalized level stays until raised")
	require.NoError(t, b.UpdateFeatures(ctx, map[string]int{coordinator.FeatureTransactionVersion: 2}, false))
	require.NoError(t, b.CheckTxnV2())
	require.NoError(t, b.AddTxnOffsets(ctx, "tx", pid, epoch, "g"))
	id, next, err := b.EndTxnV2(ctx, "tx", pid, epoch, true)
	require.NoError(t, err)
	require.Equal(t, pid, id)
	require.Equal(t, epoch+1, next)
}
