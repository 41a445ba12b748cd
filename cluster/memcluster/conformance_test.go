package memcluster_test

import (
	"testing"
	"time"

	"github.com/diskless-go/diskless/cluster"
	"github.com/diskless-go/diskless/cluster/clustertest"
	"github.com/diskless-go/diskless/cluster/memcluster"
)

// TestBackend runs the Backend suite over a Service, each subtest in a
// synctest bubble (virtual time).
func TestBackend(t *testing.T) {
	clustertest.RunBackendWith(t, &clustertest.BackendOptions{Bubble: true}, func(*testing.T) cluster.Backend {
		return memcluster.NewService(nil)
	})
}

// TestBackendWatchDelay runs it with the watches 200 ms behind.
func TestBackendWatchDelay(t *testing.T) {
	clustertest.RunBackendWith(t, &clustertest.BackendOptions{Bubble: true}, func(*testing.T) cluster.Backend {
		return memcluster.NewService(&memcluster.Options{WatchDelay: 200 * time.Millisecond})
	})
}
