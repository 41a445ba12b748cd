package coordinator

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/diskless-go/diskless/coordinator/store"

	"github.com/diskless-go/diskless/coordinator/state"

	"github.com/google/uuid"

	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/wal"
)

// benchCommitter commits objects of 20 batches over 1,000 partitions (10
// topics of 100), from idempotent producers, as brokers do.
type benchCommitter struct {
	c       *leader
	topics  []uuid.UUID
	objects atomic.Int64
	seqs    sync.Map // producer -> *[1000]int32 next sequence per partition
}

func newBenchCommitter(b *testing.B, c *leader) *benchCommitter {
	bc := &benchCommitter{c: c}
	for i := 0; i < 10; i++ {
		bc.topics = append(bc.topics, mustCreate(b, c, fmt.Sprintf("bench-%d", i), 100, TopicConfig{}))
	}
	return bc
}

// commit commits one object for producer pid (one goroutine per producer)
// and returns its latency.
func (bc *benchCommitter) commit(b *testing.B, rng *rand.Rand, pid int64, seqs *[1000]int32) time.Duration {
	coords := make([]wal.Coordinate, 20)
	pos := int64(1)
	for i := range coords {
		p := rng.IntN(1000)
		tp := wal.TopicPartition{TopicID: bc.topics[p/100], Partition: int32(p % 100)}
		coords[i] = coord(tp, pos, 16, pid, 0, seqs[p], 1_764_500_000_000)
		coords[i].Size = 16 << 10
		seqs[p] += 16
		pos += 16 << 10
	}
	slices.SortStableFunc(coords, func(a, b wal.Coordinate) int { return a.TopicPartition.Compare(b.TopicPartition) })
	// Batches of one partition are contiguous in the object: give them
	// positions in that order.
	pos = 1
	for i := range coords {
		coords[i].Offset = pos
		pos += int64(coords[i].Size)
	}
	key := fmt.Sprintf("wal/%012d", bc.objects.Add(1))
	start := time.Now()
	res, err := bc.c.CommitFile(context.Background(), CommitFileRequest{ObjectKey: key, Size: pos, Uploader: 1, Coordinates: coords})
	d := time.Since(start)
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			b.Fatal(r.Err)
		}
	}
	return d
}

// BenchmarkCommitFile commits objects of 20 batch coordinates over 1,000
// partitions from 64 concurrent committers, and reports coordinates per
// second and commit latency percentiles.
func BenchmarkCommitFile(b *testing.B) {
	for _, lc := range []struct {
		name string
		open func(b *testing.B) metalog.Log
	}{
		{"mem", func(b *testing.B) metalog.Log { return newTestLog() }},
		{"file", func(b *testing.B) metalog.Log { return openBenchFileLog(b) }},
	} {
		b.Run("log="+lc.name, func(b *testing.B) {
			c := openTest(b, lc.open(b), "", &leaderOptions{SnapshotEvery: -1, ApplyInterval: 10 * time.Millisecond})
			bc := newBenchCommitter(b, c)
			var mu sync.Mutex
			var lat []time.Duration
			var next atomic.Int64
			b.SetParallelism(32)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				pid := next.Add(1)
				rng := rand.New(rand.NewPCG(uint64(pid), 1))
				var seqs [1000]int32
				var mine []time.Duration
				for pb.Next() {
					mine = append(mine, bc.commit(b, rng, pid, &seqs))
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			})
			b.ReportMetric(float64(b.N*20)/b.Elapsed().Seconds(), "coords/s")
			st := c.Stats()
			b.ReportMetric(float64(st.Commits)/float64(max(st.Entries, 1)), "commits/entry")
			slices.Sort(lat)
			if len(lat) > 0 {
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			}
		})
	}
}

