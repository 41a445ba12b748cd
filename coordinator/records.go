package coordinator

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/diskless-go/diskless/coordinator/state"
)

func crcOf(b []byte) uint32 { return crc32.Checksum(b, state.Castagnoli) }

// entryCRC returns an encoded entry's checksum (its first field), or 0 if
// it is too short to have one.
func entryCRC(b []byte) uint32 {
	if len(b) < 4 {
		return 0
	}
	return binary.BigEndian.Uint32(b)
}
