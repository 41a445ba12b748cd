package store

import (
	"github.com/diskless-go/diskless/acl"
	"github.com/diskless-go/diskless/coordinator/state"
	"github.com/diskless-go/diskless/scram"
	"github.com/google/uuid"
)

func NewView(parent *state.View) *state.View {
	v := &state.View{
		Parent:      parent,
		Topics:      make(map[uuid.UUID]*state.TopicState),
		Names:       make(map[string]*state.TopicState),
		Parts:       make(map[int64]*state.PartState),
		Producers:   make(map[state.ProducerKey]*state.ProducerState),
		PendingKeys: make(map[string]struct{}),
		Recent:      make(map[string]*state.RecentCommit),
		Claims:      make(map[string]int64),
		Txns:        make(map[string]*state.Transaction),
		Creds:       make(map[state.ScramKey]*scram.Credential),
		ACLs:        make(map[acl.Binding]bool),
	}
	if parent != nil {
		v.PendingReceived = make(map[string]struct{})
		v.Epoch, v.NextPID, v.NextObjectID, v.NextProducerID = parent.Epoch, parent.NextPID, parent.NextObjectID, parent.NextProducerID
		v.SecurityVersion = parent.SecurityVersion
	}
	return v
}
