package main

import (
	"github.com/diskless-go/diskless/internal/histogram"

	"bufio"
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestTinyRun runs S1 for a second in every mode and acks with no
// injected latency, and checks the JSON lines and the report files.
func TestTinyRun(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{
		"-scenario", "S1", "-duration", "1s", "-warmup", "200ms", "-profile", "none",
		"-linger", "50ms", "-json", "-out", dir, "-scaling=false",
	}, &stdout, &stderr)
	require.NoError(t, err, stderr.String())

	required := []string{"scenario", "mode", "acks", "profile", "msgs_per_s", "mb_per_s", "p50_ms", "p90_ms", "p99_ms", "p999_ms",
		"max_ms", "buffer_ms", "upload_ms", "commit_ms", "floor_ms", "puts", "gets", "lists", "usd_per_month"}
	seen := map[string]bool{}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), sc.Text())
		for _, k := range required {
			require.Contains(t, m, k, "field %s", k)
		}
		mode, acks := m["mode"].(string), m["acks"].(string)
		seen[mode+"/"+acks] = true
		require.Equal(t, "S1", m["scenario"])
		require.Equal(t, "none", m["profile"])
		require.Contains(t, []string{"0", "1", "all"}, acks)
		require.Greater(t, m["msgs_per_s"].(float64), 0.0, sc.Text())
		require.Greater(t, m["mb_per_s"].(float64), 0.0)
		require.Zero(t, m["errors"].(float64), sc.Text())
		q := []float64{m["p50_ms"].(float64), m["p90_ms"].(float64), m["p99_ms"].(float64), m["p999_ms"].(float64), m["max_ms"].(float64)}
		require.Greater(t, q[0], 0.0)
		for i := 1; i < len(q); i++ {
			require.LessOrEqual(t, q[i-1], q[i], "percentiles in order: %v", q)
		}
		require.Greater(t, m["usd_per_month"].(float64), 0.0)
		if mode == "diskless" {
			require.Greater(t, m["puts"].(float64), 0.0)
			require.Greater(t, m["floor_ms"].(float64), 0.0)
			require.Equal(t, "bucket", m["metadata"])
			if acks != "0" {
				require.Greater(t, m["commit_ms"].(float64), 0.0)
				require.GreaterOrEqual(t, m["p50_ms"].(float64), 25.0, "acks %s waits for the object to close (linger 50ms)", acks)
			}
		} else {
			require.Equal(t, "classic", mode)
			require.Zero(t, m["puts"].(float64))
		}
	}
	require.NoError(t, sc.Err())
	require.Len(t, seen, 6, "every mode and acks: %v", seen)

	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	require.NoError(t, err)
	for _, want := range []string{"### S1: one partition, one producer", "## Target: acks=all p50 at most 1.15", "latency.svg", "## Cost model", "Machine:"} {
		require.Contains(t, string(md), want)
	}
	svg, err := os.ReadFile(filepath.Join(dir, "latency.svg"))
	require.NoError(t, err)
	dec := xml.NewDecoder(bytes.NewReader(svg))
	lines := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "the chart is well-formed XML")
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			lines++
		}
	}
	require.Equal(t, 6, lines, "one line per mode and acks")
	require.Contains(t, stderr.String(), "[S1 diskless/bucket acks=all]", "progress on stderr")
}

// TestTinyTargets runs S2 acks=all for a second with the metadata log in a
// bucket of its own: a closed-loop and an open-loop row, PUTs counted in
// both buckets, and the targets table.
func TestTinyTargets(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{
		"-scenario", "S2", "-acks", "all", "-modes", "diskless", "-duration", "1s", "-warmup", "200ms",
		"-profile", "none", "-metadata-profile", "none", "-linger", "20ms", "-open-rate", "200", "-json", "-out", dir, "-scaling=false",
	}, &stdout, &stderr)
	require.NoError(t, err, stderr.String())
	var rows []map[string]any
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), sc.Text())
		rows = append(rows, m)
	}
	require.Len(t, rows, 2, "closed loop, then open loop")
	require.Equal(t, "closed", rows[0]["loop"])
	require.Equal(t, "open", rows[1]["loop"])
	require.Equal(t, true, rows[1]["open_loop_row"])
	require.Equal(t, 200.0, rows[1]["rate"])
	for _, m := range rows {
		require.Equal(t, "none", m["metadata_profile"])
		require.Greater(t, m["meta_bucket_puts"].(float64), 0.0, "the log's PUTs, in its own bucket")
		require.Greater(t, m["puts"].(float64), m["meta_bucket_puts"].(float64), "and the WAL objects'")
		require.Greater(t, m["puts_per_s"].(float64), 0.0)
		require.Contains(t, m, "hedges")
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	require.NoError(t, err)
	for _, want := range []string{"## Targets: S2, acks=all, open loop", "| open, 200 req/s |", "bucket of its own, none", "PUTs/s"} {
		require.Contains(t, string(md), want)
	}
}

