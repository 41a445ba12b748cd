package acl

import (
	"fmt"
	"strings"
)

// Validate reports whether Kafka would accept f in DescribeAcls or
// DeleteAcls: it refuses a filter with an UNKNOWN field (an unknown code
// counts as UNKNOWN, as Kafka decodes it), with a *kafkaerr.Error of
// kafkaerr.InvalidRequest. Everything else is a valid filter, even one
// that can match nothing.
func (f Filter) Validate() error {
	switch {
	case f.ResourceType < ResourceAny || f.ResourceType > ResourceUser:
		return invalid("unknown resource type %v in filter", f.ResourceType)
	case f.PatternType < PatternAny || f.PatternType > PatternPrefixed:
		return invalid("unknown pattern type %v in filter", f.PatternType)
	case f.Operation < OpAny || f.Operation > OpTwoPhaseCommit:
		return invalid("unknown operation %v in filter", f.Operation)
	case f.Permission < PermissionAny || f.Permission > PermissionAllow:
		return invalid("unknown permission %v in filter", f.Permission)
	}
	return nil
}

// Matches reports whether f selects b, as Kafka's AclBindingFilter does.
//
// Resource type, operation and permission match when equal, or when the
// filter's is ANY (ALL is an operation like the others here: a filter for
// READ does not select a binding for ALL). Principal and host match when
// the filter's is nil or equal; "User:*" and "*" are compared as strings.
//
// The pattern type and name:
//
//	filter pattern  name nil   name n
//	ANY             any        any pattern type, name equal to n
//	LITERAL         LITERAL    LITERAL, name equal to n
//	PREFIXED        PREFIXED   PREFIXED, name equal to n
//	MATCH           any        LITERAL named n or "*", or PREFIXED whose
//	                           name is a prefix of n: the bindings that
//	                           apply to the resource named n
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType != ResourceAny && f.ResourceType != b.ResourceType {
		return false
	}
	if f.Operation != OpAny && f.Operation != b.Operation {
		return false
	}
	if f.Permission != PermissionAny && f.Permission != b.Permission {
		return false
	}
	if f.Principal != nil && *f.Principal != b.Principal {
		return false
	}
	if f.Host != nil && *f.Host != b.Host {
		return false
	}
	return f.matchesPattern(b)
}

// matchesPattern is Kafka's ResourcePatternFilter.matches on b's pattern
// type and name.
func (f Filter) matchesPattern(b Binding) bool {
	if f.PatternType != PatternAny && f.PatternType != PatternMatch && f.PatternType != b.PatternType {
		return false
	}
	if f.ResourceName == nil {
		return true
	}
	n := *f.ResourceName
	if f.PatternType != PatternMatch {
		return n == b.ResourceName
	}
	switch b.PatternType {
	case PatternLiteral:
		return n == b.ResourceName || b.ResourceName == Wildcard
	case PatternPrefixed:
		return strings.HasPrefix(n, b.ResourceName)
	}
	return false
}

// String describes f for logs, "<any>" for a nil string:
// "ANY User:alice from <any> ANY TOPIC MATCH:orders".
func (f Filter) String() string {
	s := func(p *string) string {
		if p == nil {
			return "<any>"
		}
		return *p
	}
	return fmt.Sprintf("%v %s from %s %v %v %v:%s", f.Permission, s(f.Principal), s(f.Host),
		f.Operation, f.ResourceType, f.PatternType, s(f.ResourceName))
}
