package state

import (
	"slices"
	"sort"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/diskless-go/diskless/acl"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/scram"
)

// The model of security: SCRAM credentials (a map), ACL bindings (a set),
// and the version counting the records their changes log.

var (
	scramUsers    = []string{"", "alice", "bob"}
	aclNames      = []string{"orders", "ord", "*", "other"}
	aclPrincipals = []string{"User:alice", "User:*", "bad"}
)

func drawBinding(t *rapid.T) acl.Binding {
	return acl.Binding{
		ResourceType: rapid.SampledFrom([]acl.ResourceType{acl.ResourceTopic, acl.ResourceGroup, acl.ResourceAny}).Draw(t, "resource"),
		ResourceName: rapid.SampledFrom(aclNames).Draw(t, "name"),
		PatternType:  rapid.SampledFrom([]acl.PatternType{acl.PatternLiteral, acl.PatternPrefixed, acl.PatternMatch}).Draw(t, "pattern"),
		Principal:    rapid.SampledFrom(aclPrincipals).Draw(t, "principal"),
		Host:         "*",
		Operation:    rapid.SampledFrom([]acl.Operation{acl.OpRead, acl.OpAll, acl.OpAny}).Draw(t, "op"),
		Permission:   rapid.SampledFrom([]acl.Permission{acl.PermissionAllow, acl.PermissionDeny}).Draw(t, "perm"),
	}
}

func strp(t *rapid.T, label string, vs []string) *string {
	if rapid.Bool().Draw(t, label+"Nil") {
		return nil
	}
	v := rapid.SampledFrom(vs).Draw(t, label)
	return &v
}

// scramUserErr is Kafka's error for a user and mechanism.
func scramUserErr(user string, m scram.Mechanism) kafkaerr.Code {
	switch {
	case user == "":
		return kafkaerr.UnacceptableCredential
	case m != scram.SHA256 && m != scram.SHA512:
		return kafkaerr.UnsupportedSaslMechanism
	}
	return kafkaerr.NoError
}

