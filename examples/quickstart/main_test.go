package main

import (
	"bytes"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestQuickstart runs the quickstart, smaller, and checks its report.
func TestQuickstart(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(t.Context(), []string{"-records", "6000", "-batch", "500"}, &out))
	report := out.String()
	t.Log("\n" + report)
	for _, re := range []string{
		`(?m)^diskless quickstart: 6000 records of 100 bytes into 6 partitions, over file://`,
		`(?m)^produced  6000 records \([0-9.]+ MB\) in .*: [0-9.]+ MB/s, [0-9]+ records/s$`,
		`(?m)^consumed  6000 records, every one checked, in `,
		`(?m)^produce latency  p50 [0-9]+ms  p90 [0-9]+ms  p99 [0-9]+ms  p99.9 [0-9]+ms  max [0-9]+ms$`,
		`(?m)^objects   [1-9][0-9]* WAL objects, [1-9][0-9]* PUTs in all \([0-9]+ GETs\), 12 batch coordinates committed$`,
		`(?m)^cache     hit rate [0-9.]+%$`,
		`(?m)^cost      at [0-9.]+ MB/s for a month: classic 3-replica cross-zone replication [0-9]+ USD; diskless on S3 [0-9]+ USD`,
	} {
		require.Regexp(t, regexp.MustCompile(re), report)
	}
	require.Error(t, run(t.Context(), []string{"-records", "0"}, &out))
}
