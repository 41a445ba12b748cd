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

// errCode is the Kafka error code of err, 0 for nil, -1 for an error
// that carries none.
func errCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return -1
}

// allowACL allows principal op on a resource.
func allowACL(principal string, op acl.Operation, rt acl.ResourceType, name string, pt acl.PatternType) acl.Binding {
	return acl.Binding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: "*", Operation: op, Permission: acl.PermissionAllow}
}

// denyACL denies principal op on a resource.
func denyACL(principal string, op acl.Operation, rt acl.ResourceType, name string, pt acl.PatternType) acl.Binding {
	b := allowACL(principal, op, rt, name, pt)
	b.Permission = acl.PermissionDeny
	return b
}

// TestACLMatrix: each API as a user whose ACLs allow it and as one whose
// ACLs do not, with literal, prefixed and wildcard patterns, DENY winning
// over ALLOW, implied operations and super users: every answer is the
// one Kafka's authorizer gives.
func TestACLMatrix(t *testing.T) {
	p := securedBroker(t, nil)
	ctx := t.Context()
	adminCl := userClient(t, p, "admin")
	admin := kadm.NewClient(adminCl)
	_, err := admin.CreateTopic(ctx, 1, 1, nil, "orders")
	require.NoError(t, err)
	_, err = admin.CreateTopic(ctx, 1, 1, nil, "orders-eu")
	require.NoError(t, err)
	_, err = admin.CreateTopic(ctx, 1, 1, nil, "logs")
	require.NoError(t, err)

	const alice = "User:alice"
	lit, pre := acl.PatternLiteral, acl.PatternPrefixed
	topic, group, cluster, txnID := acl.ResourceTopic, acl.ResourceGroup, acl.ResourceCluster, acl.ResourceTransactionalID
	const (
		topicDenied   = 29 // TOPIC_AUTHORIZATION_FAILED
		groupDenied   = 30 // GROUP_AUTHORIZATION_FAILED
		clusterDenied = 31 // CLUSTER_AUTHORIZATION_FAILED
		txnDenied     = 53 // TRANSACTIONAL_ID_AUTHORIZATION_FAILED
		hidden        = -2 // left out of a listing
	)

	produce := func(topicName string) func(*testing.T, *kgo.Client) int16 {
		return func(t *testing.T, cl *kgo.Client) int16 {
			return errCode(cl.ProduceSync(t.Context(), &kgo.Record{Topic: topicName, Value: []byte("v")}).FirstErr())
		}
	}
	fetch := func(topicName string) func(*testing.T, *kgo.Client) int16 {
		return func(t *testing.T, cl *kgo.Client) int16 {
			req := kmsg.NewPtrFetchRequest()
			req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, 1<<20, -1
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = topicName
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.PartitionMaxBytes = 1 << 20
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(t.Context(), cl)
			if err != nil {
				return errCode(err)
			}
			require.Len(t, resp.Topics, 1)
			return resp.Topics[0].Partitions[0].ErrorCode
		}
	}
	metadata := func(topicName string, autoCreate bool) func(*testing.T, *kgo.Client) int16 {
		return func(t *testing.T, cl *kgo.Client) int16 {
			req := kmsg.NewPtrMetadataRequest()
			req.AllowAutoTopicCreation = autoCreate
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topicName)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(t.Context(), cl)
			if err != nil {
				return errCode(err)
			}
			require.Len(t, resp.Topics, 1)
			return resp.Topics[0].ErrorCode
		}
	}
	listed := func(topicName string) func(*testing.T, *kgo.Client) int16 {
		return func(t *testing.T, cl *kgo.Client) int16 {
			resp, err := kmsg.NewPtrMetadataRequest().RequestWith(t.Context(), cl)
			require.NoError(t, err)
			for _, rt := range resp.Topics {
				if rt.Topic != nil && *rt.Topic == topicName {
					return 0
				}
			}
			return hidden
		}
	}
	listOffsets := func(topicName string) func(*testing.T, *kgo.Client) int16 {
		return func(t *testing.T, cl *kgo.Client) int16 {
			req := kmsg.NewPtrListOffsetsRequest()
			req.ReplicaID = -1
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = topicName
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Timestamp = -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(t.Context(), cl)
			if err != nil {
				return errCode(err)
			}
			return resp.Topics[0].Partitions[0].ErrorCode
		}
	}
	createTopic := func(name string) func(*testing.T, *kgo.Client) int16 {
		return func(t *testing.T, cl *kgo.Client) int16 {
			resp, err := kadm.NewClient(cl).CreateTopic(t.Context(), 1, 1, nil, name)
			if err != nil && resp.Err == nil {
				return errCode(err)
			}
			return errCode(resp.Err)
		}
	}
	deleteTopic := func(name string) func(*testing.T, *kgo.Client) int16 {
		return func(t *testing.T, cl *kgo.Client) int16 {
			resp, err := kadm.NewClient(cl).DeleteTopic(t.Context(), name)
			if err != nil && resp.Err == nil {
				return errCode(err)
			}
			return errCode(resp.Err)
		}
	}
	describeConfigs := func(name string) func(*testing.T, *kgo.Client) int16 {
		return func(t *testing.T, cl *kgo.Client) int16 {
			req := kmsg.NewPtrDescribeConfigsRequest()
			r := kmsg.NewDescribeConfigsRequestResource()
			r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, name
			req.Resources = append(req.Resources, r)
			resp, err := req.RequestWith(t.Context(), cl)
			if err != nil {
				return errCode(err)
			}
			return resp.Resources[0].ErrorCode
		}
	}
	alterConfigs := func(name string) func(*testing.T, *kgo.Client) int16 {
		return func(t *testing.T, cl *kgo.Client) int16 {
			req := kmsg.NewPtrIncrementalAlterConfigsRequest()
			r := kmsg.NewIncrementalAlterConfigsRequestResource()
			r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, name
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Value = "retention.ms", kmsg.StringPtr("3600000")
			r.Configs = append(r.Configs, c)
			req.Resources = append(req.Resources, r)
			resp, err := req.RequestWith(t.Context(), cl)
			if err != nil {
				return errCode(err)
			}
			return resp.Resources[0].ErrorCode
		}
	}
	createPartitions := func(name string) func(*testing.T, *kgo.Client) int16 {
		return func(t *testing.T, cl *kgo.Client) int16 {
			req := kmsg.NewPtrCreatePartitionsRequest()
			rt := kmsg.NewCreatePartitionsRequestTopic()
			rt.Topic, rt.Count = name, 2
			req.Topics, req.ValidateOnly = append(req.Topics, rt), true
			req.TimeoutMillis = 10000
			resp, err := req.RequestWith(t.Context(), cl)
			if err != nil {
				return errCode(err)
			}
			return resp.Topics[0].ErrorCode
		}
	}
	deleteRecords := func(name string) func(*testing.T, *kgo.Client) int16 {
		return func(t *testing.T, cl *kgo.Client) int16 {
			req := kmsg.NewPtrDeleteRecordsRequest()
			rt := kmsg.NewDeleteRecordsRequestTopic()
			rt.Topic = name
			rp := kmsg.NewDeleteRecordsRequestTopicPartition()
			rp.Offset = 0
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics, req.TimeoutMillis = append(req.Topics, rt), 10000
			resp, err := req.RequestWith(t.Context(), cl)
			if err != nil {
				return errCode(err)
			}
			return resp.Topics[0].Partitions[0].ErrorCode
		}
	}
	offsetCommit := func(g, topicName string) func(*testing.T, *kgo.Client) int16 {
		return func(t *testing.T, cl *kgo.Client) int16 {
			req := kmsg.NewPtrOffsetCommitRequest()
			req.Group, req.Generation = g, -1
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = topicName
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Offset = 0
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(t.Context(), cl)
			if err != nil {
				return errCode(err)
			}
			return resp.Topics[0].Partitions[0].ErrorCode
		}
	}
	offsetFetch := func(g string) func(*testing.T, *kgo.Client) int16 {
		return func(t *testing.T, cl *kgo.Client) int16 {
			resp, err := kadm.NewClient(cl).FetchOffsets(t.Context(), g)
			if err != nil {
				return errCode(err)
			}
			return errCode(resp.Error())
		}
	}
	findCoordinator := func(g string, typ int8) func(*testing.T, *kgo.Client) int16 {
		return func(t *testing.T, cl *kgo.Client) int16 {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.CoordinatorKey, req.CoordinatorType = g, typ
			req.SetVersion(3)
			resp, err := req.RequestWith(t.Context(), cl)
			if err != nil {
				return errCode(err)
			}
			return resp.ErrorCode
		}
	}
	describeGroup := func(g string) func(*testing.T, *kgo.Client) int16 {
		return func(t *testing.T, cl *kgo.Client) int16 {
			req := kmsg.NewPtrDescribeGroupsRequest()
			req.Groups = []string{g}
			resp, err := req.RequestWith(t.Context(), cl)
			if err != nil {
				return errCode(err)
			}
			return resp.Groups[0].ErrorCode
		}
	}
	groupListed := func(g string) func(*testing.T, *kgo.Client) int16 {
		return func(t *testing.T, cl *kgo.Client) int16 {
			resp, err := kmsg.NewPtrListGroupsRequest().RequestWith(t.Context(), cl)
			require.NoError(t, err)
			for _, rg := range resp.Groups {
				if rg.Group == g {
					return 0
				}
			}
			return hidden
		}
	}
	initIdempotent := func(t *testing.T, cl *kgo.Client) int16 {
		resp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(t.Context(), cl)
		if err != nil {
			return errCode(err)
		}
		return resp.ErrorCode
	}
	initTxn := func(id string) func(*testing.T, *kgo.Client) int16 {
		return func(t *testing.T, cl *kgo.Client) int16 {
			req := kmsg.NewPtrInitProducerIDRequest()
			req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr(id), 60000
			resp, err := req.RequestWith(t.Context(), cl)
			if err != nil {
				return errCode(err)
			}
			return resp.ErrorCode
		}
	}
	clusterCall := func(req kmsg.Request, code func(kmsg.Response) int16) func(*testing.T, *kgo.Client) int16 {
		return func(t *testing.T, cl *kgo.Client) int16 {
			resp, err := cl.Request(t.Context(), req)
			if err != nil {
				return errCode(err)
			}
			return code(resp)
		}
	}
	describeACLs := clusterCall(&kmsg.DescribeACLsRequest{ResourceType: kmsg.ACLResourceTypeAny, ResourcePatternType: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, PermissionType: kmsg.ACLPermissionTypeAny}, func(r kmsg.Response) int16 { return r.(*kmsg.DescribeACLsResponse).ErrorCode })
	createACL := func(t *testing.T, cl *kgo.Client) int16 {
		req := kmsg.NewPtrCreateACLsRequest()
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, "x", kmsg.ACLResourcePatternTypeLiteral
		c.Principal, c.Host, c.Operation, c.PermissionType = "User:bob", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeDeny
		req.Creations = append(req.Creations, c)
		resp, err := req.RequestWith(t.Context(), cl)
		if err != nil {
			return errCode(err)
		}
		return resp.Results[0].ErrorCode
	}
	describeUsers := clusterCall(&kmsg.DescribeUserSCRAMCredentialsRequest{}, func(r kmsg.Response) int16 {
		return r.(*kmsg.DescribeUserSCRAMCredentialsResponse).ErrorCode
	})
	logDirs := func(t *testing.T, cl *kgo.Client) int16 {
		// To the node itself: the client would merge the answers of all.
		resp, err := cl.Broker(0).Request(t.Context(), kmsg.NewPtrDescribeLogDirsRequest())
		if err != nil {
			return errCode(err)
		}
		return resp.(*kmsg.DescribeLogDirsResponse).ErrorCode
	}

	cases := []struct {
		name string
		acls []acl.Binding
		user string // "" is alice
		call func(*testing.T, *kgo.Client) int16
		want int16
	}{
		{"produce/none", nil, "", produce("orders"), topicDenied},
		{"produce/literal", []acl.Binding{allowACL(alice, acl.OpWrite, topic, "orders", lit)}, "", produce("orders"), 0},
		{"produce/prefixed", []acl.Binding{allowACL(alice, acl.OpWrite, topic, "orders", pre)}, "", produce("orders-eu"), 0},
		{"produce/prefix-elsewhere", []acl.Binding{allowACL(alice, acl.OpWrite, topic, "orders", pre)}, "", produce("logs"), topicDenied},
		{"produce/wildcard", []acl.Binding{allowACL(alice, acl.OpWrite, topic, "*", lit)}, "", produce("logs"), 0},
		{"produce/all-principals", []acl.Binding{allowACL("User:*", acl.OpWrite, topic, "orders", lit)}, "", produce("orders"), 0},
		{"produce/deny-wins", []acl.Binding{allowACL(alice, acl.OpWrite, topic, "orders", pre), denyACL(alice, acl.OpWrite, topic, "orders-eu", lit)}, "", produce("orders-eu"), topicDenied},
		{"produce/deny-all-wins", []acl.Binding{allowACL(alice, acl.OpAll, topic, "*", lit), denyACL("User:*", acl.OpAll, topic, "orders", pre)}, "", produce("orders"), topicDenied},
		{"produce/read-is-not-write", []acl.Binding{allowACL(alice, acl.OpRead, topic, "orders", lit)}, "", produce("orders"), topicDenied},
		{"produce/super-user", nil, "admin", produce("orders"), 0},
		{"fetch/none", nil, "", fetch("orders"), topicDenied},
		{"fetch/read", []acl.Binding{allowACL(alice, acl.OpRead, topic, "orders", lit)}, "", fetch("orders"), 0},
		{"fetch/write-is-not-read", []acl.Binding{allowACL(alice, acl.OpWrite, topic, "orders", lit)}, "", fetch("orders"), topicDenied},
		{"metadata/none", nil, "", metadata("orders", false), topicDenied},
		{"metadata/describe-implied-by-read", []acl.Binding{allowACL(alice, acl.OpRead, topic, "orders", lit)}, "", metadata("orders", false), 0},
		{"metadata/auto-create-denied", []acl.Binding{allowACL(alice, acl.OpDescribe, topic, "*", lit)}, "", metadata("brand-new", true), topicDenied},
		{"metadata/all-topics-hidden", []acl.Binding{allowACL(alice, acl.OpDescribe, topic, "orders", lit)}, "", listed("logs"), hidden},
		{"metadata/all-topics-shown", []acl.Binding{allowACL(alice, acl.OpDescribe, topic, "orders", lit)}, "", listed("orders"), 0},
		{"list-offsets/none", nil, "", listOffsets("orders"), topicDenied},
		{"list-offsets/describe", []acl.Binding{allowACL(alice, acl.OpDescribe, topic, "orders", lit)}, "", listOffsets("orders"), 0},
		{"create-topics/none", nil, "", createTopic("new-a"), topicDenied},
		{"create-topics/topic", []acl.Binding{allowACL(alice, acl.OpCreate, topic, "new-", pre)}, "", createTopic("new-b"), 0},
		{"create-topics/cluster", []acl.Binding{allowACL(alice, acl.OpCreate, cluster, ClusterName, lit)}, "", createTopic("other-c"), 0},
		{"delete-topics/none", nil, "", deleteTopic("logs"), topicDenied},
		{"delete-topics/delete", []acl.Binding{allowACL(alice, acl.OpDelete, topic, "new-b", lit)}, "", deleteTopic("new-b"), 0},
		{"create-partitions/none", []acl.Binding{allowACL(alice, acl.OpDescribe, topic, "orders", lit)}, "", createPartitions("orders"), topicDenied},
		{"create-partitions/alter", []acl.Binding{allowACL(alice, acl.OpAlter, topic, "orders", lit)}, "", createPartitions("orders"), 0},
		{"delete-records/none", nil, "", deleteRecords("orders"), topicDenied},
		{"delete-records/delete", []acl.Binding{allowACL(alice, acl.OpDelete, topic, "orders", lit)}, "", deleteRecords("orders"), 0},
		{"describe-configs/none", nil, "", describeConfigs("orders"), topicDenied},
		{"describe-configs/implied-by-alter-configs", []acl.Binding{allowACL(alice, acl.OpAlterConfigs, topic, "orders", lit)}, "", describeConfigs("orders"), 0},
		{"alter-configs/describe-configs-only", []acl.Binding{allowACL(alice, acl.OpDescribeConfigs, topic, "orders", lit)}, "", alterConfigs("orders"), topicDenied},
		{"alter-configs/alter-configs", []acl.Binding{allowACL(alice, acl.OpAlterConfigs, topic, "orders", lit)}, "", alterConfigs("orders"), 0},
		{"offset-commit/no-group", []acl.Binding{allowACL(alice, acl.OpRead, topic, "orders", lit)}, "", offsetCommit("g1", "orders"), groupDenied},
		{"offset-commit/no-topic", []acl.Binding{allowACL(alice, acl.OpRead, group, "g1", lit)}, "", offsetCommit("g1", "orders"), topicDenied},
		{"offset-commit/both", []acl.Binding{allowACL(alice, acl.OpRead, group, "g", pre), allowACL(alice, acl.OpRead, topic, "orders", lit)}, "", offsetCommit("g1", "orders"), 0},
		{"offset-fetch/none", nil, "", offsetFetch("g1"), groupDenied},
		{"offset-fetch/describe", []acl.Binding{allowACL(alice, acl.OpDescribe, group, "g1", lit)}, "", offsetFetch("g1"), 0},
		{"find-coordinator/group-none", nil, "", findCoordinator("g1", 0), groupDenied},
		{"find-coordinator/group", []acl.Binding{allowACL(alice, acl.OpRead, group, "g1", lit)}, "", findCoordinator("g1", 0), 0},
		{"find-coordinator/txn-none", nil, "", findCoordinator("t1", 1), txnDenied},
		{"find-coordinator/txn", []acl.Binding{allowACL(alice, acl.OpDescribe, txnID, "t1", lit)}, "", findCoordinator("t1", 1), 0},
		{"describe-groups/none", nil, "", describeGroup("g1"), groupDenied},
		{"describe-groups/describe", []acl.Binding{allowACL(alice, acl.OpDescribe, group, "g1", lit)}, "", describeGroup("g1"), 0},
		{"list-groups/hidden", []acl.Binding{allowACL(alice, acl.OpDescribe, group, "other", lit)}, "", groupListed("g1"), hidden},
		{"list-groups/cluster", []acl.Binding{allowACL(alice, acl.OpDescribe, cluster, ClusterName, lit)}, "", groupListed("g1"), 0},
		{"init-producer-id/none", nil, "", initIdempotent, clusterDenied},
		{"init-producer-id/idempotent-write", []acl.Binding{allowACL(alice, acl.OpIdempotentWrite, cluster, ClusterName, lit)}, "", initIdempotent, 0},
		{"init-producer-id/write-any-topic", []acl.Binding{allowACL(alice, acl.OpWrite, topic, "orders", pre)}, "", initIdempotent, 0},
		{"init-producer-id/txn-none", []acl.Binding{allowACL(alice, acl.OpWrite, topic, "*", lit)}, "", initTxn("t1"), txnDenied},
		{"init-producer-id/txn", []acl.Binding{allowACL(alice, acl.OpWrite, txnID, "t", pre)}, "", initTxn("t1"), 0},
		{"describe-log-dirs/none", nil, "", logDirs, clusterDenied},
		{"describe-log-dirs/describe", []acl.Binding{allowACL(alice, acl.OpDescribe, cluster, ClusterName, lit)}, "", logDirs, 0},
		{"describe-acls/none", nil, "", describeACLs, clusterDenied},
		{"describe-acls/describe", []acl.Binding{allowACL(alice, acl.OpDescribe, cluster, ClusterName, lit)}, "", describeACLs, 0},
		{"create-acls/describe-only", []acl.Binding{allowACL(alice, acl.OpDescribe, cluster, ClusterName, lit)}, "", createACL, clusterDenied},
		{"create-acls/alter", []acl.Binding{allowACL(alice, acl.OpAlter, cluster, ClusterName, lit)}, "", createACL, 0},
		{"describe-user-scram/none", nil, "", describeUsers, clusterDenied},
		{"describe-user-scram/super-user", nil, "admin", describeUsers, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			setACLs(t, admin, adminCl, c.acls)
			user := c.user
			if user == "" {
				user = "alice"
			}
			cl := userClient(t, p, user, kgo.DisableIdempotentWrite(), kgo.RequestRetries(0))
			require.Equal(t, c.want, c.call(t, cl), "%s as %s", c.name, user)
		})
	}
}

// setACLs replaces every ACL with acls.
func setACLs(t *testing.T, admin *kadm.Client, cl *kgo.Client, acls []acl.Binding) {
	t.Helper()
	ctx := t.Context()
	any := kadm.NewACLs().AnyResource().Allow().Deny().AllowHosts().DenyHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny)
	_, err := admin.DeleteACLs(ctx, any)
	require.NoError(t, err)
	if len(acls) == 0 {
		return
	}
	req := kmsg.NewPtrCreateACLsRequest()
	for _, b := range acls {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceType(b.ResourceType), b.ResourceName, kmsg.ACLResourcePatternType(b.PatternType)
		c.Principal, c.Host, c.Operation, c.PermissionType = b.Principal, b.Host, kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
		req.Creations = append(req.Creations, c)
	}
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	for i, r := range resp.Results {
		require.Zero(t, r.ErrorCode, "creating %+v: %v", acls[i], r.ErrorMessage)
	}
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
	require.Equal(t, kerr.TopicAuthorizationFailed.Code, errCode(cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr()))

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
	require.Equal(t, kerr.TopicAuthorizationFailed.Code, errCode(alice.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr()))
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
