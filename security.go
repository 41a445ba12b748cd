package diskless

import (
	"context"

	"github.com/diskless-go/diskless/acl"
	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/scram"
)

// Security: the cluster's SCRAM credentials and ACLs, kept by the
// coordinator as records of shard 0 (see package coordinator's
// security.go): a change made on any broker is seen by every broker of
// the cluster within a second, survives restarts, and is carried by
// snapshots. The Kafka front end maps AlterUserScramCredentials to
// AlterScramCredentials, CreateAcls to CreateACLs, DeleteAcls to
// DeleteACLs; its authorizer and SASL authenticator read them with
// Security (polled with the Version it has) and ScramCredential.

// ScramDeletion names a SCRAM credential to delete: a user's, for one
// mechanism.
type ScramDeletion = coordinator.ScramDeletion

// SecurityState is the cluster's SCRAM credentials and ACLs, with a
// Version that grows with every change of either (see Broker.Security).
type SecurityState = coordinator.SecurityState

// AlterScramCredentials creates or replaces (upserts) and deletes SCRAM
// credentials. It returns one error per item, upserts first, then
// deletions, nil for those done, with Kafka's codes
// (UNSUPPORTED_SASL_MECHANISM, UNACCEPTABLE_CREDENTIAL,
// RESOURCE_NOT_FOUND, DUPLICATE_RESOURCE: see
// coordinator.Coordinator.AlterScramCredentials); an error is a user's,
// and none of that user's changes is made. The error return is for the
// call as a whole.
func (b *Broker) AlterScramCredentials(ctx context.Context, upserts []scram.Credential, deletions []ScramDeletion) ([]error, error) {
	if b.closed.Load() {
		return nil, ErrClosed
	}
	errs, err := b.coord.AlterScramCredentials(ctx, upserts, deletions)
	return errs, b.closedErr(err)
}

// CreateACLs creates ACL bindings. It returns one error per binding, nil
// for those created or already there (an existing binding is not
// duplicated); an invalid binding is INVALID_REQUEST and changes
// nothing.
func (b *Broker) CreateACLs(ctx context.Context, bindings []acl.Binding) ([]error, error) {
	if b.closed.Load() {
		return nil, ErrClosed
	}
	errs, err := b.coord.CreateACLs(ctx, bindings)
	return errs, b.closedErr(err)
}

// DeleteACLs deletes the ACL bindings the filters match and returns, for
// each filter, the bindings it matched (deleted).
func (b *Broker) DeleteACLs(ctx context.Context, filters []acl.Filter) ([][]acl.Binding, error) {
	if b.closed.Load() {
		return nil, ErrClosed
	}
	out, err := b.coord.DeleteACLs(ctx, filters)
	return out, b.closedErr(err)
}

// Security returns every ACL binding and SCRAM credential with their
// Version; when since is that Version, only the Version (Changed false),
// so that polling it is cheap. since -1 always gets the lists. The
// caller owns the slices.
func (b *Broker) Security(ctx context.Context, since int64) (SecurityState, error) {
	if b.closed.Load() {
		return SecurityState{}, ErrClosed
	}
	st, err := b.coord.Security(ctx, since)
	return st, b.closedErr(err)
}

// ScramCredential returns user's SCRAM credential for mechanism m; false
// if there is none.
func (b *Broker) ScramCredential(ctx context.Context, user string, m scram.Mechanism) (scram.Credential, bool, error) {
	if b.closed.Load() {
		return scram.Credential{}, false, ErrClosed
	}
	c, ok, err := b.coord.ScramCredential(ctx, user, m)
	return c, ok, b.closedErr(err)
}
