package acl

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kafkaerr"
)

// valid is a binding Kafka creates; the tests change one field at a time.
var valid = Binding{
	ResourceType: ResourceTopic,
	ResourceName: "orders",
	PatternType:  PatternLiteral,
	Principal:    "User:alice",
	Host:         "*",
	Operation:    OpRead,
	Permission:   PermissionAllow,
}

func TestBindingValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Binding)
		ok     bool
	}{
		{"valid", func(*Binding) {}, true},
		{"prefixed", func(b *Binding) { b.PatternType = PatternPrefixed }, true},
		{"wildcard resource", func(b *Binding) { b.ResourceName = Wildcard }, true},
		{"wildcard principal", func(b *Binding) { b.Principal = WildcardPrincipal }, true},
		{"other principal type", func(b *Binding) { b.Principal = "Group:ops" }, true},
		{"host", func(b *Binding) { b.Host = "10.0.0.1" }, true},
		{"deny ALL", func(b *Binding) { b.Permission, b.Operation = PermissionDeny, OpAll }, true},
		{"cluster", func(b *Binding) { b.ResourceType, b.ResourceName = ResourceCluster, ClusterName }, true},
		{"user resource", func(b *Binding) { b.ResourceType = ResourceUser }, true},
		{"two phase commit", func(b *Binding) { b.Operation = OpTwoPhaseCommit }, true},

		{"resource UNKNOWN", func(b *Binding) { b.ResourceType = ResourceUnknown }, false},
		{"resource ANY", func(b *Binding) { b.ResourceType = ResourceAny }, false},
		{"resource out of range", func(b *Binding) { b.ResourceType = 8 }, false},
		{"resource negative", func(b *Binding) { b.ResourceType = -2 }, false},
		{"pattern UNKNOWN", func(b *Binding) { b.PatternType = PatternUnknown }, false},
		{"pattern ANY", func(b *Binding) { b.PatternType = PatternAny }, false},
		{"pattern MATCH", func(b *Binding) { b.PatternType = PatternMatch }, false},
		{"pattern out of range", func(b *Binding) { b.PatternType = 5 }, false},
		{"operation UNKNOWN", func(b *Binding) { b.Operation = OpUnknown }, false},
		{"operation ANY", func(b *Binding) { b.Operation = OpAny }, false},
		{"operation out of range", func(b *Binding) { b.Operation = 16 }, false},
		{"permission UNKNOWN", func(b *Binding) { b.Permission = PermissionUnknown }, false},
		{"permission ANY", func(b *Binding) { b.Permission = PermissionAny }, false},
		{"permission out of range", func(b *Binding) { b.Permission = 4 }, false},
		{"empty name", func(b *Binding) { b.ResourceName = "" }, false},
		{"empty prefix", func(b *Binding) { b.ResourceName, b.PatternType = "", PatternPrefixed }, false},
		{"cluster named otherwise", func(b *Binding) { b.ResourceType = ResourceCluster }, false},
		{"cluster wildcard", func(b *Binding) { b.ResourceType, b.ResourceName = ResourceCluster, Wildcard }, false},
		{"empty principal", func(b *Binding) { b.Principal = "" }, false},
		{"principal without type", func(b *Binding) { b.Principal = "alice" }, false},
		{"principal without name", func(b *Binding) { b.Principal = "User:" }, false},
		{"empty host", func(b *Binding) { b.Host = "" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := valid
			tc.change(&b)
			err := b.Validate()
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.Equal(t, kafkaerr.InvalidRequest, kafkaerr.CodeOf(err), "%v", err)
			require.ErrorIs(t, err, kafkaerr.ErrInvalidRequest)
		})
	}
}

func TestBindingFilter(t *testing.T) {
	f := valid.Filter()
	require.NoError(t, f.Validate())
	require.True(t, f.Matches(valid))
	for _, change := range []func(*Binding){
		func(b *Binding) { b.ResourceType = ResourceGroup },
		func(b *Binding) { b.ResourceName = "orders2" },
		func(b *Binding) { b.PatternType = PatternPrefixed },
		func(b *Binding) { b.Principal = "User:bob" },
		func(b *Binding) { b.Host = "10.0.0.1" },
		func(b *Binding) { b.Operation = OpAll },
		func(b *Binding) { b.Permission = PermissionDeny },
	} {
		b := valid
		change(&b)
		require.False(t, f.Matches(b), "%v", b)
	}
	// The filter does not alias the binding.
	b := valid
	f = b.Filter()
	b.ResourceName = "changed"
	require.Equal(t, "orders", *f.ResourceName)
}

func TestBindingString(t *testing.T) {
	require.Equal(t, "ALLOW User:alice from * READ TOPIC LITERAL:orders", valid.String())
	require.Equal(t, "ANY <any> from * ANY TOPIC MATCH:orders", Filter{
		ResourceType: ResourceTopic, ResourceName: ptr("orders"), PatternType: PatternMatch,
		Host: ptr("*"), Operation: OpAny, Permission: PermissionAny,
	}.String())
}

func ptr(s string) *string { return &s }
