package kafkaserver

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/acl"
	"github.com/diskless-go/diskless/acl/acltest"
	"github.com/diskless-go/diskless/internal/kafkatest"
	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/scram"
)

// securedBroker starts a broker with SASL PLAIN and the ACL authorizer,
// User:admin a super user, and users admin and alice (password
// "NAME-secret").
func securedBroker(t *testing.T, acls *ACLConfig) *testBroker {
	t.Helper()
	if acls == nil {
		acls = &ACLConfig{SuperUsers: []string{"User:admin"}}
	}
	p := startBroker(t, &Config{SASL: &SASLConfig{Mechanisms: []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}}, ACL: acls})
	for _, u := range []string{"admin", "alice", "bob"} {
		addUser(t, p.b, u, u+"-secret")
	}
	return p
}

// addUser gives user a SCRAM-SHA-512 and a SCRAM-SHA-256 credential
// (one request each: Kafka refuses a user named twice in one).
func addUser(t *testing.T, b *diskless.Broker, user, password string) {
	t.Helper()
	for _, m := range []scram.Mechanism{scram.SHA512, scram.SHA256} {
		c, err := scram.New(user, m, password, 0)
		require.NoError(t, err)
		errs, err := b.AlterScramCredentials(t.Context(), []scram.Credential{c}, nil)
		require.NoError(t, err)
		require.NoError(t, errors.Join(errs...))
	}
}

// userClient is a client of p authenticated as user with PLAIN.
func userClient(t *testing.T, p *testBroker, user string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return p.client(t, append([]kgo.Opt{kgo.SASL(plain.Auth{User: user, Pass: user + "-secret"}.AsMechanism())}, opts...)...)
}

// TestACLMatrix: the ACL matrix (kafkatest.ACLMatrix) against the
// server in this process; examples/kafka-broker runs it against the
// broker process.
func TestACLMatrix(t *testing.T) {
	p := securedBroker(t, nil)
	kafkatest.ACLMatrix(t, func(t *testing.T, user string, opts ...kgo.Opt) *kgo.Client { return userClient(t, p, user, opts...) })
}

// TestACLsNeedAuthorizer: without Config.ACL the ACL APIs answer
// SECURITY_DISABLED, and every request is allowed.
func TestACLsNeedAuthorizer(t *testing.T) {
	p := startBroker(t, nil)
	cl := p.client(t)
	_, err := kadm.NewClient(cl).CreateTopic(t.Context(), 1, 1, nil, "anyone")
	require.NoError(t, err)
	resp, err := (&kmsg.DescribeACLsRequest{ResourceType: kmsg.ACLResourceTypeAny, ResourcePatternType: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, PermissionType: kmsg.ACLPermissionTypeAny}).RequestWith(t.Context(), cl)
	require.NoError(t, err)
	require.Equal(t, kerr.SecurityDisabled.Code, resp.ErrorCode)
	require.NoError(t, cl.ProduceSync(t.Context(), &kgo.Record{Topic: "anyone", Value: []byte("v")}).FirstErr())
}

// TestACLAdminBadInput: CreateAcls of an unknown resource type or a MATCH
// or ANY pattern is INVALID_REQUEST and creates nothing.
func TestACLAdminBadInput(t *testing.T) {
	p := securedBroker(t, nil)
	cl := userClient(t, p, "admin")
	for _, c := range []struct {
		name string
		rt   kmsg.ACLResourceType
		pt   kmsg.ACLResourcePatternType
	}{
		{"unknown-type", kmsg.ACLResourceType(42), kmsg.ACLResourcePatternTypeLiteral},
		{"any-type", kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeLiteral},
		{"match", kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeMatch},
		{"any-pattern", kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeAny},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := kmsg.NewPtrCreateACLsRequest()
			cr := kmsg.NewCreateACLsRequestCreation()
			cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = c.rt, "x", c.pt
			cr.Principal, cr.Host, cr.Operation, cr.PermissionType = "User:bob", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
			req.Creations = append(req.Creations, cr)
			resp, err := req.RequestWith(t.Context(), cl)
			require.NoError(t, err)
			require.Equal(t, kerr.InvalidRequest.Code, resp.Results[0].ErrorCode)
		})
	}
	st, err := p.b.Security(t.Context(), -1)
	require.NoError(t, err)
	require.Empty(t, st.ACLs)
}

