// Package memcluster is a cluster.Backend in memory, with etcd's
// semantics as package etcdcluster uses them: for tests, for programs
// that run several brokers in one process without etcd, and as the
// metadata service of a deterministic simulation of a whole cluster
// (brokers in one testing/synctest bubble, virtual time). A Service is
// the shared store, one per simulated etcd; it is the Backend:
//
//	svc := memcluster.NewService(nil)
//	b1, err := diskless.Open(ctx, &diskless.Config{..., BrokerID: 1,
//		Cluster: &diskless.ClusterConfig{Backend: svc}})
//	b2, err := diskless.Open(ctx, &diskless.Config{..., BrokerID: 2,
//		Cluster: &diskless.ClusterConfig{Backend: svc}})
//
// Nothing leaves the process and nothing waits on real time: the Nodes'
// goroutines block on channels and on timers of Options.Clock
// (clock.System by default, which a synctest bubble makes virtual), and
// the Service has no goroutine of its own. Inside a bubble, create the
// Service in the bubble too. A Node whose JoinOptions name no Transport
// uses the Service's cluster.Mem (Service.Transport), never TCP.
//
// # How it maps to etcd
//
// The Service keeps what etcdcluster keeps in etcd, in the same keys
// under the cluster's prefix (ConnectOptions.Prefix), with a revision
// counter and create and mod revisions per key:
//
//   - members/<id>: a member's JSON cluster.Member (Speaks and Features
//     included), put under a lease of JoinOptions.LeaseTTL (exactly; etcd
//     rounds it down to whole seconds, at least one). The Node renews the
//     lease every third of its TTL, as etcd's client does; a renewal that
//     finds it ended (the broker was paused past its TTL, or ExpireLease)
//     ends the Node's leaderships and registers it again under a new
//     lease, as etcdcluster's keepSession does. Close revokes the lease.
//   - shards/<n>/<lease>: etcd's election recipe (client/v3/concurrency):
//     a candidate's key under its lease; the leader is the candidate
//     whose key was created first; a candidate waits until every older
//     key is gone. Who campaigns when is etcdcluster's rule: the
//     preferred member (position n mod live members, in ID order) at
//     once, the others once the shard has had no leader for a TTL; a
//     leader that is not the preferred member gives the shard up once
//     the preferred one has been live for two TTLs. Callbacks.Healthy is
//     asked every quarter TTL and at every change; an error gives the
//     shard up, to be campaigned for again.
//   - meta/<n>/: shard n's metadata log, a metalog.Mem. The leader's
//     handle (Callbacks.Lead) appends only while its election key is
//     there at the revision it won with, checked and appended in one step
//     (as etcdlog's Fence is a compare in the put's transaction): once the
//     leadership has ended (its lease expired or was revoked, the key was
//     deleted, or the Node gave it up) every append through it fails with
//     an error wrapping metalog.ErrFenced, whether or not another writer
//     appended. Followers' handles (Conn.OpenLog) are fenced by offset
//     only, as etcdcluster's are; their Wait wakes at any append.
//   - features/<name>: a finalized feature level, as etcdcluster's
//     features.go keeps it, with its bootstrap, refusals and
//     all-or-nothing transactions.
//
// Each Node watches its cluster's prefix: its Members, Leader and
// Features views, and Callbacks.Appended, follow the changes in
// revision order, the watch delay (Options.WatchDelay, SetWatchDelay)
// after they are made; Join reads the keys there are first, as
// etcdcluster's load does.
//
// # Where it differs from etcdcluster
//
//   - A Node gives a leadership up when its watch shows its election key
//     deleted (Depose), besides when its lease ends, Close, Healthy or a
//     hand-over: etcdcluster notices a deleted key only through its
//     lease or Healthy.
//   - A Node's feature view never goes back to a level older than one it
//     read or wrote (a watch behind its own UpdateFeatures).
//   - ConnectOptions.Spill is ignored: any entry fits.
//
// # Faults
//
// The Service's hooks (faults.go) drive the faults of a simulation:
// ExpireLease ends a member's lease now; PauseLease and ResumeLease make
// it a zombie, its renewals lost and its watch stalled while its other
// requests get through, so that it goes on believing it leads while its
// appends are fenced; Depose ends a shard's leadership; SetWatchDelay
// delays the watches; FailNext fails a member's next operations. Leader
// tells the truth the views lag behind.
package memcluster
