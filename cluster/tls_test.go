package cluster_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"net/url"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/diskless-go/diskless/cluster"
	"github.com/diskless-go/diskless/cluster/clustertest"
)

// testCA is a cluster CA made by the test, which issues the brokers'
// certificates.
type testCA struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	pool   *x509.CertPool
	serial atomic.Int64
}

func newTestCA(t testing.TB, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	ca := &testCA{cert: cert, key: key, pool: x509.NewCertPool()}
	ca.pool.AddCert(cert)
	ca.serial.Store(1)
	return ca
}

// issue returns a certificate of the CA, for both ends of a connection,
// with these URI SANs.
func (ca *testCA) issue(t testing.TB, uris ...*url.URL) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial.Add(1)), Subject: pkix.Name{CommonName: "broker"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		URIs:        uris,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// node is the TLS config of broker id: its certificate, and the CA.
func (ca *testCA) node(t testing.TB, id int32) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{ca.issue(t, cluster.NodeURI(id))}, RootCAs: ca.pool}
}

// withCert is a TLS config that trusts ca and presents cert whatever it
// is: a rogue peer's (NewTCP checks Certificates, not what the callbacks
// return).
func withCert(ca *testCA, cert tls.Certificate) *tls.Config {
	return &tls.Config{
		RootCAs:              ca.pool,
		GetCertificate:       func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &cert, nil },
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil },
	}
}

// TestTCPMutualTLS runs the conformance suite over mutual TLS: every
// transport a broker of one CA, with a node ID of its own.
func TestTCPMutualTLS(t *testing.T) {
	ca := newTestCA(t, "cluster CA")
	var next atomic.Int32
	clustertest.RunTransport(t, func(t *testing.T) cluster.Transport {
		tr, err := cluster.NewTCP(&cluster.TCPOptions{Logger: zaptest.NewLogger(t), TLS: ca.node(t, next.Add(1))})
		require.NoError(t, err)
		return tr
	})
}

func TestNodeID(t *testing.T) {
	ca := newTestCA(t, "cluster CA")
	parse := func(uris ...*url.URL) *x509.Certificate {
		c, err := x509.ParseCertificate(ca.issue(t, uris...).Certificate[0])
		require.NoError(t, err)
		return c
	}
	for _, id := range []int32{0, 1, 7, 1<<31 - 1} {
		got, err := cluster.NodeID(parse(cluster.NodeURI(id)))
		require.NoError(t, err)
		require.Equal(t, id, got)
	}
	require.Equal(t, "diskless-node:42", cluster.NodeURI(42).String())
	other, _ := url.Parse("spiffe://example.org/broker")
	got, err := cluster.NodeID(parse(other, cluster.NodeURI(3)))
	require.NoError(t, err, "other URI SANs are ignored")
	require.EqualValues(t, 3, got)
	for _, tc := range []struct {
		name string
		uris []*url.URL
	}{
		{"none", nil},
		{"another scheme only", []*url.URL{other}},
		{"two nodes", []*url.URL{cluster.NodeURI(1), cluster.NodeURI(2)}},
		{"negative", []*url.URL{{Scheme: cluster.NodeURIScheme, Opaque: "-1"}}},
		{"too large", []*url.URL{{Scheme: cluster.NodeURIScheme, Opaque: "2147483648"}}},
		{"leading zero", []*url.URL{{Scheme: cluster.NodeURIScheme, Opaque: "07"}}},
		{"sign", []*url.URL{{Scheme: cluster.NodeURIScheme, Opaque: "+7"}}},
		{"not a number", []*url.URL{{Scheme: cluster.NodeURIScheme, Opaque: "seven"}}},
		{"empty", []*url.URL{{Scheme: cluster.NodeURIScheme, Host: "7"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cluster.NodeID(parse(tc.uris...))
			require.ErrorIs(t, err, cluster.ErrPeerIdentity)
		})
	}
}

func TestNewTCPTLSOptions(t *testing.T) {
	ca := newTestCA(t, "cluster CA")
	good := ca.node(t, 1)
	for _, tc := range []struct {
		name  string
		mod   func(c *tls.Config)
		field string
	}{
		{"no CA", func(c *tls.Config) { c.RootCAs = nil }, "no CA"},
		{"no certificate", func(c *tls.Config) { c.Certificates = nil }, "no certificate"},
		{"skip verify", func(c *tls.Config) { c.InsecureSkipVerify = true }, "InsecureSkipVerify"},
		{"no node identity", func(c *tls.Config) { c.Certificates = []tls.Certificate{ca.issue(t)} }, "Certificates[0]"},
		{"empty certificate", func(c *tls.Config) { c.Certificates = []tls.Certificate{{}} }, "Certificates[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good.Clone()
			tc.mod(c)
			_, err := cluster.NewTCP(&cluster.TCPOptions{TLS: c})
			require.ErrorContains(t, err, tc.field)
		})
	}
	_, err := cluster.NewTCP(&cluster.TCPOptions{TLS: good, HandshakeTimeout: -1})
	require.ErrorContains(t, err, "HandshakeTimeout")
	// ClientCAs alone is the CA of both ends.
	c := good.Clone()
	c.RootCAs, c.ClientCAs = nil, ca.pool
	tr, err := cluster.NewTCP(&cluster.TCPOptions{TLS: c})
	require.NoError(t, err)
	require.NoError(t, tr.Close())
}

