package acl

import (
	"fmt"

	"github.com/diskless-go/diskless/kafkaerr"
)

// ClusterName is the name of the one CLUSTER resource: Kafka's
// Resource.CLUSTER_NAME. A CLUSTER binding names it literally.
const ClusterName = "kafka-cluster"

// WildcardPrincipal is the principal of a binding that applies to every
// principal. Kafka gives it to every request whatever its principal's
// type, and knows no other wildcard: "Group:*" is an ordinary principal.
const WildcardPrincipal = "User:*"

// concreteResourceType reports whether t names a kind of resource (not
// UNKNOWN, ANY, or a code Kafka does not define).
func concreteResourceType(t ResourceType) bool {
	return t >= ResourceTopic && t <= ResourceUser
}

// concreteOperation reports whether o is an operation a binding may name
// and a request may be authorized for: ALL or a real operation, not
// UNKNOWN, ANY, or a code Kafka does not define.
func concreteOperation(o Operation) bool {
	return o >= OpAll && o <= OpTwoPhaseCommit
}

// Validate reports whether Kafka would create b (CreateAcls). The error,
// a *kafkaerr.Error with kafkaerr.InvalidRequest as Kafka answers, says
// which field is wrong:
//
//   - the resource type is UNKNOWN, ANY or not a code Kafka defines;
//   - the pattern type is not LITERAL or PREFIXED (ANY and MATCH are for
//     filters);
//   - the operation is UNKNOWN, ANY or undefined;
//   - the permission is not ALLOW or DENY;
//   - the resource name is empty;
//   - a CLUSTER binding names anything but ClusterName;
//   - the principal is not "Type:Name" (see ParsePrincipal);
//   - the host is empty.
func (b Binding) Validate() error {
	switch {
	case !concreteResourceType(b.ResourceType):
		return invalid("invalid resource type %v", b.ResourceType)
	case b.PatternType != PatternLiteral && b.PatternType != PatternPrefixed:
		return invalid("invalid pattern type %v", b.PatternType)
	case !concreteOperation(b.Operation):
		return invalid("invalid operation %v", b.Operation)
	case b.Permission != PermissionAllow && b.Permission != PermissionDeny:
		return invalid("invalid permission %v", b.Permission)
	case b.ResourceName == "":
		return invalid("empty resource name")
	case b.ResourceType == ResourceCluster && b.ResourceName != ClusterName:
		return invalid("the only valid name for the CLUSTER resource is %s", ClusterName)
	case b.Host == "":
		return invalid("empty host")
	}
	if _, _, err := ParsePrincipal(b.Principal); err != nil {
		return err
	}
	return nil
}

// invalid returns an InvalidRequest error.
func invalid(format string, args ...any) error {
	return kafkaerr.New(kafkaerr.InvalidRequest, "acl: "+format, args...)
}

// Filter returns the filter that matches exactly b: every field set,
// the pattern type b's own (Kafka's AclBinding.toFilter).
func (b Binding) Filter() Filter {
	name, principal, host := b.ResourceName, b.Principal, b.Host
	return Filter{
		ResourceType: b.ResourceType,
		ResourceName: &name,
		PatternType:  b.PatternType,
		Principal:    &principal,
		Host:         &host,
		Operation:    b.Operation,
		Permission:   b.Permission,
	}
}

// String describes b for logs and error messages:
// "ALLOW User:alice from * READ TOPIC LITERAL:orders".
func (b Binding) String() string {
	return fmt.Sprintf("%v %s from %s %v %v %v:%s", b.Permission, b.Principal, b.Host,
		b.Operation, b.ResourceType, b.PatternType, b.ResourceName)
}
