package coordinator

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/faultbucket"
	"github.com/diskless-go/diskless/internal/s3test"
	"github.com/diskless-go/diskless/wal"
)

// The contention test: two coordinators, each with a SQLite folder of its
// own, over one metalog.Bucket, commit at full speed while they take the
// leadership from each other, round after round. `make stress` runs it
// longer with these flags.
var (
	contentionRounds  = flag.Int("contention.rounds", 24, "how many times TestContention moves the leadership")
	contentionCommits = flag.Int("contention.commits", 32, "commits TestContention makes in each round, half of them while the leadership moves")
)

// contentionParts is how many partitions the contended topic has; each
// commit has a batch in some of them.
const contentionParts = 3

// contentionNode is one of the two contenders: its folder, and the
// coordinator it runs now (nil while it reopens). gen counts its opens;
// ctx, the context of the calls to this coordinator, ends once it is
// closed.
type contentionNode struct {
	name string
	dir  string

	mu     sync.Mutex
	cond   *sync.Cond
	c      *leader
	log    *metalog.Bucket
	ctx    context.Context
	cancel context.CancelFunc
	gen    int
	stop   bool
}

// current returns the node's coordinator, its context and its generation,
// waiting while it reopens; nil once the test stops.
func (n *contentionNode) current(after int) (*leader, context.Context, int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for !n.stop && (n.c == nil || n.gen == after) {
		n.cond.Wait()
	}
	if n.stop {
		return nil, nil, n.gen
	}
	return n.c, n.ctx, n.gen
}

// close closes the node's coordinator and its log, then ends the context
// of the calls made to it: Close answers every call, so a call still
// waiting then was lost (as a call that reached the loop's queue after
// Close had drained it once was), and the test fails rather than hang.
func (n *contentionNode) close() {
	n.mu.Lock()
	c, log, cancel := n.c, n.log, n.cancel
	n.c, n.log, n.cancel = nil, nil, nil
	n.mu.Unlock()
	if c != nil {
		c.Close()
		log.Close()
		cancel()
	}
}

// contentionCommit is what a client was told of one commit.
type contentionCommit struct {
	key   string
	parts []int32 // the partitions it has a batch in
	n     int32   // records per batch
	// base is the offset acknowledged per partition (outcome ok).
	base    map[int32]int64
	outcome string // "ok", "fenced" (ErrNotLeader: not in the log) or "ambiguous"
	err     error
}

// contentionHistory collects the commits' outcomes and counters.
type contentionHistory struct {
	mu      sync.Mutex
	commits []*contentionCommit
	tokens  chan struct{} // a committer takes one for each commit
	decided atomic.Int64  // commits answered
	answer  chan struct{} // a commit was answered: the mover waits on it
	stop    chan struct{} // closed at the end
	claims  atomic.Int64  // successful opens (each claims the log)
	opens   atomic.Int64  // opens that failed (another claimant, a fault)
	lost    atomic.Int64  // calls still waiting once their coordinator closed
}

// TestContention: two coordinators contend for one bucket log under load
// and take the leadership from each other, one after the other and now and
// then both at once, for -contention.rounds rounds; a third reads the
// whole log at the end. Per partition, no two batches share an offset and
// the offsets run without a gap from 0 to the high watermark; every
// acknowledged commit is there once, at the offsets it was told; none that
// failed with ErrNotLeader is; one that failed otherwise (closed, a put
// whose outcome is unknown) is there at most once; and a commit is there
// in all its partitions or in none.
func TestContention(t *testing.T) {
	buckets := []struct {
		name   string
		open   func(t *testing.T) (*blob.Bucket, *faultbucket.Faults)
		rounds int
	}{
		{"mem", func(t *testing.T) (*blob.Bucket, *faultbucket.Faults) {
			b := memblob.OpenBucket(nil)
			t.Cleanup(func() { b.Close() })
			return b, nil
		}, *contentionRounds},
		// Puts and gets that fail, a share of the puts after they took
		// effect: the ambiguous puts that metalog.Bucket reads back.
		{"mem-faults", func(t *testing.T) (*blob.Bucket, *faultbucket.Faults) {
			inner := memblob.OpenBucket(nil)
			t.Cleanup(func() { inner.Close() })
			var mu sync.Mutex
			rng := rand.New(rand.NewPCG(41, 42))
			b, faults, err := faultbucket.Wrap(inner, &faultbucket.Options{Seed: 43})
			require.NoError(t, err)
			t.Cleanup(func() { b.Close() })
			faults.SetHook(func(op faultbucket.Op, key string) *faultbucket.Error {
				mu.Lock()
				defer mu.Unlock()
				switch x := rng.Float64(); {
				case op == faultbucket.Put && x < 0.04:
					return &faultbucket.Error{AfterEffect: true}
				case (op == faultbucket.Put || op == faultbucket.Get) && x < 0.08:
					return &faultbucket.Error{}
				}
				return nil
			})
			return b, faults
		}, *contentionRounds},
		{"s3", func(t *testing.T) (*blob.Bucket, *faultbucket.Faults) {
			return s3test.Start(t).Bucket(t, "contention"), nil
		}, max(*contentionRounds/2, 1)},
	}
	for _, bk := range buckets {
		t.Run(bk.name, func(t *testing.T) {
			bucket, faults := bk.open(t)
			runContention(t, bucket, faults, bk.rounds)
		})
	}
}

