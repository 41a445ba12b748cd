package wal

import (
	"crypto/rand"
	"time"

	"github.com/google/uuid"

	"github.com/diskless-go/diskless/wal/walmeta"
)

// keyDir is the folder of WAL objects under a bucket prefix.
const keyDir = walmeta.KeyDir

// ParseObjectKey returns the UUID and the creation time (millisecond
// precision) of an object key with the given prefix: see
// [walmeta.ParseObjectKey].
func ParseObjectKey(prefix, key string) (uuid.UUID, time.Time, error) {
	return walmeta.ParseObjectKey(prefix, key)
}

// NewObjectKey returns a fresh object key, <prefix>wal/<UUIDv7>, whose UUID
// carries the time now (milliseconds) and 74 random bits.
func NewObjectKey(prefix string, now time.Time) string {
	return prefix + keyDir + newUUIDv7(now).String()
}

// newUUIDv7 makes a version 7 UUID (RFC 9562) for the time now: 48 bits of
// Unix milliseconds, then random bits, with the version and variant set.
func newUUIDv7(now time.Time) uuid.UUID {
	var id uuid.UUID
	_, _ = rand.Read(id[:]) // never fails (crypto/rand, Go 1.24+)
	ms := uint64(now.UnixMilli())
	id[0], id[1], id[2] = byte(ms>>40), byte(ms>>32), byte(ms>>24)
	id[3], id[4], id[5] = byte(ms>>16), byte(ms>>8), byte(ms)
	id[6] = 0x70 | id[6]&0x0f
	id[8] = 0x80 | id[8]&0x3f
	return id
}
