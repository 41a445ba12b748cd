package store

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/diskless-go/diskless/kafkaerr"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestReaderCloseWithReadInFlight: a raw connection a read holds when the
// store closes is closed when the read gives it back, not kept open (it
// once was, with its file descriptors and page cache); a read after the
// close is refused at once, retriably.
func TestReaderCloseWithReadInFlight(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "shard-0.db"), 2)
	require.NoError(t, err)
	r := db.Reader
	held, err := r.takeRaw(ctx)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	r.putRaw(held) // the read in flight ends
	_, err = held.conn.Prepare("SELECT 1")
	require.Error(t, err, "the connection given back after Close is closed")
	require.Empty(t, r.raw, "and not kept")

	tctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err = r.takeRaw(tctx)
	require.Equal(t, kafkaerr.NotLeaderOrFollower, kafkaerr.CodeOf(err))
	require.NoError(t, tctx.Err(), "refused at once, not after waiting")
}
