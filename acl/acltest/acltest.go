// Package acltest is a conformance suite for authorizers: every
// implementation that decides Kafka requests from ACL bindings
// (acl.Authorizer, a broker's authorizer over its stored ACLs) runs
// TestAuthorizer, which checks each of Kafka's rules the acl package
// doc lists against scenarios of bindings and requests.
package acltest

import (
	"fmt"
	"testing"

	"github.com/diskless-go/diskless/acl"
)

// Authorizer is what the suite tests: acl.Authorizer's Authorize.
type Authorizer interface {
	// Authorize reports whether principal, from host, may perform op on
	// the resource of type rt named name.
	Authorize(principal, host string, op acl.Operation, rt acl.ResourceType, name string) bool
}

// ResourceTypeAuthorizer is an Authorizer that also answers Kafka's
// authorizeByResourceType. TestAuthorizer tests it too when the
// Authorizer that open returns has the method.
type ResourceTypeAuthorizer interface {
	Authorizer
	// AuthorizeByResourceType reports whether principal, from host, may
	// perform op on at least one resource of type rt.
	AuthorizeByResourceType(principal, host string, op acl.Operation, rt acl.ResourceType) bool
}

// TestAuthorizer runs every scenario of the rule matrix (Scenarios), each
// a subtest, against an Authorizer that open returns for it: configured
// with opts, holding bindings (all valid: acl.Binding.Validate accepts
// each). When the Authorizer is also a ResourceTypeAuthorizer, the
// scenarios' AuthorizeByResourceType checks run too.
func TestAuthorizer(t *testing.T, open func(t *testing.T, opts acl.Options, bindings []acl.Binding) Authorizer) {
	t.Helper()
	for _, sc := range Scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			a := open(t, sc.Options, sc.Bindings)
			for _, c := range sc.Checks {
				if got := a.Authorize(c.Principal, c.Host, c.Operation, c.ResourceType, c.Name); got != c.Want {
					t.Errorf("%v: got %v, want %v", c, got, c.Want)
				}
			}
			if len(sc.TypeChecks) == 0 {
				return
			}
			rta, ok := a.(ResourceTypeAuthorizer)
			if !ok {
				return
			}
			for _, c := range sc.TypeChecks {
				got := rta.AuthorizeByResourceType(c.Principal, c.Host, c.Operation, c.ResourceType)
				if got != c.Want {
					t.Errorf("%v: got %v, want %v", c, got, c.Want)
				}
			}
		})
	}
}

// Scenario is a set of bindings, the options of the authorizer that holds
// them, and the decisions it must take.
type Scenario struct {
	// Name names the scenario's subtest, and the rule it checks.
	Name string
	// Options configure the authorizer.
	Options acl.Options
	// Bindings are the ACLs in effect, all valid.
	Bindings []acl.Binding
	// Checks are Authorize calls and their answers.
	Checks []Check
	// TypeChecks are AuthorizeByResourceType calls and their answers
	// (Name unused).
	TypeChecks []Check
}

// Check is one request and the decision it must get.
type Check struct {
	// Principal is the request's principal, "User:alice".
	Principal string
	// Host is the address the request comes from.
	Host string
	// Operation is what the request does.
	Operation acl.Operation
	// ResourceType and Name are the resource it does it to.
	ResourceType acl.ResourceType
	Name         string
	// Want is the decision: true to allow.
	Want bool
}

// String describes c for a failure message.
func (c Check) String() string {
	return fmt.Sprintf("%s from %s %v %v %q", c.Principal, c.Host, c.Operation, c.ResourceType, c.Name)
}

// Principals, hosts and names the scenarios use.
const (
	alice   = "User:alice"
	bob     = "User:bob"
	admin   = "User:admin"
	anyHost = acl.Wildcard
	host1   = "10.0.0.1"
	host2   = "10.0.0.2"
)

