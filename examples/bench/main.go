// Command bench answers "how fast, and at what cost" for diskless topics:
// it replays the scenarios of a well-known acks study of classic Kafka
// (docs/architecture.md, "The acks study") against a diskless Broker over an object store
// with injected latency (faultbucket), and against a classic
// leader appending to a local segment.Log, in the same run, with acks 0,
// 1 and all. For each scenario, mode and acks it measures throughput, the
// produce latency distribution, where the time goes (buffer wait, upload,
// commit), the object-store calls and the monthly cost; it writes a
// markdown report, an SVG chart of the latency percentiles, and with
// -json one JSON object per line on standard output.
//
//	go run ./examples/bench                                  # every scenario, 20 s each (S6: 60 s)
//	go run ./examples/bench -scenario S2 -profile s3-standard -duration 20s -json
//	go run ./examples/bench -scenario S6 -long               # S6 for 30 minutes
//	go run ./examples/bench -scenario S2 -acks all -modes diskless -metadata-profile s3-express -linger 100ms
//
// The S2 diskless acks=all run is repeated open loop (-open-rate, 100
// requests per second) for the targets table; -metadata-profile gives the
// metadata log a bucket of its own with its own latency (the Broker's
// Config.MetadataBucket). PUTs per second, hedges included, are reported
// beside every latency row. The produce latency quantiles are exact, of
// every request answered in the measured window; the stages' come from the
// Broker's Stats, whose histogram is within 0.8%.
//
// Producers are closed loop, as in the study: each producer has, for each
// partition, up to -inflight requests in flight (Kafka's
// max.in.flight.requests.per.connection, 5 for idempotent producers), each
// a batch of -batch bytes (batch.size) of -message-size messages, sent
// again as soon as it is answered. With acks=all they are idempotent
// (each in-flight slot its own producer id, so that sequences stay in
// order); with acks 0 and 1 they are not (Kafka allows idempotence only
// with acks=all).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/faultbucket"
	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/wal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	etcdEndpoints     string
	scenarios         []scenario
	duration          time.Duration
	warmup            time.Duration
	long              bool
	profileName       string
	metadataProfile   string
	partitions        int
	producers         int
	messageSize       int
	acks              []acksLevel
	linger            time.Duration
	buffer            int64
	maxBuffered       int64
	uploadConcurrency int
	objectsPerSecond  float64
	metaInFlight      int
	commit            string
	hedgeMax          time.Duration
	hedgeQuantile     float64
	inflight          int
	rate              float64
	openRate          float64
	batch             int
	codec             kbatch.Codec
	slowUpload        int64
	metadata          []string
	modes             []string
	jsonOut           bool
	out               string
	seed              uint64
	scaling           bool
	cpuProfile        string
	args              []string
}

