package acl

import (
	"cmp"
	"slices"
	"strings"
)

// index is an immutable snapshot of the bindings, built by Set and read
// by every decision without a lock.
//
// A decision looks the principal up once, by string, for its number; it
// then finds the patterns that match the resource (the literal name in a
// map, "*", and the prefixed names by a binary search and a walk up a
// chain), and in each the principal's entries and those of "User:*" by a
// binary search on the number. It reads only the entries of the request's
// principal and of "User:*", on the patterns that match the resource.
type index struct {
	// principals numbers the principals of the bindings and marks the
	// super users (who may have no binding).
	principals map[string]principal
	// wildcard is the number of "User:*", or noPrincipal.
	wildcard int32
	types    [ResourceUser + 1]typeIndex
	n        int
}

// principal is what the index knows of a principal.
type principal struct {
	id    int32 // the principal's number, or noPrincipal if in no binding
	super bool
}

// noPrincipal is the number of a principal that no binding names.
const noPrincipal = -1

// typeIndex is the bindings of one resource type.
type typeIndex struct {
	literal  map[string]*pattern // LITERAL bindings but "*", by name
	wildcard *pattern            // LITERAL "*", or nil
	// prefixed is the PREFIXED patterns sorted by name. The resource
	// names a prefixed name matches sort right after it, so a binary
	// search for a resource name lands on the greatest prefixed name not
	// after it; every prefixed name that matches the resource is a prefix
	// of that one, on its chain of parents.
	prefixed []pattern
	// prefixNames is the names of prefixed, side by side for the binary
	// search.
	prefixNames []string
	// byPrincipal holds the bindings by principal, for
	// AuthorizeByResourceType.
	byPrincipal map[string][]typeEntry
}

// pattern is the bindings of one resource pattern, as entries sorted by
// principal, then host.
type pattern struct {
	name    string
	entries []entry
	// parent is, for a PREFIXED pattern, the index of the longest other
	// prefixed name that is a prefix of this one, or -1.
	parent int
}

