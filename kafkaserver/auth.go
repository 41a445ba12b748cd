package kafkaserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless/clock"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/scram"
)

// SASLConfig turns on SASL authentication (Kafka's SASL_PLAINTEXT or,
// with Config.TLS, SASL_SSL listener): a connection may send only
// ApiVersions, SaslHandshake and SaslAuthenticate until it has
// authenticated, and any other request closes it, as Kafka closes it.
// The zero value of each field is the documented default. New reads it;
// changing it after has no effect.
type SASLConfig struct {
	// Mechanisms are the SASL mechanisms enabled (Kafka's
	// sasl.enabled.mechanisms), in the order SaslHandshake lists them:
	// any of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER, or,
	// with Authenticator, any of those it offers. Empty means every
	// mechanism Authenticator offers; without Authenticator it must not
	// be empty.
	Mechanisms []string
	// Credentials holds the users' SCRAM credentials, for SCRAM-SHA-256,
	// SCRAM-SHA-512 and PLAIN (which checks the password against the
	// user's SCRAM-SHA-512 credential, else its SCRAM-SHA-256 one, so
	// that one store serves all three). nil means the Broker's, if it
	// is a CredentialStore; New fails if PLAIN or SCRAM is enabled and
	// there is none.
	Credentials CredentialStore
	// OAuthBearer validates OAUTHBEARER tokens; it must be set if
	// OAUTHBEARER is enabled. UnsecuredJWTValidator is one for tests.
	OAuthBearer OAuthBearerValidator
	// Authenticator, if set, replaces the built-in mechanisms entirely
	// (Credentials and OAuthBearer are then unused): an embedder's own
	// authentication.
	Authenticator Authenticator
	// ReauthLimit is the longest a SASL session lasts before the client
	// must authenticate again on its connection (Kafka's
	// connections.max.reauth.ms, KIP-368): SaslAuthenticate v1 and later
	// tell the client (session_lifetime_ms), and a connection whose
	// session has ended is closed at its next request other than a
	// re-authentication (SaslHandshake, then SaslAuthenticate, the same
	// mechanism and principal). An OAUTHBEARER token's expiry (or an
	// Authenticator's StepResult.Expires) ends the session too, if
	// sooner. 0 means no limit but the token's.
	ReauthLimit time.Duration
	// FailedAuthDelay is how long a failed authentication waits before
	// its answer, after which the connection closes (Kafka's
	// connection.failed.authentication.delay.ms): guessing passwords on
	// new connections is no faster than one guess per delay per
	// connection. 0 means 100 ms, Kafka's default; negative means none.
	FailedAuthDelay time.Duration
}

// CredentialStore looks up users' SCRAM credentials. Implementations
// are safe for concurrent use.
type CredentialStore interface {
	// ScramCredential returns user's credential for mechanism m, and
	// false if the user has none for it. An error fails the
	// authentication under way (it is logged, not told the client).
	ScramCredential(ctx context.Context, user string, m scram.Mechanism) (scram.Credential, bool, error)
}

// OAuthBearerValidator validates an OAUTHBEARER token (RFC 7628) and
// returns the principal's name (the connection's principal is "User:"
// and it) and when the token expires (zero: never; the session ends
// then, as ReauthLimit describes). An error fails the authentication:
// the client is sent {"status":"invalid_token"}, as Kafka sends it. It
// must be safe for concurrent use.
type OAuthBearerValidator func(ctx context.Context, token string) (principal string, expires time.Time, err error)

// Authenticator is an embedder's SASL authentication, in place of the
// built-in mechanisms (SASLConfig.Authenticator). It must be safe for
// concurrent use.
type Authenticator interface {
	// Mechanisms returns the SASL mechanism names it offers.
	Mechanisms() []string
	// Start begins the exchange of one authentication of a connection
	// with one of its mechanisms, after the client's SaslHandshake. An
	// error closes the connection.
	Start(ctx context.Context, mechanism string, client ClientInfo) (Exchange, error)
}

// ClientInfo describes the connection an Authenticator authenticates;
// the callee must not change it.
type ClientInfo struct {
	// Addr is the client's address, HOST:PORT.
	Addr string
	// TLS is the connection's TLS state, nil on a plaintext listener.
	TLS *tls.ConnectionState
}

