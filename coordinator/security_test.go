package coordinator

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/diskless-go/diskless/coordinator/state"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless/acl"
	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/scram"
)

// testCred returns a credential of user for m made from password.
func testCred(t testing.TB, user string, m scram.Mechanism, password string) scram.Credential {
	t.Helper()
	c, err := scram.New(user, m, password, 0)
	require.NoError(t, err)
	return c
}

// codes returns the Kafka codes of errs (0 for nil).
func codes(errs []error) []kafkaerr.Code {
	out := make([]kafkaerr.Code, len(errs))
	for i, err := range errs {
		if err != nil {
			out[i] = code(err)
		}
	}
	return out
}

func ptr(s string) *string { return &s }

// topicACL is a binding on a topic for a principal.
func topicACL(name string, pattern acl.PatternType, principal string, op acl.Operation, perm acl.Permission) acl.Binding {
	return acl.Binding{ResourceType: acl.ResourceTopic, ResourceName: name, PatternType: pattern, Principal: principal, Host: "*", Operation: op, Permission: perm}
}

// mustSecurity returns s's whole security state.
func mustSecurity(t testing.TB, s *Coordinator) SecurityState {
	t.Helper()
	st, err := s.Security(t.Context(), -1)
	require.NoError(t, err)
	require.True(t, st.Changed)
	return st
}

