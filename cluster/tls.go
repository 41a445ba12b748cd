package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"
)

// NodeURIScheme is the scheme of the URI SAN that names a broker in its
// peer certificate: "diskless-node:<id>", id the broker's node ID in
// decimal (see the package doc, "Security between brokers").
const NodeURIScheme = "diskless-node"

// DefaultHandshakeTimeout bounds a TCP Server's TLS handshake unless
// TCPOptions.HandshakeTimeout says otherwise.
const DefaultHandshakeTimeout = 10 * time.Second

// NodeURI returns the URI SAN that names node id in its peer
// certificate, diskless-node:<id>: put it in x509.Certificate.URIs when
// issuing the broker's certificate.
func NodeURI(id int32) *url.URL {
	return &url.URL{Scheme: NodeURIScheme, Opaque: strconv.FormatInt(int64(id), 10)}
}

// NodeID returns the node ID that cert names: its one URI SAN
// diskless-node:<id>, id a decimal in [0, 2^31) written without a sign or
// leading zeros. Other SANs are ignored. A certificate that names no
// node, or more than one, fails with ErrPeerIdentity.
func NodeID(cert *x509.Certificate) (int32, error) {
	id, found := int32(-1), false
	for _, u := range cert.URIs {
		if u.Scheme != NodeURIScheme {
			continue
		}
		if found {
			return -1, fmt.Errorf("%w: the certificate names more than one node", ErrPeerIdentity)
		}
		found = true
		n, err := strconv.ParseInt(u.Opaque, 10, 32)
		if err != nil || n < 0 || strconv.FormatInt(n, 10) != u.Opaque {
			return -1, fmt.Errorf("%w: %q is not %s:<node ID>", ErrPeerIdentity, u.String(), NodeURIScheme)
		}
		id = int32(n)
	}
	if !found {
		return -1, fmt.Errorf("%w: the certificate (subject %q) has no %s URI SAN", ErrPeerIdentity, cert.Subject.String(), NodeURIScheme)
	}
	return id, nil
}

type calleeKey struct{}

// WithCallee returns a ctx for a call meant for node id: a transport that
// can verify whom it reaches (TCP with TCPOptions.TLS) refuses to send
// the call to a broker whose certificate names another node, with
// ErrPeerIdentity. etcdcluster's Node.Forward sets it to the ID of the
// member it looked up; a transport without TLS cannot check it and
// ignores it.
func WithCallee(ctx context.Context, id int32) context.Context {
	return context.WithValue(ctx, calleeKey{}, id)
}

// Callee returns the node ID that WithCallee put in ctx, if any.
func Callee(ctx context.Context) (int32, bool) {
	id, ok := ctx.Value(calleeKey{}).(int32)
	return id, ok
}

type callerKey struct{}

// Caller returns the node ID of the broker whose call a Handler serves,
// from the ctx the Handler got, as that broker's certificate proved it:
// only a TCP transport with TCPOptions.TLS knows it (ok is false
// otherwise).
func Caller(ctx context.Context) (int32, bool) {
	id, ok := ctx.Value(callerKey{}).(int32)
	return id, ok
}

// peerTLS is a TCP transport's two sides of its TCPOptions.TLS.
type peerTLS struct {
	server, client *tls.Config
}

