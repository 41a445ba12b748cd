package kafkaserver

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless/acl"
	"github.com/diskless-go/diskless/internal/kafkatest"
	"github.com/diskless-go/diskless/quota"
)

// quotaEntity is a kadm entity of type=name pairs; a name "" is the
// default.
func quotaEntity(pairs ...string) kadm.ClientQuotaEntity {
	var e kadm.ClientQuotaEntity
	for i := 0; i < len(pairs); i += 2 {
		c := kadm.ClientQuotaEntityComponent{Type: pairs[i]}
		if pairs[i+1] != "" {
			c.Name = kmsg.StringPtr(pairs[i+1])
		}
		e = append(e, c)
	}
	return e
}

// described returns what DescribeClientQuotas answers, each entity as
// its String, each value by key.
func described(t *testing.T, admin *kadm.Client, strict bool, comps ...kadm.DescribeClientQuotaComponent) map[string]map[string]float64 {
	t.Helper()
	qs, err := admin.DescribeClientQuotas(t.Context(), strict, comps)
	require.NoError(t, err)
	out := map[string]map[string]float64{}
	for _, q := range qs {
		vs := map[string]float64{}
		for _, v := range q.Values {
			vs[v.Key] = v.Value
		}
		out[q.Entity.String()] = vs
	}
	return out
}

// alterErrs returns what returns the error of each entry
// AlterClientQuotas answers, by entity.
func alterErrs(t *testing.T) func(res kadm.AlteredClientQuotas, err error) map[string]error {
	return func(res kadm.AlteredClientQuotas, err error) map[string]error {
		t.Helper()
		require.NoError(t, err)
		out := map[string]error{}
		for _, r := range res {
			out[r.Entity.String()] = r.Err
		}
		return out
	}
}

// TestClientQuotasAdmin: kadm sets quotas of users, clients, both and
// IPs, describes them with each kind of filter (exact, default, any;
// strict), validates without changing, is refused what Kafka refuses
// with its codes (nothing changed), removes them; they survive a
// restart.
func TestClientQuotasAdmin(t *testing.T) {
	p := startBroker(t, nil)
	ctx := t.Context()
	admin := kadm.NewClient(p.client(t))
	set := func(key string, v float64) kadm.AlterClientQuotaOp {
		return kadm.AlterClientQuotaOp{Key: key, Value: v}
	}
	errs := alterErrs(t)(admin.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: quotaEntity("user", "alice"), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1048576), set("request_percentage", 25)}},
		{Entity: quotaEntity("user", "alice", "client-id", ""), Ops: []kadm.AlterClientQuotaOp{set("consumer_byte_rate", 2048)}},
		{Entity: quotaEntity("user", ""), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 4096)}},
		{Entity: quotaEntity("client-id", "app"), Ops: []kadm.AlterClientQuotaOp{set("controller_mutation_rate", 2.5)}},
		{Entity: quotaEntity("ip", "10.1.2.3"), Ops: []kadm.AlterClientQuotaOp{set("connection_creation_rate", 10)}},
	}))
	require.Len(t, errs, 5)
	for e, err := range errs {
		require.NoError(t, err, e)
	}
	all := map[string]map[string]float64{
		"{user=alice}":                      {"producer_byte_rate": 1048576, "request_percentage": 25},
		"{user=alice, client-id=<default>}": {"consumer_byte_rate": 2048},
		"{user=<default>}":                  {"producer_byte_rate": 4096},
		"{client-id=app}":                   {"controller_mutation_rate": 2.5},
		"{ip=10.1.2.3}":                     {"connection_creation_rate": 10},
	}
	require.Equal(t, all, described(t, admin, false))
	exact := kadm.DescribeClientQuotaComponent{Type: "user", MatchName: kmsg.StringPtr("alice"), MatchType: 0}
	require.Equal(t, map[string]map[string]float64{"{user=alice}": all["{user=alice}"], "{user=alice, client-id=<default>}": all["{user=alice, client-id=<default>}"]},
		described(t, admin, false, exact))
	require.Equal(t, map[string]map[string]float64{"{user=alice}": all["{user=alice}"]}, described(t, admin, true, exact))
	require.Equal(t, map[string]map[string]float64{"{user=<default>}": all["{user=<default>}"]},
		described(t, admin, false, kadm.DescribeClientQuotaComponent{Type: "user", MatchType: 1}))
	require.Equal(t, map[string]map[string]float64{"{user=alice, client-id=<default>}": all["{user=alice, client-id=<default>}"]},
		described(t, admin, false, exact, kadm.DescribeClientQuotaComponent{Type: "client-id", MatchType: 1}))
	require.Equal(t, map[string]map[string]float64{"{client-id=app}": all["{client-id=app}"]},
		described(t, admin, true, kadm.DescribeClientQuotaComponent{Type: "client-id", MatchType: 2}))
	require.Equal(t, map[string]map[string]float64{"{ip=10.1.2.3}": all["{ip=10.1.2.3}"]},
		described(t, admin, false, kadm.DescribeClientQuotaComponent{Type: "ip", MatchType: 2}))
	_, err := admin.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "topic", MatchType: 2}})
	require.ErrorIs(t, err, kerr.UnsupportedVersion)
	_, err = admin.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "ip", MatchType: 2}, {Type: "user", MatchType: 2}})
	require.ErrorIs(t, err, kerr.InvalidRequest)

	// Validate only: the answers, and nothing changed.
	errs = alterErrs(t)(admin.ValidateAlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: quotaEntity("user", "alice"), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Remove: true}}},
		{Entity: quotaEntity("user", "bob"), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1)}},
		{Entity: quotaEntity("user", "carol"), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", -1)}},
	}))
	require.NoError(t, errs["{user=alice}"])
	require.NoError(t, errs["{user=bob}"])
	require.ErrorIs(t, errs["{user=carol}"], kerr.InvalidRequest)
	require.Equal(t, all, described(t, admin, false))

	// What Kafka refuses: each entry INVALID_REQUEST, nothing changed.
	errs = alterErrs(t)(admin.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: quotaEntity("group", "g"), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1)}},
		{Entity: quotaEntity("user", "dave", "user", "erin"), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1)}},
		{Entity: quotaEntity("user", "frank", "ip", ""), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1)}},
		{Entity: quotaEntity("ip", "not-an-address"), Ops: []kadm.AlterClientQuotaOp{set("connection_creation_rate", 1)}},
		{Entity: quotaEntity("ip", "10.9.9.9"), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1)}},
		{Entity: quotaEntity("user", "alice"), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1), set("no_such_key", 1)}},
		{Entity: quotaEntity("user", ""), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 0.5)}},
		{Entity: quotaEntity("client-id", "app"), Ops: []kadm.AlterClientQuotaOp{set("controller_mutation_rate", 0)}},
		{Entity: quotaEntity(), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1)}},
	}))
	require.Len(t, errs, 9)
	for e, err := range errs {
		require.ErrorIs(t, err, kerr.InvalidRequest, e)
	}
	require.Equal(t, all, described(t, admin, false))

	// Removals; the last value of an entity removes it.
	errs = alterErrs(t)(admin.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: quotaEntity("user", "alice"), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Remove: true}}},
		{Entity: quotaEntity("client-id", "app"), Ops: []kadm.AlterClientQuotaOp{{Key: "controller_mutation_rate", Remove: true}}},
	}))
	require.NoError(t, errs["{user=alice}"])
	require.NoError(t, errs["{client-id=app}"])
	delete(all, "{client-id=app}")
	all["{user=alice}"] = map[string]float64{"request_percentage": 25}
	require.Equal(t, all, described(t, admin, false))

	p.stop()
	p = p.restart()
	require.Equal(t, all, described(t, kadm.NewClient(p.client(t)), false), "after a restart")
}

