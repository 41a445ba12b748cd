package kafkatest

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless/acl"
)

// ACLMatrix runs each Kafka API as User:alice with ACLs that allow it
// and with ACLs that do not, with literal, prefixed and wildcard
// patterns, DENY winning over ALLOW, implied operations and a super
// user (User:admin), against a broker with the ACL authorizer: every
// answer must be the one Kafka's authorizer gives. client returns a
// client of the broker authenticated as user ("admin", a super user, or
// "alice", whom no ACL names but those the matrix creates); the matrix
// replaces every ACL as it goes.
func ACLMatrix(t *testing.T, client func(t *testing.T, user string, opts ...kgo.Opt) *kgo.Client) {
	ctx := t.Context()
	adminCl := client(t, "admin")
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
			return ErrCode(cl.ProduceSync(t.Context(), &kgo.Record{Topic: topicName, Value: []byte("v")}).FirstErr())
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
			return requestCode(t, cl, req, func(resp *kmsg.FetchResponse) int16 {
				require.Len(t, resp.Topics, 1)
				return resp.Topics[0].Partitions[0].ErrorCode
			})
		}
	}
	metadata := func(topicName string, autoCreate bool) func(*testing.T, *kgo.Client) int16 {
		return func(t *testing.T, cl *kgo.Client) int16 {
			req := kmsg.NewPtrMetadataRequest()
			req.AllowAutoTopicCreation = autoCreate
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topicName)
			req.Topics = append(req.Topics, rt)
			return requestCode(t, cl, req, func(resp *kmsg.MetadataResponse) int16 {
				require.Len(t, resp.Topics, 1)
				return resp.Topics[0].ErrorCode
			})
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
			return requestCode(t, cl, req, func(resp *kmsg.ListOffsetsResponse) int16 { return resp.Topics[0].Partitions[0].ErrorCode })
		}
	}
	createTopic := func(name string) func(*testing.T, *kgo.Client) int16 {
		return func(t *testing.T, cl *kgo.Client) int16 {
			resp, err := kadm.NewClient(cl).CreateTopic(t.Context(), 1, 1, nil, name)
			return adminCode(resp.Err, err)
		}
	}
	deleteTopic := func(name string) func(*testing.T, *kgo.Client) int16 {
		return func(t *testing.T, cl *kgo.Client) int16 {
			resp, err := kadm.NewClient(cl).DeleteTopic(t.Context(), name)
			return adminCode(resp.Err, err)
		}
	}
	describeConfigs := func(name string) func(*testing.T, *kgo.Client) int16 {
		return func(t *testing.T, cl *kgo.Client) int16 {
			req := kmsg.NewPtrDescribeConfigsRequest()
			r := kmsg.NewDescribeConfigsRequestResource()
			r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, name
			req.Resources = append(req.Resources, r)
			return requestCode(t, cl, req, func(resp *kmsg.DescribeConfigsResponse) int16 { return resp.Resources[0].ErrorCode })
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
			return requestCode(t, cl, req, func(resp *kmsg.IncrementalAlterConfigsResponse) int16 { return resp.Resources[0].ErrorCode })
		}
	}
	createPartitions := func(name string) func(*testing.T, *kgo.Client) int16 {
		return func(t *testing.T, cl *kgo.Client) int16 {
			req := kmsg.NewPtrCreatePartitionsRequest()
			rt := kmsg.NewCreatePartitionsRequestTopic()
			rt.Topic, rt.Count = name, 2
			req.Topics, req.ValidateOnly = append(req.Topics, rt), true
			req.TimeoutMillis = 10000
			return requestCode(t, cl, req, func(resp *kmsg.CreatePartitionsResponse) int16 { return resp.Topics[0].ErrorCode })
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
			return requestCode(t, cl, req, func(resp *kmsg.DeleteRecordsResponse) int16 { return resp.Topics[0].Partitions[0].ErrorCode })
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
			return requestCode(t, cl, req, func(resp *kmsg.OffsetCommitResponse) int16 { return resp.Topics[0].Partitions[0].ErrorCode })
		}
	}
	offsetFetch := func(g string) func(*testing.T, *kgo.Client) int16 {
		return func(t *testing.T, cl *kgo.Client) int16 {
			resp, err := kadm.NewClient(cl).FetchOffsets(t.Context(), g)
			if err != nil {
				return ErrCode(err)
			}
			return ErrCode(resp.Error())
		}
	}
	findCoordinator := func(g string, typ int8) func(*testing.T, *kgo.Client) int16 {
		return func(t *testing.T, cl *kgo.Client) int16 {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.CoordinatorKey, req.CoordinatorType = g, typ
			req.SetVersion(3)
			return requestCode(t, cl, req, func(resp *kmsg.FindCoordinatorResponse) int16 { return resp.ErrorCode })
		}
	}
	describeGroup := func(g string) func(*testing.T, *kgo.Client) int16 {
		return func(t *testing.T, cl *kgo.Client) int16 {
			req := kmsg.NewPtrDescribeGroupsRequest()
			req.Groups = []string{g}
			return requestCode(t, cl, req, func(resp *kmsg.DescribeGroupsResponse) int16 { return resp.Groups[0].ErrorCode })
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
		return requestCode(t, cl, kmsg.NewPtrInitProducerIDRequest(), func(resp *kmsg.InitProducerIDResponse) int16 { return resp.ErrorCode })
	}
	initTxn := func(id string) func(*testing.T, *kgo.Client) int16 {
		return func(t *testing.T, cl *kgo.Client) int16 {
			req := kmsg.NewPtrInitProducerIDRequest()
			req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr(id), 60000
			return requestCode(t, cl, req, func(resp *kmsg.InitProducerIDResponse) int16 { return resp.ErrorCode })
		}
	}
	describeACLs := func(t *testing.T, cl *kgo.Client) int16 {
		req := &kmsg.DescribeACLsRequest{ResourceType: kmsg.ACLResourceTypeAny, ResourcePatternType: kmsg.ACLResourcePatternTypeAny,
			Operation: kmsg.ACLOperationAny, PermissionType: kmsg.ACLPermissionTypeAny}
		return requestCode(t, cl, req, func(resp *kmsg.DescribeACLsResponse) int16 { return resp.ErrorCode })
	}
	createACL := func(t *testing.T, cl *kgo.Client) int16 {
		req := kmsg.NewPtrCreateACLsRequest()
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, "x", kmsg.ACLResourcePatternTypeLiteral
		c.Principal, c.Host, c.Operation, c.PermissionType = "User:bob", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeDeny
		req.Creations = append(req.Creations, c)
		return requestCode(t, cl, req, func(resp *kmsg.CreateACLsResponse) int16 { return resp.Results[0].ErrorCode })
	}
	describeUsers := func(t *testing.T, cl *kgo.Client) int16 {
		return requestCode(t, cl, &kmsg.DescribeUserSCRAMCredentialsRequest{}, func(resp *kmsg.DescribeUserSCRAMCredentialsResponse) int16 { return resp.ErrorCode })
	}
	describeQuotas := func(t *testing.T, cl *kgo.Client) int16 {
		return requestCode(t, cl, kmsg.NewPtrDescribeClientQuotasRequest(), func(resp *kmsg.DescribeClientQuotasResponse) int16 { return resp.ErrorCode })
	}
	alterQuotas := func(t *testing.T, cl *kgo.Client) int16 {
		req := kmsg.NewPtrAlterClientQuotasRequest()
		e := kmsg.NewAlterClientQuotasRequestEntry()
		e.Entity = []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "client-id", Name: kmsg.StringPtr("acl-matrix")}}
		e.Ops = []kmsg.AlterClientQuotasRequestEntryOp{{Key: "producer_byte_rate", Value: 1 << 20}}
		req.Entries, req.ValidateOnly = append(req.Entries, e), true
		return requestCode(t, cl, req, func(resp *kmsg.AlterClientQuotasResponse) int16 { return resp.Entries[0].ErrorCode })
	}
	logDirs := func(t *testing.T, cl *kgo.Client) int16 {
		// To the node itself: the client would merge the answers of all.
		return requestCode(t, cl.Broker(0), kmsg.NewPtrDescribeLogDirsRequest(), func(resp *kmsg.DescribeLogDirsResponse) int16 { return resp.ErrorCode })
	}

	cases := []struct {
		name string
		acls []acl.Binding
		user string // "" is alice
		call func(*testing.T, *kgo.Client) int16
		want int16
	}{
		{"produce/none", nil, "", produce("orders"), topicDenied},
		{"produce/literal", []acl.Binding{AllowACL(alice, acl.OpWrite, topic, "orders", lit)}, "", produce("orders"), 0},
		{"produce/prefixed", []acl.Binding{AllowACL(alice, acl.OpWrite, topic, "orders", pre)}, "", produce("orders-eu"), 0},
		{"produce/prefix-elsewhere", []acl.Binding{AllowACL(alice, acl.OpWrite, topic, "orders", pre)}, "", produce("logs"), topicDenied},
		{"produce/wildcard", []acl.Binding{AllowACL(alice, acl.OpWrite, topic, "*", lit)}, "", produce("logs"), 0},
		{"produce/all-principals", []acl.Binding{AllowACL("User:*", acl.OpWrite, topic, "orders", lit)}, "", produce("orders"), 0},
		{"produce/deny-wins", []acl.Binding{AllowACL(alice, acl.OpWrite, topic, "orders", pre), DenyACL(alice, acl.OpWrite, topic, "orders-eu", lit)}, "", produce("orders-eu"), topicDenied},
		{"produce/deny-all-wins", []acl.Binding{AllowACL(alice, acl.OpAll, topic, "*", lit), DenyACL("User:*", acl.OpAll, topic, "orders", pre)}, "", produce("orders"), topicDenied},
		{"produce/read-is-not-write", []acl.Binding{AllowACL(alice, acl.OpRead, topic, "orders", lit)}, "", produce("orders"), topicDenied},
		{"produce/super-user", nil, "admin", produce("orders"), 0},
		{"fetch/none", nil, "", fetch("orders"), topicDenied},
		{"fetch/read", []acl.Binding{AllowACL(alice, acl.OpRead, topic, "orders", lit)}, "", fetch("orders"), 0},
		{"fetch/write-is-not-read", []acl.Binding{AllowACL(alice, acl.OpWrite, topic, "orders", lit)}, "", fetch("orders"), topicDenied},
		{"metadata/none", nil, "", metadata("orders", false), topicDenied},
		{"metadata/describe-implied-by-read", []acl.Binding{AllowACL(alice, acl.OpRead, topic, "orders", lit)}, "", metadata("orders", false), 0},
		{"metadata/auto-create-denied", []acl.Binding{AllowACL(alice, acl.OpDescribe, topic, "*", lit)}, "", metadata("brand-new", true), topicDenied},
		{"metadata/all-topics-hidden", []acl.Binding{AllowACL(alice, acl.OpDescribe, topic, "orders", lit)}, "", listed("logs"), hidden},
		{"metadata/all-topics-shown", []acl.Binding{AllowACL(alice, acl.OpDescribe, topic, "orders", lit)}, "", listed("orders"), 0},
		{"list-offsets/none", nil, "", listOffsets("orders"), topicDenied},
		{"list-offsets/describe", []acl.Binding{AllowACL(alice, acl.OpDescribe, topic, "orders", lit)}, "", listOffsets("orders"), 0},
		{"create-topics/none", nil, "", createTopic("new-a"), topicDenied},
		{"create-topics/topic", []acl.Binding{AllowACL(alice, acl.OpCreate, topic, "new-", pre)}, "", createTopic("new-b"), 0},
		{"create-topics/cluster", []acl.Binding{AllowACL(alice, acl.OpCreate, cluster, acl.ClusterName, lit)}, "", createTopic("other-c"), 0},
		{"delete-topics/none", nil, "", deleteTopic("logs"), topicDenied},
		{"delete-topics/delete", []acl.Binding{AllowACL(alice, acl.OpDelete, topic, "new-b", lit)}, "", deleteTopic("new-b"), 0},
		{"create-partitions/none", []acl.Binding{AllowACL(alice, acl.OpDescribe, topic, "orders", lit)}, "", createPartitions("orders"), topicDenied},
		{"create-partitions/alter", []acl.Binding{AllowACL(alice, acl.OpAlter, topic, "orders", lit)}, "", createPartitions("orders"), 0},
		{"delete-records/none", nil, "", deleteRecords("orders"), topicDenied},
		{"delete-records/delete", []acl.Binding{AllowACL(alice, acl.OpDelete, topic, "orders", lit)}, "", deleteRecords("orders"), 0},
		{"describe-configs/none", nil, "", describeConfigs("orders"), topicDenied},
		{"describe-configs/implied-by-alter-configs", []acl.Binding{AllowACL(alice, acl.OpAlterConfigs, topic, "orders", lit)}, "", describeConfigs("orders"), 0},
		{"alter-configs/describe-configs-only", []acl.Binding{AllowACL(alice, acl.OpDescribeConfigs, topic, "orders", lit)}, "", alterConfigs("orders"), topicDenied},
		{"alter-configs/alter-configs", []acl.Binding{AllowACL(alice, acl.OpAlterConfigs, topic, "orders", lit)}, "", alterConfigs("orders"), 0},
		{"offset-commit/no-group", []acl.Binding{AllowACL(alice, acl.OpRead, topic, "orders", lit)}, "", offsetCommit("g1", "orders"), groupDenied},
		{"offset-commit/no-topic", []acl.Binding{AllowACL(alice, acl.OpRead, group, "g1", lit)}, "", offsetCommit("g1", "orders"), topicDenied},
		{"offset-commit/both", []acl.Binding{AllowACL(alice, acl.OpRead, group, "g", pre), AllowACL(alice, acl.OpRead, topic, "orders", lit)}, "", offsetCommit("g1", "orders"), 0},
		{"offset-fetch/none", nil, "", offsetFetch("g1"), groupDenied},
		{"offset-fetch/describe", []acl.Binding{AllowACL(alice, acl.OpDescribe, group, "g1", lit)}, "", offsetFetch("g1"), 0},
		{"find-coordinator/group-none", nil, "", findCoordinator("g1", 0), groupDenied},
		{"find-coordinator/group", []acl.Binding{AllowACL(alice, acl.OpRead, group, "g1", lit)}, "", findCoordinator("g1", 0), 0},
		{"find-coordinator/txn-none", nil, "", findCoordinator("t1", 1), txnDenied},
		{"find-coordinator/txn", []acl.Binding{AllowACL(alice, acl.OpDescribe, txnID, "t1", lit)}, "", findCoordinator("t1", 1), 0},
		{"describe-groups/none", nil, "", describeGroup("g1"), groupDenied},
		{"describe-groups/describe", []acl.Binding{AllowACL(alice, acl.OpDescribe, group, "g1", lit)}, "", describeGroup("g1"), 0},
		{"list-groups/hidden", []acl.Binding{AllowACL(alice, acl.OpDescribe, group, "other", lit)}, "", groupListed("g1"), hidden},
		{"list-groups/cluster", []acl.Binding{AllowACL(alice, acl.OpDescribe, cluster, acl.ClusterName, lit)}, "", groupListed("g1"), 0},
		{"init-producer-id/none", nil, "", initIdempotent, clusterDenied},
		{"init-producer-id/idempotent-write", []acl.Binding{AllowACL(alice, acl.OpIdempotentWrite, cluster, acl.ClusterName, lit)}, "", initIdempotent, 0},
		{"init-producer-id/write-any-topic", []acl.Binding{AllowACL(alice, acl.OpWrite, topic, "orders", pre)}, "", initIdempotent, 0},
		{"init-producer-id/txn-none", []acl.Binding{AllowACL(alice, acl.OpWrite, topic, "*", lit)}, "", initTxn("t1"), txnDenied},
		{"init-producer-id/txn", []acl.Binding{AllowACL(alice, acl.OpWrite, txnID, "t", pre)}, "", initTxn("t1"), 0},
		{"describe-log-dirs/none", nil, "", logDirs, clusterDenied},
		{"describe-log-dirs/describe", []acl.Binding{AllowACL(alice, acl.OpDescribe, cluster, acl.ClusterName, lit)}, "", logDirs, 0},
		{"describe-acls/none", nil, "", describeACLs, clusterDenied},
		{"describe-acls/describe", []acl.Binding{AllowACL(alice, acl.OpDescribe, cluster, acl.ClusterName, lit)}, "", describeACLs, 0},
		{"create-acls/describe-only", []acl.Binding{AllowACL(alice, acl.OpDescribe, cluster, acl.ClusterName, lit)}, "", createACL, clusterDenied},
		{"create-acls/alter", []acl.Binding{AllowACL(alice, acl.OpAlter, cluster, acl.ClusterName, lit)}, "", createACL, 0},
		{"describe-user-scram/none", nil, "", describeUsers, clusterDenied},
		{"describe-user-scram/super-user", nil, "admin", describeUsers, 0},
		{"describe-client-quotas/describe-only", []acl.Binding{AllowACL(alice, acl.OpDescribe, cluster, acl.ClusterName, lit)}, "", describeQuotas, clusterDenied},
		{"describe-client-quotas/describe-configs", []acl.Binding{AllowACL(alice, acl.OpDescribeConfigs, cluster, acl.ClusterName, lit)}, "", describeQuotas, 0},
		{"alter-client-quotas/describe-configs-only", []acl.Binding{AllowACL(alice, acl.OpDescribeConfigs, cluster, acl.ClusterName, lit)}, "", alterQuotas, clusterDenied},
		{"alter-client-quotas/alter-configs", []acl.Binding{AllowACL(alice, acl.OpAlterConfigs, cluster, acl.ClusterName, lit)}, "", alterQuotas, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			SetACLs(t, admin, adminCl, c.acls)
			user := c.user
			if user == "" {
				user = "alice"
			}
			cl := client(t, user, kgo.DisableIdempotentWrite(), kgo.RequestRetries(0))
			require.Equal(t, c.want, c.call(t, cl), "%s as %s", c.name, user)
		})
	}
}

