package kafkaserver

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/scram"
)

// FuzzSecurityAdmin feeds arbitrary bodies of CreateAcls, DeleteAcls,
// DescribeAcls, AlterUserScramCredentials, DescribeUserScramCredentials,
// AlterClientQuotas and DescribeClientQuotas, of any version the broker
// serves, to their handlers as a super user: none panics, and whatever
// they store is valid (every ACL binding as CreateAcls validates it,
// every credential of a known mechanism with iterations in Kafka's
// bounds and its keys, every quota's entity and values as
// AlterClientQuotas validates them), so bad input changed nothing it
// should not.
func FuzzSecurityAdmin(f *testing.F) {
	for _, seed := range []struct {
		key     int16
		version int16
		req     kmsg.Request
	}{
		{30, 3, &kmsg.CreateACLsRequest{Version: 3, Creations: []kmsg.CreateACLsRequestCreation{{ResourceType: 2, ResourceName: "t", ResourcePatternType: 3, Principal: "User:a", Host: "*", Operation: 3, PermissionType: 3}}}},
		{30, 0, &kmsg.CreateACLsRequest{Version: 0, Creations: []kmsg.CreateACLsRequestCreation{{ResourceType: 4, ResourceName: "kafka-cluster", Principal: "User:a", Host: "*", Operation: 7, PermissionType: 2}}}},
		{31, 1, &kmsg.DeleteACLsRequest{Version: 1, Filters: []kmsg.DeleteACLsRequestFilter{{ResourceType: 1, ResourcePatternType: 1, Operation: 1, PermissionType: 1}}}},
		{29, 2, &kmsg.DescribeACLsRequest{Version: 2, ResourceType: 1, ResourcePatternType: 2, ResourceName: kmsg.StringPtr("t"), Operation: 1, PermissionType: 1}},
		{51, 0, &kmsg.AlterUserSCRAMCredentialsRequest{Upsertions: []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{{Name: "u", Mechanism: 2, Iterations: 4096, Salt: []byte("s"), SaltedPassword: []byte("p")}}}},
		{50, 0, &kmsg.DescribeUserSCRAMCredentialsRequest{}},
		{49, 1, &kmsg.AlterClientQuotasRequest{Version: 1, Entries: []kmsg.AlterClientQuotasRequestEntry{{
			Entity: []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "user", Name: kmsg.StringPtr("u")}, {Type: "client-id"}},
			Ops:    []kmsg.AlterClientQuotasRequestEntryOp{{Key: "producer_byte_rate", Value: 1024}, {Key: "request_percentage", Remove: true}},
		}}}},
		{49, 0, &kmsg.AlterClientQuotasRequest{Entries: []kmsg.AlterClientQuotasRequestEntry{{
			Entity: []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "ip", Name: kmsg.StringPtr("10.0.0.1")}},
			Ops:    []kmsg.AlterClientQuotasRequestEntryOp{{Key: "connection_creation_rate", Value: 5}},
		}}}},
		{48, 1, &kmsg.DescribeClientQuotasRequest{Version: 1, Components: []kmsg.DescribeClientQuotasRequestComponent{{EntityType: "user", MatchType: 2}}, Strict: true}},
	} {
		f.Add(seed.key, seed.version, seed.req.AppendTo(nil))
	}
	b, err := diskless.Open(f.Context(), &diskless.Config{BucketURL: "mem://", DataDir: f.TempDir(), Linger: time.Millisecond})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = b.Close() })
	s, err := newServer(f.Context(), b, serverConfig{ACL: &ACLConfig{SuperUsers: []string{"User:admin"}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = s.Close() })
	admin := withIdentity(context.Background(), &identity{rc: RequestContext{Principal: "User:admin", Host: "127.0.0.1"}})
	f.Fuzz(func(t *testing.T, key, version int16, body []byte) {
		if !serves(key, version) || (key != 29 && key != 30 && key != 31 && key != 48 && key != 49 && key != 50 && key != 51) {
			return
		}
		req := kmsg.RequestForKey(key)
		req.SetVersion(version)
		if req.ReadFrom(body) != nil {
			return
		}
		r := &request{kreq: req}
		if _, err := s.authorized(admin, req, func(ctx context.Context) (kmsg.Response, error) { return s.dispatch(ctx, r, &conn{s: s}) }); err != nil {
			return
		}
		st, err := b.Security(t.Context(), -1)
		if err != nil {
			t.Fatal(err)
		}
		for _, bd := range st.ACLs {
			if err := bd.Validate(); err != nil {
				t.Fatalf("stored an invalid binding %v: %v", bd, err)
			}
		}
		for _, c := range st.Credentials {
			if !c.Mechanism.Valid() || c.Iterations < scram.MinIterations || c.Iterations > scram.MaxIterations || c.User == "" ||
				len(c.Salt) == 0 || len(c.StoredKey) == 0 || len(c.ServerKey) == 0 {
				t.Fatalf("stored an invalid credential for %q: %v %d", c.User, c.Mechanism, c.Iterations)
			}
		}
		qs, err := b.ClientQuotas(t.Context(), -1)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range qs.Quotas {
			if err := q.Entity.Validate(); err != nil {
				t.Fatalf("stored quotas of an invalid entity %+v: %v", q.Entity, err)
			}
			for k, v := range q.Values {
				if err := q.Entity.ValidateValue(k, v); err != nil {
					t.Fatalf("stored an invalid quota of %+v: %s = %v: %v", q.Entity, k, v, err)
				}
			}
		}
	})
}
