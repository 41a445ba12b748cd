package etcdcluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// connectError wraps an error of the client Connect opened with what it
// means: a wrong password, a missing permission or credentials, or, when
// no member answered, what a TLS handshake with one of them says.
func (b *Backend) connectError(ctx context.Context, err error, prefix string) error {
	who := "etcd"
	if b.Username != "" {
		who = fmt.Sprintf("etcd as user %q", b.Username)
	}
	var why string
	switch {
	case errors.Is(err, rpctypes.ErrAuthFailed):
		why = "the user or its password is wrong"
	case errors.Is(err, rpctypes.ErrPermissionDenied) && b.Username == "":
		why = fmt.Sprintf("the etcd has authentication on: set the Backend's Username and Password, for a user whose role has readwrite on the keys under %q", prefix)
	case errors.Is(err, rpctypes.ErrPermissionDenied):
		why = fmt.Sprintf("the user's role needs readwrite on the keys under %q", prefix)
	case errors.Is(err, rpctypes.ErrUserEmpty) || errors.Is(err, rpctypes.ErrInvalidAuthToken):
		why = "the etcd has authentication on: set the Backend's Username and Password"
	case errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded || status.Code(err) == codes.Unavailable:
		why = "no member answered"
		if d := b.probe(ctx); d != "" {
			why += ": " + d
		}
	}
	if why != "" {
		why = "; " + why
	}
	return fmt.Errorf("etcdcluster: connecting to %s at %v: %w%s", who, b.Endpoints, err, why)
}

// probeTimeout bounds each connection of probe.
const probeTimeout = 2 * time.Second

// probe tells why the members do not answer, if a connection to one of
// them shows it: nothing listens, it serves TLS to a Backend without, or
// its TLS handshake fails (an unknown CA, a client certificate missing or
// refused). "" when none shows anything.
func (b *Backend) probe(ctx context.Context) string {
	for _, ep := range b.Endpoints {
		scheme, hostPort, ok := strings.Cut(ep, "://")
		if !ok {
			scheme, hostPort = "", ep
		}
		if d := b.probeOne(ctx, scheme != "https" && b.TLS == nil, hostPort); d != "" {
			return d
		}
	}
	return ""
}

// probeOne is probe of one member, at hostPort, which the client dialed
// in plain text if plain, else with TLS.
func (b *Backend) probeOne(ctx context.Context, plain bool, hostPort string) string {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", hostPort)
	if err != nil {
		return fmt.Sprintf("%s: %v", hostPort, err)
	}
	defer raw.Close()
	if deadline, ok := ctx.Deadline(); ok {
		raw.SetDeadline(deadline)
	}
	if plain {
		// Only to learn whether the member speaks TLS: nothing is sent
		// over this connection.
		c := tls.Client(raw, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a probe that sends nothing
		if c.HandshakeContext(ctx) == nil {
			return hostPort + " serves TLS: set the Backend's TLS"
		}
		return ""
	}
	cfg := &tls.Config{}
	if b.TLS != nil {
		cfg = b.TLS.Clone()
	}
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(hostPort)
	}
	c := tls.Client(raw, cfg)
	if err := c.HandshakeContext(ctx); err != nil {
		return fmt.Sprintf("the TLS handshake with %s: %v", hostPort, err)
	}
	// Under TLS 1.3 a server refuses a client's certificate (or its
	// absence) after the client's side of the handshake: at the first
	// read. A gRPC server speaks first (its HTTP/2 settings).
	var buf [1]byte
	var ne net.Error
	if _, err := c.Read(buf[:]); err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
		return fmt.Sprintf("%s closed the TLS connection: %v", hostPort, err)
	}
	return ""
}
