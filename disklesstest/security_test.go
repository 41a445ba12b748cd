package disklesstest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/diskless-go/diskless/acl"
	"github.com/diskless-go/diskless/disklesstest"
)

// TestSecurity: NewKafka with Security requires SASL, creates the users
// and ACLs it is given, and hands the test a super user; a user the ACLs
// allow produces, one they do not is denied, one without SASL is refused.
func TestSecurity(t *testing.T) {
	k := disklesstest.NewKafka(t, &disklesstest.KafkaConfig{
		Topics: []disklesstest.Topic{{Name: "orders"}},
		Security: &disklesstest.Security{
			Users: map[string]string{"alice": "alice-secret", "bob": "bob-secret"},
			ACLs: []acl.Binding{{
				ResourceType: acl.ResourceTopic, ResourceName: "orders", PatternType: acl.PatternLiteral,
				Principal: "User:alice", Host: "*", Operation: acl.OpWrite, Permission: acl.PermissionAllow,
			}},
		},
	})
	ctx := t.Context()
	client := func(m kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(k.Addr()), m, kgo.RequestRetries(0), kgo.DisableIdempotentWrite())
		require.NoError(t, err)
		t.Cleanup(cl.Close)
		return cl
	}
	user, pass := k.Admin()
	require.Equal(t, "admin", user)
	require.NotEmpty(t, pass)
	admin := kadm.NewClient(client(kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism())))
	_, err := admin.CreateTopic(ctx, 1, 1, nil, "made-by-admin")
	require.NoError(t, err)

	alice := client(kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()))
	require.NoError(t, alice.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("v")}).FirstErr())
	bob := client(kgo.SASL(plain.Auth{User: "bob", Pass: "bob-secret"}.AsMechanism()))
	require.ErrorIs(t, bob.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("v")}).FirstErr(), kerr.TopicAuthorizationFailed)

	anon, err := kgo.NewClient(kgo.SeedBrokers(k.Addr()), kgo.RequestRetries(0))
	require.NoError(t, err)
	defer anon.Close()
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.Error(t, anon.Ping(pingCtx))
}
