package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/kafkaserver"
	"github.com/diskless-go/diskless/scram"
)

// securityOptions are the flags of TLS, SASL and the authorizer.
type securityOptions struct {
	tlsCert, tlsKey, tlsClientCA string
	peerCert, peerKey, peerCA    string
	saslMechanisms               string
	scramBootstrap               scramUsers
	oauthUnsecured               bool
	reauth                       time.Duration
	authorizer                   string
	superUsers                   string
	allowIfNoACL                 bool
}

// scramUsers is the repeatable -scram-bootstrap flag.
type scramUsers []scramUser

// scramUser is one credential to create at start.
type scramUser struct {
	mechanism  scram.Mechanism
	name       string
	password   string
	iterations int32
}

func (u *scramUsers) String() string {
	var names []string
	for _, s := range *u {
		names = append(names, s.mechanism.String()+"="+s.name)
	}
	return strings.Join(names, " ")
}

func (u *scramUsers) Set(v string) error {
	s, err := parseScramUser(v)
	if err != nil {
		return err
	}
	*u = append(*u, s)
	return nil
}

// parseScramUser parses Kafka's kafka-storage format --add-scram syntax:
// MECHANISM=[name=NAME,password=PASSWORD(,iterations=N)], the values
// optionally in double quotes.
func parseScramUser(v string) (scramUser, error) {
	mech, rest, ok := strings.Cut(v, "=")
	if !ok || !strings.HasPrefix(rest, "[") || !strings.HasSuffix(rest, "]") {
		return scramUser{}, fmt.Errorf("%q is not MECHANISM=[name=NAME,password=PASSWORD]", v)
	}
	m, ok := scram.ParseMechanism(strings.TrimSpace(mech))
	if !ok {
		return scramUser{}, fmt.Errorf("%q: unknown SCRAM mechanism %q (SCRAM-SHA-256 or SCRAM-SHA-512)", v, mech)
	}
	u := scramUser{mechanism: m}
	for _, kv := range strings.Split(rest[1:len(rest)-1], ",") {
		k, val, ok := strings.Cut(kv, "=")
		if !ok {
			return scramUser{}, fmt.Errorf("%q: %q is not KEY=VALUE", v, kv)
		}
		val = strings.Trim(strings.TrimSpace(val), `"`)
		switch strings.TrimSpace(k) {
		case "name":
			u.name = val
		case "password":
			u.password = val
		case "iterations":
			n, err := strconv.ParseInt(val, 10, 32)
			if err != nil || n < scram.MinIterations || n > scram.MaxIterations {
				return scramUser{}, fmt.Errorf("%q: iterations %q must be %d to %d", v, val, scram.MinIterations, scram.MaxIterations)
			}
			u.iterations = int32(n)
		default:
			return scramUser{}, fmt.Errorf("%q: unknown key %q (name, password, iterations)", v, k)
		}
	}
	if u.name == "" || u.password == "" {
		return scramUser{}, fmt.Errorf("%q: name and password are required", v)
	}
	return u, nil
}