// TestScramCredentials: credentials are upserted, replaced and deleted
// with one answer per item and Kafka's codes (UNSUPPORTED_SASL_MECHANISM,
// UNACCEPTABLE_CREDENTIAL, RESOURCE_NOT_FOUND, DUPLICATE_RESOURCE by
// user); a user with an error changes nothing, the others do; Version
// grows with every change and a poll at the current Version gets no
// lists; everything survives a restart (the database) and a restart with
// the database gone (the log replayed).
func TestScramCredentials(t *testing.T) {
	ctx := t.Context()
	f := newShardsFixture(t, 2, memblob.OpenBucket(nil), nil)
	alice := testCred(t, "alice", scram.SHA256, "a-secret")
	alice512 := testCred(t, "alice", scram.SHA512, "a-secret")
	bob := testCred(t, "bob", scram.SHA512, "b-secret")

	empty, err := f.s.Security(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, SecurityState{}, empty, "nothing yet: version 0, unchanged")

	errs, err := f.s.AlterScramCredentials(ctx, []scram.Credential{alice, bob}, nil)
	require.NoError(t, err)
	require.Equal(t, []error{nil, nil}, errs)
	st := mustSecurity(t, f.s)
	require.Equal(t, []scram.Credential{alice, bob}, st.Credentials)
	require.Equal(t, []acl.Binding{}, st.ACLs)
	v1 := st.Version
	require.Positive(t, v1)
	same, err := f.s.Security(ctx, v1)
	require.NoError(t, err)
	require.Equal(t, SecurityState{Version: v1}, same, "a poll at the current version")

	got, ok, err := f.s.ScramCredential(ctx, "alice", scram.SHA256)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, alice, got)
	require.True(t, got.Check("a-secret"))
	_, ok, err = f.s.ScramCredential(ctx, "alice", scram.SHA512)
	require.NoError(t, err)
	require.False(t, ok)

	// Every error code; the failing users change nothing.
	bad := alice512
	bad.Iterations = scram.MaxIterations + 1
	few := bob
	few.Iterations = scram.MinIterations - 1
	noUser := bob
	noUser.User = ""
	unknown := bob
	unknown.User, unknown.Mechanism = "carol", 3
	noKey := testCred(t, "dave", scram.SHA256, "d")
	noKey.StoredKey = nil
	end := func() int64 { c, err := f.s.local(0); require.NoError(t, err); return c.log.End() }
	before := end()
	errs, err = f.s.AlterScramCredentials(ctx, []scram.Credential{bad, few, noUser, unknown, noKey},
		[]ScramDeletion{{User: "erin", Mechanism: scram.SHA256}, {User: "", Mechanism: scram.SHA256}})
	require.NoError(t, err)
	require.Equal(t, []kafkaerr.Code{kafkaerr.UnacceptableCredential, kafkaerr.UnacceptableCredential, kafkaerr.UnacceptableCredential,
		kafkaerr.UnsupportedSaslMechanism, kafkaerr.UnacceptableCredential, kafkaerr.ResourceNotFound, kafkaerr.UnacceptableCredential}, codes(errs))
	require.Equal(t, before, end(), "nothing logged")
	require.Equal(t, v1, mustSecurity(t, f.s).Version)

	// A user changed twice in one request (two mechanisms, or a deletion
	// and an upsert) is DUPLICATE_RESOURCE for every item of that user;
	// the others go through.
	carol := testCred(t, "carol", scram.SHA256, "c")
	errs, err = f.s.AlterScramCredentials(ctx, []scram.Credential{alice512, carol, alice},
		[]ScramDeletion{{User: "bob", Mechanism: scram.SHA512}, {User: "bob", Mechanism: scram.SHA512}})
	require.NoError(t, err)
	require.Equal(t, []kafkaerr.Code{kafkaerr.DuplicateResource, 0, kafkaerr.DuplicateResource, kafkaerr.DuplicateResource, kafkaerr.DuplicateResource}, codes(errs))
	st = mustSecurity(t, f.s)
	require.Equal(t, []scram.Credential{alice, bob, carol}, st.Credentials)
	v2 := st.Version
	require.Greater(t, v2, v1)

	// Replace one, delete one.
	alice2 := testCred(t, "alice", scram.SHA256, "new-secret")
	errs, err = f.s.AlterScramCredentials(ctx, []scram.Credential{alice2}, []ScramDeletion{{User: "bob", Mechanism: scram.SHA512}})
	require.NoError(t, err)
	require.Equal(t, []error{nil, nil}, errs)
	want := mustSecurity(t, f.s)
	require.Equal(t, []scram.Credential{alice2, carol}, want.Credentials)
	require.Greater(t, want.Version, v2)
	errs, err = f.s.AlterScramCredentials(ctx, nil, []ScramDeletion{{User: "bob", Mechanism: scram.SHA512}})
	require.NoError(t, err)
	require.Equal(t, []kafkaerr.Code{kafkaerr.ResourceNotFound}, codes(errs), "deleted already")

	f.restart()
	require.Equal(t, want, mustSecurity(t, f.s), "from the database")
	require.NoError(t, f.s.Close())
	for _, name := range []string{"shard-0.db", "shard-0.db-wal", "shard-0.db-shm"} {
		require.NoError(t, removeIfExists(f.dir+"/"+name))
	}
	f.open()
	require.Equal(t, want, mustSecurity(t, f.s), "from the log")
}

