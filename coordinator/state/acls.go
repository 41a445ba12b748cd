package state

import (
	"cmp"
	"encoding/binary"
	"slices"
	"strings"

	"github.com/diskless-go/diskless/acl"
)

// aclCreateRecord adds bindings (none of which the view held).
type ACLCreateRecord struct {
	Bindings []acl.Binding
}

// aclDeleteRecord removes bindings (each of which the view held).
type ACLDeleteRecord struct {
	Bindings []acl.Binding
}

func (ACLCreateRecord) Kind() recordType { return recACLCreate }

func (ACLDeleteRecord) Kind() recordType { return recACLDelete }

func (r ACLCreateRecord) AppendTo(b []byte) []byte { return appendBindings(b, r.Bindings) }

func (r ACLDeleteRecord) AppendTo(b []byte) []byte { return appendBindings(b, r.Bindings) }

// appendBindings appends a count and each binding: resource type uint8,
// resource name, pattern type uint8, principal, host, operation uint8,
// permission uint8 (the enumerations with Kafka's codes).
func appendBindings(b []byte, bs []acl.Binding) []byte {
	b = binary.AppendUvarint(b, uint64(len(bs)))
	for _, x := range bs {
		b = append(b, byte(x.ResourceType))
		b = AppendString(b, x.ResourceName)
		b = append(b, byte(x.PatternType))
		b = AppendString(b, x.Principal)
		b = AppendString(b, x.Host)
		b = append(b, byte(x.Operation), byte(x.Permission))
	}
	return b
}

// bindings reads what appendBindings wrote: a non-empty list of bindings
// that recordBinding accepts.
func (d *Decoder) bindings() []acl.Binding {
	n := d.Count(7) // a binding takes at least 7 bytes
	if d.Err == nil && n == 0 {
		d.Fail("an empty list of ACL bindings")
	}
	var out []acl.Binding
	for i := 0; i < n && d.Err == nil; i++ {
		x := acl.Binding{ResourceType: acl.ResourceType(d.byte()), ResourceName: d.string(), PatternType: acl.PatternType(d.byte()),
			Principal: d.string(), Host: d.string(), Operation: acl.Operation(d.byte()), Permission: acl.Permission(d.byte())}
		if d.Err == nil && !recordBinding(x) {
			d.Fail("ACL binding %+v", x)
		}
		out = append(out, x)
	}
	return out
}

func (d *Decoder) aclCreate() ACLCreateRecord { return ACLCreateRecord{Bindings: d.bindings()} }

func (d *Decoder) aclDelete() ACLDeleteRecord { return ACLDeleteRecord{Bindings: d.bindings()} }

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

// CompareBindings orders bindings by every field, resource first.
func CompareBindings(a, b acl.Binding) int {
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
func (v *View) hasACL(b acl.Binding) bool {
	for ; v != nil; v = v.Parent {
		if ok, found := v.ACLs[b]; found {
			return ok
		}
	}
	return false
}

// EachACL calls f with every binding v holds, in no order.
func (v *View) EachACL(f func(b acl.Binding)) {
	seen := map[acl.Binding]bool{}
	for w := v; w != nil; w = w.Parent {
		for b := range w.ACLs {
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
func (v *View) applyACL(r Record) {
	switch r := r.(type) {
	case ACLCreateRecord:
		for _, b := range r.Bindings {
			v.ACLs[b] = true
		}
	case ACLDeleteRecord:
		for _, b := range r.Bindings {
			if v.Parent == nil {
				delete(v.ACLs, b)
			} else {
				v.ACLs[b] = false
			}
		}
	}
	v.SecurityVersion++
}

// aclCreateOp decides CreateACLs; errs are the answers.
type ACLCreateOp struct {
	BaseOp
	Bindings []acl.Binding
	Errs     []error
}

func (o *ACLCreateOp) Coords() int { return max(len(o.Bindings), 1) }

func (o *ACLCreateOp) Check(g *Group) {
	o.Errs = make([]error, len(o.Bindings))
	var added []acl.Binding
	for i, b := range o.Bindings {
		if err := b.Validate(); err != nil {
			o.Errs[i] = err
			continue
		}
		if !g.Spec.hasACL(b) && !slices.Contains(added, b) {
			added = append(added, b)
		}
	}
	if len(added) > 0 {
		g.add(ACLCreateRecord{Bindings: added})
	}
}

// aclDeleteOp decides DeleteACLs; out are the answers.
type ACLDeleteOp struct {
	BaseOp
	Filters []acl.Filter
	Out     [][]acl.Binding
}

func (o *ACLDeleteOp) Coords() int { return max(len(o.Filters), 1) }

func (o *ACLDeleteOp) Check(g *Group) {
	var all []acl.Binding
	g.Spec.EachACL(func(b acl.Binding) { all = append(all, b) })
	slices.SortFunc(all, CompareBindings)
	o.Out = make([][]acl.Binding, len(o.Filters))
	gone := map[acl.Binding]bool{}
	for i, f := range o.Filters {
		for _, b := range all {
			if f.Matches(b) {
				o.Out[i] = append(o.Out[i], b)
				gone[b] = true
			}
		}
	}
	if len(gone) == 0 {
		return
	}
	var r ACLDeleteRecord
	for _, b := range all {
		if gone[b] {
			r.Bindings = append(r.Bindings, b)
		}
	}
	g.add(r)
}
