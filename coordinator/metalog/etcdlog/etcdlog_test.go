package etcdlog_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/coordinator/metalog/etcdlog"
	"github.com/diskless-go/diskless/coordinator/metalog/metalogtest"
	"github.com/diskless-go/diskless/internal/etcdtest"
)

// etcdPrefixes numbers the logs of one test binary's cluster.
var etcdPrefixes atomic.Int64

// TestEtcdConformance runs the suite against the etcd Log on a real
// three-member etcd cluster: with no fence (several handles appending at
// the end they know, fenced by the offsets, one put at a time), and with a
// Fence (one leader at a time, elected, its puts pipelined), entries
// larger than SpillBytes spilled to a bucket.
func TestEtcdConformance(t *testing.T) {
	cluster := etcdtest.Start(t, nil)
	client := cluster.Client(t)
	spill := memblob.OpenBucket(nil)
	t.Cleanup(func() { spill.Close() })
	open := func(t *testing.T, prefix string, fence *etcdlog.Fence) *etcdlog.Log {
		l, err := etcdlog.Open(t.Context(), client, prefix, &etcdlog.Options{
			Fence: fence, Spill: spill, SpillPrefix: prefix + "spill/", RequestTimeout: 2 * time.Second,
		})
		require.NoError(t, err)
		return l
	}
	t.Run("log=etcd", func(t *testing.T) {
		metalogtest.Run(t, func(t *testing.T) metalogtest.Harness {
			prefix := fmt.Sprintf("/test/%d/", etcdPrefixes.Add(1))
			return metalogtest.Harness{
				Open:   func(t *testing.T) metalog.Log { return open(t, prefix, nil) },
				Shared: true,
				Fail:   func(t *testing.T, l metalog.Log) { etcdlog.FailNext(l.(*etcdlog.Log)) },
			}
		})
	})
	t.Run("log=etcd-fenced", func(t *testing.T) {
		metalogtest.Run(t, func(t *testing.T) metalogtest.Harness {
			prefix := fmt.Sprintf("/test/%d/", etcdPrefixes.Add(1))
			return metalogtest.Harness{
				Open: func(t *testing.T) metalog.Log {
					s, err := concurrency.NewSession(client, concurrency.WithTTL(5))
					require.NoError(t, err)
					e := concurrency.NewElection(s, prefix+"leader")
					require.NoError(t, e.Campaign(t.Context(), "test"))
					l := open(t, prefix, &etcdlog.Fence{Key: e.Key(), Revision: e.Rev()})
					require.Greater(t, l.MaxInFlight(), 1, "a fenced log pipelines")
					return &sessionLog{Log: l, session: s}
				},
				Fail:            func(t *testing.T, l metalog.Log) { etcdlog.FailNext(l.(*sessionLog).Log) },
				FailNeedsReopen: false,
			}
		})
	})
}

// sessionLog is a fenced etcd Log whose Close also ends its writer's
// session, so that the next writer wins the election.
type sessionLog struct {
	*etcdlog.Log
	session *concurrency.Session
}

func (l *sessionLog) Close() error {
	err := l.Log.Close()
	l.session.Close()
	return err
}

// TestEtcdFencedByLease: a writer whose session ends (its lease expires,
// as for a broker paused past its TTL) has every append refused, those in
// flight included, and none of them lands; the new leader appends after
// the old one's last entry.
func TestEtcdFencedByLease(t *testing.T) {
	ctx := t.Context()
	cluster := etcdtest.Start(t, nil)
	client := cluster.Client(t)
	prefix := "/lease/"
	s, err := concurrency.NewSession(client, concurrency.WithTTL(5))
	require.NoError(t, err)
	e := concurrency.NewElection(s, prefix+"leader")
	require.NoError(t, e.Campaign(ctx, "a"))
	a, err := etcdlog.Open(ctx, client, prefix, &etcdlog.Options{Fence: &etcdlog.Fence{Key: e.Key(), Revision: e.Rev()}})
	require.NoError(t, err)
	defer a.Close()
	metalogtest.AppendEntries(t, a, 0, 10)
	require.NoError(t, a.Confirm(ctx), "the leader confirms its leadership")

	// The lease ends: revoked here, as its TTL would end it.
	_, err = client.Revoke(ctx, s.Lease())
	require.NoError(t, err)
	require.ErrorIs(t, a.Confirm(ctx), metalog.ErrFenced, "a leader whose lease ended cannot confirm it, for a read")
	var chs []<-chan metalog.AppendResult
	for i := int64(10); i < 40; i++ {
		chs = append(chs, a.Append(metalogtest.Entry(i)))
	}
	for _, ch := range chs {
		require.ErrorIs(t, (<-ch).Err, metalog.ErrFenced)
	}

	s2, err := concurrency.NewSession(client, concurrency.WithTTL(5))
	require.NoError(t, err)
	defer s2.Close()
	e2 := concurrency.NewElection(s2, prefix+"leader")
	require.NoError(t, e2.Campaign(ctx, "b"))
	b, err := etcdlog.Open(ctx, client, prefix, &etcdlog.Options{Fence: &etcdlog.Fence{Key: e2.Key(), Revision: e2.Rev()}})
	require.NoError(t, err)
	defer b.Close()
	require.Equal(t, int64(10), b.End(), "none of the fenced appends landed")
	require.NoError(t, b.Confirm(ctx))
	require.ErrorIs(t, a.Confirm(ctx), metalog.ErrFenced, "nor once another leads")
	metalogtest.AppendEntries(t, b, 10, 20)
	metalogtest.RequireEntries(t, metalogtest.ReadAll(t, b, 0), 0, 20)
}

// TestEtcdTenThousandPartitions: an entry larger than etcd's request limit
// (a commit of 10,000 partitions, here 3 MiB against a cluster limited to
// 1 MiB) is spilled to the bucket and read back.
func TestEtcdTenThousandPartitions(t *testing.T) {
	ctx := t.Context()
	cluster := etcdtest.Start(t, &etcdtest.Options{Flags: []string{"--max-request-bytes=1048576"}})
	client := cluster.Client(t)
	spill := memblob.OpenBucket(nil)
	defer spill.Close()
	l, err := etcdlog.Open(ctx, client, "/big/", &etcdlog.Options{Spill: spill, SpillPrefix: "meta/0/spill/", SpillBytes: 512 << 10})
	require.NoError(t, err)
	defer l.Close()
	big := make([]byte, 3<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	r := <-l.Append(big)
	require.NoError(t, r.Err)
	got := metalogtest.ReadAll(t, l, 0)
	require.Len(t, got, 1)
	require.Equal(t, big, got[0].Entry)
	keys, err := spill.List(nil).Next(ctx)
	require.NoError(t, err)
	require.Contains(t, keys.Key, "meta/0/spill/")

	// Without a spill bucket such an entry fails, and says why.
	l2, err := etcdlog.Open(ctx, client, "/big2/", &etcdlog.Options{SpillBytes: 512 << 10})
	require.NoError(t, err)
	defer l2.Close()
	require.ErrorContains(t, (<-l2.Append(big)).Err, "no Spill bucket")
	_ = clientv3.WithPrefix
	_ = context.Background
}