func runContention(t *testing.T, bucket *blob.Bucket, faults *faultbucket.Faults, rounds int) {
	ctx := t.Context()
	start := time.Now()
	logOpts := &metalog.BucketOptions{RetryBackoff: time.Millisecond}
	h := &contentionHistory{
		tokens: make(chan struct{}, (rounds+1)*max(*contentionCommits, 2)),
		answer: make(chan struct{}, 1),
		stop:   make(chan struct{}),
	}
	nodes := [2]*contentionNode{{name: "a", dir: t.TempDir()}, {name: "b", dir: t.TempDir()}}
	for _, n := range nodes {
		n.cond = sync.NewCond(&n.mu)
	}

	// open (re)opens n's coordinator: its old one is closed first (it
	// answers what the log already decided), then a new one replays the
	// log from the node's folder and claims it.
	open := func(n *contentionNode) error {
		n.close()
		for attempt := 0; ; attempt++ {
			log, err := metalog.OpenBucket(ctx, bucket, "p/meta/0/", logOpts)
			if err != nil {
				return err
			}
			c, err := openLeader(ctx, log, &leaderOptions{Dir: n.dir, Name: n.name, ApplyInterval: 5 * time.Millisecond, SnapshotEvery: -1})
			if err != nil {
				// Another claimant read the log at the same time, or a
				// fault outlasted the retries: open again.
				log.Close()
				h.opens.Add(1)
				if attempt >= 20 {
					return fmt.Errorf("node %s cannot open: %w", n.name, err)
				}
				continue
			}
			h.claims.Add(1)
			n.mu.Lock()
			n.c, n.log = c, log
			n.ctx, n.cancel = context.WithCancel(ctx)
			n.gen++
			n.cond.Broadcast()
			n.mu.Unlock()
			return nil
		}
	}

	require.NoError(t, open(nodes[0]))
	id := mustCreate(t, nodes[0].c, "contention", contentionParts, TopicConfig{})

	// shutdown stops the committers and closes both coordinators; it runs
	// on every way out of the test.
	var wg sync.WaitGroup
	var once sync.Once
	shutdown := func() {
		once.Do(func() {
			close(h.stop)
			for _, n := range nodes {
				n.mu.Lock()
				n.stop = true
				n.cond.Broadcast()
				n.mu.Unlock()
			}
			for _, n := range nodes {
				n.close()
			}
			wg.Wait()
		})
	}
	defer shutdown()

	// The committers: two per node, each committing objects of its own,
	// each with a batch in one to all of the partitions, one per token the
	// mover hands out.
	for _, n := range nodes {
		for w := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(n.name[0]), uint64(w)))
				for i := 0; ; i++ {
					select {
					case <-h.tokens:
					case <-h.stop:
						return
					}
					c, cctx, gen := n.current(-1)
					if c == nil {
						return
					}
					cm := &contentionCommit{key: fmt.Sprintf("wal/%s-%d-%d", n.name, w, i), n: int32(rng.IntN(3) + 1)}
					var coords []wal.Coordinate
					for p := range int32(contentionParts) {
						if rng.IntN(2) == 0 || (p == contentionParts-1 && len(coords) == 0) {
							cm.parts = append(cm.parts, p)
							coords = append(coords, coord(wal.TopicPartition{TopicID: id, Partition: p}, 1+int64(len(coords))*100, cm.n, -1, -1, -1, 1))
						}
					}
					res, err := c.CommitFile(cctx, CommitFileRequest{ObjectKey: cm.key, Size: 1000, Coordinates: coords})
					cm.err = err
					switch {
					case err == nil:
						cm.outcome, cm.base = "ok", map[int32]int64{}
						for j, r := range res {
							if r.Err != nil {
								t.Errorf("%s: batch %d: %v", cm.key, j, r.Err)
								cm.outcome = "ambiguous"
							}
							cm.base[cm.parts[j]] = r.BaseOffset
						}
					case errors.Is(err, ErrNotLeader):
						cm.outcome = "fenced"
					case errors.Is(err, context.Canceled):
						cm.outcome = "ambiguous"
						h.lost.Add(1)
					default:
						cm.outcome = "ambiguous"
					}
					h.mu.Lock()
					h.commits = append(h.commits, cm)
					h.mu.Unlock()
					h.decided.Add(1)
					select {
					case h.answer <- struct{}{}:
					default:
					}
					if err == nil {
						continue
					}
					// This coordinator is done: wait for the node's next.
					if c, _, _ := n.current(gen); c == nil {
						return
					}
				}
			}()
		}
	}

	// The mover: each round it hands out -contention.commits tokens and,
	// once half of them are answered, moves the leadership while the rest
	// are being committed: the node that does not lead takes the log, and
	// every fourth round both reopen at once (the later claim wins).
	k := int64(max(*contentionCommits, 2))
	issued := int64(0)
	give := func() {
		for range k {
			h.tokens <- struct{}{}
		}
		issued += k
	}
	waitDecided := func(n int64) {
		for h.decided.Load() < n {
			select {
			case <-h.answer:
			case <-time.After(60 * time.Second):
				// Where is the commit that hangs?
				_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
				t.Fatalf("no commit answered for 60 s (%d of %d)", h.decided.Load(), n)
			}
		}
	}
	leader := 0
	for round := 1; round <= rounds; round++ {
		give()
		waitDecided(issued - k/2)
		if round%4 == 0 {
			var both sync.WaitGroup
			errs := make([]error, len(nodes))
			for i, n := range nodes {
				both.Add(1)
				go func() { defer both.Done(); errs[i] = open(n) }()
			}
			both.Wait()
			require.NoError(t, errors.Join(errs...))
			continue
		}
		leader = 1 - leader
		require.NoError(t, open(nodes[leader]))
	}
	give()
	waitDecided(issued)

	shutdown()
	if t.Failed() {
		return
	}
	if faults != nil {
		faults.SetHook(nil)
	}

	// The third coordinator, a follower with an empty folder, reads the
	// whole log.
	log, err := metalog.OpenBucket(ctx, bucket, "p/meta/0/", nil)
	require.NoError(t, err)
	defer log.Close()
	f, err := OpenFollower(ctx, log, &FollowerOptions{Options: Options{Dir: t.TempDir()}})
	require.NoError(t, err)
	defer f.Close()
	type span struct{ base, last int64 }
	at := map[int32]map[string]span{} // partition -> key -> offsets
	batches := 0
	for p := range int32(contentionParts) {
		at[p] = map[string]span{}
		tp := wal.TopicPartition{TopicID: id, Partition: p}
		next := int64(0)
		for {
			found, err := f.FindBatches(ctx, tp, next, 1<<20)
			require.NoError(t, err)
			require.Zero(t, found.LogStart)
			if len(found.Batches) == 0 {
				require.Equal(t, next, found.HighWatermark, "partition %d: the batches end below the high watermark", p)
				break
			}
			for _, l := range found.Batches {
				require.Equal(t, next, l.BaseOffset, "partition %d: a gap or an overlap at %d (%s)", p, next, l.ObjectKey)
				require.GreaterOrEqual(t, l.LastOffset, l.BaseOffset)
				_, dup := at[p][l.ObjectKey]
				require.False(t, dup, "partition %d: %s is there twice", p, l.ObjectKey)
				at[p][l.ObjectKey] = span{l.BaseOffset, l.LastOffset}
				next = l.LastOffset + 1
				batches++
			}
		}
	}

	counts := map[string]int{}
	ambiguousIn := 0
	for _, cm := range h.commits {
		counts[cm.outcome]++
		in := 0
		for _, p := range cm.parts {
			s, ok := at[p][cm.key]
			if !ok {
				continue
			}
			in++
			require.Equal(t, int64(cm.n-1), s.last-s.base, "%s in partition %d", cm.key, p)
			if cm.outcome == "ok" {
				require.Equal(t, cm.base[p], s.base, "%s in partition %d: not at the offset acknowledged", cm.key, p)
			}
		}
		switch cm.outcome {
		case "ok":
			require.Equal(t, len(cm.parts), in, "%s was acknowledged and is missing", cm.key)
		case "fenced":
			require.Zero(t, in, "%s failed with %v and is in the log", cm.key, cm.err)
		default:
			require.True(t, in == 0 || in == len(cm.parts), "%s is in %d of its %d partitions", cm.key, in, len(cm.parts))
			if in > 0 {
				ambiguousIn++
			}
		}
	}
	// Nothing is in the log that no client sent.
	sent := map[string]bool{}
	for _, cm := range h.commits {
		sent[cm.key] = true
	}
	for p, keys := range at {
		for k := range keys {
			require.True(t, sent[k], "partition %d: %s, which no client sent", p, k)
		}
	}
	var errs []string
	for _, cm := range h.commits {
		if cm.outcome == "ambiguous" && len(errs) < 3 {
			errs = append(errs, cm.err.Error())
		}
	}
	slices.Sort(errs)
	t.Logf("%d rounds in %v: %d claims (%d opens retried); %d commits: %d acknowledged, %d fenced, %d ambiguous (%d of them in the log, %d lost by a closing coordinator); %d log entries; %d batches read back, contiguous, none twice",
		rounds, time.Since(start).Round(time.Millisecond), h.claims.Load(), h.opens.Load(), len(h.commits),
		counts["ok"], counts["fenced"], counts["ambiguous"], ambiguousIn, h.lost.Load(), f.Applied()+1, batches)
	if len(errs) > 0 {
		t.Logf("ambiguous failures, e.g.: %s", strings.Join(errs, "; "))
	}
	require.Zero(t, h.lost.Load(), "calls left unanswered by a closing coordinator")
	if faults != nil {
		st := faults.Stats()
		t.Logf("faults injected: %d of %d puts, %d of %d gets", st.Failed[faultbucket.Put], st.Calls[faultbucket.Put], st.Failed[faultbucket.Get], st.Calls[faultbucket.Get])
	}
}
