// Package cluster runs many brokers on one bucket. It holds what does
// not depend on where the brokers meet: the Backend a Broker is given
// (diskless.ClusterConfig.Backend), through which each broker registers
// (Member), campaigns for the coordinator shards and opens their metadata
// logs, a leader's appends fenced by its election; the Node it joins
// with, the coordinator.Forwarder that carries calls for a shard to its
// leader; and the Transport of those calls. The Backend over etcd is in
// package etcdcluster, which a program with a cluster imports, so that
// one without links no etcd client; package memcluster is one in memory,
// with etcd's semantics, for brokers in one process; and
// clustertest.RunBackend is the suite every Backend must pass.
//
// # Calls between brokers
//
// Transport carries the calls: a broker that does not lead a shard sends
// that shard's calls to the broker that does. TCP is the default
// implementation, Mem one within a process, and clustertest.RunTransport
// is the suite every implementation must pass.
//
// # The TCP transport
//
// A TCP transport keeps one connection per remote address, opened by the
// first Call to it and shared by every later one; calls on a connection
// are told apart by a request ID, so many are in flight at once and their
// answers come back in whatever order the serving broker gives them. A
// call is written whole before Call returns, under the connection's write
// lock, so calls made one after another from one goroutine are written,
// and read, in that order. The serving side reads a connection's frames
// in order and hands each to the Handler before it reads the next, so the
// Handler sees them in arrival order; each answer is computed on a
// goroutine of its own and written back when ready.
//
// When a connection is lost, every call waiting on it fails, and the next
// Call dials again. A call whose answer did not come back may or may not
// have been served.
//
// # Security between brokers
//
// Without TCPOptions.TLS the calls are plaintext and unauthenticated:
// anything that reaches a broker's peer address can commit batches or
// delete topics (diskless.Open logs a warning then). With it, every
// connection is mutual TLS with the cluster's CA, and a broker is known
// by its node ID, which its certificate carries as a URI SAN,
// diskless-node:<id> (NodeURI; NodeID reads it). The rule:
//
//   - The serving side requires a client certificate, verified against
//     the cluster CA, that names exactly one node; the TLS handshake is
//     complete, within TCPOptions.HandshakeTimeout, before the first
//     byte of a frame is read, and a peer that fails it (no certificate,
//     one of another CA, one that names no node, or plaintext frames) is
//     cut off without any call of its reaching the Handler. The
//     Handler's ctx carries the caller's node ID (Caller).
//   - The calling side verifies the server's certificate against the
//     same CA and reads its node ID; the host name is not checked (a
//     broker is reached at the address it registered, and known by its
//     ID). A call whose ctx names the node it is for (WithCallee, as
//     etcdcluster's Node.Forward does with the member it looked up) is
//     sent only to a broker whose certificate names that node: else it
//     fails with ErrPeerIdentity, and nothing is written.
//   - diskless.Open checks that ClusterConfig.PeerTLS's certificate names
//     the broker's own Config.BrokerID, which is the ID it registers.
//
// So a broker registered as node N serves the calls for the shards it
// leads only if it holds a key the CA certified for N, and only brokers
// of the CA can call it. The frames carry no caller ID for a serving
// broker to compare with its certificate: a certificate of the CA that
// names a node is a broker of the cluster, whichever node it names. The
// CA is the cluster's own: one that also signs other certificates (Kafka
// clients', say) must never put a diskless-node URI SAN in them.
//
// # Frames
//
// Every frame starts with its length: the number of bytes after the length
// field. Integers are big-endian (as in Kafka). The frames themselves
// carry no version (a change to them would need one, negotiated when a
// connection opens); the calls they carry do: the method names the call
// and its version ("commit" is version 1, "commit.v2" version 2), each
// broker advertises the versions it speaks in its Member (Speaks), and a
// caller sends the highest both speak (see package coordinator's
// peer_versions.go). A request:
//
//	+----------+----------+----------+-------------+-------------+---------+-------------+
//	|  length  |    id    |  shard   |  deadline   | method len  | method  |    body     |
//	| u32 (4)  | u64 (8)  | u32 (4)  | i64 (8)     | u16 (2)     | (n)     | (the rest)  |
//	+----------+----------+----------+-------------+-------------+---------+-------------+
//	0          4          12         16            24            26     26+n      4+length
//
// deadline is the caller's context deadline in Unix nanoseconds, 0 for
// none; the serving side's context for the call ends then too. method is
// the call's method name (at most 65535 bytes, not checked for UTF-8);
// body is opaque. A response:
//
//	+----------+----------+-------------+
//	|  length  |    id    |    body     |
//	| u32 (4)  | u64 (8)  | (the rest)  |
//	+----------+----------+-------------+
//	0          4          12     4+length
//
// id is the request's. A frame's length is at most the receiver's
// MaxFrameBytes (64 MiB by default): a larger one, or one too short for
// its header, closes the connection, because nothing after it can be
// trusted to start on a frame boundary.
package cluster
