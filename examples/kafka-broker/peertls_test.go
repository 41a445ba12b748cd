package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/diskless-go/diskless/cluster"
	"github.com/diskless-go/diskless/internal/kafkatest"
)

// nodeCert issues node id's peer certificate from the test CA (URI SAN
// diskless-node:<id>, for both ends of a connection) and writes it and
// its key as PEM files.
func (p *testPKI) nodeCert(t testing.TB, id int32) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	now := time.Now()
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(100 + int64(id)), Subject: pkix.Name{CommonName: fmt.Sprintf("node %d", id)},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		URIs:        []*url.URL{cluster.NodeURI(id)},
	}, p.caCert, &key.PublicKey, p.caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	name := fmt.Sprintf("node-%d", id)
	return writePEM(t, p.dir, name+".pem", "CERTIFICATE", der), writePEM(t, p.dir, name+"-key.pem", "EC PRIVATE KEY", keyDER)
}

// TestClusterPeerTLS: three nodes whose calls to each other are mutual
// TLS (-peer-tls-*) take produce for every partition on every node (the
// nodes that do not lead the coordinator's shard forward their commits
// to the one that does) and serve every record from any node; a peer
// without a certificate is refused; no node warns of plaintext calls.
func TestClusterPeerTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, an S3 server and three broker processes")
	}
	pki := newTestPKI(t)
	peers := make([]string, 3)
	c := startClusterEach(t, 3, nil, nil, func(i int) []string {
		ln, err := net.Listen("tcp", "127.0.0.1:0") // a known peer port, for the rogue below
		require.NoError(t, err)
		peers[i] = ln.Addr().String()
		require.NoError(t, ln.Close())
		cert, key := pki.nodeCert(t, int32(i))
		return []string{"-peer-addr", peers[i], "-peer-tls-cert", cert, "-peer-tls-key", key, "-peer-tls-ca", pki.caFile}
	})
	cl := c.procs[0].client(t, kgo.SeedBrokers(c.addrs()...))
	kafkatest.CreateTopic(t, cl, "peertls", 3, nil)

	for i := range c.procs {
		kc := c.procs[i].client(t)
		for part := range int32(3) {
			require.Zero(t, produceTo(t, kc.Broker(int(c.nodeIDOf(i))), "peertls", part, oneBatch(t, fmt.Sprintf("%d/%d", i, part))),
				"produce through node %d, partition %d", i, part)
		}
	}
	cc := c.procs[2].client(t, kgo.ConsumeTopics("peertls"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[string]bool{}
	for len(got) < 9 {
		fs := cc.PollFetches(t.Context())
		require.NoError(t, fs.Err())
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Value)] = true })
	}
	for i := range 3 {
		for part := range 3 {
			require.True(t, got[fmt.Sprintf("%d/%d", i, part)], "record %d/%d", i, part)
		}
	}

	// A plaintext peer is refused by every node, before any call is read.
	rogue, err := cluster.NewTCP(nil)
	require.NoError(t, err)
	defer rogue.Close()
	for i, addr := range peers {
		_, err := rogue.Call(t.Context(), addr, 0, "commit", []byte("x"))()
		require.Error(t, err, "node %d served a plaintext call", i)
	}
	for i, p := range c.procs {
		require.Eventually(t, func() bool {
			b, err := os.ReadFile(p.log)
			return err == nil && strings.Contains(string(b), "cluster: peer refused")
		}, 10*time.Second, 10*time.Millisecond, "node %d logs the refusal", i)
		b, err := os.ReadFile(p.log)
		require.NoError(t, err)
		require.NotContains(t, string(b), "plaintext and unauthenticated", "node %d", i)
	}
}

// TestPeerTLSWrongNode: a node whose peer certificate names another node
// does not start, and says why.
func TestPeerTLSWrongNode(t *testing.T) {
	pki := newTestPKI(t)
	cert, key := pki.nodeCert(t, 1)
	err := run(t.Context(), []string{"-node-id", "0", "-addr", "127.0.0.1:0", "-etcd", "127.0.0.1:1", "-bucket", "s3://b", "-data", t.TempDir(),
		"-peer-tls-cert", cert, "-peer-tls-key", key, "-peer-tls-ca", pki.caFile}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "names node 1, not this broker")
	err = run(t.Context(), []string{"-node-id", "0", "-addr", "127.0.0.1:0", "-etcd", "127.0.0.1:1", "-bucket", "s3://b", "-data", t.TempDir(),
		"-peer-tls-cert", cert, "-peer-tls-key", key, "-peer-tls-ca", cert + ".missing"}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "-peer-tls-ca")
}
