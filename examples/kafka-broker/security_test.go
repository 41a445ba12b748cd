package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	kafkaplain "github.com/segmentio/kafka-go/sasl/plain"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"
	xscram "github.com/xdg-go/scram"

	"github.com/diskless-go/diskless/internal/kafkatest"
)

// testPKI is a CA and a server certificate for 127.0.0.1, made by the
// test and written as PEM files.
type testPKI struct {
	dir              string
	caFile           string
	certFile         string
	keyFile          string
	pool             *x509.CertPool
	caCert           *x509.Certificate
	caKey            *ecdsa.PrivateKey
	clientCertFile   string
	clientKeyFile    string
	clientCertDERKey tls.Certificate
}

// newTestPKI makes a CA, a server certificate for 127.0.0.1 and a client
// certificate (subject CN=client,O=diskless) in a folder of the test's.
func newTestPKI(t testing.TB) *testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "diskless test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	caCert, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	p := &testPKI{dir: dir, caCert: caCert, caKey: caKey, pool: x509.NewCertPool()}
	p.pool.AddCert(caCert)
	p.caFile = writePEM(t, dir, "ca.pem", "CERTIFICATE", caDER)
	issue := func(name string, tmpl *x509.Certificate) (certFile, keyFile string, pair tls.Certificate) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		require.NoError(t, err)
		keyDER, err := x509.MarshalECPrivateKey(key)
		require.NoError(t, err)
		certFile = writePEM(t, dir, name+".pem", "CERTIFICATE", der)
		keyFile = writePEM(t, dir, name+"-key.pem", "EC PRIVATE KEY", keyDER)
		pair, err = tls.LoadX509KeyPair(certFile, keyFile)
		require.NoError(t, err)
		return certFile, keyFile, pair
	}
	p.certFile, p.keyFile, _ = issue("server", &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	})
	p.clientCertFile, p.clientKeyFile, p.clientCertDERKey = issue("client", &x509.Certificate{
		SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "client", Organization: []string{"diskless"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	return p
}

func writePEM(t testing.TB, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
	return path
}

// clientTLS is the TLS config of a client that trusts the test CA.
func (p *testPKI) clientTLS() *tls.Config {
	return &tls.Config{RootCAs: p.pool, MinVersion: tls.VersionTLS12}
}

// saslSSLArgs are the flags of a SASL_SSL broker with the ACL authorizer
// and User:admin (password admin-secret) a super user.
func saslSSLArgs(p *testPKI) []string {
	return []string{
		"-tls-cert", p.certFile, "-tls-key", p.keyFile,
		"-sasl-mechanisms", "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"-scram-bootstrap", "SCRAM-SHA-512=[name=admin,password=admin-secret]",
		"-scram-bootstrap", "SCRAM-SHA-256=[name=admin,password=admin-secret]",
		"-authorizer", "acl", "-super-users", "User:admin",
		"-group-initial-rebalance-delay", "100ms",
	}
}

// franzSCRAM is a franz-go client of addrs over TLS with SCRAM-SHA-512.
func franzSCRAM(t *testing.T, p *testPKI, addrs []string, user, pass string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(addrs...), kgo.DialTLSConfig(p.clientTLS()),
		kgo.SASL(kscram.Auth{User: user, Pass: pass}.AsSha512Mechanism()),
	}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// grantAlice makes user alice (password alice-secret, both SCRAM
// mechanisms) and gives her the topics and groups that start with "sec-"
// and producer IDs: everything the clients below do.
func grantAlice(t *testing.T, admin *kadm.Client) {
	t.Helper()
	ctx := t.Context()
	// One request a mechanism: Kafka refuses a user named twice in one.
	for _, m := range []kadm.ScramMechanism{kadm.ScramSha256, kadm.ScramSha512} {
		res, err := admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: m, Iterations: 4096, Password: "alice-secret"}})
		require.NoError(t, err)
		require.NoError(t, res.Error())
	}
	acls := kadm.NewACLs().Allow("User:alice").AllowHosts("*").
		Topics("sec-").Groups("sec-").ResourcePatternType(kadm.ACLPatternPrefixed).
		Operations(kadm.OpAll)
	created, err := admin.CreateACLs(ctx, acls)
	require.NoError(t, err)
	for _, c := range created {
		require.NoError(t, c.Err)
	}
	idem := kadm.NewACLs().Allow("User:alice").AllowHosts("*").Clusters().Operations(kadm.OpIdempotentWrite, kadm.OpCreate)
	created, err = admin.CreateACLs(ctx, idem)
	require.NoError(t, err)
	for _, c := range created {
		require.NoError(t, c.Err)
	}
}