// Exchange is one SASL authentication of a connection: the client's
// tokens, each stepped to the server's answer, until it is done. It is
// used by one goroutine at a time.
type Exchange interface {
	// Step takes the client's next token and returns the server's
	// answer. An error fails the authentication: the client is sent
	// SASL_AUTHENTICATION_FAILED with the Message of an
	// *AuthenticationError, or a generic message for any other error
	// (which is logged, as the cause of either is), and the connection
	// closes.
	Step(ctx context.Context, token []byte) (StepResult, error)
}

// StepResult is the server's answer to a client's SASL token; the server
// does not change its Response.
type StepResult struct {
	// Response is the token sent back to the client (may be empty).
	Response []byte
	// Done says the client has authenticated, as User.
	Done bool
	// User is the authenticated user's name, when Done: the
	// connection's principal is "User:" and it.
	User string
	// Expires, when Done and not zero, is when the credential expires:
	// the session ends then, as SASLConfig.ReauthLimit describes.
	Expires time.Time
}

// AuthenticationError fails a SASL authentication with a message the
// client is sent (Exchange.Step returns it). It is a value, safe to
// share once made.
type AuthenticationError struct {
	// User is the user name the client tried, "" if unknown; it is
	// logged.
	User string
	// Message is sent to the client (SaslAuthenticate's error_message);
	// it must not tell more than the client may know (not whether the
	// user exists).
	Message string
	// Err is the cause, logged and never sent; it may be nil.
	Err error
}

// Error returns the message and the cause.
func (e *AuthenticationError) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

// Unwrap returns the cause.
func (e *AuthenticationError) Unwrap() error { return e.Err }

// lookupError fails an authentication because a credential could not
// be looked up: not the client's mistake, so it is logged at warn, with
// the user; the client is sent the generic message.
type lookupError struct {
	user string
	err  error
}

func (e *lookupError) Error() string {
	return fmt.Sprintf("looking up the credential of %q: %v", e.user, e.err)
}

func (e *lookupError) Unwrap() error { return e.err }

// Bounds and defaults of SASL, Kafka's.
const (
	// maxSASLFrame bounds a frame read before authentication, an
	// unframed SASL token, and any frame of a re-authentication (Kafka's
	// sasl.server.max.receive.size): larger closes the connection.
	maxSASLFrame = 512 << 10
	// defaultFailedAuthDelay is SASLConfig.FailedAuthDelay's default.
	defaultFailedAuthDelay = 100 * time.Millisecond
)

// saslSetup is a SASLConfig as New checked it: the server's.
type saslSetup struct {
	authn      Authenticator
	mechanisms []string
	reauth     time.Duration
	delay      time.Duration // 0: none
}

// newSASLSetup checks cfg; broker is the Broker, the default store of
// credentials if it has one.
func newSASLSetup(cfg *SASLConfig, broker any) (*saslSetup, error) {
	s := &saslSetup{reauth: cfg.ReauthLimit, mechanisms: slices.Clone(cfg.Mechanisms)}
	switch {
	case cfg.ReauthLimit < 0:
		return nil, fmt.Errorf("kafkaserver: SASLConfig.ReauthLimit %v is negative", cfg.ReauthLimit)
	case cfg.FailedAuthDelay == 0:
		s.delay = defaultFailedAuthDelay
	case cfg.FailedAuthDelay > 0:
		s.delay = cfg.FailedAuthDelay
	}
	if cfg.Authenticator != nil {
		offered := cfg.Authenticator.Mechanisms()
		if len(s.mechanisms) == 0 {
			s.mechanisms = slices.Clone(offered)
		}
		for _, m := range s.mechanisms {
			if !slices.Contains(offered, m) {
				return nil, fmt.Errorf("kafkaserver: SASLConfig.Mechanisms: %q is not one the Authenticator offers", m)
			}
		}
		if len(s.mechanisms) == 0 {
			return nil, errors.New("kafkaserver: SASLConfig.Authenticator offers no mechanism")
		}
		s.authn = cfg.Authenticator
		return s, nil
	}
	if len(s.mechanisms) == 0 {
		return nil, errors.New("kafkaserver: SASLConfig.Mechanisms is empty")
	}
	store := cfg.Credentials
	if store == nil {
		if cs, ok := broker.(CredentialStore); ok {
			store = cs
		}
	}
	for _, m := range s.mechanisms {
		switch m {
		case mechPlain, mechSCRAM256, mechSCRAM512:
			if store == nil {
				return nil, fmt.Errorf("kafkaserver: SASL mechanism %s needs SASLConfig.Credentials", m)
			}
		case mechOAuthBearer:
			if cfg.OAuthBearer == nil {
				return nil, errors.New("kafkaserver: SASL mechanism OAUTHBEARER needs SASLConfig.OAuthBearer")
			}
		default:
			return nil, fmt.Errorf("kafkaserver: SASLConfig.Mechanisms: %q is not PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER", m)
		}
	}
	s.authn = newBuiltinAuthenticator(s.mechanisms, store, cfg.OAuthBearer)
	return s, nil
}

