package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/diskless-go/diskless/faultbucket"
)

// targetRatio is the target (BENCHMARKS.md, "Target: acks=all p50 at most
// 1.15 × floor"): produce p50 at most this many times
// floor_ms with acks=all under s3-standard and the Broker's defaults.
const targetRatio = 1.15

// report is everything a run of the command measured.
type report struct {
	opts       *options
	machine    machine
	started    time.Time
	finished   time.Time
	results    []*result
	scaling    []scalingRow
	scalingErr error
}

// write writes report.md and latency.svg into dir.
func (r *report) write(dir string) error {
	if err := os.WriteFile(filepath.Join(dir, "latency.svg"), chartSVG(r.results), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "report.md"), r.markdown(), 0o644)
}

func (r *report) markdown() []byte {
	var b bytes.Buffer
	o := r.opts
	m := r.machine
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# diskless: produce latency and cost by scenario\n\n")
	p("Run %s, %v.\n\n", r.started.Format("2006-01-02 15:04 MST"), r.finished.Sub(r.started).Round(time.Second))
	p("```\ngo run ./examples/bench %s\n```\n\n", strings.Join(o.args, " "))
	if rev := revision(); rev != "" {
		p("Code: %s.\n\n", rev)
	}
	p("Machine: %q, %d cores (GOMAXPROCS %d), %.0f GiB, %s/%s, %s. Load average (1, 5, 15 min) %.2f %.2f %.2f at the start, %.2f %.2f %.2f at the end; each row gives the 1-minute load at its start and end.\n\n",
		m.CPU, m.Cores, m.GOMAXPROCS, m.MemoryGiB, m.OS, m.Arch, m.GoVersion,
		m.LoadStart[0], m.LoadStart[1], m.LoadStart[2], m.LoadEnd[0], m.LoadEnd[1], m.LoadEnd[2])

	r.settings(&b)
	r.targets(&b)
	r.target(&b)

	p("## Results\n\n")
	p("Latencies in ms, from the producer's call to its answer. `buffer`, `upload`, `commit`: p50 of each stage (Broker.Stats); `PUT`: p50 of the WAL-object PUTs at the store; `floor` = linger/2 + PUT + commit; `×floor` = p50 / floor; `PUTs/s`: every PUT of the window (WAL objects, hedges, metadata-log entries) per second; `hedges`: WAL uploads that sent a second PUT. USD/month: the cost model below at the rate measured.\n\n")
	for _, sc := range scenarios {
		rows := r.rows(sc.Name)
		if len(rows) == 0 {
			continue
		}
		p("### %s: %s\n\n", sc.Name, sc.Title)
		p("| mode | acks | msg/s | MB/s | p50 | p90 | p99 | p99.9 | max | buffer | upload | commit | PUT | floor | ×floor | PUTs/GETs/LISTs | PUTs/s | hedges | objects/s | USD/month | errors | load |\n")
		p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, x := range rows {
			p("| %s | %s | %s | %.2f | %s | %s | %s | %s | %s |", x.modeLabel(), x.Acks, thousands(x.MsgsPerS), x.MBPerS,
				num(x.P50Ms), num(x.P90Ms), num(x.P99Ms), num(x.P999Ms), num(x.MaxMs))
			if x.Mode == "diskless" {
				p(" %s | %s | %s | %s | %s | %.2f | %d/%d/%d | %.2f | %d | %.2f |", num(x.BufferMs), num(x.UploadMs), num(x.CommitMs), num(x.PutMs), num(x.FloorMs), x.FloorRatio,
					x.Puts, x.Gets, x.Lists, x.PutsPerS, x.Hedges, x.ObjectsPerS)
			} else {
				p(" | | | | | | | | | |")
			}
			p(" %s | %d | %.1f→%.1f |\n", thousands(x.USDPerMonth), x.Errors, x.LoadStart, x.LoadEnd)
		}
		p("\n")
		for _, x := range rows {
			if x.Mode == "diskless" && x.Acks == "all" && x.Metadata != "memory" && x.MBPerS > 0 {
				cl := &result{Mode: "classic", MBPerS: x.MBPerS}
				cl.cost()
				p("- Cost at the same ingress (%.2f MB/s, diskless acks=all's): diskless %s USD/month (PUTs %s, GETs %s, storage %s), classic %s USD/month (cross-zone %s, block storage %s).\n",
					x.MBPerS, thousands(x.USDPerMonth), thousands(x.Cost.Puts), thousands(x.Cost.Gets), thousands(x.Cost.ObjectStorage),
					thousands(cl.USDPerMonth), thousands(cl.Cost.Replication+cl.Cost.ProducerXZone+cl.Cost.ConsumerXZone), thousands(cl.Cost.BlockStorage))
			}
		}
		for _, x := range rows {
			name := x.modeLabel() + " acks=" + x.Acks
			if x.Band != "" {
				p("- %s: p50 %s ms is **%s** the expected band %s to %s ms.\n", name, num(x.P50Ms), x.Band, num(x.BandLowMs), num(x.BandHighMs))
			}
			if x.TailDivergent {
				p("- %s: **p99/p50 = %.1f, above 5** (tail divergence). Likely: %s.\n", name, x.TailRatio, strings.Join(x.TailCauses, "; "))
			}
			if len(x.FirstErrors) > 0 {
				p("- %s: %d errors, e.g. %q.\n", name, x.Errors, x.FirstErrors[0])
			}
		}
		p("\n")
	}
	p("## Latency percentiles\n\n![latency percentiles per scenario](latency.svg)\n\n")
	r.scalingTable(&b)
	r.costNotes(&b)
	return b.Bytes()
}

