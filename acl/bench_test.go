package acl

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// query is one Authorize call.
type query struct {
	principal, host string
	op              Operation
	rt              ResourceType
	name            string
}

// benchBindings returns n bindings as a large cluster might hold them:
// n/10 principals (and "User:*"), each with bindings on its team's
// topics and groups, literal mostly, some prefixed by a team's or a
// service's name, a few on "*", a tenth of them DENY; and requests that
// hit and miss them.
func benchBindings(n int) ([]Binding, []query) {
	r := rand.New(rand.NewPCG(1, uint64(n)))
	principals := max(n/10, 1)
	teams := max(n/50, 1)
	topic := func() (name string, team, service int) {
		team, service = r.IntN(teams), r.IntN(5)
		return fmt.Sprintf("team%03d.svc%02d.events-%d", team, service, r.IntN(3)), team, service
	}
	ops := []Operation{OpRead, OpWrite, OpDescribe, OpAll, OpAlterConfigs, OpCreate}
	var bindings []Binding
	for len(bindings) < n {
		name, team, service := topic()
		b := Binding{
			ResourceType: ResourceTopic,
			ResourceName: name,
			PatternType:  PatternLiteral,
			Principal:    fmt.Sprintf("User:u%d", r.IntN(principals)),
			Host:         Wildcard,
			Operation:    ops[r.IntN(len(ops))],
			Permission:   PermissionAllow,
		}
		switch x := r.IntN(100); {
		case x < 8:
			b.PatternType, b.ResourceName = PatternPrefixed, fmt.Sprintf("team%03d.", team)
		case x < 15:
			b.PatternType, b.ResourceName = PatternPrefixed, fmt.Sprintf("team%03d.svc%02d.", team, service)
		case x < 17:
			b.ResourceName = Wildcard
		case x < 22:
			b.Principal = WildcardPrincipal
		case x < 30:
			b.ResourceType = ResourceGroup
		}
		if r.IntN(10) == 0 {
			b.Permission = PermissionDeny
		}
		if r.IntN(5) == 0 {
			b.Host = fmt.Sprintf("10.0.%d.%d", r.IntN(4), r.IntN(256))
		}
		bindings = append(bindings, b)
	}
	var queries []query
	for range 1024 {
		name, _, _ := topic()
		q := query{
			principal: fmt.Sprintf("User:u%d", r.IntN(principals)),
			host:      fmt.Sprintf("10.0.%d.%d", r.IntN(4), r.IntN(256)),
			op:        ops[r.IntN(len(ops))],
			rt:        ResourceTopic,
			name:      name,
		}
		if r.IntN(2) == 0 {
			// Ask for what some binding names.
			b := bindings[r.IntN(len(bindings))]
			q.principal, q.op, q.rt = b.Principal, b.Operation, b.ResourceType
			if b.PatternType == PatternLiteral && b.ResourceName != Wildcard {
				q.name = b.ResourceName
			}
		}
		if q.op == OpAll {
			q.op = OpRead
		}
		queries = append(queries, q)
	}
	return bindings, queries
}

func benchAuthorizer(n int) (*Authorizer, []query) {
	bindings, queries := benchBindings(n)
	a := NewAuthorizer(Options{SuperUsers: []string{"User:admin"}})
	a.Set(bindings)
	return a, queries
}

// BenchmarkAuthorize measures one decision, with the linear scan of
// every binding beside the index.
func BenchmarkAuthorize(b *testing.B) {
	for _, n := range []int{100, 10000} {
		bindings, queries := benchBindings(n)
		opts := Options{SuperUsers: []string{"User:admin"}}
		a := NewAuthorizer(opts)
		a.Set(bindings)
		ref := NewLinear(opts, bindings)
		b.Run(fmt.Sprintf("acls=%d/index", n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				q := &queries[i%len(queries)]
				i++
				a.Authorize(q.principal, q.host, q.op, q.rt, q.name)
			}
		})
		b.Run(fmt.Sprintf("acls=%d/linear", n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				q := &queries[i%len(queries)]
				i++
				ref.Authorize(q.principal, q.host, q.op, q.rt, q.name)
			}
		})
	}
}

// BenchmarkAuthorizeByResourceType measures the check an idempotent
// producer's InitProducerId makes.
func BenchmarkAuthorizeByResourceType(b *testing.B) {
	for _, n := range []int{100, 10000} {
		bindings, queries := benchBindings(n)
		a := NewAuthorizer(Options{})
		a.Set(bindings)
		ref := NewLinear(Options{}, bindings)
		b.Run(fmt.Sprintf("acls=%d/index", n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				q := &queries[i%len(queries)]
				i++
				a.AuthorizeByResourceType(q.principal, q.host, OpWrite, ResourceTopic)
			}
		})
		b.Run(fmt.Sprintf("acls=%d/linear", n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				q := &queries[i%len(queries)]
				i++
				ref.AuthorizeByResourceType(q.principal, q.host, OpWrite, ResourceTopic)
			}
		})
	}
}

// BenchmarkSet measures building the index.
func BenchmarkSet(b *testing.B) {
	for _, n := range []int{100, 10000} {
		bindings, _ := benchBindings(n)
		a := NewAuthorizer(Options{})
		b.Run(fmt.Sprintf("acls=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				a.Set(bindings)
			}
		})
	}
}
