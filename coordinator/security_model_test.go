package coordinator

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/diskless-go/diskless/coordinator/store"

	"github.com/diskless-go/diskless/coordinator/state"

	"pgregory.net/rapid"

	"github.com/diskless-go/diskless/acl"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/scram"
)

// TestSecurityModel runs random credential and ACL changes against a
// shard and a model (a map of credentials, a set of bindings, and the
// Version counting the records each change needs), with restarts and
// rebuilds from the log, and requires that they agree: the answers, the
// state and its Version.
func TestSecurityModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		log := newTestLog()
		dir, err := os.MkdirTemp("", "security-model-")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(dir)
		open := func() *leader {
			c, err := openLeader(ctx, log, &leaderOptions{Dir: dir, SnapshotEvery: -1, ApplyInterval: -1})
			if err != nil {
				rt.Fatal(err)
			}
			return c
		}
		c := open()
		defer func() { c.Close() }()
		creds := map[state.ScramKey]scram.Credential{}
		acls := map[acl.Binding]bool{}
		version := int64(0)

		users := []string{"", "alice", "bob"}
		names := []string{"orders", "ord", "*", "other"}
		principals := []string{"User:alice", "User:*", "bad"}
		binding := func(rt *rapid.T) acl.Binding {
			return acl.Binding{
				ResourceType: rapid.SampledFrom([]acl.ResourceType{acl.ResourceTopic, acl.ResourceGroup, acl.ResourceAny}).Draw(rt, "resource"),
				ResourceName: rapid.SampledFrom(names).Draw(rt, "name"),
				PatternType:  rapid.SampledFrom([]acl.PatternType{acl.PatternLiteral, acl.PatternPrefixed, acl.PatternMatch}).Draw(rt, "pattern"),
				Principal:    rapid.SampledFrom(principals).Draw(rt, "principal"),
				Host:         "*",
				Operation:    rapid.SampledFrom([]acl.Operation{acl.OpRead, acl.OpAll, acl.OpAny}).Draw(rt, "op"),
				Permission:   rapid.SampledFrom([]acl.Permission{acl.PermissionAllow, acl.PermissionDeny}).Draw(rt, "perm"),
			}
		}
		strp := func(rt *rapid.T, label string, vs []string) *string {
			if rapid.Bool().Draw(rt, label+"Nil") {
				return nil
			}
			v := rapid.SampledFrom(vs).Draw(rt, label)
			return &v
		}
		rt.Repeat(map[string]func(*rapid.T){
			"upsert": func(rt *rapid.T) {
				cr := scram.Credential{User: rapid.SampledFrom(users).Draw(rt, "user"), Mechanism: scram.Mechanism(rapid.IntRange(1, 3).Draw(rt, "mech")),
					Salt: []byte{byte(rapid.IntRange(1, 9).Draw(rt, "salt"))}, Iterations: rapid.SampledFrom([]int32{4096, 8192, 100, 20000}).Draw(rt, "iter"),
					StoredKey: []byte{1}, ServerKey: []byte{2}}
				errs, err := c.AlterScramCredentials(ctx, []scram.Credential{cr}, nil)
				if err != nil {
					rt.Fatal(err)
				}
				want := state.CheckScramCredential(cr)
				if code(errs[0]) != code(want) {
					rt.Fatalf("upsert %+v: %v, want %v", cr, errs[0], want)
				}
				if want == nil {
					creds[state.ScramKey{User: cr.User, Mechanism: cr.Mechanism}] = cr
					version++
				}
			},
			"delete": func(rt *rapid.T) {
				k := state.ScramKey{User: rapid.SampledFrom(users).Draw(rt, "user"), Mechanism: scram.Mechanism(rapid.IntRange(1, 3).Draw(rt, "mech"))}
				errs, err := c.AlterScramCredentials(ctx, nil, []ScramDeletion{{User: k.User, Mechanism: k.Mechanism}})
				if err != nil {
					rt.Fatal(err)
				}
				want := state.CheckScramUser(k.User, k.Mechanism)
				if _, ok := creds[k]; want == nil && !ok {
					want = kafkaerr.New(kafkaerr.ResourceNotFound, "")
				}
				if code(errs[0]) != code(want) {
					rt.Fatalf("delete %+v: %v, want %v", k, errs[0], want)
				}
				if want == nil {
					delete(creds, k)
					version++
				}
			},
			"createACLs": func(rt *rapid.T) {
				bs := rapid.SliceOfN(rapid.Custom(binding), 1, 3).Draw(rt, "bindings")
				errs, err := c.CreateACLs(ctx, bs)
				if err != nil {
					rt.Fatal(err)
				}
				added := false
				for i, b := range bs {
					valid := b.ResourceType != acl.ResourceAny && b.PatternType != acl.PatternMatch && b.Operation != acl.OpAny && b.Principal != "bad"
					if valid != (errs[i] == nil) {
						rt.Fatalf("create %+v: %v", b, errs[i])
					}
					if valid && !acls[b] {
						acls[b], added = true, true
					}
				}
				if added {
					version++
				}
			},
			"deleteACLs": func(rt *rapid.T) {
				f := acl.Filter{
					ResourceType: rapid.SampledFrom([]acl.ResourceType{acl.ResourceTopic, acl.ResourceAny}).Draw(rt, "resource"),
					ResourceName: strp(rt, "name", append(names, "orders-2")),
					PatternType:  rapid.SampledFrom([]acl.PatternType{acl.PatternLiteral, acl.PatternPrefixed, acl.PatternMatch, acl.PatternAny}).Draw(rt, "pattern"),
					Principal:    strp(rt, "principal", principals),
					Operation:    rapid.SampledFrom([]acl.Operation{acl.OpRead, acl.OpAny}).Draw(rt, "op"),
					Permission:   rapid.SampledFrom([]acl.Permission{acl.PermissionAllow, acl.PermissionAny}).Draw(rt, "perm"),
				}
				out, err := c.DeleteACLs(ctx, []acl.Filter{f})
				if err != nil {
					rt.Fatal(err)
				}
				var want []acl.Binding
				for b := range acls {
					if f.Matches(b) {
						want = append(want, b)
						delete(acls, b)
					}
				}
				slices.SortFunc(want, state.CompareBindings)
				if !slices.Equal(out[0], want) {
					rt.Fatalf("delete %+v: %v, want %v", f, out[0], want)
				}
				if len(want) > 0 {
					version++
				}
			},
			"restart": func(rt *rapid.T) {
				c.Close()
				c = open()
			},
			"rebuild": func(rt *rapid.T) {
				c.Close()
				for _, name := range []string{"shard-0.db", "shard-0.db-wal", "shard-0.db-shm"} {
					if err := removeIfExists(filepath.Join(dir, name)); err != nil {
						rt.Fatal(err)
					}
				}
				c = open()
			},
			"": func(rt *rapid.T) {
				st := c.pub.Security.Load().State(-1)
				if st.Version != version {
					rt.Fatalf("version %d, want %d", st.Version, version)
				}
				var wantCreds []scram.Credential
				for _, cr := range creds {
					wantCreds = append(wantCreds, cr)
				}
				slices.SortFunc(wantCreds, store.CompareCredentials)
				if len(wantCreds) != len(st.Credentials) {
					rt.Fatalf("credentials %v, want %v", st.Credentials, wantCreds)
				}
				for i := range wantCreds {
					if store.CompareCredentials(wantCreds[i], st.Credentials[i]) != 0 || wantCreds[i].Salt[0] != st.Credentials[i].Salt[0] || wantCreds[i].Iterations != st.Credentials[i].Iterations {
						rt.Fatalf("credentials %v, want %v", st.Credentials, wantCreds)
					}
				}
				var wantACLs []acl.Binding
				for b := range acls {
					wantACLs = append(wantACLs, b)
				}
				slices.SortFunc(wantACLs, state.CompareBindings)
				if !slices.Equal(st.ACLs, wantACLs) && len(wantACLs)+len(st.ACLs) > 0 {
					rt.Fatalf("ACLs %v, want %v", st.ACLs, wantACLs)
				}
			},
		})
	})
}