// rows returns a scenario's results, diskless first.
func (r *report) rows(name string) []*result {
	var out []*result
	for _, mode := range []string{"diskless", "classic"} {
		for _, x := range r.results {
			if x.Scenario == name && x.Mode == mode {
				out = append(out, x)
			}
		}
	}
	return out
}

func (r *report) settings(b *bytes.Buffer) {
	o := r.opts
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	prof, _ := faultbucket.NamedProfile(o.profileName)
	p("## Settings\n\n")
	p("- Object store: mem:// wrapped with faultbucket, profile `%s`", prof.Name)
	if d := describeLatencies(prof); d != "" {
		p(" (%s; seed %d)", d, o.seed)
	}
	p(". S4 caps uploads at %.0f MB/s, shared by every PUT in flight.", float64(o.slowUpload)/1e6)
	if o.metadataProfile != "" {
		mp, _ := faultbucket.NamedProfile(o.metadataProfile)
		p(" The metadata log and snapshots are in a bucket of their own (Config.MetadataBucket), mem:// with profile `%s` (%s).", mp.Name, describeLatencies(mp))
	}
	p("\n")
	budget := "1/linger"
	if o.objectsPerSecond > 0 {
		budget = fmt.Sprintf("%g", o.objectsPerSecond)
	}
	quantile := "p80"
	if o.hedgeQuantile > 0 {
		quantile = fmt.Sprintf("quantile %g", o.hedgeQuantile)
	}
	hedge := fmt.Sprintf("HedgeMaxDelay 2 s (the %s of recent PUTs, at least 20 ms)", quantile)
	switch {
	case o.hedgeMax < 0:
		hedge = "no hedged uploads"
	case o.hedgeMax > 0:
		hedge = fmt.Sprintf("HedgeMaxDelay %v (the %s of recent PUTs, at least 20 ms)", o.hedgeMax, quantile)
	}
	p("- Broker: Linger %v, ObjectsPerSecond %s, BufferMaxBytes %s, MaxBufferedBytes %s, UploadConcurrency %s, %s, MetadataPutsInFlight %s, Commit %s (%s); metadata log: %s. RetentionInterval and DeletionGrace 15 s and retention.bytes 64 MiB a partition, so that mem:// stays bounded in long runs (off the produce path, but each enforcement and deletion is a metadata-log entry).\n",
		o.effectiveLinger(), budget, orDefault(o.buffer, "8 MiB"), orDefault(o.maxBuffered, "64 MiB"), orDefaultInt(o.uploadConcurrency, "4"), hedge,
		orDefaultInt(o.metaInFlight, "4"), o.commit, defaultsNote(o), strings.Join(o.metadata, " and "))
	loop := "closed loop; per producer and partition up to %d requests in flight, each one batch of %s (%s compression) of the scenario's messages, sent again as soon as it is answered"
	if o.rate > 0 {
		loop = fmt.Sprintf("open loop, %g requests per second in all, each in-flight slot at a fixed interval from a random phase (a late answer delays its slot's next send); ", o.rate) +
			"per producer and partition %d slots, each request one batch of %s (%s compression) of the scenario's messages"
	}
	p("- Producers: "+loop+". acks=all producers are idempotent, each in-flight slot its own producer id (Produce returns only at commit, so a caller cannot order the Adds of one session's concurrent requests); acks 0 and 1 are not idempotent, as Kafka requires.",
		o.inflight, humanBytes(int64(o.batch)), o.codec)
	if o.rate == 0 && o.openRate > 0 {
		p(" S2's diskless acks=all run is repeated open loop at %g requests per second (-open-rate), for the targets table.", o.openRate)
	}
	p("\n")
	p("- Classic baseline: the same producers against a leader with no followers, one segment.Log per partition on the local disk: Validate, queue for the partition, check the sequence, SetBaseOffset, Append, no fsync (Kafka's default). acks=1 and acks=all are the same thing for it.\n")
	p("- Each run: a fresh Broker (or leader), %v of warm-up, then %v measured (S6: %v); a request counts if answered in the window. Latency quantiles exact (every answered request kept; from a histogram within 0.8%% past 4 Mi of them); stage quantiles from Broker.Stats (also within 0.8%%, warm-up included).\n\n",
		o.warmup, o.duration, o.runDuration(scenarios[5]))
	p("Expected band (docs/architecture.md, the latency probe): p50 300 to 900 ms with s3-standard and a 250 ms linger, scaled for another profile or linger by linger/2 + 2 PUT p50 over 325 ms. A p99/p50 above 5 is flagged with its likely causes, read from the stages' own p99/p50.\n\n")
}

