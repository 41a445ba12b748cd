package metalog_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/coordinator/metalog/metalogtest"
)

// logRefFrame builds a frame the way the package doc describes it,
// independently of appendFileLogFrame.
func logRefFrame(payload []byte) []byte {
	var b []byte
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	crc := crc32.Checksum(append(slices.Clone(b), payload...), crc32.MakeTable(crc32.Castagnoli))
	b = binary.BigEndian.AppendUint32(b, crc)
	return append(b, payload...)
}

// logRefParse returns the payloads of the valid frames at the start of a
// segment file's bytes, and where the first bad frame starts (len(data)
// if none), independently of fileLogFrameReader.
func logRefParse(data []byte) (payloads [][]byte, bad int) {
	pos := 0
	for len(data)-pos >= 8 {
		n := int(binary.BigEndian.Uint32(data[pos:]))
		if n > len(data)-pos-8 {
			break
		}
		if !bytes.Equal(logRefFrame(data[pos+8:pos+8+n]), data[pos:pos+8+n]) {
			break
		}
		payloads = append(payloads, data[pos+8:pos+8+n])
		pos += 8 + n
	}
	return payloads, pos
}

func openTestFileLog(t testing.TB, dir string, opts *metalog.FileOptions) *metalog.File {
	t.Helper()
	l, err := metalog.OpenFile(dir, opts)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

// TestFileFormat is the golden test of the segment format.
func TestFileFormat(t *testing.T) {
	dir := t.TempDir()
	l := openTestFileLog(t, dir, nil)
	appendOne := func(e string) {
		r := <-l.Append([]byte(e))
		require.NoError(t, r.Err)
	}
	appendOne("hello")
	appendOne("")
	require.NoError(t, l.Close())
	got, err := os.ReadFile(filepath.Join(dir, "00000000000000000000.log"))
	require.NoError(t, err)
	// length 5 | CRC32C(00000005 "hello") | "hello" | length 0 | CRC32C(00000000)
	want := "00000005" + "3923f9b4" + hex.EncodeToString([]byte("hello")) +
		"00000000" + "48674bc7"
	require.Equal(t, want, hex.EncodeToString(got))
	require.Equal(t, append(logRefFrame([]byte("hello")), logRefFrame(nil)...), got)
}

func TestFileOptionsValidated(t *testing.T) {
	_, err := metalog.OpenFile(t.TempDir(), &metalog.FileOptions{SegmentBytes: -1})
	require.ErrorIs(t, err, metalog.ErrInvalidOptions)
	_, err = metalog.OpenFile(t.TempDir(), &metalog.FileOptions{MaxInFlight: -1})
	require.ErrorIs(t, err, metalog.ErrInvalidOptions)
}

// TestFileSegments: segments roll at SegmentBytes and are named by
// their base offsets; an entry larger than a segment gets one of its own.
func TestFileSegments(t *testing.T) {
	dir := t.TempDir()
	l := openTestFileLog(t, dir, &metalog.FileOptions{SegmentBytes: 100})
	sizes := []int{10, 30, 40, 200, 5, 5, 90, 0}
	for i, n := range sizes {
		r := <-l.Append(bytes.Repeat([]byte{byte(i)}, n))
		require.NoError(t, r.Err)
	}
	require.NoError(t, l.Close())
	des, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	// Frames of 18, 38, 48, 208, 13, 13, 98 and 8 bytes: 18+38, then 48
	// (56+48 > 100), then 208 alone, then 13+13, then 98, then 8.
	require.Equal(t, []string{
		"00000000000000000000.log", "00000000000000000002.log", "00000000000000000003.log",
		"00000000000000000004.log", "00000000000000000006.log", "00000000000000000007.log",
	}, names)
	l = openTestFileLog(t, dir, &metalog.FileOptions{SegmentBytes: 100})
	got := metalogtest.ReadAll(t, l, 0)
	require.Len(t, got, len(sizes))
	for i, r := range got {
		require.Equal(t, bytes.Repeat([]byte{byte(i)}, sizes[i]), r.Entry)
	}
}

// TestFileReadIndex reads from many offsets of large segments, before
// and after a reopen (the index is built by Append, then by recovery).
func TestFileReadIndex(t *testing.T) {
	dir := t.TempDir()
	opts := &metalog.FileOptions{SegmentBytes: 1 << 20}
	l := openTestFileLog(t, dir, opts)
	const n = 6000
	metalogtest.AppendEntries(t, l, 0, n)
	check := func(l *metalog.File) {
		for _, from := range []int64{0, 1, 511, 2048, 3333, 4095, 5999, n} {
			var got []metalogtest.Read
			require.NoError(t, l.Read(t.Context(), from, func(off int64, e []byte) error {
				if len(got) < 3 {
					got = append(got, metalogtest.Read{Offset: off, Entry: bytes.Clone(e)})
				}
				return nil
			}))
			metalogtest.RequireEntries(t, got, from, min(from+3, n))
		}
	}
	check(l)
	require.NoError(t, l.Close())
	check(openTestFileLog(t, dir, opts))
}

// writeLogSegment writes a segment file of the given frames' bytes.
func writeLogSegment(t *testing.T, dir string, base int64, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, fmt.Sprintf("%020d.log", base))
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return path
}