// authState is a connection's authentication: its TLS principal, and
// its SASL exchange and session. The reader checks it before each
// request it dispatches (conn.admit) and waits for each SASL request to
// be answered before it reads on, so the handlers' changes are seen by
// the next read; the mutex is for principal, which any handler reads.
type authState struct {
	mu        sync.Mutex
	tls       string    // "User:" and the client certificate's subject; "" if none
	user      string    // the authenticated SASL user; "" until authenticated
	mechanism string    // the mechanism of the last handshake
	exchange  Exchange  // the exchange under way after a handshake; nil if none
	framed    bool      // the handshake was v1 or later: tokens come in SaslAuthenticate requests
	expires   time.Time // when the SASL session ends; zero if never
	failed    bool      // an authentication failed: the connection closes
}

func (a *authState) setTLSPrincipal(p string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tls = p
}

// principal returns the connection's principal, as authorization sees
// it: "User:" and the SASL user once the client has authenticated (over
// TLS too), else the TLS principal of a client certificate
// ("User:CN=alice,OU=eng,O=acme"), else "User:ANONYMOUS". On a SASL
// listener no request but ApiVersions, SaslHandshake and
// SaslAuthenticate is handled before authentication.
func (c *conn) principal() string {
	a := &c.auth
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.user != "":
		return "User:" + a.user
	case a.tls != "":
		return a.tls
	}
	return Anonymous
}

// isSASLRequest reports whether r is SaslHandshake or SaslAuthenticate:
// the reader waits for its answer before it reads on.
func isSASLRequest(r *request) bool {
	switch r.kreq.(type) {
	case *kmsg.SASLHandshakeRequest, *kmsg.SASLAuthenticateRequest:
		return true
	}
	return false
}

// admit decides whether the connection may send r: an error closes it.
// With SASL on, a connection that has not authenticated may send only
// ApiVersions and SaslHandshake, and after SaslHandshake v1 only
// SaslAuthenticate until the exchange is done, as Kafka allows; one
// whose session expired may send only SaslHandshake (to authenticate
// again).
func (c *conn) admit(r *request) error {
	if c.s.cfg.SASL == nil {
		return nil
	}
	a := &c.auth
	a.mu.Lock()
	defer a.mu.Unlock()
	key := r.kreq.Key()
	switch {
	case a.exchange != nil:
		if !r.raw && key != int16(kmsg.SASLAuthenticate) {
			return fmt.Errorf("a %s request during SASL authentication", kmsg.NameForKey(key))
		}
	case a.user == "":
		if key != apiVersionsKey && key != int16(kmsg.SASLHandshake) {
			return fmt.Errorf("a %s request before SASL authentication", kmsg.NameForKey(key))
		}
	case !a.expires.IsZero() && !c.s.clock.Now().Before(a.expires) && key != int16(kmsg.SASLHandshake):
		c.s.stats.saslExpired.Add(1)
		return fmt.Errorf("a %s request after the SASL session of %s expired", kmsg.NameForKey(key), "User:"+a.user)
	}
	return nil
}

// authenticating reports whether the next frame is bounded by
// maxSASLFrame (before authentication, or during an exchange), and
// whether it is an unframed SASL token (after SaslHandshake v0).
func (c *conn) authenticating() (bounded, raw bool) {
	if c.s.cfg.SASL == nil {
		return false, false
	}
	a := &c.auth
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.user == "" || a.exchange != nil, a.exchange != nil && !a.framed
}

// stepped is called by the reader once a SASL request's answer is
// ready, and reports whether the connection goes on: not after a failed
// authentication.
func (c *conn) stepped() bool {
	a := &c.auth
	a.mu.Lock()
	defer a.mu.Unlock()
	return !a.failed
}

