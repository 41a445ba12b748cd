package segment

import (
	"encoding/hex"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kafkaerr"
)

// rmVector is a RemoteLogSegmentMetadata whose record bytes are written
// out by hand below, field by field, from Kafka's
// RemoteLogSegmentMetadataRecord.json (flexibleVersions "0+", so compact
// strings, arrays and bytes, and a tagged-field section closing every
// struct) and AbstractApiMessageSerde's frame.
func rmVector() RemoteLogSegmentMetadata {
	return RemoteLogSegmentMetadata{
		TopicID:             uuid.MustParse("00112233-4455-6677-8899-aabbccddeeff"),
		Topic:               "t",
		Partition:           3,
		SegmentID:           uuid.MustParse("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"),
		StartOffset:         100,
		EndOffset:           199,
		MaxTimestampMs:      vectorTimestamp,
		BrokerID:            1,
		EventTimestampMs:    vectorTimestamp + 1000,
		SegmentLeaderEpochs: []EpochEntry{{Epoch: 5, StartOffset: 100}, {Epoch: 6, StartOffset: 150}},
		SegmentSizeInBytes:  4096,
		State:               CopySegmentStarted,
		TxnIndexEmpty:       true,
	}
}

const rmVectorHex = `
	01                                  frameVersion uvarint 1 (AbstractApiMessageSerde.DEFAULT_FRAME_VERSION)
	00                                  apiKey uvarint 0 (RemoteLogSegmentMetadataRecord)
	00                                  version uvarint 0
	                                    RemoteLogSegmentId (struct)
	                                      TopicIdPartition (struct)
	02 74                                   Name: compact string, uvarint len+1 = 2, "t"
	00112233445566778899aabbccddeeff        Id: uuid, most then least significant 8 bytes
	00000003                                Partition: int32 3
	00                                      tagged fields: none
	0190a1b2c3d47e5f8a9b0c1d2e3f4a5b      Id: uuid of the segment
	00                                    tagged fields: none
	0000000000000064                    StartOffset: int64 100
	00000000000000c7                    EndOffset: int64 199
	00000001                            BrokerId: int32 1
	0000018bcfe56800                    MaxTimestampMs: int64 1700000000000
	0000018bcfe56be8                    EventTimestampMs: int64 1700000001000
	03                                  SegmentLeaderEpochs: compact array, uvarint len+1 = 3
	00000005 0000000000000064 00          LeaderEpoch 5, Offset 100, tagged fields: none
	00000006 0000000000000096 00          LeaderEpoch 6, Offset 150, tagged fields: none
	00001000                            SegmentSizeInBytes: int32 4096
	00                                  CustomMetadata: compact nullable bytes, 0 = null
	00                                  RemoteLogSegmentState: int8 0 (COPY_SEGMENT_STARTED)
	01                                  tagged fields: uvarint count 1
	00 01 01                              tag 0 (TxnIndexEmpty), size 1, true
`

// rmUnhex reads hex from each line up to its first field that is not
// hex, so that rmVectorHex can annotate its bytes.
func rmUnhex(t testing.TB, s string) []byte {
	t.Helper()
	var hexText strings.Builder
	for _, line := range strings.Split(s, "\n") {
		for _, f := range strings.Fields(line) {
			if _, err := hex.DecodeString(f); err != nil {
				break
			}
			hexText.WriteString(f)
		}
	}
	return unhex(t, hexText.String())
}

// Positions of fields in the vector.
const (
	rmNameAt   = 3
	rmStartAt  = 43
	rmEndAt    = 51
	rmEpochsAt = 79
	rmSizeAt   = 106
	rmStateAt  = 111
	rmTagsAt   = 112
)

func TestVectorRemoteLogSegmentMetadata(t *testing.T) {
	want := rmUnhex(t, rmVectorHex)
	require.Len(t, want, 3+2+16+4+1+16+1+8+8+4+8+8+1+2*13+4+1+1+4)
	m := rmVector()
	got, err := m.Marshal()
	require.NoError(t, err)
	require.Equal(t, want, got)

	var back RemoteLogSegmentMetadata
	require.NoError(t, back.Unmarshal(want))
	require.Equal(t, m, back)

	// Custom metadata, and TxnIndexEmpty false: no tagged field at all.
	m.CustomMetadata = []byte{0xca, 0xfe}
	m.TxnIndexEmpty = false
	m.State = CopySegmentFinished
	got, err = m.Marshal()
	require.NoError(t, err)
	require.Equal(t, want[:rmSizeAt], got[:rmSizeAt])
	require.Equal(t, unhex(t, "00001000 03cafe 01 00"), got[rmSizeAt:]) // size, bytes len+1 = 3, state 1, no tags
	require.NoError(t, back.Unmarshal(got))
	require.Equal(t, m, back)

	// An empty, not null, custom metadata.
	m.CustomMetadata = []byte{}
	got, err = m.Marshal()
	require.NoError(t, err)
	require.Equal(t, unhex(t, "01 01 00"), got[len(got)-3:])
	require.NoError(t, back.Unmarshal(got))
	require.NotNil(t, back.CustomMetadata)
	require.Empty(t, back.CustomMetadata)
}