// b returns a binding.
func b(perm acl.Permission, principal, host string, op acl.Operation, rt acl.ResourceType, pt acl.PatternType, name string) acl.Binding {
	return acl.Binding{
		ResourceType: rt, ResourceName: name, PatternType: pt,
		Principal: principal, Host: host, Operation: op, Permission: perm,
	}
}

// allowTopic and denyTopic return a binding on topics from any host.
func allowTopic(principal string, op acl.Operation, pt acl.PatternType, name string) acl.Binding {
	return b(acl.PermissionAllow, principal, anyHost, op, acl.ResourceTopic, pt, name)
}

func denyTopic(principal string, op acl.Operation, pt acl.PatternType, name string) acl.Binding {
	return b(acl.PermissionDeny, principal, anyHost, op, acl.ResourceTopic, pt, name)
}

// topic returns a check of op on a topic from host1.
func topic(principal string, op acl.Operation, name string, want bool) Check {
	return Check{principal, host1, op, acl.ResourceTopic, name, want}
}

// onType returns an AuthorizeByResourceType check from host1.
func onType(principal string, op acl.Operation, rt acl.ResourceType, want bool) Check {
	return Check{principal, host1, op, rt, "", want}
}

const (
	lit = acl.PatternLiteral
	pre = acl.PatternPrefixed
)

