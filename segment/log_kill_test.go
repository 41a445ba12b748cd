package segment

// Crash consistency with real processes: a child process (this test binary,
// re-executed) appends, syncs and reports in a loop, compacting too in one
// mode; the parent kills it with SIGKILL at a random moment, then opens the
// log and requires a valid log holding everything the child reported.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const (
	killDirEnv  = "SEGMENT_KILL_CHILD_DIR"
	killModeEnv = "SEGMENT_KILL_CHILD_MODE"
)

func killOptions(mode string) *LogOptions {
	o := &LogOptions{SegmentBytes: 4096, IndexIntervalBytes: 256, Clock: newLtClock(ltT0).Now}
	if mode == "compact" {
		o.CleanupPolicy = CleanupCompact
		o.MinCleanableDirtyRatio = -1
	}
	return o
}

// killRecords are the records of the batch the child appends at offset
// off: a function of off alone, so any run of the child appends the same.
func killRecords(off int64, mode string) []ltRec {
	recs := make([]ltRec, 1+off%3)
	for i := range recs {
		o := off + int64(i)
		recs[i] = ltRec{Offset: o, TS: ltT0 + o, Key: fmt.Sprintf("k%d", o%11), Value: fmt.Appendf(nil, "v%d", o)}
		if mode == "compact" && o%17 == 0 {
			recs[i].Value = nil
		}
	}
	return recs
}

// killAllRecords returns the records the child appends below end.
func killAllRecords(end int64, mode string) []ltRec {
	var out []ltRec
	for off := int64(0); off < end; {
		recs := killRecords(off, mode)
		out = append(out, recs...)
		off += int64(len(recs))
	}
	return out
}

// TestKillChild is the child's body; it runs only when TestKillAndRecover
// starts it.
func TestKillChild(t *testing.T) {
	dir := os.Getenv(killDirEnv)
	if dir == "" {
		t.Skip("the child process of TestKillAndRecover")
	}
	mode := os.Getenv(killModeEnv)
	ctx := context.Background()
	l, err := OpenLog(ctx, dir, killOptions(mode))
	require.NoError(t, err)
	fmt.Printf("opened %d\n", l.LatestOffset())
	for i := 0; ; i++ {
		off := l.LatestOffset()
		if _, err := l.Append(ctx, ltBatch(t, off, killRecords(off, mode)...)); err != nil {
			t.Fatal(err)
		}
		if err := l.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("synced %d\n", l.LatestOffset())
		if mode == "compact" && i%7 == 0 {
			if _, err := l.Compact(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestKillAndRecover(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	for _, mode := range []string{"append", "compact"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			var synced int64
			for round := 0; round < 4; round++ {
				cmd := exec.Command(exe, "-test.run=^TestKillChild$", "-test.count=1")
				cmd.Env = append(os.Environ(), killDirEnv+"="+dir, killModeEnv+"="+mode)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				out, err := cmd.StdoutPipe()
				require.NoError(t, err)
				require.NoError(t, cmd.Start())
				kill := 20 + rng.IntN(200)
				lines := bufio.NewScanner(out)
				n := 0
				for n < kill && lines.Scan() {
					f := strings.Fields(lines.Text())
					if len(f) == 2 && f[0] == "synced" {
						v, err := strconv.ParseInt(f[1], 10, 64)
						require.NoError(t, err)
						synced = v
						n++
					}
				}
				require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
				err = cmd.Wait()
				require.Equal(t, kill, n, "the child stopped early: %v\n%s", err, stderr.String())

				// Open a copy, so the next round's child opens the
				// crashed directory itself.
				l := ltOpen(t, ltCopyDir(t, dir), killOptions(mode))
				leo := l.LatestOffset()
				require.GreaterOrEqual(t, leo, synced, "round %d: everything synced survives", round)
				got := ltReadAll(t, l)
				all := killAllRecords(leo, mode)
				if mode == "append" {
					require.Equal(t, all, got, "round %d", round)
				} else {
					want := map[int64]ltRec{}
					for _, r := range all {
						want[r.Offset] = r
					}
					latest := map[string]ltRec{}
					for _, r := range all {
						latest[r.Key] = r
					}
					prev := int64(-1)
					for _, r := range got {
						require.Greater(t, r.Offset, prev)
						prev = r.Offset
						require.Equal(t, want[r.Offset], r, "round %d", round)
					}
					for _, r := range latest {
						require.Contains(t, got, r, "round %d: the latest record of each key survives", round)
					}
				}
				require.NoError(t, l.Close())
				t.Logf("round %d: killed after %d syncs, log end offset %d (synced %d), %d records", round, kill, leo, synced, len(got))
			}
		})
	}
}
