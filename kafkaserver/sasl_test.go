package kafkaserver

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	kafkaplain "github.com/segmentio/kafka-go/sasl/plain"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"
	xscram "github.com/xdg-go/scram"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/diskless-go/diskless/internal/kafkatest"
	"github.com/diskless-go/diskless/scram"
)

// memStore is a CredentialStore in memory: each user's password is its
// name and "-secret", with credentials of both SCRAM mechanisms.
type memStore struct {
	mu    sync.Mutex
	creds map[string]scram.Credential // by user and mechanism
}

var _ CredentialStore = (*memStore)(nil)

func newMemStore(t testing.TB, users ...string) *memStore {
	s := &memStore{creds: map[string]scram.Credential{}}
	for _, u := range users {
		for _, m := range []scram.Mechanism{scram.SHA256, scram.SHA512} {
			c, err := scram.New(u, m, password(u), 0)
			require.NoError(t, err)
			s.creds[u+"\x00"+m.Name()] = c
		}
	}
	return s
}

func password(user string) string { return user + "-secret" }

func (s *memStore) ScramCredential(_ context.Context, user string, m scram.Mechanism) (scram.Credential, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.creds[user+"\x00"+m.Name()]
	return c, ok, nil
}

// saslConfig enables every built-in mechanism over store, with unsecured
// JWTs and a 1 ms failure delay.
func saslConfig(store CredentialStore) *SASLConfig {
	return &SASLConfig{
		Mechanisms:  []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"},
		Credentials: store, OAuthBearer: UnsecuredJWTValidator, FailedAuthDelay: time.Millisecond,
	}
}

// unsecuredJWT returns an unsecured JWT for sub expiring at exp.
func unsecuredJWT(sub string, exp time.Time) string {
	enc := base64.RawURLEncoding.EncodeToString
	claims := fmt.Sprintf(`{"sub":%q,"iat":%d,"exp":%.3f}`, sub, time.Now().Unix()-1, float64(exp.UnixMilli())/1000)
	return enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(claims)) + "."
}

// produceConsume creates topic, produces 3 records to it and consumes
// them, with franz-go clients configured by opts.
func produceConsume(t *testing.T, addr, topic string, opts ...kgo.Opt) {
	t.Helper()
	cl := kafkatest.Client(t, addr, opts...)
	kafkatest.CreateTopic(t, cl, topic, 1, nil)
	for i := range 3 {
		require.NoError(t, cl.ProduceSync(t.Context(), &kgo.Record{Topic: topic, Value: []byte(fmt.Sprint(i))}).FirstErr())
	}
	recs := kafkatest.ConsumeAll(t, addr, topic, 3, opts...)
	require.Equal(t, "2", string(recs[2].Value))
}

// mechanisms are franz-go's, as alice.
func mechanisms() map[string]sasl.Mechanism {
	return map[string]sasl.Mechanism{
		"PLAIN":         plain.Auth{User: "alice", Pass: password("alice")}.AsMechanism(),
		"SCRAM-SHA-256": kscram.Auth{User: "alice", Pass: password("alice")}.AsSha256Mechanism(),
		"SCRAM-SHA-512": kscram.Auth{User: "alice", Pass: password("alice")}.AsSha512Mechanism(),
		"OAUTHBEARER": oauth.Oauth(func(context.Context) (oauth.Auth, error) {
			return oauth.Auth{Token: unsecuredJWT("alice", time.Now().Add(time.Hour))}, nil
		}),
	}
}

// TestSASLFranzGo: franz-go clients authenticate with each mechanism,
// over plaintext and over TLS, produce and consume; their connections'
// principal is User:alice (over TLS too, with a client certificate).
// A wrong password and an unknown user fail with
// SASL_AUTHENTICATION_FAILED, and are counted.
func TestSASLFranzGo(t *testing.T) {
	pki := newTestPKI(t)
	for _, tlsOn := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", tlsOn), func(t *testing.T) {
			cfg := &Config{SASL: saslConfig(newMemStore(t, "alice"))}
			var tlsOpt []kgo.Opt
			if tlsOn {
				cfg.TLS = pki.serverTLS(false)
				tlsOpt = []kgo.Opt{kgo.DialTLSConfig(pki.clientTLS(nil))}
			}
			p := startBroker(t, cfg)
			for name, m := range mechanisms() {
				t.Run(name, func(t *testing.T) {
					opts := append([]kgo.Opt{kgo.SASL(m)}, tlsOpt...)
					produceConsume(t, p.addr, "t-"+strings.ToLower(name), opts...)
					require.Contains(t, principals(p.srv), "User:alice")
				})
			}
			require.GreaterOrEqual(t, p.srv.stats.saslOK.Load(), int64(4))
			require.Zero(t, p.srv.stats.saslFailed.Load())

			for name, m := range map[string]sasl.Mechanism{
				"wrong password": kscram.Auth{User: "alice", Pass: "guess"}.AsSha512Mechanism(),
				"unknown user":   kscram.Auth{User: "mallory", Pass: "guess"}.AsSha256Mechanism(),
				"plain":          plain.Auth{User: "alice", Pass: "guess"}.AsMechanism(),
			} {
				cl := kafkatest.Client(t, p.addr, append([]kgo.Opt{kgo.SASL(m), kgo.RequestRetries(0)}, tlsOpt...)...)
				err := cl.Ping(t.Context())
				require.ErrorIs(t, err, kerr.SaslAuthenticationFailed, name)
				cl.Close()
			}
			require.GreaterOrEqual(t, p.srv.stats.saslFailed.Load(), int64(3))
		})
	}
}