func openBenchFileLog(b *testing.B) metalog.Log {
	l, err := metalog.OpenFile(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l
}

// BenchmarkCommitLatency commits, open loop, at a fixed rate of batch
// coordinates per second (objects of 20, each from its own goroutine, as
// brokers send them) for two seconds, over a metalog.File (fsync group commit),
// and reports the commit latency percentiles. The rate is half the
// target's 100,000 coordinates a second (BENCHMARKS.md, "coordinator:
// commit throughput, commit latency, FindBatches").
func BenchmarkCommitLatency(b *testing.B) {
	for _, interval := range []time.Duration{10 * time.Millisecond} {
		rate := 50_000
		b.Run(fmt.Sprintf("log=file/rate=%d/apply=%v", rate, interval), func(b *testing.B) {
			c := openTest(b, openBenchFileLog(b), "", &leaderOptions{SnapshotEvery: -1, ApplyInterval: interval})
			bc := newBenchCommitter(b, c)
			var lat []time.Duration
			for b.Loop() {
				lat = bc.openLoop(b, rate/20, 2*time.Second)
			}
			slices.Sort(lat)
			b.ReportMetric(float64(len(lat)*20)/2, "coords/s")
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
		})
	}
}

// openLoop sends objects at perSecond for d, each commit from its own
// goroutine, and returns their latencies.
func (bc *benchCommitter) openLoop(b *testing.B, perSecond int, d time.Duration) []time.Duration {
	n := int(d.Seconds() * float64(perSecond))
	lat := make([]time.Duration, n)
	var wg sync.WaitGroup
	start := time.Now()
	const producers = 64
	seqs := make([][1000]int32, producers)
	locks := make([]sync.Mutex, producers)
	for i := 0; i < n; i++ {
		due := start.Add(time.Duration(i) * time.Second / time.Duration(perSecond))
		if w := time.Until(due); w > 0 {
			time.Sleep(w)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := i % producers
			locks[p].Lock() // one object at a time per producer: sequences in order
			defer locks[p].Unlock()
			rng := rand.New(rand.NewPCG(uint64(i), 3))
			began := time.Now()
			bc.commit(b, rng, int64(p)+1_000_000, &seqs[p])
			lat[i] = time.Since(began)
		}()
	}
	wg.Wait()
	return lat
}

// findFixture returns a database path with rows batch rows over 1,000
// partitions (20 per object, from idempotent producers), generated through
// the store's own apply path and kept in the temporary folder between
// runs, since 10 million rows take a while to write.
func findFixture(b *testing.B, rows int) (string, []uuid.UUID) {
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("diskless-findbatches-v1-%d", rows))
	path := filepath.Join(dir, "shard-0.db")
	ids := make([]uuid.UUID, 10)
	for i := range ids {
		ids[i] = uuid.NewSHA1(uuid.NameSpaceOID, []byte(fmt.Sprintf("bench-%d", i)))
	}
	if _, err := os.Stat(filepath.Join(dir, "done")); err == nil {
		return dir, ids
	}
	os.RemoveAll(dir)
	ctx := context.Background()
	st, err := store.Open(ctx, path, 1)
	if err != nil {
		b.Fatal(err)
	}
	root := state.NewView(nil)
	var recs []state.Record
	for i, id := range ids {
		recs = append(recs, state.CreateTopicRecord{TopicID: id, Name: fmt.Sprintf("bench-%d", i), Partitions: 100, FirstPID: int64(i * 100),
			Config: TopicConfig{Retention: -1, RetentionBytes: -1, Delete: true, MaxMessageBytes: 1 << 20}})
	}
	if err := storeApply(ctx, st, root, 0, recs); err != nil {
		b.Fatal(err)
	}
	recs = nil
	rng := rand.New(rand.NewPCG(1, 1))
	now := int64(1_764_500_000_000)
	hw := make([]int64, 1000)
	objectID := int64(0)
	for made, off := 0, int64(1); made < rows; off++ {
		recs = recs[:0]
		for o := 0; o < 500 && made < rows; o++ {
			r := state.CommitFileRecord{ObjectID: objectID, Key: fmt.Sprintf("wal/%020d", objectID), Size: 20 << 14, Uploader: 1, CommitTime: now}
			objectID++
			pos := int64(1)
			for j := 0; j < 20 && made < rows; j++ {
				p := rng.IntN(1000)
				r.Rows = append(r.Rows, state.CommitRow{PID: int64(p), BaseOffset: hw[p], LastOffset: hw[p] + 15, BytePos: pos, ByteSize: 16 << 10, MaxTimestamp: now - 100})
				hw[p] += 16
				pos += 16 << 10
				made++
			}
			recs = append(recs, r)
			now += 2
		}
		if err := storeApply(ctx, st, root, off, recs); err != nil {
			b.Fatal(err)
		}
		if off%20 == 0 {
			if err := st.CommitTxn(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := st.CommitTxn(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := st.W.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		b.Fatal(err)
	}
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "done"), nil, 0o644); err != nil {
		b.Fatal(err)
	}
	return dir, ids
}

// BenchmarkFindBatches looks up the batches at a random offset of a random
// partition among 1,000, in a database of 1 or 10 million batch rows, and
// reports the latency percentiles and the database bytes per batch row.
func BenchmarkFindBatches(b *testing.B) {
	for _, rows := range []int{1_000_000, 10_000_000} {
		b.Run(fmt.Sprintf("rows=%dM", rows/1_000_000), func(b *testing.B) {
			dir, ids := findFixture(b, rows)
			fi, err := os.Stat(filepath.Join(dir, "shard-0.db"))
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			st, err := store.Open(ctx, filepath.Join(dir, "shard-0.db"), 2)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			objects, err := st.LoadObjects(ctx)
			if err != nil {
				b.Fatal(err)
			}
			pub := store.NewPublished()
			pub.Load(state.NewView(nil), objects)
			rng := rand.New(rand.NewPCG(2, 2))
			hw := int64(rows / 1000 * 16) // about: each partition has rows/1000 rows of 16 offsets
			lat := make([]time.Duration, 0, 1<<16)
			b.ResetTimer()
			for b.Loop() {
				ti, pi := rng.IntN(10), rng.IntN(100)
				tp := wal.TopicPartition{TopicID: ids[ti], Partition: int32(pi)}
				off := rng.Int64N(hw / 2)
				start := time.Now()
				res, err := st.Reader.FindBatches(ctx, tp, store.PartRow{PID: int64(ti*100 + pi), HW: 1 << 62}, off, 1<<20, pub)
				lat = append(lat, time.Since(start))
				if err != nil || len(res.Batches) == 0 {
					b.Fatalf("%v: %d runs, %v", tp, len(res.Batches), err)
				}
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1000, "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1000, "p99-µs")
			b.ReportMetric(float64(fi.Size())/float64(rows), "db-bytes/batch")
		})
	}
}

// BenchmarkSpeculationInSQL measures the design this package does not
// use: checking each batch coordinate inside a SQLite transaction that is
// then rolled back, reading the partition's high watermark and writing the
// new one there (the least such a check needs: no producer state, no log,
// no commit). It is the reference for the in-memory speculative view:
// this alone, for 1,000 coordinates a transaction, is the ceiling of that
// design.
func BenchmarkSpeculationInSQL(b *testing.B) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(b.TempDir(), "shard-0.db"), 1)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	root := state.NewView(nil)
	if err := storeApply(ctx, st, root, 0, []state.Record{state.CreateTopicRecord{TopicID: uuid.New(), Name: "t", Partitions: 1000,
		Config: TopicConfig{Retention: -1, RetentionBytes: -1, Delete: true}}}); err != nil {
		b.Fatal(err)
	}
	if err := st.CommitTxn(ctx); err != nil {
		b.Fatal(err)
	}
	sel, err := st.Stmt(ctx, "SELECT high_watermark FROM partitions WHERE pid = ?")
	if err != nil {
		b.Fatal(err)
	}
	upd, err := st.Stmt(ctx, "UPDATE partitions SET high_watermark = ? WHERE pid = ?")
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(4, 4))
	for b.Loop() {
		if err := st.Begin(ctx); err != nil {
			b.Fatal(err)
		}
		for i := 0; i < 1000; i++ {
			pid := rng.Int64N(1000)
			var hw int64
			if err := sel.QueryRowContext(ctx, pid).Scan(&hw); err != nil {
				b.Fatal(err)
			}
			if _, err := upd.ExecContext(ctx, hw+16, pid); err != nil {
				b.Fatal(err)
			}
		}
		st.Rollback()
	}
	b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "coords/s")
}

