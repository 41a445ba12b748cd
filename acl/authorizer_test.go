package acl

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// The small worlds the model test draws from: few enough values that
// bindings and requests collide often.
var (
	modelPrincipals = []string{"User:alice", "User:bob", WildcardPrincipal, "Group:ops", "Group:*"}
	modelHosts      = []string{"*", "10.0.0.1", "10.0.0.2"}
	modelTypes      = []ResourceType{ResourceTopic, ResourceGroup, ResourceCluster, ResourceTransactionalID}
	// Names near "hardcode", the name AuthorizeByResourceType asks about.
	modelNames = []string{"*", "h", "hard", "hardcode", "hardcodex", ClusterName, "kafka"}
)

func modelName() *rapid.Generator[string] {
	return rapid.OneOf(
		rapid.SampledFrom(modelNames),
		rapid.StringOfN(rapid.RuneFrom([]rune("ab*")), 0, 4, -1),
	)
}

// modelPrincipal draws a principal, most often alice or the wildcard.
func modelPrincipal() *rapid.Generator[string] {
	return rapid.OneOf(
		rapid.SampledFrom([]string{"User:alice", WildcardPrincipal}),
		rapid.SampledFrom(modelPrincipals),
	)
}

// modelOp draws an operation, most often one that implies another or is
// implied.
func modelOp() *rapid.Generator[Operation] {
	return rapid.OneOf(
		rapid.SampledFrom([]Operation{OpAll, OpRead, OpWrite, OpDescribe, OpDescribeConfigs, OpAlterConfigs}),
		rapid.Map(rapid.IntRange(int(OpAll), int(OpTwoPhaseCommit)), func(i int) Operation { return Operation(i) }),
	)
}

// modelRequest draws a request, half the time one close to a binding's:
// its principal, host, operation, type and name, or a name its prefix
// matches.
func modelRequest(bindings []Binding) *rapid.Generator[query] {
	return rapid.Custom(func(t *rapid.T) query {
		q := query{
			principal: rapid.OneOf(modelPrincipal(), rapid.Just("User:carol")).Draw(t, "principal"),
			host:      rapid.SampledFrom(modelHosts).Draw(t, "host"),
			op:        modelOp().Draw(t, "op"),
			rt:        rapid.SampledFrom(modelTypes).Draw(t, "type"),
			name:      modelName().Draw(t, "name"),
		}
		if rapid.IntRange(0, 20).Draw(t, "strange") == 0 {
			q.op = Operation(rapid.IntRange(-1, int(OpTwoPhaseCommit)+1).Draw(t, "strange op"))
			q.rt = ResourceType(rapid.IntRange(-1, int(ResourceUser)+1).Draw(t, "strange type"))
		}
		if len(bindings) == 0 || rapid.Bool().Draw(t, "random") {
			return q
		}
		b := rapid.SampledFrom(bindings).Draw(t, "near")
		if rapid.Bool().Draw(t, "near principal") {
			q.principal = b.Principal
		}
		if rapid.Bool().Draw(t, "near host") {
			q.host = b.Host
		}
		if rapid.Bool().Draw(t, "near op") {
			q.op = b.Operation
		}
		if rapid.IntRange(0, 4).Draw(t, "near type") > 0 {
			q.rt = b.ResourceType
		}
		if rapid.Bool().Draw(t, "near name") {
			q.name = b.ResourceName + rapid.StringOfN(rapid.RuneFrom([]rune("ab*")), 0, 2, -1).Draw(t, "suffix")
		}
		return q
	})
}

// modelBinding draws a binding, valid most of the time: Set must ignore
// the others.
func modelBinding() *rapid.Generator[Binding] {
	return rapid.Custom(func(t *rapid.T) Binding {
		b := Binding{
			ResourceType: rapid.SampledFrom(modelTypes).Draw(t, "type"),
			ResourceName: modelName().Draw(t, "name"),
			PatternType:  rapid.SampledFrom([]PatternType{PatternLiteral, PatternPrefixed}).Draw(t, "pattern"),
			Principal:    modelPrincipal().Draw(t, "principal"),
			Host:         rapid.SampledFrom(modelHosts).Draw(t, "host"),
			Operation:    modelOp().Draw(t, "op"),
			Permission:   rapid.SampledFrom([]Permission{PermissionAllow, PermissionDeny}).Draw(t, "perm"),
		}
		if b.ResourceType == ResourceCluster && rapid.IntRange(0, 3).Draw(t, "cluster name") > 0 {
			b.ResourceName, b.PatternType = ClusterName, PatternLiteral
		}
		if rapid.IntRange(0, 20).Draw(t, "invalid") == 0 {
			b.Permission = Permission(rapid.IntRange(-1, 5).Draw(t, "invalid perm"))
		}
		return b
	})
}

