package cluster_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/diskless-go/diskless/cluster"
	"github.com/diskless-go/diskless/cluster/clustertest"
)

func newTCP(t *testing.T) cluster.Transport {
	tr, err := cluster.NewTCP(&cluster.TCPOptions{Logger: zaptest.NewLogger(t)})
	require.NoError(t, err)
	return tr
}

func TestTCP(t *testing.T) {
	clustertest.RunTransport(t, newTCP)
}
