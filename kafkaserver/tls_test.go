package kafkaserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"io"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// testPKI is a CA made for one test, and what it signs: nothing is
// kept on disk.
type testPKI struct {
	t      testing.TB
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	pool   *x509.CertPool
	serial int64
}

func newTestPKI(t testing.TB) *testPKI {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &testPKI{t: t, ca: ca, caKey: key, pool: pool, serial: 1}
}

// issue signs a certificate for subject: a server's (for 127.0.0.1) or
// a client's.
func (p *testPKI) issue(subject pkix.Name, server bool) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(p.t, err)
	p.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial), Subject: subject,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	require.NoError(p.t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// serverTLS is a server's TLS config, requiring client certificates of
// the CA when requireClient.
func (p *testPKI) serverTLS(requireClient bool) *tls.Config {
	c := &tls.Config{Certificates: []tls.Certificate{p.issue(pkix.Name{CommonName: "broker"}, true)}, MinVersion: tls.VersionTLS12}
	if requireClient {
		c.ClientAuth, c.ClientCAs = tls.RequireAndVerifyClientCert, p.pool
	}
	return c
}

// clientTLS is a client's TLS config, with a certificate for subject
// unless it is nil.
func (p *testPKI) clientTLS(subject *pkix.Name) *tls.Config {
	c := &tls.Config{RootCAs: p.pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	if subject != nil {
		c.Certificates = []tls.Certificate{p.issue(*subject, false)}
	}
	return c
}

// principals returns the principals of the server's open connections.
func principals(s *Server) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for c := range s.mu.conns {
		out = append(out, c.principal())
	}
	return out
}

// rawAttr is an attribute with a value of any tag.
func rawAttr(oid asn1.ObjectIdentifier, tag int, value []byte) attributeTypeAndValue {
	v := asn1.RawValue{Class: asn1.ClassUniversal, Tag: tag, Bytes: value}
	full, err := asn1.Marshal(v)
	if err != nil {
		panic(err)
	}
	v.FullBytes = full
	return attributeTypeAndValue{Type: oid, Value: v}
}

// encodeName encodes relative distinguished names, each a SET of its
// attributes, as a certificate's subject.
func encodeName(t *testing.T, rdns ...[]attributeTypeAndValue) []byte {
	var seq []asn1.RawValue
	for _, rdn := range rdns {
		b, err := asn1.MarshalWithParams(rdn, "set")
		require.NoError(t, err)
		seq = append(seq, asn1.RawValue{FullBytes: b})
	}
	der, err := asn1.Marshal(seq)
	require.NoError(t, err)
	return der
}

// TestRFC2253 checks rfc2253 against the strings Java's
// X500Principal.getName() gives (and so Kafka's principals): reversed
// order, the RFC 2253 keywords only (others as the OID and the hex of
// the DER value), escapes, multi-valued RDNs, string types Java does not
// read as text.
func TestRFC2253(t *testing.T) {
	var (
		cn     = asn1.ObjectIdentifier{2, 5, 4, 3}
		uid    = asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 1}
		serial = asn1.ObjectIdentifier{2, 5, 4, 5}
		email  = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 1}
	)
	utf8s := func(oid asn1.ObjectIdentifier, s string) attributeTypeAndValue {
		return rawAttr(oid, asn1.TagUTF8String, []byte(s))
	}
	fromName := func(n pkix.Name) []byte {
		der, err := asn1.Marshal(n.ToRDNSequence())
		require.NoError(t, err)
		return der
	}
	for _, c := range []struct {
		name string
		der  []byte
		want string
	}{
		{"Kafka's example", fromName(pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"acme"}}), "CN=alice,OU=eng,O=acme"},
		{"every keyword Go writes", fromName(pkix.Name{Country: []string{"US"}, Province: []string{"CA"}, Locality: []string{"SF"}, StreetAddress: []string{"1 Main St"}, Organization: []string{"acme"}, CommonName: "bob"}),
			"CN=bob,O=acme,STREET=1 Main St,L=SF,ST=CA,C=US"},
		{"serialNumber has no RFC 2253 keyword", fromName(pkix.Name{CommonName: "c", SerialNumber: "1234"}), "2.5.4.5=#130431323334,CN=c"},
		{"emailAddress as the OID and hex", encodeName(t, []attributeTypeAndValue{utf8s(cn, "joe")}, []attributeTypeAndValue{rawAttr(email, asn1.TagIA5String, []byte("joe@example.com"))}),
			"1.2.840.113549.1.9.1=#160f6a6f65406578616d706c652e636f6d,CN=joe"},
		{"DC and UID", encodeName(t, []attributeTypeAndValue{rawAttr(asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 25}, asn1.TagIA5String, []byte("com"))}, []attributeTypeAndValue{utf8s(uid, "u1")}),
			"UID=u1,DC=com"},
		{"escapes", encodeName(t, []attributeTypeAndValue{utf8s(cn, `a,b+c=d<e>f#g;h"i\j`)}), `CN=a\,b\+c\=d\<e\>f\#g\;h\"i\\j`},
		{"leading and trailing spaces", encodeName(t, []attributeTypeAndValue{utf8s(cn, "  x y ")}), `CN=\ \ x y\ `},
		{"only spaces", encodeName(t, []attributeTypeAndValue{utf8s(cn, "  ")}), `CN=\ \ `},
		{"a leading #", encodeName(t, []attributeTypeAndValue{utf8s(cn, "#1")}), `CN=\#1`},
		{"NUL", encodeName(t, []attributeTypeAndValue{utf8s(cn, "a\x00b")}), `CN=a\00b`},
		{"non-ASCII as is", encodeName(t, []attributeTypeAndValue{utf8s(cn, "José")}), "CN=José"},
		{"multi-valued", encodeName(t, []attributeTypeAndValue{utf8s(cn, "x"), utf8s(uid, "y")}, []attributeTypeAndValue{utf8s(serial, "z")}),
			"2.5.4.5=#0c017a,CN=x+UID=y"},
		{"a keyword with a value that is not a string", encodeName(t, []attributeTypeAndValue{rawAttr(cn, asn1.TagInteger, []byte{5})}), "CN=#020105"},
		{"VisibleString is not text to Java", encodeName(t, []attributeTypeAndValue{rawAttr(cn, 26, []byte("v"))}), "CN=#1a0176"},
		{"BMPString's bytes read as UTF-8, as Java reads them", encodeName(t, []attributeTypeAndValue{rawAttr(cn, asn1.TagBMPString, []byte{0, 'a', 0, 'b'})}), `CN=\00a\00b`},
		{"empty", encodeName(t), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := rfc2253(c.der)
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
	for _, bad := range [][]byte{nil, {0x30}, {0x30, 0x02, 0x05, 0x00}, append(fromName(pkix.Name{CommonName: "x"}), 0)} {
		_, err := rfc2253(bad)
		require.Error(t, err, "%x", bad)
	}
}

