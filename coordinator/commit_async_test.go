package coordinator

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/wal"
)

// TestCommitFileAsync: commits submitted one after another, each without
// waiting for the one before, are decided in submission order (an
// idempotent producer's sequences stay in order) and share log entries:
// those queued behind an append in flight go into the next one.
func TestCommitFileAsync(t *testing.T) {
	ctx := t.Context()
	log := metalog.NewMem(&metalog.MemOptions{Latency: 20 * time.Millisecond, MaxInFlight: 1})
	t.Cleanup(func() { log.Close() })
	c := openTest(t, log, "", nil)
	id := mustCreate(t, c, "orders", 1, TopicConfig{})
	tp := wal.TopicPartition{TopicID: id, Partition: 0}
	pid, ep, err := c.InitProducerID(ctx)
	require.NoError(t, err)
	entries := c.Stats().Entries

	const n = 40
	waits := make([]func() ([]wal.Result, error), n)
	for i := range n {
		waits[i], err = c.CommitFileAsync(ctx, CommitFileRequest{
			ObjectKey: fmt.Sprintf("wal/%03d", i), Size: 100,
			Coordinates: []wal.Coordinate{coord(tp, 0, 2, pid, ep, int32(2*i), 1)},
		}, false)
		require.NoError(t, err)
	}
	for i, wait := range waits {
		res, err := wait()
		require.NoError(t, err)
		require.NoError(t, res[0].Err, "commit %d", i)
		require.Equal(t, int64(2*i), res[0].BaseOffset, "commit %d is decided in submission order", i)
	}
	used := c.Stats().Entries - entries
	require.Less(t, used, int64(n/2), "commits queued behind an append share the next entry")
	t.Logf("%d commits in %d log entries", n, used)
}

// holdingLog holds the answers of the appends sent while hold is set until
// that channel is closed, and counts the appends sent.
type holdingLog struct {
	metalog.Log
	hold  atomic.Pointer[chan struct{}]
	sends atomic.Int64
}

func (l *holdingLog) Append(b []byte) <-chan metalog.AppendResult {
	l.sends.Add(1)
	res := l.Log.Append(b)
	gate := l.hold.Load()
	if gate == nil {
		return res
	}
	out := make(chan metalog.AppendResult, 1)
	go func() {
		<-*gate
		out <- <-res
	}()
	return out
}

// TestGroupsFormedLazily: commits that arrive while the log's one put is
// in flight wait in the queue, and the next group closes when that put
// ends, so they all go in one entry: none waits behind a group closed
// early and queued behind the put (which would take a put more).
func TestGroupsFormedLazily(t *testing.T) {
	ctx := t.Context()
	mem := metalog.NewMem(&metalog.MemOptions{MaxInFlight: 1})
	t.Cleanup(func() { mem.Close() })
	log := &holdingLog{Log: mem}
	c := openTest(t, log, "", nil)
	id := mustCreate(t, c, "orders", 1, TopicConfig{})
	tp := wal.TopicPartition{TopicID: id, Partition: 0}
	commit := func(i int) func() ([]wal.Result, error) {
		wait, err := c.CommitFileAsync(ctx, CommitFileRequest{
			ObjectKey: fmt.Sprintf("wal/%03d", i), Size: 100,
			Coordinates: []wal.Coordinate{coord(tp, 0, 2, -1, -1, -1, 1)},
		}, false)
		require.NoError(t, err)
		return wait
	}

	gate := make(chan struct{})
	release := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(release) // before Close, which waits for the answers
	log.hold.Store(&gate)
	before := log.sends.Load()
	waits := []func() ([]wal.Result, error){commit(0)}
	require.Eventually(t, func() bool { return log.sends.Load() == before+1 }, 10*time.Second, time.Millisecond)
	for i := 1; i <= 3; i++ {
		waits = append(waits, commit(i))
	}
	time.Sleep(50 * time.Millisecond) // an eager loop would send a second group now
	require.Equal(t, before+1, log.sends.Load(), "no group closes while the put is in flight")
	release()
	for _, wait := range waits {
		res, err := wait()
		require.NoError(t, err)
		require.NoError(t, res[0].Err)
	}
	require.Equal(t, before+2, log.sends.Load(), "the three commits queued behind the put share one entry")
}