// TestScramAdmin: kadm creates, describes and deletes users; the new
// user authenticates with SCRAM-SHA-256; errors are Kafka's.
func TestScramAdmin(t *testing.T) {
	p := securedBroker(t, nil)
	ctx := t.Context()
	admin := kadm.NewClient(userClient(t, p, "admin"))
	res, err := admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "carol-secret"}})
	require.NoError(t, err)
	require.NoError(t, res["carol"].Err)

	// What kadm would not send: too few iterations, an unknown mechanism,
	// a user twice; each user's answer is Kafka's code.
	raw := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	for _, u := range []struct {
		name  string
		mech  int8
		iters int32
	}{{"dave", 2, 1000}, {"erin", 9, 4096}, {"frank", 1, 4096}, {"frank", 2, 4096}} {
		up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = u.name, u.mech, u.iters, []byte("salt"), []byte("salted-password")
		raw.Upsertions = append(raw.Upsertions, up)
	}
	rawResp, err := raw.RequestWith(ctx, userClient(t, p, "admin"))
	require.NoError(t, err)
	codes := map[string]int16{}
	for _, r := range rawResp.Results {
		codes[r.User] = r.ErrorCode
	}
	require.Equal(t, map[string]int16{"dave": kerr.UnacceptableCredential.Code, "erin": kerr.UnsupportedSaslMechanism.Code, "frank": kerr.DuplicateResource.Code}, codes)
	for _, u := range []string{"dave", "erin", "frank"} {
		for _, m := range []scram.Mechanism{scram.SHA256, scram.SHA512} {
			_, ok, err := p.b.ScramCredential(ctx, u, m)
			require.NoError(t, err)
			require.False(t, ok, "%s has no %v credential", u, m)
		}
	}

	described, err := admin.DescribeUserSCRAMs(ctx, "carol", "nobody")
	require.NoError(t, err)
	require.NoError(t, described["carol"].Err)
	require.Len(t, described["carol"].CredInfos, 1)
	require.Equal(t, int32(4096), described["carol"].CredInfos[0].Iterations)
	require.ErrorIs(t, described["nobody"].Err, kerr.ResourceNotFound)

	// carol is a user now: she authenticates (and, no ACL naming her,
	// is denied the topic).
	cl := p.client(t, kgo.SASL(kscram.Auth{User: "carol", Pass: "carol-secret"}.AsSha256Mechanism()), kgo.DisableIdempotentWrite(), kgo.RequestRetries(0))
	require.Equal(t, kerr.TopicAuthorizationFailed.Code, kafkatest.ErrCode(cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr()))

	del, err := admin.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "carol", Mechanism: kadm.ScramSha256}, {User: "erin", Mechanism: kadm.ScramSha256}}, nil)
	require.NoError(t, err)
	require.NoError(t, del["carol"].Err)
	require.ErrorIs(t, del["erin"].Err, kerr.ResourceNotFound)
	_, ok, err := p.b.ScramCredential(ctx, "carol", scram.SHA256)
	require.NoError(t, err)
	require.False(t, ok)
}