// readToken reads the rest of an unframed SASL token of n bytes, whose
// size has been read: Kafka's SASL exchange after SaslHandshake v0,
// which the client sends as a 4-byte length and the raw token, and
// which is answered the same way. It is passed on as a
// SaslAuthenticate request marked raw.
func (c *conn) readToken(n int32) (*request, error) {
	if err := checkTokenSize(n); err != nil {
		return nil, err
	}
	body, w, err := c.readBudgeted(n)
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.SASLAuthBytes = body
	return &request{kreq: req, size: w, raw: true}, nil
}

// checkTokenSize checks the size of an unframed SASL token.
func checkTokenSize(n int32) error {
	if n < 0 || n > maxSASLFrame {
		return fmt.Errorf("an unframed SASL token of %d bytes (at most %d)", n, maxSASLFrame)
	}
	return nil
}

// appendRawToken appends an unframed SASL token: its size and bytes.
func appendRawToken(dst []byte, resp kmsg.Response) []byte {
	var tok []byte
	if r, ok := resp.(*kmsg.SASLAuthenticateResponse); ok {
		tok = r.SASLAuthBytes
	}
	dst = append(dst, byte(len(tok)>>24), byte(len(tok)>>16), byte(len(tok)>>8), byte(len(tok)))
	return append(dst, tok...)
}

// saslHandshake answers SaslHandshake: it starts an exchange of the
// mechanism asked for, or refuses one not enabled with
// UNSUPPORTED_SASL_MECHANISM (after FailedAuthDelay; the connection
// then closes). On a connection that has authenticated it begins a
// re-authentication, which must use the same mechanism. Without SASL it
// answers ILLEGAL_SASL_STATE, as Kafka does on a listener without SASL.
func (c *conn) saslHandshake(req *kmsg.SASLHandshakeRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	setup := c.s.cfg.SASL
	if setup == nil {
		resp.ErrorCode = int16(kafkaerr.IllegalSaslState)
		return resp, nil
	}
	resp.SupportedMechanisms = setup.mechanisms
	if !slices.Contains(setup.mechanisms, req.Mechanism) {
		c.failed(req.Mechanism, &AuthenticationError{Message: "unsupported SASL mechanism " + req.Mechanism})
		resp.ErrorCode = int16(kafkaerr.UnsupportedSaslMechanism)
		return resp, nil
	}
	a := &c.auth
	a.mu.Lock()
	reauth, previous := a.user != "", a.mechanism
	a.mu.Unlock()
	var x Exchange
	if reauth && previous != req.Mechanism {
		x = failingExchange{&AuthenticationError{Message: fmt.Sprintf("SASL mechanism '%s' requested by client is not supported for re-authentication of mechanism '%s'", req.Mechanism, previous)}}
	} else {
		info := ClientInfo{Addr: c.remote}
		if tc, ok := c.nc.(*tls.Conn); ok {
			st := tc.ConnectionState()
			info.TLS = &st
		}
		var err error
		if x, err = setup.authn.Start(c.s.ctx, req.Mechanism, info); err != nil {
			return nil, fmt.Errorf("starting SASL %s: %w", req.Mechanism, err)
		}
	}
	a.mu.Lock()
	a.mechanism, a.exchange, a.framed = req.Mechanism, x, req.Version >= 1
	a.mu.Unlock()
	return resp, nil
}

// failingExchange fails at its first step.
type failingExchange struct{ err error }

func (f failingExchange) Step(context.Context, []byte) (StepResult, error) {
	return StepResult{}, f.err
}

