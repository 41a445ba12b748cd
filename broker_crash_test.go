package diskless

import (
	"bufio"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/wal"
)

// The crash-restart test: a child process runs a broker over a file://
// bucket with idempotent producers writing to every partition, printing
// each batch it sends and each acknowledgement; the parent kills it with
// SIGKILL at random moments, restarts it, and at the end a history checker
// reads everything back.

const crashEnv = "DISKLESS_BROKER_CRASH_DIR"

var (
	crashKills = flag.Int("crash.kills", 20, "how many times TestBrokerCrash kills the broker")
	crashFor   = flag.Duration("crash.for", 0, "TestBrokerCrash goes on killing the broker after -crash.kills kills until this much time has passed")
)

const crashPartitions = 4

func crashConfig(dir string) *Config {
	return &Config{BucketURL: "file://" + filepath.Join(dir, "bucket"), DataDir: filepath.Join(dir, "data"), Linger: 20 * time.Millisecond}
}

// crashValue is the value of record seq of a run and partition: the
// checker decodes it.
func crashValue(run int64, p int32, seq int32) []byte {
	v := make([]byte, 16)
	binary.BigEndian.PutUint64(v, uint64(run))
	binary.BigEndian.PutUint32(v[8:], uint32(p))
	binary.BigEndian.PutUint32(v[12:], uint32(seq))
	return v
}

// crashChild produces until it is killed.
func crashChild(dir string) {
	ctx := context.Background()
	fail := func(err error) {
		fmt.Printf("error %v\n", err)
		os.Exit(2)
	}
	b, err := Open(ctx, crashConfig(dir))
	if err != nil {
		fail(err)
	}
	if _, err := b.CreateTopic(ctx, "crash", TopicConfig{Partitions: crashPartitions}); err != nil && kafkaerr.CodeOf(err) != kafkaerr.TopicAlreadyExists {
		fail(err)
	}
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		fmt.Printf(format+"\n", args...)
		mu.Unlock()
	}
	for p := int32(0); p < crashPartitions; p++ {
		go func() {
			pid, epoch, err := b.InitProducerID(ctx)
			if err != nil {
				fail(err)
			}
			rng := rand.New(rand.NewPCG(uint64(pid), uint64(p)))
			for seq := int32(0); ; {
				n := int32(rng.IntN(20) + 1)
				bld := kbatch.NewBuilder(kbatch.Codecs[rng.IntN(len(kbatch.Codecs))])
				bld.SetProducer(pid, epoch, seq)
				for i := int32(0); i < n; i++ {
					bld.Append(time.Now().UnixMilli(), nil, crashValue(pid, p, seq+i))
				}
				raw, err := bld.Build(nil)
				if err != nil {
					fail(err)
				}
				say("try %d %d %d %d", p, pid, seq, n)
				resp, err := b.Produce(ctx, ProduceRequest{Acks: -1, Partitions: []ProducePartition{{Topic: "crash", Partition: p, Records: raw}}})
				if err != nil {
					fail(err)
				}
				r := resp.Partitions[0]
				if r.Err != nil {
					// A retriable error: send the same batch again, as a
					// producer does (idempotence dedups it).
					say("retry %d %d %d %v", p, pid, seq, r.Err)
					continue
				}
				say("ack %d %d %d %d %d", p, pid, seq, n, r.BaseOffset)
				seq += n
			}
		}()
	}
	select {}
}

type crashAckRec struct {
	p      int32
	pid    int64
	seq, n int32
	base   int64
}