// addFlags adds the security flags to fs.
func (o *securityOptions) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.tlsCert, "tls-cert", "", "PEM certificate `FILE` of the Kafka listener: clients connect with TLS (SSL, or SASL_SSL with -sasl-mechanisms)")
	fs.StringVar(&o.tlsKey, "tls-key", "", "PEM private key `FILE` of -tls-cert")
	fs.StringVar(&o.tlsClientCA, "tls-client-ca", "", "PEM `FILE` of the CAs that sign client certificates: clients must present one, and without SASL their principal is User:SUBJECT")
	fs.StringVar(&o.peerCert, "peer-tls-cert", "", "with -etcd, this node's PEM certificate `FILE` for the calls between nodes (mutual TLS): signed by -peer-tls-ca, naming the node with the URI SAN diskless-node:<-node-id>")
	fs.StringVar(&o.peerKey, "peer-tls-key", "", "PEM private key `FILE` of -peer-tls-cert")
	fs.StringVar(&o.peerCA, "peer-tls-ca", "", "PEM `FILE` of the cluster CA that signs every node's -peer-tls-cert")
	fs.StringVar(&o.saslMechanisms, "sasl-mechanisms", "", "comma-separated SASL `MECHANISMS` clients must authenticate with: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (default: none)")
	fs.Var(&o.scramBootstrap, "scram-bootstrap", "a SCRAM credential to create at start if absent, as `MECHANISM=[name=NAME,password=PASSWORD]` (Kafka's kafka-storage format --add-scram; repeatable)")
	fs.DurationVar(&o.reauth, "connections-max-reauth", 0, "with -sasl-mechanisms, how long a SASL session lasts before the client must authenticate again on its connection (Kafka's connections.max.reauth.ms; 0: no limit)")
	fs.BoolVar(&o.oauthUnsecured, "oauthbearer-unsecured-jwt", false, "accept unsecured (alg none) JWTs for OAUTHBEARER, the principal from their sub claim: for tests only")
	fs.StringVar(&o.authorizer, "authorizer", "", "acl: check every request against Kafka's ACLs (default: none, everyone is allowed everything)")
	fs.StringVar(&o.superUsers, "super-users", "", "semicolon-separated `PRINCIPALS` allowed everything with -authorizer acl, e.g. 'User:admin;User:ops' (Kafka's super.users)")
	fs.BoolVar(&o.allowIfNoACL, "allow-everyone-if-no-acl-found", false, "with -authorizer acl, allow an action on a resource no ACL names (Kafka's allow.everyone.if.no.acl.found)")
}

// check validates the security flags.
func (o *securityOptions) check() error {
	switch {
	case (o.tlsCert == "") != (o.tlsKey == ""):
		return errors.New("-tls-cert and -tls-key go together")
	case o.tlsClientCA != "" && o.tlsCert == "":
		return errors.New("-tls-client-ca needs -tls-cert and -tls-key")
	case o.peerTLSFlags() != 0 && o.peerTLSFlags() != 3:
		return errors.New("-peer-tls-cert, -peer-tls-key and -peer-tls-ca go together: give all three, or none for plaintext calls between nodes")
	case o.reauth < 0:
		return fmt.Errorf("-connections-max-reauth %v is negative", o.reauth)
	case o.reauth > 0 && len(o.mechanisms()) == 0:
		return errors.New("-connections-max-reauth needs -sasl-mechanisms")
	case o.authorizer != "" && o.authorizer != "acl":
		return fmt.Errorf("-authorizer %q: the one authorizer is acl", o.authorizer)
	case o.superUsers != "" && o.authorizer == "":
		return errors.New("-super-users needs -authorizer acl")
	case o.allowIfNoACL && o.authorizer == "":
		return errors.New("-allow-everyone-if-no-acl-found needs -authorizer acl")
	case o.oauthUnsecured && !slices.Contains(o.mechanisms(), "OAUTHBEARER"):
		return errors.New("-oauthbearer-unsecured-jwt needs OAUTHBEARER in -sasl-mechanisms")
	}
	for _, m := range o.mechanisms() {
		switch m {
		case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		case "OAUTHBEARER":
			if !o.oauthUnsecured {
				return errors.New("-sasl-mechanisms OAUTHBEARER: this broker validates only unsecured JWTs, for tests, and only with -oauthbearer-unsecured-jwt")
			}
		default:
			return fmt.Errorf("-sasl-mechanisms: unknown mechanism %q", m)
		}
	}
	for _, p := range o.superUserList() {
		if typ, name, ok := strings.Cut(p, ":"); !ok || typ == "" || name == "" {
			return fmt.Errorf("-super-users: %q is not TYPE:NAME (User:admin)", p)
		}
	}
	return nil
}

// mechanisms returns the SASL mechanisms named.
func (o *securityOptions) mechanisms() []string {
	var out []string
	for _, m := range strings.Split(o.saslMechanisms, ",") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, strings.ToUpper(m))
		}
	}
	return out
}

