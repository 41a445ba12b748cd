package cluster

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFrameRoundTrip(t *testing.T) {
	for _, r := range []request{
		{},
		{id: 1, shard: 2, deadline: 3, method: "m", body: []byte("body")},
		{id: ^uint64(0), shard: ^uint32(0), deadline: -1, method: string(make([]byte, 65535)), body: make([]byte, 1000)},
	} {
		b := appendRequest(nil, r)
		require.Len(t, b, lengthSize+requestSize(r.method, len(r.body)))
		frame, err := readFrame(bytes.NewReader(b), requestHeaderSize, DefaultMaxFrameBytes)
		require.NoError(t, err)
		got, err := parseRequest(frame)
		require.NoError(t, err)
		require.Equal(t, r.id, got.id)
		require.Equal(t, r.shard, got.shard)
		require.Equal(t, r.deadline, got.deadline)
		require.Equal(t, r.method, got.method)
		require.Equal(t, len(r.body), len(got.body))
		require.True(t, bytes.Equal(r.body, got.body))
	}

	b := append(appendResponseHeader(nil, 42, 3), "abc"...)
	frame, err := readFrame(bytes.NewReader(b), responseHeaderSize, DefaultMaxFrameBytes)
	require.NoError(t, err)
	id, body, err := parseResponse(frame)
	require.NoError(t, err)
	require.Equal(t, uint64(42), id)
	require.Equal(t, []byte("abc"), body)
}

func TestReadFrameErrors(t *testing.T) {
	req := appendRequest(nil, request{id: 1, method: "method", body: []byte("body")})
	for _, tc := range []struct {
		name string
		in   []byte
		max  int
		want error
	}{
		{"empty", nil, 1 << 20, io.EOF},
		{"torn length", req[:3], 1 << 20, ErrTruncated},
		{"torn frame", req[:len(req)-1], 1 << 20, ErrTruncated},
		{"torn header", req[:10], 1 << 20, ErrTruncated},
		{"too large", req, len(req) - lengthSize - 1, ErrFrameTooLarge},
		{"huge length", []byte{0xff, 0xff, 0xff, 0xff}, 1 << 20, ErrFrameTooLarge},
		{"shorter than its header", []byte{0, 0, 0, 3, 1, 2, 3}, 1 << 20, ErrBadFrame},
		{"method past the end", func() []byte {
			b := bytes.Clone(req)
			b[lengthSize+20], b[lengthSize+21] = 0, 11 // method "method" + "body" is 10 bytes
			return b
		}(), 1 << 20, ErrBadFrame},
	} {
		t.Run(tc.name, func(t *testing.T) {
			frame, err := readFrame(bytes.NewReader(tc.in), requestHeaderSize, tc.max)
			if err == nil {
				_, err = parseRequest(frame)
			}
			require.ErrorIs(t, err, tc.want)
			if tc.want == io.EOF {
				require.Equal(t, io.EOF, err, "a clean end is io.EOF, unwrapped")
			}
		})
	}
}

// FuzzReadFrame reads request and response frames from arbitrary bytes:
// nothing panics, nothing is read past the input, errors are io.EOF (at a
// frame boundary) or one of the package's sentinels, and a frame read and
// encoded again gives the bytes it was read from.
func FuzzReadFrame(f *testing.F) {
	f.Add(appendRequest(nil, request{id: 1, shard: 2, deadline: 3, method: "commit", body: []byte("body")}), false)
	f.Add(append(appendRequest(nil, request{id: 9}), appendRequest(nil, request{id: 10, method: "x"})...), false)
	f.Add(append(appendResponseHeader(nil, 7, 3), "abc"...), true)
	f.Add([]byte{0, 0, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8}, true)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, false)
	f.Add([]byte{0, 0, 0, 22, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, false)
	f.Fuzz(func(t *testing.T, data []byte, response bool) {
		const maxLen = 1 << 16
		before := bytes.Clone(data)
		r := bytes.NewReader(data)
		for {
			start := len(data) - r.Len()
			var (
				frame []byte
				err   error
			)
			if response {
				frame, err = readFrame(r, responseHeaderSize, maxLen)
			} else {
				frame, err = readFrame(r, requestHeaderSize, maxLen)
			}
			if err != nil {
				if err != io.EOF && !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrFrameTooLarge) && !errors.Is(err, ErrBadFrame) {
					t.Fatalf("readFrame: unexpected error %v", err)
				}
				if err == io.EOF {
					require.Equal(t, len(data), start, "io.EOF before the input's end")
				}
				break
			}
			end := len(data) - r.Len()
			require.LessOrEqual(t, len(frame), maxLen)
			require.Equal(t, data[start+lengthSize:end], frame)
			var again []byte
			if response {
				id, body, err := parseResponse(frame)
				require.NoError(t, err, "readFrame checked the header's length")
				again = append(appendResponseHeader(nil, id, len(body)), body...)
			} else {
				req, err := parseRequest(frame)
				if err != nil {
					require.ErrorIs(t, err, ErrBadFrame)
					continue
				}
				again = appendRequest(nil, req)
			}
			require.Equal(t, data[start:end], again, "encoded again")
		}
		require.Equal(t, before, data, "the input changed")
	})
}