func TestBrokerCrash(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "bucket"), 0o755))
	rng := rand.New(rand.NewPCG(21, 22))
	var acks []crashAckRec
	tried := 0
	start := time.Now()
	kills := 0
	for ; kills < *crashKills || time.Since(start) < *crashFor; kills++ {
		cmd := exec.CommandContext(t.Context(), os.Args[0])
		cmd.Env = append(os.Environ(), crashEnv+"="+dir)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		killAfter := rng.IntN(60) + 5 // lines
		sc := bufio.NewScanner(out)
		lines := 0
		for sc.Scan() {
			if lines == killAfter {
				require.NoError(t, cmd.Process.Kill()) // SIGKILL
			}
			lines++
			f := strings.Fields(sc.Text())
			switch f[0] {
			case "try":
				tried++
			case "retry":
			case "ack":
				var v [5]int64
				for i := range v {
					v[i], err = strconv.ParseInt(f[i+1], 10, 64)
					require.NoError(t, err)
				}
				acks = append(acks, crashAckRec{p: int32(v[0]), pid: v[1], seq: int32(v[2]), n: int32(v[3]), base: v[4]})
			default:
				t.Fatalf("child: %s", sc.Text())
			}
		}
		if lines <= killAfter {
			require.NoError(t, cmd.Process.Kill())
		}
		require.Error(t, cmd.Wait(), "the child was killed")
	}
	killing := time.Since(start)

	// The history check, on a broker opened after the last crash.
	ctx := t.Context()
	b, err := Open(ctx, crashConfig(dir))
	require.NoError(t, err)
	defer b.Close()
	type rec struct {
		pid int64
		seq int32
	}
	records := 0
	for p := int32(0); p < crashPartitions; p++ {
		at := map[int64]rec{}
		seen := map[rec]int64{}
		for o, v := range readValues(t, b, "crash", p, 0) {
			x := rec{int64(binary.BigEndian.Uint64(v)), int32(binary.BigEndian.Uint32(v[12:]))}
			require.Equal(t, p, int32(binary.BigEndian.Uint32(v[8:])))
			if first, dup := seen[x]; dup {
				t.Fatalf("partition %d: record %v at offsets %d and %d: a duplicate", p, x, first, o)
			}
			seen[x] = int64(o)
			at[int64(o)] = x
			records++
		}
		for _, a := range acks {
			if a.p != p {
				continue
			}
			for i := int32(0); i < a.n; i++ {
				got, ok := at[a.base+int64(i)]
				require.True(t, ok, "partition %d: acknowledged offset %d is lost", p, a.base+int64(i))
				require.Equal(t, rec{a.pid, a.seq + i}, got, "partition %d offset %d", p, a.base+int64(i))
			}
		}
	}
	t.Logf("%d kills in %v; %d batches sent, %d acknowledged; %d records read back: every acknowledged one at its offset, no duplicate", kills, killing.Round(time.Millisecond), tried, len(acks), records)

	// Nothing leaks: once every record is deleted, the lifecycle deletes
	// every committed object and the orphan collector every object a
	// killed broker uploaded and never committed; the bucket ends empty.
	for p := int32(0); p < crashPartitions; p++ {
		_, err := b.DeleteRecords(ctx, "crash", p, -1)
		require.NoError(t, err)
	}
	require.NoError(t, b.Close())
	cfg := crashConfig(dir)
	cfg.DeletionGrace, cfg.OrphanGrace, cfg.OrphanInterval = 100*time.Millisecond, time.Second, -1
	b, err = Open(ctx, cfg)
	require.NoError(t, err)
	defer b.Close()
	bucket, err := blob.OpenBucket(ctx, cfg.BucketURL)
	require.NoError(t, err)
	defer bucket.Close()
	// And one more orphan for certain: SIGKILL between a PUT and its
	// commit is a narrow window that the kills above may miss.
	require.NoError(t, bucket.WriteAll(ctx, wal.NewObjectKey("", time.Now()), []byte("uploaded, never committed"), nil))
	before := len(walKeys(t, bucket, ""))
	require.Eventually(t, func() bool {
		_, err := b.CollectOrphans(ctx)
		require.NoError(t, err)
		return len(walKeys(t, bucket, "")) == 0
	}, 60*time.Second, 100*time.Millisecond)
	s := b.Stats()
	require.Positive(t, s.OrphansDeleted)
	t.Logf("%d objects in the bucket: %d deleted by the lifecycle, %d orphans collected", before, s.ObjectsDeleted, s.OrphansDeleted)
}
