package sim

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"testing"
	"testing/cryptotest"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	seedsFlag   = flag.Int("seeds", 0, "TestSim runs this many random seeds")
	seedFlag    = flag.Uint64("seed", 0, "TestSim runs this seed only (with -seeds 1)")
	noFaults    = flag.Bool("sim.nofaults", false, "TestSim injects no faults")
	hoursFlag   = flag.Duration("sim.duration", time.Hour, "the virtual time each seed's workload runs")
	replayFlag  = flag.Bool("sim.replay", false, "TestSim runs each seed twice and compares the traces")
	brokersFlag = flag.Int("sim.brokers", 3, "TestSim runs clusters of this many brokers (1: a broker alone)")
	skewFlag    = flag.Duration("sim.skew", 0, "TestSim skews each broker's clock by up to this much")
	knownFlag   = flag.Bool("sim.known", false, "TestKnownBugs runs the seeds of the known library bugs")
	traceFlag   = flag.String("sim.trace", "", "TestSim writes the trace of each seed's history to this file (the last seed's stays)")
	hangFlag    = flag.Duration("sim.hang", 10*time.Minute, "TestSim reports a seed still running after this much wall time as hung, with every goroutine's stack, and exits")
	everyFlag   = flag.Int("sim.progress", 100, "TestSim prints a progress line every this many seeds (0: none)")
)

// progress prints where a long TestSim run is: seeds done, simulated
// hours, faults and violations so far, wall time, and the process's
// goroutines, Go heap, resident set and open files (a run whose seeds
// leave something behind shows it here as a count that grows with the
// seeds: a leaked SQLite connection in the last two only). The last two
// are read from /proc, -1 where there is none.
func progress(done, of int, hours time.Duration, faults, violations int64, start time.Time) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rss, files := int64(-1), -1
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		var size, resident int64
		if _, err := fmt.Sscan(string(b), &size, &resident); err == nil {
			rss = resident * int64(os.Getpagesize()) >> 20
		}
	}
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		files = len(fds)
	}
	fmt.Printf("sim: progress %d of %d seeds, %.1f simulated hours, %d faults, %d violations, %v wall, %d goroutines, %d MiB heap, %d MiB resident, %d open files\n",
		done, of, hours.Hours(), faults, violations, time.Since(start).Round(time.Second), runtime.NumGoroutine(), ms.HeapInuse>>20, rss, files)
}

// runSeed runs one seed in a synctest bubble; an error of the run fails
// the test.
func runSeed(t *testing.T, seed uint64, opts Options) *Result {
	t.Helper()
	res, err := runSeedErr(t, seed, opts)
	if err != nil {
		t.Errorf("seed %d: %v", seed, err)
	}
	return res
}

// memDir is where simDir makes the data folders when it can: a memory
// file system. The caches and databases of a run write and open many
// small files; on this project's 2-core test machine a run on disk takes
// 1.7 times as long, most of it in openat.
const memDir = "/dev/shm"

// simDir returns an empty folder for a run's data folders, removed when
// the test ends: under memDir when it is a folder this process may write
// in, else t.TempDir(). Nothing of a run has to outlive it (a process
// killed before its cleanup, or a hung seed's exit, leaves its folder
// under memDir: diskless-sim-*).
func simDir(t *testing.T) string {
	if d, err := os.MkdirTemp(memDir, "diskless-sim-"); err == nil {
		t.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	return t.TempDir()
}

// runSeedErr runs one seed in a synctest bubble and returns the run's
// error (a failed test in the bubble would end the caller's test).
func runSeedErr(t *testing.T, seed uint64, opts Options) (*Result, error) {
	t.Helper()
	var res *Result
	var err error
	BeforeBubble()
	synctest.Test(t, func(t *testing.T) {
		// crypto/rand names WAL objects and topics: seeded, so that a
		// seed's keys, and the faults drawn from them, repeat.
		cryptotest.SetGlobalRandom(t, seed)
		opts.Dir = simDir(t)
		res, err = Run(seed, opts)
	})
	return res, err
}

// report prints a failed seed: the violations and the last 50 events.
func report(res *Result) string {
	s := fmt.Sprintf("seed %d: %d violations\n", res.Seed, len(res.Violations))
	for _, v := range res.Violations {
		s += "  " + v.String() + "\n"
	}
	return s + "last 50 events:\n" + res.History.Tail(50)
}

// fixedSeeds run on every `go test`.
var fixedSeeds = []uint64{1, 2, 3, 4, 5, 6}

// TestSeeds runs the fixed seeds, an hour of virtual time each (about a
// minute of wall time in all; under -race three seeds of 20 minutes).
func TestSeeds(t *testing.T) {
	seeds, d := fixedSeeds, time.Hour
	if raceEnabled {
		seeds, d = seeds[:3], 20*time.Minute
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			res := runSeed(t, seed, Options{Duration: d, Faults: DefaultFaults})
			if res == nil {
				return
			}
			t.Logf("%v simulated, %d events, %d faults; ok/failed: %s", res.Simulated, len(res.History.Events()), res.Faults, res.History.Summary())
			if len(res.Violations) > 0 {
				t.Error(report(res))
			}
		})
	}
}

