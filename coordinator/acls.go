package coordinator

import (
	"context"

	"github.com/diskless-go/diskless/coordinator/state"

	"github.com/diskless-go/diskless/acl"
)

// ACLs (Kafka's CreateAcls and DeleteAcls): bindings that allow or deny
// a principal an operation on resources. Like SCRAM credentials
// (scram.go) they live in shard 0 as records (aclCreateRecord,
// aclDeleteRecord) that every replica applies to its view and to the
// table acls. A binding is its own identity: the same binding created
// twice is one binding (Kafka accepts the second silently), and a
// deletion record names the exact bindings the leader found its filters
// to match when it decided.

// CreateACLs creates ACL bindings of this shard (see
// Coordinator.CreateACLs).
func (l *leader) CreateACLs(ctx context.Context, bindings []acl.Binding) ([]error, error) {
	o := &state.ACLCreateOp{BaseOp: state.NewBaseOp(ctx), Bindings: bindings}
	if err := l.submit(ctx, o, o.Done); err != nil {
		return nil, err
	}
	return o.Errs, nil
}

// DeleteACLs deletes the ACL bindings of this shard that the filters
// match (see Coordinator.DeleteACLs).
func (l *leader) DeleteACLs(ctx context.Context, filters []acl.Filter) ([][]acl.Binding, error) {
	o := &state.ACLDeleteOp{BaseOp: state.NewBaseOp(ctx), Filters: filters}
	if err := l.submit(ctx, o, o.Done); err != nil {
		return nil, err
	}
	return o.Out, nil
}
