package kafkaserver

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/diskless-go/diskless/scram"
)

// BenchmarkSASLHandshake is the time from dialling to the first answer
// of an authenticated connection: a new franz-go client's Ping (a TCP
// connection, ApiVersions, and the SASL exchange of the mechanism) each
// iteration, on loopback, beside the same without SASL (none), so that
// the SASL part reads as the difference. Credentials have Kafka's
// minimum of 4096 iterations, which the server's PBKDF2 pays again for
// every PLAIN login (SCRAM's client pays it; the server only checks the
// proof).
//
//	go test -run '^$' -bench SASLHandshake -count 5 ./kafkaserver
func BenchmarkSASLHandshake(b *testing.B) {
	creds := map[scram.Mechanism]scram.Credential{}
	for _, m := range []scram.Mechanism{scram.SHA256, scram.SHA512} {
		c, err := scram.New("bench", m, "bench-secret", scram.MinIterations)
		require.NoError(b, err)
		creds[m] = c
	}
	p := startBroker(b, &Config{SASL: &SASLConfig{Mechanisms: []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}, Credentials: memCredentials(creds)}})
	plainSrv := startBroker(b, nil)
	for _, c := range []struct {
		name string
		addr string
		opt  kgo.Opt
	}{
		{"none", plainSrv.addr, nil},
		{"PLAIN", p.addr, kgo.SASL(plain.Auth{User: "bench", Pass: "bench-secret"}.AsMechanism())},
		{"SCRAM-SHA-256", p.addr, kgo.SASL(kscram.Auth{User: "bench", Pass: "bench-secret"}.AsSha256Mechanism())},
		{"SCRAM-SHA-512", p.addr, kgo.SASL(kscram.Auth{User: "bench", Pass: "bench-secret"}.AsSha512Mechanism())},
	} {
		b.Run(c.name, func(b *testing.B) {
			opts := []kgo.Opt{kgo.SeedBrokers(c.addr)}
			if c.opt != nil {
				opts = append(opts, c.opt)
			}
			for b.Loop() {
				cl, err := kgo.NewClient(opts...)
				require.NoError(b, err)
				require.NoError(b, cl.Ping(context.Background()))
				cl.Close()
			}
		})
	}
}

// memCredentials is a CredentialStore in memory, by mechanism (user
// "bench").
type memCredentials map[scram.Mechanism]scram.Credential

func (m memCredentials) ScramCredential(_ context.Context, user string, mech scram.Mechanism) (scram.Credential, bool, error) {
	c, ok := m[mech]
	return c, ok && c.User == user, nil
}