func TestRemoteLogSegmentMetadataMarshalRefuses(t *testing.T) {
	for name, edit := range map[string]func(*RemoteLogSegmentMetadata){
		"negative start":   func(m *RemoteLogSegmentMetadata) { m.StartOffset = -1 },
		"end before start": func(m *RemoteLogSegmentMetadata) { m.EndOffset = 99 },
		"no epochs":        func(m *RemoteLogSegmentMetadata) { m.SegmentLeaderEpochs = nil },
		"unknown state":    func(m *RemoteLogSegmentMetadata) { m.State = 4 },
		"long topic":       func(m *RemoteLogSegmentMetadata) { m.Topic = string(make([]byte, 32768)) },
		"epochs unsorted": func(m *RemoteLogSegmentMetadata) {
			m.SegmentLeaderEpochs = []EpochEntry{{6, 150}, {5, 100}}
		},
		"epoch twice": func(m *RemoteLogSegmentMetadata) {
			m.SegmentLeaderEpochs = []EpochEntry{{5, 100}, {5, 150}}
		},
	} {
		m := rmVector()
		edit(&m)
		_, err := m.Marshal()
		require.Error(t, err, name)
		require.Equal(t, kafkaerr.InvalidRequest, kafkaerr.CodeOf(err), "%s: %v", name, err)
	}
	m := rmVector()
	m.Topic = string(make([]byte, 32767))
	_, err := m.Marshal()
	require.NoError(t, err)
}

func TestRemoteLogSegmentMetadataUnmarshal(t *testing.T) {
	good := rmUnhex(t, rmVectorHex)
	require.Equal(t, byte(0x03), good[rmEpochsAt])
	require.Equal(t, unhex(t, "00001000 00 00 01 00 01 01"), good[rmSizeAt:])
	splice := func(at, drop int, with string) []byte {
		out := slices.Clone(good[:at])
		out = append(out, unhex(t, with)...)
		return append(out, good[at+drop:]...)
	}

	// Accepted, as Kafka's reader accepts them.
	accepted := map[string]struct {
		in   []byte
		edit func(*RemoteLogSegmentMetadata)
	}{
		"version 1 with BrokerLeaderEpoch (tag 1)": {
			append(splice(2, 1, "01")[:rmTagsAt], unhex(t, "02 00 01 01 01 04 00000007")...), nil,
		},
		"unknown tags are skipped": {
			append(slices.Clone(good[:rmTagsAt]), unhex(t, "03 05 02 abcd 00 01 01 01 04 00000007")...), nil,
		},
		"a non-minimal varint": {splice(rmNameAt, 1, "8200"), nil},
		"frame version 0x80000001, which Java cuts to the short 1": {
			splice(0, 1, "8180808008"), nil,
		},
		"TxnIndexEmpty 2 is true": {
			append(slices.Clone(good[:rmTagsAt]), unhex(t, "01 00 01 02")...), nil,
		},
		"TxnIndexEmpty 0": {
			append(slices.Clone(good[:rmTagsAt]), unhex(t, "01 00 01 00")...),
			func(m *RemoteLogSegmentMetadata) { m.TxnIndexEmpty = false },
		},
		"epochs out of order and twice: a map": {
			splice(rmEpochsAt, 27, "04 00000006 0000000000000096 00 00000005 0000000000000001 00 00000005 0000000000000064 00"), nil,
		},
		"null custom metadata as a huge length": {
			splice(rmStateAt-1, 1, "ffffffff0f"), nil, // Java reads 0xffffffff as -1: length -2, null
		},
	}
	for name, c := range accepted {
		var got RemoteLogSegmentMetadata
		require.NoError(t, got.Unmarshal(c.in), name)
		want := rmVector()
		if c.edit != nil {
			c.edit(&want)
		}
		require.Equal(t, want, got, name)
	}
	if t.Failed() {
		return
	}

	// Refused.
	refused := map[string][]byte{
		"empty":                    nil,
		"frame version 0":          splice(0, 1, "00"),
		"frame version 2":          splice(0, 1, "02"),
		"frame version 32768":      splice(0, 1, "808002"),
		"frame version 0x10001":    splice(0, 1, "818004"),
		"apiKey 1":                 splice(1, 1, "01"),
		"version 2":                splice(2, 1, "02"),
		"null name":                splice(rmNameAt, 2, "00"),
		"name too long":            splice(rmNameAt, 2, "818002"),
		"name past the end":        splice(rmNameAt, 2, "7f"),
		"varint of 6 bytes":        splice(rmNameAt, 1, "8280808080"),
		"null epochs":              splice(rmEpochsAt, 27, "00"),
		"no epochs":                splice(rmEpochsAt, 27, "01"),
		"too many epochs":          splice(rmEpochsAt, 1, "0a"),
		"custom past the end":      splice(rmStateAt-1, 1, "7f"),
		"unknown state":            splice(rmStateAt, 1, "04"),
		"trailing byte":            append(slices.Clone(good), 0),
		"missing tags":             good[:rmTagsAt],
		"cut short":                good[:len(good)-1],
		"tag past the end":         append(slices.Clone(good[:rmTagsAt]), unhex(t, "01 05 05 00")...),
		"TxnIndexEmpty of 2":       append(slices.Clone(good[:rmTagsAt]), unhex(t, "01 00 02 0101")...),
		"tag count past the end":   append(slices.Clone(good[:rmTagsAt]), unhex(t, "02 00 01 01")...),
		"negative start":           splice(rmStartAt, 8, "ffffffffffffffff"),
		"end below start":          splice(rmEndAt, 8, "0000000000000063"),
		"struct tags past the end": splice(rmNameAt+2+16+4, 1, "01"),
	}
	for name, in := range refused {
		var got RemoteLogSegmentMetadata
		err := got.Unmarshal(in)
		require.Error(t, err, name)
		require.Equal(t, kafkaerr.CorruptMessage, kafkaerr.CodeOf(err), "%s: %v", name, err)
		require.Equal(t, RemoteLogSegmentMetadata{}, got, "%s: a failed Unmarshal leaves the value alone", name)
	}
}
