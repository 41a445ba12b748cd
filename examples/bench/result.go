package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/faultbucket"
)

// result is one run: a scenario in one mode with one acks. Its JSON is
// what -json prints, one object per line.
type result struct {
	Scenario string `json:"scenario"`
	Mode     string `json:"mode"` // diskless or classic
	Acks     string `json:"acks"` // 0, 1 or all
	Profile  string `json:"profile"`
	Metadata string `json:"metadata,omitempty"` // diskless: bucket or memory
	// MetadataProfile is the profile of the metadata log's bucket of its
	// own (-metadata-profile); "" when it shares the WAL objects' bucket.
	MetadataProfile string `json:"metadata_profile,omitempty"`
	Partitions      int    `json:"partitions"`
	Producers       int    `json:"producers"`
	InFlight        int    `json:"inflight"`
	// Rate is the open-loop request rate; 0 means closed loop. Loop is
	// "closed" or "open"; OpenLoopRow marks the open-loop S2 run added
	// for the target table (-open-rate).
	Rate             float64 `json:"rate"`
	Loop             string  `json:"loop"`
	OpenLoopRow      bool    `json:"open_loop_row,omitempty"`
	MessageSize      int     `json:"message_size"`
	BatchBytes       int     `json:"batch_bytes"`
	MessagesPerBatch int     `json:"messages_per_batch"`
	Codec            string  `json:"codec"`
	LingerMs         float64 `json:"linger_ms"`
	BufferBytes      int64   `json:"buffer_bytes"`
	DurationS        float64 `json:"duration_s"`

	Requests int64   `json:"requests"`
	Msgs     int64   `json:"msgs"`
	Errors   int64   `json:"errors"`
	MsgsPerS float64 `json:"msgs_per_s"`
	MBPerS   float64 `json:"mb_per_s"`
	P50Ms    float64 `json:"p50_ms"`
	P90Ms    float64 `json:"p90_ms"`
	P99Ms    float64 `json:"p99_ms"`
	P999Ms   float64 `json:"p999_ms"`
	MaxMs    float64 `json:"max_ms"`
	MeanMs   float64 `json:"mean_ms"`

	// Diskless only: the p50 (and p99) of each stage from Broker.Stats,
	// the p50 of the PUTs at the store (WAL objects, metadata-log
	// entries), the floor and the produce p50 over it.
	BufferMs    float64 `json:"buffer_ms"`
	UploadMs    float64 `json:"upload_ms"`
	CommitMs    float64 `json:"commit_ms"`
	BufferP99Ms float64 `json:"buffer_p99_ms"`
	UploadP99Ms float64 `json:"upload_p99_ms"`
	CommitP99Ms float64 `json:"commit_p99_ms"`
	// Means of the stages, which add up (quantiles do not): whatever
	// the total's mean has beyond them is waiting for an earlier
	// object's commit (in-order commits) and answering.
	BufferMeanMs float64 `json:"buffer_mean_ms"`
	UploadMeanMs float64 `json:"upload_mean_ms"`
	CommitMeanMs float64 `json:"commit_mean_ms"`
	TotalMeanMs  float64 `json:"total_mean_ms"`
	OtherMeanMs  float64 `json:"other_mean_ms"`
	PutMs        float64 `json:"put_ms"`
	PutDelayMs   float64 `json:"put_injected_ms"`
	MetaPutMs    float64 `json:"meta_put_ms"`
	FloorMs      float64 `json:"floor_ms"`
	FloorRatio   float64 `json:"floor_ratio"`
	// Puts counts every PUT of the window: WAL objects, their hedges,
	// and the metadata log's entries (MetaBucketPuts of them in its own
	// bucket); PutsPerS is over the window.
	Puts           int64   `json:"puts"`
	PutsPerS       float64 `json:"puts_per_s"`
	MetaBucketPuts int64   `json:"meta_bucket_puts"`
	WALPuts        int64   `json:"wal_puts"`
	// Hedges and HedgeWins are the Broker's (Stats.Hedges), warm-up
	// included.
	Hedges       int64   `json:"hedges"`
	HedgeWins    int64   `json:"hedge_wins"`
	Gets         int64   `json:"gets"`
	Lists        int64   `json:"lists"`
	Deletes      int64   `json:"deletes"`
	ObjectsPerS  float64 `json:"objects_per_s"`
	ObjectMB     float64 `json:"object_mb"`
	StoreFailed  int64   `json:"store_failed"`
	UploadErrors int64   `json:"upload_errors"`
	CommitErrors int64   `json:"commit_errors"`

	USDPerMonth float64 `json:"usd_per_month"`
	Cost        cost    `json:"cost"`

	// Band is where the produce p50 falls against the expected band
	// (below, within, above; empty where none applies); TailDivergent
	// flags p99/p50 above 5.
	Band          string   `json:"band,omitempty"`
	BandLowMs     float64  `json:"band_low_ms,omitempty"`
	BandHighMs    float64  `json:"band_high_ms,omitempty"`
	TailRatio     float64  `json:"tail_ratio"`
	TailDivergent bool     `json:"tail_divergent"`
	TailCauses    []string `json:"tail_causes,omitempty"`
	FirstErrors   []string `json:"first_errors,omitempty"`
	LoadStart     float64  `json:"load_start"`
	LoadEnd       float64  `json:"load_end"`
}