// TestSASLSarama: sarama with SCRAM-SHA-512 over TLS produces and
// consumes.
func TestSASLSarama(t *testing.T) {
	pki := newTestPKI(t)
	p := startBroker(t, &Config{TLS: pki.serverTLS(false), SASL: saslConfig(newMemStore(t, "alice"))})
	c := saramaConfig()
	c.Net.TLS.Enable, c.Net.TLS.Config = true, pki.clientTLS(nil)
	c.Net.SASL.Enable, c.Net.SASL.Handshake, c.Net.SASL.Mechanism = true, true, sarama.SASLTypeSCRAMSHA512
	c.Net.SASL.User, c.Net.SASL.Password = "alice", password("alice")
	c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &kafkatest.SaramaSCRAM{Hash: xscram.SHA512} }
	c.Producer.Partitioner = sarama.NewRoundRobinPartitioner

	admin, err := sarama.NewClusterAdmin([]string{p.addr}, c)
	require.NoError(t, err)
	require.NoError(t, admin.CreateTopic("sarama-sasl", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false))
	require.NoError(t, admin.Close())

	prod, err := sarama.NewSyncProducer([]string{p.addr}, c)
	require.NoError(t, err)
	for i := range 3 {
		_, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: "sarama-sasl", Value: sarama.StringEncoder(fmt.Sprint(i))})
		require.NoError(t, err)
	}
	require.NoError(t, prod.Close())

	cons, err := sarama.NewConsumer([]string{p.addr}, c)
	require.NoError(t, err)
	defer cons.Close()
	pc, err := cons.ConsumePartition("sarama-sasl", 0, sarama.OffsetOldest)
	require.NoError(t, err)
	defer pc.Close()
	for i := range 3 {
		select {
		case m := <-pc.Messages():
			require.Equal(t, fmt.Sprint(i), string(m.Value))
		case <-time.After(30 * time.Second):
			t.Fatalf("consumed %d of 3", i)
		}
	}
}

// TestSASLKafkaGo: segmentio/kafka-go with PLAIN produces and consumes.
func TestSASLKafkaGo(t *testing.T) {
	p := startBroker(t, &Config{SASL: saslConfig(newMemStore(t, "alice"))})
	mech := kafkaplain.Mechanism{Username: "alice", Password: password("alice")}
	cl := p.client(t, kgo.SASL(plain.Auth{User: "alice", Pass: password("alice")}.AsMechanism()))
	kafkatest.CreateTopic(t, cl, "kafka-go-sasl", 1, nil)

	transport := &kafka.Transport{SASL: mech}
	defer transport.CloseIdleConnections()
	w := &kafka.Writer{Addr: kafka.TCP(p.addr), Topic: "kafka-go-sasl", RequiredAcks: kafka.RequireAll, Transport: transport, BatchTimeout: 5 * time.Millisecond}
	for i := range 3 {
		require.NoError(t, w.WriteMessages(t.Context(), kafka.Message{Value: []byte(fmt.Sprint(i))}))
	}
	require.NoError(t, w.Close())

	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: []string{p.addr}, Topic: "kafka-go-sasl", MaxWait: 100 * time.Millisecond,
		Dialer: &kafka.Dialer{SASLMechanism: mech, Timeout: 10 * time.Second},
	})
	defer r.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for i := range 3 {
		m, err := r.ReadMessage(ctx)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint(i), string(m.Value))
	}
}

// saslRaw is a raw connection's SASL: requests framed by hand, and, after
// SaslHandshake v0, unframed tokens.
type saslRaw struct{ *rawConn }

func dialSASL(t *testing.T, addr string) saslRaw { return saslRaw{dialRaw(t, addr)} }

// handshake sends SaslHandshake of version for mechanism and returns the
// answer, or the error of a closed connection.
func (r saslRaw) handshake(version int16, mechanism string) (*kmsg.SASLHandshakeResponse, error) {
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version, req.Mechanism = version, mechanism
	r.send(req.Key(), version, false, req.AppendTo(nil))
	_, body, err := r.recv()
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	require.NoError(r.t, resp.ReadFrom(body))
	return resp, nil
}