func (s *modelRun) securityActions(actions map[string]func(*rapid.T)) {
	m := s.m
	actions["scram"] = func(t *rapid.T) {
		var ups []scram.Credential
		var dels []ScramDeletion
		for range rapid.IntRange(0, 2).Draw(t, "upserts") {
			c := scram.Credential{User: rapid.SampledFrom(scramUsers).Draw(t, "user"), Mechanism: scram.Mechanism(rapid.IntRange(1, 3).Draw(t, "mech")),
				Salt: []byte{byte(rapid.IntRange(0, 9).Draw(t, "salt"))}, Iterations: rapid.SampledFrom([]int32{4096, 8192, 16384, 100, 20000}).Draw(t, "iter"),
				StoredKey: []byte{1}, ServerKey: []byte{2}}
			if c.Salt[0] == 0 {
				c.Salt = nil
			}
			ups = append(ups, c)
		}
		for range rapid.IntRange(0, 2).Draw(t, "deletions") {
			dels = append(dels, ScramDeletion{User: rapid.SampledFrom(scramUsers).Draw(t, "user"), Mechanism: scram.Mechanism(rapid.IntRange(1, 3).Draw(t, "mech"))})
		}
		o := &ScramOp{BaseOp: s.base(), Upserts: ups, Deletions: dels}
		s.decide(o)
		require.NoError(t, <-o.Done)
		// Kafka's rule, by user: the deletions, then the upserts; a
		// user's second change is DUPLICATE_RESOURCE; a user with an
		// error gets it for every change, and none is made.
		userErr := map[string]kafkaerr.Code{}
		deleted, upserted := map[string]int{}, map[string]int{}
		for i, d := range dels {
			if _, ok := userErr[d.User]; ok {
				continue
			}
			_, twice := deleted[d.User]
			switch {
			case twice:
				delete(deleted, d.User)
				userErr[d.User] = kafkaerr.DuplicateResource
			case scramUserErr(d.User, d.Mechanism) != kafkaerr.NoError:
				userErr[d.User] = scramUserErr(d.User, d.Mechanism)
			default:
				if _, ok := m.creds[ScramKey{d.User, d.Mechanism}]; !ok {
					userErr[d.User] = kafkaerr.ResourceNotFound
				} else {
					deleted[d.User] = i
				}
			}
		}
		for i, c := range ups {
			if _, ok := userErr[c.User]; ok {
				continue
			}
			_, del := deleted[c.User]
			_, up := upserted[c.User]
			switch {
			case del || up:
				delete(deleted, c.User)
				delete(upserted, c.User)
				userErr[c.User] = kafkaerr.DuplicateResource
			case scramUserErr(c.User, c.Mechanism) != kafkaerr.NoError:
				userErr[c.User] = scramUserErr(c.User, c.Mechanism)
			case c.Iterations < scram.MinIterations || c.Iterations > scram.MaxIterations || len(c.Salt) == 0:
				userErr[c.User] = kafkaerr.UnacceptableCredential
			default:
				upserted[c.User] = i
			}
		}
		require.Len(t, o.Errs, len(ups)+len(dels))
		for i, c := range ups {
			require.Equal(t, userErr[c.User], errCode(o.Errs[i]), "upsert %d of %+v %+v", i, ups, dels)
		}
		for i, d := range dels {
			require.Equal(t, userErr[d.User], errCode(o.Errs[len(ups)+i]), "deletion %d of %+v %+v", i, ups, dels)
		}
		for _, i := range deleted {
			delete(m.creds, ScramKey{dels[i].User, dels[i].Mechanism})
			m.secVersion++
		}
		for _, i := range upserted {
			m.creds[ScramKey{ups[i].User, ups[i].Mechanism}] = ups[i]
			m.secVersion++
		}
	}
	actions["createACLs"] = func(t *rapid.T) {
		bs := rapid.SliceOfN(rapid.Custom(drawBinding), 1, 3).Draw(t, "bindings")
		o := &ACLCreateOp{BaseOp: s.base(), Bindings: bs}
		s.decide(o)
		require.NoError(t, <-o.Done)
		added := false
		for i, b := range bs {
			valid := b.ResourceType != acl.ResourceAny && b.PatternType != acl.PatternMatch && b.Operation != acl.OpAny && b.Principal != "bad"
			if valid {
				require.NoError(t, o.Errs[i], "create %+v", b)
			} else {
				require.Equal(t, kafkaerr.InvalidRequest, errCode(o.Errs[i]), "create %+v", b)
			}
			if valid && !m.acls[b] {
				m.acls[b], added = true, true
			}
		}
		if added {
			m.secVersion++
		}
	}
	actions["deleteACLs"] = func(t *rapid.T) {
		var fs []acl.Filter
		for range rapid.IntRange(1, 2).Draw(t, "filters") {
			fs = append(fs, acl.Filter{
				ResourceType: rapid.SampledFrom([]acl.ResourceType{acl.ResourceTopic, acl.ResourceAny}).Draw(t, "resource"),
				ResourceName: strp(t, "name", append(slices.Clone(aclNames), "orders-2")),
				PatternType:  rapid.SampledFrom([]acl.PatternType{acl.PatternLiteral, acl.PatternPrefixed, acl.PatternMatch, acl.PatternAny}).Draw(t, "pattern"),
				Principal:    strp(t, "principal", aclPrincipals),
				Operation:    rapid.SampledFrom([]acl.Operation{acl.OpRead, acl.OpAny}).Draw(t, "op"),
				Permission:   rapid.SampledFrom([]acl.Permission{acl.PermissionAllow, acl.PermissionAny}).Draw(t, "perm"),
			})
		}
		o := &ACLDeleteOp{BaseOp: s.base(), Filters: fs}
		s.decide(o)
		require.NoError(t, <-o.Done)
		var all []acl.Binding
		for b := range m.acls {
			all = append(all, b)
		}
		sort.Slice(all, func(i, j int) bool { return CompareBindings(all[i], all[j]) < 0 })
		require.Len(t, o.Out, len(fs))
		gone := false
		for i, f := range fs {
			var want []acl.Binding
			for _, b := range all {
				if f.Matches(b) {
					want = append(want, b)
					if m.acls[b] {
						delete(m.acls, b)
						gone = true
					}
				}
			}
			require.Equal(t, want, o.Out[i], "filter %+v", f)
		}
		if gone {
			m.secVersion++
		}
	}
}