// TestSecurityMetrics: a failed authentication, a successful one and a
// denied action are counted in the server's OpenTelemetry metrics.
func TestSecurityMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	p := startBroker(t, &Config{
		SASL:          &SASLConfig{Mechanisms: []string{"PLAIN"}, FailedAuthDelay: -1},
		ACL:           &ACLConfig{SuperUsers: []string{"User:admin"}},
		MeterProvider: mp,
	})
	addUser(t, p.b, "alice", "alice-secret")
	ctx := t.Context()
	alice := userClient(t, p, "alice", kgo.RequestRetries(0), kgo.DisableIdempotentWrite())
	require.Equal(t, kerr.TopicAuthorizationFailed.Code, kafkatest.ErrCode(alice.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr()))
	wrong, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.SASL(plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism()), kgo.RequestRetries(0))
	require.NoError(t, err)
	defer wrong.Close()
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.Error(t, wrong.Ping(pingCtx))

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				continue
			}
			for _, dp := range sum.DataPoints {
				key := m.Name
				for _, kv := range dp.Attributes.ToSlice() {
					key += " " + string(kv.Key) + "=" + kv.Value.AsString()
				}
				got[key] = dp.Value
			}
		}
	}
	require.GreaterOrEqual(t, got["kafkaserver.sasl.authentications result=ok"], int64(1), "%v", got)
	require.GreaterOrEqual(t, got["kafkaserver.sasl.authentications result=failed"], int64(1), "%v", got)
	require.GreaterOrEqual(t, got["kafkaserver.authorization.denied"], int64(1), "%v", got)
}

// serverAuthorizer is the server's ACL authorizer over a Broker's stored
// ACLs, as acltest sees an authorizer.
type serverAuthorizer struct{ a *aclAuthorizer }

func (s serverAuthorizer) Authorize(principal, host string, op acl.Operation, rt acl.ResourceType, name string) bool {
	return s.a.Authorize(context.Background(), RequestContext{Principal: principal, Host: host}, []Action{{Operation: op, ResourceType: rt, Name: name}})[0]
}

func (s serverAuthorizer) AuthorizeByResourceType(principal, host string, op acl.Operation, rt acl.ResourceType) bool {
	return s.a.AuthorizeByResourceType(context.Background(), RequestContext{Principal: principal, Host: host}, op, rt)
}

// TestACLAuthorizerConformance: the built-in authorizer, its ACLs
// created through the Broker (coordinator records) and read back,
// passes the ACL conformance suite.
func TestACLAuthorizerConformance(t *testing.T) {
	b, err := diskless.Open(t.Context(), &diskless.Config{BucketURL: "mem://", DataDir: t.TempDir(), Linger: time.Millisecond})
	require.NoError(t, err)
	defer func() { require.NoError(t, b.Close()) }()
	acltest.TestAuthorizer(t, func(t *testing.T, opts acl.Options, bindings []acl.Binding) acltest.Authorizer {
		st, err := b.Security(t.Context(), -1)
		require.NoError(t, err)
		if len(st.ACLs) > 0 {
			any := acl.Filter{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Operation: acl.OpAny, Permission: acl.PermissionAny}
			_, err := b.DeleteACLs(t.Context(), []acl.Filter{any})
			require.NoError(t, err)
		}
		if len(bindings) > 0 {
			errs, err := b.CreateACLs(t.Context(), bindings)
			require.NoError(t, err)
			require.NoError(t, errors.Join(errs...))
		}
		a, err := newACLAuthorizer(t.Context(), b, ACLConfig{SuperUsers: opts.SuperUsers, AllowEveryoneIfNoACLFound: opts.AllowEveryoneIfNoACLFound}, zap.NewNop())
		require.NoError(t, err)
		return serverAuthorizer{a}
	})
}