func TestParse(t *testing.T) {
	o, err := parse([]string{"-scenario", "s2,S5", "-acks", "all", "-buffer", "4MiB", "-batch", "1MiB", "-metadata", "both"}, io.Discard)
	require.NoError(t, err)
	require.Len(t, o.scenarios, 2)
	require.Equal(t, []acksLevel{-1}, o.acks)
	require.Equal(t, int64(4<<20), o.buffer)
	require.Equal(t, 1<<20, o.batch)
	require.Equal(t, []string{"bucket", "memory"}, o.metadata)
	require.Equal(t, 3*20*time.Second, o.runDuration(scenarios[5]))
	o.long = true
	require.Equal(t, 30*time.Minute, o.runDuration(scenarios[5]))
	for _, bad := range [][]string{
		{"-scenario", "S7"}, {"-acks", "2"}, {"-profile", "gcs"}, {"-buffer", "lots"}, {"-metadata", "disk"}, {"-inflight", "0"}, {"extra"},
		{"-metadata-profile", "gcs"}, {"-open-rate", "-1"}, {"-objects-per-second", "-2"},
	} {
		_, err := parse(bad, io.Discard)
		require.Error(t, err, "%v", bad)
	}
	v, err := parseBytes("x", "10MB")
	require.NoError(t, err)
	require.Equal(t, int64(10_000_000), v)
}

func TestHist(t *testing.T) {
	var h histogram.Histogram
	for i := 1; i <= 100_000; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	s := summarize(&h)
	require.Equal(t, int64(100_000), s.Count)
	for _, c := range []struct{ got, want float64 }{{s.P50, 50}, {s.P90, 90}, {s.P99, 99}, {s.P999, 99.9}, {s.Max, 100}} {
		require.InDelta(t, c.want, c.got, c.want*0.008)
	}
}

// TestSamples: the exact quantiles are the recorded values at the
// histogram's ranks, where the histogram's are only within its bucket; a
// tally that kept too many, or none, gives way to the histogram.
func TestSamples(t *testing.T) {
	var s samples
	_, ok := s.summary()
	require.False(t, ok)
	for i := 100_000; i >= 1; i-- { // out of order
		s.add(time.Duration(i) * time.Microsecond)
	}
	got, ok := s.summary()
	require.True(t, ok)
	require.Equal(t, summary{Count: 100_000, Mean: 50.0005, P50: 50, P90: 90, P99: 99, P999: 99.9, Max: 100}, got)
	s.over = true
	_, ok = s.summary()
	require.False(t, ok)
}

func TestParseScaling(t *testing.T) {
	out := `goos: linux
BenchmarkPUTScaling/partitions=1-2         	       1	  17052727 ns/op	        76.46 USD/month	         5.900 objects/s	        76.46 per-partition-USD/month	         5.900 per-partition-objects/s
BenchmarkPUTScaling/partitions=10000-2     	       1	 292798300 ns/op	        81.65 USD/month	         6.300 objects/s	    440180 per-partition-USD/month	     33964 per-partition-objects/s
PASS`
	rows, err := parseScaling(out)
	require.NoError(t, err)
	require.Equal(t, []scalingRow{
		{Partitions: 1, ObjectsPerS: 5.9, USDPerMonth: 76.46, PerPartitionObjectsPerS: 5.9, PerPartitionUSDPerMonth: 76.46},
		{Partitions: 10000, ObjectsPerS: 6.3, USDPerMonth: 81.65, PerPartitionObjectsPerS: 33964, PerPartitionUSDPerMonth: 440180},
	}, rows)
	_, err = parseScaling("FAIL")
	require.Error(t, err)
}

// TestCost checks the cost model against hand-computed figures.
func TestCost(t *testing.T) {
	c := &result{Mode: "classic", MBPerS: 100}
	c.cost()
	gib := 100e6 * secondsPerMonth / (1 << 30)
	require.InDelta(t, gib*2*0.02, c.Cost.Replication, 1e-6)
	require.InDelta(t, 100e6*7*86400/1e9*3*1.4*0.08, c.Cost.BlockStorage, 1e-6)
	// 100 MB/s is about 241,000 GiB a month: replication alone about 9,650 USD (notes §1: ~10,600 for 518 TB).
	require.InDelta(t, 9656, c.Cost.Replication, 10)

	d := &result{Mode: "diskless", MBPerS: 100, DurationS: 10, Puts: 40, Msgs: 1, WALPuts: 40, ObjectsPerS: 4, ObjectMB: 25}
	d.cost()
	require.InDelta(t, 4*secondsPerMonth*0.005/1000, d.Cost.Puts, 1e-6)
	require.InDelta(t, 1.0, d.Cost.CompressionRatio, 1e-9)
	require.False(t, math.IsNaN(d.USDPerMonth))
	require.Zero(t, d.Cost.Replication)
	require.True(t, strings.Contains(thousands(1234567), "1,234,567"))
}
