package coordinator

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/wal"
)

// The crash test: a child process runs a coordinator over a metalog.File and
// commits objects, printing each commit before it sends it and each answer
// once it has it; the parent kills it with SIGKILL at a random moment,
// reopens, and checks that every acknowledged commit is there at the
// offsets its answer gave, and nothing else: every batch stored belongs to
// a commit the child sent, and each partition's batches are contiguous
// from its log start to its high watermark.

const coordinatorCrashEnv = "DISKLESS_COORDINATOR_CRASH_DIR"

var crashTopic = uuid.MustParse("c4a5b6e0-0000-4000-8000-000000000001")

func crashLogOptions() *metalog.FileOptions { return &metalog.FileOptions{SegmentBytes: 64 << 10} }

// coordinatorCrashChild commits objects until it is killed.
func coordinatorCrashChild(dir string) {
	ctx := context.Background()
	fail := func(err error) {
		fmt.Printf("error %v\n", err)
		os.Exit(2)
	}
	log, err := metalog.OpenFile(filepath.Join(dir, "log"), crashLogOptions())
	if err != nil {
		fail(err)
	}
	c, err := openLeader(ctx, log, &leaderOptions{Dir: filepath.Join(dir, "db"), SnapshotEvery: -1})
	if err != nil {
		fail(err)
	}
	if _, err := c.CreatePartitions(ctx, CreatePartitionsRequest{TopicID: crashTopic, Name: "crash", Partitions: 4}); err != nil && code(err) != 36 {
		fail(err)
	}
	run := os.Getpid()
	for i := 0; ; i++ {
		rng := rand.New(rand.NewPCG(uint64(run), uint64(i)))
		key := fmt.Sprintf("wal/%d-%d", run, i)
		var coords []wal.Coordinate
		pos := int64(1)
		for j := rng.IntN(4) + 1; j > 0; j-- {
			cd := coord(wal.TopicPartition{TopicID: crashTopic, Partition: int32(rng.IntN(4))}, pos, int32(rng.IntN(5)+1), -1, -1, -1, 1_764_500_000_000)
			coords = append(coords, cd)
			pos += int64(cd.Size)
		}
		fmt.Println("try " + key) // written before the commit is sent
		res, err := c.CommitFile(ctx, CommitFileRequest{ObjectKey: key, Size: pos, Coordinates: coords})
		if err != nil {
			fail(err)
		}
		line := "ack " + key
		for j, r := range res {
			line += fmt.Sprintf(" %d:%d:%d:%d", coords[j].Partition, r.BaseOffset, coords[j].NumRecords, coords[j].Offset)
		}
		fmt.Println(line)
	}
}

type crashAck struct {
	partition         int32
	base, n, position int64
}

func TestCoordinatorCrash(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(11, 12))
	tried := map[string]bool{}
	acked := map[string][]crashAck{}
	for round := range 5 {
		cmd := exec.CommandContext(t.Context(), os.Args[0])
		cmd.Env = append(os.Environ(), coordinatorCrashEnv+"="+dir)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		killAfter := rng.IntN(4000) + 1
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
				tried[f[1]] = true
			case "ack":
				for _, a := range f[2:] {
					p := strings.Split(a, ":")
					var v [4]int64
					for i := range v {
						v[i], err = strconv.ParseInt(p[i], 10, 64)
						require.NoError(t, err)
					}
					acked[f[1]] = append(acked[f[1]], crashAck{int32(v[0]), v[1], v[2], v[3]})
				}
			default:
				t.Fatalf("child: %s", sc.Text())
			}
		}
		if lines <= killAfter {
			require.NoError(t, cmd.Process.Kill())
		}
		require.Error(t, cmd.Wait(), "the child was killed")

		// Reopen in this process and check.
		log, err := metalog.OpenFile(filepath.Join(dir, "log"), crashLogOptions())
		require.NoError(t, err)
		c, err := openLeader(t.Context(), log, &leaderOptions{Dir: filepath.Join(dir, "db"), SnapshotEvery: -1})
		require.NoError(t, err)
		type run struct {
			key        string
			base, last int64
			pos, size  int64
		}
		stored := map[int32][]run{}
		for p := int32(0); p < 4; p++ {
			res, err := c.FindBatches(t.Context(), wal.TopicPartition{TopicID: crashTopic, Partition: p}, 0, 1<<40)
			require.NoError(t, err)
			next := int64(0)
			for _, l := range res.Batches {
				require.True(t, tried[l.ObjectKey], "a batch of %s, which the child never sent", l.ObjectKey)
				require.Equal(t, next, l.BaseOffset, "partition %d has a gap or an overlap", p)
				next = l.LastOffset + 1
				stored[p] = append(stored[p], run{l.ObjectKey, l.BaseOffset, l.LastOffset, l.BytePos, l.ByteSize})
			}
			require.Equal(t, res.HighWatermark, next)
		}
		n := 0
		for key, acks := range acked {
			for _, a := range acks {
				found := false
				for _, r := range stored[a.partition] {
					if r.key == key && r.base <= a.base && a.base+a.n-1 <= r.last && r.pos <= a.position && a.position < r.pos+r.size {
						found = true
					}
				}
				require.True(t, found, "acknowledged %s partition %d offsets %d+%d is lost", key, a.partition, a.base, a.n)
				n++
			}
		}
		t.Logf("round %d: killed after %d lines; %d acknowledged batches all present", round, lines, n)
		require.NoError(t, c.Close())
		require.NoError(t, log.Close())
	}
}
