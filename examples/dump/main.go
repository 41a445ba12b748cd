// Command dump prints the files of diskless and of Kafka's classic log,
// as Kafka's kafka-dump-log does: what each holds, and whether its
// checksums and indexes check.
//
//	go run ./examples/dump DATA/bucket/wal/0191c3e0-...             # a WAL object
//	go run ./examples/dump -db DATA/coordinator/shard-0.db OBJECT    # ... with its regions: partitions and offsets
//	go run ./examples/dump -records 00000000000000000000.log         # a segment, its records, its .index and .timeindex
//	go run ./examples/dump DATA/coordinator/shard-0.db               # a coordinator database: topics, partitions, objects
//	go run ./examples/dump -bucket 's3://b?region=eu-west-1' wal/0191c3e0-...
//
// It knows:
//
//   - WAL objects (package wal): the version byte, then every batch, with
//     its position, size, header fields and CRC status. An object does not
//     say where one partition's region ends and the next begins (the
//     coordinator's batch coordinates are its index); with -db, the
//     coordinator database that committed it names each region's topic,
//     partition and offsets, and each batch's offsets, and says whether a
//     compaction wrote the object (its batches replaced a partition's
//     range at their offsets).
//   - Kafka log segments (.log): every batch, as kafka-dump-log prints
//     them; then the segment's .index and .timeindex when they are beside
//     it (or named on their own), each entry checked against the .log.
//   - producer-state snapshots (.snapshot), leader-epoch checkpoints
//     (leader-epoch-checkpoint), and the files of a tiered segment in the
//     bucket (tiered/<topic ID>-<partition>/<base offset>-<segment ID> with
//     .log, .index, .timeindex, .snapshot, .leader_epoch_checkpoint and
//     .metadata, a RemoteLogSegmentMetadata record).
//   - coordinator databases (SQLite, package coordinator): a summary of
//     its topics, partitions (log start offset, high watermark, bytes),
//     WAL objects (those a compaction wrote marked "compacted") and
//     producers. It is opened read-only.
//
// The kind comes from -kind, else from the name (.log, .index, .timeindex,
// .snapshot, .metadata, .db, leader-epoch-checkpoint, wal/ in the key), else from the
// first bytes (SQLite's header; a RecordBatch's magic byte at 16 for a
// .log, at 17 for a WAL object, after its version byte). With -bucket the
// arguments are keys in that bucket (any gocloud.dev/blob URL: file://,
// mem:// and s3:// are built in).
//
// Flags:
//
//	-bucket URL   read the arguments from this bucket instead of the file system
//	-kind KIND    wal, log, index, timeindex, snapshot, checkpoint, metadata or db
//	-db PATH      a coordinator database that names the regions of a WAL object
//	-records      print every record (offset, timestamp, key, value, headers), not only batches
//	-max-bytes N  print at most N bytes of each key, value and header value (default 64; -1: all)
//
// It exits with status 1 when a file does not check (a CRC, a truncated
// batch, an index entry that points nowhere), 2 on bad usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	_ "gocloud.dev/blob/fileblob" // file://
	_ "gocloud.dev/blob/memblob"  // mem://
	_ "gocloud.dev/blob/s3blob"   // s3://
)

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil:
	case errors.Is(err, errUsage):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "dump:", err)
		os.Exit(1)
	}
}

// errUsage is returned for bad flags or arguments, after saying why.
var errUsage = errors.New("usage")

// errBad is returned when a file dumped does not check.
var errBad = errors.New("a file does not check")

// kind is what a file is.
type kind string

// The kinds of file the command prints.
const (
	kindWAL        kind = "wal"
	kindLog        kind = "log"
	kindIndex      kind = "index"
	kindTimeIndex  kind = "timeindex"
	kindSnapshot   kind = "snapshot"
	kindCheckpoint kind = "checkpoint"
	kindMetadata   kind = "metadata"
	kindDB         kind = "db"
)

var kinds = []kind{kindWAL, kindLog, kindIndex, kindTimeIndex, kindSnapshot, kindCheckpoint, kindMetadata, kindDB}

// options are the command's flags.
type options struct {
	bucket   string
	kind     kind
	db       string
	records  bool
	maxBytes int
}

// dumper prints files to out, and remembers whether one did not check.
type dumper struct {
	opts options
	src  source
	out  io.Writer
	bad  bool
}