// TestACLs: bindings are created (an existing one, or one twice in a
// request, is not duplicated; an invalid one is INVALID_REQUEST and
// changes nothing), deleted by filters as Kafka's AclBindingFilter
// matches them (each filter answers what it matched, a binding two
// filters match in both), and survive a restart (the database) and a
// restart with the database gone (the log replayed).
func TestACLs(t *testing.T) {
	ctx := t.Context()
	f := newShardsFixture(t, 1, memblob.OpenBucket(nil), nil)
	readOrders := topicACL("orders", acl.PatternLiteral, "User:alice", acl.OpRead, acl.PermissionAllow)
	writeAll := topicACL("*", acl.PatternLiteral, "User:bob", acl.OpWrite, acl.PermissionAllow)
	denyPrefix := topicACL("ord", acl.PatternPrefixed, "User:*", acl.OpDelete, acl.PermissionDeny)
	group := acl.Binding{ResourceType: acl.ResourceGroup, ResourceName: "readers", PatternType: acl.PatternLiteral, Principal: "User:alice", Host: "10.0.0.1", Operation: acl.OpRead, Permission: acl.PermissionAllow}
	cluster := acl.Binding{ResourceType: acl.ResourceCluster, ResourceName: "kafka-cluster", PatternType: acl.PatternLiteral, Principal: "User:admin", Host: "*", Operation: acl.OpAll, Permission: acl.PermissionAllow}

	errs, err := f.s.CreateACLs(ctx, []acl.Binding{readOrders, writeAll, denyPrefix, group, cluster, readOrders})
	require.NoError(t, err)
	require.Equal(t, make([]error, 6), errs)
	st := mustSecurity(t, f.s)
	all := []acl.Binding{readOrders, writeAll, denyPrefix, group, cluster}
	require.ElementsMatch(t, all, st.ACLs)
	require.Len(t, st.ACLs, 5, "one of each")
	require.Equal(t, []scram.Credential{}, st.Credentials)

	c0, err := f.s.local(0)
	require.NoError(t, err)
	before := c0.log.End()
	errs, err = f.s.CreateACLs(ctx, []acl.Binding{readOrders})
	require.NoError(t, err)
	require.Equal(t, []error{nil}, errs)
	require.Equal(t, before, c0.log.End(), "an existing binding: nothing logged")

	invalid := []acl.Binding{
		{ResourceType: acl.ResourceAny, ResourceName: "x", PatternType: acl.PatternLiteral, Principal: "User:a", Host: "*", Operation: acl.OpRead, Permission: acl.PermissionAllow},
		{ResourceType: acl.ResourceUnknown, ResourceName: "x", PatternType: acl.PatternLiteral, Principal: "User:a", Host: "*", Operation: acl.OpRead, Permission: acl.PermissionAllow},
		{ResourceType: 8, ResourceName: "x", PatternType: acl.PatternLiteral, Principal: "User:a", Host: "*", Operation: acl.OpRead, Permission: acl.PermissionAllow},
		topicACL("x", acl.PatternMatch, "User:a", acl.OpRead, acl.PermissionAllow),
		topicACL("x", acl.PatternAny, "User:a", acl.OpRead, acl.PermissionAllow),
		topicACL("x", acl.PatternLiteral, "User:a", acl.OpAny, acl.PermissionAllow),
		topicACL("x", acl.PatternLiteral, "User:a", 16, acl.PermissionAllow),
		topicACL("x", acl.PatternLiteral, "User:a", acl.OpRead, acl.PermissionAny),
		topicACL("", acl.PatternLiteral, "User:a", acl.OpRead, acl.PermissionAllow),
		topicACL("x", acl.PatternLiteral, "alice", acl.OpRead, acl.PermissionAllow),
	}
	errs, err = f.s.CreateACLs(ctx, append(invalid, topicACL("new", acl.PatternLiteral, "User:a", acl.OpRead, acl.PermissionAllow)))
	require.NoError(t, err)
	for i := range invalid {
		require.Equal(t, kafkaerr.InvalidRequest, code(errs[i]), "%+v", invalid[i])
	}
	require.NoError(t, errs[len(invalid)], "a valid binding beside invalid ones is created")
	before = c0.log.End()
	errs, err = f.s.CreateACLs(ctx, invalid)
	require.NoError(t, err)
	require.Equal(t, kafkaerr.InvalidRequest, code(errs[0]))
	require.Equal(t, before, c0.log.End(), "only invalid bindings: nothing logged")
	all = append(all, topicACL("new", acl.PatternLiteral, "User:a", acl.OpRead, acl.PermissionAllow))
	require.ElementsMatch(t, all, mustSecurity(t, f.s).ACLs)

	// Filters: MATCH of a topic name finds the literal, the wildcard and
	// the prefix; a filter that matches nothing deletes nothing; two
	// filters matching one binding both report it.
	v := mustSecurity(t, f.s).Version
	deleted, err := f.s.DeleteACLs(ctx, []acl.Filter{
		{ResourceType: acl.ResourceTopic, ResourceName: ptr("orders"), PatternType: acl.PatternMatch, Operation: acl.OpAny, Permission: acl.PermissionAny},
		{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Principal: ptr("User:nobody"), Operation: acl.OpAny, Permission: acl.PermissionAny},
		{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Principal: ptr("User:bob"), Operation: acl.OpAny, Permission: acl.PermissionAny},
	})
	require.NoError(t, err)
	require.Len(t, deleted, 3)
	require.ElementsMatch(t, []acl.Binding{readOrders, writeAll, denyPrefix}, deleted[0])
	require.Empty(t, deleted[1])
	require.Equal(t, []acl.Binding{writeAll}, deleted[2])
	st = mustSecurity(t, f.s)
	require.Greater(t, st.Version, v)
	all = []acl.Binding{group, cluster, topicACL("new", acl.PatternLiteral, "User:a", acl.OpRead, acl.PermissionAllow)}
	require.ElementsMatch(t, all, st.ACLs)

	// Nothing matches: nothing logged, the version stays.
	before = c0.log.End()
	deleted, err = f.s.DeleteACLs(ctx, []acl.Filter{{ResourceType: acl.ResourceTopic, ResourceName: ptr("orders"), PatternType: acl.PatternMatch, Operation: acl.OpAny, Permission: acl.PermissionAny}})
	require.NoError(t, err)
	require.Equal(t, [][]acl.Binding{nil}, deleted)
	require.Equal(t, before, c0.log.End())
	require.Equal(t, st.Version, mustSecurity(t, f.s).Version)

	f.restart()
	require.Equal(t, st, mustSecurity(t, f.s), "from the database")
	require.NoError(t, f.s.Close())
	for _, name := range []string{"shard-0.db", "shard-0.db-wal", "shard-0.db-shm"} {
		require.NoError(t, removeIfExists(f.dir+"/"+name))
	}
	f.open()
	require.Equal(t, st, mustSecurity(t, f.s), "from the log")
}