// TestModel holds Authorizer to the linear reference: random bindings,
// replaced a few times, and random requests must get the same answers.
func TestModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		opts := Options{
			SuperUsers:                rapid.SliceOfNDistinct(rapid.SampledFrom(modelPrincipals), 0, 1, rapid.ID).Draw(t, "super"),
			AllowEveryoneIfNoACLFound: rapid.Bool().Draw(t, "allow if no acl"),
		}
		a := NewAuthorizer(opts)
		for range rapid.IntRange(1, 3).Draw(t, "sets") {
			bindings := rapid.SliceOfN(modelBinding(), 0, 30).Draw(t, "bindings")
			a.Set(bindings)
			ref := NewLinear(opts, bindings)
			for range 30 {
				q := modelRequest(bindings).Draw(t, "request")
				principal, host, op, rt, name := q.principal, q.host, q.op, q.rt, q.name
				want := ref.Authorize(principal, host, op, rt, name)
				if got := a.Authorize(principal, host, op, rt, name); got != want {
					t.Fatalf("Authorize(%s, %s, %v, %v, %q) = %v, reference %v", principal, host, op, rt, name, got, want)
				}
				want = ref.AuthorizeByResourceType(principal, host, op, rt)
				if got := a.AuthorizeByResourceType(principal, host, op, rt); got != want {
					t.Fatalf("AuthorizeByResourceType(%s, %s, %v, %v) = %v, reference %v", principal, host, op, rt, got, want)
				}
			}
		}
	})
}

func TestSet(t *testing.T) {
	a := NewAuthorizer(Options{})
	require.Equal(t, 0, a.Len())
	require.False(t, a.Authorize("User:alice", "*", OpRead, ResourceTopic, "orders"))

	invalid := valid
	invalid.Permission = PermissionAny
	a.Set([]Binding{valid, valid, invalid})
	require.Equal(t, 1, a.Len(), "a duplicate counts once, an invalid binding not at all")
	require.True(t, a.Authorize("User:alice", "10.0.0.1", OpRead, ResourceTopic, "orders"))

	// Set replaces: the old bindings are gone.
	other := valid
	other.ResourceName = "payments"
	a.Set([]Binding{other})
	require.Equal(t, 1, a.Len())
	require.False(t, a.Authorize("User:alice", "10.0.0.1", OpRead, ResourceTopic, "orders"))
	require.True(t, a.Authorize("User:alice", "10.0.0.1", OpRead, ResourceTopic, "payments"))

	a.Set(nil)
	require.Equal(t, 0, a.Len())
	require.False(t, a.Authorize("User:alice", "10.0.0.1", OpRead, ResourceTopic, "payments"))
}

// TestSetInvalidDenyIgnored: an invalid DENY does not deny (Kafka never
// stores one), so callers must not depend on Set to keep it.
func TestSetInvalidDenyIgnored(t *testing.T) {
	a := NewAuthorizer(Options{})
	deny := valid
	deny.Permission, deny.Principal = PermissionDeny, "alice"
	a.Set([]Binding{valid, deny})
	require.True(t, a.Authorize("User:alice", "10.0.0.1", OpRead, ResourceTopic, "orders"))
}

// TestConcurrentSet: each decision sees one whole set of bindings while
// Set replaces them (run with -race). The two sets differ in the
// operation they allow but agree on what the checks ask.
func TestConcurrentSet(t *testing.T) {
	a := NewAuthorizer(Options{})
	sets := [2][]Binding{}
	for i, op := range []Operation{OpRead, OpWrite} {
		for n := range 50 {
			b := valid
			b.Operation, b.ResourceName = op, fmt.Sprintf("t%d", n)
			sets[i] = append(sets[i], b)
		}
		deny := valid
		deny.Operation, deny.Permission = op, PermissionDeny
		deny.ResourceName, deny.PatternType = "t4", PatternPrefixed
		sets[i] = append(sets[i], deny)
	}
	a.Set(sets[0])
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				// Both sets imply DESCRIBE of t7, both deny t42.
				if !a.Authorize("User:alice", "h", OpDescribe, ResourceTopic, "t7") {
					t.Error("DESCRIBE t7 denied")
					return
				}
				if a.Authorize("User:alice", "h", OpRead, ResourceTopic, "t42") ||
					a.Authorize("User:alice", "h", OpWrite, ResourceTopic, "t42") {
					t.Error("t42 allowed")
					return
				}
			}
		})
	}
	for i := range 200 {
		a.Set(sets[i%2])
	}
	close(stop)
	wg.Wait()
}

// TestAuthorizeAllocs: a decision allocates nothing.
func TestAuthorizeAllocs(t *testing.T) {
	a, queries := benchAuthorizer(1000)
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		q := &queries[i%len(queries)]
		i++
		a.Authorize(q.principal, q.host, q.op, q.rt, q.name)
	})
	require.Zero(t, allocs)
	allocs = testing.AllocsPerRun(1000, func() {
		a.AuthorizeByResourceType("User:u3", "10.0.0.1", OpWrite, ResourceTopic)
	})
	require.Zero(t, allocs, "without DENY bindings for the principal")
}
