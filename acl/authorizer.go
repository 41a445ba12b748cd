package acl

import (
	"slices"
	"strings"
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
	superUsers   map[string]struct{}
	allowIfNoACL bool
	idx          atomic.Pointer[index]
}

// NewAuthorizer returns an Authorizer without bindings.
func NewAuthorizer(opts Options) *Authorizer {
	a := &Authorizer{
		superUsers:   make(map[string]struct{}, len(opts.SuperUsers)),
		allowIfNoACL: opts.AllowEveryoneIfNoACLFound,
	}
	for _, p := range opts.SuperUsers {
		a.superUsers[p] = struct{}{}
	}
	a.idx.Store(newIndex(nil))
	return a
}

// Set replaces all the bindings with bindings, atomically: a concurrent
// Authorize sees either the old set or the new one, never a mix. It
// ignores a binding that Validate refuses (CreateAcls never stores one)
// and counts duplicates once. Set does not keep bindings.
func (a *Authorizer) Set(bindings []Binding) {
	a.idx.Store(newIndex(bindings))
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
	if _, ok := a.superUsers[principal]; ok {
		return true
	}
	switch a.idx.Load().types[rt].decide(principal, host, op, name) {
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
	if a.Authorize(principal, host, op, rt, "hardcode") {
		return true
	}
	if !concreteOperation(op) || !concreteResourceType(rt) {
		return false
	}
	t := &a.idx.Load().types[rt]
	lists := [2][]typeEntry{t.byPrincipal[principal]}
	if principal != WildcardPrincipal {
		lists[1] = t.byPrincipal[WildcardPrincipal]
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

// result is what the bindings of a resource say.
type result uint8

const (
	noACL   result = iota // no binding's pattern matches the resource
	denied                // a DENY matches, or bindings exist but none allows
	allowed               // an ALLOW matches and no DENY does
)

// opBit returns op's bit in an entry's masks.
func opBit(op Operation) uint32 { return 1 << uint(op) }

// impliedBy returns the mask of the operations that an ALLOW of op
// allows: op itself, DESCRIBE for READ, WRITE, DELETE and ALTER,
// DESCRIBE_CONFIGS for ALTER_CONFIGS, every operation for ALL. A DENY
// implies nothing: a DENY of READ does not deny DESCRIBE.
func impliedBy(op Operation) uint32 {
	switch op {
	case OpAll:
		return ^uint32(0)
	case OpRead, OpWrite, OpDelete, OpAlter:
		return opBit(op) | opBit(OpDescribe)
	case OpAlterConfigs:
		return opBit(op) | opBit(OpDescribeConfigs)
	}
	return opBit(op)
}

// entry is the bindings of one pattern for one principal and host: the
// operations they allow and those they deny, as bit masks.
type entry struct {
	principal string
	host      string
	allow     uint32
	deny      uint32
}

// pattern is the bindings of one resource pattern, their entries sorted
// by principal, then host.
type pattern struct {
	name    string
	entries []entry
	// parent is, for a PREFIXED pattern, the index of the longest other
	// prefixed name that is a prefix of this one, or -1.
	parent int
}

// typeEntry is a binding of one resource type, kept by principal for
// AuthorizeByResourceType.
type typeEntry struct {
	name     string
	prefixed bool
	host     string
	op       Operation
	deny     bool
}

// typeIndex is the bindings of one resource type.
type typeIndex struct {
	literal  map[string]*pattern // LITERAL bindings but "*", by name
	wildcard *pattern            // LITERAL "*", or nil
	// prefixed is the PREFIXED patterns sorted by name. The resource
	// names a PREFIXED name matches sort right after it, so a binary
	// search for a resource name lands on the greatest prefixed name not
	// after it; every prefixed name that matches the resource is a prefix
	// of that one, on its chain of parents.
	prefixed    []pattern
	byPrincipal map[string][]typeEntry
}

// index is an immutable snapshot of the bindings.
type index struct {
	types [ResourceUser + 1]typeIndex
	n     int
}

// newIndex indexes the valid bindings among bindings.
func newIndex(bindings []Binding) *index {
	idx := &index{}
	seen := make(map[Binding]struct{}, len(bindings))
	// Per resource type, the patterns being built, by pattern type and
	// name.
	type key struct {
		pt   PatternType
		name string
	}
	building := make([]map[key]map[[2]string]*entry, len(idx.types))
	for _, b := range bindings {
		if _, dup := seen[b]; dup || b.Validate() != nil {
			continue
		}
		seen[b] = struct{}{}
		t := &idx.types[b.ResourceType]
		if t.byPrincipal == nil {
			t.byPrincipal = make(map[string][]typeEntry)
			building[b.ResourceType] = make(map[key]map[[2]string]*entry)
		}
		t.byPrincipal[b.Principal] = append(t.byPrincipal[b.Principal], typeEntry{
			name:     b.ResourceName,
			prefixed: b.PatternType == PatternPrefixed,
			host:     b.Host,
			op:       b.Operation,
			deny:     b.Permission == PermissionDeny,
		})
		k := key{b.PatternType, b.ResourceName}
		entries := building[b.ResourceType][k]
		if entries == nil {
			entries = make(map[[2]string]*entry)
			building[b.ResourceType][k] = entries
		}
		e := entries[[2]string{b.Principal, b.Host}]
		if e == nil {
			e = &entry{principal: b.Principal, host: b.Host}
			entries[[2]string{b.Principal, b.Host}] = e
		}
		if b.Permission == PermissionDeny {
			e.deny |= opMask(b.Operation)
		} else {
			e.allow |= impliedBy(b.Operation)
		}
	}
	idx.n = len(seen)

	for rt, patterns := range building {
		t := &idx.types[rt]
		for k, entries := range patterns {
			p := pattern{name: k.name, parent: -1}
			for _, e := range entries {
				p.entries = append(p.entries, *e)
			}
			sortEntries(p.entries)
			switch {
			case k.pt == PatternPrefixed:
				t.prefixed = append(t.prefixed, p)
			case k.name == Wildcard:
				t.wildcard = &p
			default:
				if t.literal == nil {
					t.literal = make(map[string]*pattern)
				}
				t.literal[k.name] = &p
			}
		}
		linkPrefixes(t.prefixed)
	}
	return idx
}

// opMask returns the operations a DENY of op denies: op, or all for ALL.
func opMask(op Operation) uint32 {
	if op == OpAll {
		return ^uint32(0)
	}
	return opBit(op)
}

// decide returns what the bindings of the type say of the resource name.
func (t *typeIndex) decide(principal, host string, op Operation, name string) result {
	var d decision
	if p := t.literal[name]; p != nil && d.add(p, principal, host, op) {
		return denied
	}
	if t.wildcard != nil && d.add(t.wildcard, principal, host, op) {
		return denied
	}
	if i := t.floorPrefix(name); i >= 0 {
		common := commonPrefix(t.prefixed[i].name, name)
		for ; i >= 0; i = t.prefixed[i].parent {
			if len(t.prefixed[i].name) <= common && d.add(&t.prefixed[i], principal, host, op) {
				return denied
			}
		}
	}
	switch {
	case d.allow:
		return allowed
	case d.any:
		return denied
	}
	return noACL
}

// floorPrefix returns the index of the greatest prefixed name not after
// name, or -1.
func (t *typeIndex) floorPrefix(name string) int {
	lo, hi := 0, len(t.prefixed) // the answer + 1 is in [lo, hi]
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if t.prefixed[m].name <= name {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo - 1
}

// commonPrefix returns the length of the longest common prefix of a and
// b.
func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// decision accumulates what the patterns that match a resource say.
type decision struct {
	any   bool // a pattern with bindings matches
	allow bool // an ALLOW matches
}

// add applies p's entries for principal (and "User:*"), host and op,
// and reports whether a DENY matches.
func (d *decision) add(p *pattern, principal, host string, op Operation) (deny bool) {
	d.any = true
	bit := opBit(op)
	if p.match(principal, host, bit, d) {
		return true
	}
	return principal != WildcardPrincipal && p.match(WildcardPrincipal, host, bit, d)
}

// match applies p's entries for principal, for host and "*", and reports
// whether one denies bit.
func (p *pattern) match(principal, host string, bit uint32, d *decision) (deny bool) {
	es := p.entries
	// Find principal's first entry.
	lo, hi := 0, len(es)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if es[m].principal < principal {
			lo = m + 1
		} else {
			hi = m
		}
	}
	for i := lo; i < len(es) && es[i].principal == principal; i++ {
		e := &es[i]
		if e.host != host && e.host != Wildcard {
			continue
		}
		if e.deny&bit != 0 {
			return true
		}
		if e.allow&bit != 0 {
			d.allow = true
		}
	}
	return false
}

// sortEntries sorts entries by principal, then host.
func sortEntries(es []entry) {
	slices.SortFunc(es, func(a, b entry) int {
		if c := strings.Compare(a.principal, b.principal); c != 0 {
			return c
		}
		return strings.Compare(a.host, b.host)
	})
}

// linkPrefixes sorts the prefixed patterns by name and sets each one's
// parent. In sorted order a name's prefixes come before it, and the
// names on the stack are the chain of prefixes of the previous name.
func linkPrefixes(ps []pattern) {
	slices.SortFunc(ps, func(a, b pattern) int { return strings.Compare(a.name, b.name) })
	var stack []int
	for i := range ps {
		for len(stack) > 0 && !strings.HasPrefix(ps[i].name, ps[stack[len(stack)-1]].name) {
			stack = stack[:len(stack)-1]
		}
		ps[i].parent = -1
		if len(stack) > 0 {
			ps[i].parent = stack[len(stack)-1]
		}
		stack = append(stack, i)
	}
}