func defaultsNote(o *options) string {
	if o.linger == 0 && o.buffer == 0 && o.maxBuffered == 0 && o.uploadConcurrency == 0 && o.objectsPerSecond == 0 && o.hedgeMax == 0 && o.hedgeQuantile == 0 && o.metaInFlight == 0 {
		return "the Broker's defaults"
	}
	return "not the defaults"
}

func (r *report) target(b *bytes.Buffer) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	var rows []*result
	for _, x := range r.results {
		if x.Mode == "diskless" && x.Acks == "all" {
			rows = append(rows, x)
		}
	}
	if len(rows) == 0 {
		return
	}
	p("## Target: acks=all p50 at most %.2f × floor\n\n", targetRatio)
	p("floor_ms = linger/2 + PUT p50 + commit p50 of the run: the physical floor with no queueing. Applies to s3-standard with the Broker's defaults (%s here).\n\n", r.opts.profileName)
	p("| scenario | metadata log | p50 | linger/2 | PUT p50 | commit p50 | floor | p50/floor | met | buffer mean | upload mean | commit mean | other mean |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, x := range rows {
		if x.OpenLoopRow {
			continue // in the targets table
		}
		met := "no"
		if x.FloorRatio <= targetRatio {
			met = "yes"
		}
		p("| %s | %s | %s | %s | %s | %s | %s | **%.2f** | %s | %s | %s | %s | %s |\n", x.Scenario, x.Metadata, num(x.P50Ms), num(x.LingerMs/2), num(x.PutMs), num(x.CommitMs), num(x.FloorMs), x.FloorRatio, met,
			num(x.BufferMeanMs), num(x.UploadMeanMs), num(x.CommitMeanMs), num(x.OtherMeanMs))
	}
	p("\nThe means add up to the produce mean: `buffer` is the wait for the object to close (an object closes as soon as the PUT budget, ObjectsPerSecond, allows and an upload slot is free, after a pause in arriving requests, at most linger after its first request: closed-loop producers answered together come back together, and wait only for the budget's next object), `upload` the object's encoding and PUT (hedged), `commit` the coordinator's commit (with the bucket log, a PUT of the log entry), `other` the wait for the objects before it to be answered (commits are submitted without waiting for each other, and answered in order) and the answer. The floor's linger/2 is the wait of the fixed schedule objects used to close on; under the budget a closed-loop request often waits less, so a ratio below 1 is possible.\n\n")
}

