package main

import (
	"io"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestClusterFlags checks the combinations of the cluster flags.
func TestClusterFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string // "" for none
	}{
		{[]string{"-etcd", "127.0.0.1:2379", "-bucket", "s3://b"}, ""},
		{[]string{"-etcd", "http://127.0.0.1:2379,http://127.0.0.1:2380", "-bucket", "s3://b", "-peer-addr", "127.0.0.1:0", "-rack", "a", "-lease-ttl", "2s", "-node-id", "3", "-advertise", "10.0.0.1:9092"}, ""},
		{[]string{"-rack", "a"}, ""},
		{[]string{"-etcd", "127.0.0.1:2379"}, "-etcd needs a -bucket"},
		{[]string{"-etcd", "127.0.0.1:2379", "-bucket", "mem://"}, "-etcd needs a -bucket"},
		{[]string{"-etcd", "nohost", "-bucket", "s3://b"}, `-etcd endpoint "nohost"`},
		{[]string{"-peer-addr", "127.0.0.1:0"}, "-peer-addr needs -etcd"},
		{[]string{"-lease-ttl", "3s"}, "-lease-ttl needs -etcd"},
		{[]string{"-etcd", "127.0.0.1:2379", "-bucket", "s3://b", "-lease-ttl", "100ms"}, "at least 1s"},
		{[]string{"-etcd", "127.0.0.1:2379", "-bucket", "s3://b", "-peer-addr", "x"}, "-peer-addr"},
		{[]string{"-etcd", "127.0.0.1:2379", "-bucket", "s3://b", "-metadata-log", "file"}, "-metadata-log file"},
		{[]string{"-etcd", "127.0.0.1:2379", "-bucket", "s3://b", "-peer-tls-cert", "c.pem", "-peer-tls-key", "k.pem", "-peer-tls-ca", "ca.pem"}, ""},
		{[]string{"-etcd", "127.0.0.1:2379", "-bucket", "s3://b", "-peer-tls-cert", "c.pem", "-peer-tls-key", "k.pem"}, "go together"},
		{[]string{"-etcd", "127.0.0.1:2379", "-bucket", "s3://b", "-peer-tls-ca", "ca.pem"}, "go together"},
		{[]string{"-peer-tls-cert", "c.pem", "-peer-tls-key", "k.pem", "-peer-tls-ca", "ca.pem"}, "need -etcd"},
		{[]string{"-objects-per-second", "150"}, ""},
		{[]string{"-commit", "series"}, ""},
		{[]string{"-commit", "parallel", "-metadata-log", "file"}, ""},
		{[]string{"-commit", "sometimes"}, `-commit "sometimes"`},
		{[]string{"-etcd", "127.0.0.1:2379", "-bucket", "s3://b", "-commit", "parallel"}, "-commit parallel is a single node's"},
		{[]string{"-objects-per-second", "2"}, "at least one a linger"},
		{[]string{"-linger", "1s", "-objects-per-second", "1"}, ""},
		{[]string{"-consumer-group-heartbeat-interval", "250ms", "-consumer-group-session-timeout", "5s"}, ""},
		{[]string{"-consumer-group-heartbeat-interval", "0s"}, "must be positive"},
		{[]string{"-consumer-group-heartbeat-interval", "10s", "-consumer-group-session-timeout", "10s"}, "less than -consumer-group-session-timeout"},
	} {
		_, err := parse(tc.args, io.Discard)
		if tc.err == "" {
			require.NoError(t, err, "%q", tc.args)
		} else {
			require.ErrorContains(t, err, tc.err, "%q", tc.args)
		}
	}
}

// TestClusterAdvertiseUnspecified checks that a cluster node listening
// on every address must say which one clients reach it at.
func TestClusterAdvertiseUnspecified(t *testing.T) {
	err := run(t.Context(), []string{"-addr", "0.0.0.0:0", "-etcd", "127.0.0.1:1", "-bucket", "s3://b", "-data", t.TempDir()}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "give an address they can reach")
}