func logRefFrames(payloads ...string) []byte {
	var b []byte
	for _, p := range payloads {
		b = append(b, logRefFrame([]byte(p))...)
	}
	return b
}

// TestFileTornTail: the tails a crash may leave in the last segment are
// truncated away, and appends go on from the last valid entry.
func TestFileTornTail(t *testing.T) {
	valid := logRefFrames("a", "bb", "ccc")
	frame := logRefFrame([]byte("dddd"))
	badCRC := slices.Clone(frame)
	badCRC[len(badCRC)-1] ^= 1
	for _, tc := range []struct {
		name string
		tail []byte
	}{
		{"clean", nil},
		{"half header", frame[:3]},
		{"header only", frame[:8]},
		{"short payload", frame[:10]},
		{"bad checksum", badCRC},
		{"zeros", make([]byte, 4096)},
		{"garbage", bytes.Repeat([]byte{0xa5}, 100)},
		{"length past the end", append([]byte{0x7f, 0, 0, 0, 1, 2, 3, 4}, "xyz"...)},
		// Blocks written after the torn one reached the disk first.
		{"valid frames after a hole", append(append(make([]byte, len(frame)), logRefFrames("e", "f")...), make([]byte, 10)...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := writeLogSegment(t, dir, 0, append(slices.Clone(valid), tc.tail...))
			l := openTestFileLog(t, dir, nil)
			require.Equal(t, int64(3), l.End())
			fi, err := os.Stat(path)
			require.NoError(t, err)
			require.Equal(t, int64(len(valid)), fi.Size(), "the tail is truncated")
			r := <-l.Append([]byte("new"))
			require.NoError(t, r.Err)
			require.Equal(t, int64(3), r.Offset)
			require.NoError(t, l.Close())
			l = openTestFileLog(t, dir, nil)
			got := metalogtest.ReadAll(t, l, 0)
			require.Len(t, got, 4)
			require.Equal(t, "new", string(got[3].Entry))
		})
	}
}

// TestFileCorrupt: bad frames that a crash cannot explain make Open
// fail with metalog.ErrCorrupt, and change nothing.
func TestFileCorrupt(t *testing.T) {
	valid := logRefFrames("a", "bb", "ccc")
	big := bytes.Repeat(logRefFrame(bytes.Repeat([]byte("x"), 1000)), metalog.FileMaxUnsynced/1000+10)
	flipped := slices.Clone(big)
	flipped[20] ^= 0x10
	for _, tc := range []struct {
		name  string
		files map[int64][]byte
	}{
		{"bad frame in an earlier segment", map[int64][]byte{0: append(slices.Clone(valid), 1, 2, 3), 3: logRefFrames("d")}},
		{"bad checksum in an earlier segment", map[int64][]byte{0: func() []byte { b := slices.Clone(valid); b[9] ^= 1; return b }(), 3: logRefFrames("d")}},
		{"gap between segments", map[int64][]byte{0: valid, 5: logRefFrames("d")}},
		{"overlapping segments", map[int64][]byte{0: valid, 2: logRefFrames("d")}},
		{"bad frame far from the end", map[int64][]byte{0: flipped}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			sizes := map[string]int{}
			for base, data := range tc.files {
				path := writeLogSegment(t, dir, base, data)
				sizes[path] = len(data)
			}
			_, err := metalog.OpenFile(dir, nil)
			require.ErrorIs(t, err, metalog.ErrCorrupt)
			for path, size := range sizes {
				fi, err := os.Stat(path)
				require.NoError(t, err)
				require.Equal(t, int64(size), fi.Size())
			}
		})
	}

	t.Run("found by Read", func(t *testing.T) {
		dir := t.TempDir()
		l := openTestFileLog(t, dir, nil)
		metalogtest.AppendEntries(t, l, 0, 10)
		path := filepath.Join(dir, "00000000000000000000.log")
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		data[len(data)/2] ^= 0xff
		require.NoError(t, os.WriteFile(path, data, 0o644))
		err = l.Read(t.Context(), 0, func(int64, []byte) error { return nil })
		require.ErrorIs(t, err, metalog.ErrCorrupt)
	})
}

