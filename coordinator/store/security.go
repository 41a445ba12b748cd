package store

import (
	"slices"

	"github.com/diskless-go/diskless/acl"
	"github.com/diskless-go/diskless/coordinator/state"
	"github.com/diskless-go/diskless/scram"
)

// SecurityState is the cluster's SCRAM credentials and ACLs, as
// Coordinator.Security returns them.
type SecurityState struct {
	// Version grows with every change of the credentials or the ACLs;
	// every broker sees the same Version for the same state.
	Version int64
	// ACLs are every binding, ordered by resource type, resource name,
	// pattern type, principal, host, operation, permission. Nil when
	// Changed is false.
	ACLs []acl.Binding
	// Credentials are every SCRAM credential, ordered by user then
	// mechanism. Nil when Changed is false.
	Credentials []scram.Credential
	// Changed is false when Version is the one the caller passed: the
	// lists are then left out.
	Changed bool
}

// SecuritySnapshot is the security state as one applied entry left it:
// immutable once published.
type SecuritySnapshot struct {
	version int64
	acls    []acl.Binding      // in compareBindings order
	creds   []scram.Credential // in compareCredentials order
}

// newSecuritySnapshot returns the security state of the committed view.
func newSecuritySnapshot(root *state.View) *SecuritySnapshot {
	s := &SecuritySnapshot{version: root.SecurityVersion}
	root.EachACL(func(b acl.Binding) { s.acls = append(s.acls, b) })
	slices.SortFunc(s.acls, state.CompareBindings)
	root.EachCredential(func(c *scram.Credential) { s.creds = append(s.creds, state.CloneCredential(*c)) })
	slices.SortFunc(s.creds, CompareCredentials)
	return s
}

// State returns the state for a caller that has version since: copies
// the caller owns.
func (s *SecuritySnapshot) State(since int64) SecurityState {
	if since == s.version {
		return SecurityState{Version: s.version}
	}
	st := SecurityState{Version: s.version, Changed: true, ACLs: slices.Clone(s.acls)}
	if st.ACLs == nil {
		st.ACLs = []acl.Binding{}
	}
	st.Credentials = make([]scram.Credential, len(s.creds))
	for i, c := range s.creds {
		st.Credentials[i] = state.CloneCredential(c)
	}
	return st
}

// Credential returns the credential of user for m, a copy.
func (s *SecuritySnapshot) Credential(user string, m scram.Mechanism) (scram.Credential, bool) {
	i, ok := slices.BinarySearchFunc(s.creds, scram.Credential{User: user, Mechanism: m}, CompareCredentials)
	if !ok {
		return scram.Credential{}, false
	}
	return state.CloneCredential(s.creds[i]), true
}