// FuzzRFC2253: any subject either formats or errs, without panicking.
func FuzzRFC2253(f *testing.F) {
	for _, n := range []pkix.Name{{CommonName: "alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"acme"}}, {SerialNumber: "1", Country: []string{"US"}}} {
		der, _ := asn1.Marshal(n.ToRDNSequence())
		f.Add(der)
	}
	f.Add([]byte{0x30, 0x00})
	f.Fuzz(func(t *testing.T, der []byte) {
		s, err := rfc2253(der)
		if err != nil && s != "" {
			t.Fatalf("a name %q with the error %v", s, err)
		}
	})
}

// TestTLS: over TLS a franz-go client produces and consumes; a client
// certificate names the connection's principal; a plaintext client on
// the TLS port gets nothing back; when certificates are required a
// client without one fails its handshake; a client that does not finish
// its handshake within FrameTimeout is closed. Each failure is counted.
func TestTLS(t *testing.T) {
	pki := newTestPKI(t)
	t.Run("server only", func(t *testing.T) {
		p := startBroker(t, &Config{TLS: pki.serverTLS(false)})
		produceConsume(t, p.addr, "tls", kgo.DialTLSConfig(pki.clientTLS(nil)))
		require.Contains(t, principals(p.srv), Anonymous)

		// Plaintext on the TLS port: no Kafka answer, the connection
		// closes.
		nc, err := net.Dial("tcp", p.addr)
		require.NoError(t, err)
		defer nc.Close()
		require.False(t, gotAnswer(t, nc), "nothing back")
		waitFor(t, func() bool { return p.srv.stats.tlsFailed.Load() == 1 })
	})
	t.Run("client certificates", func(t *testing.T) {
		p := startBroker(t, &Config{TLS: pki.serverTLS(true)})
		alice := pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"acme"}}
		cl := p.client(t, kgo.DialTLSConfig(pki.clientTLS(&alice)))
		require.NoError(t, cl.Ping(t.Context()))
		require.Contains(t, principals(p.srv), "User:CN=alice,OU=eng,O=acme")

		// No certificate: the handshake fails.
		tc, err := tls.Dial("tcp", p.addr, pki.clientTLS(nil))
		if err == nil {
			defer tc.Close()
			_, err = tc.Read(make([]byte, 1)) // TLS 1.3: the server's refusal comes after the client's finish
		}
		require.Error(t, err)
		waitFor(t, func() bool { return p.srv.stats.tlsFailed.Load() == 1 })
	})
	t.Run("handshake timeout", func(t *testing.T) {
		p := startBroker(t, &Config{TLS: pki.serverTLS(false), FrameTimeout: 100 * time.Millisecond})
		nc, err := net.Dial("tcp", p.addr)
		require.NoError(t, err)
		defer nc.Close()
		require.NoError(t, nc.SetDeadline(time.Now().Add(30*time.Second)))
		_, err = nc.Read(make([]byte, 1))
		require.ErrorIs(t, err, io.EOF, "closed by the server")
		waitFor(t, func() bool { return p.srv.stats.tlsFailed.Load() == 1 }) // counted once the handshake returns, after the close
	})
}

// TestCheckTLS: a TLS config without a certificate is refused.
func TestCheckTLS(t *testing.T) {
	require.NoError(t, checkTLS(nil))
	require.Error(t, checkTLS(&tls.Config{}))
	require.NoError(t, checkTLS(newTestPKI(t).serverTLS(false)))
}

// waitFor waits up to 10 s for cond.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("the condition did not come true within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