// TestSecurityClients: one broker process with SASL_SSL and the ACL
// authorizer. franz-go (SCRAM-SHA-512 and -256, PLAIN), sarama
// (SCRAM-SHA-512 over TLS) and segmentio/kafka-go (PLAIN over TLS)
// produce, consume in a group and run admin calls as an allowed user;
// the same calls as a user no ACL names get Kafka's authorization errors;
// a wrong password, a client without SASL and a plaintext client all
// fail.
func TestSecurityClients(t *testing.T) {
	pki := newTestPKI(t)
	b := startBroker(t, saslSSLArgs(pki)...)
	addrs := []string{b.addr}
	ctx := t.Context()
	admin := kadm.NewClient(franzSCRAM(t, pki, addrs, "admin", "admin-secret"))
	grantAlice(t, admin)
	res, err := admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "bob-secret"}})
	require.NoError(t, err)
	require.NoError(t, res.Error())
	_, err = admin.CreateTopic(ctx, 2, 1, nil, "sec-orders")
	require.NoError(t, err)

	t.Run("franz-go", func(t *testing.T) {
		for _, mech := range []string{"SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"} {
			var m kgo.Opt
			switch mech {
			case "SCRAM-SHA-512":
				m = kgo.SASL(kscram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism())
			case "SCRAM-SHA-256":
				m = kgo.SASL(kscram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism())
			default:
				m = kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism())
			}
			cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DialTLSConfig(pki.clientTLS()), m,
				kgo.ConsumerGroup("sec-franz-"+mech), kgo.ConsumeTopics("sec-orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			require.NoError(t, err)
			v := "franz " + mech
			require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "sec-orders", Value: []byte(v)}).FirstErr(), mech)
			require.True(t, consumeUntil(t, cl, v), "%s consumed its record", mech)
			require.NoError(t, cl.CommitUncommittedOffsets(ctx))
			groups, err := kadm.NewClient(cl).DescribeGroups(ctx, "sec-franz-"+mech)
			require.NoError(t, err)
			require.NoError(t, groups.Error())
			cl.Close()
		}
	})

	t.Run("sarama", func(t *testing.T) {
		c := saramaSCRAM(pki, "alice", "alice-secret")
		prod, err := sarama.NewSyncProducer(addrs, c)
		require.NoError(t, err)
		_, _, err = prod.SendMessage(&sarama.ProducerMessage{Topic: "sec-orders", Value: sarama.StringEncoder("sarama")})
		require.NoError(t, err)
		require.NoError(t, prod.Close())
		cg, err := sarama.NewConsumerGroup(addrs, "sec-sarama", c)
		require.NoError(t, err)
		got := make(chan string, 100)
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- cg.Consume(cctx, []string{"sec-orders"}, saramaCollector(got)) }()
		waitValue(t, got, "sarama")
		cancel()
		<-done
		require.NoError(t, cg.Close())
		ca, err := sarama.NewClusterAdmin(addrs, c)
		require.NoError(t, err)
		topics, err := ca.DescribeTopics([]string{"sec-orders"})
		require.NoError(t, err)
		require.Equal(t, sarama.ErrNoError, topics[0].Err)
		groups, err := ca.DescribeConsumerGroups([]string{"sec-sarama"})
		require.NoError(t, err)
		require.Equal(t, sarama.ErrNoError, groups[0].Err)
		require.NoError(t, ca.Close())

		// bob has no ACL: his produce is TOPIC_AUTHORIZATION_FAILED.
		denied, err := sarama.NewSyncProducer(addrs, saramaSCRAM(pki, "bob", "bob-secret"))
		require.NoError(t, err)
		_, _, err = denied.SendMessage(&sarama.ProducerMessage{Topic: "sec-orders", Value: sarama.StringEncoder("no")})
		require.ErrorIs(t, err, sarama.ErrTopicAuthorizationFailed)
		require.NoError(t, denied.Close())
	})

	t.Run("kafka-go", func(t *testing.T) {
		transport := &kafka.Transport{TLS: pki.clientTLS(), SASL: kafkaplain.Mechanism{Username: "alice", Password: "alice-secret"}}
		defer transport.CloseIdleConnections()
		w := &kafka.Writer{Addr: kafka.TCP(addrs...), Topic: "sec-orders", RequiredAcks: kafka.RequireAll, Transport: transport, BatchTimeout: 5 * time.Millisecond}
		require.NoError(t, w.WriteMessages(ctx, kafka.Message{Value: []byte("kafka-go")}))
		require.NoError(t, w.Close())
		dialer := &kafka.Dialer{Timeout: 10 * time.Second, TLS: pki.clientTLS(), SASLMechanism: kafkaplain.Mechanism{Username: "alice", Password: "alice-secret"}}
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: addrs, GroupID: "sec-kafka-go", Topic: "sec-orders", Dialer: dialer,
			MaxWait: 100 * time.Millisecond, StartOffset: kafka.FirstOffset, HeartbeatInterval: 250 * time.Millisecond})
		rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		found := false
		for !found {
			m, err := r.FetchMessage(rctx)
			require.NoError(t, err)
			require.NoError(t, r.CommitMessages(rctx, m))
			found = string(m.Value) == "kafka-go"
		}
		require.NoError(t, r.Close())
		kc := &kafka.Client{Addr: kafka.TCP(addrs...), Transport: transport}
		meta, err := kc.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{"sec-orders"}})
		require.NoError(t, err)
		require.Len(t, meta.Topics, 1)
		require.NoError(t, meta.Topics[0].Error)
		offsets, err := kc.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: "sec-kafka-go", Topics: map[string][]int{"sec-orders": {0, 1}}})
		require.NoError(t, err)
		require.NoError(t, offsets.Error)

		// bob may see the topic, not write it: kafka-go's writer reads
		// the topics from Metadata for all of them, in which Kafka (and
		// this broker) leaves out those the principal may not describe,
		// and would report the topic unknown.
		describe := kadm.NewACLs().Allow("User:bob").AllowHosts("*").Topics("sec-orders").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpDescribe)
		created, err := admin.CreateACLs(ctx, describe)
		require.NoError(t, err)
		require.NoError(t, created[0].Err)
		bobT := &kafka.Transport{TLS: pki.clientTLS(), SASL: kafkaplain.Mechanism{Username: "bob", Password: "bob-secret"}}
		defer bobT.CloseIdleConnections()
		bw := &kafka.Writer{Addr: kafka.TCP(addrs...), Topic: "sec-orders", RequiredAcks: kafka.RequireAll, Transport: bobT, BatchTimeout: 5 * time.Millisecond}
		err = bw.WriteMessages(ctx, kafka.Message{Value: []byte("no")})
		var werrs kafka.WriteErrors
		require.ErrorAs(t, err, &werrs)
		require.ErrorIs(t, werrs[0], kafka.TopicAuthorizationFailed)
		require.NoError(t, bw.Close())
	})

	t.Run("denied", func(t *testing.T) {
		bob := franzSCRAM(t, pki, addrs, "bob", "bob-secret", kgo.RequestRetries(0), kgo.DisableIdempotentWrite())
		err := bob.ProduceSync(ctx, &kgo.Record{Topic: "sec-orders", Value: []byte("no")}).FirstErr()
		require.ErrorIs(t, err, kerr.TopicAuthorizationFailed)
		_, err = kadm.NewClient(bob).CreateTopic(ctx, 1, 1, nil, "bob-topic")
		require.ErrorIs(t, err, kerr.TopicAuthorizationFailed)
		offsets, err := kadm.NewClient(bob).FetchOffsets(ctx, "sec-franz-PLAIN")
		if err == nil {
			err = offsets.Error()
		}
		require.ErrorIs(t, err, kerr.GroupAuthorizationFailed)
		describe := kmsg.NewPtrDescribeACLsRequest()
		describe.ResourceType, describe.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
		describe.Operation, describe.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		described, err := describe.RequestWith(ctx, bob)
		require.NoError(t, err)
		require.Equal(t, kerr.ClusterAuthorizationFailed.Code, described.ErrorCode)
		// An idempotent producer without IDEMPOTENT_WRITE nor WRITE on any topic.
		idem := franzSCRAM(t, pki, addrs, "bob", "bob-secret", kgo.RequestRetries(0))
		err = idem.ProduceSync(ctx, &kgo.Record{Topic: "sec-orders", Value: []byte("no")}).FirstErr()
		require.ErrorIs(t, err, kerr.ClusterAuthorizationFailed)
	})

	t.Run("refused", func(t *testing.T) {
		fail := func(name string, opts ...kgo.Opt) {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...), kgo.RequestRetries(0), kgo.RetryTimeout(2 * time.Second)}, opts...)...)
			require.NoError(t, err)
			defer cl.Close()
			require.Error(t, cl.Ping(cctx), name)
		}
		fail("wrong password", kgo.DialTLSConfig(pki.clientTLS()), kgo.SASL(kscram.Auth{User: "alice", Pass: "wrong"}.AsSha512Mechanism()))
		fail("unknown user", kgo.DialTLSConfig(pki.clientTLS()), kgo.SASL(plain.Auth{User: "mallory", Pass: "x"}.AsMechanism()))
		fail("no SASL on a SASL port", kgo.DialTLSConfig(pki.clientTLS()))
		fail("plaintext on a TLS port", kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()))
	})
}