// TestFilterMatches: the filter semantics of Kafka's AclBindingFilter.
func TestFilterMatches(t *testing.T) {
	lit := topicACL("orders", acl.PatternLiteral, "User:a", acl.OpRead, acl.PermissionAllow)
	wild := topicACL("*", acl.PatternLiteral, "User:a", acl.OpRead, acl.PermissionAllow)
	pre := topicACL("ord", acl.PatternPrefixed, "User:a", acl.OpRead, acl.PermissionAllow)
	any := acl.Filter{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Operation: acl.OpAny, Permission: acl.PermissionAny}
	with := func(f acl.Filter, edit func(*acl.Filter)) acl.Filter { edit(&f); return f }
	for _, tc := range []struct {
		name string
		f    acl.Filter
		b    acl.Binding
		want bool
	}{
		{"any", any, lit, true},
		{"any name", with(any, func(f *acl.Filter) { f.ResourceName = ptr("orders") }), lit, true},
		{"any name is exact", with(any, func(f *acl.Filter) { f.ResourceName = ptr("orders") }), pre, false},
		{"any name, wildcard", with(any, func(f *acl.Filter) { f.ResourceName = ptr("orders") }), wild, false},
		{"match literal", with(any, func(f *acl.Filter) { f.PatternType, f.ResourceName = acl.PatternMatch, ptr("orders") }), lit, true},
		{"match wildcard", with(any, func(f *acl.Filter) { f.PatternType, f.ResourceName = acl.PatternMatch, ptr("orders") }), wild, true},
		{"match prefix", with(any, func(f *acl.Filter) { f.PatternType, f.ResourceName = acl.PatternMatch, ptr("orders") }), pre, true},
		{"match other", with(any, func(f *acl.Filter) { f.PatternType, f.ResourceName = acl.PatternMatch, ptr("or") }), pre, false},
		{"match no name", with(any, func(f *acl.Filter) { f.PatternType = acl.PatternMatch }), pre, true},
		{"literal filter, prefixed binding", with(any, func(f *acl.Filter) { f.PatternType = acl.PatternLiteral }), pre, false},
		{"prefixed filter, exact name", with(any, func(f *acl.Filter) { f.PatternType, f.ResourceName = acl.PatternPrefixed, ptr("ord") }), pre, true},
		{"prefixed filter, longer name", with(any, func(f *acl.Filter) { f.PatternType, f.ResourceName = acl.PatternPrefixed, ptr("orders") }), pre, false},
		{"resource type", with(any, func(f *acl.Filter) { f.ResourceType = acl.ResourceGroup }), lit, false},
		{"unknown resource type", with(any, func(f *acl.Filter) { f.ResourceType = acl.ResourceUnknown }), lit, false},
		{"principal", with(any, func(f *acl.Filter) { f.Principal = ptr("User:b") }), lit, false},
		{"principal exact", with(any, func(f *acl.Filter) { f.Principal = ptr("User:a") }), lit, true},
		{"host", with(any, func(f *acl.Filter) { f.Host = ptr("10.0.0.1") }), lit, false},
		{"operation", with(any, func(f *acl.Filter) { f.Operation = acl.OpWrite }), lit, false},
		{"operation all is not any", with(any, func(f *acl.Filter) { f.Operation = acl.OpAll }), lit, false},
		{"permission", with(any, func(f *acl.Filter) { f.Permission = acl.PermissionDeny }), lit, false},
		{"unknown permission", with(any, func(f *acl.Filter) { f.Permission = acl.PermissionUnknown }), lit, false},
	} {
		require.Equal(t, tc.want, tc.f.Matches(tc.b), tc.name)
	}
}

