package diskless

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless/cluster"
	"github.com/diskless-go/diskless/cluster/etcdcluster"
	"github.com/diskless-go/diskless/internal/etcdtest"
	"github.com/diskless-go/diskless/kbatch"
)

// peerPKI is a cluster CA made by the test, and the brokers' peer TLS
// configs it issues.
type peerPKI struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newPeerPKI(t *testing.T) *peerPKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cluster CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	p := &peerPKI{cert: cert, key: key, pool: x509.NewCertPool()}
	p.pool.AddCert(cert)
	return p
}

// config is the PeerTLS of a broker whose certificate has these URI SANs.
func (p *peerPKI) config(t *testing.T, uris ...*url.URL) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	n, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	require.NoError(t, err)
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: n, Subject: pkix.Name{CommonName: "broker"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		URIs:        uris,
	}, p.cert, &key.PublicKey, p.key)
	require.NoError(t, err)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, RootCAs: p.pool}
}

// TestClusterPeerTLSConfig: Open checks that PeerTLS's certificate names
// this broker, and that it is not given beside a Transport.
func TestClusterPeerTLSConfig(t *testing.T) {
	pki := newPeerPKI(t)
	backend := &etcdcluster.Backend{Endpoints: []string{"127.0.0.1:1"}}
	for _, tc := range []struct {
		name string
		cc   ClusterConfig
		err  string
	}{
		{"this broker", ClusterConfig{PeerTLS: pki.config(t, cluster.NodeURI(3))}, ""},
		{"another broker", ClusterConfig{PeerTLS: pki.config(t, cluster.NodeURI(4))}, "names node 4, not this broker (Config.BrokerID 3)"},
		{"no node", ClusterConfig{PeerTLS: pki.config(t)}, "no diskless-node URI SAN"},
		{"with a Transport", ClusterConfig{PeerTLS: pki.config(t, cluster.NodeURI(3)), Transport: &cluster.Mem{}}, "brings its own"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cc.Backend = backend
			_, err := (&Config{BrokerID: 3, Cluster: &tc.cc}).resolved()
			if tc.err == "" {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, tc.err)
			}
		})
	}
}

// TestClusterPeerTLS: two brokers whose calls to each other are mutual
// TLS (PeerTLS) produce to one topic through both (one forwards its
// commits to the other) and neither warns of plaintext; a broker of a
// cluster without PeerTLS warns at Open.
func TestClusterPeerTLS(t *testing.T) {
	etcd := etcdtest.Start(t, nil)
	pki := newPeerPKI(t)
	bucket := memblob.OpenBucket(nil)
	t.Cleanup(func() { bucket.Close() })
	open := func(id int32, prefix string, peerTLS *tls.Config) (*Broker, *observer.ObservedLogs) {
		core, logs := observer.New(zapcore.WarnLevel)
		b, err := Open(t.Context(), &Config{
			Bucket: bucket, Prefix: prefix, BrokerID: id, Linger: 5 * time.Millisecond, DataDir: t.TempDir(),
			Logger: zap.New(zapcore.NewTee(zaptest.NewLogger(t).Named(fmt.Sprintf("broker-%d", id)).Core(), core)),
			Cluster: &ClusterConfig{Backend: &etcdcluster.Backend{Endpoints: etcd.Endpoints()}, Prefix: prefix, LeaseTTL: 2 * time.Second,
				PeerTLS: peerTLS},
		})
		require.NoError(t, err)
		t.Cleanup(func() { b.Close() })
		return b, logs
	}
	var brokers []*Broker
	for id := range int32(2) {
		b, logs := open(id, "tls/", pki.config(t, cluster.NodeURI(id)))
		require.Zero(t, logs.FilterMessageSnippet("plaintext").Len())
		brokers = append(brokers, b)
	}
	waitLeaders(t, brokers, 1)
	ctx := t.Context()
	_, err := brokers[1].CreateTopic(ctx, "t", TopicConfig{Partitions: 1})
	require.NoError(t, err)
	for bi, b := range brokers {
		resp, err := b.Produce(ctx, ProduceRequest{Acks: -1, Partitions: []ProducePartition{{Topic: "t", Records: batch(t, kbatch.CodecNone, bi*10, 2, -1, 0)}}})
		require.NoError(t, err)
		require.NoError(t, resp.Partitions[0].Err, "through broker %d", bi)
	}
	require.Len(t, fetchAll(t, brokers[0], "t", 0, 4), 4)

	_, logs := open(9, "plain/", nil)
	require.Equal(t, 1, logs.FilterMessageSnippet("plaintext and unauthenticated").Len())
}
