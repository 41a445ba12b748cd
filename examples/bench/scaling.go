package main

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// scalingRow is one partition count of wal's PUT scaling simulation.
type scalingRow struct {
	Partitions              int     `json:"partitions"`
	ObjectsPerS             float64 `json:"objects_per_s"`
	USDPerMonth             float64 `json:"usd_per_month"`
	PerPartitionObjectsPerS float64 `json:"per_partition_objects_per_s"`
	PerPartitionUSDPerMonth float64 `json:"per_partition_usd_per_month"`
}

// scalingCommand runs wal's simulation of PUTs against partition count
// (wal/puts_test.go: 50 MB/s of 1 KiB records from ten producers into a
// Buffer with the default options, on a fake clock), rather than a copy
// of it.
var scalingCommand = []string{"go", "test", "-run", "^$", "-bench", "PUTScaling", "-benchtime", "1x", "github.com/diskless-go/diskless/wal"}

// putScaling runs scalingCommand and parses its metrics.
func putScaling(ctx context.Context) ([]scalingRow, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, scalingCommand[0], scalingCommand[1:]...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s: %w\n%s", strings.Join(scalingCommand, " "), err, out)
	}
	return parseScaling(string(out))
}

// parseScaling reads the lines of BenchmarkPUTScaling/partitions=N.
func parseScaling(out string) ([]scalingRow, error) {
	var rows []scalingRow
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || !strings.HasPrefix(f[0], "BenchmarkPUTScaling/partitions=") {
			continue
		}
		name := strings.TrimPrefix(f[0], "BenchmarkPUTScaling/partitions=")
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			name = name[:i] // the GOMAXPROCS suffix
		}
		n, err := strconv.Atoi(name)
		if err != nil {
			return nil, fmt.Errorf("PUT scaling: bad line %q", sc.Text())
		}
		row := scalingRow{Partitions: n}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			switch f[i+1] {
			case "objects/s":
				row.ObjectsPerS = v
			case "USD/month":
				row.USDPerMonth = v
			case "per-partition-objects/s":
				row.PerPartitionObjectsPerS = v
			case "per-partition-USD/month":
				row.PerPartitionUSDPerMonth = v
			}
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("PUT scaling: no BenchmarkPUTScaling lines in:\n%s", out)
	}
	return rows, nil
}