// consumeUntil polls cl until it has the record of value v.
func consumeUntil(t *testing.T, cl *kgo.Client, v string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.DeadlineExceeded) && !errors.Is(e.Err, context.Canceled) {
				t.Fatalf("consuming: %v", e.Err)
			}
		}
		found := false
		fs.EachRecord(func(r *kgo.Record) { found = found || string(r.Value) == v })
		if found {
			return true
		}
	}
	return false
}

// saramaSCRAM is a sarama config for SCRAM-SHA-512 over TLS.
func saramaSCRAM(p *testPKI, user, pass string) *sarama.Config {
	c := sarama.NewConfig()
	c.Version = sarama.V3_6_0_0
	c.Net.TLS.Enable, c.Net.TLS.Config = true, p.clientTLS()
	c.Net.SASL.Enable, c.Net.SASL.Mechanism = true, sarama.SASLTypeSCRAMSHA512
	c.Net.SASL.User, c.Net.SASL.Password = user, pass
	c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &kafkatest.SaramaSCRAM{Hash: xscram.SHA512} }
	c.Producer.Return.Successes = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Retry.Max = 0
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	return c
}

// saramaCollector sends every consumed value to out and marks it.
type saramaCollector chan string

func (saramaCollector) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (saramaCollector) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (c saramaCollector) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		select {
		case c <- string(m.Value):
		default:
		}
		sess.MarkMessage(m, "")
	}
	return nil
}

