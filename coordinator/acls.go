package coordinator

import (
	"cmp"
	"context"
	"encoding/binary"
	"slices"
	"strings"

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

// aclCreateRecord adds bindings (none of which the view held).
type aclCreateRecord struct {
	Bindings []acl.Binding
}

// aclDeleteRecord removes bindings (each of which the view held).
type aclDeleteRecord struct {
	Bindings []acl.Binding
}

func (aclCreateRecord) kind() recordType { return recACLCreate }
func (aclDeleteRecord) kind() recordType { return recACLDelete }

func (r aclCreateRecord) appendTo(b []byte) []byte { return appendBindings(b, r.Bindings) }
func (r aclDeleteRecord) appendTo(b []byte) []byte { return appendBindings(b, r.Bindings) }

// appendBindings appends a count and each binding: resource type uint8,
// resource name, pattern type uint8, principal, host, operation uint8,
// permission uint8 (the enumerations with Kafka's codes).
func appendBindings(b []byte, bs []acl.Binding) []byte {
	b = binary.AppendUvarint(b, uint64(len(bs)))
	for _, x := range bs {
		b = append(b, byte(x.ResourceType))
		b = appendString(b, x.ResourceName)
		b = append(b, byte(x.PatternType))
		b = appendString(b, x.Principal)
		b = appendString(b, x.Host)
		b = append(b, byte(x.Operation), byte(x.Permission))
	}
	return b
}

// bindings reads what appendBindings wrote: a non-empty list of bindings
// that recordBinding accepts.
func (d *decoder) bindings() []acl.Binding {
	n := d.count(7) // a binding takes at least 7 bytes
	if d.err == nil && n == 0 {
		d.fail("an empty list of ACL bindings")
	}
	var out []acl.Binding
	for i := 0; i < n && d.err == nil; i++ {
		x := acl.Binding{ResourceType: acl.ResourceType(d.byte()), ResourceName: d.string(), PatternType: acl.PatternType(d.byte()),
			Principal: d.string(), Host: d.string(), Operation: acl.Operation(d.byte()), Permission: acl.Permission(d.byte())}
		if d.err == nil && !recordBinding(x) {
			d.fail("ACL binding %+v", x)
		}
		out = append(out, x)
	}
	return out
}

func (d *decoder) aclCreate() aclCreateRecord { return aclCreateRecord{Bindings: d.bindings()} }
func (d *decoder) aclDelete() aclDeleteRecord { return aclDeleteRecord{Bindings: d.bindings()} }

// recordBinding reports whether a binding may be in a record: its
// enumerations are values a binding has (Kafka's codes; not UNKNOWN, nor
// the ANY and MATCH of filters). Part of the format. It is looser than
// acl.Binding.Validate on purpose: what a record holds must decode whatever
// validation the leader that wrote it applied.
func recordBinding(b acl.Binding) bool {
	return b.ResourceType >= acl.ResourceTopic && b.ResourceType <= acl.ResourceUser &&
		(b.PatternType == acl.PatternLiteral || b.PatternType == acl.PatternPrefixed) &&
		b.Operation >= acl.OpAll && b.Operation <= acl.OpTwoPhaseCommit &&
		(b.Permission == acl.PermissionDeny || b.Permission == acl.PermissionAllow)
}

// compareBindings orders bindings by every field, resource first.
func compareBindings(a, b acl.Binding) int {
	return cmp.Or(
		cmp.Compare(a.ResourceType, b.ResourceType),
		strings.Compare(a.ResourceName, b.ResourceName),
		cmp.Compare(a.PatternType, b.PatternType),
		strings.Compare(a.Principal, b.Principal),
		strings.Compare(a.Host, b.Host),
		cmp.Compare(a.Operation, b.Operation),
		cmp.Compare(a.Permission, b.Permission),
	)
}

// hasACL reports whether v holds the binding.
func (v *view) hasACL(b acl.Binding) bool {
	for ; v != nil; v = v.parent {
		if ok, found := v.acls[b]; found {
			return ok
		}
	}
	return false
}

// eachACL calls f with every binding v holds, in no order.
func (v *view) eachACL(f func(b acl.Binding)) {
	seen := map[acl.Binding]bool{}
	for w := v; w != nil; w = w.parent {
		for b := range w.acls {
			if !seen[b] {
				seen[b] = true
				if v.hasACL(b) {
					f(b)
				}
			}
		}
	}
}

// applyACL applies an ACL record to the view.
func (v *view) applyACL(r record) {
	switch r := r.(type) {
	case aclCreateRecord:
		for _, b := range r.Bindings {
			v.acls[b] = true
		}
	case aclDeleteRecord:
		for _, b := range r.Bindings {
			if v.parent == nil {
				delete(v.acls, b)
			} else {
				v.acls[b] = false
			}
		}
	}
	v.securityVersion++
}

// aclCreateOp decides CreateACLs; errs are the answers.
type aclCreateOp struct {
	baseOp
	bindings []acl.Binding
	errs     []error
}

func (o *aclCreateOp) coords() int { return max(len(o.bindings), 1) }

func (o *aclCreateOp) check(g *group) {
	o.errs = make([]error, len(o.bindings))
	var added []acl.Binding
	for i, b := range o.bindings {
		if err := b.Validate(); err != nil {
			o.errs[i] = err
			continue
		}
		if !g.spec.hasACL(b) && !slices.Contains(added, b) {
			added = append(added, b)
		}
	}
	if len(added) > 0 {
		g.add(aclCreateRecord{Bindings: added})
	}
}

// aclDeleteOp decides DeleteACLs; out are the answers.
type aclDeleteOp struct {
	baseOp
	filters []acl.Filter
	out     [][]acl.Binding
}

func (o *aclDeleteOp) coords() int { return max(len(o.filters), 1) }

func (o *aclDeleteOp) check(g *group) {
	var all []acl.Binding
	g.spec.eachACL(func(b acl.Binding) { all = append(all, b) })
	slices.SortFunc(all, compareBindings)
	o.out = make([][]acl.Binding, len(o.filters))
	gone := map[acl.Binding]bool{}
	for i, f := range o.filters {
		for _, b := range all {
			if f.Matches(b) {
				o.out[i] = append(o.out[i], b)
				gone[b] = true
			}
		}
	}
	if len(gone) == 0 {
		return
	}
	var r aclDeleteRecord
	for _, b := range all {
		if gone[b] {
			r.Bindings = append(r.Bindings, b)
		}
	}
	g.add(r)
}

// CreateACLs creates ACL bindings of this shard (see
// Coordinator.CreateACLs).
func (c *leader) CreateACLs(ctx context.Context, bindings []acl.Binding) ([]error, error) {
	o := &aclCreateOp{baseOp: newBaseOp(ctx), bindings: bindings}
	if err := c.submit(ctx, o, o.done); err != nil {
		return nil, err
	}
	return o.errs, nil
}

// DeleteACLs deletes the ACL bindings of this shard that the filters
// match (see Coordinator.DeleteACLs).
func (c *leader) DeleteACLs(ctx context.Context, filters []acl.Filter) ([][]acl.Binding, error) {
	o := &aclDeleteOp{baseOp: newBaseOp(ctx), filters: filters}
	if err := c.submit(ctx, o, o.done); err != nil {
		return nil, err
	}
	return o.out, nil
}

// The writer's statements of ACL records.
const (
	sqlInsertACL = "INSERT OR IGNORE INTO acls (resource_type, resource_name, pattern_type, principal, host, operation, permission) VALUES (?, ?, ?, ?, ?, ?, ?)"
	sqlDeleteACL = "DELETE FROM acls WHERE resource_type = ? AND resource_name = ? AND pattern_type = ? AND principal = ? AND host = ? AND operation = ? AND permission = ?"
	sqlLoadACLs  = "SELECT resource_type, resource_name, pattern_type, principal, host, operation, permission FROM acls"
)

// writeACLs writes an ACL record.
func (s *store) writeACLs(ctx context.Context, r record) error {
	q, bs := sqlInsertACL, []acl.Binding(nil)
	switch r := r.(type) {
	case aclCreateRecord:
		bs = r.Bindings
	case aclDeleteRecord:
		q, bs = sqlDeleteACL, r.Bindings
	}
	for _, b := range bs {
		if _, err := s.exec(ctx, q, int64(b.ResourceType), b.ResourceName, int64(b.PatternType), b.Principal, b.Host, int64(b.Operation), int64(b.Permission)); err != nil {
			return err
		}
	}
	return nil
}
