// Package acl is Kafka's access control lists: the bindings an
// administrator creates (CreateAcls), the filters that find them
// (DescribeAcls, DeleteAcls), and an authorizer that decides a request
// from them as Apache Kafka's StandardAuthorizer does.
//
// A binding allows or denies one principal, from one host, one operation
// on the resources its pattern matches:
//
//	principal  "User:alice", or "User:*" for every principal
//	host       an IP address, or "*" for every host
//	resource   TOPIC | GROUP | CLUSTER | TRANSACTIONAL_ID (| DELEGATION_TOKEN | USER)
//	pattern    LITERAL name (or "*": every resource of the type) | PREFIXED name
//	operation  READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION,
//	           DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ... or ALL
//	permission ALLOW | DENY
//
// The numbers of every enumeration are the Kafka protocol's (the
// resource_type, pattern_type, operation and permission_type fields of
// CreateAcls, DescribeAcls and DeleteAcls): part of the protocol and of
// the coordinator's records, they never change.
package acl

// ResourceType is the type of a resource (Kafka's ResourceType).
type ResourceType int8

// The resource types, with Kafka's codes.
const (
	ResourceUnknown         ResourceType = 0
	ResourceAny             ResourceType = 1 // filters only
	ResourceTopic           ResourceType = 2
	ResourceGroup           ResourceType = 3
	ResourceCluster         ResourceType = 4
	ResourceTransactionalID ResourceType = 5
	ResourceDelegationToken ResourceType = 6
	ResourceUser            ResourceType = 7
)

// PatternType says how a binding's resource name matches resources
// (Kafka's PatternType).
type PatternType int8

// The pattern types, with Kafka's codes. A binding is LITERAL or
// PREFIXED; ANY and MATCH are for filters only.
const (
	PatternUnknown  PatternType = 0
	PatternAny      PatternType = 1 // filters only: any pattern type
	PatternMatch    PatternType = 2 // filters only: the bindings that match a resource name
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4
)

// Operation is what a principal does to a resource (Kafka's AclOperation).
type Operation int8

// The operations, with Kafka's codes.
const (
	OpUnknown         Operation = 0
	OpAny             Operation = 1 // filters only
	OpAll             Operation = 2
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
	OpCreateTokens    Operation = 13
	OpDescribeTokens  Operation = 14
	OpTwoPhaseCommit  Operation = 15
)

// Permission is a binding's verdict (Kafka's AclPermissionType).
type Permission int8

// The permissions, with Kafka's codes.
const (
	PermissionUnknown Permission = 0
	PermissionAny     Permission = 1 // filters only
	PermissionDeny    Permission = 2
	PermissionAllow   Permission = 3
)

// Wildcard is the resource name, principal name and host that match
// every resource, principal and host.
const Wildcard = "*"

// Binding is one ACL: a resource pattern and an entry. It is a value;
// copy it freely.
type Binding struct {
	ResourceType ResourceType
	ResourceName string
	PatternType  PatternType
	// Principal is "Type:Name", "User:alice" or "User:*".
	Principal string
	// Host is an IP address, or "*".
	Host       string
	Operation  Operation
	Permission Permission
}

// Filter selects bindings (DescribeAcls, DeleteAcls). A nil string
// matches any value; the Any values of the enumerations match any value,
// and PatternMatch matches the bindings that would apply to a resource
// named ResourceName (the literal name, the wildcard, and every prefix).
type Filter struct {
	ResourceType ResourceType
	ResourceName *string
	PatternType  PatternType
	Principal    *string
	Host         *string
	Operation    Operation
	Permission   Permission
}