// waitValue waits for v on got.
func waitValue(t *testing.T, got <-chan string, v string) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case g := <-got:
			if g == v {
				return
			}
		case <-deadline:
			t.Fatalf("%q was not consumed within 60 s", v)
		}
	}
}

// TestSecurityCluster: users and ACLs created through one node of a
// three-node cluster take effect on the other two (each checked until it
// does), and both survive the restart of every node.
func TestSecurityCluster(t *testing.T) {
	pki := newTestPKI(t)
	c := startClusterWith(t, 3, nil, []kgo.Opt{kgo.DialTLSConfig(pki.clientTLS()), kgo.SASL(kscram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism())},
		saslSSLArgs(pki)...)
	ctx := t.Context()
	admin := kadm.NewClient(franzSCRAM(t, pki, []string{c.procs[0].addr}, "admin", "admin-secret"))
	grantAlice(t, admin)
	_, err := admin.CreateTopic(ctx, 3, 1, nil, "sec-cluster")
	require.NoError(t, err)

	works := func(i int) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.procs[i].addr), kgo.DialTLSConfig(pki.clientTLS()),
			kgo.SASL(kscram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()), kgo.RequestRetries(0), kgo.RetryTimeout(3*time.Second))
		if err != nil {
			return err
		}
		defer cl.Close()
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return cl.ProduceSync(pctx, &kgo.Record{Topic: "sec-cluster", Value: []byte(fmt.Sprintf("via %d", i))}).FirstErr()
	}
	everyNode := func(when string) {
		for i := range c.procs {
			require.Eventually(t, func() bool { return works(i) == nil }, 30*time.Second, 100*time.Millisecond,
				"%s: alice produces through node %d (last error: %v)", when, i, works(i))
		}
	}
	everyNode("created on node 0")

	for i, p := range c.procs {
		p.stop()
		c.procs[i] = p.restart()
		c.waitNodes(3)
	}
	everyNode("after every node restarted")

	// A denial made on node 2 is seen by node 0.
	deny := kadm.NewACLs().Deny("User:alice").DenyHosts("*").Topics("sec-cluster").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpWrite)
	admin2 := kadm.NewClient(franzSCRAM(t, pki, []string{c.procs[2].addr}, "admin", "admin-secret"))
	start := time.Now()
	_, err = admin2.CreateACLs(ctx, deny)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return errors.Is(works(0), kerr.TopicAuthorizationFailed) }, 30*time.Second, 10*time.Millisecond)
	// Measured, not asserted (the machine may be loaded): the servers
	// read the ACLs again every 250 ms, after their followers of shard 0
	// applied the change.
	t.Logf("a DENY created through node 2 was enforced by node 0 %v after the request", time.Since(start).Round(time.Millisecond))
}

