package coordinator

import (
	"strconv"
	"testing"

	"github.com/diskless-go/diskless/coordinator/store"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kbatch"
)

// The SQL default of segment_bytes, written as a literal in the schema
// and in addedColumns, is Kafka's default of segment.bytes.
func TestSchemaSegmentBytesDefault(t *testing.T) {
	decl := "INTEGER NOT NULL DEFAULT " + strconv.Itoa(kbatch.DefaultSegmentBytes)
	require.Contains(t, store.Schema, "segment_bytes "+decl+",")
	found := false
	for _, col := range store.AddedColumns {
		if col.Table == "topics" && col.Column == "segment_bytes" {
			require.Equal(t, decl, col.Decl)
			found = true
		}
	}
	require.True(t, found)
}
