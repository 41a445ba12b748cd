// Package sim is the deterministic simulation of diskless: one seed
// drives a workload over the Broker API, the faults of the object store
// and of the brokers' processes (crash, restart on the same or a wiped
// data folder), and the latencies; every call is recorded in a History
// with its virtual time; Check verifies the guarantees over it and names
// the one a run violates.
//
// A run is meant for a testing/synctest bubble, where time is virtual: a
// simulated hour of linger, retention, compaction, transaction timeouts
// and retries takes seconds. Call BeforeBubble outside the bubble first
// (see it for why).
//
// Everything random comes from the seed: each actor's choices, the
// faults (a call fails or not by a hash of the seed and the call, not by
// the order calls come in), and, with testing/cryptotest, the object keys
// and topic IDs. What the seed does not fix is the order in which Go's
// scheduler runs goroutines that are ready at one virtual instant; a seed
// without faults replays its trace exactly, and with faults most seeds
// do for minutes of virtual time before two runs part (TestSim
// -sim.replay counts them).
//
// The pieces:
//
//	Cluster    cluster.go: the brokers over one shared in-memory store,
//	           each process behind its own faultbucket; Crash, Stop and
//	           Restart replace a broker's process. One broker today
//	           (no Config.Cluster); the actors already pick a broker per
//	           call, so that N brokers on a cluster backend are a change
//	           to NewCluster.
//	workload   workload.go (producers), consumer.go, admin.go,
//	           topics.go: seeded actors: idempotent and
//	           transactional producers (with fenced zombies and group
//	           offsets committed in transactions), read_committed and
//	           read_uncommitted consumers with group offsets and resets,
//	           an admin (topics, partitions, DeleteRecords, ListOffsets,
//	           compaction); batches of every codec.
//	faults     faults.go: error bursts, latency spikes, outages, stalls,
//	           PUTs that land and lose their answer, crashes.
//	History    history.go: the events; Tail prints the last ones, Trace a
//	           comparable form, Summary the counts.
//	Check      checker.go: the guarantees, one name each (Checks).
//	Run        sim.go: one seed, from the first topic to the final read
//	           of every partition by a process rebuilt from the store.
package sim