// newPeerTLS checks c and derives from it the configs of both ends of a
// connection, which check the rule of the package doc: the chain up to
// the cluster CA, and a node identity.
func newPeerTLS(c *tls.Config) (*peerTLS, error) {
	roots := c.RootCAs
	if roots == nil {
		roots = c.ClientCAs
	}
	switch {
	case roots == nil:
		return nil, errors.New("cluster: TCPOptions.TLS has no CA: set RootCAs to the cluster CA")
	case len(c.Certificates) == 0 && (c.GetCertificate == nil || c.GetClientCertificate == nil):
		return nil, errors.New("cluster: TCPOptions.TLS has no certificate: set Certificates (or both GetCertificate and GetClientCertificate)")
	case c.InsecureSkipVerify:
		return nil, errors.New("cluster: TCPOptions.TLS has InsecureSkipVerify: the transport verifies every peer, which it cannot turn off")
	}
	if len(c.Certificates) > 0 {
		leaf := c.Certificates[0].Leaf
		if leaf == nil {
			if len(c.Certificates[0].Certificate) == 0 {
				return nil, errors.New("cluster: TCPOptions.TLS.Certificates[0] is empty")
			}
			var err error
			if leaf, err = x509.ParseCertificate(c.Certificates[0].Certificate[0]); err != nil {
				return nil, fmt.Errorf("cluster: TCPOptions.TLS.Certificates[0]: %w", err)
			}
		}
		if _, err := NodeID(leaf); err != nil {
			return nil, fmt.Errorf("cluster: TCPOptions.TLS.Certificates[0]: %w", err)
		}
	}
	userVerify := c.VerifyConnection

	srv := c.Clone()
	srv.ClientAuth = tls.RequireAndVerifyClientCert
	if srv.ClientCAs == nil {
		srv.ClientCAs = roots
	}
	if srv.MinVersion == 0 {
		srv.MinVersion = tls.VersionTLS13
	}
	srv.VerifyConnection = func(cs tls.ConnectionState) error {
		// The chain was verified against ClientCAs (RequireAndVerifyClientCert).
		if len(cs.PeerCertificates) == 0 {
			return fmt.Errorf("%w: no client certificate", ErrPeerIdentity)
		}
		if _, err := NodeID(cs.PeerCertificates[0]); err != nil {
			return err
		}
		if userVerify != nil {
			return userVerify(cs)
		}
		return nil
	}

	cli := c.Clone()
	if cli.MinVersion == 0 {
		cli.MinVersion = tls.VersionTLS13
	}
	// A peer is known by its node ID, not by a host name: the standard
	// verification, which checks the name, is replaced by the same chain
	// check against the CA and the node identity's.
	cli.InsecureSkipVerify = true
	cli.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return fmt.Errorf("%w: no server certificate", ErrPeerIdentity)
		}
		inter := x509.NewCertPool()
		for _, ic := range cs.PeerCertificates[1:] {
			inter.AddCert(ic)
		}
		opts := x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		if cli.Time != nil {
			opts.CurrentTime = cli.Time()
		}
		if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
			return fmt.Errorf("%w: %w", ErrPeerIdentity, err)
		}
		if _, err := NodeID(cs.PeerCertificates[0]); err != nil {
			return err
		}
		if userVerify != nil {
			return userVerify(cs)
		}
		return nil
	}
	return &peerTLS{server: srv, client: cli}, nil
}

// clientHandshake runs the TLS handshake of a dialed connection, within
// ctx, and returns the connection and the node ID the server proved. On
// failure nc is closed.
func (p *peerTLS) clientHandshake(ctx context.Context, nc net.Conn) (net.Conn, int32, error) {
	tc := tls.Client(nc, p.client)
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, -1, fmt.Errorf("TLS handshake: %w", err)
	}
	id, err := NodeID(tc.ConnectionState().PeerCertificates[0]) // VerifyConnection checked it
	if err != nil {
		nc.Close()
		return nil, -1, err
	}
	return tc, id, nil
}

// serverHandshake runs the TLS handshake of an accepted connection, cut
// off at timeout, and returns the connection and the node ID the client
// proved. Nothing is read from the connection but the handshake until it
// has succeeded.
func (p *peerTLS) serverHandshake(nc net.Conn, timeout time.Duration) (net.Conn, int32, error) {
	if err := nc.SetDeadline(time.Now().Add(timeout)); err != nil {
		return nil, -1, err
	}
	tc := tls.Server(nc, p.server)
	if err := tc.Handshake(); err != nil {
		return nil, -1, fmt.Errorf("TLS handshake: %w", err)
	}
	if err := nc.SetDeadline(time.Time{}); err != nil {
		return nil, -1, err
	}
	id, err := NodeID(tc.ConnectionState().PeerCertificates[0]) // VerifyConnection checked it
	if err != nil {
		return nil, -1, err
	}
	return tc, id, nil
}