// TestCompactionFlags: -compact-interval and -transactional-id-expiration
// parse, with Kafka's defaults (log.cleaner.backoff.ms,
// transactional.id.expiration.ms) when not given.
func TestCompactionFlags(t *testing.T) {
	o, err := parse([]string{"-compact-interval", "2s", "-transactional-id-expiration", "1h"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, []time.Duration{2 * time.Second, time.Hour}, []time.Duration{o.compactInterval, o.txnIDExpiration})
	o, err = parse(nil, io.Discard)
	require.NoError(t, err)
	require.Equal(t, []time.Duration{15 * time.Second, 7 * 24 * time.Hour}, []time.Duration{o.compactInterval, o.txnIDExpiration})
}

// TestSecurityFlags checks the combinations of the security flags and
// -scram-bootstrap's syntax (Kafka's kafka-storage format --add-scram).
func TestSecurityFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string // "" for none
	}{
		{[]string{"-tls-cert", "c.pem", "-tls-key", "k.pem", "-tls-client-ca", "ca.pem"}, ""},
		{[]string{"-tls-cert", "c.pem"}, "go together"},
		{[]string{"-tls-client-ca", "ca.pem"}, "needs -tls-cert"},
		{[]string{"-sasl-mechanisms", "PLAIN,scram-sha-512", "-connections-max-reauth", "1h"}, ""},
		{[]string{"-sasl-mechanisms", "GSSAPI"}, "unknown mechanism"},
		{[]string{"-sasl-mechanisms", "OAUTHBEARER"}, "-oauthbearer-unsecured-jwt"},
		{[]string{"-sasl-mechanisms", "OAUTHBEARER", "-oauthbearer-unsecured-jwt"}, ""},
		{[]string{"-oauthbearer-unsecured-jwt"}, "needs OAUTHBEARER"},
		{[]string{"-connections-max-reauth", "1h"}, "needs -sasl-mechanisms"},
		{[]string{"-authorizer", "acl", "-super-users", "User:admin;User:ops"}, ""},
		{[]string{"-authorizer", "ldap"}, "the one authorizer is acl"},
		{[]string{"-super-users", "User:admin"}, "needs -authorizer acl"},
		{[]string{"-authorizer", "acl", "-super-users", "admin"}, "is not TYPE:NAME"},
		{[]string{"-allow-everyone-if-no-acl-found"}, "needs -authorizer acl"},
		{[]string{"-scram-bootstrap", "SCRAM-SHA-512=[name=admin,password=admin-secret]"}, ""},
		{[]string{"-scram-bootstrap", "SCRAM-SHA-256=[name=a,password=b,iterations=8192]"}, ""},
		{[]string{"-scram-bootstrap", "SCRAM-SHA-1=[name=a,password=b]"}, "unknown SCRAM mechanism"},
		{[]string{"-scram-bootstrap", "SCRAM-SHA-512=[name=a]"}, "name and password are required"},
		{[]string{"-scram-bootstrap", "SCRAM-SHA-512=[name=a,password=b,iterations=10]"}, "iterations"},
		{[]string{"-scram-bootstrap", "SCRAM-SHA-512=name=a"}, "is not MECHANISM=["},
	} {
		_, err := parse(tc.args, io.Discard)
		if tc.err == "" {
			require.NoError(t, err, "%q", tc.args)
		} else {
			require.ErrorContains(t, err, tc.err, "%q", tc.args)
		}
	}
	o, err := parse([]string{"-scram-bootstrap", "SCRAM-SHA-256=[name=a,password=b,iterations=8192]", "-scram-bootstrap", "SCRAM-SHA-512=[name=c,password=d]"}, io.Discard)
	require.NoError(t, err)
	require.Len(t, o.sec.scramBootstrap, 2)
	require.Equal(t, scramUser{mechanism: 1, name: "a", password: "b", iterations: 8192}, o.sec.scramBootstrap[0])
}

