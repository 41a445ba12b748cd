package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"go.uber.org/zap"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/cluster/etcdcluster"
)

// envEtcdPassword is the environment variable that gives -etcd-user's
// password, so that it is not on the command line (which other users of
// the machine see in the process list). -etcd-password overrides it.
const envEtcdPassword = "DISKLESS_ETCD_PASSWORD"

// etcdSecurity are the flags of the connection to etcd: TLS and the
// user.
type etcdSecurity struct {
	ca, cert, key  string
	user, password string
}

// addFlags adds the etcd connection flags to fs.
func (o *etcdSecurity) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.ca, "etcd-ca", "", "with -etcd, connect to etcd over TLS, trusting the CAs in this PEM `FILE` (alone: the members do not ask for a client certificate)")
	fs.StringVar(&o.cert, "etcd-cert", "", "with -etcd, connect to etcd over TLS with this PEM client certificate `FILE` (with -etcd-key; without -etcd-ca the system's CAs verify the members)")
	fs.StringVar(&o.key, "etcd-key", "", "PEM private key `FILE` of -etcd-cert")
	fs.StringVar(&o.user, "etcd-user", "", "with -etcd, the etcd `USER` to act as (etcd with authentication on); its password in $"+envEtcdPassword+" or -etcd-password")
	fs.StringVar(&o.password, "etcd-password", "", "-etcd-user's `PASSWORD` (visible in the process list: prefer $"+envEtcdPassword+")")
}

// check validates the flags, given -etcd's value, and takes the password
// from the environment if -etcd-password did not give it.
func (o *etcdSecurity) check(etcd string) error {
	env := os.Getenv(envEtcdPassword)
	if etcd == "" {
		if o.ca != "" || o.cert != "" || o.key != "" || o.user != "" || o.password != "" {
			return errors.New("-etcd-ca, -etcd-cert, -etcd-key, -etcd-user and -etcd-password need -etcd")
		}
		return nil // a stray $DISKLESS_ETCD_PASSWORD does not matter to a single node
	}
	switch {
	case (o.cert == "") != (o.key == ""):
		return errors.New("-etcd-cert and -etcd-key go together")
	case o.password != "" && o.user == "":
		return errors.New("-etcd-password needs -etcd-user")
	case env != "" && o.user == "":
		return fmt.Errorf("$%s is set but -etcd-user is not", envEtcdPassword)
	case o.user != "" && o.password == "" && env == "":
		return fmt.Errorf("-etcd-user %s needs a password: $%s (or -etcd-password)", o.user, envEtcdPassword)
	}
	if o.password == "" {
		o.password = env
	}
	if o.tls() {
		for _, e := range strings.Split(etcd, ",") {
			if strings.HasPrefix(strings.TrimSpace(e), "http://") {
				return fmt.Errorf("-etcd endpoint %q says http:// but -etcd-ca or -etcd-cert ask for TLS: give https://HOST:PORT or HOST:PORT", e)
			}
		}
	}
	return nil
}

// tls reports whether the flags ask for TLS.
func (o *etcdSecurity) tls() bool { return o.ca != "" || o.cert != "" }

// apply sets the TLS and the user of cc's etcd Backend (main.go's), if
// there is a cluster; it warns of a password sent in the clear.
func (o *etcdSecurity) apply(cc *diskless.ClusterConfig, log *zap.Logger) error {
	if cc == nil {
		return nil
	}
	b := cc.Backend.(*etcdcluster.Backend)
	b.Username, b.Password = o.user, o.password
	if o.user != "" && !o.tls() && !strings.Contains(strings.Join(b.Endpoints, ","), "https://") {
		log.Warn("the etcd password crosses the network in the clear: connect to etcd over TLS (-etcd-ca)")
	}
	if !o.tls() {
		return nil
	}
	b.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	if o.ca != "" {
		pem, err := os.ReadFile(o.ca)
		if err != nil {
			return fmt.Errorf("-etcd-ca: %w", err)
		}
		b.TLS.RootCAs = x509.NewCertPool()
		if !b.TLS.RootCAs.AppendCertsFromPEM(pem) {
			return fmt.Errorf("-etcd-ca %s: no PEM certificate in it", o.ca)
		}
	}
	if o.cert != "" {
		cert, err := tls.LoadX509KeyPair(o.cert, o.key)
		if err != nil {
			return fmt.Errorf("-etcd-cert, -etcd-key: %w", err)
		}
		b.TLS.Certificates = []tls.Certificate{cert}
	}
	return nil
}
