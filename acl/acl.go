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
//
// # Deciding a request
//
// Authorizer decides whether a principal, connected from a host, may
// perform an operation on a resource (a type and a name), as Kafka's
// StandardAuthorizer does:
//
//  1. A super user (Options.SuperUsers) may do anything.
//  2. A binding applies when its resource type is the resource's, its
//     pattern matches the name (LITERAL: the name itself, or "*";
//     PREFIXED: a prefix of the name, never a wildcard), its principal is
//     the request's or "User:*" (for every principal, whatever its type),
//     its host is the request's or "*", and its operation is the
//     request's or ALL.
//  3. Any DENY that applies denies, whatever ALLOWs apply.
//  4. Otherwise any ALLOW that applies allows. An ALLOW also applies to
//     the operations it implies: READ, WRITE, DELETE and ALTER imply
//     DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS. A DENY implies
//     nothing: a DENY of READ leaves DESCRIBE to the other bindings.
//  5. Otherwise, if no binding at all has a pattern that matches the
//     resource (whatever its principal, host, operation or permission),
//     the request is allowed when Options.AllowEveryoneIfNoACLFound, else
//     denied.
//  6. Otherwise it is denied.
//
// AuthorizeByResourceType answers whether a principal may perform an
// operation on some resource of a type (Kafka's authorizeByResourceType);
// its rules are on the method.
//
// Principals ("Type:Name") and hosts are compared as strings, as Kafka
// compares them: the caller formats a request's principal and its
// client's address in the form the bindings use (one form for every
// address, such as netip.Addr's String).
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
