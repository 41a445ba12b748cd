package metalog_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/diskless-go/diskless/coordinator/metalog"
)

// FuzzFileSegment opens any bytes as the only segment of a metalog.File:
// Open recovers or fails with metalog.ErrCorrupt, never panics; what it reads
// is the valid frames at the start of the bytes (every input here is
// shorter than the recovery window, so any bad frame is a torn tail); and
// the recovered log takes an append that a reopen reads back.
func FuzzFileSegment(f *testing.F) {
	f.Add([]byte{})
	f.Add(logRefFrames("a", "bb", ""))
	f.Add(append(logRefFrames("a", "bb"), 0, 0, 0))
	f.Add(append(logRefFrames("a"), make([]byte, 64)...))
	f.Add(append(append(logRefFrames("x"), 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4), logRefFrames("y")...))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "00000000000000000000.log")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		want, validLen := logRefParse(data)
		l, err := metalog.OpenFile(dir, &metalog.FileOptions{NoSync: true})
		if err != nil {
			if len(data)-validLen > metalog.FileMaxUnsynced && errors.Is(err, metalog.ErrCorrupt) {
				return
			}
			t.Fatalf("Open: %v", err)
		}
		defer l.Close()
		var got [][]byte
		if err := l.Read(t.Context(), 0, func(_ int64, e []byte) error {
			got = append(got, bytes.Clone(e))
			return nil
		}); err != nil {
			t.Fatalf("Read: %v", err)
		}
		if len(got) != len(want) {
			t.Fatalf("read %d entries, want %d", len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("entry %d differs", i)
			}
		}
		if fi, err := os.Stat(path); err != nil || fi.Size() != int64(validLen) {
			t.Fatalf("the segment was not truncated to %d bytes: %v %v", validLen, fi.Size(), err)
		}
		if r := <-l.Append([]byte("next")); r.Err != nil || r.Offset != int64(len(want)) {
			t.Fatalf("Append after recovery: %+v", r)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l, err = metalog.OpenFile(dir, &metalog.FileOptions{NoSync: true})
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer l.Close()
		if l.End() != int64(len(want))+1 {
			t.Fatalf("reopened End %d, want %d", l.End(), len(want)+1)
		}
	})
}

// FuzzFileFrames appends entries cut from the input to a metalog.File of
// small segments, then truncates the last segment at cut and flips the
// bits of flip at flipAt in it: the reopened log holds exactly the entries
// of the earlier segments and the valid frames left at the start of the
// last one, in order.
func FuzzFileFrames(f *testing.F) {
	f.Add([]byte("a,bb,ccc,,dddd"), uint16(7), uint16(3), byte(1))
	f.Add(bytes.Repeat([]byte("0123456789,"), 40), uint16(1000), uint16(100), byte(0x80))
	f.Add([]byte(",,,,"), uint16(0), uint16(0), byte(0))
	f.Fuzz(func(t *testing.T, input []byte, cut, flipAt uint16, flip byte) {
		entries := bytes.Split(input, []byte(","))
		dir := t.TempDir()
		opts := &metalog.FileOptions{SegmentBytes: 64, NoSync: true}
		l, err := metalog.OpenFile(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range entries {
			if r := <-l.Append(e); r.Err != nil || r.Offset != int64(i) {
				t.Fatalf("Append %d: %+v", i, r)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}

		des, err := os.ReadDir(dir)
		if err != nil || len(des) == 0 {
			t.Fatalf("ReadDir: %v", err)
		}
		last := des[len(des)-1].Name()
		base, _ := metalog.ParseFileSegmentName(last)
		path := filepath.Join(dir, last)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		data = data[:min(int(cut), len(data))]
		if len(data) > 0 {
			data[int(flipAt)%len(data)] ^= flip
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		valid, _ := logRefParse(data)
		want := entries[:base+int64(len(valid))]

		l, err = metalog.OpenFile(dir, opts)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer l.Close()
		i := 0
		if err := l.Read(t.Context(), 0, func(off int64, e []byte) error {
			if off != int64(i) || i >= len(want) || !bytes.Equal(e, want[i]) {
				t.Fatalf("entry %d (offset %d) differs", i, off)
			}
			i++
			return nil
		}); err != nil {
			t.Fatalf("Read: %v", err)
		}
		if i != len(want) {
			t.Fatalf("read %d entries, want %d", i, len(want))
		}
	})
}
