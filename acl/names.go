package acl

import (
	"fmt"
	"strings"

	"github.com/diskless-go/diskless/kafkaerr"
)

// Kafka's names of the enumerations, indexed by code. They are what
// kafka-acls.sh prints and accepts, and what Kafka's enums' toString
// returns.
var (
	resourceTypeNames = [...]string{
		ResourceUnknown:         "UNKNOWN",
		ResourceAny:             "ANY",
		ResourceTopic:           "TOPIC",
		ResourceGroup:           "GROUP",
		ResourceCluster:         "CLUSTER",
		ResourceTransactionalID: "TRANSACTIONAL_ID",
		ResourceDelegationToken: "DELEGATION_TOKEN",
		ResourceUser:            "USER",
	}
	patternTypeNames = [...]string{
		PatternUnknown:  "UNKNOWN",
		PatternAny:      "ANY",
		PatternMatch:    "MATCH",
		PatternLiteral:  "LITERAL",
		PatternPrefixed: "PREFIXED",
	}
	operationNames = [...]string{
		OpUnknown:         "UNKNOWN",
		OpAny:             "ANY",
		OpAll:             "ALL",
		OpRead:            "READ",
		OpWrite:           "WRITE",
		OpCreate:          "CREATE",
		OpDelete:          "DELETE",
		OpAlter:           "ALTER",
		OpDescribe:        "DESCRIBE",
		OpClusterAction:   "CLUSTER_ACTION",
		OpDescribeConfigs: "DESCRIBE_CONFIGS",
		OpAlterConfigs:    "ALTER_CONFIGS",
		OpIdempotentWrite: "IDEMPOTENT_WRITE",
		OpCreateTokens:    "CREATE_TOKENS",
		OpDescribeTokens:  "DESCRIBE_TOKENS",
		OpTwoPhaseCommit:  "TWO_PHASE_COMMIT",
	}
	permissionNames = [...]string{
		PermissionUnknown: "UNKNOWN",
		PermissionAny:     "ANY",
		PermissionDeny:    "DENY",
		PermissionAllow:   "ALLOW",
	}
)

// name returns names[code], or "UNKNOWN(code)" for a code past the table
// (a newer Kafka's value, or garbage).
func name(names []string, code int8) string {
	if code >= 0 && int(code) < len(names) {
		return names[code]
	}
	return fmt.Sprintf("UNKNOWN(%d)", code)
}

// parse returns the code whose name is s, ignoring case as Kafka's
// fromString does.
func parse(names []string, what, s string) (int8, error) {
	for code, n := range names {
		if strings.EqualFold(n, s) {
			return int8(code), nil
		}
	}
	return 0, kafkaerr.New(kafkaerr.InvalidRequest, "acl: unknown %s %q", what, s)
}

// String returns Kafka's name of the resource type ("TOPIC"), or
// "UNKNOWN(n)" for a code Kafka does not define.
func (t ResourceType) String() string { return name(resourceTypeNames[:], int8(t)) }

// String returns Kafka's name of the pattern type ("PREFIXED"), or
// "UNKNOWN(n)" for a code Kafka does not define.
func (t PatternType) String() string { return name(patternTypeNames[:], int8(t)) }

// String returns Kafka's name of the operation ("DESCRIBE_CONFIGS"), or
// "UNKNOWN(n)" for a code Kafka does not define.
func (o Operation) String() string { return name(operationNames[:], int8(o)) }

// String returns Kafka's name of the permission ("ALLOW"), or
// "UNKNOWN(n)" for a code Kafka does not define.
func (p Permission) String() string { return name(permissionNames[:], int8(p)) }

// ParseResourceType returns the resource type Kafka names s ("TOPIC",
// "transactional_id"; case is ignored). An unknown name is an error with
// kafkaerr.InvalidRequest.
func ParseResourceType(s string) (ResourceType, error) {
	c, err := parse(resourceTypeNames[:], "resource type", s)
	return ResourceType(c), err
}

// ParsePatternType returns the pattern type Kafka names s ("LITERAL",
// "prefixed"; case is ignored). An unknown name is an error with
// kafkaerr.InvalidRequest.
func ParsePatternType(s string) (PatternType, error) {
	c, err := parse(patternTypeNames[:], "pattern type", s)
	return PatternType(c), err
}

// ParseOperation returns the operation Kafka names s ("READ",
// "idempotent_write"; case is ignored). An unknown name is an error with
// kafkaerr.InvalidRequest.
func ParseOperation(s string) (Operation, error) {
	c, err := parse(operationNames[:], "operation", s)
	return Operation(c), err
}

// ParsePermission returns the permission Kafka names s ("ALLOW", "deny";
// case is ignored). An unknown name is an error with
// kafkaerr.InvalidRequest.
func ParsePermission(s string) (Permission, error) {
	c, err := parse(permissionNames[:], "permission", s)
	return Permission(c), err
}

// ParsePrincipal splits a principal "Type:Name" at its first ':' ("User:
// alice" is type "User", name "alice"; "User:CN=a:b" is name "CN=a:b").
// Both parts must be non-empty: a stricter rule than Kafka's parser,
// which accepts "User:" and ":alice" although no client authenticates as
// either. An error carries kafkaerr.InvalidRequest, as Kafka answers
// CreateAcls for a principal it cannot parse.
func ParsePrincipal(s string) (typ, name string, err error) {
	typ, name, ok := strings.Cut(s, ":")
	if !ok || typ == "" || name == "" {
		return "", "", kafkaerr.New(kafkaerr.InvalidRequest,
			"acl: principal %q is not Type:Name", s)
	}
	return typ, name, nil
}
