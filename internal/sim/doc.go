// Package sim is the deterministic simulation of diskless: one seed
// drives a workload over the Broker API, the faults of the object store,
// of the brokers' processes (crash, restart on the same or a wiped data
// folder), of the metadata service and of the network between the
// brokers, and the latencies; every call is recorded in a History with
// its virtual time; Check verifies the guarantees over it and names the
// one a run violates. A run has one broker alone, or several brokers of
// one cluster that meet through a memcluster.Service.
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
// scheduler runs goroutines that are ready at one virtual instant; with
// one broker a seed without faults replays its trace exactly, and with
// faults most seeds do for minutes of virtual time before two runs part;
// with three brokers most runs part only in their last events, when the
// workload stops and the final read, and some mid-run (TestSim
// -sim.replay counts them).
//
// The pieces:
//
//	Cluster    cluster.go: the brokers over one shared in-memory store,
//	           each process behind its own faultbucket; Crash, Stop and
//	           Restart replace a broker's process (a restarted broker
//	           joins the cluster again). With several brokers, a
//	           memcluster.Service made in the bubble is their Backend
//	           (3 shards by default) and each one's Transport is the
//	           Service's cluster.Mem seen through the Network. The
//	           actors pick a random broker per call.
//	Network    network.go: the links between the brokers, with what a
//	           network can do to the TCP transport: a link or a broker
//	           cut off, calls delayed, answers lost after the call was
//	           served (never duplicated nor reordered: TCP does not).
//	workload   workload.go (producers), consumer.go, admin.go,
//	           topics.go: seeded actors: idempotent producers (one
//	           batch in 25 with acks=0) and transactional ones (with
//	           fenced zombies and group offsets committed in
//	           transactions), read_committed and read_uncommitted
//	           consumers with group offsets, resets and claims
//	           (ClaimGroup, with commits under a superseded claim on
//	           purpose), an admin (topics created, deleted and created
//	           again under their name, partitions added, configs
//	           altered, DeleteRecords, ListOffsets by position and by
//	           time, compaction), LogAppendTime topics, and, in a
//	           quarter of the runs of one broker, offload to tiered
//	           segments; batches of every codec. A topic's events name
//	           its incarnation ("p1", then "p1@1").
//	faults     faults.go: error bursts, latency spikes, outages, stalls,
//	           PUTs that land and lose their answer, crashes (three in
//	           four leave the process's lease to its TTL, as a killed
//	           process does; one in four revokes it);
//	           clusterfaults.go: a lease expired early, a zombie (its
//	           lease paused past its TTL while the actors still call
//	           it), a shard's leader deposed, watch delays, failed
//	           metadata operations, and the Network's faults.
//	objects    objects.go: what reaches the store (WAL objects written
//	           and deleted, reads that find one gone) and, after the
//	           final read, a tail of virtual time for the lifecycle
//	           and the orphan collector, then an inventory of the
//	           store.
//	History    history.go: the events; Tail prints the last ones, Trace a
//	           comparable form, Summary the counts.
//	Check      checker.go, checker_workload.go, checker_objects.go: the
//	           guarantees, one name each (Checks).
//	Run        sim.go: one seed, from the first topic to the final read
//	           of every partition by a process rebuilt from the store,
//	           and the objects' tail.
package sim
