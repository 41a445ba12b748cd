package etcdtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// TLSFiles are the PEM files of a cluster started with Options.TLS, made
// by Start in a temporary folder of the test's (no key is ever kept in
// the repository).
type TLSFiles struct {
	// CA is the certificate of the CA that signed the members' and the
	// client's certificates: what a client trusts.
	CA string
	// Cert and Key are a client certificate (CN=etcdtest-client, which
	// names no etcd user) and its key: what a client presents, as the
	// members require.
	Cert, Key string
	// ServerCert and ServerKey are the members' certificate (for
	// 127.0.0.1) and its key.
	ServerCert, ServerKey string
}

// makePKI makes a CA, a server certificate for 127.0.0.1 and a client
// certificate, and writes them as PEM files into dir. The certificates
// are valid from an hour ago for a day.
func makePKI(dir string) (TLSFiles, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return TLSFiles{}, err
	}
	now := time.Now() // real time: certificates that a real etcd checks
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "etcdtest CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return TLSFiles{}, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return TLSFiles{}, err
	}
	f := TLSFiles{CA: filepath.Join(dir, "ca.pem")}
	if err := writePEM(f.CA, "CERTIFICATE", caDER); err != nil {
		return TLSFiles{}, err
	}
	issue := func(name string, tmpl *x509.Certificate) (cert, key string, err error) {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return "", "", err
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			return "", "", err
		}
		keyDER, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			return "", "", err
		}
		cert, key = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
		if err := writePEM(cert, "CERTIFICATE", der); err != nil {
			return "", "", err
		}
		return cert, key, writePEM(key, "EC PRIVATE KEY", keyDER)
	}
	// The members' certificate also serves as a client's: etcd's gateway
	// dials its own member with it.
	f.ServerCert, f.ServerKey, err = issue("server", &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	})
	if err != nil {
		return TLSFiles{}, err
	}
	f.Cert, f.Key, err = issue("client", &x509.Certificate{
		SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "etcdtest-client"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return TLSFiles{}, err
	}
	return f, nil
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

// ClientConfig returns the TLS configuration of a client of the cluster:
// it trusts the CA and, with client, presents the client certificate.
func (f TLSFiles) ClientConfig(client bool) (*tls.Config, error) {
	ca, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("etcdtest: no certificate in %s", f.CA)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if client {
		pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}