func parse(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &options{args: args}
	var scen, acks, buffer, maxBuffered, batch, slow, codec, metadata, modes string
	fs.StringVar(&scen, "scenario", "all", "scenarios to run: S1 to S6, a comma list, or all")
	fs.DurationVar(&o.duration, "duration", 20*time.Second, "measured time of each run (S6 runs three times as long)")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "time before the measured window of each run")
	fs.BoolVar(&o.long, "long", false, "run S6 for 30 minutes")
	fs.StringVar(&o.profileName, "profile", "s3-standard", "object-store profile: "+strings.Join(faultbucket.ProfileNames(), ", "))
	fs.StringVar(&o.metadataProfile, "metadata-profile", "", "with -metadata bucket, a bucket of its own for the metadata log and snapshots (Config.MetadataBucket) with this profile; \"\" keeps them in the WAL objects' bucket")
	fs.IntVar(&o.partitions, "partitions", 0, "partitions (0: the scenario's)")
	fs.IntVar(&o.producers, "producers", 0, "producers (0: the scenario's)")
	fs.IntVar(&o.messageSize, "message-size", 0, "bytes per message (0: the scenario's, 1 KiB or 10 KiB)")
	fs.StringVar(&acks, "acks", "0,1,all", "acks to run: 0, 1, all, or a comma list")
	fs.DurationVar(&o.linger, "linger", 0, "Broker Linger (0: the Broker's default, 250ms)")
	fs.StringVar(&buffer, "buffer", "0", "Broker BufferMaxBytes, e.g. 8MiB (0: the Broker's default)")
	fs.StringVar(&maxBuffered, "max-buffered", "0", "Broker MaxBufferedBytes (0: the Broker's default, 64 MiB)")
	fs.IntVar(&o.uploadConcurrency, "upload-concurrency", 0, "Broker UploadConcurrency (0: the Broker's default, 4)")
	fs.Float64Var(&o.objectsPerSecond, "objects-per-second", 0, "Broker ObjectsPerSecond, the PUT budget of WAL objects (0: the Broker's default, 1/linger)")
	fs.StringVar(&o.commit, "commit", "auto", "Broker Commit: auto (in parallel with the bucket log), series or parallel (docs/parallel-commit.md)")
	fs.IntVar(&o.metaInFlight, "metadata-puts-in-flight", 0, "Broker MetadataPutsInFlight, the bucket log's puts in flight at once (0: the Broker's default, 4; 1: one at a time)")
	fs.DurationVar(&o.hedgeMax, "hedge-max", 0, "Broker HedgeMaxDelay (0: the Broker's default, 2s; negative: no hedged uploads)")
	fs.Float64Var(&o.hedgeQuantile, "hedge-quantile", 0, "Broker HedgeQuantile: the quantile of recent PUT durations after which a WAL PUT is sent again (0: the Broker's default, 0.8)")
	fs.IntVar(&o.inflight, "inflight", 5, "requests in flight per producer and partition (max.in.flight)")
	fs.Float64Var(&o.rate, "rate", 0, "open loop: produce requests per second in all, each in-flight slot at a fixed interval (the latency probe of docs/architecture.md); 0 means closed loop")
	fs.Float64Var(&o.openRate, "open-rate", 100, "with closed loop (no -rate), S2 diskless acks=all runs again open loop at this many requests per second, for the target table; 0: not")
	fs.StringVar(&batch, "batch", "16KiB", "producer batch size (batch.size)")
	fs.StringVar(&codec, "codec", "none", "producer compression: none, gzip, snappy, lz4, zstd")
	fs.StringVar(&slow, "slow-upload", "10MB", "upload bandwidth of S4's slow object store, bytes per second")
	fs.StringVar(&metadata, "metadata", "bucket", "diskless metadata log: bucket (the default, each commit a PUT), memory, etcd (etcdlog.Log, fenced by an election, on a local diskless-etcd with its data on the local disk, or -etcd-endpoints), or both (bucket and memory)")
	fs.StringVar(&o.etcdEndpoints, "etcd-endpoints", "", "with -metadata etcd, a comma list of the etcd endpoints to use instead of starting diskless-etcd")
	fs.StringVar(&modes, "modes", "diskless,classic", "modes to run: diskless, classic, or both")
	fs.BoolVar(&o.jsonOut, "json", false, "print one JSON object per line on standard output for each run")
	fs.StringVar(&o.out, "out", "", "report folder (default: a new folder under the system's temporary folder)")
	fs.Uint64Var(&o.seed, "seed", 1, "random seed of the injected faults and the messages")
	fs.BoolVar(&o.scaling, "scaling", true, "add the PUT scaling table (runs wal's BenchmarkPUTScaling with go test)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if o.scenarios, err = selectScenarios(scen); err != nil {
		return nil, err
	}
	if o.acks, err = parseAcks(acks); err != nil {
		return nil, err
	}
	if o.buffer, err = parseBytes("-buffer", buffer); err != nil {
		return nil, err
	}
	if o.maxBuffered, err = parseBytes("-max-buffered", maxBuffered); err != nil {
		return nil, err
	}
	b, err := parseBytes("-batch", batch)
	if err != nil {
		return nil, err
	}
	o.batch = int(b)
	if o.slowUpload, err = parseBytes("-slow-upload", slow); err != nil {
		return nil, err
	}
	if o.codec, err = parseCodec(codec); err != nil {
		return nil, err
	}
	switch metadata {
	case "bucket", "memory", "etcd":
		o.metadata = []string{metadata}
	case "both":
		o.metadata = []string{"bucket", "memory"}
	default:
		return nil, fmt.Errorf("-metadata: %q is not bucket, memory, etcd or both", metadata)
	}
	for _, m := range strings.Split(modes, ",") {
		switch m = strings.TrimSpace(m); m {
		case "diskless", "classic":
			o.modes = append(o.modes, m)
		default:
			return nil, fmt.Errorf("-modes: %q is not diskless or classic", m)
		}
	}
	if _, err := faultbucket.NamedProfile(o.profileName); err != nil {
		return nil, err
	}
	if o.metadataProfile != "" {
		if _, err := faultbucket.NamedProfile(o.metadataProfile); err != nil {
			return nil, fmt.Errorf("-metadata-profile: %w", err)
		}
	}
	switch {
	case o.duration <= 0 || o.warmup < 0:
		return nil, errors.New("-duration must be positive and -warmup not negative")
	case o.partitions < 0 || o.producers < 0 || o.messageSize < 0 || o.inflight < 1 || o.batch < 1:
		return nil, errors.New("-partitions, -producers and -message-size may not be negative; -inflight and -batch must be positive")
	case commitModes[o.commit] == 0 && o.commit != "auto":
		return nil, fmt.Errorf("-commit %q is not auto, series or parallel", o.commit)
	case o.rate < 0 || o.openRate < 0 || o.objectsPerSecond < 0 || o.metaInFlight < 0:
		return nil, errors.New("-rate, -open-rate and -objects-per-second may not be negative")
	case o.slowUpload <= 0:
		return nil, errors.New("-slow-upload must be positive")
	}
	return o, nil
}

