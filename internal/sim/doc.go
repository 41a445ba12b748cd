// Package sim is the deterministic simulation of diskless: one seed
// drives a workload over the Broker API, the faults of the object store
// and of the broker's process (crash, restart on the same or a wiped
// data folder), and the latencies; every call is recorded in a History
// with its virtual time; a Checker verifies the guarantees over it and
// names the one a run violates.
//
// A run is meant to execute inside a testing/synctest bubble: time is
// virtual, so a simulated hour of linger, retention, compaction and
// transaction timeouts takes milliseconds of wall time. Everything random
// comes from the seed, but the Go scheduler picks the order of goroutines
// that are runnable at the same virtual instant, so two runs of one seed
// may differ in the interleaving of their calls (see Run).
//
// The pieces:
//
//	Cluster   the brokers (one today: Config.Cluster unset) over one
//	          shared in-memory store, each behind its own faultbucket;
//	          Crash and Restart replace a broker's process.
//	workload  seeded actors: idempotent and transactional producers,
//	          read_committed and read_uncommitted consumers with group
//	          offsets, an admin (topics, partitions, DeleteRecords,
//	          compaction), a fault injector.
//	History   the recorded events; Tail prints the last ones.
//	Check     the named guarantees (Checks lists them).
package sim