// superUserList returns the super users named.
func (o *securityOptions) superUserList() []string {
	var out []string
	for _, p := range strings.Split(o.superUsers, ";") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// tlsConfig returns the listener's TLS config, nil without -tls-cert.
func (o *securityOptions) tlsConfig() (*tls.Config, error) {
	if o.tlsCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
	if err != nil {
		return nil, fmt.Errorf("-tls-cert, -tls-key: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if o.tlsClientCA != "" {
		pem, err := os.ReadFile(o.tlsClientCA)
		if err != nil {
			return nil, fmt.Errorf("-tls-client-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-tls-client-ca %s: no PEM certificate in it", o.tlsClientCA)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// peerTLSFlags is how many of the three -peer-tls flags are given.
func (o *securityOptions) peerTLSFlags() int {
	n := 0
	for _, f := range []string{o.peerCert, o.peerKey, o.peerCA} {
		if f != "" {
			n++
		}
	}
	return n
}

// peerTLS returns the TLS config of the calls between nodes
// (ClusterConfig.PeerTLS), nil without the -peer-tls flags: this node's
// certificate, and the cluster CA that both ends verify the other's
// against.
func (o *securityOptions) peerTLS() (*tls.Config, error) {
	if o.peerTLSFlags() == 0 {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(o.peerCert, o.peerKey)
	if err != nil {
		return nil, fmt.Errorf("-peer-tls-cert, -peer-tls-key: %w", err)
	}
	pem, err := os.ReadFile(o.peerCA)
	if err != nil {
		return nil, fmt.Errorf("-peer-tls-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("-peer-tls-ca %s: no PEM certificate in it", o.peerCA)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS13}, nil
}

// bootstrapUsers creates each -scram-bootstrap credential that does not
// exist yet (a restart, or another node of the cluster, may have made it:
// an existing one is kept, its password unchanged).
func (o *securityOptions) bootstrapUsers(ctx context.Context, b *diskless.Broker, log *zap.Logger) error {
	for _, u := range o.scramBootstrap {
		_, ok, err := b.ScramCredential(ctx, u.name, u.mechanism)
		if err != nil {
			return fmt.Errorf("-scram-bootstrap %s: %w", u.name, err)
		}
		if ok {
			continue
		}
		c, err := scram.New(u.name, u.mechanism, u.password, u.iterations)
		if err != nil {
			return fmt.Errorf("-scram-bootstrap %s: %w", u.name, err)
		}
		errs, err := b.AlterScramCredentials(ctx, []scram.Credential{c}, nil)
		if err == nil && len(errs) > 0 {
			err = errs[0]
		}
		if err != nil {
			return fmt.Errorf("-scram-bootstrap %s: %w", u.name, err)
		}
		log.Info("created a SCRAM credential (-scram-bootstrap)", zap.String("user", u.name), zap.Stringer("mechanism", u.mechanism))
	}
	return nil
}

// saslConfig returns the Kafka server's SASL config, nil without
// -sasl-mechanisms. PLAIN and SCRAM check the Broker's credentials.
func (o *securityOptions) saslConfig() *kafkaserver.SASLConfig {
	mechs := o.mechanisms()
	if len(mechs) == 0 {
		return nil
	}
	c := &kafkaserver.SASLConfig{Mechanisms: mechs, ReauthLimit: o.reauth}
	if o.oauthUnsecured {
		c.OAuthBearer = kafkaserver.UnsecuredJWTValidator
	}
	return c
}

// aclConfig returns the Kafka server's ACL authorizer config, nil
// without -authorizer acl.
func (o *securityOptions) aclConfig() *kafkaserver.ACLConfig {
	if o.authorizer != "acl" {
		return nil
	}
	return &kafkaserver.ACLConfig{SuperUsers: o.superUserList(), AllowEveryoneIfNoACLFound: o.allowIfNoACL}
}

// warn logs what the flags leave open. (A cluster without -peer-tls-*
// is warned about by the library, diskless.Open.)
func (o *securityOptions) warn(log *zap.Logger) {
	if len(o.mechanisms()) > 0 && o.authorizer == "" {
		log.Warn("SASL without -authorizer acl: every authenticated user may do everything, AlterUserScramCredentials (other users' passwords) included")
	}
}