// TestAuthorizationReview: cases a review of the authorization found
// open, each answered as Kafka answers it.
func TestAuthorizationReview(t *testing.T) {
	p := securedBroker(t, nil)
	ctx := t.Context()
	adminCl := userClient(t, p, "admin")
	admin := kadm.NewClient(adminCl)
	_, err := admin.CreateTopic(ctx, 1, 1, nil, "a-topic")
	require.NoError(t, err)
	// alice may read and write a-*, and nothing else.
	kafkatest.SetACLs(t, admin, adminCl, []acl.Binding{
		kafkatest.AllowACL("User:alice", acl.OpRead, acl.ResourceTopic, "a-", acl.PatternPrefixed),
		kafkatest.AllowACL("User:alice", acl.OpWrite, acl.ResourceTopic, "a-", acl.PatternPrefixed),
	})
	alice := userClient(t, p, "alice", kgo.RequestRetries(0), kgo.DisableIdempotentWrite())

	t.Run("transactional batch without a transactional ID", func(t *testing.T) {
		b := kbatch.NewBuilder(kbatch.CodecNone)
		b.SetProducer(12345, 0, 0)
		b.SetTransactional(true)
		b.Append(time.Now().UnixMilli(), nil, []byte("injected"))
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 10000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "a-topic"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records, err = b.Build(nil)
		require.NoError(t, err)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, alice)
		require.NoError(t, err)
		require.Equal(t, int16(53), resp.Topics[0].Partitions[0].ErrorCode, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
	})

	t.Run("metadata v3 auto-creation needs CREATE", func(t *testing.T) {
		// A raw connection: clients send the highest version both sides
		// serve, and this is about version 3.
		raw := dialRaw(t, p.addr)
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.SetVersion(1)
		hs.Mechanism = "PLAIN"
		raw.send(17, 1, false, hs.AppendTo(nil))
		_, _, err := raw.recv()
		require.NoError(t, err)
		auth := kmsg.NewPtrSASLAuthenticateRequest()
		auth.SASLAuthBytes = []byte("\x00alice\x00alice-secret")
		raw.send(36, 0, false, auth.AppendTo(nil))
		_, body, err := raw.recv()
		require.NoError(t, err)
		authResp := kmsg.NewPtrSASLAuthenticateResponse()
		require.NoError(t, authResp.ReadFrom(body))
		require.Zero(t, authResp.ErrorCode)
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(3)
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("a-new-v3")
		req.Topics = append(req.Topics, rt)
		raw.send(3, 3, false, req.AppendTo(nil))
		_, body, err = raw.recv()
		require.NoError(t, err)
		resp := kmsg.NewPtrMetadataResponse()
		resp.SetVersion(3)
		require.NoError(t, resp.ReadFrom(body))
		require.Equal(t, int16(29), resp.Topics[0].ErrorCode)
		topics, err := admin.ListTopics(ctx)
		require.NoError(t, err)
		require.False(t, topics.Has("a-new-v3"), "nothing was created")
	})

	t.Run("describe user scram with an empty list is every user", func(t *testing.T) {
		resp, err := (&kmsg.DescribeUserSCRAMCredentialsRequest{Users: []kmsg.DescribeUserSCRAMCredentialsRequestUser{}}).RequestWith(ctx, adminCl)
		require.NoError(t, err)
		require.Len(t, resp.Results, 3) // admin, alice, bob
	})

	t.Run("authorized operations are the principal's", func(t *testing.T) {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.IncludeClusterAuthorizedOperations = true
		resp, err := req.RequestWith(ctx, alice)
		require.NoError(t, err)
		require.Zero(t, resp.ClusterAuthorizedOperations, "alice may do nothing on the cluster")
		resp, err = req.RequestWith(ctx, adminCl)
		require.NoError(t, err)
		require.Equal(t, int32(clusterOperations), resp.ClusterAuthorizedOperations)
	})
}

// TestCanonicalHost: client addresses and ACL hosts compare in the form
// Kafka writes them (Java's getHostAddress).
func TestCanonicalHost(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.1":             "10.0.0.1",
		"::ffff:10.0.0.1":      "10.0.0.1",
		"2001:db8::1":          "2001:db8:0:0:0:0:0:1",
		"2001:DB8:0:0:0:0:0:1": "2001:db8:0:0:0:0:0:1",
		"::1":                  "0:0:0:0:0:0:0:1",
		"*":                    "*",
	} {
		require.Equal(t, want, canonicalHost(in), in)
	}
}