// clusterSeeds is how many seeds TestClusterSeeds runs,
// clusterDuration the virtual time of each one's workload (the final
// read comes after two quiet minutes), and clusterSkew the largest skew
// of a broker's clock.
const (
	clusterSeeds    = 100
	clusterDuration = 2 * time.Minute
	clusterSkew     = 2 * time.Second
)

// TestKnownBugs runs the seeds that fail for a limitation of the library
// the simulation found: each must fail as its reason says until the
// library is fixed (then move the seed to foundBugs). Skipped in
// `go test`: run it with -run TestKnownBugs -sim.known.
func TestKnownBugs(t *testing.T) {
	if !*knownFlag {
		t.Skip("the library limitations found by the simulation are not fixed yet; -sim.known runs them")
	}
	for _, k := range knownBugs {
		t.Run(k.name, func(t *testing.T) {
			res, err := runSeedErr(t, k.seed, k.opts)
			if err == nil && res != nil && len(res.Violations) == 0 {
				t.Errorf("seed %d no longer fails (%s): fixed?", k.seed, k.why)
			}
		})
	}
}

// bugSeed is a seed that found a bug of the library, with the options it
// ran under and the guarantee it broke.
type bugSeed struct {
	name string
	seed uint64
	opts Options
	why  string
}

// clusterOptions are the options of TestClusterSeeds' seeds.
func clusterOptions() Options {
	return Options{Duration: clusterDuration, Faults: ClusterFaults, Brokers: 3, Skew: clusterSkew}
}

// knownBugs are the seeds that fail for a limitation of the library that
// the simulation found and that is not fixed yet (none now);
// TestClusterSeeds skips those of its own.
var knownBugs = []bugSeed{}

