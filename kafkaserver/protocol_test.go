package kafkaserver

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless/internal/kafkatest"
)

// rawConn is a Kafka connection without a client library: requests framed
// by hand, to send what clients never send.
type rawConn struct {
	t    *testing.T
	c    net.Conn
	corr int32
}

func dialRaw(t *testing.T, addr string) *rawConn {
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(30*time.Second)))
	return &rawConn{t: t, c: c}
}

// send writes a request of key and version with body (a request header v1,
// or v2 with its empty tagged fields when flexible).
func (r *rawConn) send(key, version int16, flexible bool, body []byte) int32 {
	r.corr++
	b := binary.BigEndian.AppendUint32(nil, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(r.corr))
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "test"...)
	if flexible {
		b = append(b, 0)
	}
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	_, err := r.c.Write(b)
	require.NoError(r.t, err)
	return r.corr
}

// recv reads a response frame and returns its correlation ID and the
// rest; io.EOF when the broker closed the connection.
func (r *rawConn) recv() (int32, []byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r.c, size[:]); err != nil {
		return 0, nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r.c, b); err != nil {
		return 0, nil, err
	}
	return int32(binary.BigEndian.Uint32(b)), b[4:], nil
}

// TestApiVersions checks what ApiVersions advertises (every API whose
// lower bound Kafka 4 raised from version 0), that an
// ApiVersions request of a version the broker does not serve gets
// UNSUPPORTED_VERSION in version 0 with the key list, and that other
// requests outside the served versions (a removed one that is still
// advertised, too) close the connection.
func TestApiVersions(t *testing.T) {
	p := startBroker(t, nil)
	cl := p.client(t)
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(t.Context(), cl)
	require.NoError(t, err)
	require.NoError(t, kerr.ErrorForCode(resp.ErrorCode))
	var got, want []string
	for _, k := range resp.ApiKeys {
		got = append(got, fmt.Sprintf("%s %d-%d", kmsg.NameForKey(k.ApiKey), k.MinVersion, k.MaxVersion))
	}
	for _, v := range supported {
		want = append(want, fmt.Sprintf("%s %d-%d", kmsg.NameForKey(v.key), v.advertised, v.max))
	}
	require.Equal(t, want, got)
	require.True(t, slices.IsSortedFunc(supported, func(a, b versionRange) int { return int(a.key) - int(b.key) }))
	for _, v := range supported { // every advertised version is one kmsg knows, so a client can use it
		require.LessOrEqual(t, v.max, kmsg.RequestForKey(v.key).MaxVersion(), kmsg.NameForKey(v.key))
		require.LessOrEqual(t, v.advertised, v.min)
		require.LessOrEqual(t, v.min, v.max)
	}
	produce, _ := versionsOf(0)
	require.Equal(t, versionRange{0, 3, 12, 0}, produce, "Produce advertised from 0, served from 3, up to 12 (transactions v2)")

	raw := dialRaw(t, p.addr)
	corr := raw.send(18, 99, true, []byte{0})
	gotCorr, body, err := raw.recv()
	require.NoError(t, err)
	require.Equal(t, corr, gotCorr)
	v0 := kmsg.NewPtrApiVersionsResponse() // header v0, body v0
	require.NoError(t, v0.ReadFrom(body))
	require.Equal(t, kerr.UnsupportedVersion.Code, v0.ErrorCode)
	require.Len(t, v0.ApiKeys, len(supported))

	// The connection still serves: ApiVersions v3 (flexible request
	// header, response header v0).
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = 3, "raw", "1"
	corr = raw.send(18, 3, true, req.AppendTo(nil))
	gotCorr, body, err = raw.recv()
	require.NoError(t, err)
	require.Equal(t, corr, gotCorr)
	v3 := kmsg.NewPtrApiVersionsResponse()
	v3.Version = 3
	require.NoError(t, v3.ReadFrom(body))
	require.NoError(t, kerr.ErrorForCode(v3.ErrorCode))

	// Metadata v0 is served (as in Kafka 4): an empty list is every topic.
	corr = raw.send(3, 0, false, []byte{0, 0, 0, 0})
	gotCorr, body, err = raw.recv()
	require.NoError(t, err)
	require.Equal(t, corr, gotCorr)
	m0 := kmsg.NewPtrMetadataResponse()
	m0.Version = 0
	require.NoError(t, m0.ReadFrom(body))
	require.Len(t, m0.Brokers, 1)
	require.NotEmpty(t, m0.Topics, "the offsets topic at least")

	// Produce v2 is advertised and removed: the connection closes, as
	// Kafka 4 closes it.
	pr := kmsg.NewPtrProduceRequest()
	pr.Version, pr.Acks, pr.TimeoutMillis = 2, 1, 1000
	raw.send(0, 2, false, pr.AppendTo(nil))
	_, _, err = raw.recv()
	require.ErrorIs(t, err, io.EOF)

	// So does Fetch v3, and a key the broker does not serve (AddPartitionsToTxn, 24).
	raw = dialRaw(t, p.addr)
	raw.send(1, 3, false, []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	_, _, err = raw.recv()
	require.ErrorIs(t, err, io.EOF)
	raw = dialRaw(t, p.addr)
	raw.send(24, 3, false, []byte{0, 0, 0, 0, 0})
	_, _, err = raw.recv()
	require.ErrorIs(t, err, io.EOF)
}

// TestTopicAdmin checks CreateTopics (configs, validation, validate-only),
// Metadata (internal topic, topic IDs, auto-creation), DescribeConfigs,
// DeleteTopics by name and by ID, and what the internal offsets topic
// refuses.
func TestTopicAdmin(t *testing.T) {
	p := startBroker(t, &Config{DefaultPartitions: 2})
	cl := p.client(t)
	ctx := t.Context()

	create := kmsg.NewPtrCreateTopicsRequest()
	add := func(name string, partitions int32, configs ...string) {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, -1
		for i := 0; i < len(configs); i += 2 {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name, c.Value = configs[i], &configs[i+1]
			rt.Configs = append(rt.Configs, c)
		}
		create.Topics = append(create.Topics, rt)
	}
	add("logs", 4, "cleanup.policy", "compact,delete", "retention.ms", "3600000", "message.timestamp.type", "LogAppendTime", "min.insync.replicas", "2")
	add("defaults", -1)
	add("bad-config", 1, "retention.ms", "soon")
	add("unknown-config", 1, "flush.messagez", "1")
	add("bad name!", 1)
	add("no-partitions", 0)
	add("twice", 1)
	add("twice", 1)
	add(offsetsTopic, 1)
	cresp, err := create.RequestWith(ctx, cl)
	require.NoError(t, err)
	codes := map[string]int16{}
	for _, rt := range cresp.Topics {
		codes[rt.Topic] = rt.ErrorCode
	}
	require.Equal(t, map[string]int16{
		"logs": 0, "defaults": 0,
		"bad-config": kerr.InvalidConfig.Code, "unknown-config": kerr.InvalidConfig.Code,
		"bad name!": kerr.InvalidTopicException.Code, "no-partitions": kerr.InvalidPartitions.Code,
		"twice": kerr.InvalidRequest.Code, offsetsTopic: kerr.TopicAlreadyExists.Code,
	}, codes)
	logs := cresp.Topics[0]
	require.Equal(t, int32(4), logs.NumPartitions)
	require.Equal(t, int16(1), logs.ReplicationFactor)
	require.NotEqual(t, uuid.UUID{}, uuid.UUID(logs.TopicID))
	require.Equal(t, int32(2), cresp.Topics[1].NumPartitions, "-1 partitions: the broker's -partitions")
	cfgs := map[string]string{}
	for _, c := range logs.Configs {
		cfgs[c.Name] = *c.Value
	}
	require.Equal(t, "compact,delete", cfgs["cleanup.policy"])
	require.Equal(t, "3600000", cfgs["retention.ms"])
	require.Equal(t, "LogAppendTime", cfgs["message.timestamp.type"])

	// Validate-only creates nothing.
	create = kmsg.NewPtrCreateTopicsRequest()
	create.ValidateOnly = true
	add("validated", 3)
	add("logs", 3)
	cresp, err = create.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Equal(t, int16(0), cresp.Topics[0].ErrorCode)
	require.Equal(t, kerr.TopicAlreadyExists.Code, cresp.Topics[1].ErrorCode)

	// Metadata of every topic: the internal one too, marked.
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Len(t, meta.Brokers, 1)
	require.Equal(t, p.addr, net.JoinHostPort(meta.Brokers[0].Host, itoa(meta.Brokers[0].Port)))
	names := map[string]kmsg.MetadataResponseTopic{}
	for _, mt := range meta.Topics {
		names[*mt.Topic] = mt
	}
	require.Len(t, names, 4)
	require.True(t, names[configsTopic].IsInternal)
	require.True(t, names[offsetsTopic].IsInternal)
	require.False(t, names["logs"].IsInternal)
	require.Len(t, names["logs"].Partitions, 4)
	require.Equal(t, logs.TopicID, names["logs"].TopicID)
	for _, mp := range names["logs"].Partitions {
		require.Equal(t, int32(0), mp.Leader)
		require.Equal(t, []int32{0}, mp.ISR)
	}

	// Auto-creation only when the request allows it.
	metaFor := func(topic string, auto bool) kmsg.MetadataResponseTopic {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = &topic
		req.Topics, req.AllowAutoTopicCreation = append(req.Topics, rt), auto
		resp, err := req.RequestWith(ctx, cl)
		require.NoError(t, err)
		return resp.Topics[0]
	}
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, metaFor("auto", false).ErrorCode)
	auto := metaFor("auto", true)
	require.Equal(t, int16(0), auto.ErrorCode)
	require.Len(t, auto.Partitions, 2)

	// DescribeConfigs of a topic and of the broker.
	dreq := kmsg.NewPtrDescribeConfigsRequest()
	for _, r := range []struct {
		typ  kmsg.ConfigResourceType
		name string
	}{{kmsg.ConfigResourceTypeTopic, "logs"}, {kmsg.ConfigResourceTypeTopic, "defaults"}, {kmsg.ConfigResourceTypeTopic, "missing"}, {kmsg.ConfigResourceTypeBroker, "0"}} {
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = r.typ, r.name
		dreq.Resources = append(dreq.Resources, rr)
	}
	dresp, err := dreq.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Len(t, dresp.Resources, 4)
	described := func(name string) map[string]string { // the client may reorder the resources
		m := map[string]string{}
		for _, r := range dresp.Resources {
			if r.ResourceName != name {
				continue
			}
			m["error"] = fmt.Sprint(kerr.ErrorForCode(r.ErrorCode))
			for _, c := range r.Configs {
				m[c.Name] = *c.Value + "/" + c.Source.String()
			}
		}
		return m
	}
	require.Equal(t, "compact,delete/DYNAMIC_TOPIC_CONFIG", described("logs")["cleanup.policy"])
	require.Equal(t, "3600000/DYNAMIC_TOPIC_CONFIG", described("logs")["retention.ms"])
	require.Equal(t, "delete/DEFAULT_CONFIG", described("defaults")["cleanup.policy"])
	require.Equal(t, "604800000/DEFAULT_CONFIG", described("defaults")["retention.ms"])
	require.Equal(t, "1048588/DEFAULT_CONFIG", described("defaults")["max.message.bytes"])
	require.Equal(t, fmt.Sprint(kerr.UnknownTopicOrPartition), described("missing")["error"])
	require.Equal(t, "2/STATIC_BROKER_CONFIG", described("0")["num.partitions"])

	// The offsets topic takes no writes from clients.
	prod := p.client(t, kgo.DefaultProduceTopic(offsetsTopic))
	err = prod.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte("v")}).FirstErr()
	require.ErrorIs(t, err, kerr.InvalidTopicException)

	// LogAppendTime: the broker's clock stamps the records.
	before := time.Now().Add(-time.Second)
	lat := p.client(t, kgo.DefaultProduceTopic("logs"))
	old := &kgo.Record{Key: []byte("k"), Value: []byte("v"), Timestamp: time.Unix(1000, 0)}
	require.NoError(t, lat.ProduceSync(ctx, old).FirstErr())
	rs := kafkatest.ConsumeAll(t, p.addr, "logs", 1)
	require.Equal(t, int8(1), rs[0].Attrs.TimestampType(), "LogAppendTime")
	require.True(t, rs[0].Timestamp.After(before), "stamped %v", rs[0].Timestamp)

	// A transactional producer gets its ID, unless its timeout is
	// beyond transaction.max.timeout.ms.
	ireq := kmsg.NewPtrInitProducerIDRequest()
	txn := "txn"
	ireq.TransactionalID, ireq.TransactionTimeoutMillis = &txn, 16*60*1000
	iresp, err := ireq.RequestWith(ctx, cl.SeedBrokers()[0])
	require.NoError(t, err)
	require.Equal(t, kerr.InvalidTransactionTimeout.Code, iresp.ErrorCode)
	ireq.TransactionTimeoutMillis = 60_000
	iresp, err = ireq.RequestWith(ctx, cl.SeedBrokers()[0])
	require.NoError(t, err)
	require.NoError(t, kerr.ErrorForCode(iresp.ErrorCode))
	require.GreaterOrEqual(t, iresp.ProducerID, int64(0))

	// FindCoordinator: this broker.
	freq := kmsg.NewPtrFindCoordinatorRequest()
	freq.CoordinatorKey = "g"
	fresp, err := freq.RequestWith(ctx, cl.SeedBrokers()[0])
	require.NoError(t, err)
	require.NoError(t, kerr.ErrorForCode(fresp.ErrorCode))
	require.Equal(t, p.addr, net.JoinHostPort(fresp.Host, itoa(fresp.Port)))

	// Offsets committed outside a group (generation -1), to a topic that
	// is deleted below, and to one that does not exist.
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation = "admin", -1
	for _, topic := range []string{"defaults", "nope"} {
		ct := kmsg.NewOffsetCommitRequestTopic()
		ct.Topic = topic
		cp := kmsg.NewOffsetCommitRequestTopicPartition()
		cp.Partition, cp.Offset = 1, 42
		ct.Partitions = append(ct.Partitions, cp)
		commit.Topics = append(commit.Topics, ct)
	}
	cm, err := commit.RequestWith(ctx, cl.SeedBrokers()[0])
	require.NoError(t, err)
	require.Equal(t, int16(0), cm.Topics[0].Partitions[0].ErrorCode)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, cm.Topics[1].Partitions[0].ErrorCode)
	committed := func() []string {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = "admin"
		resp, err := req.RequestWith(ctx, cl)
		require.NoError(t, err)
		var out []string
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				out = append(out, fmt.Sprintf("%s-%d:%d", rt.Topic, rp.Partition, rp.Offset))
			}
		}
		return out
	}
	require.Equal(t, []string{"defaults-1:42"}, committed())

	// DeleteTopics by name and by ID; the offsets topic stays. The
	// deleted topics' committed offsets go.

	del := kmsg.NewPtrDeleteTopicsRequest()
	name := "defaults"
	internal := offsetsTopic
	del.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: &name}, {TopicID: logs.TopicID}, {Topic: &internal}, {TopicID: uuid.New()}}
	delResp, err := del.RequestWith(ctx, cl.SeedBrokers()[0])
	require.NoError(t, err)
	var delCodes []int16
	for _, rt := range delResp.Topics {
		delCodes = append(delCodes, rt.ErrorCode)
	}
	require.Equal(t, []int16{0, 0, kerr.InvalidRequest.Code, kerr.UnknownTopicID.Code}, delCodes)
	require.Equal(t, "logs", *delResp.Topics[1].Topic)
	meta, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	require.NoError(t, err)
	var left []string
	for _, mt := range meta.Topics {
		left = append(left, *mt.Topic)
	}
	require.ElementsMatch(t, []string{offsetsTopic, configsTopic, "auto"}, left)
	require.Empty(t, committed())
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }
