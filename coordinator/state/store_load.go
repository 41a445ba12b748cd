package state

// ObjectRow is an object's ID, key and commit time.
type ObjectRow struct {
	ID          int64
	Key         string
	CommittedAt int64
	Compacted   bool // written by a compaction
}