// TestSecuritySnapshot: credentials and ACLs are in a shard's snapshot;
// after the snapshot, the log trimmed and the database gone, a reopened
// coordinator and a new follower have them, and the Version.
func TestSecuritySnapshot(t *testing.T) {
	ctx := t.Context()
	bucket := memblob.OpenBucket(nil)
	defer bucket.Close()
	log := newTestLog()
	dir := t.TempDir()
	opts := &Options{Dir: dir, Bucket: bucket, Prefix: "p/", ApplyInterval: -1, SnapshotEvery: -1, OrphanInterval: -1, Lifecycle: LifecycleOptions{Interval: -1}}
	s, err := Open(ctx, []metalog.Log{log}, opts)
	require.NoError(t, err)
	_, err = s.AlterScramCredentials(ctx, []scram.Credential{testCred(t, "alice", scram.SHA512, "x")}, nil)
	require.NoError(t, err)
	_, err = s.CreateACLs(ctx, []acl.Binding{topicACL("t", acl.PatternPrefixed, "User:alice", acl.OpWrite, acl.PermissionAllow)})
	require.NoError(t, err)
	c0, err := s.local(0)
	require.NoError(t, err)
	_, err = c0.Snapshot(ctx)
	require.NoError(t, err)
	require.Positive(t, log.Start(), "trimmed")
	want := mustSecurity(t, s)
	require.NoError(t, s.Close())
	require.NoError(t, os.RemoveAll(dir))

	s, err = Open(ctx, []metalog.Log{log}, opts)
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, want, mustSecurity(t, s), "restored from the snapshot")

	f, err := OpenFollower(ctx, log.Writer(), &FollowerOptions{Options: Options{Dir: t.TempDir(), Bucket: bucket, Prefix: "p/"}})
	require.NoError(t, err)
	defer f.Close()
	require.Equal(t, want, f.c.pub.Security.Load().State(-1), "a follower from the snapshot")
}

