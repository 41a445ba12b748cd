package diskless

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/acl"
	"github.com/diskless-go/diskless/internal/etcdtest"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/scram"
)

func newCred(t testing.TB, user string, m scram.Mechanism, password string) scram.Credential {
	t.Helper()
	c, err := scram.New(user, m, password, 0)
	require.NoError(t, err)
	return c
}

func readACL(topic, principal string) acl.Binding {
	return acl.Binding{ResourceType: acl.ResourceTopic, ResourceName: topic, PatternType: acl.PatternLiteral,
		Principal: principal, Host: "*", Operation: acl.OpRead, Permission: acl.PermissionAllow}
}

// TestSecurityBroker: credentials and ACLs through the Broker: created,
// read (Security, polled at its Version; ScramCredential), deleted, with
// Kafka's codes; ErrClosed after Close.
func TestSecurityBroker(t *testing.T) {
	ctx := t.Context()
	b := openTest(t, nil)
	alice := newCred(t, "alice", scram.SHA256, "secret")
	errs, err := b.AlterScramCredentials(ctx, []scram.Credential{alice, {User: "bob", Mechanism: 7, Iterations: 4096}}, []ScramDeletion{{User: "carol", Mechanism: scram.SHA512}})
	require.NoError(t, err)
	require.Len(t, errs, 3)
	require.NoError(t, errs[0])
	require.Equal(t, kafkaerr.UnsupportedSaslMechanism, kafkaerr.CodeOf(errs[1]))
	require.Equal(t, kafkaerr.ResourceNotFound, kafkaerr.CodeOf(errs[2]))
	got, ok, err := b.ScramCredential(ctx, "alice", scram.SHA256)
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, got.Check("secret"))
	require.False(t, got.Check("other"))

	errs, err = b.CreateACLs(ctx, []acl.Binding{readACL("t", "User:alice"), readACL("t", "nobody")})
	require.NoError(t, err)
	require.NoError(t, errs[0])
	require.Equal(t, kafkaerr.InvalidRequest, kafkaerr.CodeOf(errs[1]))
	st, err := b.Security(ctx, -1)
	require.NoError(t, err)
	require.True(t, st.Changed)
	require.Equal(t, []acl.Binding{readACL("t", "User:alice")}, st.ACLs)
	require.Equal(t, []scram.Credential{alice}, st.Credentials)
	same, err := b.Security(ctx, st.Version)
	require.NoError(t, err)
	require.Equal(t, SecurityState{Version: st.Version}, same)

	principal := "User:alice"
	deleted, err := b.DeleteACLs(ctx, []acl.Filter{{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Principal: &principal, Operation: acl.OpAny, Permission: acl.PermissionAny}})
	require.NoError(t, err)
	require.Equal(t, [][]acl.Binding{{readACL("t", "User:alice")}}, deleted)
	errs, err = b.AlterScramCredentials(ctx, nil, []ScramDeletion{{User: "alice", Mechanism: scram.SHA256}})
	require.NoError(t, err)
	require.Equal(t, []error{nil}, errs)
	st2, err := b.Security(ctx, st.Version)
	require.NoError(t, err)
	require.True(t, st2.Changed)
	require.Greater(t, st2.Version, st.Version)
	require.Empty(t, st2.ACLs)
	require.Empty(t, st2.Credentials)

	require.NoError(t, b.Close())
	_, err = b.Security(ctx, -1)
	require.ErrorIs(t, err, ErrClosed)
	_, _, err = b.ScramCredential(ctx, "alice", scram.SHA256)
	require.ErrorIs(t, err, ErrClosed)
}

// TestSecurityCluster: ACLs and a credential created on one broker of a
// three-broker cluster are seen by the other two (each polls Security
// until it sees them: from its follower of shard 0, or shard 0's leader);
// a deletion likewise; and they survive the restart of every broker.
func TestSecurityCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("an etcd cluster")
	}
	etcd := etcdtest.Start(t, nil)
	brokers, cfgs := clusterOf(t, etcd, 3, 2, nil)
	ctx := t.Context()
	alice := newCred(t, "alice", scram.SHA512, "secret")
	bindings := []acl.Binding{readACL("t", "User:alice"), readACL("u", "User:bob")}
	// Make the change on a broker that does not lead shard 0, if there
	// is one (else on any).
	maker := brokers[1]
	for _, b := range brokers {
		if !b.coord.Shards().Leads(0) {
			maker = b
			break
		}
	}
	errs, err := maker.CreateACLs(ctx, bindings)
	require.NoError(t, err)
	require.Equal(t, []error{nil, nil}, errs)
	errs, err = maker.AlterScramCredentials(ctx, []scram.Credential{alice}, nil)
	require.NoError(t, err)
	require.Equal(t, []error{nil}, errs)

	// seen waits until every broker's Security shows want.
	seen := func(brokers []*Broker, want func(SecurityState) bool) SecurityState {
		t.Helper()
		var last SecurityState
		for _, b := range brokers {
			require.Eventually(t, func() bool {
				st, err := b.Security(ctx, -1)
				if err != nil || !want(st) {
					return false
				}
				last = st
				return true
			}, 30*time.Second, 10*time.Millisecond)
		}
		return last
	}
	both := func(st SecurityState) bool {
		return len(st.ACLs) == 2 && len(st.Credentials) == 1 && st.Credentials[0].User == "alice"
	}
	want := seen(brokers, both)
	require.ElementsMatch(t, bindings, want.ACLs)
	for _, b := range brokers {
		st, err := b.Security(ctx, -1)
		require.NoError(t, err)
		require.Equal(t, want, st, "the same state and Version everywhere")
		c, ok, err := b.ScramCredential(ctx, "alice", scram.SHA512)
		require.NoError(t, err)
		require.True(t, ok)
		require.True(t, c.Check("secret"))
	}

	// A deletion on another broker.
	other := brokers[0]
	if other == maker {
		other = brokers[2]
	}
	principal := "User:bob"
	deleted, err := other.DeleteACLs(ctx, []acl.Filter{{ResourceType: acl.ResourceTopic, PatternType: acl.PatternAny, Principal: &principal, Operation: acl.OpAny, Permission: acl.PermissionAny}})
	require.NoError(t, err)
	require.Equal(t, [][]acl.Binding{{readACL("u", "User:bob")}}, deleted)
	final := seen(brokers, func(st SecurityState) bool { return len(st.ACLs) == 1 && len(st.Credentials) == 1 })
	require.Equal(t, []acl.Binding{readACL("t", "User:alice")}, final.ACLs)
	require.Greater(t, final.Version, want.Version)

	// Every broker restarts.
	for _, b := range brokers {
		require.NoError(t, b.Close())
	}
	var again []*Broker
	for _, c := range cfgs {
		b, err := Open(ctx, c)
		require.NoError(t, err)
		t.Cleanup(func() { b.Close() })
		again = append(again, b)
	}
	waitLeaders(t, again, 2)
	after := seen(again, func(st SecurityState) bool { return st.Version == final.Version })
	require.Equal(t, final, after)
	for _, b := range again {
		c, ok, err := b.ScramCredential(ctx, "alice", scram.SHA512)
		require.NoError(t, err)
		require.True(t, ok)
		require.True(t, c.Check("secret"))
	}
}
