package metalog

// Fuzz targets of the names and objects a Bucket and a File find in the
// bucket or folder they open. Their seeds run under plain `go test`;
// `make fuzz` fuzzes them.

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob/memblob"
)

// FuzzLogNames: the parsers of the names the logs list never panic, and
// accept a name only when it is exactly what the matching writer names: a
// Bucket entry's key, a File segment's file name. Anything else in the
// folder or bucket is ignored, never taken for one of them.
func FuzzLogNames(f *testing.F) {
	for _, s := range []string{
		"p/meta/0/log/00000000000000000042", "p/meta/0/log/0000000000000000042", "p/meta/0/log/-0000000000000000042",
		"p/meta/0/log/09223372036854775807", "p/meta/0/log/09223372036854775808", "p/meta/0/log/0000000000000000004x",
		"00000000000000000007.log", "00000000000000000007.log.tmp", "+0000000000000000007.log", "",
	} {
		f.Add(s)
	}
	l := &Bucket{dir: "p/meta/0/log/"}
	f.Fuzz(func(t *testing.T, name string) {
		if off, ok := l.parseKey(name); ok {
			require.GreaterOrEqual(t, off, int64(0))
			require.Equal(t, name, l.key(off))
		}
		if base, ok := parseFileLogSegmentName(name); ok {
			require.GreaterOrEqual(t, base, int64(0))
			require.Equal(t, name, fileLogSegmentName(base))
		}
	})
}

// fzBucketObjects turns fuzz input into the keys and contents of a
// bucket under the log prefix p/meta/0/: records of a kind byte, a
// two-byte offset, a length byte and that many content bytes. Kinds: an
// entry (the 20-digit key), a key that only looks like one, a key of
// another folder, a temporary object beside an entry.
func fzBucketObjects(data []byte) map[string][]byte {
	objs := map[string][]byte{}
	for len(data) >= 4 && len(objs) < 64 {
		kind, off, n := data[0]%4, int64(data[1])<<8|int64(data[2]), int(data[3])
		data = data[4:]
		n = min(n, len(data))
		content := bytes.Clone(data[:n])
		data = data[n:]
		var key string
		switch kind {
		case 0:
			key = fmt.Sprintf("p/meta/0/log/%020d", off)
		case 1:
			key = fmt.Sprintf("p/meta/0/log/%019d", off)
		case 2:
			key = fmt.Sprintf("p/meta/1/log/%020d", off)
		case 3:
			key = fmt.Sprintf("p/meta/0/log/%020d.tmp", off)
		}
		objs[key] = content
	}
	return objs
}

// fzEncodeBucketObjects is fzBucketObjects' inverse for seeds.
func fzEncodeBucketObjects(kinds []byte, offs []uint16, contents []string) []byte {
	var b []byte
	for i := range kinds {
		b = append(b, kinds[i], byte(offs[i]>>8), byte(offs[i]), byte(len(contents[i])))
		b = append(b, contents[i]...)
	}
	return b
}

// FuzzBucketObjects opens a Bucket over a bucket holding any set of
// objects under its prefix: OpenBucket must find the run of entries
// that ends at the highest one (entries below a gap are left-overs of a
// trim), ignore every other key, read the run's contents back in order,
// report an offset below it as trimmed, and take the next append, and a
// second writer's claim, after it.
func FuzzBucketObjects(f *testing.F) {
	f.Add(fzEncodeBucketObjects([]byte{0, 0, 0}, []uint16{0, 1, 2}, []string{"a", "b", ""}))
	f.Add(fzEncodeBucketObjects([]byte{0, 0, 0, 0}, []uint16{0, 2, 3, 4}, []string{"old", "c", "d", "e"}))
	f.Add(fzEncodeBucketObjects([]byte{0, 1, 2, 3, 0}, []uint16{7, 8, 8, 8, 9}, []string{"x", "junk", "other", "tmp", "y"}))
	f.Add(fzEncodeBucketObjects([]byte{1, 2, 3}, []uint16{0, 0, 0}, []string{"", "", ""}))
	f.Add(fzEncodeBucketObjects([]byte{0}, []uint16{65535}, []string{"last"}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx := t.Context()
		objs := fzBucketObjects(data)
		bucket := memblob.OpenBucket(nil)
		defer bucket.Close()
		var offs []int64
		for key, content := range objs {
			require.NoError(t, bucket.WriteAll(ctx, key, content, nil))
			if rest, ok := strings.CutPrefix(key, "p/meta/0/log/"); ok && len(rest) == 20 {
				var off int64
				_, err := fmt.Sscanf(rest, "%d", &off)
				require.NoError(t, err)
				offs = append(offs, off)
			}
		}
		// The reference: the longest run of consecutive offsets that ends
		// at the highest.
		slices.Sort(offs)
		var start, end int64
		if len(offs) > 0 {
			end = offs[len(offs)-1] + 1
			start = end - 1
			for i := len(offs) - 2; i >= 0 && offs[i] == start-1; i-- {
				start--
			}
		}

		l, err := OpenBucket(ctx, bucket, "p/meta/0/", &BucketOptions{MaxAttempts: 1, TrimGrace: -1})
		require.NoError(t, err)
		defer l.Close()
		require.Equal(t, start, l.Start())
		require.Equal(t, end, l.End())
		next := start
		require.NoError(t, l.Read(ctx, start, func(off int64, e []byte) error {
			require.Equal(t, next, off)
			require.Equal(t, objs[l.key(off)], e, "offset %d", off)
			next++
			return nil
		}))
		require.Equal(t, end, next)
		if start > 0 {
			require.ErrorIs(t, l.Read(ctx, start-1, func(int64, []byte) error { return nil }), ErrTrimmed)
		}

		r := <-l.Append([]byte("appended"))
		require.NoError(t, r.Err)
		require.Equal(t, end, r.Offset)
		got, err := bucket.ReadAll(ctx, l.key(end))
		require.NoError(t, err)
		require.Equal(t, []byte("appended"), got)
		for key, content := range objs {
			got, err := bucket.ReadAll(ctx, key)
			require.NoError(t, err)
			require.Equal(t, content, got, "%s was overwritten", key)
		}

		// A second writer, opened before the append, claims after it.
		l2, err := OpenBucket(ctx, bucket, "p/meta/0/", &BucketOptions{MaxAttempts: 1})
		require.NoError(t, err)
		defer l2.Close()
		require.Equal(t, end+1, l2.End())
		r = <-l.Append([]byte("fenced?"))
		require.NoError(t, r.Err)
		off, err := l2.Claim(ctx, []byte("claim"))
		require.NoError(t, err)
		require.Equal(t, end+2, off)
		r = <-l.Append([]byte("fenced"))
		require.ErrorIs(t, r.Err, ErrFenced)
	})
}
