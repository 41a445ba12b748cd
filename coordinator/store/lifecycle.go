package store

import "github.com/diskless-go/diskless/coordinator/state"

// ObjectRowState is an object's key and the state of its row.
type ObjectRowState struct {
	Key string
	state.ObjectState
}
