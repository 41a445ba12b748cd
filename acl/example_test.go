package acl_test

import (
	"fmt"

	"github.com/diskless-go/diskless/acl"
)

func ExampleAuthorizer() {
	a := acl.NewAuthorizer(acl.Options{SuperUsers: []string{"User:admin"}})
	a.Set([]acl.Binding{
		// alice may read every topic whose name starts with "orders.".
		{
			ResourceType: acl.ResourceTopic, ResourceName: "orders.", PatternType: acl.PatternPrefixed,
			Principal: "User:alice", Host: acl.Wildcard,
			Operation: acl.OpRead, Permission: acl.PermissionAllow,
		},
		// but not orders.secret, from anywhere.
		{
			ResourceType: acl.ResourceTopic, ResourceName: "orders.secret", PatternType: acl.PatternLiteral,
			Principal: "User:alice", Host: acl.Wildcard,
			Operation: acl.OpAll, Permission: acl.PermissionDeny,
		},
	})
	fmt.Println(a.Authorize("User:alice", "10.0.0.1", acl.OpRead, acl.ResourceTopic, "orders.eu"))
	fmt.Println(a.Authorize("User:alice", "10.0.0.1", acl.OpDescribe, acl.ResourceTopic, "orders.eu")) // READ implies DESCRIBE
	fmt.Println(a.Authorize("User:alice", "10.0.0.1", acl.OpRead, acl.ResourceTopic, "orders.secret"))
	fmt.Println(a.Authorize("User:admin", "10.0.0.1", acl.OpRead, acl.ResourceTopic, "orders.secret"))
	fmt.Println(a.AuthorizeByResourceType("User:alice", "10.0.0.1", acl.OpRead, acl.ResourceTopic))
	// Output:
	// true
	// true
	// false
	// true
	// true
}

func ExampleFilter_Matches() {
	name := "orders.eu"
	// The bindings that apply to the topic orders.eu, whatever their
	// pattern type (DescribeAcls with pattern type MATCH).
	f := acl.Filter{
		ResourceType: acl.ResourceTopic, ResourceName: &name, PatternType: acl.PatternMatch,
		Operation: acl.OpAny, Permission: acl.PermissionAny,
	}
	for _, b := range []acl.Binding{
		{ResourceType: acl.ResourceTopic, ResourceName: "orders.", PatternType: acl.PatternPrefixed},
		{ResourceType: acl.ResourceTopic, ResourceName: acl.Wildcard, PatternType: acl.PatternLiteral},
		{ResourceType: acl.ResourceTopic, ResourceName: "orders", PatternType: acl.PatternLiteral},
	} {
		fmt.Println(b.PatternType, b.ResourceName, f.Matches(b))
	}
	// Output:
	// PREFIXED orders. true
	// LITERAL * true
	// LITERAL orders false
}