// quotaRoundTrip sends req at version v on a raw connection and reads
// the answer into resp.
func quotaRoundTrip(t *testing.T, addr string, v int16, req kmsg.Request, resp kmsg.Response) {
	t.Helper()
	raw := dialRaw(t, addr)
	req.SetVersion(v)
	raw.send(req.Key(), v, req.IsFlexible(), req.AppendTo(nil))
	_, body, err := raw.recv()
	require.NoError(t, err)
	if req.IsFlexible() {
		body = body[1:] // the response header's tagged fields
	}
	resp.SetVersion(v)
	require.NoError(t, resp.ReadFrom(body))
}

// TestClientQuotasVersions: DescribeClientQuotas and AlterClientQuotas
// at version 0 and 1 (flexible) both work, and ApiVersions advertises
// them.
func TestClientQuotasVersions(t *testing.T) {
	p := startBroker(t, nil)
	for v := int16(0); v <= 1; v++ {
		user := "user-v" + itoa(int32(v))
		alter := kmsg.NewPtrAlterClientQuotasRequest()
		e := kmsg.NewAlterClientQuotasRequestEntry()
		e.Entity = []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "user", Name: kmsg.StringPtr(user)}}
		e.Ops = []kmsg.AlterClientQuotasRequestEntryOp{{Key: "producer_byte_rate", Value: 100}}
		alter.Entries = append(alter.Entries, e)
		var aresp kmsg.AlterClientQuotasResponse
		quotaRoundTrip(t, p.addr, v, alter, &aresp)
		require.Len(t, aresp.Entries, 1)
		require.Zero(t, aresp.Entries[0].ErrorCode)
		require.Equal(t, user, *aresp.Entries[0].Entity[0].Name)

		desc := kmsg.NewPtrDescribeClientQuotasRequest()
		desc.Components = []kmsg.DescribeClientQuotasRequestComponent{{EntityType: "user", MatchType: 0, Match: kmsg.StringPtr(user)}}
		var dresp kmsg.DescribeClientQuotasResponse
		quotaRoundTrip(t, p.addr, v, desc, &dresp)
		require.Zero(t, dresp.ErrorCode)
		require.Len(t, dresp.Entries, 1)
		require.Equal(t, []kmsg.DescribeClientQuotasResponseEntryValue{{Key: "producer_byte_rate", Value: 100}}, dresp.Entries[0].Values)

		// An exact match without a name.
		desc.Components[0].Match = nil
		quotaRoundTrip(t, p.addr, v, desc, &dresp)
		require.Equal(t, kerr.InvalidRequest.Code, dresp.ErrorCode)
	}
	versions, err := kadm.NewClient(p.client(t)).ApiVersions(t.Context())
	require.NoError(t, err)
	require.NotEmpty(t, versions)
	for _, bv := range versions {
		require.NoError(t, bv.Err)
		for _, key := range []int16{48, 49} {
			lo, hi, ok := bv.KeyVersions(key)
			require.True(t, ok, "key %d advertised", key)
			require.Equal(t, [2]int16{0, 1}, [2]int16{lo, hi})
		}
	}
}

