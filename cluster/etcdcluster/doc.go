// Package etcdcluster is the cluster.Backend over etcd, in a package of
// its own so that a program without a cluster links no etcd client. A
// broker of a cluster gives it in its Config:
//
//	import "github.com/diskless-go/diskless/cluster/etcdcluster"
//
//	b, err := diskless.Open(ctx, &diskless.Config{
//		...
//		Cluster: &diskless.ClusterConfig{
//			Backend:  &etcdcluster.Backend{Endpoints: []string{"10.0.0.1:2379"}},
//			PeerAddr: "10.0.1.2:9093",
//		},
//	})
//
// Under the cluster's prefix in etcd: each broker's registration
// (members/<id>, a JSON Member under its session's lease), an election
// per shard (shards/<n>/, go.etcd.io/etcd/client/v3/concurrency), and
// each shard's metadata log (meta/<n>/, an etcdlog.Log: a leader's
// appends are fenced by its election key, so a leader whose lease ended
// lands nothing).
//
// # TLS and authentication
//
// Against an etcd whose members serve clients over TLS, and that has
// authentication on (etcdctl auth enable), the Backend says how to
// connect:
//
//	&etcdcluster.Backend{
//		Endpoints: []string{"https://10.0.0.1:2379"},
//		TLS:       &tls.Config{RootCAs: etcdCA, Certificates: []tls.Certificate{clientCert}},
//		Username:  "diskless", Password: os.Getenv("DISKLESS_ETCD_PASSWORD"),
//	}
//
// The user's role needs readwrite on the keys under the cluster's
// prefix ("diskless/" unless ClusterConfig.Prefix says otherwise):
//
//	etcdctl role add diskless
//	etcdctl role grant-permission diskless --prefix=true readwrite diskless/
//	etcdctl user add diskless
//	etcdctl user grant-role diskless diskless
//
// Connect checks both at once (Backend.Connect), so that a wrong
// password, a missing permission, a missing client certificate or a CA
// that does not verify the members fails the broker's Open with an
// error that says so, and writes nothing.
//
// # Leadership
//
// Shard n is meant to be led by the live member at position n mod (live
// members) in ID order, so that the shards spread over the brokers.
// That member campaigns at once; the others only once the shard has had
// no leader for a lease TTL, and withdraw when one appears; a leader that
// is not the preferred member gives the shard up once the preferred one
// has been live for two TTLs. A broker whose lease ends (it died, froze,
// or was cut off) loses every shard at once: its appends fail from then
// on, and the others campaign. A broker whose shard stopped serving (its
// log failed) gives it up and campaigns again.
package etcdcluster