// authenticate sends SaslAuthenticate of version with token.
func (r saslRaw) authenticate(version int16, token []byte) (*kmsg.SASLAuthenticateResponse, error) {
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.Version, req.SASLAuthBytes = version, token
	r.send(req.Key(), version, req.IsFlexible(), req.AppendTo(nil))
	_, body, err := r.recv()
	if err != nil {
		return nil, err
	}
	if req.IsFlexible() {
		body = body[1:] // the response header's tags
	}
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	require.NoError(r.t, resp.ReadFrom(body))
	return resp, nil
}

// token writes an unframed token and reads the unframed answer.
func (r saslRaw) token(tok []byte) ([]byte, error) {
	_, err := r.c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(tok))), tok...))
	require.NoError(r.t, err)
	var size [4]byte
	if _, err := io.ReadFull(r.c, size[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err = io.ReadFull(r.c, b)
	return b, err
}

// metadata sends Metadata v1 and reports whether it was answered.
func (r saslRaw) metadata() bool {
	r.send(3, 1, false, []byte{0, 0, 0, 0})
	_, _, err := r.recv()
	return err == nil
}

// closed reports whether the server closed the connection: a read
// returns EOF or a reset.
func (r saslRaw) closed() bool {
	_, err := r.c.Read(make([]byte, 1))
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

// scramSteps runs a SCRAM exchange through step (framed or not) with
// xdg-go/scram's client, and returns the last error.
func scramSteps(t *testing.T, hash xscram.HashGeneratorFcn, user, pass string, step func([]byte) ([]byte, error)) error {
	c, err := hash.NewClient(user, pass, "")
	require.NoError(t, err)
	conv := c.NewConversation()
	msg, err := conv.Step("")
	require.NoError(t, err)
	for !conv.Done() {
		answer, err := step([]byte(msg))
		if err != nil {
			return err
		}
		if msg, err = conv.Step(string(answer)); err != nil {
			return err
		}
	}
	return nil
}

// framedStep steps with SaslAuthenticate v1: an error answer is an error.
func (r saslRaw) framedStep(tok []byte) ([]byte, error) {
	resp, err := r.authenticate(1, tok)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	return resp.SASLAuthBytes, nil
}

// TestSASLProtocol drives the protocol by hand: SaslHandshake v0 (the
// tokens unframed, answered unframed) and v1 (SaslAuthenticate), what
// a connection may send before it authenticates, and each failure: the
// answer (SASL_AUTHENTICATION_FAILED with a message; nothing for an
// unframed token; UNSUPPORTED_SASL_MECHANISM with the enabled list),
// then the connection closes.
func TestSASLProtocol(t *testing.T) {
	p := startBroker(t, &Config{SASL: saslConfig(newMemStore(t, "alice", "bob"))})
	plainMsg := func(authzid, user, pass string) []byte { return []byte(authzid + "\x00" + user + "\x00" + pass) }

	t.Run("v0 PLAIN", func(t *testing.T) {
		r := dialSASL(t, p.addr)
		resp, err := r.handshake(0, "PLAIN")
		require.NoError(t, err)
		require.NoError(t, kerr.ErrorForCode(resp.ErrorCode))
		require.Equal(t, []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"}, resp.SupportedMechanisms)
		answer, err := r.token(plainMsg("", "alice", password("alice")))
		require.NoError(t, err)
		require.Empty(t, answer)
		require.True(t, r.metadata())
	})
	t.Run("v0 SCRAM-SHA-256", func(t *testing.T) {
		r := dialSASL(t, p.addr)
		_, err := r.handshake(0, "SCRAM-SHA-256")
		require.NoError(t, err)
		require.NoError(t, scramSteps(t, xscram.SHA256, "bob", password("bob"), r.token))
		require.True(t, r.metadata())
	})
	t.Run("v0 wrong password", func(t *testing.T) {
		r := dialSASL(t, p.addr)
		_, err := r.handshake(0, "PLAIN")
		require.NoError(t, err)
		_, err = r.token(plainMsg("", "alice", "guess"))
		require.Error(t, err, "no answer: the connection closes")
	})
	t.Run("v0 oversized token", func(t *testing.T) {
		r := dialSASL(t, p.addr)
		_, err := r.handshake(0, "PLAIN")
		require.NoError(t, err)
		_, err = r.c.Write(binary.BigEndian.AppendUint32(nil, maxSASLFrame+1))
		require.NoError(t, err)
		require.True(t, r.closed())
	})
	t.Run("v1 SCRAM-SHA-512", func(t *testing.T) {
		r := dialSASL(t, p.addr)
		_, err := r.handshake(1, "SCRAM-SHA-512")
		require.NoError(t, err)
		require.NoError(t, scramSteps(t, xscram.SHA512, "alice", password("alice"), r.framedStep))
		require.True(t, r.metadata())
		// SaslAuthenticate with no handshake after authentication:
		// ILLEGAL_SASL_STATE, as Kafka answers.
		resp, err := r.authenticate(2, []byte("x"))
		require.NoError(t, err)
		require.Equal(t, kerr.IllegalSaslState.Code, resp.ErrorCode)
	})
	t.Run("v1 wrong SCRAM proof", func(t *testing.T) {
		r := dialSASL(t, p.addr)
		_, err := r.handshake(1, "SCRAM-SHA-256")
		require.NoError(t, err)
		err = scramSteps(t, xscram.SHA256, "alice", "guess", r.framedStep)
		require.ErrorIs(t, err, kerr.SaslAuthenticationFailed)
		require.True(t, r.closed())
	})
	t.Run("unknown user gets a steady salt and fails at the proof", func(t *testing.T) {
		var salts []string
		for range 2 {
			r := dialSASL(t, p.addr)
			_, err := r.handshake(1, "SCRAM-SHA-256")
			require.NoError(t, err)
			first, err := r.framedStep([]byte("n,,n=mallory,r=abcdefgh"))
			require.NoError(t, err, "an unknown user is not told at the first message")
			fields := strings.Split(string(first), ",")
			require.True(t, strings.HasPrefix(fields[1], "s="))
			salts = append(salts, fields[1])
		}
		require.Equal(t, salts[0], salts[1])
		r := dialSASL(t, p.addr)
		_, err := r.handshake(1, "SCRAM-SHA-256")
		require.NoError(t, err)
		require.ErrorIs(t, scramSteps(t, xscram.SHA256, "mallory", "guess", r.framedStep), kerr.SaslAuthenticationFailed)
	})
	t.Run("v1 SCRAM malformed or with another nonce", func(t *testing.T) {
		zeros := base64.StdEncoding.EncodeToString(make([]byte, 32))
		for name, final := range map[string]func(serverNonce string) string{
			"another nonce":   func(string) string { return "c=biws,r=abcdefgh-not-ours,p=" + zeros },
			"a short proof":   func(n string) string { return "c=biws,r=" + n + ",p=AAAA" },
			"a long proof":    func(n string) string { return "c=biws,r=" + n + ",p=" + zeros + zeros },
			"no proof":        func(n string) string { return "c=biws,r=" + n },
			"another binding": func(n string) string { return "c=eSws,r=" + n + ",p=" + zeros },
		} {
			r := dialSASL(t, p.addr)
			_, err := r.handshake(1, "SCRAM-SHA-256")
			require.NoError(t, err)
			first, err := r.framedStep([]byte("n,,n=alice,r=abcdefgh"))
			require.NoError(t, err)
			nonce := strings.TrimPrefix(strings.Split(string(first), ",")[0], "r=")
			resp, err := r.authenticate(1, []byte(final(nonce)))
			require.NoError(t, err, name)
			require.Equal(t, kerr.SaslAuthenticationFailed.Code, resp.ErrorCode, name)
			require.True(t, r.closed(), name)
		}
		for _, first := range []string{",,n=alice,r=x", "", "n,,n=alice,r=x,tokenauth=true", "p=tls-unique,,n=alice,r=x"} {
			r := dialSASL(t, p.addr)
			_, err := r.handshake(1, "SCRAM-SHA-512")
			require.NoError(t, err)
			resp, err := r.authenticate(1, []byte(first))
			require.NoError(t, err, "%q", first)
			require.Equal(t, kerr.SaslAuthenticationFailed.Code, resp.ErrorCode, "%q", first)
		}
	})
	t.Run("v1 PLAIN failures", func(t *testing.T) {
		for name, msg := range map[string][]byte{
			"wrong password":  plainMsg("", "alice", "guess"),
			"unknown user":    plainMsg("", "mallory", "guess"),
			"another authzid": plainMsg("bob", "alice", password("alice")),
			"malformed":       []byte("alice\x00" + password("alice")),
		} {
			r := dialSASL(t, p.addr)
			_, err := r.handshake(1, "PLAIN")
			require.NoError(t, err)
			resp, err := r.authenticate(1, msg)
			require.NoError(t, err, name)
			require.Equal(t, kerr.SaslAuthenticationFailed.Code, resp.ErrorCode, name)
			require.NotNil(t, resp.ErrorMessage, name)
			require.True(t, r.closed(), name)
		}
		// The same authzid as the user is fine.
		r := dialSASL(t, p.addr)
		_, err := r.handshake(1, "PLAIN")
		require.NoError(t, err)
		_, err = r.framedStep(plainMsg("alice", "alice", password("alice")))
		require.NoError(t, err)
	})
	t.Run("mechanism not enabled", func(t *testing.T) {
		r := dialSASL(t, p.addr)
		resp, err := r.handshake(1, "GSSAPI")
		require.NoError(t, err)
		require.Equal(t, kerr.UnsupportedSaslMechanism.Code, resp.ErrorCode)
		require.Equal(t, []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"}, resp.SupportedMechanisms)
		require.True(t, r.closed())
	})
	t.Run("requests before authentication", func(t *testing.T) {
		r := dialSASL(t, p.addr)
		r.send(18, 0, false, nil)
		_, _, err := r.recv()
		require.NoError(t, err, "ApiVersions is answered")
		require.False(t, r.metadata(), "Metadata closes the connection")

		r = dialSASL(t, p.addr)
		_, err = r.authenticate(1, []byte("\x00alice\x00alice-secret"))
		require.Error(t, err, "SaslAuthenticate before SaslHandshake closes the connection")

		r = dialSASL(t, p.addr)
		_, err = r.handshake(1, "PLAIN")
		require.NoError(t, err)
		require.False(t, r.metadata(), "Metadata during the exchange closes the connection")

		r = dialSASL(t, p.addr) // a frame larger than maxSASLFrame before authentication
		_, err = r.c.Write(binary.BigEndian.AppendUint32(nil, maxSASLFrame+1))
		require.NoError(t, err)
		require.True(t, r.closed())
	})
	t.Run("OAUTHBEARER refused token", func(t *testing.T) {
		r := dialSASL(t, p.addr)
		_, err := r.handshake(1, "OAUTHBEARER")
		require.NoError(t, err)
		expired := unsecuredJWT("alice", time.Now().Add(-time.Minute))
		challenge, err := r.framedStep([]byte("n,,\x01auth=Bearer " + expired + "\x01\x01"))
		require.NoError(t, err)
		require.Equal(t, `{"status":"invalid_token"}`, string(challenge))
		resp, err := r.authenticate(1, []byte{1})
		require.NoError(t, err)
		require.Equal(t, kerr.SaslAuthenticationFailed.Code, resp.ErrorCode)
		require.Equal(t, `{"status":"invalid_token"}`, *resp.ErrorMessage)
		require.True(t, r.closed())
	})
}

// TestSASLNotEnabled: without SASL, SaslHandshake and SaslAuthenticate
// are answered ILLEGAL_SASL_STATE, as Kafka answers them on a listener
// without SASL, and the connection's principal is User:ANONYMOUS.
func TestSASLNotEnabled(t *testing.T) {
	p := startBroker(t, nil)
	r := dialSASL(t, p.addr)
	resp, err := r.handshake(1, "PLAIN")
	require.NoError(t, err)
	require.Equal(t, kerr.IllegalSaslState.Code, resp.ErrorCode)
	aresp, err := r.authenticate(0, []byte("x"))
	require.NoError(t, err)
	require.Equal(t, kerr.IllegalSaslState.Code, aresp.ErrorCode)
	require.True(t, r.metadata())
	require.Equal(t, []string{Anonymous}, principals(p.srv))
}

// TestSASLReauthentication (KIP-368): SaslAuthenticate v1 tells the
// session's lifetime (ReauthLimit, or a token's expiry if sooner); once
// it has passed, any request but a re-authentication closes the
// connection; a re-authentication may not change the principal or the
// mechanism; franz-go re-authenticates and goes on producing.
func TestSASLReauthentication(t *testing.T) {
	const limit = 400 * time.Millisecond
	cfg := saslConfig(newMemStore(t, "alice", "bob"))
	cfg.ReauthLimit = limit
	p := startBroker(t, &Config{SASL: cfg})
	login := func(r saslRaw, mechanism, user string) *kmsg.SASLAuthenticateResponse {
		_, err := r.handshake(1, mechanism)
		require.NoError(t, err)
		resp, err := r.authenticate(1, []byte("\x00"+user+"\x00"+password(user)))
		require.NoError(t, err)
		return resp
	}

	r := dialSASL(t, p.addr)
	resp := login(r, "PLAIN", "alice")
	require.NoError(t, kerr.ErrorForCode(resp.ErrorCode))
	require.Equal(t, limit.Milliseconds(), resp.SessionLifetimeMillis)
	require.True(t, r.metadata())
	time.Sleep(limit + 50*time.Millisecond) // the session's end
	require.False(t, r.metadata(), "closed after the session expired")
	require.Equal(t, int64(1), p.srv.stats.saslExpired.Load())

	r = dialSASL(t, p.addr)
	login(r, "PLAIN", "alice")
	time.Sleep(limit + 50*time.Millisecond)
	resp = login(r, "PLAIN", "alice")
	require.NoError(t, kerr.ErrorForCode(resp.ErrorCode), "re-authenticated after expiry")
	require.True(t, r.metadata())
	resp = login(r, "PLAIN", "bob")
	require.Equal(t, kerr.SaslAuthenticationFailed.Code, resp.ErrorCode)
	require.Contains(t, *resp.ErrorMessage, "Cannot change principals")
	require.True(t, r.closed())

	r = dialSASL(t, p.addr)
	login(r, "PLAIN", "alice")
	_, err := r.handshake(1, "SCRAM-SHA-256")
	require.NoError(t, err)
	resp, err = r.authenticate(1, []byte("n,,n=alice,r=abc"))
	require.NoError(t, err)
	require.Equal(t, kerr.SaslAuthenticationFailed.Code, resp.ErrorCode, "another mechanism")

	// A token's expiry sooner than the limit ends the session then.
	r = dialSASL(t, p.addr)
	_, err = r.handshake(1, "OAUTHBEARER")
	require.NoError(t, err)
	resp, err = r.authenticate(1, []byte("n,,\x01auth=Bearer "+unsecuredJWT("carol", time.Now().Add(200*time.Millisecond))+"\x01\x01"))
	require.NoError(t, err)
	require.NoError(t, kerr.ErrorForCode(resp.ErrorCode))
	require.Positive(t, resp.SessionLifetimeMillis)
	require.LessOrEqual(t, resp.SessionLifetimeMillis, int64(200))
	require.Contains(t, principals(p.srv), "User:carol")

	// franz-go re-authenticates as its sessions end.
	cl := p.client(t, kgo.SASL(kscram.Auth{User: "alice", Pass: password("alice")}.AsSha256Mechanism()))
	kafkatest.CreateTopic(t, cl, "reauth", 1, nil)
	before := p.srv.stats.saslReauth.Load()
	for i := range 3 {
		require.NoError(t, cl.ProduceSync(t.Context(), &kgo.Record{Topic: "reauth", Value: []byte(fmt.Sprint(i))}).FirstErr())
		time.Sleep(limit / 2)
	}
	require.Greater(t, p.srv.stats.saslReauth.Load(), before, "re-authenticated on its connections")
	kafkatest.ConsumeAll(t, p.addr, "reauth", 3, kgo.SASL(kscram.Auth{User: "alice", Pass: password("alice")}.AsSha512Mechanism()))
}

// robotAuthenticator is an embedder's Authenticator: mechanism
// X-ROBOT, two steps ("hello", then "robot:NAME"), sessions of 10 s.
type robotAuthenticator struct{}

func (robotAuthenticator) Mechanisms() []string { return []string{"X-ROBOT"} }

func (robotAuthenticator) Start(_ context.Context, mechanism string, client ClientInfo) (Exchange, error) {
	if mechanism != "X-ROBOT" || client.Addr == "" {
		return nil, errors.New("not mine")
	}
	return &robotExchange{}, nil
}

type robotExchange struct{ greeted bool }

func (x *robotExchange) Step(_ context.Context, token []byte) (StepResult, error) {
	if !x.greeted {
		if string(token) != "hello" {
			return StepResult{}, errors.New("no greeting")
		}
		x.greeted = true
		return StepResult{Response: []byte("name?")}, nil
	}
	name, ok := strings.CutPrefix(string(token), "robot:")
	if !ok {
		return StepResult{}, &AuthenticationError{Message: "robots only", User: string(token)}
	}
	return StepResult{Done: true, User: name, Expires: time.Now().Add(10 * time.Second)}, nil
}

// TestSASLAuthenticator: an embedder's Authenticator replaces the
// built-in mechanisms: its mechanisms are the ones listed, its steps
// answered, its user the principal (over a client certificate's), its
// expiry the session's; its AuthenticationError's message reaches the
// client, another error's does not.
func TestSASLAuthenticator(t *testing.T) {
	pki := newTestPKI(t)
	p := startBroker(t, &Config{TLS: pki.serverTLS(true), SASL: &SASLConfig{Authenticator: robotAuthenticator{}, FailedAuthDelay: -1}})
	dial := func() saslRaw {
		alice := pkix.Name{CommonName: "alice"}
		c, err := tls.Dial("tcp", p.addr, pki.clientTLS(&alice))
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		require.NoError(t, c.SetDeadline(time.Now().Add(30*time.Second)))
		return saslRaw{&rawConn{t: t, c: c}}
	}
	r := dial()
	resp, err := r.handshake(1, "PLAIN")
	require.NoError(t, err)
	require.Equal(t, kerr.UnsupportedSaslMechanism.Code, resp.ErrorCode)
	require.Equal(t, []string{"X-ROBOT"}, resp.SupportedMechanisms)

	r = dial()
	_, err = r.handshake(1, "X-ROBOT")
	require.NoError(t, err)
	answer, err := r.framedStep([]byte("hello"))
	require.NoError(t, err)
	require.Equal(t, "name?", string(answer))
	aresp, err := r.authenticate(1, []byte("robot:r2d2"))
	require.NoError(t, err)
	require.NoError(t, kerr.ErrorForCode(aresp.ErrorCode))
	require.InDelta(t, 10000, aresp.SessionLifetimeMillis, 1000)
	require.True(t, r.metadata())
	require.Contains(t, principals(p.srv), "User:r2d2")

	r = dial()
	_, err = r.handshake(1, "X-ROBOT")
	require.NoError(t, err)
	aresp, err = r.authenticate(1, []byte("bye"))
	require.NoError(t, err)
	require.Equal(t, kerr.SaslAuthenticationFailed.Code, aresp.ErrorCode)
	require.Equal(t, "Authentication failed during authentication due to invalid credentials with SASL mechanism X-ROBOT", *aresp.ErrorMessage, "not the error's text")
	r = dial()
	_, err = r.handshake(1, "X-ROBOT")
	require.NoError(t, err)
	_, err = r.framedStep([]byte("hello"))
	require.NoError(t, err)
	aresp, err = r.authenticate(1, []byte("human"))
	require.NoError(t, err)
	require.Equal(t, "robots only", *aresp.ErrorMessage)
}

// TestSASLConfig: New refuses what cannot work, naming the field.
func TestSASLConfig(t *testing.T) {
	store := newMemStore(t)
	for name, c := range map[string]*SASLConfig{
		"no mechanisms":                 {Credentials: store},
		"unknown mechanism":             {Mechanisms: []string{"GSSAPI"}, Credentials: store},
		"SCRAM without store":           {Mechanisms: []string{"SCRAM-SHA-256"}},
		"OAUTHBEARER without validator": {Mechanisms: []string{"OAUTHBEARER"}},
		"negative ReauthLimit":          {Mechanisms: []string{"PLAIN"}, Credentials: store, ReauthLimit: -1},
	} {
		_, err := newSASLSetup(c, nil)
		require.Error(t, err, name)
	}
	s, err := newSASLSetup(&SASLConfig{Mechanisms: []string{"PLAIN"}, Credentials: store}, nil)
	require.NoError(t, err)
	require.Equal(t, defaultFailedAuthDelay, s.delay)
}

// TestKeyedEverySecond: one event a second per key.
func TestKeyedEverySecond(t *testing.T) {
	var k keyedEverySecond
	now := time.Unix(1000, 0)
	require.True(t, k.allow("a", now))
	require.False(t, k.allow("a", now.Add(999*time.Millisecond)))
	require.True(t, k.allow("b", now))
	require.True(t, k.allow("a", now.Add(time.Second)))
	for i := range 2 * maxKeyedEvents {
		k.allow(fmt.Sprint(i), now)
	}
	require.LessOrEqual(t, len(k.last), maxKeyedEvents)
}

// FuzzParsePlain: any message parses or errs; what parses holds no NUL.
func FuzzParsePlain(f *testing.F) {
	f.Add([]byte("\x00alice\x00secret"))
	f.Add([]byte("alice\x00alice\x00secret"))
	f.Add([]byte("\x00\x00"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		z, u, p, err := parsePlain(msg)
		if err != nil {
			return
		}
		if u == "" || p == "" || strings.ContainsRune(z+u+p, 0) || len(z)+len(u)+len(p)+2 != len(msg) {
			t.Fatalf("parsed %q into %q %q %q", msg, z, u, p)
		}
	})
}

// FuzzParseOAuthBearer: any client-first message parses or errs; a
// parsed token is a valid bearer token.
func FuzzParseOAuthBearer(f *testing.F) {
	f.Add([]byte("n,,\x01auth=Bearer abc.def.\x01\x01"))
	f.Add([]byte("n,a=alice,\x01auth=bearer  x\x01ext=v a\x01\x01"))
	f.Add([]byte("n,,\x01\x01"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		m, err := parseOAuthBearer(msg)
		if err != nil {
			return
		}
		if m.token == "" || !isOAuthToken(m.token) || !strings.Contains(string(msg), m.token) {
			t.Fatalf("parsed %q into token %q", msg, m.token)
		}
		if _, ok := m.extensions["auth"]; ok {
			t.Fatal("auth among the extensions")
		}
	})
}

// FuzzSCRAMExchange: the SCRAM exchange (xdg-go/scram's parser behind
// our checks) takes any two client messages without panicking, and
// authenticates no one without the password.
func FuzzSCRAMExchange(f *testing.F) {
	f.Add([]byte("n,,n=alice,r=abc"), []byte("c=biws,r=abc,p=AAAA"))
	f.Add([]byte(",,,,"), []byte(",,p="))
	f.Add([]byte("n,,n=alice,r=abc"), []byte("c=biws,r=abc,p="+base64.StdEncoding.EncodeToString(make([]byte, 100))))
	b := newBuiltinAuthenticator([]string{"SCRAM-SHA-256"}, newMemStore(f, "alice"), nil)
	f.Fuzz(func(t *testing.T, first, final []byte) {
		for _, m := range []scram.Mechanism{scram.SHA256, scram.SHA512} {
			x := newSCRAMExchange(b, m)
			if _, err := x.Step(t.Context(), first); err != nil {
				continue
			}
			if res, err := x.Step(t.Context(), final); err == nil && res.Done {
				t.Fatalf("authenticated %q without the password", res.User)
			}
		}
	})
}

// brokenStore fails to look up the user "broken".
type brokenStore struct{ *memStore }

func (s brokenStore) ScramCredential(ctx context.Context, user string, m scram.Mechanism) (scram.Credential, bool, error) {
	if user == "broken" {
		return scram.Credential{}, false, errors.New("the store is down")
	}
	return s.memStore.ScramCredential(ctx, user, m)
}

// TestSASLAudit: failed authentications are logged with the user tried,
// the client, the mechanism and the reason, at most once a second per
// user and reason (info for a client's mistake, warn for a store's
// error, whose text the client is not sent), and counted.
func TestSASLAudit(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	p := startBroker(t, &Config{SASL: saslConfig(brokenStore{newMemStore(t, "alice")}), Logger: zap.New(core)})
	try := func(user, pass string) *kmsg.SASLAuthenticateResponse {
		r := dialSASL(t, p.addr)
		_, err := r.handshake(1, "PLAIN")
		require.NoError(t, err)
		resp, err := r.authenticate(1, []byte("\x00"+user+"\x00"+pass))
		require.NoError(t, err)
		require.Equal(t, kerr.SaslAuthenticationFailed.Code, resp.ErrorCode)
		return resp
	}
	for range 3 {
		try("alice", "guess")
	}
	resp := try("broken", "x")
	require.NotContains(t, *resp.ErrorMessage, "down", "the store's error stays in the log")
	require.Equal(t, int64(4), p.srv.stats.saslFailed.Load())

	failed := logs.FilterMessageSnippet("SASL authentication failed")
	alice := failed.FilterField(zap.String("user", "alice")).All()
	// At most once a second per user and reason: how many lines that
	// makes depends on how long the tries took, so the rate is
	// TestKeyedEverySecond's to check; here, that the line is there.
	require.NotEmpty(t, alice)
	fields := alice[0].ContextMap()
	require.Equal(t, "PLAIN", fields["mechanism"])
	require.Equal(t, plainFailed, fields["reason"])
	require.Contains(t, fields["client"], "127.0.0.1:")
	require.Equal(t, zap.InfoLevel, alice[0].Level)
	broken := failed.FilterField(zap.String("user", "broken")).All()
	require.Len(t, broken, 1)
	require.Equal(t, zap.WarnLevel, broken[0].Level)
	require.Contains(t, broken[0].ContextMap()["error"], "the store is down")
}

// TestPlainCredentials: PLAIN checks the password against the user's
// SCRAM-SHA-512 credential, and against its SCRAM-SHA-256 one only when
// it has no SCRAM-SHA-512 one.
func TestPlainCredentials(t *testing.T) {
	store := &memStore{creds: map[string]scram.Credential{}}
	put := func(user string, m scram.Mechanism, pass string) {
		c, err := scram.New(user, m, pass, 0)
		require.NoError(t, err)
		store.creds[user+"\x00"+m.Name()] = c
	}
	put("only256", scram.SHA256, "p256")
	put("both", scram.SHA256, "old")
	put("both", scram.SHA512, "new")
	b := newBuiltinAuthenticator([]string{"PLAIN"}, store, nil)
	check := func(user, pass string) error {
		x := &plainExchange{b: b}
		res, err := x.Step(t.Context(), []byte("\x00"+user+"\x00"+pass))
		if err == nil {
			require.True(t, res.Done)
			require.Equal(t, user, res.User)
		}
		return err
	}
	require.NoError(t, check("only256", "p256"))
	require.NoError(t, check("both", "new"))
	var ae *AuthenticationError
	require.ErrorAs(t, check("both", "old"), &ae)
	require.Equal(t, plainFailed, ae.Message)
	require.ErrorAs(t, check("nobody", "x"), &ae)
	require.Equal(t, plainFailed, ae.Message, "an unknown user is told what a wrong password is")
}
