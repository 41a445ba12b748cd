package acl

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kafkaerr"
)

// anyFilter matches every binding; the tests change one field at a time.
var anyFilter = Filter{
	ResourceType: ResourceAny,
	PatternType:  PatternAny,
	Operation:    OpAny,
	Permission:   PermissionAny,
}

func TestFilterValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Filter)
		ok     bool
	}{
		{"any", func(*Filter) {}, true},
		{"exact", func(f *Filter) { *f = valid.Filter() }, true},
		{"match", func(f *Filter) { f.PatternType, f.ResourceName = PatternMatch, ptr("orders") }, true},
		{"match without name", func(f *Filter) { f.PatternType = PatternMatch }, true},
		{"cluster named otherwise", func(f *Filter) { f.ResourceType, f.ResourceName = ResourceCluster, ptr("x") }, true},
		{"empty strings", func(f *Filter) { f.ResourceName, f.Principal, f.Host = ptr(""), ptr(""), ptr("") }, true},

		{"resource UNKNOWN", func(f *Filter) { f.ResourceType = ResourceUnknown }, false},
		{"resource out of range", func(f *Filter) { f.ResourceType = 8 }, false},
		{"pattern UNKNOWN", func(f *Filter) { f.PatternType = PatternUnknown }, false},
		{"pattern out of range", func(f *Filter) { f.PatternType = -1 }, false},
		{"operation UNKNOWN", func(f *Filter) { f.Operation = OpUnknown }, false},
		{"operation out of range", func(f *Filter) { f.Operation = 16 }, false},
		{"permission UNKNOWN", func(f *Filter) { f.Permission = PermissionUnknown }, false},
		{"permission out of range", func(f *Filter) { f.Permission = 4 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := anyFilter
			tc.change(&f)
			err := f.Validate()
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.Equal(t, kafkaerr.InvalidRequest, kafkaerr.CodeOf(err), "%v", err)
		})
	}
}

func TestFilterMatches(t *testing.T) {
	literal := func(name string) Binding { b := valid; b.ResourceName = name; return b }
	prefixed := func(name string) Binding {
		b := literal(name)
		b.PatternType = PatternPrefixed
		return b
	}
	withPattern := func(pt PatternType, name string) func(*Filter) {
		return func(f *Filter) { f.PatternType, f.ResourceName = pt, ptr(name) }
	}
	for _, tc := range []struct {
		name    string
		change  func(*Filter)
		binding Binding
		want    bool
	}{
		{"any", func(*Filter) {}, valid, true},
		{"any prefixed", func(*Filter) {}, prefixed("o"), true},

		{"resource type equal", func(f *Filter) { f.ResourceType = ResourceTopic }, valid, true},
		{"resource type differs", func(f *Filter) { f.ResourceType = ResourceGroup }, valid, false},
		{"operation equal", func(f *Filter) { f.Operation = OpRead }, valid, true},
		{"operation differs", func(f *Filter) { f.Operation = OpWrite }, valid, false},
		{"operation ALL is not a wildcard", func(f *Filter) { f.Operation = OpAll }, valid, false},
		{"permission equal", func(f *Filter) { f.Permission = PermissionAllow }, valid, true},
		{"permission differs", func(f *Filter) { f.Permission = PermissionDeny }, valid, false},
		{"principal equal", func(f *Filter) { f.Principal = ptr("User:alice") }, valid, true},
		{"principal differs", func(f *Filter) { f.Principal = ptr("User:bob") }, valid, false},
		{"principal wildcard is a string", func(f *Filter) { f.Principal = ptr(WildcardPrincipal) }, valid, false},
		{"host equal", func(f *Filter) { f.Host = ptr("*") }, valid, true},
		{"host differs", func(f *Filter) { f.Host = ptr("10.0.0.1") }, valid, false},

		{"ANY name equal", withPattern(PatternAny, "orders"), valid, true},
		{"ANY name equal prefixed", withPattern(PatternAny, "ord"), prefixed("ord"), true},
		{"ANY name differs", withPattern(PatternAny, "ord"), valid, false},
		{"ANY name is not a pattern", withPattern(PatternAny, "orders"), literal(Wildcard), false},
		{"ANY name is not a prefix", withPattern(PatternAny, "orders"), prefixed("ord"), false},
		{"ANY without name", func(f *Filter) { f.PatternType = PatternAny }, prefixed("x"), true},

		{"LITERAL equal", withPattern(PatternLiteral, "orders"), valid, true},
		{"LITERAL differs", withPattern(PatternLiteral, "ord"), valid, false},
		{"LITERAL not PREFIXED", withPattern(PatternLiteral, "ord"), prefixed("ord"), false},
		{"LITERAL wildcard is a name", withPattern(PatternLiteral, Wildcard), valid, false},
		{"LITERAL wildcard equal", withPattern(PatternLiteral, Wildcard), literal(Wildcard), true},
		{"LITERAL without name", func(f *Filter) { f.PatternType = PatternLiteral }, valid, true},
		{"LITERAL without name not PREFIXED", func(f *Filter) { f.PatternType = PatternLiteral }, prefixed("o"), false},

		{"PREFIXED equal", withPattern(PatternPrefixed, "ord"), prefixed("ord"), true},
		{"PREFIXED is not a prefix match", withPattern(PatternPrefixed, "orders"), prefixed("ord"), false},
		{"PREFIXED not LITERAL", withPattern(PatternPrefixed, "orders"), valid, false},
		{"PREFIXED without name", func(f *Filter) { f.PatternType = PatternPrefixed }, prefixed("o"), true},

		{"MATCH literal", withPattern(PatternMatch, "orders"), valid, true},
		{"MATCH literal differs", withPattern(PatternMatch, "orders2"), valid, false},
		{"MATCH literal is not a prefix", withPattern(PatternMatch, "orders"), literal("ord"), false},
		{"MATCH wildcard", withPattern(PatternMatch, "orders"), literal(Wildcard), true},
		{"MATCH prefix", withPattern(PatternMatch, "orders"), prefixed("ord"), true},
		{"MATCH whole name as prefix", withPattern(PatternMatch, "orders"), prefixed("orders"), true},
		{"MATCH longer prefix", withPattern(PatternMatch, "ord"), prefixed("orders"), false},
		{"MATCH prefixed wildcard is a prefix", withPattern(PatternMatch, "orders"), prefixed(Wildcard), false},
		{"MATCH name wildcard", withPattern(PatternMatch, Wildcard), literal(Wildcard), true},
		{"MATCH name wildcard literal", withPattern(PatternMatch, Wildcard), valid, false},
		{"MATCH without name", func(f *Filter) { f.PatternType = PatternMatch }, prefixed("o"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := anyFilter
			tc.change(&f)
			require.Equal(t, tc.want, f.Matches(tc.binding), "%v matches %v", f, tc.binding)
		})
	}
}