func (r *report) scalingTable(b *bytes.Buffer) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	if !r.opts.scaling {
		return
	}
	p("## PUTs per second against partition count\n\n")
	if r.scalingErr != nil {
		p("Not measured: %v\n\n", r.scalingErr)
		return
	}
	p("wal's simulation (wal/puts_test.go): 50 MB/s of 1 KiB records from ten producers, spread at random over N partitions, into a Buffer with the defaults (8 MiB, 250 ms) on a fake clock, one broker; \"per partition\" is what one object per partition per flush would need. S3 Standard PUT at 0.005 USD per 1,000, 30-day month.\n\n```\n%s\n```\n\n", strings.Join(scalingCommand, " "))
	p("| partitions | objects/s (packed) | PUT USD/month (packed) | objects/s (per partition) | PUT USD/month (per partition) |\n|---|---|---|---|---|\n")
	for _, s := range r.scaling {
		p("| %s | %.1f | %s | %s | %s |\n", thousands(float64(s.Partitions)), s.ObjectsPerS, thousands(s.USDPerMonth), thousands(s.PerPartitionObjectsPerS), thousands(s.PerPartitionUSDPerMonth))
	}
	p("\n")
}

func (r *report) costNotes(b *bytes.Buffer) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## Cost model (docs/architecture.md, the cost model)\n\n")
	p("Per 30-day month at the ingress each run measured, retention %d days, one consumer group reading everything once.\n\n", retentionDays)
	p("- Classic: replication factor %d over %d zones: replication I×(R−1)×%.2f USD/GiB; producers cross zones 2/3 of the time, I×(1−1/Z)×%.2f; consumers without rack affinity, I×G×(1−1/Z)×%.2f; block storage retained×R×%.1f headroom×%.2f USD/GB-month.\n",
		replication, zones, crossZonePerGiB, crossZonePerGiB, crossZonePerGiB, blockHeadroom, blockPerGB)
	p("- Diskless: no cross-zone data (gateways keep producers in their zone); the PUTs measured (WAL objects, their hedges and, with the bucket metadata log, its entries) at %.3f USD per 1,000; GETs at %.4f per 1,000: those measured plus %.0f%% of consumer reads going cold at %d MiB per ranged GET (the benchmark itself does not consume); object storage retained×(bytes PUT / bytes produced)×%.3f USD/GB-month; with the in-memory metadata log, %.1f%% of ingress replicated classically instead of its PUTs.\n",
		s3Standard.PutPer1000, s3Standard.GetPer1000, coldShare*100, getBytes>>20, s3Standard.PerGBMonth, metadataShare*100)
	p("- A store with the `s3-express` profile (the WAL objects' or the metadata log's own) is priced as S3 Express One Zone: %.2f USD/GB-month, PUT %.5f and GET %.5f per 1,000, %.4f per GB uploaded and %.4f per GB read.\n",
		s3Express.PerGBMonth, s3Express.PutPer1000, s3Express.GetPer1000, s3Express.UploadPerGB, s3Express.DownloadPerGB)
	p("- One broker: PUTs scale with brokers and flushes, not with partitions (table above).\n\n")
}

func orDefault(v int64, def string) string {
	if v == 0 {
		return def
	}
	return humanBytes(v)
}

func orDefaultInt(v int, def string) string {
	if v == 0 {
		return def
	}
	return fmt.Sprint(v)
}

func humanBytes(v int64) string {
	switch {
	case v >= 1<<20 && v%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", v>>20)
	case v >= 1<<10 && v%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", v>>10)
	}
	return fmt.Sprintf("%d B", v)
}

// num formats milliseconds for a table.
func num(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v < 0.1:
		return fmt.Sprintf("%.3f", v)
	case v < 10:
		return fmt.Sprintf("%.2f", v)
	case v < 100:
		return fmt.Sprintf("%.1f", v)
	}
	return thousands(v)
}

// thousands formats a number with a comma every three digits.
func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// revision returns the VCS revision the binary was built from, if known.
func revision() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = " (with uncommitted changes)"
			}
		}
	}
	if rev == "" {
		return ""
	}
	return "commit " + rev[:min(12, len(rev))] + modified
}