// SetACLs replaces every ACL with acls.
func SetACLs(t *testing.T, admin *kadm.Client, cl *kgo.Client, acls []acl.Binding) {
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

// requestCode sends req to to and returns the error code code reads in
// the response, or that of the failure to send it.
func requestCode[R kmsg.Response](t *testing.T, to kmsg.Requestor, req kmsg.Request, code func(R) int16) int16 {
	resp, err := to.Request(t.Context(), req)
	if err != nil {
		return ErrCode(err)
	}
	return code(resp.(R))
}

// adminCode is the error code of a kadm call answering one result: the
// result's error, else the call's.
func adminCode(resultErr, err error) int16 {
	if err != nil && resultErr == nil {
		return ErrCode(err)
	}
	return ErrCode(resultErr)
}

// ErrCode is the Kafka error code of err, 0 for nil, -1 for an error
// that carries none.
func ErrCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return -1
}

// AllowACL allows principal op on a resource.
func AllowACL(principal string, op acl.Operation, rt acl.ResourceType, name string, pt acl.PatternType) acl.Binding {
	return acl.Binding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: "*", Operation: op, Permission: acl.PermissionAllow}
}

// DenyACL denies principal op on a resource.
func DenyACL(principal string, op acl.Operation, rt acl.ResourceType, name string, pt acl.PatternType) acl.Binding {
	b := AllowACL(principal, op, rt, name, pt)
	b.Permission = acl.PermissionDeny
	return b
}
