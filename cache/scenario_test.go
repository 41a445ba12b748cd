package cache

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of the scenarios in testdata")

// TestScenarios runs every testdata/*.txt scenario. A scenario is a list of
// commands, each followed by a line "----" and its expected output, and a
// blank line; lines starting with # are comments. Every scenario runs
// over each of bucketKinds, and prints the same over each. Run with
// -rewrite to write the actual output over the first kind (memory) into
// the files (then read the diff); the other kinds are checked against it.
//
// Commands:
//
//	new [block=N] [memory=N] [shards=N] [disk=N] [cold=N] [hot-keys=N]
//	    close the cache (if any) and open one; disk=N enables the disk tier
//	    (DiskBytes N) in the scenario's folder. Defaults: block=16
//	    memory=1024 shards=1, no disk.
//	restart                  close the cache and open it again, same options
//	object KEY SIZE          write an object to the bucket (not the cache)
//	put KEY SIZE             write an object to the bucket and Put it
//	read KEY OFF LEN [class=hot|cold] [size=N]
//	    read a range (and check its bytes); prints ok or the error, and the
//	    read's hits, disk hits, misses and GETs
//	forget KEY               Forget the key
//	delete KEY               delete the object from the bucket
//	fail N                   fail the next N GETs
//	fail KEY OFF             fail the next GET of KEY that starts at OFF
//	damage KEY BLOCK data|header|truncate
//	                         damage a block file of the disk tier
//	gets                     the GETs sent since the last "gets", sorted
//	disk                     the block files the disk tier holds
//	stats                    the cache's Stats
//
// The runner waits after each command until fills (and their disk writes)
// have ended, so the output does not depend on timing.
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for i, kind := range bucketKinds {
		t.Run(kind.name, func(t *testing.T) {
			open := kind.start(t)
			for _, file := range files {
				t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
					runScenario(t, file, open, *rewrite && i == 0)
				})
			}
		})
	}
}

type scenario struct {
	t       *testing.T
	bucket  *blob.Bucket
	fb      *faultBucket
	dir     string
	opts    Options
	c       *Cache
	objects map[string][]byte
}

// runScenario runs the scenario in file over a bucket from open, and
// checks its output against the file's or, with rewrite, writes it there.
func runScenario(t *testing.T, file string, open openBucket, rewrite bool) {
	text, err := os.ReadFile(file)
	require.NoError(t, err)
	b, fb := open(t)
	s := &scenario{t: t, bucket: b, fb: fb, dir: t.TempDir(), objects: map[string][]byte{}}
	defer func() {
		if s.c != nil {
			require.NoError(t, s.c.Close())
		}
	}()

	var out strings.Builder
	lines := strings.Split(strings.TrimRight(string(text), "\n"), "\n")
	failed := false
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			out.WriteString(line + "\n")
			continue
		}
		cmdLine := i + 1
		out.WriteString(line + "\n")
		var want []string
		if i+1 < len(lines) && lines[i+1] == "----" {
			i++
			for i+1 < len(lines) && strings.TrimSpace(lines[i+1]) != "" {
				i++
				want = append(want, lines[i])
			}
		}
		got := s.run(line)
		if s.c != nil {
			s.c.settle()
		}
		out.WriteString("----\n" + got)
		if !rewrite && strings.Join(want, "\n")+"\n" != got {
			t.Errorf("%s:%d: %s\n got:\n%s want:\n%s\n", file, cmdLine, line, got, strings.Join(want, "\n"))
			failed = true
		}
	}
	if rewrite {
		require.NoError(t, os.WriteFile(file, []byte(out.String()), 0o644))
	} else if failed {
		t.Logf("run with -rewrite to accept the new output")
	}
}

