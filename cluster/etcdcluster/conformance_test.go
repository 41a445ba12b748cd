package etcdcluster_test

import (
	"testing"

	"github.com/diskless-go/diskless/cluster"
	"github.com/diskless-go/diskless/cluster/clustertest"
	"github.com/diskless-go/diskless/cluster/etcdcluster"
	"github.com/diskless-go/diskless/internal/etcdtest"
)

// TestBackendConformance runs the Backend suite against a three-member
// etcd cluster; the subtests share it, each under a prefix of its own.
func TestBackendConformance(t *testing.T) {
	etcd := etcdtest.Start(t, nil)
	client := etcd.Client(t)
	clustertest.RunBackendWith(t, nil, func(*testing.T) cluster.Backend { return &etcdcluster.Backend{Client: client} })
}
