package acl

import "strings"

// Linear is the reference the tests hold Authorizer to: Kafka's rules
// written as plainly as possible, a scan of every binding per call. It is
// exported to this package's external tests (the conformance suite runs
// against it too) and to no one else: it lives in a _test.go file.
type Linear struct {
	opts     Options
	bindings []Binding
}

// NewLinear returns the reference authorizer holding the valid bindings
// among bindings.
func NewLinear(opts Options, bindings []Binding) *Linear {
	l := &Linear{opts: opts}
	for _, b := range bindings {
		if b.Validate() == nil {
			l.bindings = append(l.bindings, b)
		}
	}
	return l
}

func (l *Linear) superUser(principal string) bool {
	for _, s := range l.opts.SuperUsers {
		if s == principal {
			return true
		}
	}
	return false
}

// applies reports whether b is for principal from host (wildcards
// included).
func applies(b Binding, principal, host string) bool {
	return (b.Principal == principal || b.Principal == WildcardPrincipal) &&
		(b.Host == host || b.Host == Wildcard)
}

// patternMatches reports whether b's pattern matches the resource name.
func patternMatches(b Binding, name string) bool {
	if b.PatternType == PatternPrefixed {
		return strings.HasPrefix(name, b.ResourceName)
	}
	return b.ResourceName == name || b.ResourceName == Wildcard
}

// Authorize decides as Kafka's StandardAuthorizer, by scanning.
func (l *Linear) Authorize(principal, host string, op Operation, rt ResourceType, name string) bool {
	if op < OpAll || op > OpTwoPhaseCommit || rt < ResourceTopic || rt > ResourceUser {
		return false
	}
	if l.superUser(principal) {
		return true
	}
	found, allow := false, false
	for _, b := range l.bindings {
		if b.ResourceType != rt || !patternMatches(b, name) {
			continue
		}
		found = true
		if !applies(b, principal, host) {
			continue
		}
		if b.Permission == PermissionDeny {
			if b.Operation == OpAll || b.Operation == op {
				return false
			}
			continue
		}
		switch {
		case b.Operation == OpAll, b.Operation == op:
			allow = true
		case op == OpDescribe:
			switch b.Operation {
			case OpRead, OpWrite, OpDelete, OpAlter:
				allow = true
			}
		case op == OpDescribeConfigs:
			allow = allow || b.Operation == OpAlterConfigs
		}
	}
	if allow {
		return true
	}
	return !found && l.opts.AllowEveryoneIfNoACLFound
}

// AuthorizeByResourceType is the default authorizeByResourceType of
// Kafka's Authorizer interface, transcribed.
func (l *Linear) AuthorizeByResourceType(principal, host string, op Operation, rt ResourceType) bool {
	if l.Authorize(principal, host, op, rt, "hardcode") {
		return true
	}
	if op < OpAll || op > OpTwoPhaseCommit || rt < ResourceTopic || rt > ResourceUser {
		return false
	}
	denyLiteral := map[string]bool{}
	denyPrefixed := map[string]bool{}
	allowLiteral := map[string]bool{}
	allowPrefixed := map[string]bool{}
	wildcardAllow := false
	for _, b := range l.bindings {
		if b.ResourceType != rt || !applies(b, principal, host) {
			continue
		}
		if b.Operation != op && b.Operation != OpAll {
			continue
		}
		if b.Permission == PermissionDeny {
			if b.PatternType == PatternLiteral {
				if b.ResourceName == Wildcard {
					return false
				}
				denyLiteral[b.ResourceName] = true
			} else {
				denyPrefixed[b.ResourceName] = true
			}
			continue
		}
		switch {
		case b.PatternType == PatternLiteral && b.ResourceName == Wildcard:
			wildcardAllow = true
		case b.PatternType == PatternLiteral:
			allowLiteral[b.ResourceName] = true
		default:
			allowPrefixed[b.ResourceName] = true
		}
	}
	if wildcardAllow {
		return true
	}
	dominated := func(s string) bool {
		for i := 1; i <= len(s); i++ {
			if denyPrefixed[s[:i]] {
				return true
			}
		}
		return false
	}
	for s := range allowLiteral {
		if !denyLiteral[s] && !dominated(s) {
			return true
		}
	}
	for s := range allowPrefixed {
		if !dominated(s) {
			return true
		}
	}
	return false
}
