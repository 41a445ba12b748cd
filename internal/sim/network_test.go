package sim

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/cluster"
)

// TestNetwork: a cut link or an isolated broker fails calls without
// serving them; a lost answer is served and fails; a delay holds the
// call back; healing undoes it all.
func TestNetwork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(1, &cluster.Mem{})
		var served atomic.Int64
		srv, err := n.transport(1).Listen("", func(ctx context.Context, shard int, method string, body []byte) func() []byte {
			served.Add(1)
			return func() []byte { return append([]byte("re:"), body...) }
		})
		require.NoError(t, err)
		defer srv.Close()
		from := n.transport(0)
		call := func() ([]byte, error) {
			return from.Call(t.Context(), srv.Addr(), 0, "m", []byte("x"))()
		}
		got, err := call()
		require.NoError(t, err)
		require.Equal(t, "re:x", string(got))

		heal := n.Cut(1, 0)
		_, err = call()
		require.ErrorIs(t, err, cluster.ErrConnectionLost)
		require.Equal(t, int64(1), served.Load(), "a cut call is not served")
		heal()
		_, err = call()
		require.NoError(t, err)

		heal = n.Isolate(0)
		_, err = call()
		require.ErrorIs(t, err, cluster.ErrConnectionLost)
		heal()

		end := n.LoseAnswers(1, 1)
		_, err = call()
		require.ErrorIs(t, err, cluster.ErrConnectionLost)
		require.Equal(t, int64(3), served.Load(), "a call whose answer is lost was served")
		end()

		end = n.Delay(0, 3*time.Second)
		start := time.Now()
		_, err = call()
		require.NoError(t, err)
		require.Equal(t, 3*time.Second, time.Since(start))
		end()

		n.Cut(0, 1)
		n.Heal()
		_, err = call()
		require.NoError(t, err)
	})
}

// TestClusterOfThree: NewCluster runs three brokers of one cluster; a
// crashed broker restarts and joins again; the clocks are skewed within
// the bound, differently per broker.
func TestClusterOfThree(t *testing.T) {
	BeforeBubble()
	synctest.Test(t, func(t *testing.T) {
		c, err := NewCluster(t.Context(), ClusterOptions{Brokers: 3, Dir: t.TempDir(), Seed: 1, Skew: time.Second})
		require.NoError(t, err)
		defer c.Close()
		require.NotNil(t, c.Service())
		require.NotNil(t, c.Network())
		settled := func() bool {
			for i := range c.Brokers() {
				b := c.Broker(i)
				if b == nil || len(b.Members()) != 3 {
					return false
				}
			}
			return true
		}
		for !settled() {
			time.Sleep(100 * time.Millisecond)
		}
		require.NoError(t, c.Crash(1, true))
		require.Nil(t, c.Broker(1))
		require.NoError(t, c.Restart(t.Context(), 1))
		for !settled() {
			time.Sleep(100 * time.Millisecond)
		}
		skews := map[time.Duration]bool{}
		for i := range 3 {
			s := c.skew(i)
			require.LessOrEqual(t, s.Abs(), time.Second)
			skews[s] = true
		}
		require.Len(t, skews, 3)
	})
}

// TestNewClusterRefuses: a negative broker count or no folder is refused.
func TestNewClusterRefuses(t *testing.T) {
	_, err := NewCluster(t.Context(), ClusterOptions{Brokers: -1, Dir: t.TempDir()})
	require.Error(t, err)
	_, err = NewCluster(t.Context(), ClusterOptions{Brokers: 3})
	require.True(t, err != nil && !errors.Is(err, context.Canceled))
}
