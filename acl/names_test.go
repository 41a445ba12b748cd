package acl

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kafkaerr"
)

func TestNames(t *testing.T) {
	require.Equal(t, "TOPIC", ResourceTopic.String())
	require.Equal(t, "TRANSACTIONAL_ID", ResourceTransactionalID.String())
	require.Equal(t, "UNKNOWN(9)", ResourceType(9).String())
	require.Equal(t, "UNKNOWN(-1)", ResourceType(-1).String())
	require.Equal(t, "PREFIXED", PatternPrefixed.String())
	require.Equal(t, "MATCH", PatternMatch.String())
	require.Equal(t, "DESCRIBE_CONFIGS", OpDescribeConfigs.String())
	require.Equal(t, "TWO_PHASE_COMMIT", OpTwoPhaseCommit.String())
	require.Equal(t, "UNKNOWN(16)", Operation(16).String())
	require.Equal(t, "ALLOW", PermissionAllow.String())
	require.Equal(t, "DENY", PermissionDeny.String())

	// Every name parses back to its code, in any case.
	for c := ResourceUnknown; c <= ResourceUser; c++ {
		got, err := ParseResourceType(c.String())
		require.NoError(t, err)
		require.Equal(t, c, got)
	}
	for c := PatternUnknown; c <= PatternPrefixed; c++ {
		got, err := ParsePatternType(c.String())
		require.NoError(t, err)
		require.Equal(t, c, got)
	}
	for c := OpUnknown; c <= OpTwoPhaseCommit; c++ {
		got, err := ParseOperation(c.String())
		require.NoError(t, err)
		require.Equal(t, c, got)
	}
	for c := PermissionUnknown; c <= PermissionAllow; c++ {
		got, err := ParsePermission(c.String())
		require.NoError(t, err)
		require.Equal(t, c, got)
	}
	op, err := ParseOperation("idempotent_write")
	require.NoError(t, err)
	require.Equal(t, OpIdempotentWrite, op)
	rt, err := ParseResourceType("Topic")
	require.NoError(t, err)
	require.Equal(t, ResourceTopic, rt)

	for _, err := range []error{
		func() error { _, err := ParseResourceType("TOPICS"); return err }(),
		func() error { _, err := ParsePatternType(""); return err }(),
		func() error { _, err := ParseOperation("READ "); return err }(),
		func() error { _, err := ParsePermission("PERMIT"); return err }(),
	} {
		require.Equal(t, kafkaerr.InvalidRequest, kafkaerr.CodeOf(err), "%v", err)
	}
}

func TestParsePrincipal(t *testing.T) {
	for _, tc := range []struct {
		in, typ, name string
		ok            bool
	}{
		{"User:alice", "User", "alice", true},
		{"User:*", "User", "*", true},
		{"User:CN=alice,O=Acme:x", "User", "CN=alice,O=Acme:x", true},
		{"Group:ops", "Group", "ops", true},
		{"User:", "", "", false},
		{":alice", "", "", false},
		{"alice", "", "", false},
		{"", "", "", false},
		{":", "", "", false},
	} {
		typ, name, err := ParsePrincipal(tc.in)
		if !tc.ok {
			require.Equal(t, kafkaerr.InvalidRequest, kafkaerr.CodeOf(err), "%q", tc.in)
			continue
		}
		require.NoError(t, err, "%q", tc.in)
		require.Equal(t, tc.typ, typ)
		require.Equal(t, tc.name, name)
	}
}