// fill takes the client-side measurements.
func (r *result) fill(t *tally, win window, dur time.Duration) {
	s := summarize(&t.latency)
	if e, ok := t.exact.summary(); ok {
		s = e
	}
	secs := dur.Seconds()
	r.Requests, r.Msgs, r.Errors = t.requests.Load(), t.messages.Load(), t.errors.Load()
	r.MsgsPerS = float64(r.Msgs) / secs
	r.MBPerS = float64(t.bytes.Load()) / 1e6 / secs
	r.P50Ms, r.P90Ms, r.P99Ms, r.P999Ms, r.MaxMs, r.MeanMs = s.P50, s.P90, s.P99, s.P999, s.Max, s.Mean
	if s.P50 > 0 {
		r.TailRatio = s.P99 / s.P50
	}
	r.FirstErrors = t.firstErrors
}

// fillDiskless takes the Broker's stages and the stores' calls (the WAL
// objects' bucket, and the metadata log's own if any).
func (r *result) fillDiskless(o *options, d *disklessTarget, st diskless.Stats, before, after, metaBefore, metaAfter faultbucket.Stats, dur time.Duration) {
	secs := dur.Seconds()
	r.BufferMs, r.UploadMs, r.CommitMs = ms(st.BufferWait.P50), ms(st.Upload.P50), ms(st.Commit.P50)
	r.BufferP99Ms, r.UploadP99Ms, r.CommitP99Ms = ms(st.BufferWait.P99), ms(st.Upload.P99), ms(st.Commit.P99)
	r.UploadErrors, r.CommitErrors = st.UploadErrors, st.CommitErrors
	r.BufferMeanMs, r.UploadMeanMs, r.CommitMeanMs, r.TotalMeanMs = ms(st.BufferWait.Mean), ms(st.Upload.Mean), ms(st.Commit.Mean), ms(st.Total.Mean)
	if r.Acks != "0" {
		r.OtherMeanMs = r.TotalMeanMs - r.BufferMeanMs - r.UploadMeanMs - r.CommitMeanMs
	}
	r.PutMs = summarize(&d.walPuts).P50
	r.PutDelayMs = summarize(&d.walPutDelays).P50
	r.MetaPutMs = summarize(&d.metaPuts).P50
	delta := func(op faultbucket.Op) int64 {
		return after.Calls[op] - before.Calls[op] + metaAfter.Calls[op] - metaBefore.Calls[op]
	}
	r.Puts, r.Gets, r.Lists, r.Deletes = delta(faultbucket.Put), delta(faultbucket.Get), delta(faultbucket.List), delta(faultbucket.Delete)
	r.MetaBucketPuts = metaAfter.Calls[faultbucket.Put] - metaBefore.Calls[faultbucket.Put]
	r.PutsPerS = float64(r.Puts) / secs
	r.Hedges, r.HedgeWins = st.Hedges, st.HedgeWins
	for op := range faultbucket.NumOps {
		r.StoreFailed += after.Failed[op] - before.Failed[op] + metaAfter.Failed[op] - metaBefore.Failed[op]
	}
	r.WALPuts = d.walPutCount.Load()
	r.ObjectsPerS = float64(r.WALPuts) / secs
	if r.WALPuts > 0 {
		r.ObjectMB = float64(d.walPutBytes.Load()) / float64(r.WALPuts) / 1e6
	}
	r.FloorMs = r.LingerMs/2 + r.PutMs + r.CommitMs
	if r.FloorMs > 0 {
		r.FloorRatio = r.P50Ms / r.FloorMs
	}
}