// saslAuthenticate steps the connection's exchange with the client's
// token, from a SaslAuthenticate request or (raw) unframed. A failed
// step is answered SASL_AUTHENTICATION_FAILED (an unframed one is not
// answered) after FailedAuthDelay, and the connection closes. The last
// step sets the connection's user and its session's end, which
// SaslAuthenticate v1 and later tell the client; a re-authentication
// may not change the user. Without an exchange under way (no SASL, or
// an authenticated connection without a new handshake) it answers
// ILLEGAL_SASL_STATE, as Kafka does.
func (c *conn) saslAuthenticate(r *request, req *kmsg.SASLAuthenticateRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	a := &c.auth
	a.mu.Lock()
	x, mechanism, previous := a.exchange, a.mechanism, a.user
	a.mu.Unlock()
	if x == nil {
		resp.ErrorCode = int16(kafkaerr.IllegalSaslState)
		resp.ErrorMessage = kmsg.StringPtr("SaslAuthenticate request received after successful authentication")
		return resp, nil
	}
	fail := func(err error) (kmsg.Response, error) {
		msg := c.failed(mechanism, err)
		if r.raw {
			return nil, nil // Kafka answers nothing; the reader closes the connection
		}
		resp.ErrorCode, resp.ErrorMessage = int16(kafkaerr.SaslAuthenticationFailed), &msg
		return resp, nil
	}
	res, err := x.Step(c.s.ctx, req.SASLAuthBytes)
	if err != nil {
		return fail(err)
	}
	resp.SASLAuthBytes = res.Response
	if resp.SASLAuthBytes == nil {
		resp.SASLAuthBytes = []byte{}
	}
	if !res.Done {
		return resp, nil
	}
	if res.User == "" {
		return fail(errors.New("the exchange named no user"))
	}
	if previous != "" && res.User != previous {
		return fail(&AuthenticationError{User: res.User, Message: fmt.Sprintf("Cannot change principals during re-authentication from User:%s: User:%s", previous, res.User)})
	}
	now := c.s.clock.Now()
	lifetime := c.s.cfg.SASL.reauth
	if !res.Expires.IsZero() {
		if left := max(res.Expires.Sub(now), 0); lifetime == 0 || left < lifetime {
			lifetime = max(left, time.Millisecond)
		}
	}
	a.mu.Lock()
	a.user, a.exchange = res.User, nil
	a.expires = time.Time{}
	if lifetime > 0 {
		a.expires = now.Add(lifetime)
		resp.SessionLifetimeMillis = max(lifetime.Milliseconds(), 1)
	}
	a.mu.Unlock()
	c.s.stats.saslOK.Add(1)
	if previous != "" {
		c.s.stats.saslReauth.Add(1)
	}
	if ce := c.s.log.Check(zap.DebugLevel, "authenticated"); ce != nil {
		ce.Write(zap.String("client", c.remote), zap.String("principal", "User:"+res.User), zap.String("mechanism", mechanism), zap.Bool("reauthentication", previous != ""), zap.Duration("session", lifetime))
	}
	return resp, nil
}

// failed records a failed authentication: it counts it, logs it (at
// most once a second per user and reason), waits FailedAuthDelay (or
// until Close), marks the connection to close, and returns the message
// the client is sent.
func (c *conn) failed(mechanism string, err error) string {
	msg := "Authentication failed during authentication due to invalid credentials with SASL mechanism " + mechanism
	var user string
	var ae *AuthenticationError
	var le *lookupError
	switch {
	case errors.As(err, &ae):
		msg, user = ae.Message, ae.User
	case errors.As(err, &le):
		user = le.user
	}
	failures := c.s.stats.saslFailed.Add(1)
	if c.s.stats.saslFailedLogs.allow(user+"\x00"+mechanism+"\x00"+msg, c.s.clock.Now()) {
		level := zap.InfoLevel
		if ae == nil {
			level = zap.WarnLevel // not a client's mistake: a store's error, an Authenticator's other errors
		}
		c.s.log.Log(level, "a SASL authentication failed (logged at most once a second per user and reason)",
			zap.String("user", user), zap.String("client", c.remote), zap.String("mechanism", mechanism),
			zap.String("reason", msg), zap.Error(err), zap.Int64("failed", failures))
	}
	a := &c.auth
	a.mu.Lock()
	a.failed, a.exchange = true, nil
	a.mu.Unlock()
	if d := c.s.cfg.SASL.delay; d > 0 {
		_ = clock.Sleep(c.s.ctx, c.s.clock, d) // ends early when the server closes
	}
	return msg
}

// keyedEverySecond lets an event of each key through at most once a
// second, remembering at most maxKeyedEvents keys (past that it forgets
// those older than a second, or all). It is safe for concurrent use;
// the zero value is ready.
type keyedEverySecond struct {
	mu   sync.Mutex
	last map[string]time.Time
}

const maxKeyedEvents = 4096

// allow reports whether the event of key at now is let through.
func (k *keyedEverySecond) allow(key string, now time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if t, ok := k.last[key]; ok && now.Sub(t) < time.Second && now.Sub(t) >= 0 {
		return false
	}
	if len(k.last) >= maxKeyedEvents {
		for key, t := range k.last {
			if now.Sub(t) >= time.Second {
				delete(k.last, key)
			}
		}
		if len(k.last) >= maxKeyedEvents {
			clear(k.last)
		}
	}
	if k.last == nil {
		k.last = map[string]time.Time{}
	}
	k.last[key] = now
	return true
}