// BenchmarkSQLiteInsert is BenchmarkCommitFile's reference: SQLite's own
// rate of writing the rows those commits write, with nothing else. Each
// op is one object of 20 batch rows over 1,000 partitions (and its object
// row), inserted into the store's schema on one connection in multi-row
// statements of up to 128 rows, as the store writes them, the transaction
// committed every 10 ms (the loop's default ApplyInterval). It reports
// batch rows (coordinates) a second.
func BenchmarkSQLiteInsert(b *testing.B) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(b.TempDir(), "shard-0.db"), 1)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	stmts := map[string]*sql.Stmt{}
	insert := func(head string, arity int, args []any) {
		rows := len(args) / arity
		q := head + strings.TrimSuffix(strings.Repeat("("+strings.TrimSuffix(strings.Repeat("?,", arity), ",")+"),", rows), ",")
		st, ok := stmts[q]
		if !ok {
			if st, err = db.W.PrepareContext(ctx, q); err != nil {
				b.Fatal(err)
			}
			stmts[q] = st
		}
		if _, err := st.ExecContext(ctx, args...); err != nil {
			b.Fatal(err)
		}
	}
	exec := func(q string) {
		if _, err := db.W.ExecContext(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	const perObject, maxRows = 20, 128
	rng := rand.New(rand.NewPCG(1, 2))
	var next [1000]int64 // each partition's next offset
	var objects, rows []any
	flush := func() {
		if len(objects) > 0 {
			insert("INSERT INTO objects (object_id, key, size, uploader, committed_at, live_rows, dead_at, owners) VALUES ", 8, objects)
			insert("INSERT INTO batches (pid, last_offset, n, object_id, pos, size, ts) VALUES ", 7, rows)
		}
		objects, rows = objects[:0], rows[:0]
	}
	exec("BEGIN")
	since := time.Now()
	id := int64(0)
	for b.Loop() { // b.Loop starts the timer at its first call
		id++
		now := time.Now().UnixMilli()
		objects = append(objects, id, fmt.Sprintf("wal/%012d", id), 20*16<<10, 1, now, perObject, nil, []byte{})
		for i := range perObject {
			pid := int64(rng.IntN(1000))
			next[pid] += 16
			rows = append(rows, pid, next[pid]-1, 16, id, int64(1+i*16<<10), 16<<10, 0)
		}
		if len(rows)/7+perObject > maxRows {
			flush()
		}
		if time.Since(since) >= 10*time.Millisecond {
			flush()
			exec("COMMIT")
			exec("BEGIN")
			since = time.Now()
		}
	}
	flush()
	exec("COMMIT")
	b.ReportMetric(float64(b.N*perObject)/b.Elapsed().Seconds(), "coords/s")
}