// Scenarios returns the rule matrix TestAuthorizer runs: the scenarios
// are fresh values, for a caller to run its own way.
func Scenarios() []Scenario {
	return []Scenario{
		{
			Name:     "literal",
			Bindings: []acl.Binding{allowTopic(alice, acl.OpRead, lit, "orders")},
			Checks: []Check{
				topic(alice, acl.OpRead, "orders", true),
				topic(alice, acl.OpRead, "orders2", false),
				topic(alice, acl.OpRead, "order", false),
				topic(alice, acl.OpRead, "", false),
				topic(bob, acl.OpRead, "orders", false),
				topic(alice, acl.OpWrite, "orders", false),
				{alice, host1, acl.OpRead, acl.ResourceGroup, "orders", false},
			},
		},
		{
			Name:     "literal name is not a prefix",
			Bindings: []acl.Binding{allowTopic(alice, acl.OpRead, lit, "ord")},
			Checks: []Check{
				topic(alice, acl.OpRead, "ord", true),
				topic(alice, acl.OpRead, "orders", false),
			},
		},
		{
			Name: "prefixed",
			Bindings: []acl.Binding{
				allowTopic(alice, acl.OpRead, pre, "ord"),
				allowTopic(bob, acl.OpRead, pre, "*"),
			},
			Checks: []Check{
				topic(alice, acl.OpRead, "orders", true),
				topic(alice, acl.OpRead, "ord", true),
				topic(alice, acl.OpRead, "or", false),
				topic(alice, acl.OpRead, "xorders", false),
				topic(alice, acl.OpRead, "Orders", false),
				// A PREFIXED "*" is a prefix, not a wildcard.
				topic(bob, acl.OpRead, "orders", false),
				topic(bob, acl.OpRead, "*orders", true),
			},
		},
		{
			Name: "prefix chains",
			Bindings: []acl.Binding{
				allowTopic(alice, acl.OpRead, pre, "a"),
				denyTopic(alice, acl.OpRead, pre, "abc"),
				allowTopic(bob, acl.OpRead, pre, "ab"),
				denyTopic(bob, acl.OpRead, pre, "abz"),
				allowTopic(bob, acl.OpRead, pre, "b"),
				allowTopic(bob, acl.OpRead, pre, "abcdef"),
				denyTopic(bob, acl.OpRead, lit, "abcd"),
			},
			Checks: []Check{
				topic(alice, acl.OpRead, "a", true),
				topic(alice, acl.OpRead, "ab", true),
				topic(alice, acl.OpRead, "abc", false),
				topic(alice, acl.OpRead, "abcd", false),
				topic(alice, acl.OpRead, "abd", true),
				topic(alice, acl.OpRead, "ac", true),
				topic(alice, acl.OpRead, "b", false),
				topic(bob, acl.OpRead, "abc", true),
				topic(bob, acl.OpRead, "abcd", false),
				topic(bob, acl.OpRead, "abcde", true),
				topic(bob, acl.OpRead, "abcdefg", true),
				topic(bob, acl.OpRead, "abz", false),
				topic(bob, acl.OpRead, "abzz", false),
				topic(bob, acl.OpRead, "ac", false),
				topic(bob, acl.OpRead, "a", false),
				topic(bob, acl.OpRead, "bz", true),
			},
		},
		{
			Name: "wildcard resource",
			Bindings: []acl.Binding{
				allowTopic(alice, acl.OpRead, lit, acl.Wildcard),
			},
			Checks: []Check{
				topic(alice, acl.OpRead, "orders", true),
				topic(alice, acl.OpRead, "*", true),
				topic(alice, acl.OpRead, "", true),
				topic(alice, acl.OpWrite, "orders", false),
				topic(bob, acl.OpRead, "orders", false),
				{alice, host1, acl.OpRead, acl.ResourceGroup, "orders", false},
			},
		},
		{
			Name: "wildcard principal",
			Bindings: []acl.Binding{
				allowTopic(acl.WildcardPrincipal, acl.OpRead, lit, "orders"),
				allowTopic("Group:*", acl.OpWrite, lit, "orders"),
			},
			Checks: []Check{
				topic(alice, acl.OpRead, "orders", true),
				topic(bob, acl.OpRead, "orders", true),
				topic(acl.WildcardPrincipal, acl.OpRead, "orders", true),
				// Kafka gives "User:*" to every principal, whatever its
				// type, and has no other wildcard.
				topic("Group:ops", acl.OpRead, "orders", true),
				topic("Group:ops", acl.OpWrite, "orders", false),
				topic("Group:*", acl.OpWrite, "orders", true),
				topic(alice, acl.OpRead, "payments", false),
			},
		},
		{
			Name: "host",
			Bindings: []acl.Binding{
				b(acl.PermissionAllow, alice, host1, acl.OpRead, acl.ResourceTopic, lit, "orders"),
				b(acl.PermissionAllow, alice, anyHost, acl.OpWrite, acl.ResourceTopic, lit, "orders"),
			},
			Checks: []Check{
				{alice, host1, acl.OpRead, acl.ResourceTopic, "orders", true},
				{alice, host2, acl.OpRead, acl.ResourceTopic, "orders", false},
				{alice, host1, acl.OpWrite, acl.ResourceTopic, "orders", true},
				{alice, host2, acl.OpWrite, acl.ResourceTopic, "orders", true},
				{alice, "*", acl.OpRead, acl.ResourceTopic, "orders", false},
			},
		},
		{
			Name: "deny wins",
			Bindings: []acl.Binding{
				// Same pattern.
				allowTopic(alice, acl.OpRead, lit, "orders"),
				denyTopic(alice, acl.OpRead, lit, "orders"),
				// A wildcard principal's DENY.
				allowTopic(alice, acl.OpRead, lit, "payments"),
				allowTopic(bob, acl.OpRead, lit, "payments"),
				denyTopic(acl.WildcardPrincipal, acl.OpRead, lit, "payments"),
				// A PREFIXED DENY over a LITERAL ALLOW.
				allowTopic(alice, acl.OpWrite, lit, "logs.app"),
				denyTopic(alice, acl.OpWrite, pre, "logs."),
				// A LITERAL DENY over a PREFIXED ALLOW.
				allowTopic(bob, acl.OpWrite, pre, "logs."),
				denyTopic(bob, acl.OpWrite, lit, "logs.secret"),
				// A wildcard DENY over everything.
				allowTopic(alice, acl.OpDelete, lit, "orders"),
				allowTopic(alice, acl.OpDelete, pre, "o"),
				denyTopic(alice, acl.OpDelete, lit, acl.Wildcard),
				// A DENY from one host.
				allowTopic(bob, acl.OpRead, lit, "events"),
				b(acl.PermissionDeny, bob, host2, acl.OpRead, acl.ResourceTopic, lit, "events"),
			},
			Checks: []Check{
				topic(alice, acl.OpRead, "orders", false),
				topic(alice, acl.OpRead, "payments", false),
				topic(bob, acl.OpRead, "payments", false),
				topic(alice, acl.OpWrite, "logs.app", false),
				topic(bob, acl.OpWrite, "logs.app", true),
				topic(bob, acl.OpWrite, "logs.secret", false),
				topic(bob, acl.OpWrite, "logs.secret2", true),
				topic(alice, acl.OpDelete, "orders", false),
				topic(alice, acl.OpDelete, "other", false),
				{bob, host1, acl.OpRead, acl.ResourceTopic, "events", true},
				{bob, host2, acl.OpRead, acl.ResourceTopic, "events", false},
			},
		},
		{
			Name: "ALL",
			Bindings: []acl.Binding{
				allowTopic(alice, acl.OpAll, lit, "orders"),
				allowTopic(bob, acl.OpRead, lit, "orders"),
				denyTopic(bob, acl.OpAll, pre, "ord"),
				allowTopic(bob, acl.OpRead, lit, "payments"),
			},
			Checks: []Check{
				topic(alice, acl.OpRead, "orders", true),
				topic(alice, acl.OpWrite, "orders", true),
				topic(alice, acl.OpDescribe, "orders", true),
				topic(alice, acl.OpAlterConfigs, "orders", true),
				topic(alice, acl.OpDescribeConfigs, "orders", true),
				topic(alice, acl.OpAll, "orders", true),
				topic(bob, acl.OpRead, "orders", false),
				topic(bob, acl.OpDescribe, "orders", false),
				topic(bob, acl.OpRead, "payments", true),
				// ALLOW READ is not ALLOW ALL.
				topic(bob, acl.OpAll, "payments", false),
			},
		},
		{
			Name: "implied operations",
			Bindings: []acl.Binding{
				allowTopic(alice, acl.OpRead, lit, "read"),
				allowTopic(alice, acl.OpWrite, lit, "write"),
				allowTopic(alice, acl.OpDelete, lit, "delete"),
				allowTopic(alice, acl.OpAlter, lit, "alter"),
				allowTopic(alice, acl.OpCreate, lit, "create"),
				allowTopic(alice, acl.OpAlterConfigs, lit, "alterconfigs"),
				allowTopic(alice, acl.OpDescribe, lit, "describe"),
				allowTopic(alice, acl.OpDescribeConfigs, lit, "describeconfigs"),
				// A DENY implies nothing.
				allowTopic(bob, acl.OpDescribe, lit, "read"),
				denyTopic(bob, acl.OpRead, lit, "read"),
				allowTopic(bob, acl.OpDescribeConfigs, lit, "alterconfigs"),
				denyTopic(bob, acl.OpAlterConfigs, lit, "alterconfigs"),
				// A DENY of DESCRIBE beats an ALLOW that implies it.
				allowTopic(bob, acl.OpWrite, lit, "write"),
				denyTopic(bob, acl.OpDescribe, lit, "write"),
			},
			Checks: []Check{
				topic(alice, acl.OpDescribe, "read", true),
				topic(alice, acl.OpDescribe, "write", true),
				topic(alice, acl.OpDescribe, "delete", true),
				topic(alice, acl.OpDescribe, "alter", true),
				topic(alice, acl.OpDescribe, "create", false),
				topic(alice, acl.OpDescribe, "alterconfigs", false),
				topic(alice, acl.OpDescribeConfigs, "alterconfigs", true),
				topic(alice, acl.OpDescribeConfigs, "alter", false),
				topic(alice, acl.OpDescribeConfigs, "read", false),
				topic(alice, acl.OpRead, "describe", false),
				topic(alice, acl.OpAlterConfigs, "describeconfigs", false),
				topic(alice, acl.OpWrite, "read", false),
				topic(bob, acl.OpDescribe, "read", true),
				topic(bob, acl.OpRead, "read", false),
				topic(bob, acl.OpDescribeConfigs, "alterconfigs", true),
				topic(bob, acl.OpWrite, "write", true),
				topic(bob, acl.OpDescribe, "write", false),
			},
		},
		{
			Name:    "super users",
			Options: acl.Options{SuperUsers: []string{admin, "User:root"}},
			Bindings: []acl.Binding{
				denyTopic(admin, acl.OpAll, lit, acl.Wildcard),
				denyTopic(acl.WildcardPrincipal, acl.OpAll, lit, acl.Wildcard),
				allowTopic(alice, acl.OpRead, lit, "orders"),
			},
			Checks: []Check{
				topic(admin, acl.OpRead, "orders", true),
				topic(admin, acl.OpAll, "orders", true),
				topic("User:root", acl.OpDelete, "orders", true),
				{admin, host2, acl.OpClusterAction, acl.ResourceCluster, acl.ClusterName, true},
				{admin, host2, acl.OpRead, acl.ResourceGroup, "g", true},
				topic(alice, acl.OpRead, "orders", false),
				topic("User:Admin", acl.OpRead, "orders", false),
			},
			TypeChecks: []Check{
				onType(admin, acl.OpWrite, acl.ResourceTopic, true),
				onType(admin, acl.OpRead, acl.ResourceGroup, true),
				onType(alice, acl.OpRead, acl.ResourceTopic, false),
			},
		},
		{
			Name: "no ACL found denies by default",
			Bindings: []acl.Binding{
				allowTopic(alice, acl.OpRead, lit, "orders"),
			},
			Checks: []Check{
				topic(alice, acl.OpRead, "payments", false),
				topic(bob, acl.OpRead, "payments", false),
				{alice, host1, acl.OpRead, acl.ResourceGroup, "g", false},
			},
			TypeChecks: []Check{
				onType(alice, acl.OpRead, acl.ResourceGroup, false),
			},
		},
		{
			Name:    "allow everyone if no ACL found",
			Options: acl.Options{AllowEveryoneIfNoACLFound: true},
			Bindings: []acl.Binding{
				allowTopic(bob, acl.OpRead, lit, "orders"),
				allowTopic(bob, acl.OpWrite, pre, "pay"),
				denyTopic(bob, acl.OpWrite, lit, "locked"),
				b(acl.PermissionAllow, bob, anyHost, acl.OpRead, acl.ResourceGroup, lit, acl.Wildcard),
			},
			Checks: []Check{
				// Bindings for another principal or operation on the
				// resource: decided by them.
				topic(alice, acl.OpRead, "orders", false),
				topic(alice, acl.OpRead, "payments", false),
				topic(alice, acl.OpRead, "locked", false),
				topic(bob, acl.OpWrite, "orders", false),
				// No binding matches: allowed.
				topic(alice, acl.OpRead, "events", true),
				topic(alice, acl.OpDelete, "pa", true),
				{alice, host2, acl.OpClusterAction, acl.ResourceCluster, acl.ClusterName, true},
				// The wildcard matches every group.
				{alice, host1, acl.OpRead, acl.ResourceGroup, "g", false},
				{bob, host1, acl.OpRead, acl.ResourceGroup, "g", true},
			},
			TypeChecks: []Check{
				// No binding matches the topic "hardcode".
				onType(alice, acl.OpWrite, acl.ResourceTopic, true),
				onType(alice, acl.OpRead, acl.ResourceTransactionalID, true),
				// The wildcard group binding matches it.
				onType(alice, acl.OpRead, acl.ResourceGroup, false),
			},
		},
		{
			Name: "resource types",
			Bindings: []acl.Binding{
				b(acl.PermissionAllow, alice, anyHost, acl.OpClusterAction, acl.ResourceCluster, lit, acl.ClusterName),
				b(acl.PermissionAllow, alice, anyHost, acl.OpWrite, acl.ResourceTransactionalID, pre, "app-"),
				b(acl.PermissionAllow, alice, anyHost, acl.OpRead, acl.ResourceGroup, lit, "orders"),
				b(acl.PermissionAllow, alice, anyHost, acl.OpDescribeTokens, acl.ResourceDelegationToken, lit, "t"),
				b(acl.PermissionAllow, alice, anyHost, acl.OpCreateTokens, acl.ResourceUser, lit, "User:bob"),
			},
			Checks: []Check{
				{alice, host1, acl.OpClusterAction, acl.ResourceCluster, acl.ClusterName, true},
				{bob, host1, acl.OpClusterAction, acl.ResourceCluster, acl.ClusterName, false},
				{alice, host1, acl.OpWrite, acl.ResourceTransactionalID, "app-1", true},
				{alice, host1, acl.OpWrite, acl.ResourceTopic, "app-1", false},
				{alice, host1, acl.OpRead, acl.ResourceGroup, "orders", true},
				{alice, host1, acl.OpRead, acl.ResourceTopic, "orders", false},
				{alice, host1, acl.OpDescribeTokens, acl.ResourceDelegationToken, "t", true},
				{alice, host1, acl.OpCreateTokens, acl.ResourceUser, "User:bob", true},
			},
		},
		{
			Name:    "requests for no operation or resource type",
			Options: acl.Options{SuperUsers: []string{admin}, AllowEveryoneIfNoACLFound: true},
			Bindings: []acl.Binding{
				allowTopic(alice, acl.OpAll, lit, acl.Wildcard),
			},
			Checks: []Check{
				topic(alice, acl.OpUnknown, "orders", false),
				topic(alice, acl.OpAny, "orders", false),
				topic(alice, acl.Operation(99), "orders", false),
				topic(admin, acl.OpAny, "orders", false),
				{alice, host1, acl.OpRead, acl.ResourceAny, "orders", false},
				{alice, host1, acl.OpRead, acl.ResourceUnknown, "orders", false},
				{admin, host1, acl.OpRead, acl.ResourceType(42), "orders", false},
			},
			TypeChecks: []Check{
				onType(alice, acl.OpAny, acl.ResourceTopic, false),
				onType(admin, acl.OpRead, acl.ResourceAny, false),
			},
		},
		{
			Name: "by resource type",
			Bindings: []acl.Binding{
				// alice may write orders: some topic.
				allowTopic(alice, acl.OpWrite, lit, "orders"),
				allowTopic(alice, acl.OpRead, lit, "orders"),
				// Implied operations do not count past the "hardcode"
				// check: READ on orders is not DESCRIBE on some topic.
				// bob's literal ALLOW is shadowed by a literal DENY of
				// the same name; his prefixed one by a shorter prefix.
				allowTopic(bob, acl.OpWrite, lit, "orders"),
				denyTopic(bob, acl.OpWrite, lit, "orders"),
				allowTopic(bob, acl.OpWrite, pre, "logs.app"),
				denyTopic(bob, acl.OpWrite, pre, "logs."),
				// A literal DENY does not shadow a prefixed ALLOW.
				b(acl.PermissionAllow, bob, anyHost, acl.OpRead, acl.ResourceTopic, pre, "ord"),
				b(acl.PermissionDeny, bob, anyHost, acl.OpRead, acl.ResourceTopic, lit, "ord"),
				// A prefixed DENY of the ALLOW's own name shadows it.
				b(acl.PermissionAllow, bob, anyHost, acl.OpDelete, acl.ResourceTopic, lit, "x"),
				b(acl.PermissionDeny, bob, anyHost, acl.OpDelete, acl.ResourceTopic, pre, "x"),
				// One ALLOW not shadowed is enough.
				b(acl.PermissionAllow, bob, anyHost, acl.OpAlter, acl.ResourceTopic, lit, "logs.a"),
				b(acl.PermissionAllow, bob, anyHost, acl.OpAlter, acl.ResourceTopic, lit, "metrics"),
				b(acl.PermissionDeny, bob, anyHost, acl.OpAlter, acl.ResourceTopic, pre, "logs."),
				// A wildcard DENY denies, whatever else allows.
				b(acl.PermissionAllow, bob, anyHost, acl.OpCreate, acl.ResourceTopic, lit, acl.Wildcard),
				b(acl.PermissionDeny, bob, anyHost, acl.OpCreate, acl.ResourceTopic, lit, acl.Wildcard),
				b(acl.PermissionAllow, bob, anyHost, acl.OpCreate, acl.ResourceTopic, pre, "a"),
				// A wildcard ALLOW allows despite other DENYs, even a
				// PREFIXED DENY of "*".
				b(acl.PermissionAllow, bob, anyHost, acl.OpWrite, acl.ResourceGroup, lit, acl.Wildcard),
				b(acl.PermissionDeny, bob, anyHost, acl.OpWrite, acl.ResourceGroup, pre, "h"),
				b(acl.PermissionDeny, bob, anyHost, acl.OpWrite, acl.ResourceGroup, pre, acl.Wildcard),
				// Principal, host and ALL.
				b(acl.PermissionAllow, acl.WildcardPrincipal, anyHost, acl.OpWrite, acl.ResourceTransactionalID, pre, "tx"),
				b(acl.PermissionAllow, alice, host2, acl.OpAlter, acl.ResourceGroup, lit, "g"),
				b(acl.PermissionAllow, alice, anyHost, acl.OpAll, acl.ResourceDelegationToken, lit, "t"),
				// The check of the name "hardcode" sees implied
				// operations and prefixes of "hardcode".
				b(acl.PermissionAllow, alice, anyHost, acl.OpRead, acl.ResourceGroup, lit, acl.Wildcard),
				b(acl.PermissionAllow, alice, anyHost, acl.OpAlterConfigs, acl.ResourceTopic, pre, "hard"),
				b(acl.PermissionDeny, alice, anyHost, acl.OpAlterConfigs, acl.ResourceTopic, pre, "h"),
			},
			Checks: []Check{
				topic(alice, acl.OpWrite, "orders", true),
				topic(bob, acl.OpWrite, "orders", false),
				topic(bob, acl.OpRead, "orders", true),
				topic(bob, acl.OpRead, "ord", false),
			},
			TypeChecks: []Check{
				onType(alice, acl.OpWrite, acl.ResourceTopic, true),
				onType(alice, acl.OpRead, acl.ResourceTopic, true),
				onType(alice, acl.OpDescribe, acl.ResourceTopic, false),
				onType(alice, acl.OpDelete, acl.ResourceTopic, false),
				onType(bob, acl.OpWrite, acl.ResourceTopic, false),
				onType(bob, acl.OpRead, acl.ResourceTopic, true),
				onType(bob, acl.OpDelete, acl.ResourceTopic, false),
				onType(bob, acl.OpAlter, acl.ResourceTopic, true),
				onType(bob, acl.OpCreate, acl.ResourceTopic, false),
				onType(bob, acl.OpWrite, acl.ResourceGroup, true),
				onType(alice, acl.OpWrite, acl.ResourceTransactionalID, true),
				onType(bob, acl.OpWrite, acl.ResourceTransactionalID, true),
				{alice, host2, acl.OpAlter, acl.ResourceGroup, "", true},
				{alice, host1, acl.OpAlter, acl.ResourceGroup, "", false},
				onType(alice, acl.OpDescribeTokens, acl.ResourceDelegationToken, true),
				onType(alice, acl.OpDescribe, acl.ResourceGroup, true),
				onType(alice, acl.OpAlterConfigs, acl.ResourceTopic, false),
				// ALLOW ALTER_CONFIGS on "hard" implies DESCRIBE_CONFIGS
				// of "hardcode", and DENY of ALTER_CONFIGS on "h" does
				// not deny it.
				onType(alice, acl.OpDescribeConfigs, acl.ResourceTopic, true),
			},
		},
	}
}