// TestSecurityMutualTLS: with -tls-client-ca, a client's principal is
// User: and its certificate's subject (Kafka's default principal
// builder), which the ACLs name; a client without a certificate fails
// its handshake.
func TestSecurityMutualTLS(t *testing.T) {
	pki := newTestPKI(t)
	b := startBroker(t, "-tls-cert", pki.certFile, "-tls-key", pki.keyFile, "-tls-client-ca", pki.caFile,
		"-authorizer", "acl", "-super-users", "User:CN=client,O=diskless")
	ctx := t.Context()
	withCert := pki.clientTLS()
	withCert.Certificates = []tls.Certificate{pki.clientCertDERKey}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.DialTLSConfig(withCert))
	require.NoError(t, err)
	defer cl.Close()
	_, err = kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "mtls")
	require.NoError(t, err, "the certificate's principal is a super user")
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "mtls", Value: []byte("v")}).FirstErr())

	noCert, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.DialTLSConfig(pki.clientTLS()), kgo.RequestRetries(0))
	require.NoError(t, err)
	defer noCert.Close()
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.Error(t, noCert.Ping(pctx))
}

// TestACLMatrixProcess: the ACL matrix (kafkatest.ACLMatrix) against the
// broker process, over SASL_PLAINTEXT with PLAIN.
func TestACLMatrixProcess(t *testing.T) {
	b := startBroker(t, "-sasl-mechanisms", "PLAIN,SCRAM-SHA-512",
		"-scram-bootstrap", "SCRAM-SHA-512=[name=admin,password=admin-secret]",
		"-scram-bootstrap", "SCRAM-SHA-512=[name=alice,password=alice-secret]",
		"-authorizer", "acl", "-super-users", "User:admin")
	kafkatest.ACLMatrix(t, func(t *testing.T, user string, opts ...kgo.Opt) *kgo.Client {
		return b.client(t, append([]kgo.Opt{kgo.SASL(plain.Auth{User: user, Pass: user + "-secret"}.AsMechanism())}, opts...)...)
	})
}

// TestSecurityOAuthBearer: -sasl-mechanisms OAUTHBEARER with
// -oauthbearer-unsecured-jwt takes an unsecured JWT's sub as the
// principal (here a super user's); a token whose alg is not "none", or
// one expired, fails.
func TestSecurityOAuthBearer(t *testing.T) {
	b := startBroker(t, "-sasl-mechanisms", "OAUTHBEARER", "-oauthbearer-unsecured-jwt", "-authorizer", "acl", "-super-users", "User:svc")
	jwt := func(alg string, exp time.Time) string {
		enc := base64.RawURLEncoding.EncodeToString
		return enc([]byte(`{"alg":"`+alg+`"}`)) + "." + enc([]byte(fmt.Sprintf(`{"sub":"svc","exp":%d}`, exp.Unix()))) + "."
	}
	ctx := t.Context()
	cl := b.client(t, kgo.SASL(oauth.Auth{Token: jwt("none", time.Now().Add(time.Hour))}.AsMechanism()))
	_, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "oauth")
	require.NoError(t, err)
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "oauth", Value: []byte("v")}).FirstErr())
	for _, token := range []string{jwt("HS256", time.Now().Add(time.Hour)), jwt("none", time.Now().Add(-time.Hour))} {
		bad, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.SASL(oauth.Auth{Token: token}.AsMechanism()), kgo.RequestRetries(0))
		require.NoError(t, err)
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		require.Error(t, bad.Ping(pctx))
		cancel()
		bad.Close()
	}
}