// entry is the bindings of one pattern for one principal and host: the
// operations they allow and those they deny, as bit masks.
type entry struct {
	principal int32
	host      string
	allow     uint32
	deny      uint32
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

// opBit returns op's bit in an entry's masks.
func opBit(op Operation) uint32 { return 1 << uint(op) }

// allowMask returns the operations an ALLOW of op allows: op itself,
// DESCRIBE too for READ, WRITE, DELETE and ALTER, DESCRIBE_CONFIGS too
// for ALTER_CONFIGS, every operation for ALL.
func allowMask(op Operation) uint32 {
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

// denyMask returns the operations a DENY of op denies: op itself, every
// operation for ALL. A DENY implies nothing: a DENY of READ does not deny
// DESCRIBE.
func denyMask(op Operation) uint32 {
	if op == OpAll {
		return ^uint32(0)
	}
	return opBit(op)
}

// newIndex indexes the valid bindings among bindings, for an authorizer
// whose super users are superUsers.
func newIndex(bindings []Binding, superUsers []string) *index {
	idx := &index{principals: make(map[string]principal), wildcard: noPrincipal}
	for _, p := range superUsers {
		idx.principals[p] = principal{id: noPrincipal, super: true}
	}
	type patternKey struct {
		rt   ResourceType
		pt   PatternType
		name string
	}
	type entryKey struct {
		principal int32
		host      string
	}
	building := make(map[patternKey]map[entryKey]*entry)
	seen := make(map[Binding]struct{}, len(bindings))
	var next int32
	for _, b := range bindings {
		if _, dup := seen[b]; dup || b.Validate() != nil {
			continue
		}
		seen[b] = struct{}{}

		p, ok := idx.principals[b.Principal]
		if !ok || p.id == noPrincipal {
			p.id = next
			next++
			idx.principals[b.Principal] = p
		}
		t := &idx.types[b.ResourceType]
		if t.byPrincipal == nil {
			t.byPrincipal = make(map[string][]typeEntry)
		}
		t.byPrincipal[b.Principal] = append(t.byPrincipal[b.Principal], typeEntry{
			name:     b.ResourceName,
			prefixed: b.PatternType == PatternPrefixed,
			host:     b.Host,
			op:       b.Operation,
			deny:     b.Permission == PermissionDeny,
		})

		pk := patternKey{b.ResourceType, b.PatternType, b.ResourceName}
		entries := building[pk]
		if entries == nil {
			entries = make(map[entryKey]*entry)
			building[pk] = entries
		}
		ek := entryKey{p.id, b.Host}
		e := entries[ek]
		if e == nil {
			e = &entry{principal: p.id, host: b.Host}
			entries[ek] = e
		}
		if b.Permission == PermissionDeny {
			e.deny |= denyMask(b.Operation)
		} else {
			e.allow |= allowMask(b.Operation)
		}
	}
	idx.n = len(seen)
	if p, ok := idx.principals[WildcardPrincipal]; ok {
		idx.wildcard = p.id
	}

	for pk, entries := range building {
		p := pattern{name: pk.name, parent: -1, entries: make([]entry, 0, len(entries))}
		for _, e := range entries {
			p.entries = append(p.entries, *e)
		}
		slices.SortFunc(p.entries, func(a, b entry) int {
			return cmp.Or(cmp.Compare(a.principal, b.principal), strings.Compare(a.host, b.host))
		})
		t := &idx.types[pk.rt]
		switch {
		case pk.pt == PatternPrefixed:
			t.prefixed = append(t.prefixed, p)
		case pk.name == Wildcard:
			t.wildcard = &p
		default:
			if t.literal == nil {
				t.literal = make(map[string]*pattern)
			}
			t.literal[pk.name] = &p
		}
	}
	for i := range idx.types {
		t := &idx.types[i]
		linkPrefixes(t.prefixed)
		for _, p := range t.prefixed {
			t.prefixNames = append(t.prefixNames, p.name)
		}
	}
	return idx
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

// result is what the bindings of a resource say.
type result uint8

const (
	noACL   result = iota // no binding's pattern matches the resource
	denied                // a DENY matches, or bindings exist but none allows
	allowed               // an ALLOW matches and no DENY does
)

// request is what a decision compares entries with: the numbers of the
// request's principal and of "User:*" (noPrincipal when no binding names
// them, or for the wildcard when the principal is the wildcard), the
// host and the operation's bit.
type request struct {
	principal, wildcard int32
	host                string
	bit                 uint32
}

// decide returns what the bindings of the type say of the resource name.
func (t *typeIndex) decide(r *request, name string) result {
	var d decision
	if p := t.literal[name]; p != nil && d.add(p, r) {
		return denied
	}
	if t.wildcard != nil && d.add(t.wildcard, r) {
		return denied
	}
	if i := t.floorPrefix(name); i >= 0 {
		common := commonPrefix(t.prefixNames[i], name)
		for ; i >= 0; i = t.prefixed[i].parent {
			if len(t.prefixNames[i]) <= common && d.add(&t.prefixed[i], r) {
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
	names := t.prefixNames
	lo, hi := 0, len(names) // the answer + 1 is in [lo, hi]
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if names[m] <= name {
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

// add applies p's entries for the request, and reports whether a DENY
// matches.
func (d *decision) add(p *pattern, r *request) (deny bool) {
	d.any = true
	return d.match(p.entries, r.principal, r) || d.match(p.entries, r.wildcard, r)
}

// match applies the entries of principal id, for the request's host and
// "*", and reports whether one denies the operation.
func (d *decision) match(es []entry, id int32, r *request) (deny bool) {
	if id == noPrincipal {
		return false
	}
	lo, hi := 0, len(es) // principal's first entry is in [lo, hi]
	for hi-lo > 8 {
		m := int(uint(lo+hi) >> 1)
		if es[m].principal < id {
			lo = m + 1
		} else {
			hi = m
		}
	}
	for lo < hi && es[lo].principal < id {
		lo++
	}
	for i := lo; i < len(es) && es[i].principal == id; i++ {
		e := &es[i]
		if e.host != r.host && e.host != Wildcard {
			continue
		}
		if e.deny&r.bit != 0 {
			return true
		}
		if e.allow&r.bit != 0 {
			d.allow = true
		}
	}
	return false
}