// foundBugs are the seeds that found a bug of the library since fixed:
// each must run clean (TestFoundBugs), the guarantee it broke named.
var foundBugs = []bugSeed{{
	// CreateTopic r1 through broker 2 while broker 1 loses the answers
	// of the calls forwarded to it: broker 2 answered
	// TOPIC_ALREADY_EXISTS (its own first try landed), and partitions
	// 0 and 2 of r1 were never served by any broker, before or after
	// every broker restarted (UNKNOWN_TOPIC_OR_PARTITION: no shard
	// serves the partition). The undo of a create now covers the shard
	// whose answer was lost (coordinator TestCreateTopicAnswerLost).
	name: "half-created-topic", seed: 1795159231647615835,
	opts: Options{Duration: 2 * time.Minute, Faults: ClusterFaults, Brokers: 3},
	why:  "final-read: a topic created while an answer between brokers is lost has partitions no shard serves",
}, {
	// The producer IDs of shards other than 0 collided with shard 0's
	// (transactional IDs on any shard): seed 7's txnA got producer 0, idem1's, and
	// its first batch was acknowledged as idem1's duplicate. Each shard
	// now gives IDs from a range of its own (coordinator/state ops.go's
	// producerIDShift).
	name: "producer-ids", seed: 7,
	opts: Options{Duration: 5 * time.Minute, Brokers: 3},
	why:  "offset-unique, acked-durable: a transactional producer got an idempotent one's ID",
}, {
	// tx-b#15 (producer 2, epoch 0: transactions v1, which do not bump)
	// wrote 3 records to p0/2, and its EndTxn was answered done at once
	// by a shard-0 leader whose state lagged (a zombie's): it held tx-b
	// as the transaction before left it, took the end for a retry of
	// that one's, and answered with no write, so no fence stopped it.
	// No marker was written; the next transaction's abort aborted the
	// records. An end already done is now answered through the log
	// (coordinator/state txn_ops.go, doneThroughLog).
	name: "committed-txn-invisible", seed: 1793753493617455298,
	opts: Options{Duration: 5 * time.Minute, Faults: ClusterFaults, Brokers: 3},
	why:  "txn-outcome: a commit acknowledged, none of its records visible to read_committed",
}, {
	// A zombie (its lease ended, its watch stalled, so that it still
	// believed it led the group's shard) answered OffsetFetch from its
	// own state, older than a commit the new leader had acknowledged
	// before the fetch began: its writes were fenced, its reads were
	// not. A leader now confirms its leadership through the metadata
	// service before it answers a group's offsets or stored state
	// (coordinator leader.go, confirmLeader; metalog.Confirmer).
	name: "stale-zombie-read", seed: 84,
	opts: clusterOptions(),
	why:  "group-offset-monotonic: a zombie leader served a stale OffsetFetch",
}, {
	// Broker 2, a zombie (its lease paused for 15 s), still believed it
	// led c0/0's shard and answered a fetch at offset 18 from its own
	// state: high watermark 10, OFFSET_OUT_OF_RANGE, which makes a
	// consumer reset its position; the new leader had answered 18
	// before. A leader now answers a read only while its lease is
	// surely held (renewed less than its TTL ago, counting from the
	// renewal's sending: metalog.Leased; coordinator leader.go,
	// checkLease).
	name: "zombie-stale-fetch", seed: 1798543138448917348,
	opts: Options{Duration: 5 * time.Minute, Faults: ClusterFaults, Brokers: 3},
	why:  "hw-monotonic, lso-monotonic: a zombie leader answered a fetch with an older high watermark",
}, {
	// CreateTopic p1 (3 partitions) through broker 2 under network
	// faults answered TOPIC_ALREADY_EXISTS, and p1/2 was served by no
	// shard, before and after every broker restarted: the undo of a
	// create that failed on one shard deleted it from the others, but a
	// shard it could not reach kept its part. The leader of shard 0 now
	// repairs a topic found partial for a minute (coordinator
	// topicrepair.go).
	name: "partial-topic", seed: 1796006004847168157,
	opts: Options{Duration: 5 * time.Minute, Faults: ClusterFaults, Brokers: 3},
	why:  "final-read: a topic created under network faults is left with a partition no shard serves",
}, {
	// tx-a#19's AddPartitionsToTxn through broker 0 was recorded by the
	// transaction's shard, but its begin on p1/0, whose shard's leader
	// was cut off from broker 0, took 66 s to arrive; meanwhile the
	// transaction timed out and was aborted under epoch 3, and the
	// abort's marker skipped p1/0, where nothing was open yet. The late
	// begin then opened epoch 2's transaction there: a write of the
	// fenced epoch 2 was accepted after InitProducerId gave epoch 4, and
	// nothing would have ended that transaction. A marker now goes to a
	// partition where nothing is open when it raises the producer's
	// epoch there (coordinator/state txn_ops.go, addMarker; coordinator
	// TestTxnLateBegin). Found with the workload of the time: the seed
	// draws other calls now.
	name: "late-begin", seed: 1797700005844901630,
	opts: Options{Duration: 5 * time.Minute, Faults: ClusterFaults, Brokers: 3},
	why:  "fenced-no-writes: a fenced epoch's write accepted in a partition whose begin arrived after the abort",
}, {
	// tx-a#2 wrote 3 records to p0/0 (shard 0) and p0/1; its EndTxn
	// (commit) went through broker 1, just restarted on a wiped folder
	// and cut off from broker 0: its catalog knew no shard for p0/0, and
	// the commit took that UNKNOWN_TOPIC_OR_PARTITION for a partition
	// deleted with its data, skipped its marker and completed; a later
	// InitProducerId aborted the records. A marker whose partition this
	// broker cannot route while some shard did not answer its catalog
	// refresh is now tried again (coordinator txn_api.go, markerDone;
	// TestTxnMarkerUnroutedIsNotGone).
	name: "marker-unrouted", seed: 1781376451538423345,
	opts: Options{Duration: 5 * time.Minute, Faults: ClusterFaults, Brokers: 3},
	why:  "txn-outcome: a commit acknowledged, none of its records visible to read_committed",
}, {
	// Broker 1 gave shard 2 to its preferred member, broker 2, while the
	// metadata service failed its calls: its resign failed, and its
	// election key, which only its lease (alive as long as broker 1)
	// would end, stayed first. Broker 2 campaigned behind it; broker 1,
	// seeing a leader (itself), did not campaign: shard 2 had no leader
	// for 13 minutes, until every broker restarted, and the topic r1,
	// whose creation it refused meanwhile, was left with partitions no
	// shard served. A member that sees its own key lead a shard it does
	// not lead now campaigns, and takes the key up again (memcluster and
	// etcdcluster node.go, campaign; memcluster TestResignFails). Found
	// by make sim SEEDS=10000.
	name: "stale-election-key", seed: 1186346847160088133,
	opts: Options{Duration: 2 * time.Minute, Faults: ClusterFaults, Brokers: 3},
	why:  "final-read: a shard left without a leader behind its last leader's election key",
}, {
	// A transaction aborted in p0/1 (offsets 76-79), then DeleteRecords
	// to 83; a read_committed fetch from 62 through broker 2 read the
	// batches from its follower of the shard, not yet past the delete,
	// and the aborted transactions from the leader, whose index had
	// dropped those wholly below the new log start: the consumer took
	// the aborted records for committed ones. A fetch's range from below
	// the log start is now refused, OFFSET_OUT_OF_RANGE
	// (Coordinator.FetchAbortedTxns; coordinator TestTxnForwarded).
	// Found by make sim SEEDS=10000.
	name: "aborted-below-log-start", seed: 1291640504500606094,
	opts: Options{Duration: 2 * time.Minute, Faults: ClusterFaults, Brokers: 3},
	why:  "rc-no-aborted: a read_committed fetch below a moved log start returned aborted records",
}}