// TestClientQuotasAuthorized: with the ACL authorizer, describing needs
// DESCRIBE_CONFIGS on the cluster and altering ALTER_CONFIGS (which
// implies DESCRIBE_CONFIGS, as in Kafka); refused, the requests answer
// CLUSTER_AUTHORIZATION_FAILED (each entry of an alteration) and change
// nothing.
func TestClientQuotasAuthorized(t *testing.T) {
	p := securedBroker(t, nil)
	ctx := t.Context()
	adminCl := userClient(t, p, "admin")
	admin := kadm.NewClient(adminCl)
	entry := []kadm.AlterClientQuotaEntry{{Entity: quotaEntity("user", "alice"), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 100}}}}
	alice := kadm.NewClient(userClient(t, p, "alice", kgo.RequestRetries(0)))
	for _, c := range []struct {
		name            string
		acls            []acl.Binding
		describe, alter error
	}{
		{"none", nil, kerr.ClusterAuthorizationFailed, kerr.ClusterAuthorizationFailed},
		{"describe", []acl.Binding{kafkatest.AllowACL("User:alice", acl.OpDescribe, acl.ResourceCluster, acl.ClusterName, acl.PatternLiteral)},
			kerr.ClusterAuthorizationFailed, kerr.ClusterAuthorizationFailed},
		{"describe-configs", []acl.Binding{kafkatest.AllowACL("User:alice", acl.OpDescribeConfigs, acl.ResourceCluster, acl.ClusterName, acl.PatternLiteral)},
			nil, kerr.ClusterAuthorizationFailed},
		{"alter-configs", []acl.Binding{kafkatest.AllowACL("User:alice", acl.OpAlterConfigs, acl.ResourceCluster, acl.ClusterName, acl.PatternLiteral)},
			nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			kafkatest.SetACLs(t, admin, adminCl, c.acls)
			before, err := p.b.ClientQuotas(ctx, -1)
			require.NoError(t, err)
			_, err = alice.DescribeClientQuotas(ctx, false, nil)
			if c.describe == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, c.describe)
			}
			res, err := alice.AlterClientQuotas(ctx, entry)
			require.NoError(t, err)
			require.Len(t, res, 1)
			require.Equal(t, "{user=alice}", res[0].Entity.String())
			if c.alter != nil {
				require.ErrorIs(t, res[0].Err, c.alter)
				after, err := p.b.ClientQuotas(ctx, -1)
				require.NoError(t, err)
				require.Equal(t, before, after, "nothing changed")
				return
			}
			require.NoError(t, res[0].Err)
			qs, err := p.b.DescribeClientQuotas(ctx, quota.Filter{})
			require.NoError(t, err)
			require.Len(t, qs, 1)
		})
	}
}

// TestClientQuotasEnforced: a quota set with AlterClientQuotas is
// enforced by the node at once: a producer of that client ID over its
// produce quota is throttled, another client ID is not; once the quota
// is removed, the producer is no longer throttled.
func TestClientQuotasEnforced(t *testing.T) {
	p := startBroker(t, nil)
	ctx := t.Context()
	admin := kadm.NewClient(p.client(t))
	kafkatest.CreateTopic(t, p.client(t), "limited", 1, nil)
	errs := alterErrs(t)(admin.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: quotaEntity("client-id", "slow"), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1024}}},
	}))
	require.NoError(t, errs["{client-id=slow}"])

	// produce sends 64 KiB records as client id until a throttle is seen
	// or n records are acknowledged, and returns the throttles seen.
	produce := func(id string, n int) int64 {
		var hooks quotaHooks
		cl := p.client(t, kgo.ClientID(id), kgo.WithHooks(&hooks), kgo.ProducerBatchCompression(kgo.NoCompression()))
		value := make([]byte, 64<<10)
		for range n {
			require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "limited", Value: value}).FirstErr())
			if hooks.throttles.Load() > 0 {
				break
			}
		}
		return hooks.throttles.Load()
	}
	require.Positive(t, produce("slow", 20), "a producer over 1 KiB/s is throttled")
	require.Zero(t, produce("fast", 5), "another client ID has no quota")

	errs = alterErrs(t)(admin.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: quotaEntity("client-id", "slow"), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Remove: true}}},
	}))
	require.NoError(t, errs["{client-id=slow}"])
	require.Zero(t, produce("slow", 5), "no quota any more")
}