// TestTCPRoguePeers: a Server with TLS serves only brokers with a
// certificate of the cluster CA that names a node, and tells the Handler
// which; a Call with a callee reaches only that node. Every rogue peer
// uses the same transport code as a broker, and none of its calls
// reaches the Handler.
func TestTCPRoguePeers(t *testing.T) {
	ca := newTestCA(t, "cluster CA")
	other := newTestCA(t, "another CA")
	type served struct {
		caller int32
		ok     bool
	}
	calls := make(chan served, 100)
	srvTr := newTCPWith(t, cluster.TCPOptions{TLS: ca.node(t, 1)})
	srv, err := srvTr.Listen("127.0.0.1:0", func(ctx context.Context, _ int, _ string, body []byte) func() []byte {
		id, ok := cluster.Caller(ctx)
		calls <- served{id, ok}
		return func() []byte { return body }
	})
	require.NoError(t, err)
	defer srv.Close()

	// A broker of the cluster: served, and the Handler knows who called.
	good := newTCPWith(t, cluster.TCPOptions{TLS: ca.node(t, 2)})
	b, err := await(t, good.Call(cluster.WithCallee(t.Context(), 1), srv.Addr(), 0, "m", []byte("hi")))
	require.NoError(t, err)
	require.Equal(t, []byte("hi"), b)
	require.Equal(t, served{2, true}, <-calls)
	// The same connection, a call meant for another node: not sent.
	_, err = await(t, good.Call(cluster.WithCallee(t.Context(), 3), srv.Addr(), 0, "m", []byte("hi")))
	require.ErrorIs(t, err, cluster.ErrPeerIdentity)

	noCert := &tls.Config{
		RootCAs:              ca.pool,
		GetCertificate:       func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &tls.Certificate{}, nil },
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &tls.Certificate{}, nil },
	}
	for _, tc := range []struct {
		name string
		tls  *tls.Config
	}{
		{"no client certificate", noCert},
		{"another CA", withCert(ca, other.issue(t, cluster.NodeURI(2)))},
		{"another CA trusted", withCert(other, other.issue(t, cluster.NodeURI(2)))},
		{"no node identity", withCert(ca, ca.issue(t))},
		{"two node identities", withCert(ca, ca.issue(t, cluster.NodeURI(2), cluster.NodeURI(3)))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rogue := newTCPWith(t, cluster.TCPOptions{TLS: tc.tls})
			for range 2 { // the second call dials again
				_, err := await(t, rogue.Call(t.Context(), srv.Addr(), 0, "commit", []byte("x")))
				require.Error(t, err)
			}
		})
	}

	// The client refuses a server of another CA, or whose certificate
	// names no node, or another node than the callee: nothing is sent.
	for _, tc := range []struct {
		name   string
		tls    *tls.Config
		callee int32
	}{
		{"server of another CA", withCert(other, other.issue(t, cluster.NodeURI(5))), 5},
		{"server without a node identity", withCert(ca, ca.issue(t)), -1},
		{"server of another node", ca.node(t, 6), 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			impostor := newTCPWith(t, cluster.TCPOptions{TLS: tc.tls})
			isrv, err := impostor.Listen("127.0.0.1:0", func(context.Context, int, string, []byte) func() []byte {
				calls <- served{-1, false}
				return nil
			})
			require.NoError(t, err)
			defer isrv.Close()
			ctx := t.Context()
			if tc.callee >= 0 {
				ctx = cluster.WithCallee(ctx, tc.callee)
			}
			_, err = await(t, good.Call(ctx, isrv.Addr(), 0, "m", nil))
			require.ErrorIs(t, err, cluster.ErrPeerIdentity)
		})
	}

	// Plaintext frames to a TLS listener: cut off, nothing served.
	nc, err := net.Dial("tcp", srv.Addr())
	require.NoError(t, err)
	defer nc.Close()
	req := []byte{0, 0, 0, 23, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 'm'}
	_, err = nc.Write(req)
	require.NoError(t, err)
	requireCutOff(t, nc)

	// Still served, and no rogue call reached a Handler.
	_, err = await(t, good.Call(t.Context(), srv.Addr(), 0, "m", nil))
	require.NoError(t, err)
	require.Equal(t, served{2, true}, <-calls)
	require.Empty(t, calls)
}

// TestTCPHandshakeTimeout: a peer that connects and never finishes its
// TLS handshake is cut off at the Server's HandshakeTimeout.
func TestTCPHandshakeTimeout(t *testing.T) {
	ca := newTestCA(t, "cluster CA")
	tr := newTCPWith(t, cluster.TCPOptions{TLS: ca.node(t, 1), HandshakeTimeout: 50 * time.Millisecond})
	srv, err := tr.Listen("127.0.0.1:0", echo)
	require.NoError(t, err)
	defer srv.Close()
	for _, hello := range [][]byte{nil, {0x16, 0x03, 0x01}} { // silent; a torn ClientHello
		nc, err := net.Dial("tcp", srv.Addr())
		require.NoError(t, err)
		_, err = nc.Write(hello)
		require.NoError(t, err)
		requireCutOff(t, nc)
		nc.Close()
	}
}

// requireCutOff waits for the server to close nc: its end of the stream
// (after an alert, perhaps), or a reset; not the bound's timeout.
func requireCutOff(t *testing.T, nc net.Conn) {
	t.Helper()
	require.NoError(t, nc.SetReadDeadline(time.Now().Add(bound)))
	_, err := io.Copy(io.Discard, nc)
	if err != nil {
		require.False(t, os.IsTimeout(err), "the server did not close the connection within %v", bound)
	}
}