// TestSecurityForwarded: a broker that does not lead shard 0 changes
// and reads credentials and ACLs through its Forwarder (no follower:
// every read forwarded), with the leader's answers and codes; with a
// follower of shard 0 (Options.FollowerLog), it reads its own change at
// once and a change made at the leader once its follower applied it.
func TestSecurityForwarded(t *testing.T) {
	ctx := t.Context()
	log := newTestLog()
	lead, err := Open(ctx, []metalog.Log{log}, &Options{Dir: t.TempDir(), ApplyInterval: -1, SnapshotEvery: -1})
	require.NoError(t, err)
	defer lead.Close()
	for _, withFollower := range []bool{false, true} {
		opts := &Options{Dir: t.TempDir(), Forwarder: direct{lead}, ApplyInterval: -1, SnapshotEvery: -1}
		if withFollower {
			opts.FollowerLog = func(context.Context, int) (metalog.Log, error) { return log.Writer(), nil }
		}
		other, err := Open(ctx, []metalog.Log{nil}, opts)
		require.NoError(t, err)
		defer other.Close()
		if withFollower {
			require.Eventually(t, func() bool { _, f := other.follower(0); return f != nil }, 10*time.Second, time.Millisecond)
		}
		require.Equal(t, mustSecurity(t, lead), mustSecurity(t, other), "the same, forwarded or not (empty lists at first)")
		user := "alice"
		if withFollower {
			user = "bob"
		}
		cred := testCred(t, user, scram.SHA256, "x")
		errs, err := other.AlterScramCredentials(ctx, []scram.Credential{cred, {User: "x", Mechanism: 9}}, []ScramDeletion{{User: "nobody", Mechanism: scram.SHA256}})
		require.NoError(t, err)
		require.Equal(t, []kafkaerr.Code{0, kafkaerr.UnsupportedSaslMechanism, kafkaerr.ResourceNotFound}, codes(errs))
		got, ok, err := other.ScramCredential(ctx, user, scram.SHA256)
		require.NoError(t, err)
		require.True(t, ok, "read at once where it was made")
		require.Equal(t, cred, got)

		b := topicACL(user, acl.PatternLiteral, "User:"+user, acl.OpRead, acl.PermissionAllow)
		errs, err = other.CreateACLs(ctx, []acl.Binding{b, topicACL("", acl.PatternLiteral, "User:a", acl.OpRead, acl.PermissionAllow)})
		require.NoError(t, err)
		require.Equal(t, []kafkaerr.Code{0, kafkaerr.InvalidRequest}, codes(errs))
		require.Equal(t, mustSecurity(t, lead), mustSecurity(t, other))
		st := mustSecurity(t, other)
		unchanged, err := other.Security(ctx, st.Version)
		require.NoError(t, err)
		require.Equal(t, SecurityState{Version: st.Version}, unchanged)

		// A change made at the leader is seen here.
		_, err = lead.CreateACLs(ctx, []acl.Binding{topicACL("lead", acl.PatternLiteral, "User:"+user, acl.OpRead, acl.PermissionAllow)})
		require.NoError(t, err)
		want := mustSecurity(t, lead)
		require.Eventually(t, func() bool {
			got, err := other.Security(ctx, st.Version)
			return err == nil && got.Changed && got.Version == want.Version
		}, 10*time.Second, time.Millisecond)
		require.Equal(t, want, mustSecurity(t, other))

		deleted, err := other.DeleteACLs(ctx, []acl.Filter{
			{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Principal: ptr("User:" + user), Operation: acl.OpAny, Permission: acl.PermissionAny},
			{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Principal: ptr("User:nobody"), Operation: acl.OpAny, Permission: acl.PermissionAny},
		})
		require.NoError(t, err)
		require.Len(t, deleted, 2)
		require.ElementsMatch(t, []acl.Binding{b, topicACL("lead", acl.PatternLiteral, "User:"+user, acl.OpRead, acl.PermissionAllow)}, deleted[0])
		require.Empty(t, deleted[1])
		require.Empty(t, mustSecurity(t, other).ACLs, "read at once where it was made")
		forwarded := other.stats.forwarded.Load()
		mustSecurity(t, other)
		_, _, err = other.ScramCredential(ctx, user, scram.SHA256)
		require.NoError(t, err)
		if withFollower {
			require.Equal(t, forwarded, other.stats.forwarded.Load(), "read from the follower")
		} else {
			require.Equal(t, forwarded+2, other.stats.forwarded.Load(), "read from the leader")
		}
	}
}

