package acl

import (
	"slices"
	"sync/atomic"
)

// Options configure an Authorizer. The zero value is Kafka's default: no
// super users, and a resource without ACLs is denied to everyone.
type Options struct {
	// SuperUsers are principals ("User:admin") allowed everything,
	// whatever the ACLs say (Kafka's super.users). They are compared as
	// strings with the request's principal.
	SuperUsers []string
	// AllowEveryoneIfNoACLFound allows a request on a resource that no
	// binding's pattern matches, for any principal, host and operation
	// (Kafka's allow.everyone.if.no.acl.found). A resource with any
	// binding at all, even one for another principal, is decided by its
	// bindings alone.
	AllowEveryoneIfNoACLFound bool
}

// Authorizer decides requests from a set of bindings as Kafka's
// StandardAuthorizer does (see the package doc for the rules). Set
// replaces the bindings; Authorize and AuthorizeByResourceType read an
// immutable index through an atomic pointer, so they never lock nor
// allocate (AuthorizeByResourceType allocates only when DENY bindings
// apply to the principal). It is safe for concurrent use.
type Authorizer struct {
	superUsers   []string
	allowIfNoACL bool
	idx          atomic.Pointer[index]
}

// NewAuthorizer returns an Authorizer without bindings.
func NewAuthorizer(opts Options) *Authorizer {
	a := &Authorizer{
		superUsers:   slices.Clone(opts.SuperUsers),
		allowIfNoACL: opts.AllowEveryoneIfNoACLFound,
	}
	a.idx.Store(newIndex(nil, a.superUsers))
	return a
}

// Set replaces all the bindings with bindings, atomically: a concurrent
// Authorize sees either the old set or the new one, never a mix. It
// ignores a binding that Validate refuses (CreateAcls never stores one)
// and counts duplicates once. Set does not keep bindings.
func (a *Authorizer) Set(bindings []Binding) {
	a.idx.Store(newIndex(bindings, a.superUsers))
}

// Len returns the number of distinct valid bindings in effect.
func (a *Authorizer) Len() int { return a.idx.Load().n }

// Authorize reports whether principal ("User:alice"), connected from
// host, may perform op on the resource of type rt named name. It is
// false for an operation or resource type a request cannot be for
// (UNKNOWN, ANY, a code Kafka does not define), even for a super user.
//
// The decision is Kafka's StandardAuthorizer's: a super user is allowed;
// otherwise a matching DENY denies; otherwise a matching ALLOW allows
// (ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE, and ALLOW
// of ALTER_CONFIGS allows DESCRIBE_CONFIGS); otherwise, when no binding
// at all has a pattern that matches the resource, the request is allowed
// if Options.AllowEveryoneIfNoACLFound; otherwise it is denied.
func (a *Authorizer) Authorize(principal, host string, op Operation, rt ResourceType, name string) bool {
	if !concreteOperation(op) || !concreteResourceType(rt) {
		return false
	}
	return a.authorize(a.idx.Load(), principal, host, op, rt, name)
}

// authorize is Authorize on idx, for a valid op and rt.
func (a *Authorizer) authorize(idx *index, principal, host string, op Operation, rt ResourceType, name string) bool {
	p, ok := idx.principals[principal]
	if p.super {
		return true
	}
	r := request{principal: noPrincipal, wildcard: idx.wildcard, host: host, bit: opBit(op)}
	if ok {
		r.principal = p.id
	}
	if r.principal == r.wildcard {
		r.wildcard = noPrincipal // the principal is "User:*": look once
	}
	switch idx.types[rt].decide(&r, name) {
	case allowed:
		return true
	case noACL:
		return a.allowIfNoACL
	}
	return false
}

// AuthorizeByResourceType reports whether principal, from host, may
// perform op on at least one resource of type rt: Kafka's
// authorizeByResourceType, with which a broker lets a producer without
// a transactional ID be idempotent if it may WRITE to some topic. It
// follows the default implementation of Kafka's Authorizer interface,
// which StandardAuthorizer keeps:
//
//  1. Allowed if Authorize allows op on the resource of type rt named
//     "hardcode": so a super user is, and with AllowEveryoneIfNoACLFound
//     anyone is when no binding matches that name.
//  2. Then only the bindings of type rt for the principal (or
//     "User:*"), host (or "*") and op (or ALL) count; implied operations
//     do not. A DENY on the LITERAL "*" denies. An ALLOW on the LITERAL
//     "*" allows.
//  3. Allowed if some other ALLOW is not shadowed: a LITERAL ALLOW is
//     shadowed by a LITERAL DENY of the same name, and any ALLOW by a
//     PREFIXED DENY whose name is a prefix of the ALLOW's name.
//     Otherwise denied.
//
// Like Authorize, it is false for UNKNOWN, ANY and undefined op or rt.
func (a *Authorizer) AuthorizeByResourceType(principal, host string, op Operation, rt ResourceType) bool {
	if !concreteOperation(op) || !concreteResourceType(rt) {
		return false
	}
	idx := a.idx.Load()
	if a.authorize(idx, principal, host, op, rt, byResourceTypeName) {
		return true
	}
	t := &idx.types[rt]
	id := int32(noPrincipal)
	if p, ok := idx.principals[principal]; ok {
		id = p.id
	}
	lists := [2][]typeEntry{t.ofPrincipal(id)}
	if id != idx.wildcard {
		lists[1] = t.ofPrincipal(idx.wildcard)
	}
	applies := func(e *typeEntry) bool {
		return (e.host == host || e.host == Wildcard) && (e.op == op || e.op == OpAll)
	}

	// The DENY bindings that apply, by pattern type.
	var denyLiteral, denyPrefixed map[string]struct{}
	wildcardAllow := false
	for _, l := range lists {
		for i := range l {
			e := &l[i]
			if !applies(e) {
				continue
			}
			switch {
			case !e.deny:
				wildcardAllow = wildcardAllow || (!e.prefixed && e.name == Wildcard)
			case e.prefixed:
				if denyPrefixed == nil {
					denyPrefixed = make(map[string]struct{})
				}
				denyPrefixed[e.name] = struct{}{}
			case e.name == Wildcard:
				return false
			default:
				if denyLiteral == nil {
					denyLiteral = make(map[string]struct{})
				}
				denyLiteral[e.name] = struct{}{}
			}
		}
	}
	if wildcardAllow {
		return true
	}
	for _, l := range lists {
		for i := range l {
			e := &l[i]
			if e.deny || !applies(e) {
				continue
			}
			if !e.prefixed {
				if _, ok := denyLiteral[e.name]; ok {
					continue
				}
			}
			if !shadowed(e.name, denyPrefixed) {
				return true
			}
		}
	}
	return false
}

// byResourceTypeName is the resource name Kafka's
// authorizeByResourceType first asks Authorize about, "to ensure that
// super users are granted access regardless of DENY ACLs" as its comment
// says; the bindings that match it count too.
const byResourceTypeName = "hardcode"

// shadowed reports whether a prefix of name (name itself included) is in
// prefixes.
func shadowed(name string, prefixes map[string]struct{}) bool {
	if len(prefixes) == 0 {
		return false
	}
	for n := 1; n <= len(name); n++ {
		if _, ok := prefixes[name[:n]]; ok {
			return true
		}
	}
	return false
}
