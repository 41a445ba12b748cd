package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestReadmeSecurity runs the SASL_SSL command line of README.md's
// "Security" section as it is written (the certificate files the test's
// own, the data folder a temporary one), then the README's client code,
// which is readmeSecurityClient's body: the admin makes user alice and
// her ACLs, and alice then produces to a topic of hers.
func TestReadmeSecurity(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	text := string(readme)
	sec := text[strings.Index(text, "## Security"):]
	block := sec[strings.Index(sec, "```sh\n")+len("```sh\n"):]
	block = block[:strings.Index(block, "```")]
	args := shellWords(t, strings.ReplaceAll(block, "\\\n", " "))
	require.Equal(t, []string{"go", "run", "./examples/kafka-broker"}, args[:3])
	args = args[3:]
	pki := newTestPKI(t)
	var run []string
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "-data":
			i++ // startBroker gives its own
		case "server.pem":
			run = append(run, pki.certFile)
		case "server-key.pem":
			run = append(run, pki.keyFile)
		default:
			run = append(run, args[i])
		}
	}
	b := startBroker(t, run...)

	src, err := os.ReadFile("readme_security_test.go")
	require.NoError(t, err)
	code := string(src)
	code = code[strings.Index(code, "\t// README begin\n")+len("\t// README begin\n"):]
	code = code[:strings.Index(code, "\t// README end\n")]
	code = strings.ReplaceAll(strings.ReplaceAll(code, "\n\t", "\n"), "kgo.SeedBrokers(addr)", `kgo.SeedBrokers("127.0.0.1:9092")`)
	code = strings.TrimPrefix(code, "\t")
	require.Contains(t, text, "```go\n"+code+"```\n", "README.md's client code is readmeSecurityClient's")

	ctx := t.Context()
	require.NoError(t, readmeSecurityClient(ctx, b.addr, pki.pool))
	alice, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.DialTLSConfig(&tls.Config{RootCAs: pki.pool}),
		kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()), kgo.AllowAutoTopicCreation())
	require.NoError(t, err)
	defer alice.Close()
	_, err = kadm.NewClient(alice).CreateTopic(ctx, 1, 1, nil, "orders-eu")
	require.ErrorContains(t, err, "TOPIC_AUTHORIZATION_FAILED", "alice may not create topics")
	adminCl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.DialTLSConfig(&tls.Config{RootCAs: pki.pool}),
		kgo.SASL(scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism()))
	require.NoError(t, err)
	defer adminCl.Close()
	_, err = kadm.NewClient(adminCl).CreateTopic(ctx, 1, 1, nil, "orders-eu")
	require.NoError(t, err)
	require.NoError(t, alice.ProduceSync(ctx, &kgo.Record{Topic: "orders-eu", Value: []byte("v")}).FirstErr())
}

// readmeSecurityClient is README.md's client code, between the markers.
func readmeSecurityClient(ctx context.Context, addr string, caPool *x509.CertPool) error {
	// README begin
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.DialTLSConfig(&tls.Config{RootCAs: caPool}),
		kgo.SASL(scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism()),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	admin := kadm.NewClient(cl)
	_, err = admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-secret"},
	})
	if err != nil {
		return err
	}
	_, err = admin.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts("*").
		Topics("orders-").Groups("orders-").ResourcePatternType(kadm.ACLPatternPrefixed).
		Operations(kadm.OpRead, kadm.OpWrite, kadm.OpDescribe))
	// README end
	return err
}

// shellWords splits a command line as sh does for the words and quotes
// README.md's command uses (spaces, single quotes).
func shellWords(t *testing.T, s string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	inWord, quoted := false, false
	for _, r := range s {
		switch {
		case r == '\'':
			quoted, inWord = !quoted, true
		case !quoted && (r == ' ' || r == '\n' || r == '\t'):
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	require.False(t, quoted, "an unterminated quote in %q", s)
	if inWord {
		words = append(words, cur.String())
	}
	return words
}