// describeLatencies lists a profile's injected latencies.
func describeLatencies(prof faultbucket.Profile) string {
	var lat []string
	for op := range faultbucket.NumOps {
		if l := prof.Ops[op].Latency; l != nil {
			d := fmt.Sprintf("%v %s", faultbucket.Op(op), l)
			if m := prof.Ops[op].PerMiB; m != nil {
				d += fmt.Sprintf(" + %s per MiB", m)
			}
			lat = append(lat, d)
		}
	}
	return strings.Join(lat, ", ")
}

// modeLabel names a row's mode: the metadata log, its store, the loop.
func (x *result) modeLabel() string {
	label := x.Mode
	if x.Metadata != "" {
		label += " (" + x.Metadata + " log"
		if x.MetadataProfile != "" {
			label += " on " + x.MetadataProfile
		}
		label += ")"
	}
	if x.Loop == "open" {
		label += fmt.Sprintf(", open loop %g/s", x.Rate)
	}
	return label
}

// issueTarget is a row of the produce latency targets (BENCHMARKS.md,
// "Produce latency, PUTs and CPU against the published figures"): S2,
// acks=all, open loop.
type issueTarget struct {
	what      string
	wal, meta string // the profiles of the WAL objects' store and the log's ("" the same)
	linger    float64
	p50, p99  float64
}

var issueTargets = []issueTarget{
	{"bucket log on s3-standard (everything on S3 Standard)", "s3-standard", "", 250, 280, 550},
	{"separate metadata bucket, s3-express profile", "s3-standard", "s3-express", 100, 200, 400},
	{"everything on s3-express", "s3-express", "", 20, 50, 100},
}

// targetOf returns the produce latency target a run measures, if any.
func targetOf(x *result) *issueTarget {
	if x.Scenario != "S2" || x.Mode != "diskless" || x.Acks != "all" || x.Metadata != "bucket" {
		return nil
	}
	for i, t := range issueTargets {
		if strings.HasPrefix(x.Profile, t.wal) && !strings.Contains(x.Profile, "+") && x.MetadataProfile == t.meta && x.LingerMs == t.linger {
			return &issueTargets[i]
		}
	}
	return nil
}

// targets writes the table of the produce latency targets: S2 acks=all, open loop
// (the target row) beside closed loop.
func (r *report) targets(b *bytes.Buffer) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	var rows []*result
	for _, x := range r.results {
		if x.Scenario == "S2" && x.Mode == "diskless" && x.Acks == "all" {
			rows = append(rows, x)
		}
	}
	if len(rows) == 0 {
		return
	}
	p("## Targets: S2, acks=all, open loop beside closed loop\n\n")
	p("The produce latency targets are for the open-loop row (a steady arrival rate, the latency probe of docs/architecture.md); the closed-loop row is the acks study's. `PUTs/s` counts every PUT a broker makes (WAL objects, hedges, metadata-log entries).\n\n")
	p("| loop | WAL store | metadata log | linger | p50 | p90 | p99 | PUTs/s | hedges | objects/s | target p50 / p99 | met |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, x := range rows {
		loop := "closed"
		if x.Loop == "open" {
			loop = fmt.Sprintf("open, %g req/s", x.Rate)
		}
		meta := x.Metadata
		switch {
		case x.Metadata == "bucket" && x.MetadataProfile != "":
			meta = "bucket of its own, " + x.MetadataProfile
		case x.Metadata == "bucket":
			meta = "bucket, the same"
		}
		tgt, met := "", ""
		if t := targetOf(x); t != nil {
			tgt = fmt.Sprintf("%s / %s", num(t.p50), num(t.p99))
			if x.Loop == "open" {
				met = "no"
				if x.P50Ms <= t.p50 && x.P99Ms <= t.p99 {
					met = "yes"
				}
			} else {
				met = "(closed loop)"
			}
		}
		p("| %s | %s | %s | %s ms | %s | %s | %s | %.2f | %d | %.2f | %s | %s |\n", loop, x.Profile, meta, num(x.LingerMs),
			num(x.P50Ms), num(x.P90Ms), num(x.P99Ms), x.PutsPerS, x.Hedges, x.ObjectsPerS, tgt, met)
	}
	p("\n")
}