// floorNote is the progress line's note on the floor.
func (r *result) floorNote() string {
	if r.Mode != "diskless" {
		return ""
	}
	return fmt.Sprintf("; buffer %s upload %s commit %s (PUT %s), floor %s, p50/floor %.2f",
		fmtMs(r.BufferMs), fmtMs(r.UploadMs), fmtMs(r.CommitMs), fmtMs(r.PutMs), fmtMs(r.FloorMs), r.FloorRatio)
}

// judge places the p50 against the expected band and explains a
// divergent tail.
func (r *result) judge(o *options) {
	r.TailDivergent = r.TailRatio > 5
	prof, _ := faultbucket.NamedProfile(o.profileName)
	if r.Mode == "diskless" && r.Acks != "0" {
		lo, hi := expectedBand(prof, o.effectiveLinger())
		r.BandLowMs, r.BandHighMs = lo, hi
		switch {
		case r.P50Ms < lo:
			r.Band = "below"
		case r.P50Ms > hi:
			r.Band = "above"
		default:
			r.Band = "within"
		}
	}
	if r.TailDivergent {
		r.TailCauses = r.tailCauses()
	}
}

// expectedBand is the produce p50 band of docs/architecture.md, "The
// latency probe": 300 to 900 ms with s3-standard and the default linger,
// scaled for another profile or linger by the floor it implies: linger/2
// plus two PUT medians (the object, then the commit's metadata-log entry),
// 325 ms for s3-standard and 250 ms.
func expectedBand(p faultbucket.Profile, linger time.Duration) (lo, hi float64) {
	put := 0.0
	if l := p.Ops[faultbucket.Put].Latency; l != nil {
		put = ms(l.Quantile(0.5))
	}
	scale := (ms(linger)/2 + 2*put) / (125 + 2*100)
	return 300 * scale, 900 * scale
}

// tailCauses names the likely causes of a p99 more than five times the
// p50, from the stages' own distributions.
func (r *result) tailCauses() []string {
	var c []string
	switch {
	case r.Mode == "classic":
		c = append(c, fmt.Sprintf("no object store on the path: the tail is the machine (%d producer goroutines on 2 shared cores: scheduling, GC, page-cache write-back)", r.Producers*r.Partitions*r.InFlight))
		if r.Acks == "0" {
			c = append(c, "acks=0 waits only for the partition's queue: p50 is microseconds, so any stall is a large multiple")
		}
		return c
	case r.Acks == "0":
		return append(c, "acks=0 answers once buffered: p50 is the cost of validation and Add, the tail is Produce waiting for room (MaxBufferedBytes back-pressure) while uploads and commits drain the buffer; waiters are not served in arrival order (wal.Buffer.Add wakes them all to race for the room), so a few wait far longer than the rest")
	}
	if r.UploadMs > 0 && r.UploadP99Ms/r.UploadMs >= 3 {
		c = append(c, fmt.Sprintf("object-store PUT tail: upload p99 %s against p50 %s", fmtMs(r.UploadP99Ms), fmtMs(r.UploadMs)))
	}
	if r.CommitMs > 0 && r.CommitP99Ms/r.CommitMs >= 3 {
		c = append(c, fmt.Sprintf("commit tail: commit p99 %s against p50 %s (the metadata log's PUT tail, and commits in order behind a slow one)", fmtMs(r.CommitP99Ms), fmtMs(r.CommitMs)))
	}
	if r.BufferP99Ms > 1.5*r.LingerMs {
		c = append(c, fmt.Sprintf("buffer wait p99 %s past the linger (%s): objects waited for an upload slot, or Produce for room (MaxBufferedBytes)", fmtMs(r.BufferP99Ms), fmtMs(r.LingerMs)))
	}
	if strings.Contains(r.Profile, "upload") {
		c = append(c, "uploads capped: objects queue for the link")
	}
	if len(c) == 0 {
		c = append(c, "none of the stages: the machine (CPU scheduling on 2 shared cores, GC)")
	}
	return c
}
