package state

// ObjectState is what decisions and the lifecycle need of an object's row.
type ObjectState struct {
	ID, Live int64
	DeadAt   int64 // when live went to 0
	Owners   []int32
	Received bool
}

// Owns reports whether shard owns the object: it is the first owner, or
// it has received it.
func (s ObjectState) Owns(shard int) bool {
	return s.Received || len(s.Owners) == 0 || int(s.Owners[0]) == shard
}