// TestFoundBugs runs the seeds of foundBugs: each found a bug since
// fixed, and must run clean.
func TestFoundBugs(t *testing.T) {
	for _, k := range foundBugs {
		t.Run(k.name, func(t *testing.T) {
			res, err := runSeedErr(t, k.seed, k.opts)
			require.NoError(t, err)
			require.NotNil(t, res)
			require.Empty(t, res.Violations, "seed %d (%s)", k.seed, k.why)
			require.GreaterOrEqual(t, res.Simulated, k.opts.Duration, "the whole run")
			t.Logf("seed %d: %v simulated, %d faults, %d events", k.seed, res.Simulated, res.Faults, len(res.History.Events()))
		})
	}
}

// TestClusterSeeds runs clusterSeeds fixed seeds of three brokers of one
// cluster on a memcluster.Service, with ClusterFaults and skewed
// clocks, for clusterDuration each (under -race, ten of them).
func TestClusterSeeds(t *testing.T) {
	n := clusterSeeds
	if raceEnabled {
		n = 10
	}
	for seed := uint64(1); n > 0; seed++ {
		if slices.ContainsFunc(knownBugs, func(k bugSeed) bool {
			return k.seed == seed && k.opts.Brokers == 3 && k.opts.Duration == clusterDuration
		}) {
			continue
		}
		n--
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			res := runSeed(t, seed, clusterOptions())
			if res == nil {
				return
			}
			t.Logf("%v simulated, %d events, %d faults", res.Simulated, len(res.History.Events()), res.Faults)
			if len(res.Violations) > 0 {
				t.Error(report(res))
			}
		})
	}
}