// TestEtcdFlags checks the combinations of the etcd connection flags,
// and that the password comes from $DISKLESS_ETCD_PASSWORD unless
// -etcd-password gives it.
func TestEtcdFlags(t *testing.T) {
	cluster := []string{"-etcd", "127.0.0.1:2379", "-bucket", "s3://b"}
	for _, tc := range []struct {
		args []string
		env  string
		err  string // "" for none
	}{
		{[]string{"-etcd-ca", "ca.pem"}, "", ""},
		{[]string{"-etcd-ca", "ca.pem", "-etcd-cert", "c.pem", "-etcd-key", "k.pem", "-etcd-user", "kafka"}, "pw", ""},
		{[]string{"-etcd-cert", "c.pem", "-etcd-key", "k.pem"}, "", ""},
		{[]string{"-etcd-user", "kafka", "-etcd-password", "pw"}, "", ""},
		{[]string{"-etcd-cert", "c.pem"}, "", "-etcd-cert and -etcd-key go together"},
		{[]string{"-etcd-ca", "ca.pem", "-etcd-key", "k.pem"}, "", "-etcd-cert and -etcd-key go together"},
		{[]string{"-etcd-user", "kafka"}, "", "needs a password"},
		{[]string{"-etcd-password", "pw"}, "", "-etcd-password needs -etcd-user"},
		{nil, "pw", "-etcd-user is not"},
		{nil, "", ""},
	} {
		t.Setenv(envEtcdPassword, tc.env)
		_, err := parse(append(slices.Clone(cluster), tc.args...), io.Discard)
		if tc.err == "" {
			require.NoError(t, err, "%q with $%s=%q", tc.args, envEtcdPassword, tc.env)
		} else {
			require.ErrorContains(t, err, tc.err, "%q with $%s=%q", tc.args, envEtcdPassword, tc.env)
		}
	}
	t.Setenv(envEtcdPassword, "")
	for _, args := range [][]string{{"-etcd-ca", "ca.pem"}, {"-etcd-cert", "c.pem", "-etcd-key", "k.pem"}, {"-etcd-user", "kafka", "-etcd-password", "pw"}} {
		_, err := parse(args, io.Discard)
		require.ErrorContains(t, err, "need -etcd", "%q", args)
	}
	_, err := parse([]string{"-etcd", "http://127.0.0.1:2379", "-bucket", "s3://b", "-etcd-ca", "ca.pem"}, io.Discard)
	require.ErrorContains(t, err, "says http://")

	t.Setenv(envEtcdPassword, "from-env")
	o, err := parse(append(slices.Clone(cluster), "-etcd-user", "kafka"), io.Discard)
	require.NoError(t, err)
	require.Equal(t, "from-env", o.etcdSec.password)
	o, err = parse(append(slices.Clone(cluster), "-etcd-user", "kafka", "-etcd-password", "from-flag"), io.Discard)
	require.NoError(t, err)
	require.Equal(t, "from-flag", o.etcdSec.password, "-etcd-password overrides the environment")
	_, err = parse(nil, io.Discard)
	require.NoError(t, err, "a single node ignores $%s", envEtcdPassword)
}

// TestConnectionOverridesFlag: -max-connections-per-ip-overrides parses
// HOST:N pairs (an IPv6 host before the last colon), and refuses the
// malformed ones; New resolves the host names.
func TestConnectionOverridesFlag(t *testing.T) {
	o, err := parse([]string{"-max-connections-per-ip-overrides", "127.0.0.1:5, localhost:0,::1:7,[fe80::2]:3"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"127.0.0.1": 5, "localhost": 0, "::1": 7, "fe80::2": 3}, o.perIPOverrides)
	for _, bad := range []string{"127.0.0.1", "127.0.0.1:x", "127.0.0.1:-1", ":5", "a:1,"} {
		_, err := parse([]string{"-max-connections-per-ip-overrides", bad}, io.Discard)
		require.ErrorContains(t, err, "-max-connections-per-ip-overrides", bad)
	}
}