// run runs one command and returns its output, one or more lines.
func (s *scenario) run(line string) string {
	t := s.t
	f := strings.Fields(line)
	cmd, args := f[0], f[1:]
	pos := func(i int) string {
		require.Greater(t, len(args), i, "%s: missing argument", line)
		return args[i]
	}
	num := func(v string) int64 {
		n, err := strconv.ParseInt(v, 10, 64)
		require.NoError(t, err, line)
		return n
	}
	kv := func(from int) map[string]string {
		m := map[string]string{}
		for _, a := range args[from:] {
			k, v, ok := strings.Cut(a, "=")
			require.True(t, ok, "%s: %q is not key=value", line, a)
			m[k] = v
		}
		return m
	}
	switch cmd {
	case "new":
		if s.c != nil {
			require.NoError(t, s.c.Close())
		}
		s.opts = Options{BlockSize: 16, MemoryBytes: 1024, Shards: 1}
		for k, v := range kv(0) {
			switch k {
			case "block":
				s.opts.BlockSize = num(v)
			case "memory":
				s.opts.MemoryBytes = num(v)
			case "shards":
				s.opts.Shards = int(num(v))
			case "disk":
				s.opts.Dir, s.opts.DiskBytes = s.dir, num(v)
			case "cold":
				s.opts.ColdConcurrency = int(num(v))
			case "hot-keys":
				s.opts.HotKeys = int(num(v))
			default:
				t.Fatalf("%s: unknown option %q", line, k)
			}
		}
		return s.open()
	case "restart":
		require.NoError(t, s.c.Close())
		return s.open()
	case "object", "put":
		key, size := pos(0), num(pos(1))
		s.objects[key] = putObject(t, s.bucket, key, size)
		if cmd == "object" {
			return "ok\n"
		}
		before := s.c.Stats()
		err := s.c.Put(t.Context(), key, s.objects[key])
		return outcome(err) + delta(before, s.c.Stats())
	case "read":
		key, off, n := pos(0), num(pos(1)), num(pos(2))
		var ro ReadOptions
		for k, v := range kv(3) {
			switch k {
			case "class":
				ro.Class = map[string]Class{"hot": ClassHot, "cold": ClassCold, "auto": ClassAuto}[v]
			case "size":
				ro.ObjectSize = num(v)
			default:
				t.Fatalf("%s: unknown option %q", line, k)
			}
		}
		before, getsBefore := s.c.Stats(), s.fb.gets.Load()
		dst := make([]byte, n)
		err := s.c.ReadRangeInto(t.Context(), key, off, dst, &ro)
		if err == nil && n > 0 {
			obj := s.objects[key]
			require.LessOrEqual(t, off+n, int64(len(obj)), "%s: read past the end succeeded", line)
			require.True(t, bytes.Equal(obj[off:off+n], dst), "%s: wrong bytes", line)
		}
		s.c.settle()
		after := s.c.Stats()
		require.Equal(t, s.fb.gets.Load()-getsBefore, after.GETs-before.GETs, "%s: the bucket and Stats count GETs differently", line)
		return outcome(err) + delta(before, after)
	case "forget":
		return outcome(s.c.Forget(pos(0))) + "\n"
	case "delete":
		delete(s.objects, pos(0))
		return outcome(s.bucket.Delete(t.Context(), pos(0))) + "\n"
	case "fail":
		if len(args) == 2 {
			s.fb.failNextAt(pos(0), num(pos(1)))
		} else {
			s.fb.failNext(int(num(pos(0))))
		}
		return "ok\n"
	case "damage":
		name := filepath.Join(s.dir, blockFileName(pos(0), num(pos(1))))
		b, err := os.ReadFile(name)
		require.NoError(t, err, line)
		switch pos(2) {
		case "data":
			b[len(b)-blockTrailer-1] ^= 0xff
		case "header":
			b[20] ^= 0x01 // the block index
		case "truncate":
			b = b[:len(b)-1]
		default:
			t.Fatalf("%s: damage data, header or truncate", line)
		}
		require.NoError(t, os.WriteFile(name, b, 0o644))
		return "ok\n"
	case "gets":
		l := s.fb.takeLog()
		slices.Sort(l) // fills of one read run concurrently
		if len(l) == 0 {
			return "none\n"
		}
		return strings.Join(l, "\n") + "\n"
	case "disk":
		return s.diskListing()
	case "stats":
		st := s.c.Stats()
		return fmt.Sprintf("hits=%d disk-hits=%d misses=%d coalesced=%d\n"+
			"gets=%d get-errors=%d fetched=%d cold-fills=%d promoted=%d in-flight=%d\n"+
			"puts=%d put-bytes=%d forgets=%d\n"+
			"memory: bytes=%d blocks=%d evictions=%d\n"+
			"disk: bytes=%d blocks=%d evictions=%d damaged=%d write-errors=%d\n",
			st.Hits, st.DiskHits, st.Misses, st.Coalesced,
			st.GETs, st.GetErrors, st.BytesFetched, st.ColdFills, st.Promoted, st.FillsInFlight,
			st.Puts, st.BytesPut, st.Forgets,
			st.MemoryBytes, st.MemoryBlocks, st.Evictions,
			st.DiskBytes, st.DiskBlocks, st.DiskEvictions, st.DiskDamaged, st.DiskWriteErrors)
	}
	t.Fatalf("unknown command %q", line)
	return ""
}

func (s *scenario) open() string {
	c, err := New(s.bucket, &s.opts)
	if err != nil {
		s.c = nil
		return "error: " + err.Error() + "\n"
	}
	s.c = c
	if c.disk == nil {
		return "ok\n"
	}
	st := c.Stats()
	return fmt.Sprintf("ok disk-blocks=%d disk-bytes=%d damaged=%d\n", st.DiskBlocks, st.DiskBytes, st.DiskDamaged)
}

// diskListing lists the disk tier's index, most recently used first.
func (s *scenario) diskListing() string {
	d := s.c.disk
	if d == nil {
		return "no disk tier\n"
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var l []string
	for e := d.mu.lru.next; e != &d.mu.lru; e = e.next {
		_, err := os.Stat(filepath.Join(d.dir, e.name))
		require.NoError(s.t, err, "indexed file %s missing", e.name)
		l = append(l, fmt.Sprintf("%s#%d (%d bytes)", e.key, e.idx, e.fileSize))
	}
	files, err := filepath.Glob(filepath.Join(d.dir, "*"+blockFileExt))
	require.NoError(s.t, err)
	require.Len(s.t, files, len(l), "files in the folder and in the index differ")
	if len(l) == 0 {
		return "empty\n"
	}
	return strings.Join(l, "\n") + "\n"
}

// outcome names an error by its sentinel.
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	for _, e := range []struct {
		err  error
		name string
	}{
		{ErrOutOfRange, "out of range"}, {ErrNotFound, "not found"}, {ErrClosed, "closed"},
		{ErrInvalidRange, "invalid range"}, {ErrShortRead, "short read"},
		{ErrSizeMismatch, "size mismatch"}, {errInjected, "injected GET failure"},
	} {
		if errors.Is(err, e.err) {
			return "error: " + e.name
		}
	}
	return "error: " + err.Error()
}

// delta prints what one command cost: blocks hit, missed, and GETs sent.
func delta(a, b Stats) string {
	var parts []string
	for _, f := range []struct {
		name string
		n    int64
	}{
		{"hits", b.Hits - a.Hits}, {"disk-hits", b.DiskHits - a.DiskHits},
		{"misses", b.Misses - a.Misses}, {"gets", b.GETs - a.GETs},
	} {
		parts = append(parts, fmt.Sprintf("%s=%d", f.name, f.n))
	}
	return ": " + strings.Join(parts, " ") + "\n"
}