// problem notes a file that does not check.
func (d *dumper) problem() { d.bad = true }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("dump", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: dump [flags] PATH|KEY...")
		fs.PrintDefaults()
	}
	var o options
	var k string
	fs.StringVar(&o.bucket, "bucket", "", "read the arguments as keys of this bucket `URL`")
	fs.StringVar(&k, "kind", "", "what the files are: "+joinKinds()+" (default: from the name and the first bytes)")
	fs.StringVar(&o.db, "db", "", "a coordinator database `PATH` that names the regions of WAL objects")
	fs.BoolVar(&o.records, "records", false, "print every record, not only batches")
	fs.IntVar(&o.maxBytes, "max-bytes", 64, "print at most this many bytes of keys, values and header values (-1: all)")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	o.kind = kind(k)
	if k != "" && !isKind(o.kind) {
		fmt.Fprintf(stderr, "dump: -kind %q is none of %s\n", k, joinKinds())
		return errUsage
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errUsage
	}
	d := &dumper{opts: o, out: stdout}
	if o.bucket != "" {
		src, err := openBucket(ctx, o.bucket)
		if err != nil {
			return err
		}
		defer src.Close()
		d.src = src
	} else {
		d.src = dirSource{}
	}
	for i, name := range fs.Args() {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		if err := d.dump(ctx, name); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if d.bad {
		return errBad
	}
	return nil
}

func isKind(k kind) bool {
	for _, x := range kinds {
		if x == k {
			return true
		}
	}
	return false
}

func joinKinds() string {
	var s []string
	for _, k := range kinds {
		s = append(s, string(k))
	}
	return strings.Join(s, ", ")
}

// dump prints one file.
func (d *dumper) dump(ctx context.Context, name string) error {
	k := d.opts.kind
	if k == kindDB || (k == "" && strings.HasSuffix(name, ".db")) {
		if d.opts.bucket != "" {
			return errors.New("a coordinator database is a local file: drop -bucket")
		}
		return d.dumpDB(ctx, name)
	}
	data, err := d.src.Read(ctx, name)
	if err != nil {
		return err
	}
	if k == "" {
		if k = kindOf(name, data); k == "" {
			return errors.New("cannot tell what it is: name it .log, .index, ... or pass -kind")
		}
	}
	switch k {
	case kindWAL:
		return d.dumpWAL(ctx, name, data)
	case kindLog:
		return d.dumpSegment(ctx, name, data)
	case kindIndex:
		return d.dumpIndex(ctx, name, data, nil)
	case kindTimeIndex:
		return d.dumpTimeIndex(ctx, name, data, nil)
	case kindSnapshot:
		return d.dumpSnapshot(name, data)
	case kindCheckpoint:
		return d.dumpCheckpoint(name, data)
	case kindMetadata:
		return d.dumpRemoteMetadata(name, data)
	case kindDB:
		return d.dumpDB(ctx, name)
	}
	return fmt.Errorf("no dumper for %s", k)
}

// sqliteMagic begins every SQLite database file.
const sqliteMagic = "SQLite format 3\x00"

// kindOf tells what a file is from its name, else its first bytes.
func kindOf(name string, data []byte) kind {
	base := path.Base(strings.ReplaceAll(name, "\\", "/"))
	switch {
	case strings.HasSuffix(base, ".log"):
		return kindLog
	case strings.HasSuffix(base, ".index"):
		return kindIndex
	case strings.HasSuffix(base, ".timeindex"):
		return kindTimeIndex
	case strings.HasSuffix(base, ".snapshot"):
		return kindSnapshot
	case base == "leader-epoch-checkpoint" || strings.HasSuffix(base, ".leader_epoch_checkpoint"):
		return kindCheckpoint
	case strings.HasSuffix(base, ".metadata"):
		return kindMetadata
	case strings.HasSuffix(base, ".db"), strings.HasPrefix(string(data), sqliteMagic):
		return kindDB
	case strings.Contains("/"+name, "/wal/"):
		return kindWAL
	}
	// A RecordBatch has its magic byte (2) 16 bytes in; a WAL object
	// starts with its version byte (0), then a batch.
	const magicOffset = 16
	switch {
	case len(data) > magicOffset+1 && data[0] == 0 && data[magicOffset+1] == 2:
		return kindWAL
	case len(data) > magicOffset && data[magicOffset] == 2:
		return kindLog
	}
	return ""
}
