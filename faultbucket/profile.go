package faultbucket

import (
	"fmt"
	"strings"
	"time"
)

// Op is a kind of object-store call, as object stores bill them.
type Op int

// The kinds of call.
const (
	Put    Op = iota // a write (WriteAll, NewWriter...Close) or a Copy
	Get              // a read (NewRangeReader, ReadAll)
	List             // one page of a listing
	Delete           // a Delete
	Head             // Attributes
	NumOps
)

// String returns the call's name: PUT, GET, LIST, DELETE or HEAD.
func (o Op) String() string {
	if o < 0 || o >= NumOps {
		return fmt.Sprintf("Op(%d)", int(o))
	}
	return [...]string{"PUT", "GET", "LIST", "DELETE", "HEAD"}[o]
}

// OpFaults are the faults of one kind of call.
type OpFaults struct {
	// Latency is the delay of a call before it takes effect and returns
	// (for a GET: before its first byte; for a PUT: after its bytes are
	// sent). nil means none.
	Latency Latency
	// PerMiB is the time each MiB of the call's bytes adds, sampled once
	// a call: a PUT waits Latency plus PerMiB times its MiB before it
	// takes effect, a GET's reads wait PerMiB for each MiB they return
	// (one connection's throughput; UploadBytesPerSec and
	// DownloadBytesPerSec are the link's, shared by every call). nil
	// means none.
	PerMiB Latency
	// ErrorRate is the share of calls, in [0, 1], that fail after their
	// delay, without effect, with the wrapper's retriable code.
	ErrorRate float64
}

// Profile describes an object store: the faults of each kind of call and
// the bandwidth of the link to it. The zero value is a store with no
// faults.
type Profile struct {
	// Name names the profile in reports.
	Name string
	// Ops are the faults of each kind of call.
	Ops [NumOps]OpFaults
	// UploadBytesPerSec caps the bytes per second that PUTs send, shared
	// by every PUT in flight (a link, not a per-call cap); 0 means no
	// cap. DownloadBytesPerSec does the same for the bytes GETs read.
	UploadBytesPerSec, DownloadBytesPerSec int64
}

// The named profiles. The PUT and GET latencies are the published figures
// of docs/architecture.md, "Local tests and injected latency" (S3 Express
// One Zone's are those of S3Express's doc); the others are assumptions: a
// HEAD or a DELETE costs what a GET's first byte does, a LIST page what a
// PUT does.
//
// The time per MiB of PUTs and GETs comes from the throughput of one
// request measured on S3 Standard by Durner, Leis and Neumann,
// "Exploiting Cloud Object Storage for High-Performance Analytics" (PVLDB
// 16(11), 2023, §2): a request's latency grows linearly with its size
// past a few MiB, at 25 to 95 MiB/s a request, median 55 to 60; AWS's
// performance guidelines plan one connection per 85 to 90 MB/s. So a MiB
// takes 17 ms at the median (about 58 MiB/s) and 40 ms at the 99th
// percentile (25 MiB/s): an 8 MiB object adds about 140 ms to its PUT,
// 100 KiB about 1.7 ms. No measurement of S3 Express One Zone's
// throughput per request was found: it is assumed the same (one TCP
// stream to the front end, not the storage, sets it).
var profiles = map[string]func() Profile{
	"none":        func() Profile { return Profile{Name: "none"} },
	"s3-standard": S3Standard,
	"s3-express":  S3Express,
}

// S3Standard returns the profile "s3-standard", Amazon S3 Standard in one
// region: PUT p50 100 ms, p99 400 ms; GET first byte p50 50 ms, p99 150
// ms; then 17 ms a MiB (p99 40 ms); LIST as a PUT, HEAD and DELETE as a
// GET's first byte; no failures (add them with WithErrorRate):
//
//	faultbucket.S3Standard().WithErrorRate(0.02) // S3 Standard, 2% of calls failing
func S3Standard() Profile {
	return s3Profile("s3-standard", LogNormal(100*time.Millisecond, 400*time.Millisecond), LogNormal(50*time.Millisecond, 150*time.Millisecond))
}

// S3Express returns the profile "s3-express", Amazon S3 Express One Zone:
// PUT about 10 ms, GET about 5 ms (p99 assumed three times the median);
// then 17 ms a MiB (p99 40 ms); no failures.
func S3Express() Profile {
	return s3Profile("s3-express", LogNormal(10*time.Millisecond, 30*time.Millisecond), LogNormal(5*time.Millisecond, 15*time.Millisecond))
}

// WithErrorRate returns p with the share rate, in [0, 1], of the calls of
// ops (every kind of call when none is named) failing after their delay,
// without effect, with the wrapper's retriable code:
//
//	faultbucket.Profile{}.WithErrorRate(0.1, faultbucket.Put) // no delays; one PUT in ten fails
//
// Wrap and SetProfile refuse a rate outside [0, 1].
func (p Profile) WithErrorRate(rate float64, ops ...Op) Profile {
	if len(ops) == 0 {
		for op := range p.Ops {
			p.Ops[op].ErrorRate = rate
		}
	}
	for _, op := range ops {
		if op >= 0 && op < NumOps {
			p.Ops[op].ErrorRate = rate
		}
	}
	return p
}

// s3PerMiB is the time a MiB of a PUT or a GET takes on S3 (see profiles).
func s3PerMiB() Latency { return LogNormal(17*time.Millisecond, 40*time.Millisecond) }

// s3Profile is an S3 store with the given PUT and GET latencies.
func s3Profile(name string, put, get Latency) Profile {
	return Profile{Name: name, Ops: [NumOps]OpFaults{
		Put: {Latency: put, PerMiB: s3PerMiB()}, Get: {Latency: get, PerMiB: s3PerMiB()},
		List: {Latency: put}, Delete: {Latency: get}, Head: {Latency: get},
	}}
}

// ProfileNames returns the names NamedProfile knows, sorted.
func ProfileNames() []string { return []string{"none", "s3-express", "s3-standard"} }

// NamedProfile returns a named profile: "none", "s3-standard" or
// "s3-express".
func NamedProfile(name string) (Profile, error) {
	f, ok := profiles[name]
	if !ok {
		return Profile{}, fmt.Errorf("faultbucket: no profile %q (have %s)", name, strings.Join(ProfileNames(), ", "))
	}
	return f(), nil
}

// Validate reports a profile's first out-of-range field.
func (p Profile) Validate() error {
	for op, f := range p.Ops {
		if f.ErrorRate < 0 || f.ErrorRate > 1 {
			return fmt.Errorf("faultbucket: profile %q: %v ErrorRate %v is not in [0, 1]", p.Name, Op(op), f.ErrorRate)
		}
	}
	if p.UploadBytesPerSec < 0 || p.DownloadBytesPerSec < 0 {
		return fmt.Errorf("faultbucket: profile %q: negative bandwidth", p.Name)
	}
	return nil
}