// faultKind names the kind of a fault event: its note up to the first
// figure or parenthesis ("lease expired", "calls delayed", "crash").
func faultKind(e *Event) string {
	if e.Op == OpCrash {
		return "crash"
	}
	k := e.Note
	if i := strings.IndexAny(k, "0123456789(:"); i >= 0 {
		k = k[:i]
	}
	k = strings.TrimSpace(k)
	for _, op := range []string{"errors", "shard"} {
		if strings.HasPrefix(k, op) {
			return op
		}
	}
	return k
}

// hung reports a seed that has run for d of wall time, far longer than
// any seed takes: something in its bubble waits on what virtual time
// cannot advance (a mutex never released, real I/O), a bug as much as a
// violation. It prints every goroutine's stack and exits the process.
func hung(seed uint64, d time.Duration) {
	fmt.Fprintf(os.Stderr, "sim: seed %d hung: still running after %v of wall time; its goroutines:\n", seed, d)
	pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
	fmt.Printf("sim: seed %d hung\n", seed)
	os.Exit(3)
}

// TestSim runs -seeds random seeds (go test ./internal/sim -run TestSim
// -seeds=N, or make sim SEEDS=N), prints each failing seed with the
// guarantees it violated and its last 50 events, and ends with a summary
// line. With -sim.replay it runs each seed twice and counts the seeds
// whose two traces are the same.
func TestSim(t *testing.T) {
	if *seedsFlag == 0 {
		t.Skip("-seeds not set")
	}
	var hours time.Duration
	var nfaults, violations int64
	replayed := 0
	kinds := map[string]int{}
	start := time.Now()
	for i := range *seedsFlag {
		seed := *seedFlag
		if seed == 0 || *seedsFlag > 1 {
			seed = uint64(time.Now().UnixNano()) ^ uint64(i)<<48
		}
		faults := DefaultFaults
		if *brokersFlag > 1 {
			faults = ClusterFaults
		}
		if *noFaults {
			faults = FaultOptions{}
		}
		opts := Options{Duration: *hoursFlag, Faults: faults, Brokers: *brokersFlag, Skew: *skewFlag}
		watchdog := time.AfterFunc(*hangFlag, func() { hung(seed, *hangFlag) })
		res, err := runSeedErr(t, seed, opts)
		watchdog.Stop()
		if err != nil {
			t.Errorf("seed %d: %v", seed, err)
		}
		if res == nil {
			continue
		}
		if *traceFlag != "" {
			if err := os.WriteFile(*traceFlag, []byte(res.History.Trace()), 0o644); err != nil {
				t.Error(err)
			}
		}
		hours += res.Simulated
		nfaults += res.Faults
		for _, e := range res.History.Events() {
			if e.Op == OpFault || e.Op == OpCrash {
				kinds[faultKind(e)]++
			}
		}
		violations += int64(len(res.Violations))
		if len(res.Violations) > 0 {
			t.Error(report(res))
		}
		if *replayFlag {
			again, _ := runSeedErr(t, seed, opts)
			if again == nil {
				continue
			}
			hours += again.Simulated
			a, b := res.History.Trace(), again.History.Trace()
			if a == b {
				replayed++
				continue
			}
			la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
			n := 0
			for n < len(la) && n < len(lb) && la[n] == lb[n] {
				n++
			}
			fmt.Printf("seed %d: the replay parts at event %d of %d:\n  %s\n  %s\n", seed, n, len(la)-1, la[min(n, len(la)-1)], lb[min(n, len(lb)-1)])
		}
		if *everyFlag > 0 && (i+1)%*everyFlag == 0 && i+1 < *seedsFlag {
			progress(i+1, *seedsFlag, hours, nfaults, violations, start)
		}
	}
	if *replayFlag {
		fmt.Printf("sim: %d of %d seeds replayed with the same trace\n", replayed, *seedsFlag)
	}
	var byKind []string
	for k, n := range kinds {
		byKind = append(byKind, fmt.Sprintf("%s %.1f", k, float64(n)/hours.Hours()))
	}
	slices.Sort(byKind)
	fmt.Printf("sim: faults per simulated hour: %s\n", strings.Join(byKind, ", "))
	fmt.Printf("sim: %d seeds, %.1f simulated hours, %d faults, %d violations (%v wall)\n", *seedsFlag, hours.Hours(), nfaults, violations, time.Since(start).Round(time.Millisecond))
}
