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

// The named profiles. Only the PUT and GET figures come from the design
// notes (diskless-notes.md §11); the others are assumptions: a HEAD or a
// DELETE costs what a GET's first byte does, a LIST page what a PUT does.
var profiles = map[string]func() Profile{
	"none": func() Profile { return Profile{Name: "none"} },
	// S3 Standard in one region: PUT p50 100 ms, p99 400 ms; GET first
	// byte p50 50 ms, p99 150 ms.
	"s3-standard": func() Profile {
		put, get := LogNormal(100*time.Millisecond, 400*time.Millisecond), LogNormal(50*time.Millisecond, 150*time.Millisecond)
		return Profile{Name: "s3-standard", Ops: [NumOps]OpFaults{
			Put: {Latency: put}, Get: {Latency: get}, List: {Latency: put}, Delete: {Latency: get}, Head: {Latency: get},
		}}
	},
	// S3 Express One Zone: PUT about 10 ms, GET about 5 ms (p99 assumed
	// three times the median).
	"s3-express": func() Profile {
		put, get := LogNormal(10*time.Millisecond, 30*time.Millisecond), LogNormal(5*time.Millisecond, 15*time.Millisecond)
		return Profile{Name: "s3-express", Ops: [NumOps]OpFaults{
			Put: {Latency: put}, Get: {Latency: get}, List: {Latency: put}, Delete: {Latency: get}, Head: {Latency: get},
		}}
	},
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