// TestFileRandomDamage damages the last segment at random (truncation,
// a flipped byte, garbage appended): Open recovers the longest valid
// prefix, never panics, and the log takes appends again.
func TestFileRandomDamage(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	opts := &metalog.FileOptions{SegmentBytes: 2 << 10}
	for iter := range 150 {
		dir := t.TempDir()
		l, err := metalog.OpenFile(dir, opts)
		require.NoError(t, err)
		n := 1 + rng.Int64N(60)
		metalogtest.AppendEntries(t, l, 0, n)
		require.NoError(t, l.Close())

		des, err := os.ReadDir(dir)
		require.NoError(t, err)
		lastName := des[len(des)-1].Name()
		lastBase, ok := metalog.ParseFileSegmentName(lastName)
		require.True(t, ok)
		path := filepath.Join(dir, lastName)
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		switch rng.IntN(3) {
		case 0:
			data = data[:rng.IntN(len(data)+1)]
		case 1:
			if len(data) > 0 {
				data[rng.IntN(len(data))] ^= byte(1 + rng.IntN(255))
			}
		case 2:
			junk := make([]byte, rng.IntN(64))
			for i := range junk {
				junk[i] = byte(rng.Uint32())
			}
			data = append(data, junk...)
		}
		require.NoError(t, os.WriteFile(path, data, 0o644))
		payloads, _ := logRefParse(data)
		want := lastBase + int64(len(payloads))

		l, err = metalog.OpenFile(dir, opts)
		require.NoError(t, err, "iteration %d", iter)
		require.Equal(t, want, l.End(), "iteration %d", iter)
		metalogtest.RequireEntries(t, metalogtest.ReadAll(t, l, 0), 0, want)
		metalogtest.AppendEntries(t, l, want, want+1)
		require.NoError(t, l.Close())
	}
}

// TestFileTrimKeepsEnd: Trim never deletes the segment that tells
// where the log ends.
func TestFileTrimKeepsEnd(t *testing.T) {
	dir := t.TempDir()
	opts := &metalog.FileOptions{SegmentBytes: 256}
	l := openTestFileLog(t, dir, opts)
	metalogtest.AppendEntries(t, l, 0, 50)
	require.NoError(t, l.Trim(t.Context(), 1<<40))
	des, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, des, 1)
	base, ok := metalog.ParseFileSegmentName(des[0].Name())
	require.True(t, ok)
	require.LessOrEqual(t, base, int64(49))
	require.Equal(t, base, l.Start())
	require.NoError(t, l.Close())
	l = openTestFileLog(t, dir, opts)
	require.Equal(t, int64(50), l.End())
	require.Equal(t, base, l.Start())
}

// The crash test: a child process appends and prints each offset once its
// result says it is durable; the parent kills it with SIGKILL at a random
// moment, reopens the log and checks that every printed offset is there,
// and that the log is a valid prefix.

const fileLogCrashEnv = "DISKLESS_FILELOG_CRASH_DIR"

// fileLogCrashEntry is the entry the crash test writes at off.
func fileLogCrashEntry(off int64) []byte {
	return append([]byte(fmt.Sprintf("crash-%d-", off)), bytes.Repeat([]byte{byte(off)}, int(off*131)%700)...)
}

func fileLogCrashOptions() *metalog.FileOptions {
	return &metalog.FileOptions{SegmentBytes: 16 << 10, MaxInFlight: 64}
}

// fileLogCrashChild is the child process of TestFileCrash: TestMain
// runs it instead of the tests when the environment names its folder.
func fileLogCrashChild(dir string) {
	l, err := metalog.OpenFile(dir, fileLogCrashOptions())
	if err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(2)
	}
	type sent struct {
		off int64
		ch  <-chan metalog.AppendResult
	}
	results := make(chan sent, 64)
	go func() {
		for s := range results {
			r := <-s.ch
			if r.Err != nil || r.Offset != s.off {
				fmt.Printf("error %d %+v\n", s.off, r)
				os.Exit(2)
			}
			fmt.Printf("ok %d\n", r.Offset) // unbuffered: one write per line
		}
	}()
	for {
		off := l.End()
		results <- sent{off, l.Append(fileLogCrashEntry(off))}
	}
}

func TestFileCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary; skipped in -short mode")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(3, 4))
	acked := int64(0) // every offset below it was printed
	for round := range 6 {
		cmd := exec.CommandContext(t.Context(), os.Args[0])
		cmd.Env = append(os.Environ(), fileLogCrashEnv+"="+dir)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		killAfter := rng.IntN(3000)
		if round == 0 {
			killAfter = 0
		}
		sc := bufio.NewScanner(out)
		lines := 0
		for sc.Scan() {
			line := sc.Text()
			if lines == killAfter {
				require.NoError(t, cmd.Process.Kill()) // SIGKILL
			}
			lines++
			off, ok := strings.CutPrefix(line, "ok ")
			require.True(t, ok, "child: %s", line)
			o, err := strconv.ParseInt(off, 10, 64)
			require.NoError(t, err)
			acked = max(acked, o+1)
		}
		if lines <= killAfter {
			require.NoError(t, cmd.Process.Kill())
		}
		err = cmd.Wait()
		require.Error(t, err, "the child was killed")

		l, err := metalog.OpenFile(dir, fileLogCrashOptions())
		require.NoError(t, err, "round %d", round)
		end := l.End()
		require.GreaterOrEqual(t, end, acked, "round %d: an acknowledged entry is lost", round)
		next := int64(0)
		require.NoError(t, l.Read(t.Context(), 0, func(off int64, e []byte) error {
			require.Equal(t, next, off)
			require.Equal(t, fileLogCrashEntry(off), e, "offset %d", off)
			next++
			return nil
		}))
		require.Equal(t, end, next)
		require.NoError(t, l.Close())
		t.Logf("round %d: killed after %d acknowledged appends; %d acknowledged in all, the log holds %d", round, lines, acked, end)
	}
}
