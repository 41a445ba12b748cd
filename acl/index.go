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
	// byPrincipal holds the bindings sorted by principal number, for
	// AuthorizeByResourceType.
	byPrincipal []typeEntry
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
	principal int32
	name      string
	prefixed  bool
	host      string
	op        Operation
	deny      bool
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
// whose super users are superUsers. It sorts the bindings by resource
// type, pattern type, name, principal and host, so that each pattern's
// bindings, and each principal's and host's among them, are neighbours.
func newIndex(bindings []Binding, superUsers []string) *index {
	idx := &index{principals: make(map[string]principal), wildcard: noPrincipal}
	for _, p := range superUsers {
		idx.principals[p] = principal{id: noPrincipal, super: true}
	}
	// Sort the positions of the valid bindings: moving integers is
	// cheaper than moving bindings.
	order := make([]int32, 0, len(bindings))
	for i := range bindings {
		if bindings[i].Validate() == nil {
			order = append(order, int32(i))
		}
	}
	slices.SortFunc(order, func(i, j int32) int { return compareBindings(&bindings[i], &bindings[j]) })
	valid := make([]Binding, 0, len(order))
	for _, i := range order {
		if n := len(valid); n == 0 || valid[n-1] != bindings[i] {
			valid = append(valid, bindings[i])
		}
	}
	idx.n = len(valid)

	ids := make([]int32, len(valid))
	var next int32
	for i := range valid {
		p, ok := idx.principals[valid[i].Principal]
		if !ok || p.id == noPrincipal {
			p.id = next
			next++
			idx.principals[valid[i].Principal] = p
		}
		ids[i] = p.id
	}
	if p, ok := idx.principals[WildcardPrincipal]; ok {
		idx.wildcard = p.id
	}

	// One array holds the entries of every pattern (there are at most as
	// many as bindings, so it never grows), one the typeEntries.
	entries := make([]entry, 0, len(valid))
	typeEntries := make([]typeEntry, len(valid))
	for i := 0; i < len(valid); {
		j := i + 1
		for j < len(valid) && valid[j].ResourceType == valid[i].ResourceType {
			j++
		}
		entries = idx.types[valid[i].ResourceType].build(valid[i:j], ids[i:j], next, entries, typeEntries[i:j])
		i = j
	}
	return idx
}

// compareBindings orders bindings by resource type, pattern type, name,
// principal, host, operation and permission.
func compareBindings(a, b *Binding) int {
	if c := cmp.Compare(a.ResourceType, b.ResourceType); c != 0 {
		return c
	}
	if c := cmp.Compare(a.PatternType, b.PatternType); c != 0 {
		return c
	}
	if c := strings.Compare(a.ResourceName, b.ResourceName); c != 0 {
		return c
	}
	if c := strings.Compare(a.Principal, b.Principal); c != 0 {
		return c
	}
	if c := strings.Compare(a.Host, b.Host); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Operation, b.Operation); c != 0 {
		return c
	}
	return cmp.Compare(a.Permission, b.Permission)
}

// build indexes the sorted, distinct bindings of one resource type, whose
// principals are numbered ids, from 0 to principals-1. It appends their patterns' entries to
// entries and returns it, and fills typeEntries, as long as bindings.
func (t *typeIndex) build(bindings []Binding, ids []int32, principals int32, entries []entry, typeEntries []typeEntry) []entry {
	var literals []pattern
	for i := 0; i < len(bindings); {
		j := i + 1
		for j < len(bindings) && bindings[j].PatternType == bindings[i].PatternType &&
			bindings[j].ResourceName == bindings[i].ResourceName {
			j++
		}
		start := len(entries)
		for k := i; k < j; k++ {
			b := &bindings[k]
			if n := len(entries); n == start || entries[n-1].principal != ids[k] || entries[n-1].host != b.Host {
				entries = append(entries, entry{principal: ids[k], host: b.Host})
			}
			e := &entries[len(entries)-1]
			if b.Permission == PermissionDeny {
				e.deny |= denyMask(b.Operation)
			} else {
				e.allow |= allowMask(b.Operation)
			}
		}
		es := entries[start:len(entries):len(entries)]
		slices.SortFunc(es, func(a, b entry) int {
			if c := cmp.Compare(a.principal, b.principal); c != 0 {
				return c
			}
			return strings.Compare(a.host, b.host)
		})
		p := pattern{name: bindings[i].ResourceName, entries: es, parent: -1}
		switch {
		case bindings[i].PatternType == PatternPrefixed:
			t.prefixed = append(t.prefixed, p)
			t.prefixNames = append(t.prefixNames, p.name)
		case p.name == Wildcard:
			t.wildcard = &p
		default:
			literals = append(literals, p)
		}
		i = j
	}
	if len(literals) > 0 {
		t.literal = make(map[string]*pattern, len(literals))
		for k := range literals {
			t.literal[literals[k].name] = &literals[k]
		}
	}
	linkPrefixes(t.prefixed)

	// typeEntries in order of principal number: a counting sort.
	first := make([]int, principals+1)
	for _, id := range ids {
		first[id+1]++
	}
	for n := 1; n < len(first); n++ {
		first[n] += first[n-1]
	}
	for k := range bindings {
		b := &bindings[k]
		typeEntries[first[ids[k]]] = typeEntry{
			principal: ids[k],
			name:      b.ResourceName,
			prefixed:  b.PatternType == PatternPrefixed,
			host:      b.Host,
			op:        b.Operation,
			deny:      b.Permission == PermissionDeny,
		}
		first[ids[k]]++
	}
	t.byPrincipal = typeEntries
	return entries
}

// ofPrincipal returns the bindings of principal id, none for noPrincipal.
func (t *typeIndex) ofPrincipal(id int32) []typeEntry {
	if id == noPrincipal {
		return nil
	}
	tes := t.byPrincipal
	lo, _ := slices.BinarySearchFunc(tes, id, func(e typeEntry, id int32) int { return cmp.Compare(e.principal, id) })
	hi := lo
	for hi < len(tes) && tes[hi].principal == id {
		hi++
	}
	return tes[lo:hi]
}

// linkPrefixes sets the parent of each of the prefixed patterns, sorted
// by name. In sorted order a name's prefixes come before it, and the
// names on the stack are the chain of prefixes of the previous name.
func linkPrefixes(ps []pattern) {
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