// sampleSecurityEntries are entries of the security records, for the
// golden file, the round trip and the fuzzer's seeds.
func sampleSecurityEntries() [][]byte {
	cred := scram.Credential{User: "alice", Mechanism: scram.SHA256, Salt: []byte("salt-salt-salt"), Iterations: 4096,
		StoredKey: []byte("0123456789abcdef0123456789abcdef"), ServerKey: []byte("fedcba9876543210fedcba9876543210")}
	return [][]byte{
		state.AppendEntry(nil, state.Entry{Epoch: 14, Prev: 0x5eed, Records: []state.Record{
			state.ScramUpsertRecord{Cred: cred},
			state.ScramUpsertRecord{Cred: scram.Credential{User: "bob", Mechanism: scram.SHA512, Salt: []byte{1}, Iterations: 16384, StoredKey: []byte{2}, ServerKey: []byte{3}}},
			state.ScramDeleteRecord{Key: state.ScramKey{User: "alice", Mechanism: scram.SHA256}},
		}}),
		state.AppendEntry(nil, state.Entry{Epoch: 14, Records: []state.Record{
			state.ACLCreateRecord{Bindings: []acl.Binding{
				topicACL("orders", acl.PatternLiteral, "User:alice", acl.OpRead, acl.PermissionAllow),
				{ResourceType: acl.ResourceGroup, ResourceName: "g-", PatternType: acl.PatternPrefixed, Principal: "User:*", Host: "10.0.0.1", Operation: acl.OpAll, Permission: acl.PermissionDeny},
				{ResourceType: acl.ResourceUser, ResourceName: "*", PatternType: acl.PatternLiteral, Principal: "User:admin", Host: "*", Operation: acl.OpTwoPhaseCommit, Permission: acl.PermissionAllow},
			}},
			state.ACLDeleteRecord{Bindings: []acl.Binding{topicACL("orders", acl.PatternLiteral, "User:alice", acl.OpRead, acl.PermissionAllow)}},
		}}),
	}
}

// TestSecurityEntryGolden: the security records, byte for byte, are in
// testdata/entries-security.golden; -update rewrites it. They round-trip;
// values the leader never writes do not decode.
func TestSecurityEntryGolden(t *testing.T) {
	checkGolden(t, "entries-security.golden", sampleSecurityEntries())
	ok := scram.Credential{User: "a", Mechanism: scram.SHA256, Salt: []byte{1}, Iterations: 4096, StoredKey: []byte{2}, ServerKey: []byte{3}}
	with := func(edit func(*scram.Credential)) state.Record {
		c := ok
		edit(&c)
		return state.ScramUpsertRecord{Cred: c}
	}
	lit := topicACL("t", acl.PatternLiteral, "User:a", acl.OpRead, acl.PermissionAllow)
	bind := func(edit func(*acl.Binding)) state.Record {
		b := lit
		edit(&b)
		return state.ACLCreateRecord{Bindings: []acl.Binding{b}}
	}
	for _, r := range []state.Record{
		with(func(c *scram.Credential) { c.User = "" }),
		with(func(c *scram.Credential) { c.Mechanism = 3 }),
		with(func(c *scram.Credential) { c.Iterations = 0 }),
		with(func(c *scram.Credential) { c.Iterations = -4096 }),
		with(func(c *scram.Credential) { c.Salt = nil }),
		with(func(c *scram.Credential) { c.StoredKey = nil }),
		with(func(c *scram.Credential) { c.ServerKey = nil }),
		state.ScramDeleteRecord{Key: state.ScramKey{User: "", Mechanism: scram.SHA256}},
		state.ScramDeleteRecord{Key: state.ScramKey{User: "a", Mechanism: 0}},
		state.ACLCreateRecord{},
		state.ACLDeleteRecord{},
		bind(func(b *acl.Binding) { b.ResourceType = acl.ResourceAny }),
		bind(func(b *acl.Binding) { b.PatternType = acl.PatternMatch }),
		bind(func(b *acl.Binding) { b.Operation = acl.OpAny }),
		bind(func(b *acl.Binding) { b.Permission = acl.PermissionAny }),
	} {
		_, err := state.DecodeEntry(state.AppendEntry(nil, state.Entry{Records: []state.Record{r}}))
		require.ErrorIs(t, err, ErrCorruptEntry, "%+v", r)
	}
}