// parseBytes parses a size: 1048576, 16KiB, 8MiB, 10MB, 1GiB.
func parseBytes(flagName, s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%s: %q is not a size", flagName, s)
	}
	return int64(v * float64(mult)), nil
}

func parseCodec(s string) (kbatch.Codec, error) {
	for _, c := range kbatch.Codecs {
		if c.String() == s {
			return c, nil
		}
	}
	return 0, fmt.Errorf("-codec: %q is not none, gzip, snappy, lz4 or zstd", s)
}

// effectiveLinger is the Linger the Broker uses.
func (o *options) effectiveLinger() time.Duration {
	if o.linger > 0 {
		return o.linger
	}
	return wal.DefaultLinger
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parse(args, stderr)
	if err != nil {
		return err
	}
	if o.out == "" {
		if o.out, err = os.MkdirTemp("", "diskless-bench-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	rep := &report{opts: o, machine: describeMachine(), started: time.Now()}
	enc := json.NewEncoder(stdout)
	var runErr error
scenarios:
	for _, sc := range o.scenarios {
		for _, acks := range o.acks {
			for _, mode := range o.modes {
				metas := []string{""}
				if mode == "diskless" {
					metas = o.metadata
				}
				for _, meta := range metas {
					rates := []float64{o.rate}
					if o.rate == 0 && o.openRate > 0 && sc.Name == "S2" && mode == "diskless" && acks == -1 {
						rates = append(rates, o.openRate) // the target table's open-loop row
					}
					for i, rate := range rates {
						if ctx.Err() != nil {
							runErr = ctx.Err()
							break scenarios
						}
						res, err := runOne(ctx, o, sc, mode, meta, acks, rate, stderr)
						if err != nil {
							runErr = fmt.Errorf("%s %s acks=%v: %w", sc.Name, mode, acks, err)
							if res == nil {
								break scenarios
							}
						}
						res.OpenLoopRow = i > 0
						rep.results = append(rep.results, res)
						if o.jsonOut {
							if err := enc.Encode(res); err != nil {
								return err
							}
						}
					}
				}
			}
		}
	}
	if o.scaling && ctx.Err() == nil {
		fmt.Fprintln(stderr, "PUT scaling: go test -run '^$' -bench PUTScaling -benchtime 1x ./wal")
		rep.scaling, rep.scalingErr = putScaling(ctx)
		if rep.scalingErr != nil {
			fmt.Fprintln(stderr, "PUT scaling:", rep.scalingErr)
		}
	}
	rep.finished = time.Now()
	rep.machine.LoadEnd = loadAverage()
	if err := rep.write(o.out); err != nil {
		return errors.Join(runErr, err)
	}
	fmt.Fprintf(stderr, "report: %s\nchart:  %s\n", filepath.Join(o.out, "report.md"), filepath.Join(o.out, "latency.svg"))
	return runErr
}

// runOne runs one scenario in one mode with one acks, closed loop or at
// rate requests per second, and measures it.
func runOne(ctx context.Context, o *options, sc scenario, mode, meta string, acks acksLevel, rate float64, stderr io.Writer) (*result, error) {
	prof, _ := faultbucket.NamedProfile(o.profileName)
	// Each run its own stream of delays, the same every time.
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s/%s/%s/%v", o.seed, sc.Name, mode, meta, acks)
	seed := h.Sum64()
	if sc.SlowUpload {
		prof.UploadBytesPerSec = o.slowUpload
		prof.Name += fmt.Sprintf("+upload %.0f MB/s", float64(o.slowUpload)/1e6)
	}
	w := &workload{
		partitions: pick(o.partitions, sc.Partitions), producers: pick(o.producers, sc.Producers),
		inflight: o.inflight, messageSize: pick(o.messageSize, sc.MessageSize), batchBytes: o.batch,
		codec: o.codec, acks: acks, seed: seed, rate: rate,
	}
	dur := o.runDuration(sc)
	res := &result{
		Scenario: sc.Name, Mode: mode, Acks: acks.String(), Profile: prof.Name, Metadata: meta,
		Partitions: w.partitions, Producers: w.producers, MessageSize: w.messageSize, InFlight: w.inflight, Rate: rate, Loop: loopName(rate),
		BatchBytes: w.batchBytes, MessagesPerBatch: w.recordsPerBatch(), Codec: o.codec.String(),
		LingerMs: ms(o.effectiveLinger()), BufferBytes: pick64(o.buffer, wal.DefaultMaxBytes), DurationS: dur.Seconds(),
		LoadStart: loadAverage()[0],
	}
	label := fmt.Sprintf("[%s %s acks=%s]", sc.Name, mode, res.Acks)
	if meta != "" {
		label = fmt.Sprintf("[%s %s/%s acks=%s]", sc.Name, mode, meta, res.Acks)
	}
	if mode == "diskless" && meta == "bucket" && o.metadataProfile != "" {
		res.MetadataProfile = o.metadataProfile
	}
	if rate > 0 {
		label = label[:len(label)-1] + fmt.Sprintf(" open %g/s]", rate)
	}
	fmt.Fprintf(stderr, "%s %d partitions, %d producers x %d in flight, %d B messages (%d a batch), %v measured after %v\n",
		label, w.partitions, w.producers, w.inflight, w.messageSize, res.MessagesPerBatch, dur, o.warmup)

	var tgt target
	var dt *disklessTarget
	var cl *classicLeader
	var err error
	switch mode {
	case "diskless":
		ml := diskless.MetadataInBucket
		if meta == "memory" {
			ml = diskless.MetadataInMemory
		}
		var etcdEndpoints []string
		if meta == "etcd" && o.etcdEndpoints != "" {
			etcdEndpoints = strings.Split(o.etcdEndpoints, ",")
		}
		dc := disklessConfig{
			profile: prof, seed: seed, metadata: ml, linger: o.linger, bufferMaxBytes: o.buffer,
			maxBufferedBytes: o.maxBuffered, uploadConcurrency: o.uploadConcurrency, partitions: w.partitions, acks: acks,
			objectsPerSecond: o.objectsPerSecond, hedgeMax: o.hedgeMax, hedgeQuantile: o.hedgeQuantile, metaInFlight: o.metaInFlight, commit: commitModes[o.commit],
			etcd: meta == "etcd", etcdEndpoints: etcdEndpoints,
		}
		if res.MetadataProfile != "" {
			mp, _ := faultbucket.NamedProfile(res.MetadataProfile)
			dc.metadataProfile = &mp
		}
		dt, err = openDiskless(ctx, dc)
		tgt = dt
	case "classic":
		dir, derr := os.MkdirTemp("", "diskless-bench-classic-")
		if derr != nil {
			return nil, derr
		}
		cl, err = openClassic(ctx, dir, w.partitions, acks)
		tgt = cl
	}
	if err != nil {
		return nil, err
	}

	t := &tally{}
	start := time.Now()
	win := window{start: start.Add(o.warmup), end: start.Add(o.warmup + dur)}
	var storeStart, storeEnd, metaStart, metaEnd faultbucket.Stats
	var brokerStats diskless.Stats
	if dt != nil {
		dt.win.Store(&win)
	}
	progressDone, progressExited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(progressExited)
		progress(stderr, label, t, win, progressDone)
	}()
	snap := make(chan struct{})
	go func() { // the store's counts at the window's edges
		defer close(snap)
		if dt == nil {
			return
		}
		if sleepUntil(ctx, win.start) {
			storeStart, metaStart = dt.stats()
		}
		if sleepUntil(ctx, win.end) {
			storeEnd, metaEnd = dt.stats()
			brokerStats = dt.broker.Stats()
		}
	}()
	runErr := w.run(ctx, tgt, win, win.end, 30*time.Second, t)
	<-snap
	close(progressDone)
	<-progressExited
	if dt != nil && brokerStats.Store == nil {
		brokerStats = dt.broker.Stats()
		storeEnd, metaEnd = dt.stats()
	}
	var closeErr error
	if dt != nil {
		closeErr = dt.close()
	} else {
		closeErr = cl.close()
	}

	res.fill(t, win, dur)
	if dt != nil {
		res.fillDiskless(o, dt, brokerStats, storeStart, storeEnd, metaStart, metaEnd, dur)
	}
	res.cost()
	res.judge(o)
	res.LoadEnd = loadAverage()[0]
	fmt.Fprintf(stderr, "%s %.0f msg/s, %.2f MB/s, p50 %s p99 %s max %s%s\n", label, res.MsgsPerS, res.MBPerS,
		fmtMs(res.P50Ms), fmtMs(res.P99Ms), fmtMs(res.MaxMs), res.floorNote())
	return res, errors.Join(runErr, closeErr)
}

// loopName says how a run's producers send: closed or open loop.
func loopName(rate float64) string {
	if rate > 0 {
		return "open"
	}
	return "closed"
}

func pick(flag, def int) int {
	if flag > 0 {
		return flag
	}
	return def
}

func pick64(flag, def int64) int64 {
	if flag > 0 {
		return flag
	}
	return def
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// progress prints a line on stderr every few seconds while a run goes.
func progress(w io.Writer, label string, t *tally, win window, done <-chan struct{}) {
	every := 5 * time.Second
	if d := win.end.Sub(win.start); d < 20*time.Second {
		every = max(d/4, time.Second)
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	last, lastT := int64(0), time.Now()
	for {
		select {
		case <-done:
			return
		case now := <-tick.C:
			n := t.completed.Load()
			rate := float64(n-last) / now.Sub(lastT).Seconds()
			last, lastT = n, now
			phase := "warm-up"
			if now.After(win.start) {
				phase = fmt.Sprintf("%v/%v", now.Sub(win.start).Round(time.Second), win.end.Sub(win.start))
			}
			if now.After(win.end) {
				phase = "draining"
			}
			s := summarize(&t.latency)
			fmt.Fprintf(w, "%s %s: %.0f req/s, %d in flight, p50 %s p99 %s, %d errors\n", label, phase, rate, t.inFlight.Load(), fmtMs(s.P50), fmtMs(s.P99), t.errors.Load())
		}
	}
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// fmtMs formats milliseconds for humans.
func fmtMs(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v < 1:
		return fmt.Sprintf("%.0f µs", v*1000)
	case v < 10:
		return fmt.Sprintf("%.1f ms", v)
	}
	return fmt.Sprintf("%.0f ms", v)
}

// machine describes where the benchmark ran.
type machine struct {
	CPU        string
	Cores      int
	MemoryGiB  float64
	OS, Arch   string
	GoVersion  string
	LoadStart  [3]float64
	LoadEnd    [3]float64
	GOMAXPROCS int
}

func describeMachine() machine {
	m := machine{Cores: runtime.NumCPU(), OS: runtime.GOOS, Arch: runtime.GOARCH, GoVersion: runtime.Version(), GOMAXPROCS: runtime.GOMAXPROCS(0), LoadStart: loadAverage()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb float64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %f kB", &kb); err == nil {
			m.MemoryGiB = kb / (1 << 20)
		}
	}
	return m
}

// loadAverage returns the 1, 5 and 15 minute load averages (zero where
// /proc/loadavg is missing).
func loadAverage() [3]float64 {
	var l [3]float64
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Sscanf(string(b), "%f %f %f", &l[0], &l[1], &l[2])
	}
	return l
}

// commitModes are -commit's values.
var commitModes = map[string]diskless.CommitMode{"auto": diskless.CommitAuto, "series": diskless.CommitInSeries, "parallel": diskless.CommitInParallel}
